"""The chat session with standard input from a pipe (no prompt-toolkit), against the scripted server:
run in this process (``chat_here``), the one killed mid-turn in a real process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.fakeserver import call, slow_chunks, text, tool_calls
from tests.support import SECRET, chat_here


def test_turns_commands_undo_and_escaping(fake_server, home):
    todos = Path(home["GLASSLOOP_TODOS_FILE"])
    before = todos.read_bytes()
    fake_server.script(
        tool_calls(call("list_todos", {"status": "todo"})),
        text("Open: [red]literal[/] and \x1b[31mno escape codes"),
        tool_calls(call("add_todo", {"title": "meeting at 3pm"})),
        text("Added."),
    )
    result = chat_here(home, fake_server.base_url,
                       ["what is open?", "add a meeting", "/todos", "/undo", "/todos", "/trace", "/undoo"], "--yes")
    out = result.stdout
    assert result.returncode == 0, result.stderr
    assert "[red]literal[/]" in out and "\x1b[31m" not in out
    assert "list_todos" in out and "add_todo" in out
    assert out.count("meeting at 3pm") >= 2  # panel + first /todos table
    assert todos.read_bytes() == before  # /undo restored the exact bytes
    assert "did you mean /undo" in out
    assert "Traceback" not in out + result.stderr
    # the undone turn is gone from what the model sees next time
    fake_server.script(text("ok"))
    session_id = out.split("glassloop --resume ")[-1].split()[0]
    chat_here(home, fake_server.base_url, ["again"], "--resume", session_id)
    sent = fake_server.chat_requests()[-1].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["what is open?", "again"]
    assert fake_server.history_errors == []


def test_reset_keeps_todos_and_clears_conversation(fake_server, home):
    fake_server.script(text("first"), text("second"))
    chat_here(home, fake_server.base_url, ["one", "/reset", "two"])
    sent = fake_server.chat_requests()[-1].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["two"]


def test_side_effects_denied_without_terminal(fake_server, home):
    todos = Path(home["GLASSLOOP_TODOS_FILE"])
    before = todos.read_bytes()
    fake_server.script(tool_calls(call("delete_todo", {"todo_id": "todo-002"})), text("could not"))
    result = chat_here(home, fake_server.base_url, ["delete todo 2"])
    assert "denied" in result.stdout
    assert todos.read_bytes() == before


def test_resume_after_sigkill_mid_turn(fake_server, home):
    fake_server.script(text("first answer"),
                       slow_chunks(0.2, text("a long slow answer " * 20, chunk_size=4)))
    proc = subprocess.Popen([sys.executable, "-m", "repl.cli", "--base-url", fake_server.base_url],
                            env=home, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    proc.stdin.write("question one\nquestion two\n")
    proc.stdin.flush()
    deadline = time.monotonic() + 20
    while len(fake_server.chat_requests()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.6)  # a few chunks of the second answer have arrived
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    sessions = sorted((Path(home["XDG_DATA_HOME"]) / "glassloop" / "sessions").glob("*.jsonl"))
    assert len(sessions) == 1
    fake_server.script(text("resumed fine"))
    result = chat_here(home, fake_server.base_url, ["question three"], "--resume", "last")
    assert "resumed fine" in result.stdout
    sent = fake_server.chat_requests()[-1].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["question one", "question two", "question three"]
    assert fake_server.history_errors == []
    journal_text = sessions[0].read_text(encoding="utf-8")
    assert SECRET not in journal_text
    assert all(json.loads(line) for line in journal_text.splitlines()[:-1])
