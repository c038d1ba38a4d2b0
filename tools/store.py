"""Small JSON stores: locked, atomic writes that never overwrite a corrupt file.

Every change holds ``<file>.lock`` across read -> change -> write, writes a
temporary file in the same folder, fsyncs it, ``os.replace``s it over the old
one and fsyncs the folder. Inside :func:`reporting` (the registry sets it around
each tool call to what the session passed it) each write is reported with what it
replaced and what it wrote, so the change can be undone later with :func:`revert`:
a compare-and-swap that never clobbers another writer.

Only regular files are read (a FIFO or a device behind the name is refused,
never opened for a blocking read), at most :data:`MAX_STORE_BYTES` of them,
and a file without any write permission bit is never replaced.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

from tools.registry import ToolError

if TYPE_CHECKING:  # filelock is imported on the first write, off the start-up path
    import filelock

log = logging.getLogger(__name__)

T = TypeVar("T")
Validator = Callable[[Any], Any]

LOCK_TIMEOUT_S = 10.0
MAX_STORE_BYTES = 64 * 1024 * 1024  # a bigger store file is refused, not read into memory


@dataclass(frozen=True)
class StoreWrite:
    """One successful write: the file's bytes before it (None: no file) and the bytes it wrote."""

    path: Path
    before: bytes | None
    after: bytes
    validate: Validator | None = None  # how the store reads its data (a ``Collection`` can be merged)


WriteObserver = Callable[[StoreWrite], None]
_reported_to: ContextVar[WriteObserver | None] = ContextVar("glassloop_store_writes", default=None)


class StoreError(ToolError):
    """A store file that cannot be read or parsed (``corrupt_store``, ``unreadable_store``)."""


def _recover_hint(path: Path) -> str:
    return f"move {path} aside (glassloop will start a new one) or fix it by hand"


@contextmanager
def reporting(observer: WriteObserver) -> Iterator[None]:
    """Every successful store write made inside this block (in this thread or task) is
    reported to ``observer`` as a :class:`StoreWrite`."""
    token = _reported_to.set(observer)
    try:
        yield
    finally:
        _reported_to.reset(token)


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


def _read_bytes(path: Path) -> bytes | None:
    return read_regular(path, MAX_STORE_BYTES, _recover_hint(path))


def _decode(path: Path, raw: bytes | None, default: Any, validate: Validator | None) -> Any:
    """Bytes -> validated data; a missing or blank file gives a copy of ``default``."""
    if raw is None or not raw.strip():
        return copy.deepcopy(default)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise StoreError(
            "corrupt_store", f"{path} is not valid JSON ({exc}); {_recover_hint(path)}"
        ) from exc
    if validate is None:
        return data
    try:
        return validate(data)
    except ValueError as exc:
        raise StoreError(
            "corrupt_store", f"{path} has an unexpected shape ({exc}); {_recover_hint(path)}"
        ) from exc


def read_json(path: Path | str, default: Any, validate: Validator | None = None) -> Any:
    """Read a store without locking (writes are atomic); never modifies the file."""
    path = Path(path)
    return _decode(path, _read_bytes(path), default, validate)


def _lock(path: Path) -> filelock.FileLock:
    import filelock

    return filelock.FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT_S)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold ``<path>.lock``; a lock not free within LOCK_TIMEOUT_S raises StoreError."""
    import filelock

    lock = _lock(path)
    try:
        lock.acquire()
    except filelock.Timeout as exc:
        raise StoreError(
            "store_locked", f"{path} is locked by another process (waited {LOCK_TIMEOUT_S:g} s)"
        ) from exc
    try:
        yield
    finally:
        lock.release()


def _check_writable(path: Path) -> None:
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


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))


def encode_json(data: Any) -> bytes:
    """Readable and fast: a top-level object one key a line, a list in it one item a
    line, each item by the C encoder (``indent=`` runs the pure-Python encoder: 4x slower
    on a 20,000-todo store, where the write dominated add_todo)."""
    if not isinstance(data, dict) or not data:
        return (json.dumps(data, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    lines = []
    for key, value in data.items():
        name = _COMPACT.encode(str(key))
        if isinstance(value, list) and value:
            items = ",\n    ".join(map(_COMPACT.encode, value))
            lines.append(f"  {name}: [\n    {items}\n  ]")
        else:
            lines.append(f"  {name}: {_COMPACT.encode(value)}")
    return ("{\n" + ",\n".join(lines) + "\n}\n").encode("utf-8")


def _notify(write: StoreWrite) -> None:
    observer = _reported_to.get()
    if observer is None:
        return
    try:
        observer(write)
    except Exception:  # noqa: BLE001 - the write itself succeeded; do not report failure
        log.exception("write observer failed for %s", write.path)


def update_json(
    path: Path | str,
    change: Callable[[Any], tuple[Any, T]],
    default: Any,
    validate: Validator | None = None,
) -> T:
    """Locked read -> ``change(data)`` -> atomic write; returns ``change``'s result.

    ``change`` returns ``(new_data, result)``; ``new_data`` of None means "nothing
    to write". A corrupt file raises :class:`StoreError` and is left untouched,
    and so is a read-only one (``read_only_store``).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        previous = _read_bytes(path)
        new_data, result = change(_decode(path, previous, default, validate))
        if new_data is not None:
            _check_writable(path)
            written = encode_json(new_data)
            atomic_write(path, lambda out: out.write(written))
            _notify(StoreWrite(path, previous, written, validate))
    return result


