"""JSONL trace of every event, and the reading side for ``/trace``.

One file per session in the state dir. Each line is one event with the run
id, session id, turn and wall time added; the file is flushed per line so a
crash loses nothing already emitted. Secrets are redacted before writing:
the configured API keys by value, and anything shaped like a bearer token
or an ``sk-`` key.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from repl.events import Event, TurnStarted, to_dict

_SECRET_SHAPES = re.compile(
    r"(?i)(bearer\s+)[A-Za-z0-9._\-]{8,}|\bsk-[A-Za-z0-9_\-]{8,}"
)
REDACTED = "[redacted]"


class Redactor:
    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self.secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return _SECRET_SHAPES.sub(lambda m: (m.group(1) or "") + REDACTED, text)


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
        line = json.dumps(record, ensure_ascii=False, default=str)
        self._file.write(self.redact(line) + "\n")
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


class Trace:
    """Event subscriber writing the trace file."""

    def __init__(self, writer: JsonlWriter, session_id: str, run_id: str) -> None:
        self.writer = writer
        self.session_id = session_id
        self.run_id = run_id
        self.turn = 0

    def __call__(self, event: Event) -> None:
        if isinstance(event, TurnStarted):
            self.turn = event.turn
        record = {"run": self.run_id, "session": self.session_id, "turn": self.turn,
                  "time": round(time.time(), 3), **to_dict(event)}
        self.writer.write(record)


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
