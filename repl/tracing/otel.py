"""OpenTelemetry export of the turns, by the GenAI semantic conventions (``[otel] export``).

A subscriber of the session core's bus: a span per turn (``invoke_agent``), a child span per
model call (``chat``: the model asked for and the one that answered, token counts, finish reason) and per tool call
(``execute_tool``: name, call id, outcome; the approval wait as span events). Spans go in
batches, from a thread of their own, to an OTLP/HTTP (protobuf) collector; the headers come
from ``OTEL_EXPORTER_OTLP_HEADERS`` as the SDK reads them. Message and argument contents are
sent only with ``[otel] content = true``, redacted as the trace is.

Export never blocks or fails a turn: a collector that cannot be reached costs one notice, and
its spans are dropped; what is still held at exit gets ``FLUSH_S`` seconds. The SDK is
imported only when export is on (``open_otel``): not on the start-up path.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from repl.config.redact import Redactor
from repl.config.settings import Settings
from repl.loop.events import (
    ApprovalDecided,
    ApprovalRequested,
    ErrorEvent,
    Event,
    ModelRequest,
    ModelUsage,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

FLUSH_S = 2.0  # what the spans still held get at exit, at most
EXPORT_TIMEOUT_S = 2.0  # one request to the collector
AGENT = "glassloop"


def endpoint_for(endpoint: str, env: Mapping[str, str]) -> str:
    """Where spans go: ``[otel] endpoint``, else ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, else
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` with ``/v1/traces`` appended, else the standard's local one."""
    if endpoint:
        return endpoint
    if traces := env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip():
        return traces
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or "http://localhost:4318"
    return base.rstrip("/") + "/v1/traces"


def open_otel(settings: Settings, session_id: Callable[[], str], redact: Redactor,
              say: Callable[[str], None]) -> OtelExport | None:
    """The exporting subscriber, or None when export is off or the SDK is not installed (then
    after one line through ``say`` naming the extra)."""
    if not settings.otel_export:
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: F401
        from opentelemetry.sdk.trace import TracerProvider  # noqa: F401
    except ImportError:
        say("[otel] export = true needs the otel extra (pip install 'glassloop[otel]'): no spans are sent")
        return None
    return OtelExport(settings, endpoint_for(settings.otel_endpoint, os.environ), session_id, redact, say)


class OtelExport:
    """Turns the bus's events into spans (see the module's docstring)."""

    def __init__(self, settings: Settings, endpoint: str, session_id: Callable[[], str],
                 redact: Redactor, say: Callable[[str], None]) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        _quiet_sdk_logs()
        self.endpoint = endpoint
        self.content = settings.otel_content
        self.provider_name = settings.provider
        self.session_id = session_id
        self.redact = redact
        self._exporter = _Exporter(endpoint, say)
        self._provider = TracerProvider(resource=Resource.create({"service.name": AGENT}),
                                        shutdown_on_exit=False)
        self._provider.add_span_processor(BatchSpanProcessor(cast("SpanExporter", self._exporter)))
        self._tracer = self._provider.get_tracer("repl.tracing.otel")
        self._turn: Any = None
        self._models: dict[int, Any] = {}  # open model-call spans by step
        self._tools: dict[str, Any] = {}  # open tool-call spans by call id

    def __call__(self, event: Event) -> None:
        try:
            self._on(event)
        except Exception:  # noqa: BLE001 - a span that cannot be made never stops a turn
            return

    def _on(self, event: Event) -> None:
        if isinstance(event, TurnStarted):
            self._start_turn(event)
        elif self._turn is None:
            return
        elif isinstance(event, ModelRequest):
            self._start_model(event)
        elif isinstance(event, ModelUsage):
            self._end_model(event)
        elif isinstance(event, ToolCallStarted):
            self._start_tool(event)
        elif isinstance(event, ApprovalRequested | ApprovalDecided):
            self._approval(event)
        elif isinstance(event, ToolCallFinished):
            self._end_tool(event)
        elif isinstance(event, ErrorEvent):
            self._turn.set_attribute("error.type", event.kind)
            self._turn.set_status(_status(error=True, message=self.redact(event.message)))
        elif isinstance(event, TurnFinished):
            self._end_turn(event)

    # ---- spans ---------------------------------------------------------------------
    def _start_turn(self, event: TurnStarted) -> None:
        self._end_open()
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT,
            "gen_ai.provider.name": self.provider_name, "gen_ai.system": self.provider_name,
            "gen_ai.conversation.id": self.session_id(), "glassloop.turn": event.turn}
        if self.content:
            attributes["gen_ai.input.messages"] = _messages("user", self.redact(event.user_text))
        self._turn = self._tracer.start_span(f"invoke_agent {AGENT}", attributes=attributes)

    def _child(self, name: str, attributes: dict[str, Any], start: int | None = None) -> Any:
        from opentelemetry import trace

        return self._tracer.start_span(name, context=trace.set_span_in_context(self._turn),
                                       attributes=attributes, start_time=start)

    def _start_model(self, event: ModelRequest) -> None:
        self._models[event.step] = self._child(f"chat {event.model}", {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": self.provider_name,
            "gen_ai.system": self.provider_name, "gen_ai.request.model": event.model,
            "gen_ai.conversation.id": self.session_id(), "glassloop.step": event.step})

    def _end_model(self, event: ModelUsage) -> None:
        now = time.time_ns()
        span = self._models.pop(event.step, None)
        if span is None:  # a call the loop made without a request event (a /compact summary)
            span = self._child("chat", {"gen_ai.operation.name": "chat",
                                        "gen_ai.provider.name": self.provider_name},
                               start=now - int(event.latency_s * 1e9))
        usage = event.usage
        span.set_attributes({
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage.cached_tokens,
            "gen_ai.usage.reasoning.output_tokens": usage.reasoning_tokens,
            "gen_ai.response.finish_reasons": [event.finish_reason] if event.finish_reason else [],
            "glassloop.usage.estimated": usage.estimated, "glassloop.retries": event.retries})
        if event.model:  # as the answer named it: unset when it named none
            span.set_attribute("gen_ai.response.model", event.model)
        span.end(end_time=now)

    def _start_tool(self, event: ToolCallStarted) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": event.name,
            "gen_ai.tool.call.id": event.call_id, "gen_ai.tool.type": "function",
            "glassloop.tool.side_effects": event.side_effects, "glassloop.step": event.step}
        if self.content:
            attributes["gen_ai.tool.call.arguments"] = _json(self.redact.value(event.arguments))
        self._tools[event.call_id] = self._child(f"execute_tool {event.name}", attributes)

    def _approval(self, event: ApprovalRequested | ApprovalDecided) -> None:
        span = self._tools.get(event.call_id)
        if span is None:
            return
        if isinstance(event, ApprovalRequested):
            span.add_event("approval_requested")
        else:
            span.add_event("approval_decided", {"allowed": event.allowed, "by": event.by,
                                                "decided_s": event.decided_s,
                                                "reason": self.redact(event.reason)})

    def _end_tool(self, event: ToolCallFinished) -> None:
        now = time.time_ns()
        span = self._tools.pop(event.call_id, None)
        if span is None:
            span = self._child(f"execute_tool {event.name}", {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": event.name,
                "gen_ai.tool.call.id": event.call_id}, start=now - int(event.duration_s * 1e9))
        span.set_attributes({"glassloop.tool.ok": event.ok,
                             "glassloop.tool.outcome": "ok" if event.ok else event.error_type or "error"})
        if event.repeat_of:
            span.set_attribute("glassloop.tool.repeat_of", event.repeat_of)
        if not event.ok:
            span.set_attribute("error.type", event.error_type or "error")
            span.set_status(_status(error=True))
        if self.content:
            span.set_attribute("gen_ai.tool.call.result", _json(self.redact.value(event.result)))
        span.end(end_time=now)

    def _end_turn(self, event: TurnFinished) -> None:
        turn = self._turn
        self._end_children()
        turn.set_attributes({
            "glassloop.turn.stopped_by": event.stopped_by, "glassloop.turn.steps": event.steps,
            "glassloop.turn.tool_calls": event.tool_calls,
            "gen_ai.usage.input_tokens": event.usage.input_tokens,
            "gen_ai.usage.output_tokens": event.usage.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": event.usage.cached_tokens})
        if self.content and event.answer:
            turn.set_attribute("gen_ai.output.messages",
                               _messages("assistant", self.redact(event.answer)))
        turn.end()
        self._turn = None

    def _end_open(self) -> None:
        """End the spans a turn left open (a turn that ended on an error or a Ctrl-C)."""
        self._end_children()
        if self._turn is not None:
            self._turn.end()
        self._turn = None

    def _end_children(self) -> None:
        for span in [*self._models.values(), *self._tools.values()]:
            span.end()
        self._models.clear()
        self._tools.clear()

    def close(self) -> None:
        """Send what is held, within ``FLUSH_S``; then the exporter stops (a collector that does
        not answer is left behind: the thread doing it is a daemon)."""
        self._end_open()
        closing = threading.Thread(target=self._shutdown, name="otel-flush", daemon=True)
        closing.start()
        closing.join(FLUSH_S)

    def _shutdown(self) -> None:
        try:
            self._provider.force_flush(int(FLUSH_S * 1000))
            self._exporter.dropping = True  # what is left after the flush is not waited for
            self._provider.shutdown()
        except Exception:  # noqa: BLE001 - an exit is never failed by the export
            return


class _Exporter:
    """The OTLP/HTTP exporter, saying once (through ``say``) that the collector could not be
    reached; spans it could not send are dropped."""

    def __init__(self, endpoint: str, say: Callable[[str], None]) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        self.endpoint = endpoint
        self.say = say
        self.said = False
        self.dropping = False
        self._otlp = OTLPSpanExporter(endpoint=endpoint, timeout=EXPORT_TIMEOUT_S)

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        if self.dropping:
            return SpanExportResult.SUCCESS
        try:
            result = self._otlp.export(spans)
        except Exception:  # noqa: BLE001 - the collector's failure is told, never raised
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS and not self.said:
            self.said = True
            self.say(f"OpenTelemetry: cannot send spans to {self.endpoint}; "
                     "they are dropped (the turns go on)")
        return result

    def shutdown(self) -> None:
        self._otlp.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _quiet_sdk_logs() -> None:
    """The SDK's own warnings (a failed export, with each retry) would reach the terminal:
    the notice above says it once instead."""
    logger = logging.getLogger("opentelemetry")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    logger.propagate = False


def _status(*, error: bool, message: str = "") -> Any:
    from opentelemetry.trace import Status, StatusCode

    return Status(StatusCode.ERROR if error else StatusCode.OK, message or None)


def _messages(role: str, text: str) -> str:
    """A message in the conventions' shape (a JSON string: attributes hold no nested values)."""
    return _json([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
