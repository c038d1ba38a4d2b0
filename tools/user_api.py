"""What a user's tool file calls: ``@tool`` and ``store(name)`` (published as ``glassloop_tools``).

``@tool`` leaves the function callable as it was (the user can test it by hand) and
records, beside it, the :class:`~tools.registry.Tool` built from its signature and
docstring, or the one-line reason it cannot be a tool (an unsupported parameter
type, say). A loader that imports the file collects the decorated functions in the
order they were defined (:func:`collecting`); decorating never raises, so one bad
tool does not take the rest of its file down.

``store(name)`` is a list of JSON objects in ``<user data dir>/stores/NAME.json``,
written with the same locked, atomic, undo-aware store as the todos and notes.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.compat import caller_locals
from tools.registry import Tool
from tools.registry import tool as make_tool
from tools.results import ToolError
from tools.store import collection_validator, read_json, update_json

MARK = "__glassloop_tool__"
# ``cues=`` (words that routed the small local model to a tool) and its markers are no longer
# read: a tool is chosen from its own text, the docstring and ``examples=``. A file that still
# passes them loads, and the loader says once that they were left out.
NUMBER_CUE = "<number>"
DUE_CUE = "<due>"
CUES_IGNORED = ("cues= is no longer read (tools are chosen by their docstring and examples=); "
                "loaded without them")


@dataclass(frozen=True)
class Declared:
    """One ``@tool`` function: its Tool, or why it is not one; where it was defined."""

    name: str
    file: str
    line: int
    tool: Tool | None
    problem: str = ""
    note: str = ""  # said when it loads: something of the declaration left out


_collected: ContextVar[list[Declared] | None] = ContextVar("glassloop_collected", default=None)


@contextmanager
def collecting() -> Iterator[list[Declared]]:
    """Gather every ``@tool`` run (in this thread or task) while the block runs."""
    found: list[Declared] = []
    token = _collected.set(found)
    try:
        yield found
    finally:
        _collected.reset(token)


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    side_effects: bool = False,
    destructive: bool = False,
    timeout_s: float | None = None,
    preview: Callable[..., Any] | str | None = None,
    parameters: dict[str, Any] | None = None,
    examples: tuple[str, ...] | list[str] = (),
    cues: tuple[str, ...] | list[str] = (),
) -> Any:
    """Make a typed function a glassloop tool (``@tool`` or ``@tool(...)``).

    The schema comes from the type hints, defaults and the docstring's ``Args:``.
    ``side_effects=True``: each call is approved first, and ``preview`` (a function,
    or the name of one in the same file, taking the tool's arguments) returns what
    would change, ``{"before": ..., "after": ...}`` or a ``(before, after)`` pair,
    for the approval dialog. ``timeout_s`` overrides the per-call timeout. ``examples``:
    a few short requests people make when they want the tool (``("how much is 20 euros in
    yen?", "100美元是多少人民币")``): the router chooses tools by meaning from the tool's own
    text, these with its name, docstring and parameters. ``cues`` is no longer read: a
    tool that passes it loads without it, and the loader says so.
    """
    scope = caller_locals()

    def mark(func: Callable[..., Any]) -> Callable[..., Any]:
        code = getattr(func, "__code__", None)
        declared_name = name or str(getattr(func, "__name__", "tool"))
        where: tuple[str, int] = (code.co_filename, code.co_firstlineno) if code else ("?", 0)
        try:
            if inspect.iscoroutinefunction(func):
                raise TypeError("an async function cannot be a tool; make it a plain def")
            built = make_tool(func, name=declared_name, description=description,
                              side_effects=side_effects, destructive=destructive, timeout_s=timeout_s,
                              parameters=parameters, preview=_preview(func, preview), scope=scope,
                              examples=examples)
            declared = Declared(declared_name, *where, built, note=CUES_IGNORED if cues else "")
        except Exception as exc:  # noqa: BLE001 - reported by the loader, one line
            declared = Declared(declared_name, *where, None, _one_line(exc))
        try:
            setattr(func, MARK, declared)
        except (AttributeError, TypeError):
            pass  # a builtin or a bound method: still collected below
        found = _collected.get()
        if found is not None:
            found.append(declared)
        return func

    return mark(fn) if fn is not None else mark


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if isinstance(exc, (TypeError, ValueError)) and text else f"{type(exc).__name__}: {text}"


def _preview(func: Callable[..., Any], preview: Callable[..., Any] | str | None) -> Any:
    """The registry's preview (validated args -> {"before", "after"}) over the user's function."""
    if preview is None:
        return None

    def run(args: dict[str, Any]) -> dict[str, Any]:
        target = getattr(func, "__globals__", {}).get(preview) if isinstance(preview, str) else preview
        if not callable(target):
            raise ToolError("no_preview", f"preview function {preview!r} not found")
        params = inspect.signature(target).parameters.values()
        missing = {p.name: None for p in params if p.name not in args and p.default is p.empty
                   and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        value = target(**missing, **args)
        if isinstance(value, tuple) and len(value) == 2:
            value = {"before": value[0], "after": value[1]}
        elif not (isinstance(value, dict) and {"before", "after"} & value.keys()):
            value = {"before": None, "after": value}
        shown = {"before": value.get("before"), "after": value.get("after")}
        return json.loads(json.dumps(shown, ensure_ascii=False, default=str))

    return run


# ---- named stores ------------------------------------------------------------------

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_validate = collection_validator("items", ())
_EMPTY: dict[str, Any] = {"version": 1, "items": []}
_folder: list[Path] = []  # set by the application; else the platform's user data dir


def set_store_folder(folder: Path) -> None:
    _folder[:] = [Path(folder)]


def store_folder() -> Path:
    if not _folder:
        import platformdirs

        _folder.append(platformdirs.user_data_path("glassloop") / "stores")
    return _folder[0]


class Store:
    """A list of JSON objects in one file: locked, atomic writes that ``/undo`` restores.

    File format: ``{"version": 1, "items": [...]}``. Items with an ``"id"`` (a string)
    are undone one by one when another process wrote the file too.
    """

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not _NAME.match(name) or name.endswith(".json"):
            raise ValueError(f"store name {name!r}: use letters, digits, '_', '-' or '.' (no folders)")
        self.name = name

    @property
    def path(self) -> Path:
        return store_folder() / f"{self.name}.json"

    def items(self) -> list[dict[str, Any]]:
        """Every item, as stored (a corrupt file raises an error naming it)."""
        return read_json(self.path, _EMPTY, _validate)["items"]

    def update(self, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None]) -> list[dict[str, Any]]:
        """Locked read -> ``change(items)`` -> atomic write; returns the items written.

        ``change`` may edit the list in place (returning None) or return a new list;
        nothing is written when the items did not change.
        """

        def apply(data: dict[str, Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
            items = copy.deepcopy(data["items"])
            returned = change(items)
            new = items if returned is None else list(returned)
            try:
                _validate({"items": new})
            except ValueError as exc:
                raise ToolError("invalid_item", f"store {self.name}: {exc}") from None
            return ({**data, "items": new} if new != data["items"] else None), new

        return update_json(self.path, apply, _EMPTY, _validate)

    def add(self, item: dict[str, Any]) -> dict[str, Any]:
        """Append ``item``; it gets the next free number as its ``"id"`` when it has none."""
        if not isinstance(item, dict):
            raise ToolError("invalid_item", f"store {self.name}: an item is a dict, not {type(item).__name__}")
        added: list[dict[str, Any]] = []

        def append(items: list[dict[str, Any]]) -> None:
            numbers = [int(i["id"]) for i in items if str(i.get("id", "")).isdigit()]
            new = {"id": str(max(numbers, default=0) + 1), **item} if "id" not in item else dict(item)
            items.append(new)
            added.append(new)

        self.update(append)
        return added[0]

    def remove(self, item_id: str) -> dict[str, Any]:
        """Remove the item with this ``"id"``; ToolError ``not_found`` lists the ids there are."""
        removed: list[dict[str, Any]] = []

        def drop(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
            kept = [i for i in items if str(i.get("id")) != str(item_id)]
            if len(kept) == len(items):
                ids = ", ".join(str(i.get("id")) for i in items) or "none"
                raise ToolError("not_found", f"no item {item_id!r} in {self.name}; ids: {ids}")
            removed.extend(i for i in items if str(i.get("id")) == str(item_id))
            return kept

        self.update(drop)
        return removed[0]


def store(name: str) -> Store:
    """The named store of a user's tools: ``store("shopping").add({"name": "milk"})``."""
    return Store(name)
