"""Tool results as compact text for the local profiles (``compact_results``).

The small local model rereads every tool result in the next request; sending
``key: value`` lines instead of JSON saves about a third of those tokens. These
tests run the real tools and check that the compact text keeps every value the
answer needs (ids, titles, statuses, numbers, Chinese text), keeps failures
explicit, stays within the limit, and that only the request is compact: the
history (what the trace, the journal and /trace show) keeps the JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from repl.config.load import load_settings
from repl.config.settings import EMBEDDED_PROFILES
from repl.embedded.compact import compact_result
from repl.embedded.dialect import Dialect
from repl.embedded.textcalls import RESULT_CLOSE, RESULT_OPEN, to_text_messages
from repl.embedded.textchat import TextChatProvider
from repl.loop.agent import Limits, run_turn
from repl.loop.approval import Approver
from repl.loop.events import EventLog, ToolCallFinished
from repl.loop.history import History
from tests.fakeserver import FakeServer, text
from tools.registry import Registry

LIMIT = 1500


def run(registry: Registry, name: str, arguments: dict[str, Any]) -> str:
    """A real tool's result, as the history stores it."""
    return json.dumps(registry.call(name, json.dumps(arguments)), ensure_ascii=False)


def test_a_todo_list_keeps_every_id_title_status_and_priority(registry: Registry) -> None:
    registry.call("add_todo", json.dumps({"title": "Pay the rent", "priority": "high", "due": "2026-12-01"}))
    stored = run(registry, "list_todos", {})
    compact = compact_result(stored, LIMIT)
    for todo in json.loads(stored)["todos"]:
        line = next(line for line in compact.splitlines() if f"id={todo['id']}," in line)
        for key in ("title", "status", "priority"):
            assert f"{key}={todo[key]}" in line, line
        assert ("due=" in line) == (todo["due"] is not None)
    assert "null" not in compact and '"' not in compact and "ok" not in compact
    assert compact.splitlines()[0] == "todos (4):"  # the count beside the list is said once
    assert "- id=todo-002, title=写周报, status=todo, priority=high" in compact  # Chinese kept as it is
    assert len(compact) < 0.75 * len(stored)


def test_one_record_and_a_note_keep_their_fields(registry: Registry) -> None:
    todo = compact_result(run(registry, "get_todo", {"todo_id": "todo-002"}), LIMIT)
    assert todo == ("todo: {id=todo-002, title=写周报, status=todo, priority=high, "
                    "detail=整理本周完成的接口联调、遗留问题和下周计划。}")
    registry.call("update_todo", json.dumps({"todo_id": "todo-002", "detail": "很长的说明。" * 40}))
    long = compact_result(run(registry, "get_todo", {"todo_id": "todo-002"}), LIMIT).splitlines()
    assert long[:3] == ["todo:", "  id: todo-002", "  title: 写周报"]  # a long one: a field a line
    assert "  detail: " + "很长的说明。" * 40 in long
    stored = run(registry, "add_note", {"text": "发票 INV-42 已付款, 金额 1,250.50 元", "tags": ["财务", "q4"]})
    note = json.loads(stored)["note"]
    compact = compact_result(stored, LIMIT)
    assert compact == (f"note: {{id={note['id']}, text=发票 INV-42 已付款, 金额 1,250.50 元, "
                       f"tags=[财务, q4], created_at={note['created_at']}}}")


def test_calculator_and_weather_keep_their_numbers(registry: Registry) -> None:
    calculated = compact_result(run(registry, "calculator", {"expression": "2480 * 17.5 / 100"}), LIMIT)
    assert calculated == "expression: 2480 * 17.5 / 100\nvalue: 434.0"
    weather = compact_result(run(registry, "get_weather", {"city": "Beijing"}), LIMIT).splitlines()
    assert weather[:5] == ["city: Beijing", "temperature_c: 18", "high_c: 24", "low_c: 11",
                           "condition: clear sky"]


