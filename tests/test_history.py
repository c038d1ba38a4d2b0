"""The history invariant (also in a windowed request) and the journal, including under random event sequences."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from repl.archive.journal import Journal, load
from repl.config.redact import Redactor
from repl.loop.context import ContextWindow
from repl.loop.history import History, check


def _call(i: int) -> dict:
    return {"id": f"c{i}", "name": "list_todos", "arguments": "{}"}


# One random action applied to a history the way the agent, the session and a crash would.
actions = st.lists(st.one_of(
    st.tuples(st.just("user"), st.text(max_size=5)),
    st.tuples(st.just("text"), st.text(max_size=5)),
    st.tuples(st.just("calls"), st.integers(1, 3)),
    st.tuples(st.just("result"), st.integers(0, 2)),
    st.tuples(st.just("end"), st.none()),
    st.tuples(st.just("undo"), st.none()),
    st.tuples(st.just("roundtrip"), st.none()),
), max_size=40)


@settings(max_examples=300, deadline=None)
@given(actions)
def test_history_sent_is_always_valid(seq):
    history = History("sys")
    counter = 0
    for kind, arg in seq:
        if kind == "user":
            history.begin_turn(arg)
        elif kind == "text":
            history.add_assistant(arg)
        elif kind == "calls":
            history.end_turn() if history.pending_call_ids() else None
            calls = [_call(counter + i) for i in range(arg)]
            counter += arg
            history.add_assistant("", calls)
        elif kind == "result":
            pending = history.pending_call_ids()
            if pending:
                history.add_tool_result(pending[min(arg, len(pending) - 1)], "list_todos", "{}")
        elif kind == "end":
            history.end_turn()
        elif kind == "undo":
            history.drop_last_turn()
        elif kind == "roundtrip":
            history = History.from_json(json.loads(json.dumps(history.to_json())))
        # what a request would carry at a turn boundary is always valid
        snapshot = History.from_json(json.loads(json.dumps(history.to_json())))
        messages = snapshot.for_request()
        assert check(messages[1:]) == []
        fitted, _ = ContextWindow(refill=1.0).fit(messages, None, 20)
        assert check(fitted[1:]) == []
        assert fitted[0]["role"] == "system"


def test_end_turn_answers_pending_calls_and_drops_unanswered_question():
    history = History("sys")
    history.begin_turn("q")
    history.add_assistant("", [_call(1), _call(2)])
    history.add_tool_result("c1", "list_todos", "{}")
    history.end_turn()
    assert check(history.messages) == []
    assert json.loads(history.messages[-1]["content"])["error"]["type"] == "interrupted"
    history.begin_turn("failed question")
    history.end_turn()
    assert history.messages[-1]["role"] == "tool"


def test_journal_replays_appends_and_truncations(tmp_path):
    path = tmp_path / "s.jsonl"
    history = History("sys")
    journal = Journal(path, Redactor(["sk-secret-value"]), {"session": "s"})
    history.begin_turn("first sk-secret-value")
    history.add_assistant("one")
    journal.sync(history)
    history.begin_turn("second")
    history.add_assistant("", [_call(1)])
    journal.sync(history)
    history.end_turn()  # interrupted mid-turn
    journal.sync(history)
    history.drop_last_turn()
    history.begin_turn("third")
    history.add_assistant("three")
    journal.sync(history)
    journal.close()
    meta, messages = load(path)
    assert meta["session"] == "s"
    assert [m["content"] for m in messages] == ["first [redacted]", "one", "third", "three"]
    assert "sk-secret-value" not in path.read_text()
    with open(path, "a") as f:
        f.write('{"kind": "message", "message": {"role": "user", "con')  # a crash mid-line
    assert len(load(path)[1]) == 4
