"""Your own slash commands: Markdown prompt templates run as ``/name``.

``<user config dir>/commands/NAME.md`` and, in a trusted project, ``./.glassloop/commands/NAME.md``
become ``/NAME``: its text, with ``$ARGUMENTS`` (all that follows the name) and ``$1``, ``$2``…
(its words) put in, is sent as your message. An optional front matter (``---`` lines) may give a
``description:`` for ``/help`` and completion. A project's folder comes with a cloned repository:
its commands are used once ``glassloop trust`` recorded that exact content (the names and bytes
of its files), as for ``./.glassloop/tools``. A file that cannot be a command (unreadable, not
UTF-8, too big, a bad name or a built-in's, or a project's leading out of the project) gives one
line and is left out.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from repl.config.load import Settings
from repl.config.schema import ConfigError, printable
from repl.config.trust import tools_trusted
from tools.folder_files import Refused, read_folder_file

USER_COMMANDS = "commands"  # in the user config dir
PROJECT_COMMANDS = Path(".glassloop") / "commands"
MAX_TEMPLATE_BYTES = 64 * 1024
MAX_TEMPLATES = 200  # command files read from one folder (by name): more is not a set of commands
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}")
PLACEHOLDER = re.compile(r"\$(ARGUMENTS|[1-9][0-9]?)")


@dataclass(frozen=True)
class Template:
    name: str
    body: str
    description: str
    path: Path
    whose: str  # "your" or "project"

    def expand(self, rest: str) -> str:
        """The text to send for ``/name rest``: ``$ARGUMENTS`` is ``rest``, ``$N`` its N-th word
        ("" when there is none); arguments given to a template without a placeholder follow it."""
        rest = rest.strip()
        try:
            words = shlex.split(rest)
        except ValueError:  # an unclosed quote: plain words
            words = rest.split()

        def put(match: re.Match[str]) -> str:
            key = match.group(1)
            if key == "ARGUMENTS":
                return rest
            n = int(key)
            return words[n - 1] if n <= len(words) else ""

        if PLACEHOLDER.search(self.body):
            return PLACEHOLDER.sub(put, self.body).strip()
        return "\n\n".join(p for p in (self.body.strip(), rest) if p)


@dataclass
class Templates:
    by_name: dict[str, Template] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # one line per file left out
    notices: list[str] = field(default_factory=list)  # a project folder not trusted, a name the project took

    def specs(self) -> list[tuple[str, str, Callable[[str], list[str]] | None]]:
        """(name, help, no argument completer) for the prompt's completion."""
        return [(t.name, t.description, None) for t in self.by_name.values()]


@dataclass(frozen=True)
class Source:
    path: Path
    data: bytes | None  # None: could not be read (``problem`` says why)
    problem: str = ""
    real: Path | None = None  # where it was read from, once links are resolved

    def listed(self) -> str:
        """One line for ``glassloop trust``: the command, the file read and its hash, or why not."""
        if self.data is None:
            return f"/{self.path.stem}: {self.path} not read: {self.problem}"
        return f"/{self.path.stem}: {self.real} (sha256 {hashlib.sha256(self.data).hexdigest()[:12]}…)"


def read_folder(folder: Path, root: Path | None = None) -> list[Source]:
    """The ``*.md`` files of ``folder`` (not its subfolders), by name, each read up to the cap by
    the rules of a folder's files (``root``: the folder they must stay inside, links resolved)."""
    try:
        with os.scandir(folder) as found:
            names = sorted(e.name for e in found if e.name.endswith(".md") and not e.name.startswith("."))
    except OSError:
        return []
    sources = []
    for name in names[:MAX_TEMPLATES]:
        path = folder / name
        try:
            read = read_folder_file(path, MAX_TEMPLATE_BYTES, root=root)
        except Refused as exc:
            problem = (f"larger than {MAX_TEMPLATE_BYTES // 1024} KB" if exc.type == "too_large"
                       else exc.message.partition(" not read: ")[2] or exc.message)
            sources.append(Source(path, None, problem))
            continue
        if read is not None:
            sources.append(Source(path, read.data, real=read.real))
    return sources


def digest(sources: list[Source]) -> str:
    """SHA-256 over the names and bytes of a folder's command files: what trust binds to."""
    sha = hashlib.sha256()
    for source in sources:
        name = source.path.name.encode("utf-8", "surrogateescape")
        sha.update(len(name).to_bytes(4, "big") + name)
        data = source.data or b""
        sha.update(len(data).to_bytes(8, "big") + data)
    return sha.hexdigest()


def load_templates(settings: Settings, builtin: Collection[str], cwd: Path | None = None) -> Templates:
    """The user's commands, then a trusted project's (which take a name the user's had)."""
    found = Templates()
    _add(found, read_folder(settings.config_dir / USER_COMMANDS), "your", builtin)
    folder = (cwd or Path.cwd()) / PROJECT_COMMANDS
    project = read_folder(folder, root=cwd or Path.cwd())  # a command file may not lead out of the project
    if not project:
        return found
    try:
        trusted = tools_trusted(folder, digest(project))
    except ConfigError as exc:  # a damaged trust record: nothing of the project's is trusted
        found.notices.append(str(exc))
        return found
    if not trusted:
        names = ", ".join(f"/{s.path.stem}" for s in project[:5]) + (", …" if len(project) > 5 else "")
        found.notices.append(f"{printable(str(folder))} is not trusted: its commands ({printable(names)}) were "
                             "not loaded (run `glassloop trust` to allow this exact content)")
        return found
    _add(found, project, "project", builtin)
    return found


def _add(found: Templates, sources: list[Source], whose: str, builtin: Collection[str]) -> None:
    for source in sources:
        shown, name = printable(str(source.path)), source.path.stem
        if source.data is None:
            found.problems.append(f"command file {shown} left out: {source.problem}")
        elif not NAME.fullmatch(name):
            found.problems.append(f"command file {shown} left out: a name is letters, digits, - and _ "
                                  "(at most 40, not starting with - or _)")
        elif name in builtin:
            found.problems.append(f"command file {shown} left out: /{name} is a built-in command; rename the file")
        else:
            try:
                text = source.data.decode("utf-8")
            except UnicodeDecodeError:
                found.problems.append(f"command file {shown} left out: it is not UTF-8 text")
                continue
            if name in found.by_name:
                found.notices.append(f"/{name}: the project's {shown} is used instead of "
                                     f"{printable(str(found.by_name[name].path))}")
            description, body = _front_matter(text.removeprefix("\ufeff"))
            found.by_name[name] = Template(name, body, description, source.path, whose)


def _front_matter(text: str) -> tuple[str, str]:
    """(description, body): ``description:`` of a ``---`` front matter, else the first line of the body."""
    description = ""
    if text.startswith("---\n") and (end := text.find("\n---", 3)) != -1:
        for line in text[4:end].splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "description":
                description = value.strip().strip("\"'")
        text = text[end + 4:].partition("\n")[2]
    if not description:
        first = next((line for line in text.splitlines() if line.strip()), "")
        description = first.strip().lstrip("#").strip()
    description = printable(" ".join(description.split()))
    return (description if len(description) <= 80 else description[:79] + "…"), text
