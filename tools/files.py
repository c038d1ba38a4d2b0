"""Read-only file tools confined to one root folder.

Every path is resolved (symlinks included) and every step of it must stay
inside the root; globbing never enters a symlinked folder;
only regular, text, not-too-large files are opened, and a file's type is
checked with ``stat`` before opening so a FIFO or device is never opened.
"""

from __future__ import annotations

import itertools
import os
import re
import stat
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path

from tools.folder_files import Refused, read_folder_file
from tools.registry import Tool, tool
from tools.results import ToolError

BINARY_SNIFF_BYTES = 8192
MAX_LIST_ENTRIES = 500
MAX_SEARCH_MATCHES = 100
MAX_SEARCH_FILES = 5_000
MAX_LINE_CHARS = 300
MAX_GLOB_SCAN = 50_000  # folder entries list_files looks at before it stops
MAX_FILE_BYTES = 1_000_000  # the largest file read_file (and an @file mention) opens
MAX_OUTPUT_CHARS = 20_000  # the most text of it one read gives
MAX_COMPLETIONS = 50
MAX_COMPLETION_SCAN = 5_000  # folder entries an @path completion looks at
GLOB_MAGIC = re.compile(r"[*?\[]")
SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv"}


class Sandbox:
    """Path checks and safe opening relative to ``root``."""

    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = Path(root).resolve()
        self.max_bytes = max_bytes

    def resolve(self, path: str) -> Path:
        if "\x00" in path:
            raise ToolError("invalid_path", "the path contains a NUL byte")
        try:
            resolved = self._resolve_inside(path)
        except (RuntimeError, OSError) as exc:  # symlink loops
            raise ToolError("invalid_path", f"cannot resolve {path!r}: {exc}") from exc
        if resolved is None:
            raise ToolError("outside_root", f"{path!r} is outside the workspace; use paths "
                            "relative to the workspace root")
        return resolved

    def _resolve_inside(self, path: str) -> Path | None:
        """``path`` resolved one component at a time; None when any step is outside the root.

        A path that leaves through a symlink and comes back in (``link/x/back``) is
        refused, or its answer would tell whether ``x`` exists outside. ``..`` is
        applied to the text first, so a later step can never climb out.
        """
        joined = Path(os.path.normpath(self.root / path))
        if not joined.is_relative_to(self.root):
            return None
        current = self.root
        parts = joined.relative_to(self.root).parts
        for i, part in enumerate(parts):
            current = (current / part).resolve()
            if not current.is_relative_to(self.root):
                return None
            if not os.path.lexists(current):  # nothing below a missing name can be a symlink
                return current.joinpath(*parts[i + 1:])
        return current

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() or "."

    def stat(self, resolved: Path, shown: str) -> os.stat_result:
        try:
            return os.stat(resolved)
        except FileNotFoundError as exc:
            raise ToolError("not_found", f"{shown!r} does not exist") from exc
        except OSError as exc:
            raise ToolError("invalid_path", f"cannot access {shown!r}: {exc.strerror}") from exc

    def read_text(self, resolved: Path, shown: str) -> str:
        """The whole file as text, read by the rules of every file a folder brings
        (``tools.folder_files``: inside the root, a regular file, never blocking), then the
        binary check."""
        try:
            read = read_folder_file(resolved, self.max_bytes, root=self.root)
        except Refused as exc:  # said with the path as the caller gave it
            rule = exc.message.partition(" not read: ")[2] or exc.message
            raise ToolError("invalid_path" if exc.type == "unreadable" else exc.type,
                            f"{shown!r}: {rule}") from exc
        if read is None:
            raise ToolError("not_found", f"{shown!r} does not exist")
        if b"\x00" in read.data[:BINARY_SNIFF_BYTES]:
            raise ToolError("binary_file", f"{shown!r} looks like a binary file")
        return read.data.decode("utf-8", errors="replace")

    def walk_files(self, top: Path) -> Iterator[Path]:
        """Files under ``top`` (no symlinked folders, skipping VCS/venv folders)."""
        if top.is_file():
            yield top
            return
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            for name in sorted(files):
                yield Path(folder) / name


def _cap(text: str, limit: int) -> tuple[str, str | None]:
    if len(text) <= limit:
        return text, None
    return text[:limit], f"output cut: showing {limit:,} of {len(text):,} characters"


def _entry(sandbox: Sandbox, path: Path) -> dict | None:
    try:
        resolved = path.resolve()
        info = os.stat(resolved)
    except (RuntimeError, OSError):
        return None
    if not resolved.is_relative_to(sandbox.root):
        return None
    kind = "dir" if stat.S_ISDIR(info.st_mode) else "file" if stat.S_ISREG(info.st_mode) else "other"
    entry: dict[str, str | int] = {"path": sandbox.relative(path.absolute()), "type": kind}
    if kind == "file":
        entry["size"] = info.st_size
    return entry