def test_errors_stay_explicit(registry: Registry) -> None:
    missing = compact_result(run(registry, "get_todo", {"todo_id": "todo-999"}), LIMIT)
    assert missing == "error (not_found): no todo todo-999; existing ids: todo-001, todo-002, todo-003"
    invalid = compact_result(run(registry, "add_todo", {"name": "x"}), LIMIT)
    assert invalid.startswith("error (invalid_arguments): invalid arguments for add_todo")
    unknown = compact_result(run(registry, "send_email", {}), LIMIT)
    assert unknown.startswith("error (unknown_tool): no tool named 'send_email'")
    # shapes other tools may return: extra error fields kept, a bare error string, ok false alone
    assert compact_result('{"ok": false, "error": {"type": "http", "message": "503", "status": 503}}',
                          LIMIT) == "error (http): 503; status=503"
    assert compact_result('{"ok": false, "error": "disk full"}', LIMIT) == "error: disk full"
    assert compact_result('{"ok": false}', LIMIT) == "error"
    assert compact_result('{"error": {"type": "x", "message": "y"}}', LIMIT) == "error (x): y"  # no ok key
    # a successful result with a field named error is not a failure
    assert compact_result('{"ok": true, "error": {"message": "none"}}', LIMIT) == "error: {message=none}"


def test_other_shapes_user_and_mcp_tools_return() -> None:
    assert compact_result('{"ok": true}', LIMIT) == "ok"
    assert compact_result('{"ok": true, "result": 42}', LIMIT) == "result: 42"
    assert compact_result('{"ok": true, "result": [1, 2.5, true, "x"]}', LIMIT) == "result: [1, 2.5, true, x]"
    assert compact_result('[]', LIMIT) == "(empty result)"
    # an MCP server's text content with several lines: the lines as they are
    assert compact_result(json.dumps({"ok": True, "content": "line 1\n  line 2"}), LIMIT) == \
        "content:\nline 1\n  line 2"
    # structured content: a big object is written one field per line, its records one per line
    structured = {"ok": True, "content": {"repository": "glassloop", "open_issues": 2, "labels": [],
                                          "issues": [{"number": 13, "title": "Fast local model",
                                                      "assignee": None, "state": "open"},
                                                     {"number": 14, "title": "Docs", "state": "open"}]}}
    assert compact_result(json.dumps(structured), LIMIT).splitlines() == [
        "content:", "  repository: glassloop", "  open_issues: 2", "  issues (2):",
        "  - number=13, title=Fast local model, state=open", "  - number=14, title=Docs, state=open"]
    deep = {"ok": True, "a": {"b": {"c": {"d": {"e": 1}}}}}
    assert compact_result(json.dumps(deep), LIMIT) == 'a: {b={c={d={"e": 1}}}}'


def test_text_that_is_not_json_goes_as_it_is() -> None:
    assert compact_result("plain words, not JSON", LIMIT) == "plain words, not JSON"
    clipped = '{"ok": true, "content": "aaaa …[9000 characters cut]… zzzz"}'[:40]  # cut by the history
    assert compact_result(clipped, LIMIT) == clipped


def test_a_huge_result_is_cut_to_the_limit_at_a_line_end(registry: Registry) -> None:
    for n in range(60):
        registry.call("add_todo", json.dumps({"title": f"任务 {n} " + "x" * 40}))
    stored = run(registry, "list_todos", {})
    compact = compact_result(stored, LIMIT)
    assert len(compact) <= LIMIT < len(compact_result(stored, 10**6))
    body, marker = compact.rsplit("\n", 1)
    assert marker == f"[… {len(compact_result(stored, 10**6))} characters in all; the rest is not shown]"
    assert body.splitlines()[-1].endswith("priority=medium")  # whole lines only
    one_line = json.dumps({"ok": True, "content": "y" * 50_000})
    cut = compact_result(one_line, LIMIT)
    assert len(cut) <= LIMIT and cut.startswith("content: yyy") and cut.endswith("not shown]")
    assert len(compact_result(one_line, 5)) == 5  # a limit too small for the marker: the head


