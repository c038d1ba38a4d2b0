"""Each setting is declared once, in ``repl/config/settings.py``, and documented once, in ``config.toml``.

The proof is the change a newcomer would make: a copy of the program gets one new
guard (one field in ``Limits`` with its check, its reason among ``GuardReason``'s,
and its default in ``config.toml``, nothing else), and the schema, the checks,
``glassloop config``, the environment and flag maps, the command's options, the
project-file trust rules and the agent loop all know it: a turn through the real
loop stops on it. The other tests hold the declarations and the documented file
together, key for key.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from repl.config import schema as config_schema
from repl.config.schema import ENV_KEYS, SCHEMA, Spec, declared
from repl.config.settings import EMBEDDED_PROFILES, HookSettings, Limits, ProviderSettings, Settings
from tests.fakeserver import FakeServer, call, text, tool_calls

ROOT = Path(__file__).resolve().parent.parent.parent
DOCUMENTED = tomllib.loads((ROOT / "config.toml").read_text(encoding="utf-8"))

# The whole change that adds a guard: one field with its check, its reason, one documented default.
FIELD_AFTER = "    session_budget_tokens: int = guard(0, zero_is_no_limit=True)\n"
NEW_FIELD = ('    max_tool_calls: int = guard(32, minimum=1, env="GLASSLOOP_MAX_TOOL_CALLS", flag="max_tool_calls",\n'
             '                                cli="Most tool calls per turn.",\n'
             '                                bound=Bound("tool_calls", "max_tool_calls", "made {used} of {limit} tool calls"))\n')
REASONS = 'GuardReason = Literal["max_steps", "budget", "repeat", "timeout"'
NEW_REASON = ', "max_tool_calls"'
TOML_AFTER = "session_budget_tokens = 0    # ... or used this many tokens (input + output); 0 = no limit\n"
NEW_TOML = "max_tool_calls = 32          # tool calls per turn, at most (GLASSLOOP_MAX_TOOL_CALLS, --max-tool-calls)\n"

PROBE = r"""
import json, os, sys
from pathlib import Path
from typer.testing import CliRunner
from repl.config import schema as config_schema
from repl.cli import app
from repl.config.load import load_settings
from repl.config.show import describe
from repl.config.settings import Limits

work = Path(sys.argv[1])
(work / "glassloop.toml").write_text("[guards]\nmax_tool_calls = 8\n", encoding="utf-8")
tight = load_settings(cwd=work, env={})
(work / "glassloop.toml").write_text("[guards]\nmax_tool_calls = 99\n", encoding="utf-8")
loose = load_settings(cwd=work, env={})
os.remove(work / "glassloop.toml")
by_env = load_settings(cwd=work, env={"GLASSLOOP_MAX_TOOL_CALLS": "5"})
by_flag = load_settings({"max_tool_calls": 7}, cwd=work, env={})
(work / "glassloop.toml").write_text("[guards]\nmax_tool_calls = 0\n", encoding="utf-8")
try:
    load_settings(cwd=work, env={})
    refused = ""
except Exception as exc:
    refused = str(exc)
