"""A todo's due date is a date: the day and time a person says ("tomorrow at 3pm", "周五",
"明天下午三点") is resolved when the tool is called, in local time, for every model alike;
what cannot be read as one day is refused with an error the model can act on."""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta
from importlib import util
from pathlib import Path

import pytest

from tests.fakeserver import call, text, tool_calls
from tests.support import glassloop_here
from tools.days import when_of
from tools.registry import Registry
from tools.todos import make_todo_tools


def _todos(home: dict[str, str]) -> list[dict]:
    saved = json.loads(Path(home["GLASSLOOP_TODOS_FILE"]).read_text(encoding="utf-8"))
    return saved["todos"] if isinstance(saved, dict) else saved


def test_a_due_said_as_words_is_stored_as_the_date_it_means(fake_server, home) -> None:
    """The model passes the words the user said; the todo keeps tomorrow's date at 15:00, not
    "tomorrow" (which is wrong the day after)."""
    asked = {"title": "Call mum", "due": "tomorrow at 3pm"}
    fake_server.script(tool_calls(call("add_todo", asked)), text("Added."))
    before = date.today()
    result = glassloop_here("ask", "remind me to call mum tomorrow at 3pm", "--yes",
                            "--base-url", fake_server.base_url, env=home)
    after = date.today()  # the run may cross midnight: either day's tomorrow is right
    assert result.returncode == 0, result.stderr
    added = [t for t in _todos(home) if t["title"] == "Call mum"]
    assert len(added) == 1
    assert added[0]["due"] in {f"{day + timedelta(days=1)} 15:00" for day in (before, after)}


WEDNESDAY = datetime(2026, 12, 2, 10, 17)  # a fixed "now": Wednesday morning, local time


def _resolved(said: str) -> str | None:
    when = when_of(said, WEDNESDAY)
    return when.iso() if when else None


@pytest.mark.parametrize(("said", "due"), [
    ("tomorrow at 3pm", "2026-12-03 15:00"), ("3pm tomorrow", "2026-12-03 15:00"),
    ("tomorrow", "2026-12-03"), ("next Monday", "2026-12-07"), ("Friday", "2026-12-04"),
    ("Wednesday at 5pm", "2026-12-02 17:00"), ("next Friday at 10am", "2026-12-11 10:00"),
    ("in two days", "2026-12-04"), ("Dec 20", "2026-12-20"), ("Dec 2", "2026-12-02"),
    ("March 3rd", "2027-03-03"), ("by Friday", "2026-12-04"),
    ("tomorrow at noon", "2026-12-03 12:00"),
    ("2026-12-24", "2026-12-24"), ("2026-12-24 15:00", "2026-12-24 15:00"),
    ("2026-12-24T15:00", "2026-12-24 15:00"),
])
def test_english_days_and_times_resolve_from_now(said: str, due: str) -> None:
    assert _resolved(said) == due


@pytest.mark.parametrize(("said", "due"), [
    ("周五", "2026-12-04"), ("明天下午三点", "2026-12-03 15:00"), ("下周三之前", "2026-12-09"),
    ("周五前", "2026-12-04"), ("明天", "2026-12-03"), ("后天", "2026-12-04"), ("下下周一", "2026-12-14"),
    ("今晚8点", "2026-12-02 20:00"), ("明晚七点半", "2026-12-03 19:30"), ("明天上午十点一刻", "2026-12-03 10:15"),
    ("周五下午3:30", "2026-12-04 15:30"), ("两天后", "2026-12-04"), ("12月24日", "2026-12-24"),
    ("十二月二十四号下午两点", "2026-12-24 14:00"), ("明年3月8日", "2027-03-08"), ("周末", "2026-12-05"),
    ("明天下午", "2026-12-03"),  # a part of the day without a time: the day
])
def test_chinese_days_and_times_resolve_from_now(said: str, due: str) -> None:
    assert _resolved(said) == due


@pytest.mark.parametrize("said", ["next week", "下周", "下个月", "月底", "someday", "Friday at 3",
                                  "tomorrow at 99:99", "明天二十五点", "in 2 months", "2026-02-30"])
def test_a_span_an_unread_time_or_no_day_resolves_to_nothing(said: str) -> None:
    """A time said but not read ("Friday at 3") is not dropped in silence: nothing is read."""
    assert _resolved(said) is None


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    return Registry(make_todo_tools(tmp_path / "todos.json"))


@pytest.mark.parametrize(("said", "words"), [("someday soon", "not a day that could be read"),
                                              ("next week", "a span of days"),
                                              ("Friday at 3", "not a day that could be read")])
