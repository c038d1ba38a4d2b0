"""The files a message carried (``@path``), read back from the message as the trace keeps it.

A mention appends each file's text to what was typed (``repl.session.mentions``): after
``ATTACHED``, a block ``Attached file PATH:`` with the text in a fence longer than any
run of backticks in it. The session notes each one (``attached PATH (N lines, ...)``)
just before the turn starts, so the trace writes that notice under the turn before.
The views read a turn as what was typed, titled so, with its files apart, and take
each notice into the turn it speaks of (``trace.turns``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from repl.loop.history import ATTACHED

_BLOCK = re.compile(r"Attached file (?P<path>[^\n]*):\n(?P<fence>`{3,})\n(?P<text>.*?)\n(?P=fence)"
                    r"(?=\n\nAttached file |\Z)", re.DOTALL)


@dataclass(frozen=True)
class Attached:
    """A file sent with a message: its path (relative to the files root) and its text as sent."""

    path: str
    text: str


def split_message(message: str) -> tuple[str, tuple[Attached, ...]]:
    """What was typed and the files attached after it; the whole message and none when what
    follows the marker is not attached files (typed text that happens to hold the marker)."""
    typed, marker, rest = message.partition(ATTACHED)
    if not marker:
        return message, ()
    rest, at = marker.lstrip() + rest, 0
    files: list[Attached] = []
    while at < len(rest):
        block = _BLOCK.match(rest, at)
        if block is None:
            return message, ()
        files.append(Attached(block["path"], block["text"]))
        at = block.end() + 2  # the blank line before the next block
    return typed, tuple(files)


def notes_attached(record: dict[str, Any], paths: set[str]) -> bool:
    """Whether ``record`` is the notice that said one of ``paths`` was attached."""
    message = record.get("message")
    return (record.get("type") == "notice" and isinstance(message, str)
            and any(message.startswith(f"attached {path} (") for path in paths))