os.remove(work / "glassloop.toml")
runner = CliRunner()
print(json.dumps({
    "limits": Limits().max_tool_calls,
    "schema": config_schema.SCHEMA["guards"]["max_tool_calls"].kind,
    "env": config_schema.ENV_KEYS.get("GLASSLOOP_MAX_TOOL_CALLS"),
    "flag": config_schema.FLAG_KEYS.get("max_tool_calls"),
    "default": [load_settings(cwd=work, env={}).guards.max_tool_calls],
    "rows": [r for r in describe(by_env) if r[0] == "guards.max_tool_calls"],
    "flag_source": by_flag.sources["guards.max_tool_calls"], "flag_value": by_flag.guards.max_tool_calls,
    "tightened": tight.guards.max_tool_calls, "loosened": loose.guards.max_tool_calls,
    "ignored": sorted(loose.project.ignored), "refused": refused,
    "help": runner.invoke(app, ["ask", "--help"], env={"COLUMNS": "200"}).output,
    "config": runner.invoke(app, ["config", "--max-tool-calls", "3"], env={"COLUMNS": "200"}).output,
}))
"""


def _copy_with_new_guard(tmp: Path) -> Path:
    copy = tmp / "copy"
    for part in ("repl", "tools"):
        shutil.copytree(ROOT / part, copy / part, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "config.toml", copy / "config.toml")
    shutil.copy2(ROOT / "glassloop_tools.py", copy / "glassloop_tools.py")
    settings = copy / "repl" / "config" / "settings.py"
    for path, after, new in ((settings, FIELD_AFTER, NEW_FIELD), (settings, REASONS, NEW_REASON),
                             (copy / "config.toml", TOML_AFTER, NEW_TOML)):
        text = path.read_text(encoding="utf-8")
        assert text.count(after) == 1, f"{path.name} changed: update the anchor of the hypothetical guard"
        path.write_text(text.replace(after, after + new), encoding="utf-8")
    return copy


def test_a_new_guard_is_one_field_and_one_documented_default(tmp_path: Path) -> None:
    copy = _copy_with_new_guard(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GLASSLOOP_", "OPENAI_"))}
    env |= {f"XDG_{d}_HOME": str(tmp_path / d.lower()) for d in ("CONFIG", "DATA", "STATE", "CACHE")}
    env["PYTHONPATH"] = str(copy)
    done = subprocess.run([sys.executable, "-c", PROBE, str(work)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["limits"] == 32 and seen["schema"] == "int"  # the guards type and the TOML schema
    assert seen["default"] == [32]  # read from the documented file
    assert seen["env"] == "guards.max_tool_calls" and seen["flag"] == "guards.max_tool_calls"
    assert seen["rows"] == [["guards.max_tool_calls", "5", "env GLASSLOOP_MAX_TOOL_CALLS"]]  # glassloop config
    assert (seen["flag_value"], seen["flag_source"]) == (7, "flag --max-tool-calls")
    assert "--max-tool-calls" in seen["help"] and "Most tool calls per turn." in seen["help"]  # the CLI option
    assert re.search(r"guards\.max_tool_calls\s+3\s+flag --max-tool-calls", seen["config"]), seen["config"]
    assert "guards.max_tool_calls: expected an integer >= 1, got 0" in seen["refused"]  # the check
    # trust: an untrusted project file may tighten a guard, not loosen it
    assert seen["tightened"] == 8 and seen["loosened"] == 32 and seen["ignored"] == ["guards.max_tool_calls"]


def test_a_new_guard_stops_a_turn(tmp_path: Path, fake_server: FakeServer, home: dict[str, str]) -> None:
    """The copy's ``glassloop ask`` through the real loop: two tool calls reach the new guard's limit
    (set by its flag), the turn stops for its reason and a last call without tools answers."""
    copy = _copy_with_new_guard(tmp_path)
    fake_server.script(tool_calls(call("list_todos", {"status": "todo"})),
                       tool_calls(call("get_todo", {"todo_id": "todo-002"})),
                       text("Two todos are open; the weekly report comes first."))
    done = subprocess.run([sys.executable, "-m", "repl.cli", "ask", "what is open?", "--json",
                           "--max-tool-calls", "2", "--base-url", fake_server.base_url],
                          cwd=tmp_path, env={**home, "PYTHONPATH": str(copy)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert (seen["stopped_by"], seen["steps"]) == ("max_tool_calls", 3)
    assert seen["answer"] == "Two todos are open; the weekly report comes first."
    tripped = [(e["guard"], e["detail"]) for e in seen["trace"] if e["type"] == "guard_tripped"]
    assert tripped == [("max_tool_calls", "made 2 of 2 tool calls")]
    final = fake_server.requests[-1].body
    assert "tools" not in final and "made 2 of 2 tool calls" in final["messages"][-1]["content"]
    assert len(fake_server.requests) == 3 and fake_server.unscripted == 0


def _documented_keys(table: dict, prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for key, value in table.items():
        if prefix + key in ("providers", "pricing", "mcp.servers"):
            continue  # named tables: their keys are checked below
        keys |= _documented_keys(value, f"{prefix}{key}.") if isinstance(value, dict) else {prefix + key}
    return keys


def _declared_keys(node: dict, prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for key, sub in node.items():
        if isinstance(sub, Spec):
            keys.add(prefix + key)
        elif isinstance(sub, dict):
            keys |= _declared_keys(sub, f"{prefix}{key}.")
    return keys


def test_every_declared_key_is_documented_and_every_documented_key_declared() -> None:
    assert _declared_keys(SCHEMA) == _documented_keys(DOCUMENTED)
    profile = set(SCHEMA["providers"].schema)
    assert set(DOCUMENTED["providers"]["local"]) == profile
    for name, table in DOCUMENTED["providers"].items():
        local_only = {k for k, s in SCHEMA["providers"].schema.items() if s.meta.local_only}
        assert set(table) == profile - (set() if name in EMBEDDED_PROFILES else local_only), name


def test_the_field_defaults_are_the_documented_defaults() -> None:
    assert Limits(**DOCUMENTED["guards"]) == Limits()
    assert HookSettings(**DOCUMENTED["hooks"]) == HookSettings()  # no hook runs unless you add one
    for f, meta in declared(Settings):
        key = meta.key or f.name
        if meta.empty or key == "provider" or config_schema.spec_at(key) is None:
            continue  # paths ("" = a folder of the user's), "auto", tables
        section, _, name = key.rpartition(".")
        value = (DOCUMENTED[section] if section else DOCUMENTED)[name]
        assert value == f.default, key
    # a profile's fallbacks are the ones its comments document: "(fallback X)"
    text = (ROOT / "config.toml").read_text(encoding="utf-8")
    openai = text[text.index("[providers.openai]"):text.index("[providers.deepseek]")]
    documented = dict(re.findall(r"^(\w+) = .*\(fallback ([^)]*)\)$", openai, re.MULTILINE))
    local = text[text.index("[providers.local]"):text.index("[pricing.")]
    documented |= dict(re.findall(r"^(\w+) = .*\(fallback ([^)]*)\)$", local, re.MULTILINE))
    fallbacks = {f.name: f.default for f in dataclasses.fields(ProviderSettings) if "setting" in f.metadata}
    assert set(documented) == set(fallbacks)
    for name, shown in documented.items():
        assert tomllib.loads(f"v = {shown}")["v"] == fallbacks[name], name


def test_every_environment_variable_is_documented() -> None:
    text = (ROOT / "config.toml").read_text(encoding="utf-8")
    assert [var for var in ENV_KEYS if var not in text] == []
