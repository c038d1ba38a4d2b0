"""Provider-neutral types: what every wire adapter yields and raises.

The agent loop sees only these. History messages are neutral dicts (see
``repl/loop/history.py``); each adapter converts them to its wire format.
"""

from __future__ import annotations

import uuid
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, Required, TypedDict

if TYPE_CHECKING:
    from tools.registry import ToolSchema


@dataclass(frozen=True)
class SystemPrompt:
    """The system text as its parts, each after the one before with no separator added: the
    loop makes it (``repl/loop/prompts.py``), the text tool-call adapter puts its tool block
    between the instructions and the rest (``around``), so the instructions and the tools are
    the same prefix for every session: the embedded model's saved prompt state
    (docs/LOCAL_MODEL.md). A text made elsewhere (a test's) is all instructions."""

    instructions: str  # the same for every session on a profile
    advice: str = ""  # the embedded model's advice on when to call a tool, from a blank line ("": none)
    session: str = ""  # from a blank line: the date the session started, the user's own prompt

    @property
    def text(self) -> str:
        return self.instructions + self.advice + self.session

    def with_advice(self, advice: str) -> SystemPrompt:
        """This prompt with ``advice`` for its own; one without advice (a hosted model's) stays so."""
        return replace(self, advice=advice) if self.advice else self

    def around(self, block: str) -> str:
        """The text with ``block`` between the instructions and the rest."""
        return self.instructions + block + self.advice + self.session

    def messages(self) -> list[Message]:
        """The system message a request begins with (none for an empty prompt): its content the
        text, its ``prompt`` these parts."""
        return [{"role": "system", "content": self.text, "prompt": self}] if self.text else []


Role = Literal["system", "user", "assistant", "tool"]


class CallRecord(TypedDict):
    """A tool call as the conversation keeps it."""

    id: str
    name: str
    arguments: str  # JSON text, as the model sent it


class Message(TypedDict, total=False):
    """One message of the conversation in no wire's form (each adapter converts it); which
    keys a role has: ``repl/loop/history.py``."""

    role: Required[Role]
    content: Required[str]
    tool_calls: list[CallRecord]  # an assistant's
    prompt: SystemPrompt  # a system message's parts (its content is their text); no wire sends it
    tool_call_id: str  # a tool result's: the call it answers ...
    name: str  # ... and its tool


class Noted(Message, total=False):
    """The overlay of one request on its last message: the loop's note for this call only, at the
    end of the message's content after a blank line, or all of it when it is a message of its own
    (``loop.agent``). Never stored: the history keeps ``Message``s; the text-call adapter reads the
    note (``note_of``) to word the request without it where it must."""

    note: str


def note_of(message: Message) -> str:
    """The loop's note a request's message carries (``Noted``), or ""."""
    return str(message.get("note") or "")


@dataclass(frozen=True)
class Usage:
    """Tokens of one model call (or a sum of several)."""

    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False  # True when any part was estimated, not reported
    reasoning_tokens: int = 0  # part of output_tokens, when the server reports it

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.cached_tokens + other.cached_tokens,
            self.output_tokens + other.output_tokens,
            self.estimated or other.estimated,
            self.reasoning_tokens + other.reasoning_tokens,
        )


