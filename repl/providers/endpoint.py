"""The skeleton both openai-SDK adapters share; each adapter only translates its wire format.

``SdkEndpoint.stream`` is the one model call: the adapter builds the request body
(``_prepare``) and makes the SDK call (``_create``); here it is sent with retries
(``_opened``: the body as sent a ``RequestSent``, each failed attempt an ``AttemptFailed``
with the server's answer, each wait a ``Retrying``), its stream is read under the
deadline's watch (``StreamDeadline``) while the adapter turns each event into parts
(``_parts_of``, into an ``Assembly``), SDK and shape errors become one-line
``ProviderError`` s, and ``Completed`` carries the usage (the server's, else an
estimate) and the answer as assembled (``wire_response``, for ``/trace --raw``) with the
exchange that brought it (``http``: attempt, method, URL, status, the headers that matter,
how many stream events came and when the first and last arrived).
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from repl.config.redact import mask_url
from repl.config.settings import ProviderSettings
from repl.providers import sdk
from repl.providers.base import (
    AttemptFailed,
    BadShape,
    Completed,
    Message,
    Part,
    ProviderError,
    RequestSent,
    Retrying,
    ToolCall,
    ToolChoice,
    Usage,
    estimate_tokens,
    wire_field,
)
from repl.providers.errors import (
    RETRY_COUNT_HEADER,
    ErrorContext,
    from_sdk_error,
    make_error,
    retry_delay,
    retry_reason,
)
from tools.registry import ToolSchema

NO_KEY = "no-key"  # sent when no key is configured, so the SDK never reads OPENAI_API_KEY
_IN_CODE = ProviderSettings(name="", temperature=None, max_tokens=None)


@dataclass
class Assembly:
    """What one streamed answer has delivered so far; each adapter's reader state extends it."""

    shown: list[str] = field(default_factory=list)  # text the user has seen
    reasoning: list[str] = field(default_factory=list)  # shown dimmed, never sent back
    usage: Usage | None = None  # as the server reported it
    reported_usage: Any = None  # the server's usage object, as sent (for /trace --raw)
    finish_reason: str | None = None  # as the server reported it; None: the stream was cut
    model: str | None = None  # the model the answer names, which may not be the one asked for
    ended: bool = False  # the stream's last event came: reading stops
    events: int = 0  # stream events read
    first_event: float = 0.0  # time.monotonic() when the first and the last arrived
    last_event: float = 0.0
    echo: str = ""  # the answer, when it only repeated the question: held back, never shown

    @property
    def text(self) -> str:
        return "".join(self.shown)

    def content(self) -> str:
        """The answer's text as the model wrote it."""
        return self.text

    def tool_calls(self) -> list[ToolCall]:
        return []

    def output_text(self) -> str:
        """What the answer's size is estimated from when the server reports no usage."""
        return self.content()

    def finish(self, calls: list[ToolCall]) -> str | None:
        """The finish reason the loop sees."""
        return self.finish_reason

    def end(self) -> Iterator[Part]:
        """Parts held back until the stream is over."""
        return iter(())

    def name_model(self, record: Any) -> None:
        """Keep the model ``record`` (a chunk, the final response) names; a value that is not
        text is passed over, as not worth failing the answer for."""
        value = record.get("model") if isinstance(record, dict) else getattr(record, "model", None)
        if isinstance(value, str) and value:
            self.model = value


