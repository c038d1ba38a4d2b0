"""The real ``glassloop`` REPL in a pseudo-terminal (pexpect) against the scripted server."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pexpect

from tests.fakeserver import call, slow_chunks, text, tool_calls
from tests.support import SECRET, todos_of


def test_two_tool_panels_and_streamed_answer(repl_factory, fake_server):
    fake_server.script(tool_calls(call("list_todos", {"status": "todo"}), call("get_todo", {"todo_id": 2})),
                       text("The **weekly report** is the most urgent.", chunk_size=3))
    repl = repl_factory()
    repl.say("what is open?")
    repl.expect("stopped_by|answer")
    repl.ready()
    screen = repl.screen()
    assert "list_todos" in screen and "get_todo" in screen
    assert "✓" in screen
    assert "weekly report" in screen
    assert re.search(r"step 1 · in \d+ · out \d+", screen)
    repl.close()


def test_approve_with_y_writes_the_todo(repl_factory, fake_server, home):
    fake_server.script(tool_calls(call("add_todo", {"title": "meeting at 3pm", "priority": "high"})),
                       text("Added."))
    repl = repl_factory()
    repl.say("remind me of the meeting at 3pm")
    repl.expect("Allow")
    repl.key("y")
    repl.expect("Added")
    repl.ready()
    assert any(t["title"] == "meeting at 3pm" and t["priority"] == "high" for t in todos_of(home))
    assert "needs approval" in repl.screen() and "new item" in repl.screen()
    repl.close()


def test_deny_with_reason_reaches_the_model(repl_factory, fake_server, home):
    before = Path(home["GLASSLOOP_TODOS_FILE"]).read_bytes()
    fake_server.script(tool_calls(call("delete_todo", {"todo_id": "todo-002"})), text("Kept it."))
    repl = repl_factory()
    repl.say("delete the weekly report")
    repl.expect("Allow")
    repl.key("n")
    repl.expect("Reason")
    repl.say("I still need it")
    repl.expect("Kept it")
    repl.ready()
    sent = fake_server.chat_requests()[-1].body["messages"][-1]
    assert sent["role"] == "tool"
    result = json.loads(sent["content"])
    assert result["error"]["type"] == "denied" and "I still need it" in result["error"]["message"]
    assert Path(home["GLASSLOOP_TODOS_FILE"]).read_bytes() == before
    repl.close()


def test_edit_arguments_before_running(repl_factory, fake_server, home):
    fake_server.script(tool_calls(call("add_todo", {"title": "typo tittle"})), text("Added."))
    repl = repl_factory()
    repl.say("add it")
    repl.expect("Allow")
    repl.key("e")
    repl.expect('"typo tittle"')  # the editor draws the arguments once it reads the keyboard
    # the editor opens with the arguments as pretty JSON; clear it line by line from the end
    repl.child.sendcontrol("a")  # to the start of the last line, then kill lines upwards
    for _ in range(10):
        repl.child.sendcontrol("k")
        repl.child.send("\x1b[A")
    repl.child.sendcontrol("k")
    repl.child.send('{"title": "fixed title"}')
    repl.child.send("\x1b\r")  # Esc Enter submits the multi-line editor
    repl.expect(r"arguments \(edited\)")  # the panel again; its question comes a moment later
    repl.expect("Allow")
    repl.key("y")
    repl.expect("Added")
    repl.ready()
    titles = [t["title"] for t in todos_of(home)]
    assert "fixed title" in titles and "typo tittle" not in titles
    repl.close()


def test_trace_usage_todos_undo_reset(repl_factory, fake_server, home):
    before = Path(home["GLASSLOOP_TODOS_FILE"]).read_bytes()
    fake_server.script(tool_calls(call("add_todo", {"title": "undo me"})), text("Added."), text("fresh"))
    repl = repl_factory("--yes")
    repl.say("add undo me")
    repl.expect("Added")
    repl.ready()
    for command, marker in [("/trace", "turn end"), ("/usage", "all"), ("/todos", "undo me")]:
        repl.say(command)
        repl.expect(marker)
        repl.ready()
    repl.say("/undo")
    repl.expect("removed todo-")
    repl.ready()
    assert Path(home["GLASSLOOP_TODOS_FILE"]).read_bytes() == before
    repl.say("/reset")
    repl.expect("new conversation")
    repl.ready()
    repl.say("hello")
    repl.expect("fresh")
    repl.ready()
    assert [m["role"] for m in fake_server.chat_requests()[-1].body["messages"]] == ["system", "user"]
    repl.close()


def test_ctrl_c_mid_stream_then_next_turn(repl_factory, fake_server):
    fake_server.script(slow_chunks(0.1, text("word " * 200, chunk_size=5)), text("second answer"))
    repl = repl_factory()
    repl.say("talk a lot")
    repl.expect("word")
    repl.child.sendintr()
    repl.ready()  # the answer had ~20 s to go; the kept part is marked below
    repl.say("again")
    repl.expect("second answer")
    repl.ready()
    sent = fake_server.chat_requests()[-1].body["messages"]
    assert sent[-2]["role"] == "assistant" and "[interrupted]" in sent[-2]["content"]
    assert fake_server.history_errors == []
    deadline = time.monotonic() + 5
    while fake_server.disconnects < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake_server.disconnects >= 1  # the interrupted stream's connection was closed
    repl.say("/trace 1")
    repl.expect("stopped_by interrupted")
    repl.ready()
    repl.close()


def test_markup_and_ansi_in_model_text_are_literal(repl_factory, fake_server):
    fake_server.script(text("look: [red]not red[/] and [/] and \x1b[31mescape\x1b[0m done"))
    repl = repl_factory()
    repl.say("show")
    repl.expect("done")
    repl.ready()
    raw = "".join(repl.transcript)
    assert "[red]not red[/]" in raw
    assert "\x1b[31mescape" not in raw
    repl.close()


def test_double_ctrl_c_at_empty_prompt_exits(repl_factory):
    repl = repl_factory()
    repl.child.sendintr()
    repl.ready()
    repl.child.sendintr()
    repl.child.expect(pexpect.EOF)
    repl.child.close()
    assert repl.child.exitstatus == 0


def test_resume_after_sigkill_in_the_terminal(repl_factory, fake_server, home):
    fake_server.script(text("first answer"), slow_chunks(0.2, text("slow " * 100, chunk_size=5)))
    repl = repl_factory()
    repl.say("question one")
    repl.expect("first answer")
    repl.ready()
    repl.say("question two")
    repl.expect("slow")
    os.kill(repl.child.pid, signal.SIGKILL)
    repl.child.expect(pexpect.EOF)
    fake_server.script(text("back again"))
    resumed = repl_factory("--resume", "last")
    assert "resumed session" in resumed.screen()
    resumed.say("question three")
    resumed.expect("back again")
    resumed.ready()
    users = [m["content"] for m in fake_server.chat_requests()[-1].body["messages"] if m["role"] == "user"]
    assert users == ["question one", "question two", "question three"]
    assert fake_server.history_errors == []
    for path in Path(home["XDG_DATA_HOME"]).rglob("*.jsonl"):
        assert SECRET not in path.read_text(encoding="utf-8")
    resumed.close()
