"""The session journal: an append-only JSONL file that survives crashes.

Records: ``meta`` (first line: the session, its endpoint, its system prompt's text and
where its parts end, ``prompt_meta``), ``message`` (one history message, in
order), ``truncate`` (the history was cut back to ``length`` messages by
/undo, /reset or a failed turn), ``branch`` (``/rewind``: the messages from ``at`` on, as
they stand, are kept as branch ``branch``; the ``truncate`` that cuts them follows it). Every record is flushed when written, so a
session killed mid-turn resumes with everything up to its last whole line;
``History.from_json`` then repairs an unanswered tool call.

A journal edited or damaged by hand is checked on loading (``load_checked``):
unreadable lines and records that make no sense are skipped, messages are
repaired (``history.repair``), and what was done comes back as notes for the
user; the history sent after a resume is always valid.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repl.archive.recap import (
    MAX_JOURNAL_BYTES,
    list_sessions,
    matching_session,
    mtime,
    note_record,
)
from repl.archive.typed_numbers import typed_number
from repl.config.redact import Redactor
from repl.loop.history import History, repair
from repl.providers.base import Message, SystemPrompt
from repl.tracing.trace import JsonlWriter
from tools.safe_io import StoreError, check_regular

BRANCH = "branch"
WRITTEN = Path("index") / "written"  # each journal write appends the journal's id: a search reads only those
_BRANCH_LINE = b'{"kind": "branch", '
# how the system prompt's advice and per-session part began in a journal written before the meta
# record said where its parts end: its text is read by them
_OLD_ADVICE, _OLD_SESSION = "\n\nWhen to call a tool: ", "\n\nToday is "


def prompt_meta(prompt: SystemPrompt) -> dict[str, Any]:
    """The meta record's system prompt: its text, which every reader reads, and the lengths of
    its instructions and advice (``saved_prompt`` makes the parts again from them)."""
    return {"system_prompt": prompt.text, "system_parts": [len(prompt.instructions), len(prompt.advice)]}


def saved_prompt(meta: dict[str, Any]) -> SystemPrompt | None:
    """The system prompt a journal's meta record holds; None when it holds none."""
    text, parts = meta.get("system_prompt"), meta.get("system_parts")
    if not isinstance(text, str) or not text:
        return None
    if (isinstance(parts, list) and len(parts) == 2 and all(type(n) is int and n >= 0 for n in parts)
            and sum(parts) <= len(text)):
        advice_at, session_at = parts[0], sum(parts)
        return SystemPrompt(text[:advice_at], text[advice_at:session_at], text[session_at:])
    session_at, advice_at = text.find(_OLD_SESSION), text.find(_OLD_ADVICE)
    session_at = len(text) if session_at < 0 else session_at
    if not 0 <= advice_at < session_at:
        advice_at = session_at  # no advice before the per-session part: none
    return SystemPrompt(text[:advice_at], text[advice_at:session_at], text[session_at:])


