"""One session core behind every door: the same scenario through the REPL, ``/retry``,
``/compare`` (a dry run) and ``glassloop ask`` offers the same tools (built-in, the user's
own, an MCP server's), resolves the same provider and model, writes the same trace records
and redacts the same way. Each door differs only where it says so: ``ask`` asks nobody,
``/compare`` runs on the model it names, denies side effects and keeps no journal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakeserver import FakeServer, call, text, tool_calls
from tests.support import SECRET, glassloop, mcp_config_file

QUESTION = "what is open, and add a note"
CORE_EVENTS = ("turn_started", "tool_call_started", "approval_decided", "tool_call_finished",
               "model_usage", "turn_finished")
TOOL_FILE = '''
from glassloop_tools import tool


@tool
def door_probe(word: str) -> dict:
    """Echo a word back."""
    return {"word": word}
'''


def _respond(body: dict[str, Any]) -> Any:
    """A call to a read-only tool and one with a side effect; then an answer naming the key."""
    if body["messages"][-1]["role"] == "tool":
        return text(f"Two are open. The key was {SECRET}.")
    return tool_calls(call("list_todos", {}), call("add_note", {"text": "door"}))


def _first_turn(records: list[dict[str, Any]]) -> list[str]:
    """The core events of a trace's first turn, in order."""
    types = [r["type"] for r in records]
    end = types.index("turn_finished")
    return [t for t in types[: end + 1] if t in CORE_EVENTS]


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_every_door_offers_the_same_tools_on_the_same_endpoint_and_traces_alike(
        fake_server: FakeServer, home: dict[str, str], tmp_path: Path) -> None:
    config = mcp_config_file(tmp_path)
    tools = tmp_path / "probe.py"
    tools.write_text(TOOL_FILE, encoding="utf-8")
    fake_server.script(*[_respond] * 8)
    where = ["--config", str(config), "--tools", str(tools), "--base-url", fake_server.base_url, "--model", "m-door"]

    chatted = glassloop(*where, env=home, stdin=f"{QUESTION}\n/retry\n/compare other-model\n")
    repl_requests = len(fake_server.chat_requests())
    ask_trace = tmp_path / "ask.jsonl"
    asked = glassloop("ask", QUESTION, *where, "--trace-file", str(ask_trace), env=home, stdin="")
    assert chatted.returncode == 0 and asked.returncode == 0, chatted.stderr + asked.stderr
    assert "Traceback" not in chatted.stdout + chatted.stderr + asked.stderr

    bodies = [r.body for r in fake_server.chat_requests()]
    assert len(bodies) == repl_requests + 2 == 8  # turn, /retry, /compare: two calls each; then ask's two
    offered = [sorted(t["function"]["name"] for t in body["tools"]) for body in bodies]
    assert {"list_todos", "add_note", "door_probe", "t__lookup"} <= set(offered[0])
    assert all(names == offered[0] for names in offered), "a door offered other tools"
    models = [body["model"] for body in bodies]
    assert models == ["m-door"] * 4 + ["other-model"] * 2 + ["m-door"] * 2  # /compare's own, else the flag's

    # the note: denied in the piped REPL and ask (nobody to ask), denied as a dry run by /compare
    results = [json.loads(m["content"]) for body in bodies if body["messages"][-1]["role"] == "tool"
               for m in body["messages"][-2:]]
    assert [r["ok"] for r in results] == [True, False] * 4
    assert "dry run" in results[5]["error"]["message"]

    traces = sorted((Path(home["XDG_STATE_HOME"]) / "glassloop" / "traces").glob("*.jsonl"))
    assert len(traces) == 1  # the REPL's session (/compare leaves nothing)
    repl_records, ask_records = _records(traces[0]), _records(ask_trace)
    assert _first_turn(repl_records) == _first_turn(ask_records)
    assert _first_turn(ask_records).count("tool_call_finished") == 2
    sessions = list((Path(home["XDG_DATA_HOME"]) / "glassloop" / "sessions").glob("*.jsonl"))
    assert len(sessions) == 2  # the REPL's journal and ask's (/compare leaves none)
    for written in (traces[0], ask_trace, *sessions):  # files, and what ask prints, are redacted
        assert SECRET not in written.read_text("utf-8") and "[redacted]" in written.read_text("utf-8")
    assert SECRET not in asked.stdout


def test_the_repl_on_a_terminal_is_the_same_door_as_ask(sized_repl, fake_server: FakeServer,
                                                       home: dict[str, str], tmp_path: Path) -> None:
    """The REPL in a pseudo-terminal (a person approves the note) against ``ask --yes``: the
    same tools, model, core trace records and redaction; both ran the side effect."""
    config = mcp_config_file(tmp_path)
    tools = tmp_path / "probe.py"
    tools.write_text(TOOL_FILE, encoding="utf-8")
    fake_server.script(*[_respond] * 4)
    where = ["--config", str(config), "--tools", str(tools), "--model", "m-door"]

    repl = sized_repl(*where)
    repl.say(QUESTION)
    repl.expect(r"Allow\?")
    repl.child.send("y")
    repl.expect("Two are open")
    repl.ready()
    repl.close()
    ask_trace = tmp_path / "ask.jsonl"
    asked = glassloop("ask", QUESTION, *where, "--base-url", fake_server.base_url, "--yes",
                      "--trace-file", str(ask_trace), env=home, stdin="")
    assert asked.returncode == 0, asked.stderr

    bodies = [r.body for r in fake_server.chat_requests()]
    assert len(bodies) == 4
    offered = [sorted(t["function"]["name"] for t in body["tools"]) for body in bodies]
    assert {"list_todos", "add_note", "door_probe", "t__lookup"} <= set(offered[0])
    assert all(names == offered[0] for names in offered)
    assert [body["model"] for body in bodies] == ["m-door"] * 4
    results = [json.loads(m["content"]) for body in bodies if body["messages"][-1]["role"] == "tool"
               for m in body["messages"][-2:]]
    assert [r["ok"] for r in results] == [True, True] * 2  # approved by the person, and by --yes

    traces = sorted((Path(home["XDG_STATE_HOME"]) / "glassloop" / "traces").glob("*.jsonl"))
    repl_records, ask_records = _records(traces[0]), _records(ask_trace)
    assert _first_turn(repl_records) == _first_turn(ask_records)
    decided = [r for r in repl_records if r["type"] == "approval_decided"]
    assert [(r["allowed"], r["by"]) for r in decided] == [(True, "user")]
    for written in (traces[0], ask_trace):
        assert SECRET not in written.read_text("utf-8") and "[redacted]" in written.read_text("utf-8")
