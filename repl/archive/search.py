"""Search every saved session: ``glassloop search TEXT`` and ``/sessions TEXT``.

The journals stay the source of truth; ``sessions/index/search.sqlite3`` beside them is a cache made
from them: one row per turn (question, answers, tool names and arguments; a branch's turns too)
in a plain table, its words in a contentless SQLite FTS5 table whose rowid is the turn's time
in microseconds, so "newest first" is FTS5's own descending rowid order and stops at the limit.
Text in Chinese, Japanese or Korean is indexed a character a word (written between spaces),
so a word of it is found inside a sentence as a phrase of characters.

The index is kept current two ways: the REPL adds each turn at its end (``add_turn``: one row
and the journal's size and time, under a short lock, never an error shown), and every search
first re-reads each journal whose size or time differs from what the index recorded (``/undo``,
``/rewind``, ``/compact``, another REPL, a crash). It looks only at the journals named in the
write log (``journal.WRITTEN``: each journal write appends its id), at the names in the folder
when its time changed (a journal made or removed), and at every journal's size and time when it
last did so 5 minutes ago (a journal edited by hand, or by a glassloop that keeps no log). Every connection is opened and
closed under ``search.sqlite3.lock``, so two REPLs never write at once and a rebuild never
replaces a file another process has open. A damaged index (a file SQLite cannot read, or not of
this layout) is rebuilt from the journals with one line; one another program holds locked is busy,
never damaged: the search says so in one line and the file is left alone. Each word searched for is
a quoted FTS5 string, so no query is FTS5 syntax. A Python whose SQLite lacks FTS5 scans the
journals instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from repl.archive.journal import BRANCH, WRITTEN
from repl.archive.recap import MAX_JOURNAL_BYTES
from tools.safe_io import StoreError, locked, take

INDEX_FILE = "index/search.sqlite3"  # in a folder of its own: its writes leave the journals' folder's time alone
SCHEMA = 1  # PRAGMA user_version: another value is an index of another layout, rebuilt
TABLES = {"turns", "journals", "state", "words"}  # of this layout (FTS5's own tables besides)
FIELD_CHARS = 4000  # of each field indexed: a tool's long argument (a file written) is cut
TURN_LOCK_S = 0.5  # a turn's end waits no longer for the index (the next search catches up)
SEARCH_LOCK_S = 10.0  # a search waits this long for the index's lock and for SQLite's (``Index.wait_s``)
MOST_HITS = 2**63 - 1  # SQLite's largest integer: a larger limit shows every turn found, as this one does
FULL_SCAN_S = 300.0  # journals changed by no glassloop (an edit by hand) are found at most this late
SETTLED_S = 2.0  # a folder time this recent may be followed by a change in the same clock tick
LOG_BYTES = 256 * 1024  # a turn's end that finds the write log this big reads it (a search does anyway)
OPTIMIZE_ROWS = 50_000  # a catch-up that added this many turns merges the index's segments
_CJK = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff])")


class SearchError(Exception):
    """The index could not be used (busy too long, cannot be made again): one line, naming it."""


class OtherLayout(sqlite3.DatabaseError):
    """An index file that is a database, but not one of this layout: made again."""


def _code(exc: sqlite3.Error) -> int:
    """SQLite's primary result code of ``exc`` (0 when it carries none)."""
    return int(getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF


def damaged(exc: sqlite3.Error) -> bool:
    """A file SQLite cannot read as a database, or not as this index; never a busy file, a full
    disk or a query SQLite refused."""
    return isinstance(exc, OtherLayout) or _code(exc) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def busy(exc: sqlite3.Error) -> bool:
    """Another connection (another program's too) holds the index locked."""
    return _code(exc) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


@dataclass(frozen=True)
class TurnText:
    """One turn as indexed: where it is (session, branch, number) and its words."""

    session: str
    branch: int  # 0: the conversation as it stands; k: the k-th branch /rewind kept (``ID@k``)
    turn: int  # its number in its conversation (1: the first question)
    time: float
    question: str
    answer: str
    tools: str

    @property
    def ref(self) -> str:
        return branch_ref(self.session, self.branch)

    def body(self) -> str:
        """What FTS5 indexes (a contentless table: a delete gives it back the same text)."""
        return _spaced("\n".join((self.question, self.answer, self.tools)))


def branch_ref(session: str, branch: int) -> str:
    """What ``--resume`` takes: the session's id, ``ID@k`` for its k-th branch."""
    return f"{session}@{branch}" if branch else session


def _spaced(text: str) -> str:
    return _CJK.sub(r" \1 ", text)


def turn_text(session: str, branch: int, number: int, messages: list[Any], when: float) -> TurnText:
    """The indexed text of one turn's messages (its question first)."""
    question = messages[0].get("content") if isinstance(messages[0], dict) else ""
    answers, calls = [], []
    for m in messages[1:]:
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        if isinstance(m.get("content"), str) and m["content"]:
            answers.append(m["content"])
        for c in m.get("tool_calls") or []:
            if isinstance(c, dict):
                calls.append(f"{c.get('name', '')} {c.get('arguments', '')}")
    return TurnText(session, branch, number, when, _cut(question), _cut("\n".join(answers)), _cut("\n".join(calls)))


def _cut(value: Any) -> str:
    return value[:FIELD_CHARS] if isinstance(value, str) else ""


def journal_turns(path: Path) -> list[TurnText]:
    """Every turn a journal holds, its branches' too, as ``journal.load`` and a branch's resume
    would replay them; damaged lines are skipped, an unreadable journal holds none."""
    session = path.stem
    try:
        with open(path, "rb") as file:
            if os.fstat(file.fileno()).st_size > MAX_JOURNAL_BYTES:
                return []
            lines = file.read().split(b"\n")
    except OSError:
        return []
    messages: list[Any] = []
    times: list[float | None] = []  # when each message's turn ended (its next ``turn`` record)
    started, found = 0.0, []
    for line in lines:
        try:
            record = json.loads(line) if line.strip() else None
        except (ValueError, RecursionError):
            continue
        if not isinstance(record, dict):
            continue
        kind = record.get("kind")
        if kind == "meta" and not started:
            started = _number(record.get("time"))
        elif kind == "message" and isinstance(record.get("message"), dict):
            messages.append(record["message"])
            times.append(None)
        elif kind == "truncate" and type(record.get("length")) is int and 0 <= record["length"] <= len(messages):
            del messages[record["length"]:], times[record["length"]:]
        elif kind == "turn":
            ended = _number(record.get("time")) or started
            times = [ended if t is None else t for t in times]
        elif kind == BRANCH and type(record.get("branch")) is int and type(record.get("at")) is int:
            found += _turns(session, record["branch"], messages, times, started, record["at"])
    return found + _turns(session, 0, messages, times, started, 0)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and 0 <= value < 1e11 else 0.0


def _turns(session: str, branch: int, messages: list[Any], times: list[float | None], started: float,
           since: int) -> list[TurnText]:
    """The turns of ``messages`` that begin at message ``since`` or later."""
    starts = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"]
    out = []
    for n, (start, end) in enumerate(zip(starts, [*starts[1:], len(messages)][:len(starts)], strict=True), 1):
        if start >= since:
            when = next((t for t in times[start:end] if t is not None), None) or started
            out.append(turn_text(session, branch, n, messages[start:end], when))
    return out


@dataclass(frozen=True)
class Hit:
    turn: TurnText
    field: str  # where the words were found: question, answer or tools
    snippet: list[tuple[str, bool]]  # the text around them, in pieces; True: a word searched for

    @property
    def text(self) -> str:
        return "".join(piece for piece, _ in self.snippet)

    def json(self) -> dict[str, Any]:
        spans, at = [], 0
        for piece, hit in self.snippet:
            if hit:
                spans.append([at, at + len(piece)])
            at += len(piece)
        t = self.turn
        return {"session": t.session, "branch": t.branch, "turn": t.turn,
                "date": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t.time)), "field": self.field,
                "snippet": self.text, "highlights": spans, "resume": f"glassloop --resume {t.ref}"}


