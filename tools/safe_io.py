"""Safe file I/O: the one atomic whole-file replace, file locks, and reads that never block.

:func:`atomic_write` writes a temporary file in the same folder, fsyncs it,
``os.replace``s it over the old one and fsyncs the folder: the file is replaced
whole or not at all (JSON stores, the trace's raw calls, model weights).
:func:`locked` holds ``<file>.lock`` across a read -> change -> write. :func:`atomic_folder`
makes a folder of files the same way (whole or not at all), and :func:`remove_folder` takes
one away in one step.

Only regular files are read (a FIFO or a device behind the name is refused,
never opened for a blocking read), at most the limit the caller gives, and a
file without any write permission bit is never replaced (:func:`check_writable`).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TypeVar

from tools.results import ToolError

if TYPE_CHECKING:  # filelock is imported on the first write, off the start-up path
    import filelock

T = TypeVar("T")

LOCK_TIMEOUT_S = 10.0


class StoreError(ToolError):
    """A store file that cannot be read, parsed or written (``corrupt_store``,
    ``unreadable_store``, ``store_too_large``, ``store_locked``, ``read_only_store``, ...)."""


_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder"}


def _open_regular(path: Path, limit: int, suffix: str) -> int | None:
    """A read-only descriptor of the regular file at ``path`` (None when there is none)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError("unreadable_store", f"cannot read {path}: {exc.strerror or exc}{suffix}") from exc
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode) and info.st_size <= limit:
        return fd
    os.close(fd)
    if stat.S_ISREG(info.st_mode):
        raise _too_large(path, limit, suffix)
    kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
    raise StoreError("unreadable_store", f"cannot read {path}: it is {kind}, not a regular file{suffix}")


def _too_large(path: Path, limit: int, suffix: str) -> StoreError:
    return StoreError("store_too_large",
                      f"cannot read {path}: it is larger than the {limit // (1024 * 1024)} MB limit{suffix}")


def check_regular(path: Path, limit: int) -> None:
    """Raise StoreError naming ``path`` unless it is a regular file of at most ``limit`` bytes."""
    fd = _open_regular(path, limit, "")
    if fd is None:
        raise StoreError("unreadable_store", f"cannot read {path}: no such file")
    os.close(fd)


def read_regular(path: Path, limit: int, hint: str = "") -> bytes | None:
    """The bytes of the regular file at ``path`` (None when there is none), at most ``limit``.

    A FIFO, device, socket or folder (also behind a symlink) or a bigger file raises
    StoreError naming the file; opening never blocks (``O_NONBLOCK``) and the file is
    left as it is. A symlink to a regular file is read like the file.
    """
    suffix = f"; {hint}" if hint else ""
    fd = _open_regular(path, limit, suffix)
    if fd is None:
        return None
    try:
        with open(fd, "rb") as file:
            data = file.read(limit + 1)
    except OSError as exc:
        raise StoreError("unreadable_store", f"cannot read {path}: {exc.strerror or exc}{suffix}") from exc
    if len(data) > limit:  # it grew since it was opened
        raise _too_large(path, limit, suffix)
    return data


def _lock(path: Path, timeout: float = LOCK_TIMEOUT_S) -> filelock.FileLock:
    import filelock

    return filelock.FileLock(str(path) + ".lock", timeout=timeout)


@contextmanager
def locked(path: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold ``<path>.lock``; a lock not free within ``timeout`` seconds raises StoreError."""
    import filelock

    lock = _lock(path, timeout)
    try:
        lock.acquire()
    except filelock.Timeout as exc:
        raise StoreError(
            "store_locked", f"{path} is locked by another process (waited {timeout:g} s)"
        ) from exc
    try:
        yield
    finally:
        lock.release()


def check_writable(path: Path) -> None:
    """Refuse to replace a file without any write permission bit (root could, ``os.replace`` would)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError("unreadable_store", f"cannot check {path}: {exc.strerror or exc}") from exc
    if mode & 0o222 == 0:
        raise StoreError("read_only_store", f"{path} is read-only (mode {stat.S_IMODE(mode):04o}); "
                         "glassloop leaves it unchanged (make it writable with chmod u+w to allow changes)")


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a directory
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[BinaryIO], T], *, mode: int | None = None,
                 suffix: str = ".tmp") -> T:
    """Replace ``path`` whole or not at all; the one atomic write (stores, traces, model weights).

    ``write(file)`` fills a temporary file in the same folder (``.NAME.XXXX<suffix>``), which
    is fsynced and renamed over ``path``, then the folder is fsynced; a symlinked ``path`` stays
    a symlink. Any failure, in ``write`` too, removes the temporary file. The new file gets
    ``mode``, or else the old file's mode and owner (where allowed). Returns what ``write`` did.
    """
    target = Path(os.path.realpath(path))  # keep a symlinked store a symlink
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as handle:
            result = write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is None:
            _copy_owner_and_mode(target, tmp)
        else:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)
    return result


def atomic_folder(path: Path, fill: Callable[[Path], None], *, mode: int = 0o700) -> bool:
    """Make the folder ``path`` whole or not at all: ``fill(folder)`` fills a temporary folder
    beside it (``.NAME.XXXX``), which is then renamed to ``path``. Two processes making it at
    once leave one whole folder: False when another's was there first (ours is removed). Any
    failure, in ``fill`` too, removes the temporary folder."""
    path.parent.mkdir(parents=True, mode=mode, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        fill(tmp)
        os.chmod(tmp, mode)
        os.rename(tmp, path)  # refused onto a folder that is there (not empty): theirs stays
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if path.is_dir():
            return False
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(path.parent)
    return True


def remove_folder(path: Path) -> None:
    """``path`` renamed aside in one step, then removed: nobody finds it half removed. Nothing
    when it is gone already or cannot be moved."""
    aside = path.with_name(f".{path.name}.{os.getpid()}.removed")
    try:
        os.rename(path, aside)
    except OSError:
        return
    shutil.rmtree(aside, ignore_errors=True)


def take(source: Path, target: Path) -> None:
    """``source`` renamed to ``target`` in one step (replacing it): a log taken whole while its
    writers go on appending to a new one. FileNotFoundError when there is no ``source``."""
    os.replace(source, target)


def _copy_owner_and_mode(target: Path, tmp: str) -> None:
    """Give the new file the old one's permission bits (and owner, where allowed)."""
    try:
        old = target.stat()
    except FileNotFoundError:
        return
    os.chmod(tmp, stat.S_IMODE(old.st_mode))
    new = os.stat(tmp)
    if (new.st_uid, new.st_gid) != (old.st_uid, old.st_gid):
        try:
            os.chown(tmp, old.st_uid, old.st_gid)
        except OSError:
            pass  # not allowed for an ordinary user: the file becomes theirs, as any editor would do


def put_bytes(path: Path, data: bytes | None) -> None:
    """``path`` replaced by exactly ``data`` (atomically), or removed (None); a symlink's target is."""
    if data is None:
        Path(os.path.realpath(path)).unlink(missing_ok=True)
    else:
        atomic_write(path, lambda out: out.write(data))
