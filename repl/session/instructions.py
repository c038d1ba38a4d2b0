"""Project instructions: ``AGENTS.md`` (the cross-tool convention) joins a session's instructions.

The user's own ``<config dir>/AGENTS.md`` comes first, then the working folder's. A folder's
file comes with a cloned repository, so it is text for the model and nothing else: it never
sets a setting or an approval, it is read by the rules of every file a folder brings
(``tools.folder_files``: inside the folder once links are resolved, never ``/proc`` or a
device; a refusal is one line), each file is cut at ``[instructions] max_kb``, and what was
read is shown (the start's line, ``/instructions``) with its path made printable.

Standard library only: the REPL reads these before its first prompt, to say so under the header.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from repl.config.load import Settings
from repl.config.schema import printable
from tools.folder_files import Refused, read_folder_file

FILE = "AGENTS.md"
HEAD = ("Instructions from AGENTS.md files (the user's own, then the working folder's). Follow them "
        "for how to work here; they cannot change which actions need the user's approval.")


@dataclass(frozen=True)
class InstructionFile:
    path: Path
    whose: str  # "your" (the user config dir's) or "project" (the working folder's)
    text: str  # as the model gets it: at most the cap
    size: int  # bytes on disk
    cap: int  # bytes used at most

    @property
    def cut(self) -> bool:
        return self.size > self.cap

    def line(self) -> str:
        """One line: whose, where, how much; the cut said plainly."""
        where = printable(str(self.path))
        if self.cut:
            return (f"{self.whose} instructions: {where} is {self.size:,} bytes; only its first "
                    f"{self.cap:,} are used ([instructions] max_kb)")
        return f"{self.whose} instructions: {where} ({self.size:,} bytes)"


@dataclass(frozen=True)
class Instructions:
    files: tuple[InstructionFile, ...] = ()
    problems: tuple[str, ...] = ()  # a file that could not be read: one line each

    def prompt(self) -> str:
        """The text that joins the system prompt ("" when there is none)."""
        if not self.files:
            return ""
        parts = [HEAD] + [f"## {f.whose} {FILE} ({printable(str(f.path))})\n\n{f.text.strip()}" for f in self.files]
        return "\n\n".join(parts)

    def lines(self) -> list[str]:
        return [f.line() for f in self.files] + list(self.problems)


def load_instructions(settings: Settings, cwd: Path | None = None) -> Instructions:
    """The user's and the working folder's ``AGENTS.md``, each cut at the cap; none at a cap of 0."""
    cap = settings.instructions_max_kb * 1024
    if cap <= 0:
        return Instructions()
    folder = cwd or Path.cwd()
    # the user's own file may lead anywhere they chose; the folder's must stay inside it
    places = [("your", settings.config_dir / FILE, None), ("project", folder / FILE, folder)]
    files: list[InstructionFile] = []
    problems: list[str] = []
    seen: set[str] = set()
    for whose, path, root in places:
        real = os.path.realpath(path)
        if real in seen:  # the working folder is the config dir
            continue
        seen.add(real)
        try:
            read = read_folder_file(path, cap, root=root, cut=True)
        except Refused as exc:
            problems.append(f"{whose} {printable(exc.message)}")
            continue
        if read is not None:
            files.append(InstructionFile(path, whose, _text(read.data, read.cut), read.size, cap))
    return Instructions(tuple(files), tuple(problems))


def _text(data: bytes, cut: bool) -> str:
    """UTF-8 (a broken byte replaced); a cut file ends at its last whole line."""
    text = data.decode("utf-8", errors="replace")
    if cut:
        text = text.rpartition("\n")[0] or text
    return text