def _glob_parts(pattern: str) -> tuple[str, ...]:
    parts = [p for p in Path(pattern).parts if p != "."]
    if not parts or any("**" in p and p != "**" for p in parts):
        raise ToolError("invalid_arguments", f"bad glob {pattern!r}: use names, * ? [..] "
                        "and ** as a whole path component")
    # a run of ** means the same as one (and would otherwise multiply the work)
    return tuple(p for i, p in enumerate(parts) if not (p == "**" and i and parts[i - 1] == "**"))


class _Glob:
    """Paths under ``top`` matching the pattern's components; ``**`` is any depth.

    Never enters a symlinked folder (a pattern cannot go out through a link and
    back in, and a link loop is never walked); a symlink can still be matched as
    the last component, and ``_entry`` drops it if it points outside the root.
    """

    def __init__(self, top: Path, parts: tuple[str, ...]) -> None:
        self.top, self.parts, self.scanned = top, parts, 0

    def __iter__(self) -> Iterator[Path]:
        pending: list[tuple[Path, int]] = [(self.top, 0)]
        done: set[tuple[Path, int]] = set()  # each (folder, pattern position) is walked once
        while pending and self.scanned <= MAX_GLOB_SCAN:
            base, i = pending.pop()
            if (base, i) in done:
                continue
            done.add((base, i))
            if i == len(self.parts):
                yield base
                continue
            part, last = self.parts[i], i == len(self.parts) - 1
            if part == "**":
                pending.append((base, i + 1))
                pending += [(Path(e.path), i) for e in self._entries(base) if _real_dir(e)]
            elif GLOB_MAGIC.search(part):
                pending += [(Path(e.path), i + 1) for e in self._entries(base)
                            if fnmatchcase(e.name, part) and (last or _real_dir(e))]
            elif os.path.lexists(base / part) and (last or _is_real_dir(base / part)):
                pending.append((base / part, i + 1))

    def _entries(self, folder: Path) -> list[os.DirEntry]:
        try:
            with os.scandir(folder) as found:
                entries = list(found)
        except OSError:
            return []
        self.scanned += len(entries)
        return entries


def _real_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _search_file(sandbox: Sandbox, path: Path, needle: str) -> list[dict]:
    try:
        resolved = sandbox.resolve(str(path.relative_to(sandbox.root)))
        text = sandbox.read_text(resolved, path.name)
    except (ToolError, ValueError):
        return []  # outside via symlink, binary, too large, FIFO...: skip quietly
    rel = sandbox.relative(path)
    return [
        {"path": rel, "line": number, "text": line.strip()[:MAX_LINE_CHARS]}
        for number, line in enumerate(text.splitlines(), start=1)
        if needle in line.casefold()
    ]


