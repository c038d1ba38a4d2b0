"""Item 9: a tool whose input schema cannot validate arguments never crashes a call.

The real MCP test server advertises ``broken_ref``, whose schema has a ``$ref``
to a definition that does not exist (``check_schema`` accepts it; validating
against it raises). That tool is refused at registration with one line, the
server's other tools load, and a model calling it gets a structured error.
Locally built tools with such a schema get an ``invalid_schema`` result when
called. A hypothesis fuzz over random schemas and arguments checks that
``Registry.call`` returns a result for everything and raises nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from repl.config.load import load_settings
from repl.loop.agent import Limits, run_turn
from repl.loop.approval import Approver
from repl.loop.events import EventLog, ToolCallFinished
from repl.loop.history import History, check
from repl.session.runtime import build_registry, start_mcp
from tests.fakeserver import FakeServer, call, text, tool_calls
from tests.reliability.helpers import record, scaled
from tests.scripted_provider import ScriptedProvider
from tests.support import glassloop_here
from tools.registry import Registry, Tool

pytestmark = pytest.mark.timeout(120)
TEST_SERVER = Path(__file__).resolve().parents[1] / "mcp_test_server.py"
DANGLING = {"type": "object", "properties": {"value": {"$ref": "#/$defs/Missing"}}, "required": ["value"]}
FUZZ_EXAMPLES = scaled(3000, 300)


def mcp_config(path: Path) -> Path:
    path.write_text(
        "[mcp]\nstartup_timeout_s = 30\n"  # listed before the first call, however loaded
        "[mcp.servers.t]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(TEST_SERVER))}]\n"
        'env = { MCP_TEST_BROKEN_SCHEMA = "1" }\n', encoding="utf-8")
    return path


def echo(**arguments: Any) -> dict[str, Any]:
    return arguments


# ---- the real MCP server ---------------------------------------------------------------

def test_mcp_tool_with_a_dangling_ref_is_refused_and_the_others_load(scripted: ScriptedProvider, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    settings = load_settings(cwd=tmp_path, env={}, config_file=mcp_config(tmp_path / "glassloop.toml"))
    registry = build_registry(settings)
    notices: list[str] = []
    manager = start_mcp(settings, registry, notices.append)
    try:
        assert manager.wait_ready(30)
        assert len(notices) == 1 and "\n" not in notices[0], notices
        assert "t__broken_ref" in notices[0] and "#/$defs/Missing" in notices[0]
        assert "t__broken_ref" not in registry.names() and "t__lookup" in registry.names()
        # a model that calls it anyway gets a structured error; the other tool still works
        scripted.script(tool_calls(call("t__broken_ref", {"value": "x"}), call("t__lookup", {"country": "France"})),
                        text("done"))
        log = EventLog()
        history = History("test")
        finished = run_turn(history, "go", provider=scripted, registry=registry, approver=Approver("auto"),
                            limits=Limits(), emit=log)
        results = {e.name: e for e in log.events if isinstance(e, ToolCallFinished)}
        assert results["t__broken_ref"].error_type == "unknown_tool"
        assert results["t__lookup"].ok and "Paris" in json.dumps(results["t__lookup"].result)
        assert finished.stopped_by == "answer" and check(history.messages) == []
        assert scripted.history_errors == []
    finally:
        manager.close()


def test_glassloop_ask_survives_a_model_calling_the_broken_tool(fake_server: FakeServer, home,
                                                                tmp_path: Path) -> None:
    fake_server.script(tool_calls(call("t__broken_ref", {"value": "x"})), text("the tool is not there"))
    result = glassloop_here("ask", "use broken_ref", "--config", str(mcp_config(tmp_path / "mcp.toml")),
                            "--base-url", fake_server.base_url, env=home)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0 and "the tool is not there" in result.stdout
    lines = [line for line in result.stderr.splitlines() if "broken_ref" in line and "$ref" in line]
    assert len(lines) == 1, result.stderr
    assert fake_server.history_errors == []


# ---- the registry itself ---------------------------------------------------------------------

def test_registry_refuses_a_broken_schema_on_add_and_reports_it_on_call() -> None:
    registry = Registry([Tool("local_broken", "", DANGLING, echo)])  # built in code: checked on first call
    for _ in range(2):  # the problem is remembered, not raised the second time either
        result = registry.call("local_broken", {"value": "x"})
        assert result["ok"] is False and result["error"]["type"] == "invalid_schema"
        assert "#/$defs/Missing" in result["error"]["message"]
    args, error = registry.parse_arguments("local_broken", '{"value": 1}')  # the approval path
    assert args is None and error["error"]["type"] == "invalid_schema"

    refused = registry.add([Tool("s__bad", "", DANGLING, echo), Tool("s__remote", "", {"$ref": "http://x.test/s"}, echo),
                            Tool("s__loop", "", {"$ref": "#"}, echo),
                            Tool("s__ok", "", {"type": "object", "properties": {"v": {"$ref": "#/$defs/V"}},
                                                "$defs": {"V": {"type": "string"}}}, echo)])
    assert [line.split(":")[0] for line in refused] == ["tool s__bad not loaded", "tool s__remote not loaded",
                                                         "tool s__loop not loaded"]
    assert "s__ok" in registry.names() and "s__bad" not in registry.names()
    assert registry.call("s__ok", {"v": "x"}) == {"ok": True, "v": "x"}
    assert registry.call("s__ok", {"v": 1})["error"]["type"] == "invalid_arguments"


def test_call_catches_even_a_tool_that_exits() -> None:
    def leave(**_: Any) -> None:
        raise SystemExit(3)

    result = Registry([Tool("leave", "", {"type": "object"}, leave)]).call("leave", {})
    assert result["ok"] is False and result["error"]["type"] == "internal_error"


# ---- fuzz: random schemas and arguments --------------------------------------------------------

KEYWORDS = ["type", "properties", "items", "$ref", "$defs", "definitions", "required", "enum", "const",
            "pattern", "patternProperties", "additionalProperties", "anyOf", "allOf", "oneOf", "not",
            "minimum", "maxLength", "format", "$id", "$anchor", "$dynamicRef", "$dynamicAnchor", "if",
            "then", "else", "dependentSchemas", "prefixItems", "contains", "uniqueItems", "v", "w"]
REFS = ["#", "#/$defs/a", "#/$defs/missing", "#/properties/v", "#/definitions/a", "#a", "#/items/0",
        "http://example.invalid/s.json", "a.json", "urn:x", "#/$defs/a/properties/v", "%25", "#/~1"]
scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True)
           | st.sampled_from(REFS + ["object", "string", "integer", "array", "null", "[", "(?P<x", "email"])
           | st.text(max_size=8))
schemas = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.sampled_from(KEYWORDS), inner, max_size=5), max_leaves=25)
arguments = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
                         lambda inner: st.lists(inner, max_size=3)
                         | st.dictionaries(st.sampled_from(["v", "w", "value", ""]), inner, max_size=3),
                         max_leaves=10)
raw_texts = st.text(max_size=30) | st.sampled_from(["{", "null", "[1]", '{"v": 1e999}', "{" * 2000, "```json\n{}\n```"])


def test_fuzz_call_never_raises() -> None:
    seen: dict[str, int] = {}  # result kinds, written to the report by this test once the examples ran

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(schema=schemas, args=arguments | raw_texts)
    def one_example(schema: Any, args: Any) -> None:
        built = Registry([Tool("t", "", schema, echo)])  # bypasses @tool's check, as a buggy loader could
        added = Registry([])
        refused = added.add([Tool("t", "", schema, echo)])
        for registry in (built, added):
            result = registry.call("t", args)
            assert isinstance(result, dict) and isinstance(result.get("ok"), bool)
            json.dumps(result)  # the model gets it as JSON text
            kind = "ok" if result["ok"] else result["error"]["type"]
            seen[kind] = seen.get(kind, 0) + 1
            assert kind != "internal_error", result  # the last resort holds, but reaching it is a bug
        assert not refused or "t" not in added.names()

    one_example()
    record("broken_schema", fuzz_examples=FUZZ_EXAMPLES, results=dict(sorted(seen.items())))
