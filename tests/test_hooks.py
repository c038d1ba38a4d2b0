"""The loop's hooks (``repl/loop/hooks.py``): a session's hook sees and changes a turn at
the documented points, in order before the loop's own (``Repeats``, ``FinalAnswer``, ``AnswerAgain``)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from repl.config.settings import Limits
from repl.loop.agent import run_turn
from repl.loop.approval import Approver
from repl.loop.events import EventLog, GuardTripped, ToolCallFinished
from repl.loop.history import History, check
from repl.loop.hooks import Hooks, Instead, ModelCall, StopTurn, TurnView
from repl.providers.base import Completed, ToolCall
from tests.fakeserver import call, text, tool_calls
from tools import build_tools
from tools.registry import Registry
from tools.results import ToolResult, success


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    return Registry(build_tools(todos_path=tmp_path / "todos.json", notes_path=tmp_path / "notes.json",
                                files_root=tmp_path, weather="sample"))


def _run(scripted, registry, *hooks, limits=None, question="go"):
    log = EventLog()
    history = History("system")
    finished = run_turn(history, question, provider=scripted, registry=registry, approver=Approver("auto"),
                        limits=limits or Limits(), emit=log, hooks=hooks)
    assert check(history.messages) == []
    return finished, log, history


class Recorder(Hooks):
    """Sees every point; the calls it is shown and the results that came back."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def before_model_call(self, turn: TurnView, call: ModelCall) -> ModelCall:
        self.seen.append(f"model {call.step} tools={bool(call.tools)}")
        return call

    def before_tool_calls(self, turn: TurnView, calls: list[ToolCall]) -> dict[str, Instead]:
        self.seen.append("calls " + ",".join(c.name for c in calls))
        return {}

    def before_tool_call(self, turn: TurnView, call: ToolCall, side_effects: bool) -> Instead | None:
        self.seen.append(f"before {call.name} side_effects={side_effects}")
        return None

    def after_tool_call(self, turn: TurnView, call: ToolCall, result: ToolResult, *,
                        side_effects: bool, ran_with: str) -> None:
        self.seen.append(f"after {call.name} ok={result.get('ok')}")


def test_a_hook_sees_each_point_of_a_turn_in_order(scripted, registry):
    scripted.script(tool_calls(call("get_weather", {"city": "London"}), call("add_todo", {"title": "umbrella"})),
                    text("Done."))
    recorder = Recorder()
    finished, _, _ = _run(scripted, registry, recorder)
    assert finished.stopped_by == "answer"
    assert recorder.seen == [
        "model 1 tools=True", "calls get_weather,add_todo",
        "before get_weather side_effects=False", "after get_weather ok=True",
        "before add_todo side_effects=True", "after add_todo ok=True",
        "model 2 tools=True",
    ]


def test_a_hook_may_change_the_request_that_is_sent(scripted, registry):
    class Filter(Hooks):
        def before_model_call(self, turn: TurnView, call: ModelCall) -> ModelCall:
            return replace(call, messages=[*call.messages[:-1], {"role": "user", "content": "filtered"}], tools=None)

    scripted.script(text("ok"))
    _run(scripted, registry, Filter())
    body = scripted.chat_requests()[0].body
    assert body["messages"][-1]["content"] == "filtered"
    assert "tools" not in body


def test_a_hook_answers_a_call_instead_of_running_it(scripted, registry, tmp_path):
    class Canned(Hooks):
        def before_tool_call(self, turn: TurnView, call: ToolCall, side_effects: bool) -> Instead | None:
            return Instead(success({"canned": True})) if side_effects else None

    scripted.script(tool_calls(call("add_todo", {"title": "milk"})), text("Added."))
    _, log, history = _run(scripted, registry, Canned())
    assert not (tmp_path / "todos.json").exists() or "milk" not in (tmp_path / "todos.json").read_text()
    assert json.loads(history.messages[2]["content"]) == {"ok": True, "canned": True}
    assert [e.ok for e in log.of(ToolCallFinished)] == [True]


def test_a_hook_ends_the_turn_with_a_guard_and_the_final_answer_follows(scripted, registry):
    class Once(Hooks):
        def before_tool_call(self, turn: TurnView, call: ToolCall, side_effects: bool) -> Instead | None:
            return Instead(success({"no": "more"}), "tool_calls", "one look is enough")

    scripted.script(tool_calls(call("get_weather", {"city": "London"})), text("Cold."))
    finished, log, _ = _run(scripted, registry, Once())
    assert finished.stopped_by == "tool_calls"
    assert [g.detail for g in log.of(GuardTripped)] == ["one look is enough"]
    final = scripted.chat_requests()[1].body
    assert "tools" not in final and "one look is enough" in final["messages"][-1]["content"]
    assert finished.answer == "Cold."


def test_a_hook_that_stops_before_the_model_call_leaves_a_valid_history(scripted, registry):
    class Stopper(Hooks):
        def before_model_call(self, turn: TurnView, call: ModelCall) -> ModelCall:
            if call.step == 2:
                raise StopTurn
            return call

    scripted.script(tool_calls(call("get_weather", {"city": "London"})), text("never sent"))
    finished, _, history = _run(scripted, registry, Stopper())
    assert finished.stopped_by == "user"
    assert len(scripted.chat_requests()) == 1
    assert history.messages[-1]["role"] == "assistant"


def test_the_loops_own_repeat_hook_still_answers_identical_calls(scripted, registry):
    same = call("get_weather", {"city": "London"})
    scripted.script(tool_calls(same), tool_calls(same), text("Cold."))
    recorder = Recorder()
    _, log, _ = _run(scripted, registry, recorder, limits=Limits(repeat_limit=3))
    finished = log.of(ToolCallFinished)
    assert finished[1].repeat_of == finished[0].call_id
    assert recorder.seen.count("after get_weather ok=True") == 1  # the repeat did not run


def test_a_hook_asks_for_another_answer_instead_of_one(scripted, registry):
    """``after_answer``: a note, and the answer leaves the history for one more call with it."""
    class Shorter(Hooks):
        def after_answer(self, turn: TurnView, completed: Completed) -> str | None:
            return "Shorter, please." if len(completed.text) > 10 else None

    scripted.script(text("A long and winding answer."), text("Short."))
    finished, _, history = _run(scripted, registry, Shorter())
    assert finished.stopped_by == "answer" and finished.answer == "Short." and finished.steps == 2
    assert [m["content"] for m in history.messages] == ["go", "Short."]
    again = scripted.chat_requests()[1].body
    assert again["messages"][-1]["content"] == "go\n\nShorter, please." and "tools" in again
