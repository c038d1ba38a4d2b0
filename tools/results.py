"""What a tool call gives back, and the error a tool raises.

A result is the JSON object the model, the trace and the journal read: a success is
``{"ok": true, ...}`` (a tool's dict beside ``ok``, any other value under ``result``),
a failure ``{"ok": false, "error": {"type": ..., "message": ...}}``. It is made by
:func:`success` and :func:`error_result` and read by :func:`error_of`, so no caller
probes its keys by hand.
"""

from __future__ import annotations

from typing import Any

ToolResult = dict[str, Any]  # the wire shape itself: stored, traced and sent as it is


class ToolError(Exception):
    """A structured tool failure; ``type`` is a short machine-readable tag."""

    def __init__(self, type: str, message: str) -> None:  # noqa: A002 - mirrors the result shape
        super().__init__(message)
        self.type = type
        self.message = message


def success(value: Any) -> ToolResult:
    """``value`` (JSON data) as a successful result: a dict's keys beside ``"ok": true``
    (an ``ok`` of its own dropped), anything else under ``result``."""
    if isinstance(value, dict):
        return {"ok": True, **{k: v for k, v in value.items() if k != "ok"}}
    return {"ok": True, "result": value}


def error_result(type: str, message: str) -> ToolResult:  # noqa: A002
    return {"ok": False, "error": {"type": type, "message": message}}


def error_of(result: ToolResult) -> tuple[str, str] | None:
    """A failed result's ``(type, message)``; None for a success. A part that is missing
    (a result made by hand) reads as ``""``."""
    if result.get("ok") is True:
        return None
    error = result.get("error")
    if not isinstance(error, dict):
        return "", ""
    kind, message = error.get("type"), error.get("message")
    return kind if isinstance(kind, str) else "", message if isinstance(message, str) else ""