class Journal:
    """``lazy``: the file is made when the first message is written (``meta`` first), so
    a session that never had a turn leaves nothing behind and is never listed.
    ``on_error``: told once when a record cannot be written; later records are dropped."""

    def __init__(self, path: Path, redact: Redactor, meta: dict[str, Any] | None = None,
                 *, lazy: bool = False, on_error: Callable[[OSError], None] | None = None) -> None:
        self.path = path
        self.writer = JsonlWriter(path, redact, lazy=lazy, on_error=on_error)
        self.synced: list[Message] = []  # the history messages already in the file
        self.branch = 0  # the number of the last branch /rewind kept in it this run (0: none)
        self._meta = {"kind": "meta", "time": round(time.time(), 3), **meta} if meta is not None else None
        if not lazy and self._meta is not None:
            self._write({})

    def _write(self, record: dict[str, Any]) -> None:
        if self._meta is not None:
            meta, self._meta = self._meta, None
            self.writer.write(meta)
        if record:
            self.writer.write(record)
        if not self.writer.failed:
            _log_write(self.path)

    def note_turn(self, record: dict[str, Any]) -> None:
        """A finished turn's numbers (usage, cost, context): a resumed session continues them."""
        self._write({"kind": "turn", "time": round(time.time(), 3), **record})

    def note_undo(self) -> None:
        """``/undo`` took the last turn back: its numbers stay spent, marked undone."""
        self._write({"kind": "undo"})

    def note_branch(self, at: int, turn: int) -> int:
        """``/rewind``: the messages from ``at`` on (turn ``turn`` and after) become a branch, before
        the ``truncate`` that cuts them; returns its number (1 for a session's first)."""
        number = 1
        if self.path.exists():
            with open(self.path, "rb") as file:
                number += sum(1 for line in file if line.startswith(_BRANCH_LINE))
        self._write({"kind": BRANCH, "branch": number, "at": at, "turn": turn, "time": round(time.time(), 3)})
        self.branch = number
        return number

    def adopt(self, history: History, stored: list[Any] | None = None) -> None:
        """Mark the messages of a resumed history that the file already holds as written.

        A repair ``History.from_json`` made on loading (answers to unanswered
        calls, a placeholder answer) is not in the file yet: the next ``sync``
        writes it, so a later resume does not replay a broken history.
        ``stored``: the file's messages as written (``Loaded.stored``), read again when None.
        """
        if stored is None:
            stored = _replay(self.path)[1] if self.path.exists() else []  # as written, damage included
        keep = 0
        while keep < min(len(stored), len(history.messages)) and history.messages[keep] == stored[keep]:
            keep += 1
        if keep < len(stored):
            self._write({"kind": "truncate", "length": keep})
        self.synced = list(history.messages[:keep])

    def sync(self, history: History) -> None:
        """Append what changed in ``history`` since the last sync.

        Messages are compared by identity (the references kept here keep ids
        from being reused): the history only appends new dicts and cuts from
        the end, so the common prefix is what stays on disk.
        """
        messages = history.messages
        keep = len(self.synced)
        if keep and (keep > len(messages) or messages[keep - 1] is not self.synced[-1]):
            keep = 0
            while keep < min(len(self.synced), len(messages)) and messages[keep] is self.synced[keep]:
                keep += 1
            self._write({"kind": "truncate", "length": keep})
            del self.synced[keep:]
        for message in messages[keep:]:
            self._write({"kind": "message", "message": message})
            self.synced.append(message)

    def close(self) -> None:
        self.writer.close()


@dataclass
class Loaded:
    meta: dict[str, Any]
    messages: list[Message]  # valid: ``History.from_json`` may only need to close the last turn
    notes: list[str] = field(default_factory=list)  # what was skipped or repaired, for the user
    stored: list[Any] = field(default_factory=list)  # the messages as written, damage included (``adopt``)
    turns: list[dict[str, Any]] = field(default_factory=list)  # the ``turn`` records, ``undone`` set by ``undo`` ones


def _log_write(journal: Path) -> None:
    """``journal``'s id appended to ``WRITTEN`` (beside the search index, not among the journals:
    its changes leave the journals' folder's time alone); a search re-reads the journals named."""
    log = journal.parent / WRITTEN
    with contextlib.suppress(OSError):
        try:
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:
            log.parent.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, f"{journal.stem}\n".encode())
        finally:
            os.close(fd)


def load(path: Path) -> tuple[dict[str, Any], list[Message]]:
    """The meta record and the replayed, repaired messages of a journal (see ``load_checked``)."""
    loaded = load_checked(path)
    return loaded.meta, loaded.messages


def load_checked(path: Path, branch: int | None = None) -> Loaded:
    """A journal's meta record and messages, with notes on any damage found; ``branch``: the
    conversation as it stood when ``/rewind`` cut branch ``branch`` off.

    A journal that is not a regular file (a FIFO would block, ``/dev/zero`` never
    ends) or is over MAX_JOURNAL_BYTES raises ``tools.safe_io.StoreError`` naming it, as does
    a branch it does not hold.
    """
    check_regular(path, MAX_JOURNAL_BYTES)
    turns: list[dict[str, Any]] = []
    branches: list[int] = []
    meta, raw, skipped = _replay(path, turns, branches, stop_at=branch)
    if branch is not None and branch not in branches:
        held = f"its branches: {', '.join(f'@{b}' for b in branches)}" if branches else "it has no branch"
        raise StoreError("no_branch", f"session {path.stem} has no branch @{branch} ({held})")
    messages, fixes = repair(raw)
    if not meta:
        skipped["no meta record: the default system prompt is used"] = 1
    elif not isinstance(meta.get("system_prompt", ""), str):
        skipped["ignored a system prompt that is not text"] = 1
        meta = {k: v for k, v in meta.items() if k != "system_prompt"}
    notes = [f"{what} ({n})" if what.startswith("skipped") else what for what, n in skipped.items()]
    return Loaded(meta, messages, notes + fixes, raw, turns)