ErrorKind = Literal[
    "unreachable", "auth", "not_found", "rate_limit", "server", "bad_request",
    "timeout", "stream_cut", "missing_extra", "bad_response", "other",
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


def new_call_id() -> str:
    """An id for a tool call that came without one (or with one already used)."""
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ReasoningPart:
    """The model's reasoning (``reasoning_content``, a Responses reasoning summary)."""

    text: str


@dataclass(frozen=True)
class Retrying:
    """The request failed in a way worth retrying: attempt ``attempt`` of ``attempts``
    starts after ``delay_s`` (the adapter waits; Ctrl-C interrupts the wait)."""

    attempt: int
    attempts: int
    delay_s: float
    reason: str


@dataclass(frozen=True)
class RequestSent:
    """The request body as it went over the wire (decoded from the HTTP request's bytes);
    also yielded for a request the server refused, before the error is raised."""

    body: Any


@dataclass(frozen=True)
class AttemptFailed:
    """One attempt of a model call failed: ``status`` is the HTTP status (None when no answer
    came: a timeout, a refused connection), ``response`` the server's body (parsed JSON, else
    its text), ``reason`` a few words ("429 rate limited"); ``retried_as`` is the number of the
    attempt that retried it (None: none did, the call failed); ``method`` and ``url`` (credentials
    masked) of the request, the response ``headers`` that matter (``kept_headers``) and the
    seconds from sending to the failure."""

    attempt: int
    status: int | None
    response: Any
    reason: str
    retried_as: int | None
    method: str = ""
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0


@dataclass(frozen=True)
class ToolChoice:
    """Which tools one model call may use, decided before it is sent (a router, ``loop/routing.py``)
    and carried in the call, as the APIs' ``tool_choice``: ``mode`` "none" (answer in text),
    "auto" (a call to one of ``allowed``, or text) or "required" (a call to one of ``allowed``);
    ``allowed`` empty: every tool offered. ``top`` is the router's best candidates with their
    scores ("none" among them), ``threshold`` the score a tool needed to be chosen, ``by`` what
    decided ("meaning": the scores; "follow_up": the tools of the turn before; "named": the
    message names the tool)."""

    mode: Literal["none", "auto", "required"] = "auto"
    allowed: tuple[str, ...] = ()
    top: tuple[tuple[str, float], ...] = ()
    threshold: float = 0.0
    by: str = ""


@dataclass(frozen=True)
class Completed:
    """The end of one model call: the whole assistant message and its cost."""

    text: str
    tool_calls: list[ToolCall]
    usage: Usage
    finish_reason: str | None
    latency_s: float
    retries: int = 0
    response: dict[str, Any] | None = None  # as assembled from the stream, for /trace --raw
    model: str | None = None  # the model the answer names (None: it named none)
    # the answer only repeated the question: held back, never shown (the embedded model's echo guard)
    echoed: bool = False


Part = TextPart | ReasoningPart | Retrying | RequestSent | AttemptFailed | Completed


class ProviderError(Exception):
    """A failure that ends the turn with one clear line (never a traceback)."""

    def __init__(self, kind: ErrorKind, message: str, partial_text: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.partial_text = partial_text


class BadShape(Exception):
    """A field of the server's answer has the wrong type (the adapter reports ``bad_response``)."""


def is_record(value: Any) -> bool:
    """A JSON object as the SDK hands it over: a dict or a (pydantic) model."""
    return isinstance(value, dict) or hasattr(type(value), "model_fields")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


_KINDS: dict[str, Any] = {
    "an object": is_record, "a list": lambda v: isinstance(v, list),
    "a string": lambda v: isinstance(v, str), "a count": _is_count,
    "an integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
}


_NAMES = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def _what(value: Any) -> str:
    return "an object" if is_record(value) else _NAMES.get(type(value), type(value).__name__)


def wire_field(record: Any, name: str, kind: str, path: str) -> Any:
    """``record.name`` (dict key or model attribute), None when absent, else of ``kind``
    (a key of ``_KINDS``); any other value, or a ``record`` that is no object, raises BadShape
    naming ``path.name``. The SDK builds its objects without validating them, so every
    field an adapter reads goes through here."""
    if not is_record(record):
        raise BadShape(f"{path} is {_what(record)}, expected an object")
    value = record.get(name) if isinstance(record, dict) else getattr(record, name, None)
    if value is None or _KINDS[kind](value):
        return value
    raise BadShape(f"{path}.{name} is {_what(value)}, expected {kind}")


class Provider(Protocol):
    """One configured endpoint. ``stream`` yields parts, ending with Completed.

    ``stream`` raises ProviderError for anything that ends the turn. Closing
    the generator early (Ctrl-C) must close the HTTP stream. When ``deadline``
    (``time.monotonic()``) passes, the call must end promptly, even while the
    server keeps the stream alive (the error raised then is any ProviderError).
    ``choice``: the tools this call may use, as a router decided (None: no decision, "auto").
    """

    name: str
    model: str
    context_window: int  # tokens; the loop cuts each request to fit (<= 0: no cut)
    max_tokens: int | None  # the answer's limit; the loop keeps room for it (2048 when None)

    def stream(
        self, messages: list[Message], tools: list[ToolSchema] | None,
        deadline: float | None = None, choice: ToolChoice | None = None,
    ) -> Generator[Part, None, None]: ...

    def close(self) -> None: ...
