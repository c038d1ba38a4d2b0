"""The seed scenarios through ``run_turn`` on both wire APIs (Chat Completions and Responses).

The same scripted replies drive both routes of the scripted server; the
helpers below read what the client sent in either wire format. Every scenario
ends with the server's history check clean.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from repl.embedded.textchat import TextChatProvider
from repl.loop.agent import Limits, run_turn
from repl.loop.approval import Approver
from repl.loop.events import (
    ApprovalDecided,
    EventLog,
    GuardTripped,
    ModelUsage,
    Notice,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from repl.loop.history import History, check
from tests.fakeserver import FakeServer, call, text, tool_calls
from tests.reliability.helpers import trace_records
from tests.support import ADAPTERS, glassloop_here
from tools.registry import Registry

QUESTION = "今天还有哪些没完成？把优先级最高的一项展开说明。"


@pytest.fixture(params=["chat", "responses"])
def api(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def provider(fake_server: FakeServer, api: str) -> Iterator[Any]:
    p = ADAPTERS[api](name="test", model="m", base_url=fake_server.base_url,
                      api_key="sk-test-secret-0000", max_retries=2, timeout_s=10)
    yield p
    p.close()


def turn(provider: Any, registry: Registry, question: str, *, mode: str = "ask",
         limits: Limits | None = None) -> tuple[Any, EventLog, History]:
    history = History("You are a test assistant.")
    log = EventLog()
    finished = run_turn(history, question, provider=provider, registry=registry,
                        approver=Approver(mode), limits=limits or Limits(), emit=log)
    return finished, log, history


# ---- reading either wire format ------------------------------------------------

def sent(server: FakeServer, api: str) -> list[dict[str, Any]]:
    """Bodies of the model requests, in order; none went to the other API's path."""
    assert not server.requests_to(_other(api))
    return [r.body for r in server.requests_to(api)]


def _other(api: str) -> str:
    return "chat" if api == "responses" else "responses"