def _replay(path: Path, turns: list[dict[str, Any]] | None = None, branches: list[int] | None = None,
            stop_at: int | None = None) -> tuple[dict[str, Any], list[Any], dict[str, int]]:
    """(meta, the messages as written, skipped records by reason): the file's own
    arithmetic, so ``truncate`` lengths count what the writer counted. ``turns``, when
    given, collects the ``turn`` records in the same pass (see ``recap.note_record``),
    ``branches`` the numbers of the ``branch`` records; ``stop_at``: the replay ends at that
    branch's record, with the messages it kept."""
    meta: dict[str, Any] = {}
    messages: list[Any] = []
    skipped: dict[str, int] = {}

    def skip(why: str) -> None:
        skipped[f"skipped {why}"] = skipped.get(f"skipped {why}", 0) + 1

    with open(path, encoding="utf-8", errors="replace") as file:
        for line in file:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):  # cut short, not JSON, binary, nested too deep
                skip("unreadable lines")
                continue
            kind = record.get("kind") if isinstance(record, dict) else None
            if kind == "meta" and not meta:
                meta = record
            elif kind == "message" and isinstance(record.get("message"), dict):
                messages.append(record["message"])
            elif kind == "truncate" and type(record.get("length")) is int and 0 <= record["length"] <= len(messages):
                del messages[record["length"] :]
            elif kind in ("turn", "undo"):  # numbers: usage, cost, context share
                if turns is not None:
                    note_record(turns, record)
            elif kind == BRANCH and type(record.get("branch")) is int:
                if branches is not None:
                    branches.append(record["branch"])
                if record["branch"] == stop_at:
                    break
            else:
                skip("records that make no sense" if kind in ("meta", "message", "truncate", BRANCH)
                     else "lines that are not journal records")
    return meta, messages, skipped


@dataclass(frozen=True)
class SessionInfo:
    """One saved session as the picker and ``/sessions`` show it."""

    path: Path
    started: float  # time.time() of the first record (the file's time when that one cannot be shown)
    turns: int  # questions in the conversation
    model: str
    first: str  # the first question
    branches: tuple[int, ...] = ()  # the branches /rewind kept (``--resume ID@k``)

    @property
    def id(self) -> str:
        return self.path.stem


def session_info(path: Path) -> SessionInfo | None:
    """What ``path`` holds; None when it cannot be read (not a regular file, too big, gone)."""
    try:
        check_regular(path, MAX_JOURNAL_BYTES)
        branches: list[int] = []
        meta, messages, _ = _replay(path, branches=branches)
    except (OSError, StoreError):
        return None
    questions = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    first = questions[0].get("content") if questions else ""
    return SessionInfo(path, _started(meta.get("time"), path), len(questions),
                       str(meta.get("model") or ""), first if isinstance(first, str) else "", tuple(branches))


def _started(value: Any, path: Path) -> float:
    """The journal's start time, or its file's when it holds none a clock can show (a
    damaged one may say 1e300 or NaN)."""
    if isinstance(value, (int, float)):
        try:
            time.localtime(value)
            return float(value)
        except (OverflowError, ValueError, OSError):
            pass
    return mtime(path)


def recent_sessions(folder: Path, limit: int = 20) -> list[SessionInfo]:
    """The newest sessions that have at least one turn, newest first."""
    found: list[SessionInfo] = []
    for path in reversed(list_sessions(folder)):
        info = session_info(path)
        if info is not None and info.turns:
            found.append(info)
            if len(found) >= limit:
                break
    return found


def find_session(folder: Path, key: str) -> Path | None:
    """A session by id (or id prefix); ``last``: the newest one with a turn (a branch's
    ``@k`` is the caller's: see ``split_branch``)."""
    if key == "last":
        newest = recent_sessions(folder, limit=1)
        return newest[0].path if newest else None
    return matching_session(folder, key)


def split_branch(key: str) -> tuple[str, int | None]:
    """``ID@k`` as (ID, k); a key without ``@`` as (key, None); NotANumber when ``k`` is no number."""
    session, at, branch = key.partition("@")
    if not at:
        return key, None
    return session, typed_number(branch, "ID@k takes a branch number k")
