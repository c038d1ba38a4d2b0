"""Searching saved sessions with what people type: punctuation and FTS5's own syntax are words
searched for; a huge ``--limit`` is refused in one line; an index another program holds locked is
busy, never damaged (never deleted). Real journals, a real index, a real second SQLite connection
in another process."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from repl.archive import search
from tests.fakeserver import text
from tests.support import chat_here, glassloop_here

QUESTIONS = (  # asked in this order: the newest last
    'don\'t forget the e-mail to "Bob"',
    "the mailbox is full",
    "salt and pepper please",
    "salt, then pepper",
    "add a note: milk",
    "buy (oat) milk",
    "the café near the station",
)

# query -> the questions of the turns found, newest first
FOUND = {
    "don't": [QUESTIONS[0]],
    "e-mail": [QUESTIONS[0]],
    '"Bob"': [QUESTIONS[0]],
    '"Bob': [QUESTIONS[0]],
    "mail*": [QUESTIONS[0]],  # the word mail, not a prefix: "mailbox" is not found
    "NEAR(": [QUESTIONS[6]],
    "near(the station)": [QUESTIONS[6]],
    "salt AND pepper": [QUESTIONS[2]],  # and is a word to find
    "note:milk": [QUESTIONS[4]],  # no column filter
    "^milk": [QUESTIONS[5], QUESTIONS[4]],  # not only where milk comes first
    "(oat": [QUESTIONS[5]],
    "milk)": [QUESTIONS[5], QUESTIONS[4]],
    "-milk": [QUESTIONS[5], QUESTIONS[4]],
    "pepper NOT then": [],  # not is a word too, and no turn holds it
    "café": [QUESTIONS[6]],
}

HOLDER = """
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute(sys.argv[2])
con.execute("INSERT OR REPLACE INTO state VALUES ('held', 'by another program')")
print("held", flush=True)
sys.stdin.read()  # until the test closes it
con.execute("ROLLBACK")
"""


@pytest.fixture
def asked(session, fake_server) -> Path:
    """The sessions folder after one session asked QUESTIONS, its index made and marked."""
    for question in QUESTIONS:
        fake_server.script(text("noted"))
        session.ask(question)
    folder = session.journal.path.parent
    assert search.Index(folder).search("noted", limit=100)  # made and caught up
    with sqlite3.connect(folder / search.INDEX_FILE) as con:
        con.execute("INSERT INTO state VALUES ('marker', 'this index')")
    con.close()
    return folder


def marker(folder: Path) -> str | None:
    """The row the test put in the index: gone when the file was deleted and made again."""
    with sqlite3.connect(folder / search.INDEX_FILE) as con:
        row = con.execute("SELECT value FROM state WHERE key = 'marker'").fetchone()
    con.close()
    return row[0] if row else None


@pytest.mark.parametrize("query", list(FOUND))
def test_punctuation_and_fts5_syntax_are_searched_as_words(asked: Path, query: str) -> None:
    said: list[str] = []
    hits = search.Index(asked, said.append).search(query)
    assert [h.turn.question for h in hits] == FOUND[query]
    assert said == [] and marker(asked) == "this index"


def test_a_query_sqlite_refuses_is_an_error_not_a_damaged_index(asked: Path, monkeypatch) -> None:
    monkeypatch.setattr(search, "fts_query", lambda words: " ".join(words))  # as typed: FTS5 syntax
    said: list[str] = []
    with pytest.raises(search.SearchError) as refused:
        search.Index(asked, said.append).search("NEAR(")
    assert "cannot use the search index" in str(refused.value) and "\n" not in str(refused.value)
    assert said == [] and marker(asked) == "this index"  # not rebuilt: the same file


def test_a_huge_limit_is_refused_in_one_line(fake_server, home) -> None:
    fake_server.script(text("noted"))
    chat_here(home, fake_server.base_url, ["buy milk"])
    for limit in ("100000000000000000000", "9" * 5000, "²", "0"):
        run = glassloop_here("search", "milk", "--limit", limit, env=home)
        assert run.returncode == 2 and run.stdout == "", run.stderr
        assert len(run.stderr.splitlines()) == 1 and run.stderr.startswith("error: --limit takes a number of turns")
    found = glassloop_here("search", "milk", "--limit", "1000000", env=home)
    assert found.returncode == 0 and "buy milk" in found.stdout


def test_the_index_clamps_a_limit_past_sqlite_integers(asked: Path) -> None:
    hits = search.Index(asked).search("milk", limit=10**20)
    assert [h.turn.question for h in hits] == [QUESTIONS[5], QUESTIONS[4]]
    assert search.Index(asked).search("milk", limit=0) == []


@pytest.fixture(params=["BEGIN IMMEDIATE", "BEGIN EXCLUSIVE"])
def held(asked: Path, request) -> Iterator[Path]:
    """``asked``'s index held in a write transaction by another process until the test ends."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(asked / search.INDEX_FILE), request.param],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield asked
    finally:
        if holder.stdin is not None:
            holder.stdin.close()
        holder.wait(timeout=20)


def test_an_index_another_program_holds_is_busy_and_kept(held: Path) -> None:
    said: list[str] = []
    with pytest.raises(search.SearchError) as refused:
        search.Index(held, said.append, wait_s=0.2).search("milk")
    line = str(refused.value)
    assert "is busy: another program holds it" in line and "try again" in line and "\n" not in line
    assert said == [] and (held / search.INDEX_FILE).exists()


def test_a_busy_index_is_found_again_once_released(asked: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(asked / search.INDEX_FILE), "BEGIN IMMEDIATE"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    with pytest.raises(search.SearchError):
        search.Index(asked, wait_s=0.2).search("milk")
    assert holder.stdin is not None
    holder.stdin.close()
    assert holder.wait(timeout=20) == 0
    hits = search.Index(asked, wait_s=0.2).search("milk")
    assert [h.turn.question for h in hits] == [QUESTIONS[5], QUESTIONS[4]]
    assert marker(asked) == "this index"


def test_glassloop_search_says_busy_in_one_line(fake_server, home, monkeypatch) -> None:
    fake_server.script(text("noted"))
    chat_here(home, fake_server.base_url, ["buy milk"])
    index = Path(home["XDG_DATA_HOME"]) / "glassloop" / "sessions" / search.INDEX_FILE
    assert index.exists()
    monkeypatch.setattr(search, "SEARCH_LOCK_S", 0.2)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(index), "BEGIN EXCLUSIVE"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        run = glassloop_here("search", "milk", env=home)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=20)
    assert run.returncode == 1 and run.stdout == "" and "Traceback" not in run.stderr
    assert len(run.stderr.splitlines()) == 1 and "is busy: another program holds it" in run.stderr
    assert "damaged" not in run.stderr and index.exists()
    again = glassloop_here("search", "milk", env=home)
    assert again.returncode == 0 and "buy milk" in again.stdout and again.stderr == ""