def query_words(text: str) -> list[str]:
    """The words searched for (all must occur); punctuation alone is no word."""
    return [w for w in text.split() if any(c.isalnum() for c in w)]


def snippet(turn: TurnText, words: list[str], width: int = 100) -> Hit:
    """Where ``words`` occur in ``turn`` (the first field that has one), ``width`` characters of
    text around them, whitespace made single spaces, control characters and escapes removed."""
    from repl.ui.escape import clean

    pattern = re.compile("|".join(_word_pattern(w) for w in sorted(words, key=len, reverse=True)), re.IGNORECASE)
    fields = (("question", turn.question), ("answer", turn.answer), ("tools", turn.tools))
    name, text = next(((n, t) for n, t in fields if pattern.search(t)), fields[0])
    text = " ".join(clean(text).split())
    first = pattern.search(text)
    start = max(0, (first.start() if first else 0) - width // 3)
    end = min(len(text), start + width)
    pieces: list[tuple[str, bool]] = [("…", False)] if start else []
    at = start
    for m in pattern.finditer(text, start, end):
        pieces += [(text[at:m.start()], False), (m.group(), True)]
        at = m.end()
    pieces.append((text[at:end] + ("…" if end < len(text) else ""), False))
    return Hit(turn, name, [p for p in pieces if p[0]])


def _word_pattern(word: str) -> str:
    escaped = re.escape(word)
    if _CJK.search(word):
        return escaped
    return rf"(?<!\w){escaped}(?!\w)"


def fts_query(words: list[str]) -> str:
    """The FTS5 query of ``words``: each a quoted string (every one must occur), so quotes, ``*``,
    ``:``, ``^``, ``-``, parentheses, ``AND`` and ``NEAR(`` are text searched for, never syntax."""
    return " ".join('"' + _spaced(w).replace('"', '""') + '"' for w in words)


@cache
def fts5_available() -> bool:
    try:
        with closing(sqlite3.connect(":memory:")) as con:
            con.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        return True
    except sqlite3.Error:
        return False


class Index:
    """The search index of the journals in ``folder``; ``say``: one line for the person."""

    def __init__(self, folder: Path, say: Callable[[str], None] = lambda line: None,
                 wait_s: float | None = None) -> None:
        """``wait_s``: how long a search waits for a busy index (default SEARCH_LOCK_S)."""
        self.folder = folder
        self.path = folder / INDEX_FILE
        self.say = say
        self.wait_s = SEARCH_LOCK_S if wait_s is None else wait_s

    @contextmanager
    def _connection(self, timeout: float) -> Iterator[sqlite3.Connection]:
        """An open index under its lock (made when missing); sqlite3.DatabaseError when damaged."""
        self.path.parent.mkdir(mode=0o700, exist_ok=True)
        with locked(self.path, timeout=timeout):
            fresh = not self.path.exists()
            con = sqlite3.connect(self.path, timeout=timeout)
            try:
                if fresh:
                    os.chmod(self.path, 0o600)
                con.execute("PRAGMA synchronous=OFF")  # a cache: a machine crash's damage is rebuilt
                version = con.execute("PRAGMA user_version").fetchone()[0]
                tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if version == 0 and not tables:
                    _create(con)
                elif version != SCHEMA or not TABLES <= tables:
                    raise OtherLayout(f"an index of another layout ({version})")
                yield con
            finally:
                con.close()

    # ---- a turn's end ----------------------------------------------------------------
    def add_turn(self, turn: TurnText, journal: Path) -> None:
        """Index a turn that just ended, when the index holds the turns before it as they are;
        otherwise (after ``/undo``, ``/rewind``, ``/compact``, a resume) the next search reads the
        journal again. A busy or damaged index is left to the next search."""
        if not fts5_available():
            return

        def add(con: sqlite3.Connection) -> None:
            held = con.execute("SELECT count(*), coalesce(max(turn), 0) FROM turns WHERE session = ? AND branch = 0",
                               (turn.session,)).fetchone()
            if tuple(held) == (turn.turn - 1, turn.turn - 1):
                _insert(con, [turn])
                _note_journal(con, journal)
            else:  # /undo, /rewind, /compact or a resume changed the turns before it: read it whole
                con.execute("DELETE FROM journals WHERE session = ?", (turn.session,))
            with contextlib.suppress(OSError):  # no log: nothing to read
                if (self.folder / WRITTEN).stat().st_size > LOG_BYTES:  # no search for long: keep it short
                    self._catch_up(con)

        self._quietly(add)

    def _quietly(self, change: Callable[[sqlite3.Connection], Any]) -> None:
        try:
            with self._connection(TURN_LOCK_S) as con, con:
                change(con)
        except (sqlite3.Error, OSError, StoreError):
            pass  # the journal has it: the next search re-reads that journal

    # ---- searching -------------------------------------------------------------------
    def search(self, text: str, limit: int = 20) -> list[Hit]:
        """The newest ``limit`` turns holding every word of ``text`` (a limit above MOST_HITS is
        all of them, as MOST_HITS is). Raises SearchError when the index is busy longer than
        ``wait_s``, cannot be read, or cannot be made again; only a damaged one is made again."""
        words, limit = query_words(text), min(limit, MOST_HITS)
        if not words or limit < 1 or not self.folder.is_dir():
            return []
        if not fts5_available():
            self.say("this Python's SQLite has no FTS5: searching the journals one by one (slower)")
            return scan(self.folder, words, limit)
        try:
            try:
                return self._search(words, limit)
            except sqlite3.DatabaseError as exc:
                if not damaged(exc):
                    raise
                self._rebuild(exc)
            return self._search(words, limit)
        except StoreError as exc:
            raise SearchError(exc.message) from None
        except (sqlite3.Error, OSError) as exc:
            if isinstance(exc, sqlite3.Error) and busy(exc):
                raise SearchError(f"the search index {self.path} is busy: another program holds it "
                                  f"(waited {self.wait_s:g} s); try again once it is done") from None
            raise SearchError(f"cannot use the search index {self.path}: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None

    def refresh(self) -> None:
        """Bring the index up to the journals, as each search does first (a benchmark's build)."""
        with self._connection(self.wait_s) as con, con:
            self._catch_up(con)

    def _search(self, words: list[str], limit: int) -> list[Hit]:
        with self._connection(self.wait_s) as con:
            with con:
                self._catch_up(con)
            rows = con.execute(
                "SELECT session, branch, turn, time, question, answer, tools FROM turns WHERE id IN "
                "(SELECT rowid FROM words WHERE words MATCH ? ORDER BY rowid DESC LIMIT ?) ORDER BY id DESC",
                (fts_query(words), limit)).fetchall()
        return [snippet(TurnText(*row), words) for row in rows]

    def _catch_up(self, con: sqlite3.Connection) -> None:
        """Re-read each journal that changed since it was indexed; forget the ones gone. Looked at:
        the journals named in the write log, and when the folder's time changed, the names in it
        (a journal made or removed); every journal's size and time once FULL_SCAN_S have passed
        since that was last done (a journal edited by hand)."""
        started, folder_ns = time.time(), self.folder.stat().st_mtime_ns
        state = dict(con.execute("SELECT key, value FROM state").fetchall())
        full = started - float(state.get("scanned", 0)) >= FULL_SCAN_S
        names = self._written()
        if full:
            looked = self._journals(None)
            known = {s: (size, ns) for s, size, ns in con.execute("SELECT session, size, mtime_ns FROM journals")}
        else:
            if state.get("folder") != str(folder_ns):
                held = {name[:-6] for name in os.listdir(self.folder) if name.endswith(".jsonl")}
                indexed = {s for (s,) in con.execute("SELECT session FROM journals")}
                names |= (held - indexed) | (indexed - held)
            looked = self._journals(names)
            known = {s: (size, ns) for s in names
                     for size, ns in con.execute("SELECT size, mtime_ns FROM journals WHERE session = ?", (s,))}
        for session in known.keys() - looked.keys():
            _delete(con, "session = ?", (session,))
            con.execute("DELETE FROM journals WHERE session = ?", (session,))
        added = 0
        for session, seen in looked.items():
            if known.get(session) != seen:
                _delete(con, "session = ?", (session,))
                turns = journal_turns(self.folder / f"{session}.jsonl")
                _insert(con, turns)
                added += len(turns)
                con.execute("INSERT OR REPLACE INTO journals VALUES (?, ?, ?)", (session, *seen))
        if added >= OPTIMIZE_ROWS:
            con.execute("INSERT INTO words(words) VALUES ('optimize')")
        settled = started - folder_ns / 1e9 > SETTLED_S  # else a change in the same clock tick may hide
        con.executemany("INSERT OR REPLACE INTO state VALUES (?, ?)",
                        [("folder", str(folder_ns) if settled else ""),
                         ("scanned", str(started) if full else state.get("scanned", "0"))])

    def _written(self) -> set[str]:
        """The journals named in the write log since the last look. The log is taken (renamed)
        and read with the one taken at the last look, whose writers may have written after it."""
        log, taken = self.folder / WRITTEN, self.path.parent / "written.taken"
        newest = taken.with_name("written.new")
        with contextlib.suppress(FileNotFoundError):
            take(log, newest)
        names: set[str] = set()
        for path in (taken, newest):
            with contextlib.suppress(FileNotFoundError):
                names.update(path.read_text(encoding="utf-8", errors="replace").split())
        with contextlib.suppress(FileNotFoundError):
            if newest.exists():
                take(newest, taken)
            else:  # read at two looks now: any write that raced the first is in
                taken.unlink()
        return {n for n in names if "/" not in n and n not in (".", "..")}

    def _journals(self, names: set[str] | None) -> dict[str, tuple[int, int]]:
        """Size and time of the journals ``names`` (None: every one in the folder) that exist."""
        found = {}
        if names is None:
            with os.scandir(self.folder) as entries:
                for entry in entries:
                    if entry.name.endswith(".jsonl") and entry.is_file():
                        info = entry.stat()
                        found[entry.name[:-6]] = (info.st_size, info.st_mtime_ns)
            return found
        for name in names:
            with contextlib.suppress(OSError):
                info = (self.folder / f"{name}.jsonl").stat()
                if stat.S_ISREG(info.st_mode):
                    found[name] = (info.st_size, info.st_mtime_ns)
        return found

    def _rebuild(self, why: Exception) -> None:
        """A damaged index made again from the journals (the next search's catch-up fills it)."""
        with locked(self.path, timeout=self.wait_s):
            for path in (self.path, Path(f"{self.path}-journal")):
                path.unlink(missing_ok=True)
        sessions = sum(1 for p in self.folder.glob("*.jsonl"))
        self.say(f"the search index {self.path} was damaged ({why}); rebuilt it from the {sessions} "
                 "saved session" + ("" if sessions == 1 else "s"))


def _create(con: sqlite3.Connection) -> None:
    con.executescript(f"""
        CREATE TABLE turns(id INTEGER PRIMARY KEY, session TEXT NOT NULL, branch INTEGER NOT NULL,
                           turn INTEGER NOT NULL, time REAL NOT NULL, question TEXT, answer TEXT, tools TEXT);
        CREATE INDEX turns_of_session ON turns(session, branch, turn);
        CREATE TABLE journals(session TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER);
        CREATE TABLE state(key TEXT PRIMARY KEY, value TEXT);
        CREATE VIRTUAL TABLE words USING fts5(body, content='', tokenize='unicode61 remove_diacritics 2');
        PRAGMA user_version = {SCHEMA};
    """)


def _insert(con: sqlite3.Connection, turns: list[TurnText]) -> None:
    """Each turn a row; its id the turn's time in microseconds, or when taken (turns of one old
    journal share its start time) the first free one after the ids taken from there on."""
    for t in turns:
        row = int(t.time * 1_000_000)
        while True:
            try:
                con.execute("INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            (row, t.session, t.branch, t.turn, t.time, t.question, t.answer, t.tools))
                break
            except sqlite3.IntegrityError:
                row = con.execute("SELECT max(id) FROM turns WHERE id BETWEEN ? AND ?",
                                  (row, row + 1_000_000_000)).fetchone()[0] + 1
        con.execute("INSERT INTO words(rowid, body) VALUES (?, ?)", (row, t.body()))


def _delete(con: sqlite3.Connection, where: str, args: tuple[Any, ...]) -> None:
    rows = con.execute(f"SELECT id, session, branch, turn, time, question, answer, tools FROM turns WHERE {where}",
                       args).fetchall()
    for row in rows:  # a contentless table forgets a row given the text it indexed
        con.execute("INSERT INTO words(words, rowid, body) VALUES ('delete', ?, ?)", (row[0], TurnText(*row[1:]).body()))
    con.execute(f"DELETE FROM turns WHERE {where}", args)


def _note_journal(con: sqlite3.Connection, journal: Path) -> None:
    """The journal's size and time as indexed: a search re-reads it when they differ."""
    info = journal.stat()
    con.execute("INSERT OR REPLACE INTO journals VALUES (?, ?, ?)", (journal.stem, info.st_size, info.st_mtime_ns))


def scan(folder: Path, words: list[str], limit: int) -> list[Hit]:
    """The search without an index: every journal read (SQLite without FTS5)."""
    wanted = [re.compile(_word_pattern(w), re.IGNORECASE) for w in words]
    found = [t for path in folder.glob("*.jsonl") for t in journal_turns(path)
             if all(p.search(t.question + "\n" + t.answer + "\n" + t.tools) for p in wanted)]
    found.sort(key=lambda t: t.time, reverse=True)
    return [snippet(t, words) for t in found[:limit]]
