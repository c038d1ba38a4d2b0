"""Part 5: transport faults against the scripted server, seen from the real REPL.

One REPL session per wire API goes through: HTTP 500 twice then an answer
(retried, ``retries: 2`` in the trace), a stream cut mid-answer (partial text
kept and marked, the conversation goes on), malformed tool-call JSON and an
unknown tool name (structured errors to the model), 429 with Retry-After
(honoured: the delay is measured), 401 (not retried: exactly one request, one
line naming the provider and the key's variable). After every turn the REPL
process holds at most one connection to the server (the idle keep-alive one)
and no traceback was printed. Connection refused and a DNS failure give one
clear line from ``glassloop ask``.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.fakeserver import (
    FakeServer,
    Reply,
    call,
    cut_stream_after,
    fault_status,
    text,
    tool_calls,
)
from tests.reliability.helpers import record, tcp_connections, trace_records, wait_for
from tests.support import glassloop_here
from tests.terminal import Repl

pytestmark = pytest.mark.timeout(180)
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses"}
RETRY_AFTER_S = 1.0


def stamped(arrivals: list[float], reply: Reply) -> Callable[[dict[str, Any]], Reply]:
    def answer(body: dict[str, Any]) -> Reply:
        arrivals.append(time.monotonic())
        return reply

    return answer


def model_requests(server: FakeServer, api: str) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.path == PATHS[api]]


def tool_outputs(body: dict[str, Any]) -> list[dict[str, Any]]:
    if "messages" in body:
        return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
    return [json.loads(i["output"]) for i in body["input"] if i.get("type") == "function_call_output"]


def assistant_texts(body: dict[str, Any]) -> list[str]:
    if "messages" in body:
        return [m["content"] for m in body["messages"] if m["role"] == "assistant"]
    return [i["content"] for i in body["input"] if i.get("role") == "assistant"]


class Session:
    """The REPL plus the checks made after every turn."""

    def __init__(self, repl: Repl, server: FakeServer, api: str) -> None:
        self.repl, self.server, self.api = repl, server, api
        self.max_connections = 0

    def turn(self, question: str, marker: str) -> str:
        before = len(self.repl.transcript)
        self.repl.say(question)
        self.repl.expect(marker)
        self.repl.ready()
        # counted the moment the prompt is back, connections on their way to closing were counted
        # too: 3 after the 401 once, in a full run at load 2, and at most 1 in every run alone.
        # A leaked connection stays open past the wait; one being closed does not.
        wait_for(lambda: tcp_connections(self.repl.child.pid, self.server.port) <= 1, timeout=5)
        connections = tcp_connections(self.repl.child.pid, self.server.port)
        self.max_connections = max(self.max_connections, connections)
        assert connections <= 1, f"{connections} connections left open after {question!r}"
        shown = "".join(self.repl.transcript[before:])
        assert "Traceback" not in shown
        return shown


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_faults_in_one_session(api, repl_factory, fake_server, home):
    arrivals: list[float] = []
    repl = repl_factory("--api", api)
    s = Session(repl, fake_server, api)

    fake_server.script(fault_status(500), fault_status(500), text("answer after two retries"))
    s.turn("one", "answer after two retries")
    usage = [r for r in trace_records(home) if r["type"] == "model_usage"]
    assert usage[-1]["retries"] == 2 and len(model_requests(fake_server, api)) == 3

    cut_after = {"chat": 5, "responses": 9}[api]  # events; the Responses stream opens with four
    fake_server.script(cut_stream_after(cut_after, text("partial answer that is cut short", chunk_size=3)))
    shown = s.turn("two", "error")
    assert "partial" in shown

    fake_server.script(
        tool_calls(call("get_todo", '{"todo_id": "todo-0'), call("no_such_tool", {"x": 1})),
        text("recovered from bad calls"))
    s.turn("three", "recovered from bad calls")
    last = model_requests(fake_server, api)[-1]
    assert any("[answer cut off]" in t and t.startswith("partial") for t in assistant_texts(last))
    assert [r["error"]["type"] for r in tool_outputs(last)] == ["invalid_json", "unknown_tool"]

    fake_server.script(stamped(arrivals, fault_status(429, retry_after=RETRY_AFTER_S)),
                       stamped(arrivals, text("answer after the rate limit")))
    s.turn("four", "answer after the rate limit")
    retry = [r for r in trace_records(home) if r["type"] == "model_retry"][-1]
    assert (retry["reason"], retry["delay_s"]) == ("429 rate limited", RETRY_AFTER_S)  # the server's wait
    waited = arrivals[1] - arrivals[0]
    assert waited >= RETRY_AFTER_S, waited  # and it was waited out

    count = len(model_requests(fake_server, api))
    fake_server.script(fault_status(401))
    shown = s.turn("five", "API key rejected")
    assert len(model_requests(fake_server, api)) == count + 1  # no retry
    errors = [line for line in repl.screen().splitlines() if line.startswith("error:")]
    assert len(errors) == 2  # the cut stream and the bad key, one line each
    assert "openai" in errors[-1] and "OPENAI_API_KEY" in errors[-1] and "HTTP 401" in errors[-1]

    fake_server.script(text("all good again"))
    s.turn("six", "all good again")
    assert fake_server.history_errors == []
    repl.close()
    record("transport", api=api, faults=["500 x2", "stream cut", "malformed JSON + unknown tool",
                                         "429 Retry-After", "401"],
           retries_counted=2, retry_after_s=RETRY_AFTER_S, waited_s=round(waited, 3),
           requests_for_401=1, max_open_connections_after_a_turn=s.max_connections, tracebacks=0)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("where, words", [
    ("connection refused", "cannot reach provider 'openai' at http://127.0.0.1:{port}"),
    ("DNS failure", "cannot reach provider 'openai' at http://glassloop-test.invalid"),
])
def test_unreachable_provider_is_one_line(home, where, words):
    port = closed_port()
    url = f"http://127.0.0.1:{port}/v1" if where == "connection refused" else "http://glassloop-test.invalid/v1"
    started = time.monotonic()
    result = glassloop_here("ask", "hi", "--base-url", url, env=home)
    elapsed = time.monotonic() - started
    assert result.returncode == 1
    assert "Traceback" not in result.stderr + result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and words.format(port=port) in errors[0], result.stderr
    record("transport", fault=where, exit_code=1, error_line=errors[0], seconds=round(elapsed, 2))
