"""A call repeated identically within a turn (same tool, same canonical arguments) is not
run again, nor asked for again: its result says so and carries the earlier one (issue #13:
the 0.5B model repeats its call at step 2 instead of answering)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from repl.config.settings import Limits
from repl.embedded.textchat import TextChatProvider
from repl.loop.agent import run_turn
from repl.loop.approval import ApprovalRequest, Approver, UserChoice
from repl.loop.events import (
    ApprovalDecided,
    ApprovalRequested,
    EventLog,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)
from repl.loop.history import History, check
from repl.tracing.timeline import format_turn
from tests.fakeserver import FakeServer, call, text, tool_calls
from tests.support import ADAPTERS, glassloop_here
from tools.registry import Registry, tool

ADD = {"title": "Buy milk", "priority": "low"}
ADD_REORDERED = '{"priority": "low",  "title": "Buy milk"}'  # the same call, other key order and spacing


class Person:
    """An approver's asker that answers each question with the next of ``answers`` (an action,
    or a whole ``UserChoice``: edited arguments)."""

    def __init__(self, *answers: str | UserChoice) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    def ask(self, request: ApprovalRequest, validate: Any) -> UserChoice:
        self.asked.append(request)
        answer = self.answers.pop(0)
        return answer if isinstance(answer, UserChoice) else UserChoice(answer)  # type: ignore[arg-type]


def run(provider: Any, registry: Registry, question: str, person: Person | None = None,
        mode: str = "ask", limits: Limits | None = None) -> tuple[TurnFinished, EventLog, History]:
    history, log = History("You are a test assistant."), EventLog()
    finished = run_turn(history, question, provider=provider, registry=registry,
                        approver=Approver(mode, person),  # type: ignore[arg-type]
                        limits=limits or Limits(), emit=log)
    return finished, log, history


def titles(todos_file) -> list[str]:
    stored = json.loads(todos_file.read_text(encoding="utf-8"))
    return [t["title"] for t in (stored["todos"] if isinstance(stored, dict) else stored)]


def counting() -> tuple[Registry, list[str]]:
    """A registry of one read-only tool that records each time it runs."""
    ran: list[str] = []

    @tool
    def lookup(key: str) -> dict:
        """Look a key up.

        Args:
            key: the key.
        """
        ran.append(key)
        return {"key": key, "value": len(ran)}

    return Registry([lookup]), ran


def tool_messages(history: History) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in history.messages if m["role"] == "tool"]


# ---- in-process (the loop's subject) -----------------------------------------------------

def test_an_identical_add_todo_is_asked_for_and_added_once(scripted, registry, todos_file):
    scripted.script(tool_calls(call("add_todo", ADD)), tool_calls(call("add_todo", ADD_REORDERED)),
                    text("Added: Buy milk."))
    person = Person("yes", "yes")
    finished, log, history = run(scripted, registry, "Call add_todo with exactly these arguments: " + json.dumps(ADD),
                                 person)
    assert finished.stopped_by == "answer" and finished.answer == "Added: Buy milk."
    assert len(person.asked) == 1 and len(log.of(ApprovalRequested)) == 1
    assert titles(todos_file).count("Buy milk") == 1
    first, again = log.of(ToolCallFinished)
    assert first.ok and not first.repeat_of
    assert again.repeat_of == first.call_id and again.ok
    result = tool_messages(history)[1]
    assert "already ran" in result["already_ran"]
    assert result["earlier_result"]["todo"]["title"] == "Buy milk"  # the model can answer from it
    assert finished.steps == 3 and finished.tool_calls == 2  # counted as today: the loop stays bounded
    assert scripted.history_errors == [] and check(history.messages) == []


def test_a_repeated_read_only_call_does_not_run_again(scripted):
    registry, ran = counting()
    scripted.script(tool_calls(call("lookup", {"key": "a"})), tool_calls(call("lookup", {"key": "a"})),
                    text("a is 1"))
    finished, log, history = run(scripted, registry, "look a up")
    assert ran == ["a"]
    assert finished.answer == "a is 1"
    started = log.of(ToolCallStarted)
    assert [e.name for e in started] == ["lookup", "lookup"]  # the trace shows both calls
    again = log.of(ToolCallFinished)[1]
    assert again.repeat_of == started[0].call_id
    assert again.result["earlier_result"] == {"key": "a", "value": 1}
    assert check(history.messages) == [] and scripted.history_errors == []


def test_a_call_with_other_arguments_runs(scripted):
    registry, ran = counting()
    scripted.script(tool_calls(call("lookup", {"key": "a"})), tool_calls(call("lookup", {"key": "b"})),
                    text("done"))
    _, log, history = run(scripted, registry, "look a and b up")
    assert ran == ["a", "b"]
    assert [e.repeat_of for e in log.of(ToolCallFinished)] == ["", ""]
    assert check(history.messages) == []


def test_the_repeat_guard_still_ends_an_endless_repeat(scripted):
    registry, ran = counting()
    scripted.script(*(tool_calls(call("lookup", {"key": "a"})) for _ in range(4)), text("stopping"))
    finished, log, history = run(scripted, registry, "loop", limits=Limits(repeat_limit=3))
    assert ran == ["a"]
    assert finished.stopped_by == "repeat" and finished.answer == "stopping"
    assert [e.error_type for e in log.of(ToolCallFinished)] == [None, None, None, "repeated_call"]
    assert check(history.messages) == []


def test_a_denied_call_repeated_is_not_asked_again(scripted, registry, todos_file):
    before = todos_file.read_bytes()
    scripted.script(tool_calls(call("add_todo", ADD)), tool_calls(call("add_todo", ADD)), text("Not added."))
    person = Person("no", "yes")
    finished, log, history = run(scripted, registry, "add buy milk", person)
    assert len(person.asked) == 1  # the "denied, do not retry" rule holds without asking again
    assert todos_file.read_bytes() == before
    first, again = log.of(ToolCallFinished)
    assert first.error_type == again.error_type == "denied"
    assert again.repeat_of == first.call_id
    assert [d.allowed for d in log.of(ApprovalDecided)] == [False]
    assert "not asked again" in tool_messages(history)[1]["error"]["message"]
    assert finished.answer == "Not added." and check(history.messages) == []


def test_a_call_edited_at_approval_is_matched_on_the_arguments_that_ran(scripted, registry, todos_file):
    """The user edited the first call: the model's own arguments never ran, so a later call with
    them is asked for (and runs); a later call with the edited arguments is the one that ran."""
    edited = {"title": "Buy oat milk", "priority": "low"}
    scripted.script(tool_calls(call("add_todo", ADD)), tool_calls(call("add_todo", ADD_REORDERED)),
                    tool_calls(call("add_todo", edited)), text("Added both."))
    person = Person(UserChoice("yes", arguments=edited), "yes")
    finished, log, history = run(scripted, registry, "add buy milk", person)
    assert [r.arguments for r in person.asked] == [ADD, ADD]  # asked again for the model's own
    assert titles(todos_file).count("Buy oat milk") == 1 and titles(todos_file).count("Buy milk") == 1
    first, original, again = log.of(ToolCallFinished)
    assert first.ok and first.result["arguments_edited_by_user"] == edited
    assert original.ok and not original.repeat_of and "already_ran" not in original.result
    assert again.repeat_of == first.call_id and again.ok  # what ran first is not run again
    assert tool_messages(history)[2]["earlier_result"]["todo"]["title"] == "Buy oat milk"
    assert finished.answer == "Added both." and check(history.messages) == []


def test_two_identical_side_effects_in_one_step_are_asked_for_once(scripted, registry, todos_file):
    scripted.script(tool_calls(call("add_todo", ADD), call("add_todo", ADD)), text("Added."))
    person = Person("yes", "yes")
    _, log, history = run(scripted, registry, "add buy milk", person)
    assert len(person.asked) == 1 and titles(todos_file).count("Buy milk") == 1
    first, again = log.of(ToolCallFinished)
    assert again.repeat_of == first.call_id
    assert check(history.messages) == [] and scripted.history_errors == []


def test_a_read_after_a_change_runs_again(scripted, registry, todos_file):
    """A side effect that ran may change what a read-only call returns: it runs again."""
    scripted.script(tool_calls(call("list_todos", {})), tool_calls(call("add_todo", ADD)),
                    tool_calls(call("list_todos", {})), text("done"))
    _, log, _ = run(scripted, registry, "list, add, list", mode="auto")
    lists = [e for e in log.of(ToolCallFinished) if e.name == "list_todos"]
    assert [e.repeat_of for e in lists] == ["", ""]
    assert len(lists[1].result["todos"]) == len(lists[0].result["todos"]) + 1


def test_a_failed_call_may_run_again(scripted):
    tries: list[int] = []

    @tool
    def flaky() -> dict:
        """Fails the first time."""
        tries.append(1)
        if len(tries) == 1:
            raise RuntimeError("busy")
        return {"fine": True}

    scripted.script(tool_calls(call("flaky", {})), tool_calls(call("flaky", {})), text("ok"))
    _, log, _ = run(scripted, Registry([flaky]), "go")
    assert len(tries) == 2
    assert [e.ok for e in log.of(ToolCallFinished)] == [False, True]


# ---- over HTTP: both wire APIs and tool calls as text ---------------------------------------

@pytest.fixture(params=["chat", "responses", "text"])
def http_provider(request: pytest.FixtureRequest, fake_server: FakeServer) -> Iterator[Any]:
    options = dict(name="test", model="m", base_url=fake_server.base_url, api_key="sk-test-secret-0000",
                   max_retries=0, timeout_s=10)
    p = TextChatProvider(**options, tool_call_format="text") if request.param == "text" \
        else ADAPTERS[request.param](**options)
    yield p
    p.close()


def _call_reply(provider: Any, name: str, arguments: dict[str, Any]):
    if isinstance(provider, TextChatProvider):
        return text(f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>')
    return tool_calls(call(name, arguments))


def test_over_http_a_repeated_add_todo_is_approved_and_added_once(fake_server, http_provider, registry, todos_file):
    fake_server.script(_call_reply(http_provider, "add_todo", ADD), _call_reply(http_provider, "add_todo", ADD),
                       text("Added: Buy milk."))
    person = Person("yes", "yes")
    finished, log, history = run(http_provider, registry, "add buy milk", person)
    assert finished.answer == "Added: Buy milk." and finished.steps == 3
    assert len(person.asked) == 1 and titles(todos_file).count("Buy milk") == 1
    assert log.of(ToolCallFinished)[1].repeat_of == log.of(ToolCallFinished)[0].call_id
    last = json.dumps(fake_server.requests[-1].body, ensure_ascii=False)
    assert "already ran" in last  # the model was told, in whatever form its wire takes
    assert fake_server.history_errors == [] and check(history.messages) == []


def test_over_http_a_repeated_read_only_call_does_not_run_again(fake_server, http_provider):
    registry, ran = counting()
    fake_server.script(_call_reply(http_provider, "lookup", {"key": "a"}),
                       _call_reply(http_provider, "lookup", {"key": "a"}),
                       _call_reply(http_provider, "lookup", {"key": "b"}), text("a is 1, b is 2"))
    finished, _, history = run(http_provider, registry, "look a and b up")
    assert ran == ["a", "b"] and finished.answer == "a is 1, b is 2"
    assert fake_server.history_errors == [] and check(history.messages) == []


def test_ask_shows_the_repeat_in_its_progress_and_trace(fake_server, home):
    fake_server.script(tool_calls(call("list_todos", {"status": "todo"})),
                       tool_calls(call("list_todos", {"status": "todo"})), text("写周报和回复邮件。"))
    result = glassloop_here("ask", "还有哪些没完成？", "--json", "--base-url", fake_server.base_url, env=home)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["answer"] == "写周报和回复邮件。" and payload["stopped_by"] == "answer"
    started = [e for e in payload["trace"] if e["type"] == "tool_call_started"]
    finished = [e for e in payload["trace"] if e["type"] == "tool_call_finished"]
    assert finished[1]["repeat_of"] == started[0]["call_id"] and finished[0]["repeat_of"] == ""
    assert f"step 2 repeat list_todos ok: identical to {started[0]['call_id']}, not run again" in result.stderr
    assert any("not run again" in line for line in format_turn(payload["trace"]))
    assert fake_server.history_errors == []
