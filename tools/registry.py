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
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, TypedDict

from tools.cancel import PARAMETER as CANCEL_PARAMETER
from tools.cancel import Cancel, running
from tools.compat import caller_locals
from tools.results import ToolError, ToolResult, error_result, success
from tools.schema import parse_docstring, schema_from_signature, with_none_defaults
from tools.store import reporting
from tools.validation import check_schema, describe_errors, json_type, schema_problem, validator_for


class ToolSchema(TypedDict):
    """A tool as it is offered to a model, in no wire's form (each adapter converts it)."""

    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema of the arguments


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    side_effects: bool = False
    # Removes or overwrites data for good (implies side effects): each call is asked
    # on its own, never approved by a session rule ("always", "rest of step").
    destructive: bool = False
    timeout_s: float | None = None  # None: the agent loop's default
    # Given validated args, describe the change without making it: {"before", "after"}.
    preview: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # Where it comes from, for /tools: "built-in", "FILE:LINE", "package NAME", "MCP server NAME".
    source: str = "built-in"
    cancellable: bool = False  # ``fn`` declares a ``cancel`` parameter: it gets the call's Cancel
    # What people say when they want this tool ("rain in Berlin this Sunday?"): with the name,
    # description and parameters, the tool's own text a router chooses tools by meaning from
    # (repl/embedded/router.py); optional.
    examples: tuple[str, ...] = ()

    def schema(self) -> ToolSchema:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    side_effects: bool = False,
    destructive: bool = False,
    timeout_s: float | None = None,
    parameters: dict[str, Any] | None = None,
    preview: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    source: str = "built-in",
    scope: dict[str, Any] | None = None,
    examples: tuple[str, ...] | list[str] | str = (),
) -> Any:
    """Turn a typed function into a :class:`Tool` (usable as ``@tool`` or ``@tool(...)``)."""
    # Annotations are strings; aliases defined inside a factory live in the caller's frame.
    scope = caller_locals() if scope is None else scope
    phrases = (examples,) if isinstance(examples, str) else examples
    if not isinstance(phrases, (tuple, list)) or not all(isinstance(phrase, str) for phrase in phrases):
        raise TypeError("examples must be a tuple of strings: what people say when they want the tool")

    def build(func: Callable[..., Any]) -> Tool:
        summary, arg_docs = parse_docstring(inspect.getdoc(func) or "")
        target = func
        if parameters is None:  # generated schemas are valid by construction
            schema, fill_none = schema_from_signature(func, arg_docs, scope)
            if fill_none:
                target = with_none_defaults(func, fill_none)
        else:
            schema = parameters
            check_schema(schema)
        return Tool(
            name=name or func.__name__,
            description=description if description is not None else summary,
            parameters=schema,
            fn=target,
            side_effects=side_effects or destructive,
            destructive=destructive,
            timeout_s=timeout_s,
            preview=preview,
            source=source,
            cancellable=CANCEL_PARAMETER in inspect.signature(func).parameters,
            examples=tuple(phrases),
        )

    return build(fn) if fn is not None else build


# --- argument parsing ----------------------------------------------------------

