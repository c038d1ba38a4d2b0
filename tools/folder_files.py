"""The one reader of files glassloop reads because a folder holds them.

``AGENTS.md``, project command files, tool files, ``@`` mentions and eval case files come
with a folder (a cloned repository, a downloaded archive), so their names are untrusted:
``AGENTS.md`` may be a symlink to ``/proc/self/environ`` or to a private file elsewhere.
Every such file is read here, by one set of rules:

- inside its root once links are resolved (when the reader is given a root);
- never a system path (``/proc``, ``/sys``, ``/dev``): their files say they are regular
  and empty, and hold the process's environment;
- a regular file: a FIFO, device, socket or folder is refused, and opening never waits
  (``O_NONBLOCK``), nor follows a link swapped in after the check (``O_NOFOLLOW``);
- at most ``cap`` bytes: a bigger file is refused, or cut where the caller says it may be.

What it refuses is a :class:`Refused` whose message is one line naming the file and the rule.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from tools.results import ToolError

SYSTEM_ROOTS = ("/proc", "/sys", "/dev")
_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder", stat.S_IFLNK: "a symlink"}


class Refused(ToolError):
    """A file the reader would not read; ``type`` names the rule (``outside_root``,
    ``system_path``, ``not_a_file``, ``too_large``, ``unreadable``)."""


@dataclass(frozen=True)
class FolderFile:
    path: Path  # as it was named
    real: Path  # where it is once links are resolved
    data: bytes  # at most the cap
    size: int  # bytes on disk

    @property
    def cut(self) -> bool:
        return self.size > len(self.data)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def _system(real: str) -> bool:
    return any(real == top or real.startswith(top + "/") for top in SYSTEM_ROOTS)


def _inside(real: str, root: Path) -> bool:
    top = os.path.realpath(root)
    return real == top or real.startswith(top.rstrip("/") + "/")


def where(path: Path, root: Path | None = None) -> Path:
    """Where ``path`` leads once its links are resolved; Refused when that breaks a rule the
    reader holds before it opens anything (outside ``root``, a system path)."""
    try:
        real = os.path.realpath(path, strict=False)
    except (OSError, RuntimeError, ValueError) as exc:  # a link loop, a NUL byte
        raise Refused("unreadable", f"{path} not read: cannot resolve it ({exc})") from exc
    if _system(real):
        raise Refused("system_path", f"{path} not read: it leads to {real}, a system path")
    if root is not None and not _inside(real, root):
        raise Refused("outside_root", f"{path} not read: it leads outside {os.path.realpath(root)} "
                      f"(to {real})")
    return Path(real)


def read_folder_file(path: Path, cap: int, *, root: Path | None = None,
                     cut: bool = False) -> FolderFile | None:
    """The bytes of the file at ``path`` by the rules above; None when there is no such file.

    ``root``: the folder the file must stay inside once links are resolved (None for a file
    the user named or keeps in their own configuration). ``cut``: a file larger than ``cap``
    is read up to it (its ``size`` says so) instead of refused.
    """
    real = where(path, root)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Refused("unreadable", f"{path} not read: {exc.strerror or exc}") from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or (info.st_size > cap and not cut):
        os.close(fd)
        if stat.S_ISREG(info.st_mode):
            raise Refused("too_large", f"{path} not read: it is {info.st_size:,} bytes; the limit "
                          f"is {cap:,}")
        kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
        raise Refused("not_a_file", f"{path} not read: it is {kind}, not a regular file")
    with os.fdopen(fd, "rb") as file:
        try:
            data = file.read(cap + 1)
        except OSError as exc:
            raise Refused("unreadable", f"{path} not read: {exc.strerror or exc}") from exc
    if len(data) > cap:  # it grew since it was opened
        if not cut:
            raise Refused("too_large", f"{path} not read: it is larger than the limit of {cap:,} bytes")
        data = data[:cap]
    return FolderFile(Path(path), Path(real), data, max(info.st_size, len(data)))
