"""JSONL trace of every event, and the reading side for ``/trace``.

One file per session in the state dir. Each line is one event with the run
id, session id, turn and wall time added; the file is flushed per line so a
crash loses nothing already emitted. Secrets are redacted before writing
(``repl.redact``). Text deltas are joined per model call and written as one
``text_delta`` record when the call ends: redaction needs the whole text, a
key streamed in pieces would otherwise be stored in pieces. A crash
mid-answer loses that call's text from the trace (the journal keeps it).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from repl.events import Event, TextDelta, TurnStarted, to_dict
from repl.redact import Redactor
from repl.unicode import valid_text


class JsonlWriter:
    """Append-only JSONL file, one flushed line per record, secrets redacted."""

    def __init__(self, path: Path, redact: Redactor | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.redact = redact or Redactor()
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the session
        if _ends_mid_line(path):  # a crash cut the last record: keep it apart from the next one
            self._file.write("\n")
            self._file.flush()

    def write(self, record: dict[str, Any]) -> None:
        line = valid_text(json.dumps(self.redact.value(record), ensure_ascii=False, default=str))
        self._file.write(line + "\n")
        self._file.flush()

    def sync(self) -> None:
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


def _ends_mid_line(path: Path) -> bool:
    with open(path, "rb") as file:
        if file.seek(0, os.SEEK_END) == 0:
            return False
        file.seek(-1, os.SEEK_END)
        return file.read(1) != b"\n"


class TextJoiner:
    """Holds back a model call's text deltas and lets them out as one ``TextDelta``
    when the call ends (the next event of any other kind, or ``flush()``)."""

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self._step = 0

    def feed(self, event: Event) -> list[Event]:
        """The events ready to be written once ``event`` has arrived, in order."""
        if isinstance(event, TextDelta) and (not self._pieces or event.step == self._step):
            self._step = event.step
            self._pieces.append(event.text)
            return []
        ready = self.flush()
        if isinstance(event, TextDelta):
            self._step, self._pieces = event.step, [event.text]
            return ready
        return [*ready, event]

    def flush(self) -> list[Event]:
        if not self._pieces:
            return []
        joined = TextDelta(self._step, "".join(self._pieces))
        self._pieces = []
        return [joined]


def joined_text(events: Iterable[Event]) -> list[Event]:
    """``events`` with each model call's text deltas joined into one."""
    joiner = TextJoiner()
    out = [ready for event in events for ready in joiner.feed(event)]
    return out + joiner.flush()


class Trace:
    """Event subscriber writing the trace file (text joined per model call)."""

    def __init__(self, writer: JsonlWriter, session_id: str, run_id: str) -> None:
        self.writer = writer
        self.session_id = session_id
        self.run_id = run_id
        self.turn = 0
        self._text = TextJoiner()

    def __call__(self, event: Event) -> None:
        for ready in self._text.feed(event):
            self._write(ready)

    def _write(self, event: Event) -> None:
        if isinstance(event, TurnStarted):
            self.turn = event.turn
        record = {"run": self.run_id, "session": self.session_id, "turn": self.turn,
                  "time": round(time.time(), 3), **to_dict(event)}
        self.writer.write(record)

    def close(self) -> None:
        """Write any text still held back, then close the file."""
        for ready in self._text.flush():
            self._write(ready)
        self.writer.close()


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Records of a JSONL file; a truncated or corrupt line is skipped."""
    with open(path, encoding="utf-8", errors="replace") as file:
        for line in file:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                yield record


def turns(records: Iterable[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Group trace records into turns (a turn starts at ``turn_started``)."""
    grouped: list[list[dict[str, Any]]] = []
    for record in records:
        if record.get("type") == "turn_started" or not grouped:
            grouped.append([])
        grouped[-1].append(record)
    return grouped
