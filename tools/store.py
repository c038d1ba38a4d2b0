"""Small JSON stores: locked, atomic writes that never overwrite a corrupt file.

Every change holds ``<file>.lock`` across read -> change -> write and replaces the
file with :func:`tools.safe_io.atomic_write`. Inside :func:`reporting` (the registry
sets it around each tool call to what the session passed it) each write is reported
with what it replaced and what it wrote, so the change can be undone later
(:func:`tools.undo.revert`).

A store file is read only when it is a regular file of at most :data:`MAX_STORE_BYTES`
(:func:`tools.safe_io.read_regular`); a corrupt or read-only one is never replaced.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tools.safe_io import StoreError, atomic_write, check_writable, locked, put_bytes, read_regular

log = logging.getLogger(__name__)

T = TypeVar("T")
Validator = Callable[[Any], Any]

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


def read_raw(path: Path) -> bytes | None:
    """The bytes of the store file at ``path`` (None when there is none)."""
    return read_regular(path, MAX_STORE_BYTES, _recover_hint(path))


def decode(path: Path, raw: bytes | None, default: Any, validate: Validator | None) -> Any:
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
    return decode(path, read_raw(path), default, validate)


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
    with locked(path):
        previous = read_raw(path)
        new_data, result = change(decode(path, previous, default, validate))
        if new_data is not None:
            check_writable(path)
            written = encode_json(new_data)
            atomic_write(path, lambda out: out.write(written))
            _notify(StoreWrite(path, previous, written, validate))
    return result


def restore_bytes(path: Path | str, data: bytes | None) -> None:
    """Put back exactly ``data`` (None deletes the file); not reported (see :func:`reporting`)."""
    path = Path(path)
    with locked(path):
        check_writable(path)
        put_bytes(path, data)


@dataclass(frozen=True)
class Collection:
    """Validates ``{"version": 1, key: [...]}`` or a bare legacy list of item objects.

    Returns the versioned form; each item must be an object with string ``required``
    fields. :func:`tools.undo.revert` merges a collection item by item (by ``id``).
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