def tool_results(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(call id, parsed result) of every tool result in the request, in order."""
    if "messages" in body:
        return [(m["tool_call_id"], json.loads(m["content"])) for m in body["messages"] if m["role"] == "tool"]
    return [(i["call_id"], json.loads(i["output"])) for i in body["input"]
            if i.get("type") == "function_call_output"]


def call_ids(body: dict[str, Any]) -> list[str]:
    """Ids of every tool call the request replays, in order."""
    if "messages" in body:
        return [c["id"] for m in body["messages"] for c in m.get("tool_calls") or []]
    return [i["call_id"] for i in body["input"] if i.get("type") == "function_call"]


def last_result(body: dict[str, Any]) -> dict[str, Any]:
    return tool_results(body)[-1][1]


# ---- the seed scenarios -------------------------------------------------------------

def test_list_then_get_then_grounded_answer(fake_server, provider, registry, api):
    fake_server.script(
        tool_calls(call("list_todos", {"status": "todo"})),
        lambda body: tool_calls(call("get_todo", {"todo_id": max(
            last_result(body)["todos"], key=lambda t: t["priority"] == "high")["id"]})),
        lambda body: text("最高优先级：" + last_result(body)["todo"]["detail"], chunk_size=5),
    )
    finished, log, history = turn(provider, registry, QUESTION)
    assert finished.stopped_by == "answer" and finished.steps == 3
    assert [e.name for e in log.of(ToolCallStarted)] == ["list_todos", "get_todo"]
    listed, got = (e.result for e in log.of(ToolCallFinished))
    assert {t["id"] for t in listed["todos"]} == {"todo-002", "todo-003"}
    assert got["todo"]["id"] == "todo-002"
    assert finished.answer == "最高优先级：整理本周完成的接口联调、遗留问题和下周计划。"
    assert "".join(e.text for e in log.of(TextDelta)) == finished.answer
    assert len(log.of(ModelUsage)) == 3
    bodies = sent(fake_server, api)
    assert len(bodies) == 3 and call_ids(bodies[2]) == [cid for cid, _ in tool_results(bodies[2])]
    assert fake_server.history_errors == [] and check(history.messages) == []


def test_parallel_weather_calls_in_one_step(fake_server, provider, registry, api):
    fake_server.script(
        tool_calls(call("get_weather", {"city": "北京"}), call("get_weather", {"city": "上海"})),
        lambda body: text(" / ".join(r["city"] for _, r in tool_results(body))),
    )
    finished, log, _ = turn(provider, registry, "北京和上海今天天气怎么样？")
    assert finished.steps == 2 and len(log.of(ToolCallStarted)) == 2
    results = [e.result for e in log.of(ToolCallFinished)]
    assert [r["ok"] for r in results] == [True, True]
    assert all(r["source"] == "sample data" for r in results)
    second = sent(fake_server, api)[1]
    assert [cid for cid, _ in tool_results(second)] == call_ids(second)  # one result per call, in call order
    assert len(call_ids(second)) == 2
    assert finished.answer == " / ".join(r["city"] for r in results)
    assert fake_server.history_errors == []


def test_calculator_and_add_todo_in_one_step(fake_server, provider, registry, todos_file, api):
    fake_server.script(
        tool_calls(call("calculator", {"expression": "(3+4)*6"}),
                   call("add_todo", {"title": "Pay 42 to Li", "priority": "high"})),
        text("Added."),
    )
    finished, log, _ = turn(provider, registry, "What is (3+4)*6? Add a todo to pay that to Li.", mode="auto")
    by_name = {e.name: e for e in log.of(ToolCallFinished)}
    assert by_name["calculator"].result["value"] == 42 and by_name["add_todo"].ok
    assert [(d.name, d.allowed, d.by) for d in log.of(ApprovalDecided)] == [("add_todo", True, "mode")]
    stored = json.loads(todos_file.read_text(encoding="utf-8"))
    todos = stored["todos"] if isinstance(stored, dict) else stored
    assert any(t["title"] == "Pay 42 to Li" and t["priority"] == "high" for t in todos)
    assert finished.answer == "Added." and fake_server.history_errors == []


@pytest.mark.parametrize("bad_call, error_type", [
    (call("no_such_tool", {}), "unknown_tool"),
    (call("get_todo", '{"todo_id": "todo-0'), "invalid_json"),
])
def test_bad_call_becomes_an_error_result_and_the_model_recovers(
        fake_server, provider, registry, api, bad_call, error_type):
    fake_server.script(tool_calls(bad_call), tool_calls(call("get_todo", {"todo_id": "2"})), text("recovered"))
    finished, log, history = turn(provider, registry, "show todo 2")
    first, second = log.of(ToolCallFinished)
    assert (first.ok, first.error_type) == (False, error_type)
    assert second.ok and second.result["todo"]["id"] == "todo-002"
    assert last_result(sent(fake_server, api)[1])["error"]["type"] == error_type  # the model sees it as data
    assert finished.stopped_by == "answer" and finished.answer == "recovered"
    assert fake_server.history_errors == [] and check(history.messages) == []


def test_max_steps_guard_ends_with_a_tool_free_answer(fake_server, provider, registry, api):
    fake_server.script(*(tool_calls(call("list_todos", {"priority": p})) for p in ("high", "low")),
                       text("final answer without tools"))
    finished, log, _ = turn(provider, registry, "loop", limits=Limits(max_steps=2))
    assert finished.stopped_by == "max_steps" and log.of(GuardTripped)[0].guard == "max_steps"
    bodies = sent(fake_server, api)
    assert len(bodies) == 3 and all("tools" in b for b in bodies[:2]) and "tools" not in bodies[2]
    assert finished.answer == "final answer without tools"
    assert fake_server.history_errors == []


def test_calls_of_an_answer_cut_at_the_token_limit_do_not_run(fake_server, provider, registry, todos_file, api):
    """Responses reports the cut as ``incomplete`` (max_output_tokens), Chat Completions as
    ``length``: a call that looks whole may be cut too, so none runs; each gets a result."""
    before = todos_file.read_bytes()
    fake_server.script(
        tool_calls(call("add_todo", {"title": "Buy milk"}), call("get_todo", '{"todo_id": "todo-0'),
                   finish_reason="length"),
        lambda body: text("cut: " + ", ".join(r["error"]["type"] for _, r in tool_results(body))),
    )
    finished, log, history = turn(provider, registry, "add milk, then show todo 2", mode="auto")
    assert todos_file.read_bytes() == before and not log.of(ApprovalDecided)  # neither ran, nor was asked
    assert [e.finish_reason for e in log.of(ModelUsage)] == ["length", "stop"]
    cut = log.of(ToolCallFinished)
    assert [(e.name, e.ok, e.error_type) for e in cut] == [("add_todo", False, "truncated"),
                                                           ("get_todo", False, "truncated")]
    assert cut[0].result["error"]["message"].startswith(
        "the reply was cut off at the token limit before this call was complete; it did not run")
    assert [e.call_id for e in log.of(ToolCallStarted)] == [e.call_id for e in cut]
    assert any("token limit" in n.message and "2 calls did not run" in n.message for n in log.of(Notice))
    second = sent(fake_server, api)[1]
    assert [cid for cid, _ in tool_results(second)] == call_ids(second)  # each call answered once, in order
    assert finished.stopped_by == "answer" and finished.answer == "cut: truncated, truncated"
    assert fake_server.history_errors == [] and check(history.messages) == []


def test_a_whole_text_call_in_a_reply_cut_at_the_token_limit_does_not_run(fake_server, registry, todos_file):
    """Tool calls written as text (the embedded model's way): the adapter parses a call out of
    the text, but the reply was still cut, so the call is not run, as with native calls."""
    before = todos_file.read_bytes()
    p = TextChatProvider(name="test", model="m", base_url=fake_server.base_url, api_key="k",
                         max_retries=0, timeout_s=10, tool_call_format="text")
    fake_server.script(
        text('{"name": "add_todo", "arguments": {"title": "Buy milk"}}\nAnd then I will', finish_reason="length"),
        text("The reply was cut off."),
    )
    try:
        finished, log, _ = turn(p, registry, "add milk", mode="auto")
    finally:
        p.close()
    assert todos_file.read_bytes() == before
    assert [(e.name, e.error_type) for e in log.of(ToolCallFinished)] == [("add_todo", "truncated")]
    assert finished.answer == "The reply was cut off."


def test_calls_cut_at_the_token_limit_are_shown_and_traced(fake_server, home):
    before = Path(home["GLASSLOOP_TODOS_FILE"]).read_bytes()
    fake_server.script(tool_calls(call("add_todo", {"title": "Buy milk"}), finish_reason="length"),
                       text("The call was cut off."))
    result = glassloop_here("--base-url", fake_server.base_url, "--api", "responses", "--yes",
                            env=home, stdin="add milk\n")
    assert result.returncode == 0, result.stderr
    shown = " ".join(result.stdout.split())
    assert "✗ cut off · not run" in shown and "the reply was cut off at the token limit" in shown
    assert "2048 tokens) before its tool calls were complete; 1 call did not run" in shown
    assert Path(home["GLASSLOOP_TODOS_FILE"]).read_bytes() == before
    finished = [r for r in trace_records(home) if r["type"] == "tool_call_finished"]
    assert [(r["name"], r["error_type"]) for r in finished] == [("add_todo", "truncated")]
    assert fake_server.history_errors == []


def test_cli_ask_json_over_the_responses_api(fake_server, home):
    fake_server.script(tool_calls(call("list_todos", {"status": "todo"})),
                       tool_calls(call("get_todo", {"todo_id": "todo-002"})),
                       text("写周报优先级最高。", usage=(300, 20, 128, 5)))
    result = glassloop_here("ask", QUESTION, "--json", "--api", "responses",
                            "--base-url", fake_server.base_url, env=home)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["answer"] == "写周报优先级最高。"
    assert payload["stopped_by"] == "answer" and payload["steps"] == 3
    calls = [e["name"] for e in payload["trace"] if e["type"] == "tool_call_started"]
    assert calls == ["list_todos", "get_todo"]
    bodies = sent(fake_server, "responses")
    assert len(bodies) == 3 and all(b["store"] is False for b in bodies)
    assert fake_server.history_errors == []
