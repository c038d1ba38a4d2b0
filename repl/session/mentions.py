"""``@path`` in a message: the file's text goes with it.

A mention is ``@`` at the start of a word. The file is read as the ``read_file`` tool reads
it (``tools.files.read_mentioned``: the same root, sandbox and caps), so a mention can
never reach what the model's own tool could not. A path outside the root, a symlink out
of it, a folder, a binary or too large a file refuses the message (one line each: the
person meant that file); a name that is no file at all (``@alice``) stays plain text.
The text is appended to the message, so the journal and the trace keep what was sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from repl.loop.history import ATTACHED
from tools.files import read_mentioned
from tools.results import ToolError

MENTION = re.compile(r"(?<!\S)@(\S+)")
TRAILING = ".,;:!?)]}'\""  # punctuation after a mention ("see @notes.txt.") is not part of the path


@dataclass(frozen=True)
class Attachment:
    path: str  # relative to the root
    text: str  # as sent: at most MAX_OUTPUT_CHARS
    chars: int  # the file's length in characters

    def line(self) -> str:
        lines = self.text.count("\n") + (1 if self.text and not self.text.endswith("\n") else 0)
        said = f"attached {self.path} ({lines:,} line{'' if lines == 1 else 's'}, {self.chars:,} characters)"
        if self.chars > len(self.text):
            said += f"; only its first {len(self.text):,} characters are sent (the read_file limit)"
        return said

    def block(self) -> str:
        fence = "`" * max([3, *(len(run) + 1 for run in re.findall(r"`+", self.text))])
        return f"{ATTACHED.lstrip()}{self.path}:\n{fence}\n{self.text.rstrip(chr(10))}\n{fence}"


@dataclass
class Mentions:
    attachments: list[Attachment] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # one line each: the message is not sent
    plain: list[str] = field(default_factory=list)  # mentions of no file, left as typed

    def message(self, text: str) -> str:
        """``text`` with the attached files' text after it."""
        return "\n\n".join([text, *(a.block() for a in self.attachments)])


def find_mentions(text: str, root: Path) -> Mentions:
    """The files ``text`` mentions, read inside ``root``; each file once."""
    found = Mentions()
    seen: set[str] = set()
    for match in MENTION.finditer(text):
        name = match.group(1).rstrip(TRAILING)
        if not name or name in seen:
            continue
        seen.add(name)
        try:
            path, body, chars = read_mentioned(root, name)
        except ToolError as exc:
            if exc.type == "not_found":
                found.plain.append(name)
            else:
                found.refused.append(f"@{name} not attached: {exc.message}")
            continue
        if path not in {a.path for a in found.attachments}:
            found.attachments.append(Attachment(path, body, chars))
    return found



def typed_part(message: str) -> str:
    """A sent message without the files attached to it: what was typed (``/edit`` puts it back,
    and its mentions are read again when it is sent)."""
    return message.split(ATTACHED, 1)[0]
