"""Small JSON stores: locked, atomic writes that never overwrite a corrupt file.

Every change holds ``<file>.lock`` across read -> change -> write, writes a
temporary file in the same folder, fsyncs it, ``os.replace``s it over the old
one and fsyncs the folder. A write observer (set by the application) is told
what each write replaced so the change can be undone later.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tools.registry import ToolError

if TYPE_CHECKING:  # filelock is imported on the first write, off the start-up path
    import filelock

log = logging.getLogger(__name__)

T = TypeVar("T")
WriteObserver = Callable[[Path, "bytes | None"], None]
Validator = Callable[[Any], Any]

LOCK_TIMEOUT_S = 10.0
_observer: WriteObserver | None = None


class StoreError(ToolError):
    """A store file that cannot be read or parsed (``corrupt_store``, ``unreadable_store``)."""


def _recover_hint(path: Path) -> str:
    return f"move {path} aside (glassloop will start a new one) or fix it by hand"


def set_write_observer(fn: WriteObserver | None) -> None:
    """Call ``fn(path, previous_bytes_or_None)`` after every successful store write."""
    global _observer
    _observer = fn


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(
            "unreadable_store", f"cannot read {path}: {exc.strerror or exc}; {_recover_hint(path)}"
        ) from exc


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


def _atomic_write(path: Path, data: bytes) -> None:
    target = Path(os.path.realpath(path))  # keep a symlinked store a symlink
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)


def encode_json(data: Any) -> bytes:
    return (json.dumps(data, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def _notify(path: Path, previous: bytes | None) -> None:
    if _observer is None:
        return
    try:
        _observer(path, previous)
    except Exception:  # noqa: BLE001 - the write itself succeeded; do not report failure
        log.exception("write observer failed for %s", path)


def update_json(
    path: Path | str,
    change: Callable[[Any], tuple[Any, T]],
    default: Any,
    validate: Validator | None = None,
) -> T:
    """Locked read -> ``change(data)`` -> atomic write; returns ``change``'s result.

    ``change`` returns ``(new_data, result)``; ``new_data`` of None means "nothing
    to write". A corrupt file raises :class:`StoreError` and is left untouched.
    """
    import filelock

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _lock(path):
            previous = _read_bytes(path)
            new_data, result = change(_decode(path, previous, default, validate))
            if new_data is not None:
                _atomic_write(path, encode_json(new_data))
                _notify(path, previous)
    except filelock.Timeout as exc:
        raise StoreError(
            "store_locked", f"{path} is locked by another process (waited {LOCK_TIMEOUT_S:g} s)"
        ) from exc
    return result


def restore_bytes(path: Path | str, data: bytes | None) -> None:
    """Put back exactly ``data`` (None deletes the file). Does not notify the observer."""
    path = Path(path)
    with _lock(path):
        if data is None:
            Path(os.path.realpath(path)).unlink(missing_ok=True)
        else:
            _atomic_write(path, data)


def collection_validator(key: str, required: Sequence[str]) -> Validator:
    """Validate ``{"version": 1, key: [...]}`` or a bare legacy list of item objects.

    Returns the versioned form; each item must be an object with string ``required`` fields.
    """

    def validate(data: Any) -> dict[str, Any]:
        if isinstance(data, dict):
            version = data.get("version", 1)
            if not isinstance(version, int) or version > 1:
                raise ValueError(f"format version {version!r} is newer than this glassloop")
            items = data.get(key)
            if not isinstance(items, list):
                raise ValueError(f'expected a "{key}" list')
        elif isinstance(data, list):
            items = data
        else:
            raise ValueError(f"expected an object or a list, found {type(data).__name__}")
        for index, item in enumerate(items):
            if not isinstance(item, dict) or not all(
                isinstance(item.get(field), str) for field in required
            ):
                fields = ", ".join(required)
                raise ValueError(f"entry {index + 1} is not an object with {fields}")
        return {"version": 1, key: items}

    return validate
