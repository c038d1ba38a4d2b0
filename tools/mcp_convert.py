"""MCP shapes to glassloop shapes: tool names, input schemas, call results, errors."""

from __future__ import annotations

import re
from typing import Any

from tools.registry import ToolError

SEPARATOR = "__"
NAME_OK = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """``SERVER__tool``, limited to the characters and length tool names allow."""
    return NAME_OK.sub("_", f"{server}{SEPARATOR}{tool}")[:64]


def one_line(exc: BaseException) -> str:
    """The first real failure inside (nested) exception groups, as one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def parameters_from(schema: dict[str, Any] | None) -> dict[str, Any]:
    """The server's input schema when it describes an object, else any object.

    A broken object schema (invalid, or a ``$ref`` that resolves nowhere) is kept as
    it is: ``Registry.add`` refuses the tool with a line saying why.
    """
    schema = dict(schema or {})
    schema.pop("title", None)  # noise for the model; the tool name says it
    if schema.get("type") != "object":
        return {"type": "object", "properties": {}}
    schema.setdefault("properties", {})
    return schema


def result_to_data(result: Any) -> dict[str, Any]:
    """A ``CallToolResult`` as glassloop result data; ``isError`` raises ``ToolError``."""
    blocks = [_block(b) for b in result.content]
    text = "\n".join(b for b in blocks if isinstance(b, str))
    if result.is_error:
        raise ToolError("mcp_tool_error", text or "the tool reported an error")
    if result.structured_content is not None:
        return {"ok": True, "content": result.structured_content}
    if all(isinstance(b, str) for b in blocks):
        return {"ok": True, "content": text}
    return {"ok": True, "content": blocks}


def _block(block: Any) -> str | dict[str, Any]:
    """Text stays text; media is summarised (its bytes would only burn context)."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return block.text
    if kind == "resource":
        inner = block.resource
        text = getattr(inner, "text", None)
        return text if text is not None else {"type": "resource", "uri": str(inner.uri)}
    if kind == "resource_link":
        return {"type": "resource_link", "uri": str(block.uri), "name": block.name}
    data = getattr(block, "data", "") or ""
    return {"type": kind or "unknown", "mime_type": getattr(block, "mime_type", ""),
            "bytes": len(data) * 3 // 4}
