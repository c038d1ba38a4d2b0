"""Undo a turn's store writes: a compare-and-swap against what this process wrote.

:func:`revert` takes the writes that :func:`tools.store.reporting` reported back. A file
that still holds what they left gets its old bytes back; one another writer changed since
is merged item by item when it is a collection (:class:`tools.store.Collection`), and
otherwise, or when both changed the same item, nothing is undone (``undo_conflict``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from tools.safe_io import StoreError, check_writable, locked, put_bytes
from tools.store import Collection, StoreWrite, decode, encode_json, read_raw


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
            held.enter_context(locked(path))
            plans.append(_plan_revert(path, by_path[path]))
        for path, data, _, unchanged in plans:
            if not unchanged:
                put_bytes(path, data)
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
    current = read_raw(path)
    chained = all(a.after == b.before for a, b in pairwise(writes))
    if chained and current == writes[-1].after:
        check_writable(path)
        return path, writes[0].before, False, False
    validate = writes[-1].validate
    if not isinstance(validate, Collection):
        raise _conflict_error(path, "it was changed by another process since this turn")
    theirs = decode(path, current, {"version": 1, validate.key: []}, validate)
    try:
        items = _take_back(_net_changes(path, writes, validate), theirs[validate.key])
    except _Conflict as exc:
        raise _conflict_error(path, str(exc)) from None
    if items == theirs[validate.key]:
        return path, current, True, True
    check_writable(path)
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
        before = _keyed(decode(path, write.before, empty, validate)[validate.key])
        after = _keyed(decode(path, write.after, empty, validate)[validate.key])
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
