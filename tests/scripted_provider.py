"""A ``Provider`` (``repl/providers/base.py``) in-process, fed the scripts of ``tests/fakeserver.py``.

Loop tests whose subject is the loop (approvals, guards, events, undo, history validity)
use it instead of the real adapter over HTTP: the same ``text(...)``, ``tool_calls(...)``,
``fault_status(...)`` and ``cut_stream_after(...)`` replies (or callables of the request
body), the same "(script exhausted)" answer and ``unscripted`` count, the same history
check (``history_errors``; a bad history is refused as the server refuses it), and each
request recorded with the body the Chat Completions adapter would send. What it does not
model (delays, endless or raw streams, stream_options quirks, retries) raises at once: a
test about the wire belongs on ``fake_server``.

    provider = ScriptedProvider()
    provider.script(tool_calls(call("list_todos", {})), text("done"))
    finished, log, history = turn(provider, registry, "what is left?")
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from repl.loop.events import Usage
from repl.providers.base import (
    Completed,
    Part,
    ProviderError,
    RequestSent,
    TextPart,
    ToolCall,
    ToolChoice,
    new_call_id,
)
from repl.providers.chat import to_wire_messages, to_wire_tools
from repl.providers.endpoint import wire_response
from tests.fakeserver import (
    AUTO,
    DEFAULT_ERRORS,
    Reply,
    Scripted,
    _finish_reason,
    _split,
    _usage_json,
    check_history,
    text,
)

# what the adapter makes of each refusal (repl/providers/errors.py)
_KINDS = {400: "bad_request", 401: "auth", 403: "auth", 404: "not_found", 413: "bad_request",
          422: "bad_request", 429: "rate_limit"}


@dataclass(frozen=True)
class ScriptedRequest:
    """One model call as ``fake_server`` would have recorded it (``body`` as the adapter sends it)."""

    body: dict[str, Any]
    path: str = "/v1/chat/completions"


class ScriptedProvider:
    """See the module docstring. ``prefix_cache`` reports ``cached_tokens`` as ``FakeServer`` does."""

    def __init__(self, *, model: str = "m", context_window: int = 0, max_tokens: int | None = None,
                 check_history: bool = True, prefix_cache: bool = False, cache_block: int = 64) -> None:
        self.name = "scripted"
        self.model = model
        self.context_window = context_window
        self.max_tokens = max_tokens
        self.check_history = check_history
        self.prefix_cache = prefix_cache
        self.cache_block = cache_block
        self.requests: list[ScriptedRequest] = []
        self.choices: list[ToolChoice | None] = []  # per call, in order
        self.history_errors: list[str] = []
        self.unscripted = 0
        self.closed = False
        self._queue: deque[Scripted] = deque()
        self._lock = threading.Lock()
        self._next_call = 0
        self._cached_prefixes: set[bytes] = set()  # FakeServer.prefix_usage reads it

    # ---- the script (FakeServer's interface) ---------------------------------------------
    def script(self, *replies: Scripted) -> None:
        with self._lock:
            self._queue.extend(replies)

    def chat_requests(self) -> list[ScriptedRequest]:
        return list(self.requests)

    def call_id(self) -> str:
        with self._lock:
            self._next_call += 1
            return f"call_{self._next_call}"

    def prefix_usage(self, prompt: bytes) -> tuple[int, int]:
        from tests.fakeserver import FakeServer

        return FakeServer.prefix_usage(self, prompt)  # type: ignore[arg-type]

    # ---- Provider ----------------------------------------------------------------------------
    def stream(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
               deadline: float | None = None, choice: ToolChoice | None = None) -> Generator[Part, None, None]:
        started = time.monotonic()
        body: dict[str, Any] = {"model": self.model, "messages": to_wire_messages(messages)}
        if tools:
            body["tools"] = to_wire_tools(tools)
        self.choices.append(choice)  # what a router decided for the call (None: nothing)
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        body |= {"stream": True, "stream_options": {"include_usage": True}}
        body = json.loads(json.dumps(body, ensure_ascii=False))  # what goes over a wire: plain JSON
        self.requests.append(ScriptedRequest(body))
        yield RequestSent(body)
        errors = check_history(body["messages"]) if self.check_history else []
        if errors:
            self.history_errors.extend(errors)
            raise ProviderError("bad_request", "scripted: request rejected (HTTP 400): invalid history: "
                                + "; ".join(errors))
        reply = self._next(body)
        if reply.status != 200:
            default = DEFAULT_ERRORS.get(reply.status, ("server error",))[0]
            kind = _KINDS.get(reply.status, "server" if reply.status >= 500 else "other")
            raise ProviderError(kind, f"scripted: HTTP {reply.status}: {reply.error_message or default}")
        events = self._events(reply)
        shown: list[str] = []
        for n, piece in enumerate(events):
            if reply.cut_after is not None and n >= reply.cut_after:
                raise ProviderError("stream_cut", "scripted: the connection dropped mid-answer", "".join(shown))
            if piece:
                shown.append(piece)
                yield TextPart(piece)
        calls = [ToolCall(self.call_id() if c.id == AUTO else (c.id or new_call_id()), c.name, c.arguments)
                 for c in reply.calls]
        reported = _usage_json(reply, body, self)  # type: ignore[arg-type]
        usage = (Usage(reported["prompt_tokens"], reported["prompt_tokens_details"]["cached_tokens"],
                       reported["completion_tokens"]) if reported else Usage(0, 0, 0, estimated=True))
        finish = _finish_reason(reply)
        yield Completed(text="".join(shown), tool_calls=calls, usage=usage, finish_reason=finish,
                        latency_s=time.monotonic() - started,
                        response=wire_response("".join(shown), "", calls, finish, reported, usage))

    def wire_messages(self, messages: list[dict[str, Any]],
                      tools: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """What step mode shows: ``messages`` as the Chat Completions adapter sends them."""
        return to_wire_messages(messages)

    def close(self) -> None:
        self.closed = True

    # ---- helpers -------------------------------------------------------------------------------
    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            scripted = self._queue.popleft() if self._queue else None
        if scripted is None:
            self.unscripted += 1
            return text("(script exhausted)")
        reply = scripted(body) if callable(scripted) else scripted
        unsupported = [name for name in ("first_byte_delay", "chunk_delay", "endless_after", "keepalive_s",
                                         "retry_after", "raw_events")
                       if getattr(reply, name)] + (["reject_stream_options"] if reply.reject_stream_options else [])
        if unsupported:
            raise NotImplementedError(f"ScriptedProvider does not model {unsupported}: use fake_server")
        return reply

    @staticmethod
    def _events(reply: Reply) -> list[str]:
        """The text of each SSE event the server would send (the opening one and call fragments
        carry none), so ``cut_after`` cuts at the same place."""
        calls = sum(1 + len(_split(c.arguments, reply.chunk_size)) for c in reply.calls)
        return ["", *_split(reply.text, reply.chunk_size), *[""] * calls]
