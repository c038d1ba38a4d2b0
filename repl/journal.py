"""The session journal: an append-only JSONL file that survives crashes.

Records: ``meta`` (first line), ``message`` (one history message, in
order), ``truncate`` (the history was cut back to ``length`` messages by
/undo, /reset or a failed turn). Every record is flushed when written, so a
session killed mid-turn resumes with everything up to its last whole line;
``History.from_json`` then repairs an unanswered tool call.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from repl.history import History
from repl.redact import Redactor
from repl.trace import JsonlWriter, read_records
from tools.store import check_regular

MAX_JOURNAL_BYTES = 256 * 1024 * 1024  # a bigger journal is refused on resume, not read


class Journal:
    def __init__(self, path: Path, redact: Redactor, meta: dict[str, Any] | None = None) -> None:
        self.path = path
        self.writer = JsonlWriter(path, redact)
        self.synced: list[dict[str, Any]] = []  # the history messages already in the file
        if meta is not None:
            self.writer.write({"kind": "meta", "time": round(time.time(), 3), **meta})

    def adopt(self, history: History) -> None:
        """Mark the messages of a resumed history that the file already holds as written.

        A repair ``History.from_json`` made on loading (answers to unanswered
        calls, a placeholder answer) is not in the file yet: the next ``sync``
        writes it, so a later resume does not replay a broken history.
        """
        stored = load(self.path)[1] if self.path.exists() else []
        keep = 0
        while keep < min(len(stored), len(history.messages)) and history.messages[keep] == stored[keep]:
            keep += 1
        if keep < len(stored):
            self.writer.write({"kind": "truncate", "length": keep})
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
            self.writer.write({"kind": "truncate", "length": keep})
            del self.synced[keep:]
        for message in messages[keep:]:
            self.writer.write({"kind": "message", "message": message})
            self.synced.append(message)

    def close(self) -> None:
        self.writer.close()


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The meta record and the replayed messages of a journal.

    A journal that is not a regular file (a FIFO would block, ``/dev/zero`` never
    ends) or is over MAX_JOURNAL_BYTES raises ``tools.store.StoreError`` naming it.
    """
    check_regular(path, MAX_JOURNAL_BYTES)
    meta: dict[str, Any] = {}
    messages: list[dict[str, Any]] = []
    for record in read_records(path):
        kind = record.get("kind")
        if kind == "meta" and not meta:
            meta = record
        elif kind == "message" and isinstance(record.get("message"), dict):
            messages.append(record["message"])
        elif kind == "truncate" and isinstance(record.get("length"), int):
            del messages[record["length"] :]
    return meta, messages


def list_sessions(folder: Path) -> list[Path]:
    """Journal files, newest last."""
    if not folder.is_dir():
        return []
    return sorted(folder.glob("*.jsonl"), key=_mtime)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # a dangling symlink: listed first, refused when resumed
        return 0.0


def find_session(folder: Path, key: str) -> Path | None:
    sessions = list_sessions(folder)
    if key == "last":
        return sessions[-1] if sessions else None
    matches = [p for p in sessions if p.stem == key] or [p for p in sessions if p.stem.startswith(key)]
    return matches[-1] if matches else None
