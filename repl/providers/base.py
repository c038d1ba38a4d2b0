"""Provider-neutral types: what every wire adapter yields and raises.

The agent loop sees only these. History messages are neutral dicts (see
``repl/history.py``); each adapter converts them to its wire format.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from repl.events import Usage

ErrorKind = Literal[
    "unreachable", "auth", "not_found", "rate_limit", "server", "bad_request",
    "timeout", "stream_cut", "missing_extra", "other",
]


def estimate_tokens(text: str) -> int:
    """Rough count: ~4 ASCII characters per token, ~1 token per other character (CJK…)."""
    ascii_chars = sum(1 for ch in text if ch.isascii())
    return (ascii_chars + 3) // 4 + (len(text) - ascii_chars)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model wrote it


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ToolCallPart:
    """A streamed fragment of a tool call (for live display only)."""

    index: int
    id: str | None
    name: str | None
    arguments_delta: str


@dataclass(frozen=True)
class Completed:
    """The end of one model call: the whole assistant message and its cost."""

    text: str
    tool_calls: list[ToolCall]
    usage: Usage
    finish_reason: str | None
    latency_s: float
    retries: int = 0


Part = TextPart | ToolCallPart | Completed


class ProviderError(Exception):
    """A failure that ends the turn with one clear line (never a traceback)."""

    def __init__(self, kind: ErrorKind, message: str, partial_text: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.partial_text = partial_text


class Provider(Protocol):
    """One configured endpoint. ``stream`` yields parts, ending with Completed.

    ``stream`` raises ProviderError for anything that ends the turn. Closing
    the generator early (Ctrl-C) must close the HTTP stream.
    """

    name: str
    model: str
    context_window: int

    def stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> Iterator[Part]: ...

    def close(self) -> None: ...