def make_file_tools(root: Path, max_bytes: int = MAX_FILE_BYTES,
                    max_output_chars: int = MAX_OUTPUT_CHARS) -> list[Tool]:
    """read_file, list_files and search_files confined to ``root``."""
    sandbox = Sandbox(root, max_bytes)

    @tool(examples=("print config.yaml for me", "open notes/todo.txt for me", "打开 report.md 看看写了什么", "读一下 data 文件夹里的 summary.txt"))
    def read_file(path: str, offset: int = 0, limit: int = 200) -> dict:
        """Read lines of a text file in the current folder or below.

        Use list_files or search_files first if you do not know the exact path.

        Args:
            path: File path as the user names it, relative to the current folder.
            offset: Number of lines to skip from the start (0 = first line).
            limit: Maximum number of lines to return (1-2000).
        """
        if offset < 0 or not 1 <= limit <= 2000:
            raise ToolError("invalid_arguments", "offset must be >= 0 and limit 1-2000")
        resolved = sandbox.resolve(path)
        lines = sandbox.read_text(resolved, path).splitlines()
        chosen = lines[offset : offset + limit]
        content, cut = _cap("\n".join(chosen), max_output_chars)
        result = {"path": sandbox.relative(resolved), "first_line": offset + 1,
                  "lines_returned": len(chosen), "total_lines": len(lines), "content": content}
        if offset + limit < len(lines):
            result["more"] = f"{len(lines) - offset - limit} more lines; use offset={offset + limit}"
        if cut:
            result["note"] = cut
        return result

    @tool(examples=("what files live here", "contents of the docs dir", "当前目录下有哪些文件", "看看 src 里都有什么文件"))
    def list_files(path: str = ".", glob: str = "*") -> dict:
        """List files and folders in the current folder or one below it.

        Args:
            path: Folder relative to the current folder.
            glob: Pattern such as "*.md" or "**/*.py" (recursive).
        """
        if "\x00" in glob or Path(glob).is_absolute() or ".." in Path(glob).parts:
            raise ToolError("invalid_arguments", "glob must be a relative pattern without '..'")
        folder = sandbox.resolve(path)
        if not stat.S_ISDIR(sandbox.stat(folder, path).st_mode):
            raise ToolError("not_a_directory", f"{path!r} is not a folder")
        entries: list[dict] = []
        walker = _Glob(folder, _glob_parts(glob))
        for found in walker:
            entry = _entry(sandbox, found)
            if entry is not None:
                entries.append(entry)
            if len(entries) > MAX_LIST_ENTRIES:
                break
        entries.sort(key=lambda e: e["path"])
        result = {"path": sandbox.relative(folder), "count": min(len(entries), MAX_LIST_ENTRIES),
                  "entries": entries[:MAX_LIST_ENTRIES]}
        if len(entries) > MAX_LIST_ENTRIES:
            result["note"] = f"listing cut at {MAX_LIST_ENTRIES} entries; narrow the glob"
        elif walker.scanned > MAX_GLOB_SCAN:
            result["note"] = f"stopped after looking at {MAX_GLOB_SCAN:,} entries; narrow the path or glob"
        return result

    @tool(examples=("which file covers the lease fee", "look for any mention of invoice in my papers", "哪个文件里提到了合同", "在文件里搜索预算两个字"))
    def search_files(pattern: str, path: str = ".") -> dict:
        """Find lines containing a text (case-insensitive, plain substring) in files of the current folder.

        Args:
            pattern: Text to look for (not a regular expression).
            path: Folder or file to search, relative to the current folder.
        """
        needle = pattern.casefold()
        if not needle.strip():
            raise ToolError("invalid_arguments", "pattern must not be empty")
        top = sandbox.resolve(path)
        sandbox.stat(top, path)
        matches: list[dict] = []
        for scanned, file in enumerate(sandbox.walk_files(top)):
            if scanned >= MAX_SEARCH_FILES or len(matches) > MAX_SEARCH_MATCHES:
                break
            matches += _search_file(sandbox, file, needle)
        result: dict = {"pattern": pattern, "count": min(len(matches), MAX_SEARCH_MATCHES),
                        "matches": matches[:MAX_SEARCH_MATCHES]}
        if len(matches) > MAX_SEARCH_MATCHES:
            result["note"] = f"results cut at {MAX_SEARCH_MATCHES} matches; narrow the search"
        size = sum(len(m["text"]) + len(m["path"]) + 20 for m in result["matches"])
        while size > max_output_chars and result["matches"]:
            dropped = result["matches"].pop()
            size -= len(dropped["text"]) + len(dropped["path"]) + 20
            result["note"] = f"results cut to fit {max_output_chars:,} characters"
        result["count"] = len(result["matches"])
        return result

    return [read_file, list_files, search_files]


def read_mentioned(root: Path, path: str) -> tuple[str, str, int]:
    """A file named in a message (``@path``), with ``read_file``'s checks and caps: its path
    relative to ``root``, its text (at most ``MAX_OUTPUT_CHARS``) and its length in characters.
    ToolError (``outside_root``, ``not_found``, ``too_large``, ...) when it cannot be attached."""
    sandbox = Sandbox(root, MAX_FILE_BYTES)
    resolved = sandbox.resolve(path)
    text = sandbox.read_text(resolved, path)
    return sandbox.relative(resolved), text[:MAX_OUTPUT_CHARS], len(text)


def complete_path(root: Path, prefix: str) -> list[str]:
    """Paths inside ``root`` that start with ``prefix`` (one folder level; folders end with /),
    for completing ``@path``; nothing outside the root, nothing reached through a symlink out."""
    folder_part, _, start = prefix.rpartition("/")
    sandbox = Sandbox(root, MAX_FILE_BYTES)
    try:
        folder = sandbox.resolve(folder_part or ".")
        with os.scandir(folder) as found:  # a prompt waits for this: a huge folder is not read whole
            entries = sorted(itertools.islice(found, MAX_COMPLETION_SCAN), key=lambda e: e.name)
    except (ToolError, OSError):
        return []
    out = []
    for entry in entries:
        if not entry.name.startswith(start) or (entry.name.startswith(".") and not start.startswith(".")):
            continue
        shown = f"{folder_part}/{entry.name}" if folder_part else entry.name
        try:
            inside = sandbox.resolve(shown)
        except ToolError:
            continue
        out.append(shown + ("/" if inside.is_dir() else ""))
        if len(out) >= MAX_COMPLETIONS:
            break
    return out
