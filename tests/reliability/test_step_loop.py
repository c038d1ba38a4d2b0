"""Step mode at the loop: a scripted Stepper (no terminal) and the in-process scripted provider.

What the terminal tests cannot reach quickly: editing a tool result, stopping at
the last call after a guard, the journal keeping an edited message, the paused
time not counting against the turn's deadline.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from repl.archive.journal import Journal, load
from repl.config.redact import Redactor
from repl.loop.agent import Limits, run_turn
from repl.loop.approval import Approver
from repl.loop.events import EventLog, UserStep
from repl.loop.history import History, check
from repl.loop.stepping import Continue, Edit, Result, Stepping, Stop, check_edit, check_result
from repl.tracing.trace import JsonlWriter, Trace
from tests.fakeserver import call, text, tool_calls
from tests.reliability.helpers import strict_json
from tools import build_tools
from tools.registry import Registry


class Scripted:
    """Answers from lists (then Continue); remembers the views it was shown."""

    def __init__(self, before=(), after=(), wait_s: float = 0.0) -> None:
        self.before, self.after, self.wait_s = list(before), list(after), wait_s
        self.views: list = []

    def before_model_call(self, view):
        self.views.append(view)
        time.sleep(self.wait_s)  # a person taking their time
        return self.before.pop(0) if self.before else Continue()

    def after_model_answer(self, calls):
        return self.after.pop(0) if self.after else [Continue()] * len(calls)


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    return Registry(build_tools(todos_path=tmp_path / "todos.json", notes_path=tmp_path / "notes.json",
                                files_root=tmp_path, weather="sample"))


def _turn(history, question, provider, registry, stepper, limits=None, emit=None):
    log = emit or EventLog()
    finished = run_turn(history, question, provider=provider, registry=registry, approver=Approver("ask"),
                        limits=limits or Limits(), emit=log, hooks=(Stepping(stepper),))
    return finished, log


def test_an_edited_tool_result_is_sent_and_journaled(scripted, registry, tmp_path):
    scripted.script(tool_calls(call("get_weather", {"city": "Paris"})), text("Rainy then."))
    edited = json.dumps({"ok": True, "forecast": "rain (edited)"})
    stepper = Scripted(before=[Continue(), Edit(edited)])
    history = History("sys")
    journal = Journal(tmp_path / "s.jsonl", Redactor(), {"session": "s"})
    finished, log = _turn(history, "weather?", scripted, registry, stepper,
                          emit=lambda e: journal.sync(history))
    assert finished.stopped_by == "answer"
    sent = scripted.chat_requests()[1].body["messages"][-1]
    assert sent["role"] == "tool" and sent["content"] == edited
    assert stepper.views[1].last_role == "tool" and stepper.views[1].prefix_tokens > 0
    journal.sync(history)
    journal.close()
    _, messages = load(tmp_path / "s.jsonl")
    assert [m for m in messages if m["role"] == "tool"][0]["content"] == edited
    assert check(messages) == [] and scripted.history_errors == []


def test_stop_at_the_last_call_after_a_guard(scripted, registry):
    scripted.script(tool_calls(call("list_todos", {})))
    stepper = Scripted(before=[Continue(), Stop()])
    history = History("sys")
    finished, log = _turn(history, "loop", scripted, registry, stepper, limits=Limits(max_steps=1))
    assert finished.stopped_by == "user"
    assert stepper.views[1].final and stepper.views[1].tools == ()  # the guard's last call has no tools
    assert [e.action for e in log.of(UserStep)] == ["stopped_by_user"]
    assert check(history.messages) == [] and history.messages[-1]["role"] == "assistant"
    assert len(scripted.chat_requests()) == 1


def test_time_paused_does_not_count_against_the_turn(scripted, registry):
    scripted.script(tool_calls(call("list_todos", {})), text("done"))
    finished, _ = _turn(History("sys"), "slowly", scripted, registry, Scripted(wait_s=0.6),
                        limits=Limits(turn_timeout_s=1.0))
    assert finished.stopped_by == "answer" and finished.answer == "done"


@pytest.mark.parametrize(("role", "text", "ok"), [
    ("user", "fine", True), ("user", "  ", False),
    ("tool", '{"ok": true}', True), ("tool", '{"ok": "yes"}', False), ("tool", "not json", False),
    ("tool", '{"ok": false, "error": {"type": "x", "message": "y"}}', True),
    ("tool", '{"ok": false, "error": "bad"}', False), ("tool", "[1]", False),
    ("tool", '{"ok": true, "v": NaN}', False), ("tool", '{"ok": true, "v": [1, -Infinity]}', False),
    ("tool", '{"ok": false, "error": {"type": "x", "message": "y"}, "n": {"m": Infinity}}', False),
])
def test_what_an_edit_may_be(role, text, ok):
    assert (check_edit(role, text) is None) == ok
    if role == "tool" and ok:
        assert check_result(json.loads(text)) is None
    if "Infinity" in text or "NaN" in text:
        assert "NaN" in (check_edit(role, text) or "")  # one line that says why


def test_numbers_json_cannot_hold_never_reach_the_trace_or_journal_as_such(scripted, registry, tmp_path):
    """A stepper (or a tool) that hands the loop NaN or Infinity: the turn goes on, and every line
    written to the trace and the journal is JSON a strict parser reads (the numbers as strings)."""
    scripted.script(tool_calls(call("get_weather", {"city": "Paris"})), text("Odd weather."))
    made = {"ok": True, "temperature": float("nan"), "range": [float("-inf"), float("inf")]}
    history = History("sys")
    journal = Journal(tmp_path / "s.jsonl", Redactor(), {"session": "s"})
    trace = Trace(JsonlWriter(tmp_path / "t.jsonl"), "s", "r")

    def emit(event):
        trace(event)
        journal.sync(history)

    finished, _ = _turn(history, "weather?", scripted, registry, Scripted(after=[[Result(made)]]), emit=emit)
    journal.sync(history)
    journal.close()
    trace.close()
    assert finished.stopped_by == "answer" and finished.answer == "Odd weather."
    lines = [line for name in ("s.jsonl", "t.jsonl") for line in (tmp_path / name).read_text("utf-8").splitlines()]
    records = [strict_json(line) for line in lines]
    (step,) = [r for r in records if r.get("type") == "user_step"]
    assert step["detail"] == {"ok": True, "temperature": "NaN", "range": ["-Infinity", "Infinity"]}