_FENCE = re.compile(r"^\s*```[\w-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


_STRING_STOP = re.compile(r'["\\]')  # what changes the state inside a JSON string
_VALUE_STOP = re.compile(r'["{}\[\]]')  # ... and outside one


class JsonScan:
    """Open brackets and strings of JSON-ish text, fed in pieces, read once (linear): the one
    balanced-bracket scanner (argument repair here, text tool calls in ``repl.embedded.textcalls``)."""

    def __init__(self, objects: bool = False) -> None:
        self.stack: list[str] = []  # closers still open
        self.in_string = False
        self._escaped = False
        # ``objects``: also record where each bracket opened (outside a string) and, for each
        # ``{`` closed by its ``}``, where the object ends (``_first_object`` needs them)
        self._track = objects
        self._opened: list[int] = []
        self.seen: set[int] = set()
        self.objects: dict[int, int] = {}

    def feed(self, text: str, start: int = 0, stop_when_closed: bool = False) -> int:
        """Scan ``text[start:]``; the index just after the first balanced value that closed
        in it (the scan stops there when ``stop_when_closed``), else -1."""
        closed, i, end = -1, start, len(text)
        while i < end:
            if self._escaped:
                self._escaped, i = False, i + 1
                continue
            hit = (_STRING_STOP if self.in_string else _VALUE_STOP).search(text, i)
            if hit is None:
                break
            i, char = hit.end(), hit.group()
            if self.in_string:
                self._escaped = self.in_string = char == "\\"
            elif char == '"':
                self.in_string = True
            elif char in "{[":
                self.stack.append("}" if char == "{" else "]")
                if self._track:
                    self._opened.append(i - 1)
                    self.seen.add(i - 1)
            elif self.stack:
                if self.stack.pop() == char == "}" and self._track:
                    self.objects[self._opened.pop()] = i
                elif self._track:
                    self._opened.pop()
                if not self.stack and closed < 0:
                    closed = i
                    if stop_when_closed:
                        break
        return closed


def _first_object(text: str) -> str | None:
    """The first ``{`` (of the first 20) that a balanced ``{...}`` starts at, aware of JSON
    strings. One scan serves every ``{`` it saw outside a string (a long run of ``{`` is read
    once); a ``{`` that scan took for part of a string is scanned again as a start."""
    start = text.find("{")
    scan = JsonScan(objects=True)
    scan.feed(text, max(start, 0))
    for _attempt in range(20):
        if start == -1:
            return None
        if start in scan.objects:
            return text[start:scan.objects[start]]
        if start not in scan.seen:  # inside a string for the first scan
            end = JsonScan().feed(text, start, stop_when_closed=True)
            if end != -1:
                return text[start:end]
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
    if not isinstance(raw, str):  # already a value (a list, a number): checked as one
        return raw
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


# --- registry ------------------------------------------------------------------


class Registry:
    def __init__(self, tools: Iterable[Tool], on_write: Callable[[Any], None] | None = None) -> None:
        """``on_write`` is told of each store write a tool makes while it is called here
        (a ``tools.store.StoreWrite``: what ``/undo`` takes back)."""
        self.on_write = on_write
        self._tools: dict[str, Tool] = {}
        for t in tools:
            if t.name in self._tools:
                raise ValueError(f"duplicate tool name: {t.name}")
            self._tools[t.name] = t
        self._validators: dict[str, Any] = {}  # built on a tool's first call (see _validator)

    def add(self, tools: Iterable[Tool]) -> list[str]:
        """Register more tools (e.g. from an MCP server), appended after the others.

        A tool whose input schema cannot validate arguments (``schema_problem``: invalid,
        or a ``$ref`` that resolves nowhere) is refused; the others are added. Returns
        one line per refused tool, for the user.
        """
        new, refused = [], []
        for t in tools:
            problem = schema_problem(t.parameters)
            if problem is None:
                new.append(t)
            else:
                refused.append(f"tool {t.name} not loaded: its input schema is broken ({problem})")
        names = [t.name for t in new]
        clash = sorted({n for n in names if n in self._tools or names.count(n) > 1})
        if clash:
            raise ValueError(f"duplicate tool name: {', '.join(clash)}")
        # Copy-on-write: other threads may be reading the registry.
        self._validators = {n: v for n, v in self._validators.items() if n not in names}
        self._tools = {**self._tools, **{t.name: t for t in new}}
        return refused

    def remove(self, prefix: str) -> list[str]:
        """Unregister every tool whose name starts with ``prefix``; returns their names."""
        return self.remove_names([n for n in self._tools if n.startswith(prefix)])

    def remove_names(self, names: Iterable[str]) -> list[str]:
        """Unregister the named tools (unknown names are skipped); returns those removed."""
        gone = [n for n in names if n in self._tools]
        self._tools = {n: t for n, t in self._tools.items() if n not in gone}
        self._validators = {n: v for n, v in self._validators.items() if n not in gone}
        return gone

    def _validator(self, name: str, tool_: Tool) -> Any:
        """The tool's validator, or why its schema cannot have one (a str)."""
        validator = self._validators.get(name)
        if validator is None:  # built (and jsonschema imported) on the tool's first call
            validator = schema_problem(tool_.parameters) or validator_for(tool_.parameters)
            self._validators = {**self._validators, name: validator}  # copy-on-write, as in add()
        return validator

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[ToolSchema]:
        return [t.schema() for t in self._tools.values()]

    def _unknown(self, name: str) -> ToolResult:
        available = ", ".join(self._tools) or "(none)"
        return error_result("unknown_tool", f"no tool named {name!r}; available tools: {available}")

    def parse_arguments(self, name: str, raw: str | dict | None
                        ) -> tuple[dict[str, Any], None] | tuple[None, ToolResult]:
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
            kind = json_type(value)
            return None, error_result(
                "invalid_arguments", f"arguments for {name} must be a JSON object, got {kind}"
            )
        validator = self._validator(name, tool_)
        problem = validator if isinstance(validator, str) else None
        try:
            errors = [] if problem else list(validator.iter_errors(value))
            if errors:
                return None, error_result("invalid_arguments", describe_errors(name, errors, tool_.parameters))
            if not problem:
                return _coerce_integers(value, tool_.parameters), None
        except Exception as exc:  # noqa: BLE001 - a schema that cannot validate is the tool's fault
            problem = _describe(exc)
        return None, error_result("invalid_schema", f"{name} cannot be called: its input schema is broken ({problem})")

    def call(self, name: str, raw: str | dict | None, cancel: Cancel | None = None) -> ToolResult:
        """Run a tool; every failure comes back as an error result, never raised (only Ctrl-C).
        ``cancel`` is the call's signal: the tool's ``cancel`` parameter, and ``tools.cancel.current()``."""
        signal = cancel or Cancel()
        try:
            args, error = self.parse_arguments(name, raw)
            if error is not None:
                return error
            assert args is not None  # one of the two is set
            tool_ = self._tools[name]
            restore = running(signal)
            try:
                with self._reporting():
                    value = tool_.fn(**args, **({CANCEL_PARAMETER: signal} if tool_.cancellable else {}))
                return success(_jsonable(value))
            except ToolError as exc:
                return error_result(exc.type, exc.message)
            except Exception as exc:  # noqa: BLE001 - failures are data for the model
                return error_result("tool_error", f"{type(exc).__name__}: {exc}")
            finally:
                restore()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - last resort: a bug here, or a tool's sys.exit()
            return error_result("internal_error", f"{name} failed inside glassloop: {_describe(exc)}")

    def _reporting(self) -> AbstractContextManager[None]:
        """Store writes in a call go to ``on_write`` (without one: to whoever reports already)."""
        if self.on_write is None:
            return nullcontext()
        return reporting(self.on_write)


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"[:300]
    except Exception:  # noqa: BLE001 - even str() of the exception may fail
        return type(exc).__name__


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))
