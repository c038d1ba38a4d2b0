"""Keys typed before the approval dialog is on screen must not answer it.

The real program in a pseudo-terminal: while the model's reply streams (or
together with the message itself) the user types ``y``, Enter, ``a``; those
keys used to answer the dialog the moment it opened, so a ``delete_todo`` ran
and the trace said ``by: user``. In a pipe session (no terminal) queued lines
are messages, never answers: mode ``ask`` denies without asking.
"""

from __future__ import annotations

import time
from pathlib import Path

import pexpect

from tests.fakeserver import call, text, tool_calls
from tests.reliability.helpers import record, trace_records
from tests.support import chat, todos_of

PREAMBLE = "Deleting the weekly report now, as you asked; one moment please. "


def _delete_after_slow_text(chunk_delay: float = 0.02):
    # ~33 chunks of text, then the side-effecting call: about 0.7 s of streaming
    return tool_calls(call("delete_todo", {"todo_id": "todo-002"}), text=PREAMBLE, chunk_size=2,
                      chunk_delay=chunk_delay)


def _decisions(env) -> list[dict]:
    return [r for r in trace_records(env) if r.get("type") == "approval_decided"]


def _still_waiting(repl, seconds: float = 0.4) -> bool:
    """Nothing happens on screen for ``seconds``: the dialog has not been answered."""
    return repl.child.expect([pexpect.TIMEOUT, "✓", "✗", "Kept", "Deleted"], timeout=seconds) == 0


def test_keys_typed_while_streaming_do_not_answer(repl_factory, fake_server, home):
    todos = Path(home["GLASSLOOP_TODOS_FILE"])
    before = todos.read_bytes()
    fake_server.script(_delete_after_slow_text(), text("Kept it."))
    repl = repl_factory()
    repl.say("delete the weekly report")
    repl.expect("Deleting")  # the reply is streaming; the dialog is not there yet
    typed_at = time.monotonic()
    repl.child.send("y\r")
    repl.child.send("a")
    repl.child.send("yes\r")
    repl.expect("Allow")
    streamed_s = time.monotonic() - typed_at
    assert streamed_s > 0.1, streamed_s  # the keys went in well before the dialog was there
    assert _still_waiting(repl), "a key typed before the dialog answered it"
    assert todos.read_bytes() == before
    repl.child.send("n")  # pressed once the dialog is visible: it counts
    repl.expect("Reason")
    repl.say("")
    repl.expect("Kept it")
    repl.ready()
    assert todos.read_bytes() == before
    decisions = _decisions(home)
    assert [(d["allowed"], d["by"]) for d in decisions] == [(False, "user")]
    record("typeahead", case="typed while streaming", keys="y⏎ a yes⏎", dialog_after_s=round(streamed_s, 2),
           answered_by_typeahead=False)
    repl.close()


def test_keys_sent_with_the_message_do_not_answer(repl_factory, fake_server, home):
    fake_server.script(_delete_after_slow_text(0.01), text("Deleted."))
    repl = repl_factory()
    repl.child.send("delete the weekly report\ry")  # one write: the prompt reads both at once
    repl.expect("Allow")
    assert _still_waiting(repl)
    assert any(t["id"] == "todo-002" for t in todos_of(home))
    repl.child.send("y")  # after the dialog is visible: approves
    repl.expect("Deleted")
    repl.ready()
    assert not any(t["id"] == "todo-002" for t in todos_of(home))
    assert [(d["allowed"], d["by"]) for d in _decisions(home)] == [(True, "user")]
    repl.close()


def test_queued_pipe_lines_are_messages_not_answers(fake_server, home):
    todos = Path(home["GLASSLOOP_TODOS_FILE"])
    before = todos.read_bytes()
    fake_server.script(tool_calls(call("delete_todo", {"todo_id": "todo-002"})), text("Could not."),
                       text("ok y"), text("ok a"))
    result = chat(home, fake_server.base_url, ["delete the weekly report", "y", "a"])
    assert result.returncode == 0, result.stderr
    assert todos.read_bytes() == before
    assert [(d["allowed"], d["by"]) for d in _decisions(home)] == [(False, "mode")]
    users = [m["content"] for m in fake_server.chat_requests()[-1].body["messages"] if m["role"] == "user"]
    assert users == ["delete the weekly report", "y", "a"]  # each line was a message of its own
