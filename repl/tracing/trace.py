"""JSONL trace of every event, and the reading side for ``/trace``.

One file per session in the state dir. Each line is one event with the run
id, session id, turn and wall time added; the file is flushed per line so a
crash loses nothing already emitted. Secrets are redacted before writing
(``repl.config.redact``). Text deltas are joined per model call and written as one
``text_delta`` record when the call ends (its ``time`` is the first token's):
redaction needs the whole text, a key streamed in pieces would otherwise be
stored in pieces. Reasoning deltas are joined the same way. A crash
mid-answer loses that call's text from the trace (the journal keeps it).
The file is made by the session's first turn: events before it are held, and
a session without a turn leaves no trace file.

The raw request and response bodies of the model calls (``WireRecord``) go to a
capped file beside the trace (``WireLog``, ``ID.wire``), not into it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from repl.config.redact import Redactor
from repl.loop.events import Event, ReasoningDelta, TextDelta, TurnStarted, WireRecord, to_dict
from repl.loop.unicode import json_dumps
from repl.tracing.attached import notes_attached, split_message
from tools.safe_io import atomic_write

PRIVATE_FILE, PRIVATE_FOLDER = 0o600, 0o700  # they hold what the model read: the user's alone


def private_folder(folder: Path) -> None:
    """``folder`` made, with any missing parents, each 0700 whatever the umask (as a shell keeps
    its history); a folder that exists is left as it is. OSError names the folder that could not
    be made (``filename``), or says which part of the path is not a folder."""
    try:
        _private_folder(folder)
    except FileNotFoundError:
        if folder.parent == folder:
            raise
        private_folder(folder.parent)
        _private_folder(folder)  # once more only: under /proc a parent that exists still gives "not found"


def _private_folder(folder: Path) -> None:
    try:
        os.mkdir(folder, PRIVATE_FOLDER)
    except OSError as exc:
        if folder.is_dir():
            return
        if exc.errno in (errno.EEXIST, errno.ENOTDIR):  # not "File exists": which part is in the way
            blocking = next((part for part in (*reversed(folder.parents), folder)
                             if part.exists() and not part.is_dir()), folder)
            raise NotADirectoryError(errno.ENOTDIR, f"{blocking} is not a folder") from None
        raise
    os.chmod(folder, PRIVATE_FOLDER)


def open_private(path: Path, mode: str) -> Any:
    """``path`` opened to append (``mode`` ``"a"`` or ``"ab"``); a new file is made 0600 whatever the umask."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    try:
        fd = os.open(path, flags | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        fd = os.open(path, flags)
    else:
        try:
            os.fchmod(fd, PRIVATE_FILE)
        except OSError:
            os.close(fd)
            raise
    return os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8")


class JsonlWriter:
    """Append-only JSONL file, one flushed line per record, secrets redacted; a new file is
    0600 and a new folder 0700."""

    def __init__(self, path: Path, redact: Redactor | None = None, *, lazy: bool = False,
                 on_error: Callable[[OSError], None] | None = None) -> None:
        """``lazy``: the file is created by the first record (a session without a turn leaves
        none behind); the folder is made now, so a place that cannot hold it fails here.
        ``on_error``: told once when a record cannot be written (the file cannot be made in
        its folder, a full disk), after which records are dropped; without it, ``write`` raises."""
        private_folder(path.parent)
        self.path = path
        self.redact = redact or Redactor()
        self.on_error = on_error
        self.failed = False
        self._file: Any = None
        if not lazy:
            self._open()

    def _open(self) -> Any:
        if self._file is None:
            self._file = open_private(self.path, "a")
            if _ends_mid_line(self.path):  # a crash cut the last record: keep it apart from the next one
                self._file.write("\n")
                self._file.flush()
        return self._file

    @property
    def opened(self) -> bool:
        """Whether this writer has the file open (a lazy one: whether it wrote a record)."""
        return self._file is not None

    def write(self, record: dict[str, Any]) -> None:
        if self.failed:
            return
        line = json_dumps(self.redact.value(record), ensure_ascii=False, default=str)
        try:
            file = self._open()
            file.write(line + "\n")
            file.flush()
        except OSError as exc:
            if self.on_error is None:
                raise
            self.failed = True
            with contextlib.suppress(OSError):  # closing flushes what the failed write left
                self.close()
            self.on_error(exc)

    def close(self) -> None:
        if self._file is not None and not self._file.closed:
            self._file.close()


def _ends_mid_line(path: Path) -> bool:
    with open(path, "rb") as file:
        if file.seek(0, os.SEEK_END) == 0:
            return False
        file.seek(-1, os.SEEK_END)
        return file.read(1) != b"\n"


WIRE_SUFFIX = ".wire"
WIRE_DROPPED = "wire_dropped"  # the first line of a capped file: how many records went


def wire_path(trace_path: Path) -> Path:
    """Where a trace's raw bodies are kept: beside it as ``ID.wire`` (so listings of
    ``*.jsonl`` traces never see it)."""
    return trace_path.with_suffix(WIRE_SUFFIX)


class WireLog:
    """A session's raw request and response bodies (``WireRecord``), one JSON line each,
    secrets redacted, at most ``max_bytes``: a record that would go over first drops the
    oldest ones (the file is rewritten, atomically, down to three quarters of the cap;
    its first line counts what was dropped). A record bigger than half the cap on its
    own is kept without its body (``omitted_bytes`` says how big it was). The trace's events are never dropped."""

    def __init__(self, path: Path, redact: Redactor | None, max_bytes: int) -> None:
        self.path = path
        self.redact = redact or Redactor()
        self.max_bytes = max_bytes
        self._file: Any = None
        self._size = 0

    def write(self, record: dict[str, Any]) -> None:
        line = self._line(self.redact.value(record))
        if len(line) > self.max_bytes // 2:
            line = self._line({**self.redact.value(record), "body": None, "omitted_bytes": len(line)})
        file = self._open()
        if self._size + len(line) > self.max_bytes:
            self._drop_oldest(room=len(line))
            file = self._open()
        file.write(line)
        file.flush()
        self._size += len(line)

    @staticmethod
    def _line(record: dict[str, Any]) -> bytes:
        return (json_dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")

    def _open(self) -> Any:
        if self._file is None:
            self._file = open_private(self.path, "ab")
            if _ends_mid_line(self.path):  # a crash cut the last record
                self._file.write(b"\n")
            self._size = self._file.tell()
        return self._file

    def _drop_oldest(self, room: int) -> None:
        self.close()
        records, dropped = read_wire(self.path)
        lines = [self._line(r) for r in records]
        budget, kept = self.max_bytes * 3 // 4 - room - 64, 0  # 64: the header line
        while kept < len(lines) and budget - len(lines[-1 - kept]) >= 0:
            budget -= len(lines[-1 - kept])
            kept += 1
        header = self._line({"type": WIRE_DROPPED, "records": dropped + len(lines) - kept})
        atomic_write(self.path, lambda out: out.write(header + b"".join(lines[len(lines) - kept:])))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_wire(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The raw records of a ``.wire`` file and how many older ones the cap dropped
    (a missing file has none)."""
    if not path.is_file():
        return [], 0
    records, dropped = [], 0
    for record in read_records(path):
        if record.get("type") == WIRE_DROPPED:
            dropped += record.get("records", 0) if isinstance(record.get("records"), int) else 0
        else:
            records.append(record)
    return records, dropped


Timed = tuple[Event, float]  # an event and its wall time (for joined text: the first token's)
_JOINED = (TextDelta, ReasoningDelta)
MAX_HELD = 200  # events kept before the first turn (notices); more are dropped


class TextJoiner:
    """Holds back a model call's text (or reasoning) deltas and lets them out as one
    event when the call ends (the next event of any other kind, or ``flush()``)."""

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self._held: TextDelta | ReasoningDelta | None = None  # the first delta held
        self._first = 0.0

    def feed(self, event: Event) -> list[Event]:
        """The events ready to be written once ``event`` has arrived, in order."""
        return [ready for ready, _ in self.feed_timed(event)]

    def feed_timed(self, event: Event, now: float | None = None) -> list[Timed]:
        now = time.time() if now is None else now
        held = self._held
        if isinstance(event, _JOINED) and held is not None and type(event) is type(held) and event.step == held.step:
            self._pieces.append(event.text)
            return []
        ready = self.flush_timed()
        if isinstance(event, _JOINED):
            self._held, self._pieces, self._first = event, [event.text], now
            return ready
        return [*ready, (event, now)]

    def flush(self) -> list[Event]:
        return [ready for ready, _ in self.flush_timed()]

    def flush_timed(self) -> list[Timed]:
        if self._held is None:
            return []
        joined = replace(self._held, text="".join(self._pieces))
        self._held, self._pieces = None, []
        return [(joined, self._first)]


def joined_text(events: Iterable[Event]) -> list[Event]:
    """``events`` with each model call's text deltas joined into one."""
    joiner = TextJoiner()
    out = [ready for event in events for ready in joiner.feed(event)]
    return out + joiner.flush()


class Trace:
    """Event subscriber writing the trace file (text joined per model call)."""

    def __init__(self, writer: JsonlWriter, session_id: str, run_id: str, wire: WireLog | None = None) -> None:
        self.writer = writer
        self.session_id = session_id
        self.run_id = run_id
        self.wire = wire  # where raw bodies go; None: they are not kept
        self.wire_error = ""  # why raw bodies stopped being kept (the file could not be written)
        self.turn = 0
        self._text = TextJoiner()
        self._held: list[Timed] | None = None if writer.opened else []  # until the first turn

    @property
    def path(self) -> Path:
        """The trace file (made by the session's first turn)."""
        return self.writer.path

    @property
    def raw_off(self) -> str:
        """Why raw bodies are not being kept ("" while they are)."""
        return self.wire_error or ("" if self.wire else "[trace] raw = false")

    def __call__(self, event: Event) -> None:
        if isinstance(event, WireRecord):
            if self.wire is not None:
                try:
                    self.wire.write({"run": self.run_id, "session": self.session_id, "turn": self.turn,
                                     "time": round(time.time(), 3), **to_dict(event)})
                except OSError as exc:  # the events still go on; /trace --raw says why bodies stopped
                    self.wire.close()
                    self.wire_error = f"cannot write {self.wire.path}: {exc.strerror or exc}"
                    self.wire = None
            return
        for ready in self._text.feed_timed(event):
            self._write(*ready)

    def _write(self, event: Event, at: float) -> None:
        if isinstance(event, TurnStarted):
            held, self._held = self._held or [], None
            for earlier in held:  # notices from before the first turn, under turn 0
                self._write(*earlier)
            self.turn = event.turn
        if self._held is not None:
            if len(self._held) < MAX_HELD:
                self._held.append((event, at))
            return
        record = {"run": self.run_id, "session": self.session_id, "turn": self.turn,
                  "time": round(at, 3), **to_dict(event)}
        self.writer.write(record)

    def close(self) -> None:
        """Write any text still held back, then close the file (events before a first
        turn that never came are dropped: an empty session leaves no file)."""
        for ready in self._text.flush_timed():
            self._write(*ready)
        self.writer.close()
        if self.wire is not None:
            self.wire.close()


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Records of a JSONL file; a truncated or corrupt line, or one nested too deep to read, is skipped."""
    with open(path, encoding="utf-8", errors="replace") as file:
        for line in file:
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(record, dict):
                yield record


def turns(records: Iterable[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Group trace records into turns (a turn starts at ``turn_started``). The notices that
    said which files a turn's message attached, written just before it, go with it, after its
    ``turn_started``; a group they leave empty goes."""
    grouped: list[list[dict[str, Any]]] = []
    for record in records:
        if record.get("type") == "turn_started" or not grouped:
            grouped.append([])
        grouped[-1].append(record)
    for before, group in zip(grouped, grouped[1:], strict=False):
        _take_attached_notes(before, group)
    return [group for group in grouped if group]


def _take_attached_notes(before: list[dict[str, Any]], group: list[dict[str, Any]]) -> None:
    text = group[0].get("user_text")
    paths = {a.path for a in split_message(text)[1]} if isinstance(text, str) else set()
    tail = len(before)  # the notices written after the turn before ended (others of the next turn's start too)
    while paths and tail and before[tail - 1].get("type") == "notice":
        tail -= 1
    taken = [r for r in before[tail:] if notes_attached(r, paths)]
    before[tail:] = [r for r in before[tail:] if not notes_attached(r, paths)]
    group[1:1] = taken
