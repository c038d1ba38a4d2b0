from __future__ import annotations

import json
import time
from typing import Literal

import pytest

from tools.registry import Registry, Tool, parse_docstring, tool
from tools.results import ToolError, error_result

Size = Literal["small", "large"]


@tool
def order(item: str, count: int = 1, size: Size = "small", rush: bool = False,
          ratio: float | None = None, labels: list[str] | None = None) -> dict:
    """Order an item.

    Second paragraph
    of the description.

    Args:
        item: What to order,
            e.g. "tea".
        count: How many.
        size (str): Cup size.

    Returns:
        The order.
    """
    return {"item": item, "count": count, "size": size, "rush": rush, "ratio": ratio,
            "labels": labels}


@tool(name="boom", side_effects=True, timeout_s=3.0)
def explode(kind: str) -> str:
    """Fail on purpose."""
    if kind == "tool":
        raise ToolError("not_found", "nothing called that")
    if kind == "crash":
        raise ValueError("kaput")
    return "fine"


@pytest.fixture
def registry() -> Registry:
    return Registry([order, explode])


def test_schema_types_defaults_and_required() -> None:
    props = order.parameters["properties"]
    assert props["item"] == {"type": "string", "description": 'What to order, e.g. "tea".'}
    assert props["count"] == {"type": "integer", "description": "How many.", "default": 1}
    assert props["size"]["enum"] == ["small", "large"] and props["size"]["type"] == "string"
    assert props["size"]["description"] == "Cup size."
    assert props["rush"]["type"] == "boolean"
    assert props["ratio"]["type"] == ["number", "null"]
    assert props["labels"] == {"type": ["array", "null"], "items": {"type": "string"}}
    assert order.parameters["required"] == ["item"]
    assert order.parameters["additionalProperties"] is False


def test_description_is_text_before_args() -> None:
    assert order.description == "Order an item.\n\nSecond paragraph of the description."
    assert order.name == "order" and not order.side_effects and order.timeout_s is None
    assert explode.name == "boom" and explode.side_effects and explode.timeout_s == 3.0


def test_union_literal_in_closure_and_optional_without_default() -> None:
    def factory() -> Tool:
        Mode = Literal["a", "b"]  # noqa: N806 - a local alias, resolved from the factory

        @tool
        def pick(key: str | int, mode: Mode, extra: str | None) -> dict:
            """Pick."""
            return {"key": key, "mode": mode, "extra": extra}

        return pick

    pick = factory()
    props = pick.parameters["properties"]
    assert props["key"]["type"] == ["string", "integer"]
    assert props["mode"]["enum"] == ["a", "b"]
    assert pick.parameters["required"] == ["key", "mode"]
    result = Registry([pick]).call("pick", {"key": 7, "mode": "b"})
    assert result == {"ok": True, "key": 7, "mode": "b", "extra": None}


def test_explicit_parameters_escape_hatch() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}},
              "required": ["n"], "additionalProperties": False}

    @tool(parameters=schema)
    def count(n):  # noqa: ANN001 - untyped on purpose
        """Count."""
        return n

    reg = Registry([count])
    assert reg.call("count", '{"n": 3}') == {"ok": True, "result": 3}
    error = reg.call("count", '{"n": 0}')["error"]
    assert error["type"] == "invalid_arguments" and "minimum" in error["message"]


def test_parse_docstring_handles_missing_sections() -> None:
    assert parse_docstring("") == ("", {})
    assert parse_docstring("Just one line.") == ("Just one line.", {})


def test_schemas_and_names(registry: Registry) -> None:
    assert registry.names() == ["order", "boom"]
    first = registry.schemas()[0]
    assert set(first) == {"name", "description", "parameters"}
    assert registry.get("boom") is explode and registry.get("nope") is None
    with pytest.raises(ValueError):
        Registry([order, order])


def test_success_shapes(registry: Registry) -> None:
    result = registry.call("order", '{"item": "tea", "count": 2}')
    assert result["ok"] is True and result["item"] == "tea" and result["count"] == 2
    assert registry.call("boom", {"kind": "ok"}) == {"ok": True, "result": "fine"}