def test_a_due_that_does_not_resolve_is_refused_and_nothing_is_written(
        registry: Registry, tmp_path: Path, said: str, words: str) -> None:
    """The error names what it could not read and the forms it takes, for the model to act on."""
    result = registry.call("add_todo", {"title": "Call mum", "due": said})
    assert result["ok"] is False and result["error"]["type"] == "invalid_arguments"
    message = result["error"]["message"]
    assert repr(said) in message and words in message
    assert "tomorrow at 3pm" in message and "周五" in message and "YYYY-MM-DD" in message  # the forms
    assert not (tmp_path / "todos.json").exists()


def test_an_update_resolves_the_due_and_an_empty_one_clears_it(registry: Registry) -> None:
    registry.call("add_todo", {"title": "Call mum", "due": "2026-12-24"})
    moved = registry.call("update_todo", {"todo_id": 1, "due": "明天下午三点"})["todo"]
    tomorrow = date.today() + timedelta(days=1)
    assert moved["due"] in {f"{tomorrow} 15:00", f"{tomorrow + timedelta(days=1)} 15:00"}
    assert registry.call("update_todo", {"todo_id": 1, "due": ""})["todo"]["due"] is None
    refused = registry.call("update_todo", {"todo_id": 1, "due": "下个月"})
    assert refused["error"]["type"] == "invalid_arguments"
    assert "'下个月'" in refused["error"]["message"]


def test_the_preview_shows_the_date_beside_the_words_said(tmp_path: Path) -> None:
    """The approval card shows the resolved date and the words it came from; the todo stores
    the date alone."""
    tools = {t.name: t for t in make_todo_tools(tmp_path / "todos.json")}
    preview = tools["add_todo"].preview
    assert preview is not None
    args = {"title": "Call mum", "due": "tomorrow at 3pm"}
    tomorrow = date.today() + timedelta(days=1)
    shown = preview(args)["after"]["due"]
    days = (tomorrow, tomorrow + timedelta(1))
    assert shown in {f"{day} 15:00 (tomorrow at 3pm)" for day in days}
    stored = Registry(list(tools.values())).call("add_todo", args)["todo"]["due"]
    assert shown.startswith(stored) and "(" not in stored
    assert preview({"title": "x", "due": "2026-12-24"})["after"]["due"] == "2026-12-24"


@pytest.mark.parametrize(("title", "due", "kept"), [
    ("Remind me to call mum tomorrow at 3pm", "tomorrow at 3pm", "Remind me to call mum"),
    ("Renew the passport by next Friday", "next Friday", "Renew the passport"),
    ("明天上午十点开会", "明天上午十点", "开会"),
    ("周五前交报告", "周五", "交报告"),
    ("Friday drinks", "Friday", "Friday drinks"),  # a day naming the thing, not when it is due
    ("Prepare for Friday's meeting", "Friday", "Prepare for Friday's meeting"),
    ("Tomorrow", "tomorrow", "Tomorrow"),  # never an empty title
])
def test_the_title_leaves_the_day_to_the_due(registry: Registry, title: str, due: str,
                                              kept: str) -> None:
    """A title ending with the day said (or, in Chinese, beginning with it) would say "tomorrow"
    the day after: the day is in the due, as a date."""
    assert registry.call("add_todo", {"title": title, "due": due})["todo"]["title"] == kept
    updated = registry.call("update_todo", {"todo_id": 1, "title": title, "due": due})
    assert updated["todo"]["title"] == kept


@pytest.mark.skipif(util.find_spec("llama_cpp") is None,
                    reason="the grammar's converter comes with llama_cpp")
@pytest.mark.parametrize(("question", "offered"), [
    ("remind me to call mum tomorrow at 3pm", ["tomorrow at 3pm"]),
    ("提醒我明天下午三点去取快递", ["明天下午三点"]),
    ("Meet Ann at 10:30 on Friday", ["10:30 on Friday"]),
    ("Pay rent by Friday, or next Monday at the latest", ["Friday", "next Monday"]),
    ("I need to renew the lease sometime next month", []),  # a span names no day: not offered
])
def test_the_small_model_is_offered_the_day_with_the_time_said(question: str,
                                                                offered: list[str]) -> None:
    """The embedded model's grammar lets the due be only the days the question says, now with
    the time said with the day, so the tool gets "tomorrow at 3pm" and resolves it."""
    from repl.embedded.grammar import tool_grammar

    add_todo = next(t for t in make_todo_tools(Path("t.json")) if t.name == "add_todo")
    grammar = tool_grammar([add_todo.schema()], optional="mentioned", question=question)
    lines = grammar.splitlines()
    rule = next((line for line in lines if line.startswith("call-0-arguments-due ::=")), "")
    values = [json.loads(json.loads(literal)) for literal in re.findall(r'"(?:[^"\\]|\\.)*"', rule)]
    assert sorted(values) == sorted(offered)
