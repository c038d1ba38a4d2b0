"""The embedded model on requests nobody tuned for: ``python -m bench.local_eval --cases heldout``.

Runs a case file of ``glassloop eval``'s format (``bench/cases/local_dev.toml``,
``local_heldout.toml``: ``[[case]] message/tool/args/lang``) on the embedded model through the
session core, as a user's session has it: the built-in tools over a small fixture (todos,
notes, files, sample weather), the user tools of ``bench/cases/local_tools.py`` and the MCP
server ``mcp-server-time`` as "clock". One core, one model server for every case; each case
starts from a fresh history; side effects are dry-run.

A tool case is right when the first step calls the expected tool with arguments valid for its
schema, each of the case's ``args`` equal, and no optional argument the message does not give
(``faithful``: a due date, a tag or a detail the user never said). A control is right when it
is answered in text without a call. Answers are checked for the question's language and for
echoes (an answer that repeats the user's message). On the held-out half the progress lines give
only each case's number and seconds, so a run does not show its requests and answers: read its
figures, not its cases.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import ROOT, VENV_BIN, isolated_env, patched_environ, scratch
from bench.tool_use import in_language, load
from repl.embedded.dialect import flat, repeats
from repl.ui.plain import Unattended
from tools.mcp_convert import tool_name

CASES = ROOT / "bench" / "cases"
USER_TOOLS = CASES / "local_tools.py"
# A set written apart is a folder of its own (bench/cases/fresh/README.md): its cases.toml, its
# user tools (tools.py), the fixture with a small git repository and its server. Run once, not read.
FRESH_FILES = {"README.md": "# Demo\n\nA small project.\n", "notes/ideas.md": "# Ideas\n\n- a garden\n",
               "src/app.py": "print('hello')\n"}
CASE_FILES = {"dev": CASES / "local_dev.toml", **{f"dev{n}": CASES / f"local_dev{n}.toml" for n in range(2, 15)},
              "heldout": CASES / "local_heldout.toml",
              **{p.parent.name: p for p in sorted(CASES.glob("*/cases.toml"))}}
# the prompt state survives between runs here (a run rebuilds it only when the prompt changed)
# the fixture's tools that only read, run in the dry run too: its user tools and its MCP servers'
# (by their registry names, SERVER__tool); a set written apart adds its own (``apart_calls``)
FIXTURE_CALLS = frozenset({"convert_currency", "flight_status", "convert_units",
                           *(tool_name("clock", name) for name in ("get_current_time", "convert_time")),
                           *(tool_name("git", f"git_{name}") for name in ("status", "log", "diff_unstaged", "diff",
                                                                         "show", "branch", "diff_staged"))})
CACHE = Path(os.environ.get("GLASSLOOP_BENCH_CACHE", "/tmp/glassloop-bench/local-eval-cache"))
MODELS = Path("/tmp/glassloop-bench")

FIXTURE_TODOS = [
    {"id": "todo-001", "title": "Renew the car insurance", "detail": "Compare two quotes first",
     "status": "todo", "priority": "high", "due": "2026-12-10", "tag": None},
    {"id": "todo-002", "title": "Book a table for Friday", "detail": "", "status": "todo",
     "priority": "medium", "due": None, "tag": None},
    {"id": "todo-003", "title": "Return the library books", "detail": "", "status": "done",
     "priority": "low", "due": None, "tag": None},
]
FIXTURE_NOTES = [
    {"id": "note-001", "text": "Landlord: Mr Chen, phone 138 0000 1234", "tags": ["home"]},
    {"id": "note-002", "text": "Passport number ends in 4471, expires 2029", "tags": ["travel"]},
]
FIXTURE_FILES = {
    "README.md": "# Home budget\n\nMonthly budget sheets and receipts.\n",
    "plan.md": "# Plan for December\n\n1. Pay the deposit\n2. Move the desk\n",
    "budget.csv": "month,budget\n2026-11,2400\n2026-12,2600\n",
    "receipts/发票.txt": "12月发票：办公椅 899 元\n",
}


def written_apart(path: Path) -> Path | None:
    """The folder of a set written apart that ``path`` belongs to (its cases and tools); else None."""
    folder = path.resolve().parent
    return folder if folder.parent == CASES.resolve() and (folder / "tools.py").is_file() else None


def apart_calls(folder: Path) -> frozenset[str]:
    """The tools of a set written apart (its ``tools.py``: read-only tables, by its README)."""
    return user_tools(folder / "tools.py")


def user_tools(path: Path) -> frozenset[str]:
    """The names of the user tools a file defines."""
    from tools.user_loader import load_sources, read_sources

    return frozenset(tool.name for tool in load_sources(read_sources([path]), {}).tools)


def kind_of(tool: str, users: frozenset[str]) -> str:
    """A tool's kind, as the figures are given by it: an MCP server's ("SERVER__tool"), a user's
    (``users``), else built-in."""
    return "mcp" if "__" in tool else "user" if tool in users else "built-in"


def workspace(folder: Path, profile: str, fixture: bool = True,
              apart: bool = False) -> tuple[Path, dict[str, str], Path]:
    """(the folder the session runs in, its environment, its config file): the fixture stores
    in the data dir of an isolated XDG tree, the files in the folder itself, the MCP server;
    without ``fixture`` a new user's machine (no todos, notes, files or MCP servers)."""
    from repl.embedded.weights import BUNDLED, ensure_model

    model = ensure_model(MODELS, spec=BUNDLED[profile])
    env = isolated_env(folder / "xdg")
    CACHE.mkdir(parents=True, exist_ok=True)
    env["XDG_CACHE_HOME"] = str(CACHE)
    work = folder / "work"
    work.mkdir()
    config = folder / "eval.toml"
    config.write_text(f'provider = "{profile}"\napproval = "auto"\n'
                      f"[providers.{profile}]\nmodel_path = {json.dumps(str(model))}\n"
                      '[tools]\nweather = "sample"\n', "utf-8")
    if not fixture:
        return work, env, config
    with config.open("a", encoding="utf-8") as out:  # a case is judged by its first step and its answer
        out.write("[guards]\nmax_steps = 3\n")
    data = Path(env["XDG_DATA_HOME"]) / "glassloop"
    data.mkdir(parents=True, exist_ok=True)
    (data / "todos.json").write_text(json.dumps({"version": 1, "todos": FIXTURE_TODOS}), "utf-8")
    (data / "notes.json").write_text(json.dumps({"version": 1, "notes": FIXTURE_NOTES}, ensure_ascii=False),
                                     "utf-8")
    for name, text in FIXTURE_FILES.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text, "utf-8")
    clock = shutil.which("mcp-server-time", path=str(VENV_BIN)) or "mcp-server-time"
    with config.open("a", encoding="utf-8") as out:
        out.write(f"[mcp.servers.clock]\ncommand = {json.dumps(clock)}\nargs = [\"--local-timezone\", \"UTC\"]\n")
    if apart:  # a set written apart: a git repository and its server too
        for name, text in FRESH_FILES.items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(text, "utf-8")
        git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "first"]):
            subprocess.run([*git, *args], cwd=work, check=True, capture_output=True)
        server = shutil.which("mcp-server-git", path=str(VENV_BIN))
        if server is None:
            raise SystemExit("a set written apart needs mcp-server-git: .venv/bin/pip install mcp-server-git")
        with config.open("a", encoding="utf-8") as out:
            out.write(f"[mcp.servers.git]\ncommand = {json.dumps(server)}\n"
                      f"args = [\"--repository\", {json.dumps(str(work))}]\n")
    return work, env, config


