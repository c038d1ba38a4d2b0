"""What a resume shows before its session is built (``repl.archive.recap.peek``) is what the
session, once built from the whole journal, holds: the last turns, the counts, the totals.

The journals are real ones (a session's turns against the scripted server, with an undo and a
compaction); ``peek`` declines, never guesses, for a journal a crash left mid-turn and a file
that is no regular file (the damage kinds: ``reliability/test_damaged_journal.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from repl.archive.journal import Journal
from repl.archive.recap import Peek, peek, peek_session, recap
from repl.config.redact import Redactor
from repl.loop.history import History
from repl.session import commands
from repl.session.chat import ChatSession
from tests.fakeserver import call, text, tool_calls
from tests.support import StubUI


def shown_by_session(s: ChatSession, key: str) -> tuple[Any, ...]:
    """The recap, counts and totals of ``key`` resumed the whole way."""
    again = ChatSession(s.settings, StubUI(), interactive=False)
    assert again.resume(key, show=False)
    earlier, shown = recap(again.history.messages)
    figures = (again.session_id, earlier, shown, len(again.history.turn_starts()), len(again.history.messages),
               again.usage, again.cost, again.last_prompt_tokens)
    again.close()
    return figures


def shown_by_peek(p: Peek | None) -> tuple[Any, ...]:
    assert p is not None
    return (p.path.stem, p.earlier, p.shown, p.turns, p.messages, p.usage, p.cost, p.prompt_tokens)


def test_peek_shows_what_the_resumed_session_holds(fake_server, session) -> None:
    fake_server.script(tool_calls(call("list_todos", {})), text("one", usage=(1000, 10, 0)),
                       text("two", usage=(2000, 20, 0)), text("summary"), text("three", usage=(3000, 30, 0)),
                       text("undone", usage=(4000, 40, 0)), text("four", usage=(5000, 50, 0)),
                       text("five **bold**", usage=(6000, 60, 0)))
    for question in ("q1", "q2"):
        session.run_turn(question)
    commands.dispatch(session, "/compact")  # its turn record, and the history replaced (a truncate)
    for question in ("q3", "q4-undone"):
        session.run_turn(question)
    commands.dispatch(session, "/undo")  # a truncate and an undo record
    for question in ("q4", "q5"):
        session.run_turn(question)
    folder = session.settings.data_dir / "sessions"
    expected = shown_by_session(session, session.session_id)
    assert expected[3] >= 3 and expected[5].total > 0 and expected[7] == 6000  # the case is not trivial
    assert shown_by_peek(peek_session(folder, session.session_id)) == expected
    assert shown_by_peek(peek_session(folder, session.session_id[:12])) == expected  # by the id's start
    assert shown_by_peek(peek_session(folder, "last")) == expected


def test_peek_declines_a_turn_left_open_and_files_it_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    history = History("system")
    journal = Journal(path, Redactor(), {"session": "s", "system_prompt": "system"})
    history.begin_turn("question")
    history.add_assistant("answer")
    journal.sync(history)
    journal.close()
    assert peek(path) is not None
    with path.open("a", encoding="utf-8") as file:  # a crash after the question was written
        file.write(json.dumps({"kind": "message", "message": {"role": "user", "content": "cut off"}}) + "\n")
    assert peek(path) is None  # the full load answers it with a placeholder: the slow way shows that
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    assert peek(fifo) is None  # not opened blocking, not read
    assert peek(tmp_path / "missing.jsonl") is None and peek(tmp_path) is None
    assert peek_session(tmp_path / "no-folder", "last") is None
