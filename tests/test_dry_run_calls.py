"""A dry run (``glassloop eval``, ``glassloop replay``, ``/compare``) runs glassloop's own read-only
tools, and no tool of an MCP server or a tool file unless it is named with ``--call``: such a tool's
read-only claim is its own word. The MCP test server's ``peek`` says it is read-only and writes a
file; so does the tool file's ``peek_file``. Real servers, the real command, the scripted model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakeserver import FakeServer, Reply, call, text, tool_calls
from tests.support import glassloop_here, mcp_config_file

pytestmark = pytest.mark.timeout(90)

TOOL_FILE = '''
from pathlib import Path

from glassloop_tools import tool


@tool
def peek_file(name: str) -> str:
    """Look at a file (says it is read-only, yet writes)."""
    with Path({written!r}).open("a", encoding="utf-8") as fh:
        fh.write(name + "\\n")
    return "peeked at " + name
'''

CASES = '''
[[case]]
message = "Peek at milk"
tool = "t__peek"
result_contains = "peeked: milk"

[[case]]
message = "Peek at the file eggs"
tool = "peek_file"
result_contains = "peeked at eggs"

[[case]]
message = "Which todos are open?"
tool = "list_todos"
result_contains = "todo-002"
'''

FIRST_STEP = {"Peek at milk": tool_calls(call("t__peek", {"text": "milk"})),
              "Peek at the file eggs": tool_calls(call("peek_file", {"name": "eggs"})),
              "Which todos are open?": tool_calls(call("list_todos", {}))}


def _model(body: dict[str, Any]) -> Reply:
    question = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return text("Done.") if body["messages"][-1]["role"] == "tool" else FIRST_STEP[question]


def _results(fake_server: FakeServer) -> dict[str, dict[str, Any]]:
    """Each tool's result as the model was sent it."""
    return {r.body["messages"][-2]["tool_calls"][0]["function"]["name"]: json.loads(r.body["messages"][-1]["content"])
            for r in fake_server.chat_requests() if r.body["messages"][-1]["role"] == "tool"}


@pytest.fixture
def writes(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "mcp-writes.txt", tmp_path / "file-writes.txt"


def _eval(fake_server: FakeServer, home: dict[str, str], tmp_path: Path, writes: tuple[Path, Path],
          *extra: str) -> dict[str, Any]:
    cases = tmp_path / "cases.toml"
    cases.write_text(CASES, encoding="utf-8")
    tools = tmp_path / "peeking.py"
    tools.write_text(TOOL_FILE.format(written=str(writes[1])), encoding="utf-8")
    config = mcp_config_file(tmp_path, MCP_TEST_NOTES=str(writes[0]), MCP_TEST_LIAR="1")
    fake_server.script(*[_model] * 6)
    done = glassloop_here("eval", str(cases), "--config", str(config), "--tools", str(tools),
                          "--base-url", fake_server.base_url, "--json", *extra, env=home)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return {"stderr": done.stderr, **json.loads(done.stdout)}


def test_eval_runs_no_tool_that_is_not_ours_unless_named(
        fake_server: FakeServer, home: dict[str, str], tmp_path: Path, writes: tuple[Path, Path]) -> None:
    report = _eval(fake_server, home, tmp_path, writes)
    assert not writes[0].exists() and not writes[1].exists()  # neither claim of read-only was taken
    results = _results(fake_server)
    for name, source in (("t__peek", "MCP server t"), ("peek_file", "peeking.py")):
        assert results[name]["ok"] is False and results[name]["error"]["type"] == "not_run"
        message = results[name]["error"]["message"]
        assert f"{name} was not run" in message and source in message and f"--call {name}" in message
    assert results["list_todos"]["ok"] is True  # glassloop's own read-only tools still run
    assert [c["ok"] for c in report["cases"]] == [False, False, True]
    assert "unless named with --call, so their result checks fail: peek_file, t__peek" in report["stderr"]


def test_eval_runs_the_tools_named_with_call(
        fake_server: FakeServer, home: dict[str, str], tmp_path: Path, writes: tuple[Path, Path]) -> None:
    report = _eval(fake_server, home, tmp_path, writes, "--call", "t__peek", "--call", "peek_file",
                   "--call", "no_such_tool")
    assert writes[0].read_text(encoding="utf-8") == "milk\n"
    assert writes[1].read_text(encoding="utf-8") == "eggs\n"
    assert [c["ok"] for c in report["cases"]] == [True, True, True]
    assert "--call names no tool offered: no_such_tool" in report["stderr"]


def test_replay_runs_no_mcp_tool_unless_named(
        fake_server: FakeServer, home: dict[str, str], tmp_path: Path, writes: tuple[Path, Path]) -> None:
    fake_server.script(text("Hello."))
    made = glassloop_here("--base-url", fake_server.base_url, env=home, stdin="peek at milk\n")
    assert made.returncode == 0, made.stderr
    session = made.stdout.split("glassloop --resume ")[-1].split()[0]
    config = mcp_config_file(tmp_path, MCP_TEST_NOTES=str(writes[0]), MCP_TEST_LIAR="1")
    replay = ("replay", session, "--config", str(config), "--base-url", fake_server.base_url, "--model", "second")

    fake_server.script(tool_calls(call("t__peek", {"text": "milk"})), text("Done."))
    table = glassloop_here(*replay, env={**home, "COLUMNS": "140"})
    assert table.returncode == 0, table.stderr
    assert not writes[0].exists()
    assert 't__peek {"text": "milk"} → not_run' in table.stdout
    assert ("side effects denied: 0 calls; not run, not glassloop's own: 1 call (--call NAME runs one)"
            in table.stdout)

    fake_server.script(tool_calls(call("t__peek", {"text": "milk"})), text("Done."))
    named = glassloop_here(*replay, "--call", "t__peek", "--json", env=home)
    assert named.returncode == 0, named.stderr
    assert "--call names no tool" not in named.stderr
    assert writes[0].read_text(encoding="utf-8") == "milk\n"
    (turn,) = json.loads(named.stdout)["turns"]
    assert turn["replay"]["calls"] == [{"name": "t__peek", "arguments": {"text": "milk"}, "error": None}]
