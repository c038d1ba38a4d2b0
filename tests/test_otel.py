"""OpenTelemetry export (``[otel] export``, ``--otel``): a real ``glassloop ask`` against the
scripted server sends its turn to an OTLP/HTTP receiver in this process, as the GenAI
conventions name things; a collector that is down costs one line and never the answer; with
export off nothing is sent and the SDK is never imported."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from repl.tracing.otel import endpoint_for
from tests.fakeserver import FakeServer, call, raw_stream, text, tool_calls
from tests.support import ROOT, glassloop_here

ANSWER = "Two todos are open."
QUESTION = "what is open?"


class Receiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1: each POST /v1/traces decoded, its spans kept."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        spans: list[Any] = []
        self.spans, self.posts = spans, 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.posts += 1
                spans.extend(span for resource in request.resource_spans
                             for scope in resource.scope_spans for span in scope.spans)
                ok = self.path == "/v1/traces"
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    pytest.importorskip("opentelemetry.sdk")
    found = Receiver()
    yield found
    found.close()


def _script(server: FakeServer) -> None:
    server.script(tool_calls(call("list_todos", {}, id="call_a"), usage=(120, 10, 64)),
                  text(ANSWER, usage=(200, 20, 128)))


def _attributes(span: Any) -> dict[str, Any]:
    def value(v: Any) -> Any:
        kind = v.WhichOneof("value")
        if kind == "array_value":
            return [value(item) for item in v.array_value.values]
        return getattr(v, kind)
    return {a.key: value(a.value) for a in span.attributes}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_turn_is_one_agent_span_with_its_model_and_tool_calls(fake_server, home, receiver):
    _script(fake_server)
    env = {**home, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    result = glassloop_here("ask", QUESTION, "--json", "--otel", "--base-url", fake_server.base_url, env=env)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["answer"] == ANSWER
    by_name = {s.name: s for s in receiver.spans}
    assert len(receiver.spans) == 4, sorted(by_name)
    turn = by_name["invoke_agent glassloop"]
    models = [s for s in receiver.spans if _attributes(s)["gen_ai.operation.name"] == "chat"]
    tool = by_name["execute_tool list_todos"]
    assert len(models) == 2
    assert all(s.parent_span_id == turn.span_id and s.trace_id == turn.trace_id for s in [*models, tool])
    assert _attributes(turn)["gen_ai.conversation.id"] == out["session"]
    assert (_attributes(turn)["glassloop.turn.stopped_by"], _attributes(turn)["glassloop.turn.tool_calls"]) == (
        "answer", 1)
    traced = [e["usage"] for e in out["trace"] if e["type"] == "model_usage"]
    models.sort(key=lambda s: _attributes(s)["glassloop.step"])
    for span, usage in zip(models, traced, strict=True):
        seen = _attributes(span)
        assert seen["gen_ai.request.model"] == seen["gen_ai.response.model"] == fake_server.requests[0].body["model"]
        assert seen["gen_ai.provider.name"] == seen["gen_ai.system"]
        assert (seen["gen_ai.usage.input_tokens"], seen["gen_ai.usage.output_tokens"],
                seen["gen_ai.usage.cache_read.input_tokens"]) == (
                    usage["input_tokens"], usage["output_tokens"], usage["cached_tokens"])
    assert [_attributes(s)["gen_ai.usage.input_tokens"] for s in models] == [120, 200]
    assert [_attributes(s)["gen_ai.response.finish_reasons"] for s in models] == [["tool_calls"], ["stop"]]
    calls = _attributes(tool)
    assert (calls["gen_ai.operation.name"], calls["gen_ai.tool.name"], calls["gen_ai.tool.call.id"],
            calls["glassloop.tool.outcome"]) == ("execute_tool", "list_todos", "call_a", "ok")
    assert "gen_ai.tool.call.arguments" not in calls  # contents only with [otel] content = true
    assert "gen_ai.input.messages" not in _attributes(turn)
    assert "OpenTelemetry" not in result.stderr


def _model_spans(receiver: Receiver) -> list[dict[str, Any]]:
    spans = [_attributes(s) for s in receiver.spans]
    return sorted((s for s in spans if s["gen_ai.operation.name"] == "chat"), key=lambda s: s["glassloop.step"])


def test_the_response_model_is_the_one_the_endpoint_answered_with(fake_server, home, receiver):
    """Asked for one model, answered by another (an alias resolved, a router's pick): the span
    says both; an answer that names no model leaves the response's model unset."""
    fake_server.script(tool_calls(call("list_todos", {}, id="call_a"), model="model-b-0613"),
                       text(ANSWER, model=None))
    env = {**home, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    result = glassloop_here("ask", QUESTION, "--json", "--otel", "--model", "model-a",
                            "--base-url", fake_server.base_url, env=env)
    assert result.returncode == 0, result.stderr
    assert [r.body["model"] for r in fake_server.requests] == ["model-a", "model-a"]
    answered, unnamed = _model_spans(receiver)
    assert (answered["gen_ai.request.model"], answered["gen_ai.response.model"]) == ("model-a", "model-b-0613")
    assert unnamed["gen_ai.request.model"] == "model-a" and "gen_ai.response.model" not in unnamed
    traced = [e["model"] for e in json.loads(result.stdout)["trace"] if e["type"] == "model_usage"]
    assert traced == ["model-b-0613", None]


def test_the_responses_api_names_its_model_in_the_final_response(fake_server, home, receiver):
    done = {"type": "response.completed", "response": {
        "id": "r", "object": "response", "status": "completed", "model": "model-b-2025-01-01",
        "output": [{"id": "m", "type": "message", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": ANSWER, "annotations": []}]}],
        "usage": {"input_tokens": 9, "output_tokens": 4, "total_tokens": 13}}}
    fake_server.script(raw_stream(done))
    env = {**home, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    result = glassloop_here("ask", QUESTION, "--otel", "--api", "responses", "--model", "model-a",
                            "--base-url", fake_server.base_url, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ANSWER
    [span] = _model_spans(receiver)
    assert (span["gen_ai.request.model"], span["gen_ai.response.model"]) == ("model-a", "model-b-2025-01-01")


def test_contents_go_only_when_asked(fake_server, home, receiver, tmp_path):
    _script(fake_server)
    config = tmp_path / "otel.toml"
    config.write_text(f'[otel]\nexport = true\ncontent = true\nendpoint = "{receiver.url}/v1/traces"\n',
                      encoding="utf-8")
    result = glassloop_here("ask", QUESTION, "--config", str(config), "--base-url", fake_server.base_url,
                            env=home)
    assert result.returncode == 0, result.stderr
    by_name = {s.name: _attributes(s) for s in receiver.spans}
    assert QUESTION in by_name["invoke_agent glassloop"]["gen_ai.input.messages"]
    assert ANSWER in by_name["invoke_agent glassloop"]["gen_ai.output.messages"]
    assert json.loads(by_name["execute_tool list_todos"]["gen_ai.tool.call.arguments"]) == {}


def test_a_collector_that_is_down_costs_one_line_and_never_the_answer(fake_server, home):
    pytest.importorskip("opentelemetry.sdk")
    _script(fake_server)
    down = f"http://127.0.0.1:{_free_port()}/v1/traces"
    env = {**home, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": down}
    result = glassloop_here("ask", QUESTION, "--otel", "--base-url", fake_server.base_url, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ANSWER
    said = [line for line in result.stderr.splitlines() if "OpenTelemetry" in line]
    assert len(said) == 1 and down in said[0], result.stderr
    assert "Traceback" not in result.stderr


PROBE = """
import json, sys
from typer.testing import CliRunner
from repl.cli import app
result = CliRunner().invoke(app, sys.argv[1:])
print(json.dumps({"code": result.exit_code, "out": result.stdout,
                  "loaded": sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")}))
"""


def test_with_export_off_nothing_is_sent_and_the_sdk_is_never_imported(fake_server, home, receiver):
    _script(fake_server)
    env = {**home, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    done = subprocess.run([sys.executable, "-c", PROBE, "ask", QUESTION, "--base-url", fake_server.base_url],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    probe = json.loads(done.stdout.splitlines()[-1])
    assert probe["code"] == 0 and ANSWER in probe["out"], done.stderr
    assert probe["loaded"] == []
    assert receiver.posts == 0


@pytest.mark.parametrize(("endpoint", "env", "expected"), [
    ("http://c:4318/v1/traces", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, "http://c:4318/v1/traces"),
    ("", {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/traces", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"},
     "http://t/traces"),
    ("", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318/"}, "http://x:4318/v1/traces"),
    ("", {}, "http://localhost:4318/v1/traces"),
])
def test_the_endpoint_is_the_setting_then_the_standard_variables(endpoint, env, expected):
    assert endpoint_for(endpoint, env) == expected


def test_a_denied_side_effect_carries_its_approval_as_span_events(fake_server, home, receiver):
    fake_server.script(tool_calls(call("add_todo", {"title": "call mum"}, id="call_b")), text("Not added."))
    env = {**home, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    result = glassloop_here("ask", "add a todo: call mum", "--otel", "--base-url", fake_server.base_url, env=env)
    assert result.returncode == 0, result.stderr
    tool = next(s for s in receiver.spans if s.name == "execute_tool add_todo")
    events = {e.name: _attributes(e) for e in tool.events}
    assert list(events) == ["approval_requested", "approval_decided"]
    assert events["approval_decided"]["allowed"] is False
    seen = _attributes(tool)
    assert seen["glassloop.tool.ok"] is False and seen["error.type"] == seen["glassloop.tool.outcome"] != "ok"
    assert tool.status.code == tool.status.STATUS_CODE_ERROR


def test_without_the_extra_one_line_names_it_and_the_turn_answers(fake_server, home, monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if not installed
    _script(fake_server)
    result = glassloop_here("ask", QUESTION, "--otel", "--base-url", fake_server.base_url, env=home)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ANSWER
    said = [line for line in result.stderr.splitlines() if "otel extra" in line]
    assert len(said) == 1 and "Traceback" not in result.stderr, result.stderr