class SdkEndpoint:
    """One OpenAI-compatible endpoint; ``openai`` is imported when the client is first needed.

    A wire adapter subclasses it and supplies ``_prepare``, ``_create`` and ``_parts_of``
    (and ``PROMPT_FIELDS``, ``USAGE_NAMES``); ``stream`` is the rest.
    """

    PROMPT_FIELDS: tuple[str, ...] = ()  # the body's conversation fields (a usage estimate reads them)
    USAGE_NAMES = ("prompt", "completion")  # the prefixes of the usage fields: ``prompt_tokens``…
    MAX_TOKENS_FIELD = "max_tokens"  # the body's name for the answer's limit

    def __init__(self, profile: ProviderSettings | None = None, **fields: Any) -> None:
        """``profile`` as configured, or its fields as keywords (an adapter made in code, which
        sends no temperature or max_tokens unless given)."""
        self.settings = replace(profile or _IN_CODE, **fields)
        self.name = self.settings.name
        self.model = self.settings.model
        self.context_window = self.settings.context_window
        self.max_tokens = self.settings.max_tokens
        self._client: Any = None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def warm(self) -> None:
        """Import the SDK and build the client and the resource requests go through now (``ask``
        does it while the rest starts: the resource's modules are imported on first use)."""
        self._resource(self._get_client())

    # ---- what each wire adapter supplies -------------------------------------
    def _prepare(self, messages: list[Message], tools: list[ToolSchema],
                 choice: ToolChoice | None = None) -> tuple[dict[str, Any], Assembly]:
        """The request body for ``messages`` (without ``stream``) and a fresh reader state."""
        raise NotImplementedError

    def _chosen(self, tools: list[ToolSchema], choice: ToolChoice | None) -> tuple[list[ToolSchema], Any]:
        """The tools a native request offers and its ``tool_choice`` (None: the field is not
        sent): a router's choice only for a profile that routes (``router``); the tools it
        allows, the mode as the API names it, one tool required by name."""
        if choice is None or not tools or not self.settings.router:
            return tools, None
        if choice.mode == "none":
            return tools, "none"
        allowed = [t for t in tools if t["name"] in choice.allowed] if choice.allowed else tools
        if not allowed:
            return tools, None
        if choice.mode == "required" and len(allowed) == 1:
            return allowed, self._named_choice(allowed[0]["name"])
        return allowed, choice.mode

    def _named_choice(self, name: str) -> Any:
        """``tool_choice`` for one tool by name, as this API writes it."""
        return {"type": "function", "function": {"name": name}}

    def _resource(self, client: Any) -> Any:
        """The SDK resource whose ``create`` sends a request (``client.chat.completions``...)."""
        raise NotImplementedError

    def _create(self, client: Any, params: dict[str, Any], headers: dict[str, str]) -> Any:
        """One streamed request; SDK errors are raised as they are (``_opened`` retries and maps them)."""
        raise NotImplementedError

    def _parts_of(self, event: Any, acc: Any) -> Iterator[Part]:
        """One stream event into ``acc``, and the parts it shows (BadShape for a malformed one)."""
        raise NotImplementedError

    def _profile_fields(self) -> dict[str, Any]:
        """What the profile adds to every request body: temperature and the answer's limit, when set."""
        fields: dict[str, Any] = {}
        if self.settings.temperature is not None:
            fields["temperature"] = self.settings.temperature
        if self.max_tokens is not None:
            fields[self.MAX_TOKENS_FIELD] = self.max_tokens
        return fields

    # ---- the model call ----------------------------------------------------------
    def stream(
        self, messages: list[Message], tools: list[ToolSchema] | None,
        deadline: float | None = None, choice: ToolChoice | None = None,
    ) -> Generator[Part, None, None]:
        """See ``Provider.stream``."""
        self._get_client()  # the SDK import is start-up cost, not model latency
        started = time.monotonic()
        params, acc = self._prepare(messages, tools or [], choice)
        sdk_stream, http = yield from self._open(params, deadline)
        watch = StreamDeadline(sdk_stream.response, deadline)
        try:
            yield from self._read(sdk_stream, acc)
        except ProviderError as err:  # the answer broke off: kept as a failed attempt, with what came
            yield AttemptFailed(http["attempt"], http["status"], {"content": acc.content(), "events": acc.events},
                                err.message, None, http["method"], http["url"], http["headers"],
                                round(time.monotonic() - http["sent"], 3))
            raise
        finally:
            watch.disarm()
            sdk_stream.close()  # also on GeneratorExit (Ctrl-C): drop the HTTP stream
        calls = acc.tool_calls()
        usage = acc.usage if acc.usage is not None else self._estimated_usage(acc, params)
        response = wire_response(acc.content(), "".join(acc.reasoning), calls, acc.finish_reason,
                                 acc.reported_usage, usage)
        sent = http.pop("sent")
        response["http"] = {**http, "events": acc.events,
                            "first_event_s": round(acc.first_event - sent, 3) if acc.events else None,
                            "last_event_s": round(acc.last_event - sent, 3) if acc.events else None}
        yield Completed(text=acc.echo or acc.text, tool_calls=calls, usage=usage, finish_reason=acc.finish(calls),
                        latency_s=time.monotonic() - started, retries=http["attempt"] - 1, response=response,
                        echoed=bool(acc.echo), model=acc.model)

    def request_body(self, messages: list[Message], tools: list[ToolSchema] | None,
                     choice: ToolChoice | None = None) -> dict[str, Any]:
        """The body ``stream`` would send for ``messages`` now (step mode shows it whole)."""
        return self._sent_fields(self._prepare(messages, tools or [], choice)[0])

    def _sent_fields(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` with what ``_create`` adds to the body (``stream``...)."""
        return {**params, "stream": True}

    def _open(self, params: dict[str, Any], deadline: float | None
              ) -> Generator[Retrying | RequestSent | AttemptFailed, None, tuple[Any, dict[str, Any]]]:
        def create(client: Any, headers: dict[str, str]) -> Any:
            return self._create(client, params, headers)

        return (yield from self._opened(create, deadline))

    def _read(self, sdk_stream: Any, acc: Assembly) -> Iterator[Part]:
        import openai

        try:
            for event in sdk_stream:
                acc.last_event = time.monotonic()
                acc.first_event = acc.first_event or acc.last_event
                acc.events += 1
                yield from self._parts_of(event, acc)
                if acc.ended:
                    break
        except openai.OpenAIError as err:
            raise from_sdk_error(err, self._context(), streaming=True, partial_text=acc.text) from err
        except ValueError as err:  # an SSE data line that is not JSON
            msg = f"{self.name} sent malformed stream data"
            raise make_error("server", msg, self._context(), acc.text) from err
        except BadShape as err:
            msg = f"{self.name}: malformed answer from the server: {err}"
            raise make_error("bad_response", msg, self._context(), acc.text) from err
        if acc.finish_reason is None:
            msg = f"{self.name}: the answer stream ended before it was finished"
            raise ProviderError("stream_cut", msg, acc.text)
        yield from acc.end()

    def _estimated_usage(self, acc: Assembly, params: dict[str, Any]) -> Usage:
        sent = [params.get(name) for name in self.PROMPT_FIELDS] + [params.get("tools", [])]
        reasoning = estimate_tokens("".join(acc.reasoning))
        return Usage(estimate_tokens(json.dumps(sent, ensure_ascii=False)), 0,
                     estimate_tokens(acc.output_text()) + reasoning, estimated=True, reasoning_tokens=reasoning)

    def _reported_usage(self, u: Any) -> Usage:
        """The server's usage object (``prompt_tokens``… or ``input_tokens``…, by ``USAGE_NAMES``)."""
        asked, answered = self.USAGE_NAMES
        details = wire_field(u, f"{asked}_tokens_details", "an object", "usage")
        output = wire_field(u, f"{answered}_tokens_details", "an object", "usage")
        cached = wire_field(details, "cached_tokens", "a count", f"usage.{asked}_tokens_details") if details else None
        reasoning = (wire_field(output, "reasoning_tokens", "a count", f"usage.{answered}_tokens_details")
                     if output else None)
        return Usage(wire_field(u, f"{asked}_tokens", "a count", "usage") or 0, cached or 0,
                     wire_field(u, f"{answered}_tokens", "a count", "usage") or 0, reasoning_tokens=reasoning or 0)

    def _get_client(self) -> Any:
        if self._client is None:
            sdk.install()  # its type packages read on first use: 0.9 s of imports less for a chat stream
            import openai

            self._client = openai.OpenAI(  # retries are ours (``_opened``): each wait is shown
                base_url=self.settings.base_url, api_key=self.settings.api_key or NO_KEY,
                max_retries=0, timeout=self.settings.timeout_s,
            )
        return self._client

    def _opened(self, open_once: Callable[[Any, dict[str, str]], Any], deadline: float | None
                ) -> Generator[Retrying | RequestSent | AttemptFailed, None, tuple[Any, dict[str, Any]]]:
        """``open_once(client, headers)`` (raising SDK errors) until it works, retrying as
        the SDK would (``errors.retry_delay``, at most ``max_retries`` times, never past
        ``deadline``). Yields a ``RequestSent`` with the body as it went out (again only when
        a later attempt sent another), an ``AttemptFailed`` for each attempt that failed (its
        status, headers and the server's answer) and a ``Retrying`` before each wait. Returns
        (what ``open_once`` returned, the attempt that worked: ``exchange`` and ``sent``, its
        ``time.monotonic()``); the last failure raises ProviderError, naming the attempts."""
        import openai

        started, retries, sent = time.monotonic(), 0, None
        while True:
            attempt_started = time.monotonic()
            try:
                opened = open_once(self._client_until(deadline), {RETRY_COUNT_HEADER: str(retries)})
            except openai.OpenAIError as err:
                request = getattr(err, "request", None)
                if (body := sent_body(request)) is not None and body != sent:
                    sent = body
                    yield RequestSent(body)
                delay = retry_delay(err, retries) if retries < self.settings.max_retries else None
                if delay is not None and deadline is not None and delay >= deadline - time.monotonic():
                    delay = None  # no time left for another attempt
                reason = retry_reason(err, self._context())
                http = exchange(request, getattr(err, "response", None))
                yield AttemptFailed(retries + 1, getattr(err, "status_code", None), error_response(err), reason,
                                    None if delay is None else retries + 2, http["method"], http["url"],
                                    http["headers"], round(time.monotonic() - attempt_started, 3))
                if delay is None:
                    ctx = replace(self._context(), attempts=retries + 1, elapsed_s=time.monotonic() - started)
                    raise from_sdk_error(err, ctx) from err
                retries += 1
                yield Retrying(retries + 1, self.settings.max_retries + 1, round(delay, 2), reason)
                time.sleep(delay)
                continue
            response = getattr(opened, "response", None)
            body = sent_body(getattr(response, "request", None))
            if body is not None and body != sent:
                yield RequestSent(body)
            return opened, {"attempt": retries + 1, **exchange(getattr(response, "request", None), response),
                            "sent": attempt_started}

    def list_models(self, timeout_s: float = 10.0) -> list[str]:
        """The model ids the endpoint offers (``GET /models``), sorted; ProviderError when
        it cannot say (unreachable, 404 on servers without the route, a body of another shape)."""
        import openai

        client = self._get_client().with_options(timeout=min(timeout_s, self.settings.timeout_s), max_retries=0)
        try:
            page = client.models.list()
            ids = [getattr(m, "id", None) for m in getattr(page, "data", None) or []]
        except openai.OpenAIError as err:
            raise from_sdk_error(err, self._context()) from err
        except (TypeError, ValueError, AttributeError) as err:  # a body that is no model list
            raise make_error("bad_response", f"{self.name}: the model list is not a list ({err})",
                             self._context()) from err
        if not isinstance(ids, list):
            raise ProviderError("bad_response", f"{self.name}: the model list is not a list")
        return sorted({i for i in ids if isinstance(i, str) and i})

    def _client_until(self, deadline: float | None) -> Any:
        """The client for a request that must end by ``deadline``: when the time left is
        shorter than the configured timeout, a copy with that timeout."""
        client = self._get_client()
        left = math.inf if deadline is None else deadline - time.monotonic()
        if left >= self.settings.timeout_s:
            return client
        return client.with_options(timeout=max(0.01, left), max_retries=0)

    def _context(self) -> ErrorContext:
        base_url = self.settings.base_url or (str(self._client.base_url) if self._client else "")
        return ErrorContext(
            provider=self.name, model=self.model, base_url=base_url, api_key_env=self.settings.api_key_env,
            timeout_s=self.settings.timeout_s, secrets=(self.settings.api_key or "",),
        )


KEPT_HEADERS = ("content-type", "retry-after", "retry-after-ms", "x-should-retry", "openai-processing-ms")


def kept_headers(headers: Any) -> dict[str, str]:
    """The response headers that matter when a call misbehaves: the request id, the rate
    limits, the content type, the retry hints (the wire file's writer redacts secrets)."""
    kept: dict[str, str] = {}
    for name, value in headers.items() if headers is not None else ():
        low = str(name).lower()
        if low in KEPT_HEADERS or "ratelimit" in low or low.endswith("request-id"):
            kept[low] = str(value)
    return kept


def exchange(request: Any, response: Any) -> dict[str, Any]:
    """``method``, ``url`` (credentials masked), ``status`` and the ``headers`` that matter
    of an HTTP request and the response to it (None: none came)."""
    return {"method": str(getattr(request, "method", "") or ""),
            "url": mask_url(str(getattr(request, "url", "") or "")),
            "status": getattr(response, "status_code", None),
            "headers": kept_headers(getattr(response, "headers", None))}


def sent_body(request: Any) -> Any:
    """The body of an HTTP request as it went out (parsed JSON; text when it is not JSON);
    None when there is none to read."""
    try:
        content = request.content if request is not None else None
    except Exception:  # noqa: BLE001 - a streamed body that was never read: nothing to show
        return None
    return _decoded(content)


def error_response(err: Any) -> Any:
    """The body of the server's answer to a refused request (parsed JSON; text when it is
    not JSON); None when no answer came (a timeout, a refused connection)."""
    response = getattr(err, "response", None)
    try:
        content = response.content if response is not None else None
    except Exception:  # noqa: BLE001 - a streamed answer never read: what the SDK made of it
        return getattr(err, "body", None)
    return _decoded(content)


def _decoded(content: Any) -> Any:
    if not isinstance(content, bytes | bytearray) or not content:
        return None
    try:
        return json.loads(content)
    except ValueError:
        return bytes(content).decode("utf-8", errors="replace")


def wire_response(content: str, reasoning: str, calls: list[ToolCall], finish_reason: str | None,
                  reported: Any, usage: Usage) -> dict[str, Any]:
    """A model's answer as assembled from the stream (``Completed.response``): the content as
    the model wrote it, the tool calls, the finish reason and the usage as the server
    reported it (``None`` when it did not: then ``usage_estimated`` is ours)."""
    record: dict[str, Any] = {"content": content, "tool_calls": [asdict(c) for c in calls],
                              "finish_reason": finish_reason}
    if reasoning:
        record["reasoning"] = reasoning
    if reported is not None:
        record["usage"] = reported.model_dump(exclude_unset=True) if hasattr(reported, "model_dump") else reported
    else:
        record["usage"], record["usage_estimated"] = None, asdict(usage)
    return record


class StreamDeadline:
    """Drops an open HTTP answer stream when ``deadline`` (``time.monotonic()``) passes.

    A server that sends SSE keep-alive comments, or text without end, never lets the
    read time out, and a comment yields no event that would give the reading thread
    control back. So a timer shuts the socket down from outside (``shutdown`` wakes a
    blocked read; ``close`` would not); the read then fails as a dropped connection
    and the caller, seeing its deadline passed, reports the timeout.
    """

    def __init__(self, response: Any, deadline: float | None) -> None:
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        delay = math.inf if deadline is None else max(0.0, deadline - time.monotonic())
        if delay < threading.TIMEOUT_MAX:
            self._timer = threading.Timer(delay, self._fire, args=(response,))
            self._timer.daemon = True
            self._timer.start()

    def _fire(self, response: Any) -> None:
        with self._lock:
            if self._timer is None:  # disarmed: the stream ended in time
                return
            network = (getattr(response, "extensions", None) or {}).get("network_stream")
            sock = network.get_extra_info("socket") if network is not None else None
            with contextlib.suppress(Exception):  # already closed: nothing left to stop
                if isinstance(sock, socket.socket):
                    sock.shutdown(socket.SHUT_RDWR)
                else:
                    response.close()

    def disarm(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