def _put(path: Path, data: bytes | None) -> None:
    if data is None:
        Path(os.path.realpath(path)).unlink(missing_ok=True)
    else:
        atomic_write(path, lambda out: out.write(data))


def restore_bytes(path: Path | str, data: bytes | None) -> None:
    """Put back exactly ``data`` (None deletes the file); not reported (see :func:`reporting`)."""
    path = Path(path)
    with _locked(path):
        _check_writable(path)
        _put(path, data)


@dataclass(frozen=True)
class Collection:
    """Validates ``{"version": 1, key: [...]}`` or a bare legacy list of item objects.

    Returns the versioned form; each item must be an object with string ``required``
    fields. :func:`revert` merges a collection item by item (by ``id``).
    """

    key: str
    required: tuple[str, ...]

    def __call__(self, data: Any) -> dict[str, Any]:
        if isinstance(data, dict):
            version = data.get("version", 1)
            if not isinstance(version, int) or version > 1:
                raise ValueError(f"format version {version!r} is newer than this glassloop")
            items = data.get(self.key)
            if not isinstance(items, list):
                raise ValueError(f'expected a "{self.key}" list')
        elif isinstance(data, list):
            items = data
        else:
            raise ValueError(f"expected an object or a list, found {type(data).__name__}")
        for index, item in enumerate(items):
            if not isinstance(item, dict) or not all(
                isinstance(item.get(field), str) for field in self.required
            ):
                fields = ", ".join(self.required)
                raise ValueError(f"entry {index + 1} is not an object with {fields}")
        return {"version": 1, self.key: items}


def collection_validator(key: str, required: Sequence[str]) -> Collection:
    return Collection(key, tuple(required))


# ---- undo: a compare-and-swap against what this process wrote ----------------------


@dataclass(frozen=True)
class ItemUndone:
    """An item the undone writes changed: ``before`` is what it is again (None: the writes
    added it, so it is removed), ``after`` what they had made of it (None: they deleted it)."""

    id: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass(frozen=True)
class Reverted:
    path: Path
    merged: bool  # another writer changed the file since: only this process's items were undone
    items: tuple[ItemUndone, ...] = ()  # what was undone, item by item (a collection's file only)


class _Conflict(Exception):
    pass


def revert(writes: Sequence[StoreWrite]) -> list[Reverted]:
    """Undo ``writes`` (in the order they were made) without touching anyone else's data.

    Per file, under its lock: when it still holds exactly what the last write left (and
    no one wrote between these writes), the bytes from before the first write come back
    (no file: it is removed). Otherwise each write is undone item by item on what the
    file holds now (added items removed, changed ones put back, deleted ones re-added);
    when another writer changed one of the same items, or the file is no collection,
    StoreError ``undo_conflict`` names the file. All files or none: every file is
    checked before any is written.
    """
    by_path: dict[Path, list[StoreWrite]] = {}
    for write in writes:
        by_path.setdefault(Path(write.path), []).append(write)
    with ExitStack() as held:
        plans = []
        for path in sorted(by_path):
            held.enter_context(_locked(path))
            plans.append(_plan_revert(path, by_path[path]))
        for path, data, _, unchanged in plans:
            if not unchanged:
                _put(path, data)
    return [Reverted(path, merged, _items_undone(path, by_path[path])) for path, _, merged, _ in plans]


