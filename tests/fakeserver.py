"""A scripted OpenAI-compatible HTTP server for tests, end-to-end runs and benchmarks.

    with FakeServer() as server:
        server.script(text("hello world", chunk_size=3),
                      tool_calls(call("get_todo", {"todo_id": "todo-002"})))
        ...point an OpenAI client at server.base_url...

Each chat request pops the next scripted reply (a ``Reply`` or a callable
``(request_json) -> Reply``). When the script is empty the server answers 200
with the text "(script exhausted)" and counts it in ``server.unscripted``, so a
test that makes one call too many fails on its own assertions, not on an HTTP
error. Routes live in ``server.routes`` ((method, path) -> handler), so other
endpoints can be added next to the chat one with ``Exchange`` and ``next_reply``.

With ``FakeServer(prefix_cache=True)`` automatic usage works like a provider
with prefix caching: the prompt is the request's tools then its messages
(Responses: tools, instructions, input) serialised as JSON, ~4 bytes a token,
and ``cached_tokens`` is the longest prefix shared with any earlier request,
rounded down to ``cache_block``-token blocks.

Standalone: ``python -m tests.fakeserver --port N --script FILE.json`` where the
file holds a JSON list of replies (keys = ``Reply`` fields, plus ``tool_calls``:
``[{"name", "arguments", "id"?}]``); the base URL is printed on stdout. ``--record FILE``
appends each request received (path and body) to FILE as a JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import chain, zip_longest
from typing import Any

AUTO = "auto"
# (prompt, completion, cached) or (prompt, completion, cached, reasoning), None, AUTO
UsageSpec = tuple[int, int, int] | tuple[int, int, int, int] | None | str
API_PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses"}


@dataclass(frozen=True)
class Call:
    name: str
    arguments: str  # raw text, sent as is (may be invalid JSON on purpose)
    id: str | None = AUTO  # AUTO: server assigns call_N; None: no id is sent


@dataclass(frozen=True)
class Reply:
    text: str = ""
    calls: tuple[Call, ...] = ()
    chunk_size: int = 8
    usage: UsageSpec = AUTO  # AUTO: rough count from the request; None: no usage chunk
    finish_reason: str | None = AUTO  # AUTO: "tool_calls" or "stop"; None: no final chunk
    status: int = 200
    error_message: str = ""
    retry_after: float | None = None
    first_byte_delay: float = 0.0
    chunk_delay: float = 0.0
    cut_after: int | None = None  # close the connection after n SSE events
    # After n SSE events the stream never ends: with keepalive_s it sends only SSE comments
    # (": keep-alive") that often, else it repeats event n-1 forever (an endless answer).
    endless_after: int | None = None
    keepalive_s: float = 0.0
    # After n SSE events the stream waits until ``release`` is set (at most 30 s): a test sees
    # what the client did with the first part while the rest is still to come.
    hold_after: int | None = None
    release: threading.Event | None = None
    reject_stream_options: bool = False  # 400 while the request has stream_options
    # Sent verbatim instead of the generated stream: each event a str (as is) or any JSON
    # value; on the Responses route a (name, data) pair or a dict whose "type" names it.
    raw_events: tuple[Any, ...] | None = None
    headers: tuple[tuple[str, str], ...] = ()  # sent with the answer (a fault's or the stream's)
    model: str | None = AUTO  # the model the answer names: AUTO the one asked for; None: no field


Scripted = Reply | Callable[[dict[str, Any]], Reply]


def text(content: str, **opts: Any) -> Reply:
    return Reply(text=content, **opts)


def call(name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = AUTO) -> Call:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {}, ensure_ascii=False)
    return Call(name, raw, id)


def tool_calls(*calls: Call, text: str = "", **opts: Any) -> Reply:
    return Reply(text=text, calls=calls, **opts)


def fault_status(status: int, *, retry_after: float | None = None, message: str = "") -> Reply:
    return Reply(status=status, retry_after=retry_after, error_message=message)


def slow_first_byte(seconds: float, reply: Reply | None = None) -> Reply:
    return replace(reply or text("slow reply"), first_byte_delay=seconds)


def slow_chunks(seconds: float, reply: Reply | None = None) -> Reply:
    """Sleep between SSE events (interrupt tests)."""
    return replace(reply or text("x" * 200, chunk_size=1), chunk_delay=seconds)


def held_stream(after: int, release: threading.Event, reply: Reply) -> Reply:
    """``reply`` streamed up to ``after`` events, the rest once ``release`` is set."""
    return replace(reply, hold_after=after, release=release)


def cut_stream_after(n_chunks: int, reply: Reply | None = None) -> Reply:
    return replace(reply or text("this answer is cut short", chunk_size=2), cut_after=n_chunks)


def endless_stream(after: int, reply: Reply | None = None, *, every: float = 0.01) -> Reply:
    """Text that never stops: event ``after - 1`` (a text delta, when ``after`` is past the
    stream's opening events) is sent again every ``every`` seconds until the client hangs up."""
    return replace(reply or text("more " * 10, chunk_size=5), endless_after=after, chunk_delay=every)


def keepalive_stream(after: int, reply: Reply | None = None, *, every: float = 0.05) -> Reply:
    """After ``after`` events only SSE keep-alive comments, forever: the socket is never idle
    (so a read timeout never fires) and the client never sees another event."""
    return replace(reply or text("thinking... " * 4, chunk_size=6), endless_after=after, keepalive_s=every)


def malformed_arguments(name: str = "get_todo", raw: str = '{"todo_id": "todo-0') -> Reply:
    return tool_calls(call(name, raw))


def reject_stream_options(reply: Reply | None = None) -> Reply:
    return replace(reply or text("ok without stream_options"), reject_stream_options=True)


def raw_stream(*events: Any, **opts: Any) -> Reply:
    """A stream of exactly these events (malformed shapes); chat streams end with "[DONE]"."""
    return Reply(raw_events=events, **opts)


def raw_sse(reply: Reply, named: bool = False) -> list[str | tuple[str, str]]:
    """``reply.raw_events`` as SSE data (``named``: with the event name, as the Responses API)."""
    out: list[str | tuple[str, str]] = []
    for event in reply.raw_events or ():
        name = None
        if isinstance(event, tuple) and len(event) == 2 and isinstance(event[0], str):
            name, event = event
        elif named and isinstance(event, dict) and isinstance(event.get("type"), str):
            name = event["type"]
        data = event if isinstance(event, str) else json.dumps(event, ensure_ascii=False)
        out.append((name, data) if name else data)
    return out


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names, nothing stripped
    body: Any
    raw: bytes = b""  # the body's bytes as received


class ClientGone(Exception):
    """The client closed the connection while we were writing."""


def error_body(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


DEFAULT_ERRORS = {
    400: ("bad request", "invalid_request_error", None),
    401: ("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
    403: ("You are not allowed to use this model.", "invalid_request_error", "forbidden"),
    404: ("The model `{model}` does not exist or you do not have access to it.",
          "invalid_request_error", "model_not_found"),
    429: ("Rate limit reached, please retry later.", "requests", "rate_limit_exceeded"),
}


class Exchange:
    """One HTTP request/response, with JSON and SSE writers for route handlers."""

    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        self._h = handler
        self.answered = False  # the last bytes of the response are on their way

    def _last(self, data: bytes) -> None:
        """Write the response's last bytes, no longer counted in flight: counted after them, a
        client that sent its next request at once could find the two counted together."""
        fake: FakeServer = self._h.server.fake  # type: ignore[attr-defined]
        with fake._lock:
            if not self.answered:
                self.answered = True
                fake._in_flight -= 1
        self._write(data)

    def send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self._h.send_response(status)
        self._h.send_header("Content-Type", "application/json")
        self._h.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self._h.send_header(name, value)
        self._h.end_headers()
        self._last(data)

    def send_fault(self, reply: Reply, model: str) -> bool:
        """Answer with the reply's error status; False when it is not a fault."""
        if reply.status == 200:
            return False
        time.sleep(reply.first_byte_delay)
        default, type_, code = DEFAULT_ERRORS.get(reply.status, ("server error", "server_error", None))
        message = (reply.error_message or default).replace("{model}", model)
        headers = {} if reply.retry_after is None else {"Retry-After": f"{reply.retry_after:g}"}
        self.send_json(reply.status, error_body(message, type_, code), headers | dict(reply.headers))
        return True

    def stream(self, events: Iterable[str | tuple[str, str]], reply: Reply) -> None:
        """Send SSE events (data, or (event, data)) honouring the reply's delays and cut."""
        time.sleep(reply.first_byte_delay)
        self._h.send_response(200)
        self._h.send_header("Content-Type", "text/event-stream")
        self._h.send_header("Transfer-Encoding", "chunked")
        for name, value in reply.headers:
            self._h.send_header(name, value)
        self._h.end_headers()
        events = list(events)
        for n, event in enumerate(events):
            if reply.cut_after is not None and n >= reply.cut_after:
                self._cut()
                return
            if reply.endless_after is not None and n >= reply.endless_after:
                self._endless(events[n - 1] if n else event, reply)
                return
            if n and reply.chunk_delay:
                time.sleep(reply.chunk_delay)
            if n and n == reply.hold_after and reply.release is not None:
                reply.release.wait(30)
            self._write_event(event)
        self._last(b"0\r\n\r\n")

    def _write_event(self, event: str | tuple[str, str]) -> None:
        name, data = event if isinstance(event, tuple) else (None, event)
        payload = (f"event: {name}\n" if name else "") + f"data: {data}\n\n"
        # A lone surrogate (half an emoji, scripted on purpose) goes out as its JSON escape \udXXX.
        self._write_chunk(payload.encode("utf-8", "backslashreplace"))

    def _write_chunk(self, raw: bytes) -> None:
        self._write(b"%x\r\n%s\r\n" % (len(raw), raw))

    def _endless(self, event: str | tuple[str, str], reply: Reply) -> None:
        """Keep the stream open until the client hangs up (ClientGone) or the server stops."""
        fake: FakeServer = self._h.server.fake  # type: ignore[attr-defined]
        while not fake.stopping.is_set():
            if reply.keepalive_s:
                fake.stopping.wait(reply.keepalive_s)
                self._write_chunk(b": keep-alive\n\n")
            else:
                fake.stopping.wait(max(reply.chunk_delay, 0.001))
                self._write_event(event)
        with contextlib.suppress(OSError):  # the client may be gone already
            self._cut()

    def _cut(self) -> None:
        self._h.close_connection = True
        self._h.connection.shutdown(socket.SHUT_RDWR)

    def _write(self, data: bytes) -> None:
        try:
            self._h.wfile.write(data)
            self._h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError) as err:
            raise ClientGone from err


Route = Callable[["FakeServer", Exchange, RecordedRequest], None]


@dataclass
class FakeServer:
    """The server; a context manager. ``base_url`` ends with ``/v1``."""

    host: str = "127.0.0.1"
    port: int = 0
    model: str = "fake-model"
    api_key: str | None = None  # when set, other bearer tokens get 401
    reject_stream_options: bool = False  # behave like a server without stream_options
    check_history: bool = True
    requests: list[RecordedRequest] = field(default_factory=list)
    history_errors: list[str] = field(default_factory=list)
    disconnects: int = 0  # streams the client closed before the end
    unscripted: int = 0  # requests answered with "(script exhausted)"
    routes: dict[tuple[str, str], Route] = field(default_factory=dict)
    prefix_cache: bool = False  # report cached_tokens like a provider with prefix caching
    cache_block: int = 64  # tokens per cache block
    models: list[str] = field(default_factory=list)  # what GET /models lists; empty: just ``model``
    record_file: str = ""  # when set, each request's path and body are appended to it as a JSON line
    peak_in_flight: int = 0  # the most requests it was answering at once (reset it to measure again)

    def __post_init__(self) -> None:
        self._queue: deque[Scripted] = deque()
        self.stopping = threading.Event()  # ends endless streams
        self._cached_prefixes: set[bytes] = set()
        self._lock = threading.Lock()
        self._in_flight = 0
        self._next_call = 0
        self.routes.setdefault(("POST", "/v1/chat/completions"), handle_chat)
        self.routes.setdefault(("GET", "/v1/models"), handle_models)
        from tests.fake_responses import handle_responses  # that module imports this one

        self.routes.setdefault(("POST", "/v1/responses"), handle_responses)
        self._httpd = _HTTPServer((self.host, self.port), _Handler)
        self._httpd.fake = self  # type: ignore[attr-defined]
        self.port = self._httpd.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> FakeServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread (standalone mode) until interrupted."""
        try:
            self._httpd.serve_forever(poll_interval=0.05)
        except KeyboardInterrupt:
            pass
        finally:
            self._httpd.server_close()

    def stop(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, *replies: Scripted) -> None:
        with self._lock:
            self._queue.extend(replies)

    def next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            scripted = self._queue.popleft() if self._queue else None
        if scripted is None:
            self.unscripted += 1
            return text("(script exhausted)")
        return scripted(body) if callable(scripted) else scripted

    def push_front(self, reply: Reply) -> None:
        with self._lock:
            self._queue.appendleft(reply)

    def call_id(self) -> str:
        with self._lock:
            self._next_call += 1
            return f"call_{self._next_call}"

    def call_id_of(self, call: Call) -> str | None:
        """The id a scripted call is sent with: ``call_N`` for AUTO, else its own (None: no id)."""
        return self.call_id() if call.id == AUTO else call.id

    def chat_requests(self) -> list[RecordedRequest]:
        return self.requests_to("chat")

    def requests_to(self, api: str) -> list[RecordedRequest]:
        """The requests made to one wire API's route (``chat`` or ``responses``)."""
        return [r for r in self.requests if r.path == API_PATHS[api]]

    def prefix_usage(self, prompt: bytes) -> tuple[int, int]:
        """(prompt tokens, cached tokens) of a prompt, remembering its blocks for later requests."""
        block = self.cache_block * BYTES_PER_TOKEN
        chain, digests = b"", []
        for start in range(0, len(prompt) - block + 1, block):
            chain = hashlib.sha256(chain + prompt[start : start + block]).digest()
            digests.append(chain)  # stands for the whole prefix up to this block's end
        with self._lock:
            hits = next((n for n, d in enumerate(digests) if d not in self._cached_prefixes), len(digests))
            self._cached_prefixes.update(digests)
        tokens = len(prompt) // BYTES_PER_TOKEN
        return tokens, min(tokens, hits * self.cache_block)


BYTES_PER_TOKEN = 4


def prompt_bytes(body: dict[str, Any]) -> bytes:
    """What a provider's prompt cache would see: tools first, then the conversation."""
    parts: list[Any] = [body.get("tools") or []]
    if "messages" in body:
        parts += body.get("messages") or []
    else:  # Responses API
        parts += [body.get("instructions") or ""] + list(body.get("input") or [])
    return b"".join(json.dumps(p, ensure_ascii=False).encode() for p in parts)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # clients hanging up is normal
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep stderr quiet
        pass

    def do_GET(self) -> None:  # noqa: N802
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        fake: FakeServer = self.server.fake  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        ex = Exchange(self)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            ex.send_json(400, error_body("body is not JSON", "invalid_request_error"))
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        req = RecordedRequest(method, self.path.split("?")[0], headers, body, raw)
        fake.requests.append(req)
        if fake.record_file:
            with open(fake.record_file, "a", encoding="utf-8") as record:
                record.write(json.dumps({"path": req.path, "body": body}) + "\n")
        route = fake.routes.get((method, req.path))
        token = headers.get("authorization", "").removeprefix("Bearer ")
        with fake._lock:
            fake._in_flight += 1
            fake.peak_in_flight = max(fake.peak_in_flight, fake._in_flight)
        try:
            if route is None:
                ex.send_json(404, error_body(f"no route {method} {req.path}", "invalid_request_error"))
            elif fake.api_key is not None and token != fake.api_key:
                # Echo the key like real servers do: the client must not repeat it.
                ex.send_json(401, error_body(f"Incorrect API key provided: {token}",
                                             "invalid_request_error", "invalid_api_key"))
            else:
                route(fake, ex, req)
        except ClientGone:
            fake.disconnects += 1
            self.close_connection = True
        finally:
            with fake._lock:
                if not ex.answered:
                    fake._in_flight -= 1


def check_history(messages: list[dict[str, Any]]) -> list[str]:
    """Chat wire history rules; returns one string per violation."""
    errors: list[str] = []
    pending: set[str] = set()
    answered: set[str] = set()
    prev_role = None
    for i, msg in enumerate(messages):
        role = msg.get("role")
        if role == "tool":
            cid = msg.get("tool_call_id")
            if cid in pending:
                pending.discard(cid)
                answered.add(cid)
            else:
                kind = "second result" if cid in answered else "result without a call"
                errors.append(f"message {i}: tool {kind} (tool_call_id={cid!r})")
        else:
            if pending:
                errors.append(f"message {i} ({role}): unanswered tool calls {sorted(pending)}")
                pending.clear()
            if role == "user" and prev_role == "user":
                errors.append(f"message {i}: two user messages side by side")
            if role == "assistant":
                errors += _check_assistant(i, msg, pending, answered)
        prev_role = role
    if pending:
        errors.append(f"end of history: unanswered tool calls {sorted(pending)}")
    return errors


def _check_assistant(i: int, msg: dict[str, Any], pending: set[str], answered: set[str]) -> list[str]:
    calls = msg.get("tool_calls") or []
    errors = []
    if msg.get("content") is None and not calls:
        errors.append(f"message {i}: assistant message without content or tool_calls")
    for c in calls:
        cid = c.get("id")
        if not cid or cid in pending or cid in answered:
            errors.append(f"message {i}: missing or duplicate tool call id {cid!r}")
        pending.add(cid)
    return errors


def _split(s: str, size: int) -> list[str]:
    return [s[i : i + size] for i in range(0, len(s), max(1, size))]


def usage_numbers(reply: Reply, body: dict[str, Any],
                  fake: FakeServer | None = None) -> tuple[int, int, int, int] | None:
    """(prompt, completion, cached, reasoning) tokens a reply reports on either route; None for none.

    AUTO counts ~4 characters a token: the prompt from the request's conversation (with
    ``prefix_cache``, as ``prompt_bytes`` and with the cached prefix), the completion from the reply.
    """
    if reply.usage is None:
        return None
    output = len(reply.text) + sum(len(c.arguments) + len(c.name) for c in reply.calls)
    if reply.usage == AUTO and fake is not None and fake.prefix_cache:
        prompt, cached = fake.prefix_usage(prompt_bytes(body))
        return prompt, output // 4 + 1, cached, 0
    if reply.usage == AUTO:
        sent = body["messages"] if "messages" in body else [body.get("instructions"), body.get("input"),
                                                             body.get("tools")]
        return len(json.dumps(sent)) // 4, output // 4 + 1, 0, 0
    return (*tuple(reply.usage), 0)[:4]  # type: ignore[return-value]


def _usage_json(reply: Reply, body: dict[str, Any], fake: FakeServer | None = None) -> dict[str, Any] | None:
    if (numbers := usage_numbers(reply, body, fake)) is None:
        return None
    prompt, completion, cached, reasoning = numbers
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion, "prompt_tokens_details": {"cached_tokens": cached}}
    if reasoning:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return usage


def _finish_reason(reply: Reply) -> str | None:
    if reply.finish_reason != AUTO:
        return reply.finish_reason
    return "tool_calls" if reply.calls else "stop"


def _wire_calls(fake: FakeServer, calls: tuple[Call, ...]) -> list[dict[str, Any]]:
    wire = []
    for index, c in enumerate(calls):
        item: dict[str, Any] = {"index": index, "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments}}
        if (cid := fake.call_id_of(c)) is not None:
            item["id"] = cid
        wire.append(item)
    return wire


def _call_fragments(calls: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    """Each call: a head (id, name, no arguments) then argument pieces; calls interleaved."""
    per_call = []
    for c in calls:
        head = {**c, "function": {"name": c["function"]["name"], "arguments": ""}}
        pieces = [{"index": c["index"], "function": {"arguments": p}}
                  for p in _split(c["function"]["arguments"], size)]
        per_call.append([head, *pieces])
    return [f for f in chain.from_iterable(zip_longest(*per_call)) if f is not None]


def chat_events(fake: FakeServer, reply: Reply, body: dict[str, Any]) -> list[str]:
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
            **answered_model(fake, reply, body)}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in _split(continued(reply.text, body), reply.chunk_size)]
    fragments = _call_fragments(_wire_calls(fake, reply.calls), reply.chunk_size)
    chunks += [chunk({"tool_calls": [f]}) for f in fragments]
    if (finish := _finish_reason(reply)) is not None:
        chunks.append(chunk({}, finish))
    usage = _usage_json(reply, body, fake)
    if usage is not None and (body.get("stream_options") or {}).get("include_usage"):
        chunks.append({**base, "choices": [], "usage": usage})
    return [json.dumps(c, ensure_ascii=False) for c in chunks] + ["[DONE]"]


def answered_model(fake: FakeServer, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    """The answer's ``model`` field: the model asked for (``reply.model`` AUTO), another, or none."""
    if reply.model is None:
        return {}
    return {"model": body.get("model") or fake.model if reply.model == AUTO else reply.model}


def continued(text: str, body: dict[str, Any]) -> str:
    """A request whose messages end with the assistant's is answered with the rest of that
    message, as the embedded server does (``llama_server._ReplyStart``): a script writes the whole
    reply, and the part the request wrote is left out of what is sent."""
    messages = body.get("messages") or []
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    start = last.get("content") if last.get("role") == "assistant" else None
    return text.removeprefix(start) if isinstance(start, str) else text


def chat_completion(fake: FakeServer, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": continued(reply.text, body) or None}
    if reply.calls:
        message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"}
                                 for c in _wire_calls(fake, reply.calls)]
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
            **answered_model(fake, reply, body), "usage": _usage_json(reply, body, fake),
            "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(reply)}]}


def handle_chat(fake: FakeServer, ex: Exchange, req: RecordedRequest) -> None:
    body = req.body if isinstance(req.body, dict) else {}
    errors = check_history(body.get("messages") or []) if fake.check_history else []
    if errors:
        fake.history_errors.extend(errors)
        ex.send_json(400, error_body("invalid history: " + "; ".join(errors), "invalid_request_error"))
        return
    has_options = "stream_options" in body
    reply = None if has_options and fake.reject_stream_options else fake.next_reply(body)
    if has_options and (reply is None or reply.reject_stream_options):
        if reply is not None:
            fake.push_front(reply)  # the retry without stream_options gets this reply
        ex.send_json(400, error_body("Unrecognized request argument supplied: stream_options",
                                     "invalid_request_error"))
        return
    assert reply is not None
    if ex.send_fault(reply, str(body.get("model"))):
        return
    if body.get("stream"):
        ex.stream(raw_sse(reply) if reply.raw_events is not None else chat_events(fake, reply, body), reply)
    else:
        time.sleep(reply.first_byte_delay)
        ex.send_json(200, chat_completion(fake, reply, body))


def handle_models(fake: FakeServer, ex: Exchange, req: RecordedRequest) -> None:
    data = [{"id": name, "object": "model", "created": 0, "owned_by": "fakeserver"}
            for name in fake.models or [fake.model]]
    ex.send_json(200, {"object": "list", "data": data})


def reply_from_json(obj: dict[str, Any]) -> Reply:
    fields = dict(obj)
    calls = tuple(call(c["name"], c.get("arguments"), id=c.get("id", AUTO))
                  for c in fields.pop("tool_calls", []))
    if isinstance(fields.get("usage"), list):
        fields["usage"] = tuple(fields["usage"])
    return Reply(calls=calls, **fields)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", help="JSON file: a list of replies")
    parser.add_argument("--model", default="fake-model")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--reject-stream-options", action="store_true")
    parser.add_argument("--record", default="", help="append each request (path, body) to this file, a JSON line each")
    args = parser.parse_args(argv)
    server = FakeServer(host=args.host, port=args.port, model=args.model, api_key=args.api_key,
                        reject_stream_options=args.reject_stream_options, record_file=args.record)
    if args.script:
        with open(args.script, encoding="utf-8") as f:
            server.script(*(reply_from_json(r) for r in json.load(f)))
    print(server.base_url, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