class Quiet(Unattended):
    """The session's surface: nobody at it, nothing shown, the events kept."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def render(self, event: Any) -> None:
        self.events.append(event)

    def info(self, text: str) -> None:
        pass

    def error(self, text: str) -> None:
        print(f"  error: {text}", file=sys.stderr)


@contextmanager
def session(profile: str, *, dry_run: bool, fixture: bool = True,
            apart: Path | None = None) -> Iterator[tuple[Any, Quiet]]:
    """A session core on the fixture, started (model server, MCP, user tools); without
    ``fixture``, a new user's first session."""
    from repl.config.load import load_settings
    from repl.session.core import Door, SessionCore

    with scratch("local-eval") as folder:
        work, env, config = workspace(folder, profile, fixture, apart is not None)
        with patched_environ(env):
            cwd = Path.cwd()
            os.chdir(work)
            try:
                settings = load_settings({}, cwd=work, env=env, config_file=config)
                tools = (apart / "tools.py",) if apart else (USER_TOOLS,) if fixture else ()
                settings = replace(settings, tool_files=tools)
                surface = Quiet()
                # the fixture's own user and MCP tools run in the dry run too (they only read)
                calls = FIXTURE_CALLS | (apart_calls(apart) if apart else frozenset())
                core = SessionCore(settings, surface, interactive=False,
                                   door=Door("bench", journal=False, trace=False, dry_run=dry_run, calls=calls))
                core.start_background()
                try:
                    yield core, surface
                finally:
                    core.close()
            finally:
                os.chdir(cwd)