def test_to_text_messages_compacts_only_when_asked(registry: Registry) -> None:
    stored = run(registry, "list_todos", {"status": "todo"})
    history = [{"role": "user", "content": "今天还有哪些没完成？"},
               {"role": "assistant", "content": "", "tool_calls": [
                   {"id": "c1", "name": "list_todos", "arguments": '{"status": "todo"}'}]},
               {"role": "tool", "tool_call_id": "c1", "name": "list_todos", "content": stored}]
    as_json = to_text_messages(history, None, Dialect(text_calls=True))[-1]["content"]
    assert as_json == f"{RESULT_OPEN}{stored}{RESULT_CLOSE}"
    compact = to_text_messages(history, None, Dialect(text_calls=True, compact_results=LIMIT))[-1]["content"]
    assert compact == f"{RESULT_OPEN}{compact_result(stored, LIMIT)}{RESULT_CLOSE}"
    assert history[-1]["content"] == stored  # the history itself is untouched


def test_the_local_profiles_send_compact_results_and_others_json() -> None:
    settings = load_settings(env={})
    for name in EMBEDDED_PROFILES:
        assert settings.providers[name].compact_results == LIMIT, name
    assert all(p.compact_results == 0 for n, p in settings.providers.items() if n not in EMBEDDED_PROFILES)


@pytest.fixture
def compact_provider(fake_server: FakeServer) -> Iterator[TextChatProvider]:
    p = TextChatProvider(name="test", model="m", base_url=fake_server.base_url, api_key="sk-test",
                     max_retries=0, timeout_s=10, tool_call_format="text", compact_results=LIMIT)
    yield p
    p.close()


def test_the_request_is_compact_and_the_history_keeps_the_json(
        fake_server: FakeServer, compact_provider: TextChatProvider, registry: Registry) -> None:
    fake_server.script(
        text('<tool_call>\n{"name": "list_todos", "arguments": {"status": "todo"}}\n</tool_call>'),
        text("还有两项：写周报（高）和回复邮件（中）。"),
    )
    history, log = History("You are a test assistant."), EventLog()
    finished = run_turn(history, "今天还有哪些没完成？", provider=compact_provider, registry=registry,
                        approver=Approver("ask"), limits=Limits(), emit=log)
    assert finished.stopped_by == "answer"
    result = log.of(ToolCallFinished)[0].result
    stored = next(m for m in history.messages if m["role"] == "tool")["content"]
    assert json.loads(stored) == result and '"ok": true' in stored  # the full JSON, as the trace shows it
    sent = fake_server.chat_requests()[1].body["messages"][-1]["content"]
    assert sent.startswith(RESULT_OPEN + "todos (2):\n- id=todo-002, title=写周报, status=todo")
    assert '"ok"' not in sent and stored not in sent
    # step mode shows what is sent
    shown = compact_provider.wire_messages(history.messages[:-1])[-1]["content"]
    assert shown == sent


def test_an_empty_list_says_it_is_empty() -> None:
    """An empty todo list went to the model as "count: 0" alone, and the 0.5B model answered by
    repeating the question: the list's name and "none" say what is empty."""
    assert compact_result('{"ok": true, "count": 0, "todos": []}', LIMIT) == "todos (0): none"
    assert compact_result('{"ok": true, "query": "wifi", "count": 0, "notes": []}', LIMIT).endswith("notes (0): none")


def test_a_count_is_dropped_only_where_the_list_beside_it_says_it() -> None:
    """With "count: 3" before the list the 0.5B model answered "what's on my plate?" with
    "there are 3 todos" and no title: the list's own line ("todos (3):") says how many."""
    listed = '{"ok": true, "count": 2, "todos": [{"id": "t1", "title": "A"}, {"id": "t2", "title": "B"}]}'
    assert compact_result(listed, LIMIT) == "todos (2):\n- id=t1, title=A\n- id=t2, title=B"
    paged = '{"ok": true, "count": 7, "todos": [{"id": "t1", "title": "A"}]}'  # a total, not the page's length
    assert compact_result(paged, LIMIT).splitlines()[0] == "count: 7"
    assert compact_result('{"count": 1, "flags": [true, false], "other": []}', LIMIT).startswith("count: 1")
    assert compact_result('{"count": true, "items": [1]}', LIMIT).startswith("count: true")
