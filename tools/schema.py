"""JSON schemas from typed function signatures and Google-style docstrings.

``schema_from_signature`` maps type hints and defaults to a strict object schema
(``additionalProperties: false``); ``parse_docstring`` supplies the tool's
description and a description per argument.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Any, Literal

from tools.cancel import PARAMETER as CANCEL_PARAMETER

# --- docstrings ----------------------------------------------------------------

_ARGS_HEADER = re.compile(r"^(Args|Arguments|Parameters):\s*$")
_OTHER_HEADER = re.compile(r"^(Returns|Raises|Yields|Examples?):\s*$")
_ARG_LINE = re.compile(r"^(\s*)\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _paragraphs(lines: list[str]) -> str:
    text = "\n".join(lines).strip()
    return "\n\n".join(" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip())


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Google-style docstring -> (description before the sections, {arg: description})."""
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    summary: list[str] = []
    args: dict[str, list[str]] = {}
    section, current, indent = "summary", None, None
    for line in lines:
        stripped = line.strip()
        if _ARGS_HEADER.match(stripped) and not line.startswith(" "):
            section = "args"
        elif _OTHER_HEADER.match(stripped) and not line.startswith(" "):
            section = "other"
        elif section == "summary":
            summary.append(line)
        elif section == "args" and stripped:
            match = _ARG_LINE.match(line)
            if match and (indent is None or len(match.group(1)) == indent):
                indent, current = len(match.group(1)), match.group(2)
                args[current] = [match.group(3)]
            elif current is not None:
                args[current].append(stripped)
    return _paragraphs(summary), {k: " ".join(" ".join(v).split()) for k, v in args.items()}


# --- schema from signature ---------------------------------------------------

_SIMPLE_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _type_schema(hint: Any) -> dict[str, Any]:
    """JSON schema for one type hint (without the ``null`` branch of ``X | None``)."""
    if hint in _SIMPLE_TYPES:
        return {"type": _SIMPLE_TYPES[hint]}
    if hint is Any or hint is inspect.Parameter.empty:
        return {}
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Literal:
        kinds = sorted({_SIMPLE_TYPES[type(v)] for v in args})
        return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": list(args)}
    if hint is list or origin is list:
        return {"type": "array", "items": _type_schema(args[0])} if args else {"type": "array"}
    if hint is dict or origin is dict:
        return {"type": "object"}
    if origin in (typing.Union, types.UnionType):
        parts = [_type_schema(a) for a in args]
        if all(set(p) == {"type"} and isinstance(p["type"], str) for p in parts):
            return {"type": [p["type"] for p in parts]}
        return {"anyOf": parts}
    shown = getattr(hint, "__name__", None) or repr(hint)
    raise TypeError(f"unsupported type {shown} (use str, int, float, bool, list, dict, Literal "
                    "or X | None)")


def _split_optional(hint: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); anything else -> (hint, False)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if type(None) in args:
            rest = tuple(a for a in args if a is not type(None))
            return (rest[0] if len(rest) == 1 else typing.Union[rest]), True  # noqa: UP007
    return hint, False


def _allow_null(schema: dict[str, Any]) -> dict[str, Any]:
    if isinstance(schema.get("type"), str):
        schema = {**schema, "type": [schema["type"], "null"]}
    elif isinstance(schema.get("type"), list):
        schema = {**schema, "type": [*schema["type"], "null"]}
    else:
        return {"anyOf": [schema, {"type": "null"}]}
    if "enum" in schema:
        schema["enum"] = [*schema["enum"], None]
    return schema


def _hints(fn: Callable[..., Any], scope: dict[str, Any]) -> dict[str, Any]:
    """Type hints, resolving names local to the factory that defined ``fn``."""
    try:
        local = {**scope, **inspect.getclosurevars(fn).nonlocals}
    except (TypeError, ValueError):
        local = dict(scope)
    return typing.get_type_hints(fn, localns=local)


def schema_from_signature(
    fn: Callable[..., Any], arg_docs: dict[str, str], scope: dict[str, Any] | None = None
) -> tuple[dict, set]:
    """Build the parameters schema; also return the optional params without a default.
    A ``cancel`` parameter is left out: the registry passes the call's cancel signal there."""
    hints = _hints(fn, scope or {})
    properties: dict[str, Any] = {}
    required: list[str] = []
    fill_none: set[str] = set()
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.name == CANCEL_PARAMETER:
            continue  # the cancel signal is handed over by the registry, never by the model
        base, optional = _split_optional(hints.get(param.name, param.empty))
        try:
            prop = _type_schema(base)
        except TypeError as exc:
            raise TypeError(f"parameter {param.name!r}: {exc}") from None
        if optional:
            prop = _allow_null(prop)
        if param.name in arg_docs:
            prop["description"] = arg_docs[param.name]
        has_default = param.default is not param.empty
        if has_default and param.default is not None:
            prop["default"] = param.default
        if not has_default and optional:
            fill_none.add(param.name)
        elif not has_default:
            required.append(param.name)
        properties[param.name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema, fill_none


def with_none_defaults(fn: Callable[..., Any], names: set[str]) -> Callable[..., Any]:
    """``fn``, passing None for each of ``names`` (``X | None`` without a default) left out."""

    def call(**kwargs: Any) -> Any:
        return fn(**{**dict.fromkeys(names), **kwargs})

    call.__name__ = getattr(fn, "__name__", "tool")
    call.__doc__ = fn.__doc__
    return call