# ------------------------------------------------------------------ judging one turn

def echoed(answer: str, messages: list[str]) -> bool:
    """The answer repeats a user message (the product's definition, ``dialect.repeats``): flat
    equal to one, or holding one of 8+ flat characters whole."""
    return any(repeats(answer, message) for message in messages)


# what a question about what is open or left to do means, in any words
IMPLIED = {("status", "todo")}


def invented(arguments: dict[str, Any], schema: dict[str, Any], message: str, expected: dict[str, Any]) -> list[str]:
    """Optional arguments the call holds that the message does not give: not required, not
    checked by the case, not the schema's default nor IMPLIED, and their value not in the message."""
    required = set(schema.get("required") or ())
    properties = schema.get("properties") or {}
    said = flat(message)
    out = []
    for name, value in arguments.items():
        if name in required or name in expected or value in (None, "", [], {}) or (name, str(value)) in IMPLIED:
            continue
        if isinstance(properties.get(name), dict) and properties[name].get("default") == value:
            continue
        words = [value] if not isinstance(value, list) else value
        if not all(flat(str(word)) and flat(str(word)) in said for word in words):
            out.append(name)
    return out


def unsaid(arguments: dict[str, Any], schema: dict[str, Any], message: str, expected: dict[str, Any]) -> list[str]:
    """Required text arguments (no choices, not checked by the case) that hold words, none of
    them the message's: no English word of three letters or more, no two Chinese characters in
    a row ("Write the weekly report" for "提醒我周五前把季度报表交上去。", the schema's example
    copied; a value without a space or Chinese, a code such as "USD", or numbers alone are not
    judged).
    Counted apart from ``ok``, which earlier figures were judged without."""
    properties = schema.get("properties") or {}
    said = message.casefold()
    out = []
    for name in schema.get("required") or ():
        value, sub = arguments.get(name), properties.get(name)
        if name in expected or not isinstance(value, str) or not isinstance(sub, dict) or "enum" in sub:
            continue
        words = [w for w in re.findall(r"[a-z]{3,}", value.casefold())]
        pairs = [run[i:i + 2] for run in re.findall(r"[\u3400-\u9fff]+", value) for i in range(max(1, len(run) - 1))]
        prose = bool(re.search(r"\s|[\u3400-\u9fff]", value.strip()))  # not a code: "USD", "Europe/London"
        if prose and (words or pairs) and not any(w[:5] in said for w in words) and not any(p in said for p in pairs):
            out.append(name)
    return out


def require_offered(expected: list[str], offered: list[str], message: str) -> None:
    """A case whose tool is not registered when its turn begins (an MCP server not started, a user
    tool not loaded) could not be answered right: the run is failed, not scored (a slow server
    would otherwise make a run faster and its figures lower without saying so)."""
    if missing := [name for name in expected if name not in offered]:
        raise RuntimeError(f"{message!r}: {', '.join(missing)} not offered when the turn began: a failed run")


def require_routed(core: Any, message: str) -> None:
    """A session whose router failed on a case routes no case after it (the model chooses alone,
    ``loop.routing.Routing``): the run is failed, not scored."""
    for routing in core._routing():
        if routing.failed:
            raise RuntimeError(f"{message!r}: the router failed ({routing.failed}): a failed run")


