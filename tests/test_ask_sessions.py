"""``glassloop ask`` turns are sessions: journaled as the REPL's (listed by ``/sessions``, found
by ``glassloop search``), continued with ``-c`` / ``--continue`` (the most recent) or
``--session ID`` on the session's history and endpoint, kept nowhere with ``--no-save``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakeserver import FakeServer, text
from tests.support import chat_here, glassloop_here


def _sessions(home: dict[str, str]) -> list[Path]:
    return sorted((Path(home["XDG_DATA_HOME"]) / "glassloop" / "sessions").glob("*.jsonl"))


def _conversation(server: FakeServer, n: int) -> list[tuple[str, Any]]:
    """The user and assistant messages of the ``n``-th chat request."""
    body = server.chat_requests()[n].body
    return [(m["role"], m.get("content")) for m in body["messages"] if m["role"] in ("user", "assistant")]


def _ask(server: FakeServer, home: dict[str, str], *args: str) -> Any:
    return glassloop_here("ask", *args, "--base-url", server.base_url, env=home)


def test_ask_continues_the_most_recent_session_and_search_finds_both_questions(fake_server, home):
    fake_server.script(text("Plums are ripe in August."), text("Figs come later."), text("Both keep well."))
    first = _ask(fake_server, home, "when are orchard plums ripe?", "--json")
    assert first.returncode == 0, first.stderr
    session = json.loads(first.stdout)["session"]
    assert [p.stem for p in _sessions(home)] == [session]

    follow = _ask(fake_server, home, "-c", "and orchard figs?")
    assert follow.returncode == 0, follow.stderr
    assert _conversation(fake_server, 1) == [
        ("user", "when are orchard plums ripe?"), ("assistant", "Plums are ripe in August."),
        ("user", "and orchard figs?")]
    assert f"resumed session {session}: 1 turn" in follow.stderr
    again = _ask(fake_server, home, "--continue", "do they keep?", "--json")
    assert json.loads(again.stdout)["session"] == session
    assert [m for m in _conversation(fake_server, 2) if m[0] == "user"] == [
        ("user", "when are orchard plums ripe?"), ("user", "and orchard figs?"), ("user", "do they keep?")]
    assert [p.stem for p in _sessions(home)] == [session]  # one session, three turns

    found = glassloop_here("search", "orchard", "--json", env=home)
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert sorted(hit["turn"] for hit in hits) == [1, 2] and {hit["session"] for hit in hits} == {session}
    listed = chat_here(home, fake_server.base_url, ["/sessions"])
    assert session in listed.stdout and "when are orchard plums ripe?" in listed.stdout


def test_ask_continues_a_given_session_on_its_endpoint(fake_server, home):
    fake_server.script(text("one"), text("other"), text("two"))
    first = _ask(fake_server, home, "first question", "--model", "m-first", "--json")
    session = json.loads(first.stdout)["session"]
    _ask(fake_server, home, "another session's question")
    assert len(_sessions(home)) == 2
    # no flags: the session's base URL and model, not the configuration's
    resumed = glassloop_here("ask", "--session", session, "second question", env=home)
    assert resumed.returncode == 0, resumed.stderr
    assert _conversation(fake_server, 2) == [("user", "first question"), ("assistant", "one"),
                                            ("user", "second question")]
    assert fake_server.chat_requests()[2].body["model"] == "m-first"
    assert "model m-first (the session's)" in resumed.stderr


def test_no_save_leaves_no_journal_and_nothing_to_continue(fake_server, home):
    fake_server.script(text("kept nowhere"))
    result = _ask(fake_server, home, "a private question", "--no-save", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["session"] is None
    assert _sessions(home) == []
    nothing = _ask(fake_server, home, "-c", "follow-up")
    assert nothing.returncode == 2 and nothing.stdout == ""
    assert nothing.stderr == "error: no saved session with a turn yet\n"
    assert len(fake_server.chat_requests()) == 1


def test_an_unknown_session_is_one_line_and_exit_2(fake_server, home):
    result = _ask(fake_server, home, "--session", "no-such-id", "hello", "--json")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == "error: no saved session matches 'no-such-id' (see /sessions)\n"
    assert fake_server.requests == [] and _sessions(home) == []