def _items_undone(path: Path, writes: list[StoreWrite]) -> tuple[ItemUndone, ...]:
    """The items ``writes`` changed, for telling the user what an undo did; () when the
    file is no collection."""
    validate = writes[-1].validate
    if not isinstance(validate, Collection):
        return ()
    try:
        changes = _net_changes(path, writes, validate)
    except (_Conflict, StoreError):
        return ()
    return tuple(ItemUndone(_label(key), c.before, c.after) for key, c in changes.items()
                 if c.before != c.after)


def _plan_revert(path: Path, writes: list[StoreWrite]) -> tuple[Path, bytes | None, bool, bool]:
    """(path, bytes to put or None to remove, merged, nothing to change)."""
    current = _read_bytes(path)
    chained = all(a.after == b.before for a, b in pairwise(writes))
    if chained and current == writes[-1].after:
        _check_writable(path)
        return path, writes[0].before, False, False
    validate = writes[-1].validate
    if not isinstance(validate, Collection):
        raise _conflict_error(path, "it was changed by another process since this turn")
    theirs = _decode(path, current, {"version": 1, validate.key: []}, validate)
    try:
        items = _take_back(_net_changes(path, writes, validate), theirs[validate.key])
    except _Conflict as exc:
        raise _conflict_error(path, str(exc)) from None
    if items == theirs[validate.key]:
        return path, current, True, True
    _check_writable(path)
    return path, encode_json({**theirs, validate.key: items}), True, False


def _conflict_error(path: Path, why: str) -> StoreError:
    return StoreError("undo_conflict", f"cannot undo the changes to {path}: {why}; "
                      "nothing was undone and the file is left as it is")


Item = dict[str, Any]


@dataclass
class _Change:
    """What a turn did to one item: its value before the turn and after it (None: absent)."""

    before: Item | None
    after: Item | None
    neighbours: list[str]  # the item keys of the list it was in before the turn, in order


def _keyed(items: list[Item]) -> dict[str, Item]:
    """Items by id (an item without a string id by its content); a duplicate cannot be merged."""
    keyed: dict[str, Item] = {}
    for item in items:
        key = item["id"] if isinstance(item.get("id"), str) else json.dumps(item, sort_keys=True)
        if key in keyed:
            raise _Conflict(f"it holds two items with the same id {_label(key)}")
        keyed[key] = item
    return keyed


def _label(key: str) -> str:
    return "(no id)" if key.startswith("{") else key


def _net_changes(path: Path, writes: list[StoreWrite], validate: Collection) -> dict[str, _Change]:
    """Each item the turn's writes changed, composed over the writes.

    An item another process changed between two of the turn's writes to it is a conflict;
    an item added and deleted again within the turn is no change (its id may be reused).
    """
    empty = {"version": 1, validate.key: []}
    changes: dict[str, _Change] = {}
    for write in writes:
        before = _keyed(_decode(path, write.before, empty, validate)[validate.key])
        after = _keyed(_decode(path, write.after, empty, validate)[validate.key])
        for key in [*before, *(k for k in after if k not in before)]:
            old, new = before.get(key), after.get(key)
            if old == new:
                continue
            change = changes.get(key)
            if change is None:
                changes[key] = _Change(old, new, list(before))
            elif change.after != old:
                raise _Conflict(f"another process also changed item {_label(key)} during this turn")
            else:
                change.after = new
    return changes


def _take_back(changes: dict[str, _Change], items: list[Item]) -> list[Item]:
    """``items`` (what the file holds now) with the turn's changes undone, item by item."""
    now = _keyed(items)
    for key, change in changes.items():
        if change.before == change.after or now.get(key) == change.before:
            continue  # nothing to undo, or someone else already did
        if now.get(key) != change.after:
            raise _Conflict(f"another process also changed item {_label(key)} since this turn")
        if change.before is None:
            del now[key]
        elif key in now:
            now[key] = change.before
        else:  # deleted by the turn: back after the nearest item that preceded it
            order = change.neighbours
            anchor = next((k for k in reversed(order[: order.index(key)]) if k in now), None)
            pairs = list(now.items())
            at = 0 if anchor is None else [k for k, _ in pairs].index(anchor) + 1
            pairs.insert(at, (key, change.before))
            now = dict(pairs)
    return list(now.values())