@pytest.mark.parametrize(
    ("raw", "fragments"),
    [
        ("{}", ["missing required field 'item'"]),
        ('{"item": 5}', ["'item'", "must be string", "got integer 5"]),
        ('{"item": "tea", "size": "huge"}', ["'size'", '"small" | "large"', '"huge"']),
        ('{"item": "tea", "colour": "red"}', ["unexpected field 'colour'"]),
        ('{"item": "tea", "count": "2"}', ["'count'", "integer", "got string"]),
        ('{"item": "tea", "labels": ["a", 3]}', ["'labels[1]'", "must be string"]),
    ],
)
def test_validation_errors_are_readable(registry: Registry, raw: str, fragments: list) -> None:
    result = registry.call("order", raw)
    assert result["ok"] is False and result["error"]["type"] == "invalid_arguments"
    for fragment in fragments:
        assert fragment in result["error"]["message"]
    assert "Parameters: item: string (required)" in result["error"]["message"]


def test_invalid_json(registry: Registry) -> None:
    result = registry.call("order", '{"item": "tea",')
    assert result["error"]["type"] == "invalid_json"
    assert registry.call("order", "[1, 2]")["error"]["type"] == "invalid_arguments"


@pytest.mark.parametrize(
    "raw",
    [
        '```json\n{"item": "tea"}\n```',
        '```\n{"item": "tea"}\n```',
        'Sure! Here are the arguments: {"item": "tea"} hope that helps',
        'call order with {"item": "tea", "labels": ["{", "}"]} now',
        'here: {"item": "tea", "labels": ["say \\"}\\" please", "\\\\"]} done',
    ],
)
def test_json_repair(registry: Registry, raw: str) -> None:
    result = registry.call("order", raw)
    assert result["ok"] is True and result["item"] == "tea"


def test_repair_of_pathological_text_does_not_backtrack(registry: Registry) -> None:
    start = time.perf_counter()
    result = registry.call("order", "{" * 200_000)
    assert result["error"]["type"] == "invalid_json"
    # ~0.3 s on a quiet machine, more beside other tests; a repair that backtracks takes hours
    assert time.perf_counter() - start < 20


def test_empty_arguments_mean_empty_object() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    reg = Registry([ping])
    assert reg.call("ping", "") == {"ok": True, "result": "pong"}
    assert reg.call("ping", "   ") == {"ok": True, "result": "pong"}
    assert reg.parse_arguments("ping", "") == ({}, None)


def test_unknown_tool_lists_available(registry: Registry) -> None:
    result = registry.call("ordr", "{}")
    assert result["error"]["type"] == "unknown_tool"
    assert "order" in result["error"]["message"] and "boom" in result["error"]["message"]


def test_tool_errors_and_exceptions_become_data(registry: Registry) -> None:
    assert registry.call("boom", {"kind": "tool"}) == error_result("not_found", "nothing called that")
    crash = registry.call("boom", {"kind": "crash"})
    assert crash == {"ok": False, "error": {"type": "tool_error", "message": "ValueError: kaput"}}


def test_keyboard_interrupt_propagates() -> None:
    @tool
    def stop() -> None:
        """Stop."""
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Registry([stop]).call("stop", "{}")


def test_integral_float_becomes_int_and_results_are_json(registry: Registry) -> None:
    args, error = registry.parse_arguments("order", '{"item": "x", "count": 2.0}')
    assert error is None and args == {"item": "x", "count": 2} and isinstance(args["count"], int)

    @tool
    def odd() -> dict:
        """Returns a set, which JSON cannot hold as is."""
        return {"ok": "ignored", "values": {1}}

    result = Registry([odd]).call("odd", "{}")
    assert result["ok"] is True
    json.dumps(result)


def test_preview_helper() -> None:
    seen = {}

    def preview(args: dict) -> dict:
        seen.update(args)
        return {"before": None, "after": {"x": args["x"]}}

    @tool(side_effects=True, preview=preview)
    def put(x: str) -> str:
        """Put."""
        return x

    reg = Registry([put, order])
    assert reg.get("put").preview({"x": "1"}) == {"before": None, "after": {"x": "1"}}
    assert seen == {"x": "1"}
    assert reg.get("order").preview is None
