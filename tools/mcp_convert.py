"""MCP shapes to glassloop shapes: tool names, input schemas, call results (their JSON), errors."""

from __future__ import annotations

import re
from typing import Any

from tools.results import ToolError, ToolResult, success

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


_SENTENCE_END = re.compile(r"(?<=[.!?])\s|[。！？\n]")


def advice_phrase(description: str) -> str:
    """What a tool is for, from its description: the first sentence, without its final mark and
    with a capital that only starts the sentence lowered ("Get the time." -> "get the time")."""
    first = _SENTENCE_END.split(description.strip(), maxsplit=1)[0].strip().rstrip(".!")
    return first[:1].lower() + first[1:] if first[1:2].islower() else first


def parameters_from(schema: dict[str, Any] | None) -> dict[str, Any]:
    """The server's input schema when it describes an object, else any object.

    A broken object schema (invalid, or a ``$ref`` that resolves nowhere) is kept as
    it is: ``Registry.add`` refuses the tool with a line saying why.
    """
    schema = dict(schema) if isinstance(schema, dict) else {}
    schema.pop("title", None)  # noise for the model; the tool name says it
    if schema.get("type") != "object":
        return {"type": "object", "properties": {}}
    schema.setdefault("properties", {})
    return schema


def result_to_data(result: dict[str, Any]) -> ToolResult:
    """A ``tools/call`` result (its JSON) as a glassloop result; ``isError`` raises ``ToolError``."""
    content = result.get("content")
    blocks = [_block(b) for b in (content if isinstance(content, list) else []) if isinstance(b, dict)]
    text = "\n".join(b for b in blocks if isinstance(b, str))
    if result.get("isError") is True:
        raise ToolError("mcp_tool_error", text or "the tool reported an error")
    if result.get("structuredContent") is not None:
        return success({"content": result["structuredContent"]})
    if all(isinstance(b, str) for b in blocks):
        return success({"content": text})
    return success({"content": blocks})


def _block(block: dict[str, Any]) -> str | dict[str, Any]:
    """Text stays text; media is summarised (its bytes would only burn context)."""
    kind = block.get("type") if isinstance(block.get("type"), str) else ""
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "resource":
        inner = _dict(block.get("resource"))
        text = inner.get("text")
        return text if isinstance(text, str) else {"type": "resource", "uri": str(inner.get("uri", ""))}
    if kind == "resource_link":
        return {"type": "resource_link", "uri": str(block.get("uri", "")), "name": str(block.get("name", ""))}
    data = block.get("data")
    return {"type": kind or "unknown", "mime_type": str(block.get("mimeType") or ""),
            "bytes": len(data) * 3 // 4 if isinstance(data, str) else 0}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
