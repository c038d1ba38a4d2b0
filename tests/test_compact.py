"""/compact, /undo of it, cost per call / turn / session and the session budget, on a real ChatSession."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from repl.archive.journal import load
from repl.config.load import ModelPrice, load_settings
from repl.loop.agent import Limits, run_turn
from repl.loop.approval import Approver
from repl.loop.compaction import SUMMARY_HEADING, SUMMARY_REQUEST
from repl.loop.cost import Cost, SessionBudget, price_for, usd
from repl.loop.events import EventLog, GuardTripped, ModelUsage, Usage
from repl.loop.history import History, check
from repl.session import commands
from repl.session.chat import ChatSession
from tests.fakeserver import call, text, tool_calls
from tests.support import SEED_TODOS, StubUI, glassloop_here
from tools.registry import Registry


@pytest.fixture
def session(fake_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for name in ("DATA", "STATE", "CONFIG"):
        monkeypatch.setenv(f"XDG_{name}_HOME", str(tmp_path / name.lower()))
    todos = tmp_path / "todos.json"
    todos.write_text(json.dumps(SEED_TODOS, ensure_ascii=False), encoding="utf-8")
    config = tmp_path / "test.toml"
    config.write_text('[pricing."gpt-4o-mini"]\ninput = 1000.0\ncached_input = 500.0\noutput = 2000.0\n',
                      encoding="utf-8")
    settings = load_settings({"base_url": fake_server.base_url, "approval": "auto", "weather": "sample",
                              "todos_file": str(todos)}, cwd=tmp_path, env={}, config_file=config)
    chat = ChatSession(settings, StubUI(), interactive=False)
    chat.open_journal()
    yield chat
    chat.close()


def user_texts(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def test_compact_summarises_older_turns_and_undo_restores_them(fake_server, session):
    fake_server.script(tool_calls(call("list_todos", {"status": "todo"})), text("two open"),
                       text("second answer"), text("third answer"),
                       text("- todo-002 写周报 is open (high)\n- todo-003 is open"))
    for question in ("what is open?", "second", "third"):
        session.run_turn(question)
    before = [dict(m) for m in session.history.messages]
    commands.dispatch(session, "/compact keep the todo ids")
    summary_request = fake_server.chat_requests()[-1].body
    assert "tools" not in summary_request  # the summary call has no tools
    assert user_texts(summary_request)[:2] == ["what is open?", "second"]
    assert SUMMARY_REQUEST in user_texts(summary_request)[-1] and "keep the todo ids" in user_texts(summary_request)[-1]
    assert "third" not in user_texts(summary_request)  # the last turn stays as it is
    messages = session.history.messages
    assert [m["role"] for m in messages[:2]] == ["user", "assistant"]
    assert messages[1]["content"].startswith(SUMMARY_HEADING) and "todo-002" in messages[1]["content"]
    assert [m["content"] for m in messages[2:]] == ["third", "third answer"]
    assert check(messages) == []
    shown = session.ui.infos[-1]
    assert "compacted 2 turns" in shown and "→" in shown
    before_tokens, after_tokens = (int(x.strip("~").replace(",", "")) for x in
                                   shown.split(": ", 1)[1].split(" tokens")[0].split(" → "))
    assert after_tokens < before_tokens
    assert load(session.journal.path)[1] == messages  # the journal follows
    fake_server.script(text("fourth answer"))
    session.run_turn("fourth")
    assert user_texts(fake_server.chat_requests()[-1].body)[-2:] == ["third", "fourth"]
    commands.dispatch(session, "/undo")  # the fourth turn
    commands.dispatch(session, "/undo")  # the compaction
    assert "undid /compact" in session.ui.infos[-1]
    assert session.history.messages == before
    assert load(session.journal.path)[1] == before
    fake_server.script(text("fifth answer"))
    session.run_turn("fifth")
    assert user_texts(fake_server.chat_requests()[-1].body) == ["what is open?", "second", "third", "fifth"]
    assert fake_server.history_errors == []


def test_compact_needs_two_turns_and_a_failure_changes_nothing(fake_server, session):
    commands.dispatch(session, "/compact")
    assert "nothing to compact" in session.ui.infos[-1]
    fake_server.script(text("one"), text("two"), text(""))  # an empty summary
    session.run_turn("first")
    session.run_turn("second")
    before = list(session.history.messages)
    commands.dispatch(session, "/compact")
    assert "empty summary" in session.ui.errors[-1]
    assert session.history.messages == before and len(session.turns) == 2


def test_cost_per_call_turn_and_session_with_usage_table(fake_server, session):
    fake_server.script(tool_calls(call("list_todos", {}), usage=(1000, 10, 400)),
                       text("done", usage=(1200, 20, 1000)), text("again", usage=(100, 5, 0)))
    session.run_turn("what is open?")
    session.run_turn("and now?")
    price = price_for(session.settings)
    assert price == ModelPrice(1000.0, 500.0, 2000.0)  # [pricing."gpt-4o-mini"] beats the profile's keys
    first = (600 * 1000 + 400 * 500 + 10 * 2000 + 200 * 1000 + 1000 * 500 + 20 * 2000) / 1e6
    assert session.turns[0].cost == Cost(pytest.approx(first), 0)
    assert session.cost.usd == pytest.approx(first + (100 * 1000 + 5 * 2000) / 1e6)
    commands.dispatch(session, "/usage")
    title, columns, rows = session.ui.tables[-1]
    assert rows[0][columns.index("cost")] == f"${first:.2f}" and rows[-1][0] == "all"
    assert rows[-1][columns.index("cost")] == session.cost.text()


def test_unknown_price_is_shown_as_unknown(session):
    assert session.switch(model="some-unpriced-model", price_input=0.0, price_output=0.0)
    assert price_for(session.settings) is None
    assert Cost.of(Usage(10, 0, 5), None).text() == "cost unknown"
    assert (Cost(0.5) + Cost.of(Usage(10, 0, 5), None)).text() == "$0.50 + unknown"
    assert usd(Usage(10, 0, 5), None) is None


def test_session_budget_stops_a_turn_before_the_next_request(fake_server, session):
    assert session.switch(session_budget_tokens=1400)
    fake_server.script(text("first", usage=(1000, 100, 0)),
                       tool_calls(call("list_todos", {}), usage=(300, 20, 0)), text("never sent"))
    assert session.run_turn("one").stopped_by == "answer"
    finished = session.run_turn("two")
    assert finished.stopped_by == "budget"
    assert len(fake_server.chat_requests()) == 2  # stopped before the third request
    guard = [e for e in session.ui.events if isinstance(e, GuardTripped)][-1]
    assert "session budget of 1,400 tokens is spent (1,420 used)" in guard.detail
    assert check(session.history.messages) == []
    assert session.run_turn("three").stopped_by == "budget" and len(fake_server.chat_requests()) == 2
    assert session.history.messages[-1]["role"] == "tool"  # the unanswered question was not kept


def test_currency_budget_in_the_agent_loop(scripted, tmp_path):
    budget = SessionBudget(max_usd=0.05, max_tokens=0, spent_tokens=0, spent_usd=0.04,
                           price=ModelPrice(1000.0, 1000.0, 1000.0))  # $0.001 a token
    scripted.script(tool_calls(call("nothing_here", {}), usage=(20, 5, 0)), text("unreached"))
    log = EventLog()
    finished = run_turn(History("sys"), "go", provider=scripted, registry=Registry([]),
                        approver=Approver("auto"), limits=Limits(), emit=log, budget=budget)
    assert finished.stopped_by == "budget" and len(scripted.chat_requests()) == 1
    assert "$0.05" in log.of(GuardTripped)[0].detail and len(log.of(ModelUsage)) == 1


def test_compact_usage_and_undo_in_the_real_cli(fake_server, home):
    fake_server.script(text("first answer"), text("second answer"), text("- the user said one and two"))
    result = glassloop_here("--base-url", fake_server.base_url, env=home,
                            stdin="one\ntwo\n/compact\n/usage\n/undo\n/usage\n")
    out = result.stdout
    assert result.returncode == 0, result.stderr
    assert "compacted 1 turn into a summary" in out and "undid /compact" in out
    assert "compact" in out.split("compacted 1 turn")[1]  # the /usage row of the summary call
    assert "Traceback" not in out + result.stderr
    assert "$" in out  # gpt-4o-mini has a price: costs are shown


def test_the_summary_calls_usage_names_the_model_that_answered(fake_server, session):
    """Its span's gen_ai.response.model: the summary's answer named another model than asked for."""
    fake_server.script(text("one"), text("two"), text("the summary", model="summary-model-0613"))
    session.run_turn("first")
    session.run_turn("second")
    events = EventLog()
    session.bus.subscribe(events)
    commands.dispatch(session, "/compact")
    assert [e.model for e in events.of(ModelUsage)] == ["summary-model-0613"]
