"""``@path`` in a message: the file's text goes with it; ``@SERVER:URI``: an MCP server's resource.

A mention is ``@`` at the start of a word. The file is read as the ``read_file`` tool reads
it (``tools.files.read_mentioned``: the same root, sandbox and caps), so a mention can
never reach what the model's own tool could not. A path outside the root, a symlink out
of it, a folder, a binary or too large a file refuses the message (one line each: the
person meant that file); a name that is no file at all (``@alice``) stays plain text.
A resource is read from its server (``tools.mcp_offers``: text only, capped as a file is); one
it refuses refuses the message too. The text is appended to the message, so the journal and
the trace keep what was sent.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from repl.loop.history import ATTACHED
from tools.files import MAX_COMPLETIONS, complete_path, read_mentioned
from tools.mcp_offers import Resource, parse_mention
from tools.results import ToolError

ReadResource = Callable[[str, str], tuple[str, int]]  # (server, uri) → its text (capped), its length

MENTION = re.compile(r"(?<!\S)@(\S+)")
TRAILING = ".,;:!?)]}'\""  # punctuation after a mention ("see @notes.txt.") is not part of the path


@dataclass(frozen=True)
class Attachment:
    path: str  # relative to the root; a resource: SERVER:URI
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


def find_mentions(text: str, root: Path, servers: Collection[str] = (),
                  read_resource: ReadResource | None = None) -> Mentions:
    """The files ``text`` mentions, read inside ``root``, and the resources of ``servers`` it
    names, read with ``read_resource``; each once."""
    found = Mentions()
    seen: set[str] = set()
    named_servers = set(servers)
    for match in MENTION.finditer(text):
        name = match.group(1).rstrip(TRAILING)
        if not name or name in seen:
            continue
        seen.add(name)
        if (resource := parse_mention(name, named_servers)) and read_resource is not None:
            try:
                found.attachments.append(Attachment(name, *read_resource(*resource)))
            except ToolError as exc:
                found.refused.append(f"@{name} not attached: {exc.message}")
            continue
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



def complete_mention(root: Path, resources: Iterable[Resource], prefix: str) -> list[str]:
    """What may follow ``@``: paths inside ``root``, then the resources (``SERVER:URI``) offered."""
    paths = complete_path(root, prefix)
    named = (r.mention for r in resources if r.mention.startswith(prefix))
    return [*paths, *itertools.islice(named, max(0, MAX_COMPLETIONS - len(paths)))]


def typed_part(message: str) -> str:
    """A sent message without the files attached to it: what was typed (``/edit`` puts it back,
    and its mentions are read again when it is sent)."""
    return message.split(ATTACHED, 1)[0]
