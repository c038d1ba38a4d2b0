"""Tool definitions, schema generation from signatures, and failure-proof calls.

A tool is a plain typed function. ``@tool`` turns it into a :class:`Tool` whose
JSON schema comes from the type hints, defaults and Google-style docstring.
:meth:`Registry.call` validates the model's arguments against that schema and
turns every failure into data (``{"ok": false, "error": {...}}``) so the model
can read what went wrong and try again.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # jsonschema costs ~50 ms to import: loaded on the first validation instead
    import jsonschema


class ToolError(Exception):
    """A structured tool failure; ``type`` is a short machine-readable tag."""

    def __init__(self, type: str, message: str) -> None:  # noqa: A002 - mirrors the result shape
        super().__init__(message)
        self.type = type
        self.message = message


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    side_effects: bool = False
    timeout_s: float | None = None  # None: the agent loop's default
    # Given validated args, describe the change without making it: {"before", "after"}.
    preview: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


def error_result(type: str, message: str) -> dict[str, Any]:  # noqa: A002
    return {"ok": False, "error": {"type": type, "message": message}}


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
    raise TypeError(f"unsupported type hint for a tool parameter: {hint!r}")


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
    """Build the parameters schema; also return the optional params without a default."""
    hints = _hints(fn, scope or {})
    properties: dict[str, Any] = {}
    required: list[str] = []
    fill_none: set[str] = set()
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        base, optional = _split_optional(hints.get(param.name, param.empty))
        prop = _type_schema(base)
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


def _with_none_defaults(fn: Callable[..., Any], names: set[str]) -> Callable[..., Any]:
    def call(**kwargs: Any) -> Any:
        return fn(**{**dict.fromkeys(names), **kwargs})

    call.__name__ = getattr(fn, "__name__", "tool")
    call.__doc__ = fn.__doc__
    return call


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    side_effects: bool = False,
    timeout_s: float | None = None,
    parameters: dict[str, Any] | None = None,
    preview: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Any:
    """Turn a typed function into a :class:`Tool` (usable as ``@tool`` or ``@tool(...)``)."""
    # Annotations are strings; aliases defined inside a factory live in the caller's frame.
    scope = dict(sys._getframe(1).f_locals)

    def build(func: Callable[..., Any]) -> Tool:
        summary, arg_docs = parse_docstring(inspect.getdoc(func) or "")
        target = func
        if parameters is None:  # generated schemas are valid by construction
            schema, fill_none = schema_from_signature(func, arg_docs, scope)
            if fill_none:
                target = _with_none_defaults(func, fill_none)
        else:
            from jsonschema import Draft202012Validator

            schema = parameters
            Draft202012Validator.check_schema(schema)
        return Tool(
            name=name or func.__name__,
            description=description if description is not None else summary,
            parameters=schema,
            fn=target,
            side_effects=side_effects,
            timeout_s=timeout_s,
            preview=preview,
        )

    return build(fn) if fn is not None else build


# --- argument parsing ----------------------------------------------------------

_FENCE = re.compile(r"^\s*```[\w-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def _first_object(text: str) -> str | None:
    """The first balanced ``{...}`` in ``text``, aware of JSON strings.

    Tries at most 20 starting braces so a long run of ``{`` stays linear.
    """
    start = text.find("{")
    for _attempt in range(20):
        if start == -1:
            break
        depth, in_string, escaped = 0, False, False
        for i in range(start, len(text)):
            ch = text[i]
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
                continue
            if ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start : i + 1]
        start = text.find("{", start + 1)
    return None


def _repair(text: str) -> Any:
    """One repair attempt: strip a code fence, else pull out an embedded object."""
    fenced = _FENCE.match(text)
    candidate = fenced.group(1).strip() if fenced else text
    try:
        return json.loads(candidate)
    except json.JSONDecodeError:
        embedded = _first_object(candidate)
        if embedded is None:
            raise
        return json.loads(embedded)


def decode_arguments(raw: str | dict | None) -> Any:
    """Raw arguments -> Python value; raises ``json.JSONDecodeError``."""
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return dict(raw)
    text = raw.strip()
    if not text or text == "null":
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return _repair(text)


def _coerce_integers(args: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """JSON schema counts 2.0 as an integer; hand the function a real int."""
    props = schema.get("properties", {})
    out = dict(args)
    for key, value in args.items():
        kinds = props.get(key, {}).get("type")
        kinds = [kinds] if isinstance(kinds, str) else (kinds or [])
        if "integer" in kinds and isinstance(value, float) and value.is_integer():
            out[key] = int(value)
    return out


# --- readable validation errors --------------------------------------------------

_JSON_TYPES = [(bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
               (list, "array"), (dict, "object"), (type(None), "null")]


def _json_type(value: Any) -> str:
    return next((label for kind, label in _JSON_TYPES if isinstance(value, kind)), "value")


def _expected(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    kinds = schema.get("type", "any value")
    return " or ".join(kinds) if isinstance(kinds, list) else str(kinds)


def _field(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _error_lines(err: jsonschema.ValidationError, props: dict[str, Any]) -> list[str]:
    if err.validator == "required":
        missing = [k for k in err.validator_value if k not in err.instance]
        where = err.schema.get("properties", props)
        return [f"missing required field {k!r} ({_expected(where.get(k, {}))})" for k in missing]
    if err.validator == "additionalProperties":
        allowed = list(err.schema.get("properties", {}))
        extras = [k for k in err.instance if k not in allowed]
        return [f"unexpected field {k!r} (allowed: {', '.join(allowed) or 'none'})" for k in extras]
    field = _field(err.absolute_path) or "arguments"
    got = json.dumps(err.instance, ensure_ascii=False)
    got = got if len(got) <= 60 else got[:57] + "..."
    if err.validator == "type":
        kind = _json_type(err.instance)
        return [f"field {field!r} must be {_expected(err.schema)}, got {kind} {got}"]
    if err.validator == "enum":
        return [f"field {field!r} must be one of {_expected(err.schema)}, got {got}"]
    return [f"field {field!r}: {err.message}"]


def describe_errors(name: str, errors: list[Any], schema: dict[str, Any]) -> str:
    """Schema violations as one sentence the model can act on."""
    props = schema.get("properties", {})
    ordered = sorted(errors, key=lambda e: (e.validator != "required", list(e.absolute_path)))
    lines: list[str] = []
    for err in ordered:
        lines += [line for line in _error_lines(err, props) if line not in lines]
    required = set(schema.get("required", []))
    params = ", ".join(
        f"{k}: {_expected(v)}{' (required)' if k in required else ''}" for k, v in props.items()
    )
    return f"invalid arguments for {name}: {'; '.join(lines[:6])}. Parameters: {params or 'none'}"


# --- registry ------------------------------------------------------------------


class Registry:
    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            if t.name in self._tools:
                raise ValueError(f"duplicate tool name: {t.name}")
            self._tools[t.name] = t
        self._validators: dict[str, Any] = {}  # built on a tool's first call (see _validator)

    def add(self, tools: Iterable[Tool]) -> None:
        """Register more tools (e.g. from an MCP server), appended after the others."""
        new = list(tools)
        names = [t.name for t in new]
        clash = sorted({n for n in names if n in self._tools or names.count(n) > 1})
        if clash:
            raise ValueError(f"duplicate tool name: {', '.join(clash)}")
        # Copy-on-write: other threads may be reading the registry.
        self._validators = {n: v for n, v in self._validators.items() if n not in names}
        self._tools = {**self._tools, **{t.name: t for t in new}}

    def remove(self, prefix: str) -> list[str]:
        """Unregister every tool whose name starts with ``prefix``; returns their names."""
        gone = [n for n in self._tools if n.startswith(prefix)]
        self._tools = {n: t for n, t in self._tools.items() if n not in gone}
        self._validators = {n: v for n, v in self._validators.items() if n not in gone}
        return gone

    def _validator(self, name: str, tool_: Tool) -> Any:
        validator = self._validators.get(name)
        if validator is None:
            from jsonschema import Draft202012Validator

            validator = Draft202012Validator(tool_.parameters)
            self._validators = {**self._validators, name: validator}  # copy-on-write, as in add()
        return validator

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self._tools.values()]

    def _unknown(self, name: str) -> dict[str, Any]:
        available = ", ".join(self._tools) or "(none)"
        return error_result("unknown_tool", f"no tool named {name!r}; available tools: {available}")

    def parse_arguments(self, name: str, raw: str | dict | None) -> tuple[dict | None, dict | None]:
        """(args, None) when valid, else (None, error_result)."""
        tool_ = self._tools.get(name)
        if tool_ is None:
            return None, self._unknown(name)
        try:
            value = decode_arguments(raw)
        except (ValueError, RecursionError) as exc:  # ValueError: also an integer too long to convert
            snippet = str(raw)[:120]
            return None, error_result(
                "invalid_json",
                f"arguments for {name} are not valid JSON ({exc}); got: {snippet!r}. "
                "Send a single JSON object.",
            )
        if not isinstance(value, dict):
            kind = _json_type(value)
            return None, error_result(
                "invalid_arguments", f"arguments for {name} must be a JSON object, got {kind}"
            )
        errors = list(self._validator(name, tool_).iter_errors(value))
        if errors:
            message = describe_errors(name, errors, tool_.parameters)
            return None, error_result("invalid_arguments", message)
        return _coerce_integers(value, tool_.parameters), None

    def call(self, name: str, raw: str | dict | None) -> dict[str, Any]:
        """Run a tool; every failure comes back as an error result, never raised."""
        args, error = self.parse_arguments(name, raw)
        if error is not None:
            return error
        try:
            value = self._tools[name].fn(**args)
            return _success(value)
        except ToolError as exc:
            return error_result(exc.type, exc.message)
        except Exception as exc:  # noqa: BLE001 - failures are data for the model
            return error_result("tool_error", f"{type(exc).__name__}: {exc}")

    def preview(self, name: str, args: dict[str, Any]) -> dict[str, Any] | None:
        """What a side effect would change, or None (no preview, or it failed)."""
        tool_ = self._tools.get(name)
        if tool_ is None or tool_.preview is None:
            return None
        try:
            return _jsonable(tool_.preview(args))
        except Exception:  # noqa: BLE001 - the real call will report the problem
            return None


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


def _success(value: Any) -> dict[str, Any]:
    value = _jsonable(value)
    if isinstance(value, dict):
        return {"ok": True, **{k: v for k, v in value.items() if k != "ok"}}
    return {"ok": True, "result": value}