def judge_turn(events: list[Any], schemas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What one turn did: its calls (step, name, arguments, valid), the answer, timings."""
    from repl.loop.events import ModelUsage, ToolCallFinished, ToolCallStarted, TurnFinished
    from tools.validation import validator_for

    calls = []
    for event in events:
        if isinstance(event, ToolCallStarted):
            args = event.arguments
            valid = (event.name in schemas and isinstance(args, dict)
                     and validator_for(schemas[event.name]).is_valid(args))
            calls.append({"step": event.step, "name": event.name, "arguments": args, "valid": valid})
    results = [{"name": e.name, "ok": e.ok, "result": e.result} for e in events if isinstance(e, ToolCallFinished)]
    finished = next((e for e in events if isinstance(e, TurnFinished)), None)
    usage = [e for e in events if isinstance(e, ModelUsage)]
    return {"calls": calls, "results": results, "answer": finished.answer if finished else "",
            "stopped_by": finished.stopped_by if finished else "error",
            "seconds": round(finished.duration_s, 2) if finished else None,
            "first_step_s": round(usage[0].latency_s, 2) if usage else None,
            # model calls beyond one per tool step and the answer: an answer asked for again
            # (held back as an echo of the question, ``hooks.AnswerAgain``) or a guard's last call
            "asked_again": max(0, len(usage) - len({c["step"] for c in calls}) - 1)}


def listed(results: list[dict[str, Any]]) -> list[str] | None:
    """The names a list answer must give: those of the first successful result that lists
    todos, files or notes (None: no such result; [] an empty list)."""
    for result in results:
        data = result["result"] if result["ok"] and isinstance(result["result"], dict) else {}
        for key, field in (("todos", "title"), ("entries", "path"), ("notes", "text")):
            if isinstance(data.get(key), list):
                return [str(item.get(field, ""))[:24] for item in data[key] if isinstance(item, dict)]
    return None


def names_items(answer: str, names: list[str]) -> bool:
    """Every listed name is in the answer (an empty list: the answer says there is nothing)."""
    if not names:
        return bool(re.search(r"\b(no|none|empty|nothing|zero|0)\b|没有|无|空", answer, re.IGNORECASE))
    said = flat(answer)
    return all(flat(name) in said for name in names)


def expected_tools(case: dict[str, Any]) -> list[str]:
    """A case's right first tools (``glassloop eval``'s format: a name, a list, "" for none); an
    MCP tool written as the server's prefixed name ("mcp__clock__get_current_time") as glassloop
    names it ("clock__get_current_time")."""
    tool = case.get("tool") or []
    return [name.removeprefix("mcp__") for name in ([tool] if isinstance(tool, str) else tool) if name]


def judge_case(case: dict[str, Any], turn: dict[str, Any], schemas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    tools, expected = expected_tools(case), case.get("args") or {}
    first = [c for c in turn["calls"] if c["step"] == 1]
    call = first[0] if first else None
    right_tool = bool(tools) and call is not None and call["name"] in tools
    tool = call["name"] if right_tool and call is not None else (tools[0] if tools else "")
    valid = right_tool and call is not None and call["valid"]
    args = call["arguments"] if call and isinstance(call["arguments"], dict) else {}
    contains = case.get("args_contain") or {}
    args_ok = valid and all(_same(args.get(k), v) for k, v in expected.items()) and all(
        any(str(text).casefold() in str(args.get(k, "")).casefold() for text in ([texts] if isinstance(texts, str) else texts))
        for k, texts in contains.items())
    extra = invented(args, schemas.get(tool, {}), case["message"], expected) if right_tool else []
    copied = unsaid(args, schemas.get(tool, {}), case["message"], expected) if right_tool else []
    answer = turn["answer"]
    out = {"message": case["message"], "lang": case.get("lang", ""), "tool": tool,
           "called": [c["name"] for c in turn["calls"]], "first": call, **turn,
           "echo": echoed(answer, [case["message"]]), "answer_in_language": in_language(answer, case.get("lang", "en"))}
    names = listed(turn["results"])
    out["names_items"] = None if names is None else names_items(answer, names)
    if tool:
        out.update(right_tool=right_tool, valid=valid, args_ok=args_ok, invented=extra, unsaid=copied,
                   ok=args_ok and not extra)
    else:
        out.update(ok=not turn["calls"] and bool(answer.strip()), off=off_answer(answer, list(schemas)))
    return out


_REFUSAL = re.compile(r"抱歉，?我(无法|不能)|无法协助|\bI (cannot|can't|am unable to) (assist|help)"
                      r"|\bsorry, (but )?I (cannot|can't)", re.IGNORECASE)


def off_answer(answer: str, tools: list[str]) -> bool:
    """A control's answer that refuses ("抱歉，我无法协助完成这个请求。") or speaks of the tools
    ("To list todos, call list_todos.") instead of answering what was said."""
    return bool(_REFUSAL.search(answer)) or any(name in answer for name in tools)


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, str) and isinstance(got, str):
        return got.strip().casefold() == want.strip().casefold()
    return bool(got == want)


def score(results: list[dict[str, Any]]) -> dict[str, Any]:
    def pct(part: list[bool]) -> float:
        return round(100.0 * sum(part) / len(part), 1) if part else float("nan")

    tools = [r for r in results if r["tool"]]
    controls = [r for r in results if not r["tool"]]
    seconds = [r["seconds"] for r in results if r["seconds"] is not None]
    return {
        "cases": len(results),
        "right_pct": pct([r["ok"] for r in tools]),
        "right_en_pct": pct([r["ok"] for r in tools if r["lang"] == "en"]),
        "right_zh_pct": pct([r["ok"] for r in tools if r["lang"] == "zh"]),
        "right_tool_pct": pct([r["right_tool"] for r in tools]),
        # per kind of tool ("mcp": 12/21), and the requests answered without any call
        "right_tool_by_kind": {kind: f"{sum(r['right_tool'] for r in tools if r.get('kind') == kind)}/"
                                     f"{sum(r.get('kind') == kind for r in tools)}"
                               for kind in sorted({r["kind"] for r in tools if "kind" in r})},
        "no_call": sum(not r["called"] for r in tools),
        "faithful_pct": pct([not r["invented"] for r in tools if r["right_tool"]]),
        "unsaid_args": sum(bool(r.get("unsaid")) for r in tools),  # not part of right_pct (``unsaid``)
        "controls_no_call_pct": pct([r["ok"] for r in controls]),
        "controls_off_answers": sum(bool(r.get("off")) for r in controls),  # refusals, talk of tools
        "answer_language_pct": pct([r["answer_in_language"] for r in results]),
        "echoes": sum(r["echo"] for r in results),
        "asked_again": sum(r["asked_again"] for r in results),
        "list_answers_named_pct": pct([r["names_items"] for r in results if r["names_items"] is not None]),
        "seconds_median": round(statistics.median(seconds), 2) if seconds else None,
    }


def run_cases(path: Path, profile: str = "local") -> dict[str, Any]:
    cases = tomllib.loads(path.read_text("utf-8"))["case"]
    before = load()
    results = []
    apart = written_apart(path)
    users = user_tools(apart / "tools.py" if apart else USER_TOOLS)
    with session(profile, dry_run=True, apart=apart) as (core, surface):
        from repl.loop.history import History

        core.mcp_ready()  # as the first turn would: a first case for an MCP tool finds it offered
        for number, case in enumerate(cases, 1):
            core.history = History(core.history.system_prompt)
            core.turns.clear()
            surface.events.clear()
            require_offered(expected_tools(case), core.registry.names(), case["message"])
            core.run_turn(case["message"])
            require_routed(core, case["message"])
            schemas = {s["name"]: s.get("parameters") or {} for s in core.registry.schemas()}
            result = judge_case(case, judge_turn(surface.events, schemas), schemas)
            result["kind"] = kind_of(result["tool"], users) if result["tool"] else ""
            results.append(result)
            if path == CASE_FILES["heldout"] or apart:  # held-out requests and answers are not for reading
                print(f"  {number:2} {result['seconds'] or 0:5.1f} s", file=sys.stderr, flush=True)
                continue
            mark = "ok" if result["ok"] else ("CALLED" if not case.get("tool") else "WRONG")
            got = " ".join(f"{c['name']}{'' if c['valid'] else '(INVALID)'}" for c in result["calls"]) or "-"
            print(f"  {number:2} {result['lang']} {mark:<6} {result['seconds'] or 0:5.1f} s  "
                  f"{case.get('tool') or '(none)'} <- {got} {json.dumps(result['first']['arguments'] if result['first'] else '', ensure_ascii=False)[:80]}"
                  f"{' INVENTED ' + ','.join(result.get('invented') or []) if result.get('invented') else ''}"
                  f" | {result['answer'][:60]!r}", file=sys.stderr, flush=True)
    return {"cases_file": path.name, "profile": profile, "load_before": before, "load_after": load(),
            "time": time.strftime("%Y-%m-%d %H:%M:%S"), **score(results), "results": results}


def spread(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    values = [r[key] for r in runs if isinstance(r.get(key), int | float)]
    return {"median": statistics.median(values), "min": min(values), "max": max(values)} if values else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="dev", help="dev, dev2 ... dev14, heldout, a set written apart "
                        "(fresh, fresh2: a folder of bench/cases) or a case file")
    parser.add_argument("--profile", default="local", choices=("local", "local-large"))
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    path = CASE_FILES.get(args.cases, Path(args.cases))
    runs = [run_cases(path, args.profile) for _ in range(args.runs)]
    summary = {key: spread(runs, key) for key in ("right_pct", "right_en_pct", "right_zh_pct", "right_tool_pct",
                                                   "faithful_pct", "unsaid_args", "controls_no_call_pct", "controls_off_answers",
                                                   "answer_language_pct",
                                                   "echoes", "asked_again", "list_answers_named_pct", "seconds_median")}
    for run in runs:
        print(json.dumps({k: v for k, v in run.items() if k != "results"}, ensure_ascii=False))
    print(json.dumps(summary))
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, "runs": runs}, indent=1, ensure_ascii=False), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
