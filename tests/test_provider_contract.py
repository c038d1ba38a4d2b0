"""What both wire adapters promise (see ``Provider``), each test run on Chat Completions and on
the Responses API: the real openai SDK over HTTP to the scripted server, one script for both
routes. What only one wire format has is in ``test_chat_provider.py`` / ``test_responses_provider.py``."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from repl.providers.base import AttemptFailed, Completed, ProviderError, RequestSent, TextPart
from tests.fake_responses import install
from tests.fakeserver import (
    FakeServer,
    call,
    cut_stream_after,
    fault_status,
    malformed_arguments,
    slow_chunks,
    slow_first_byte,
    text,
    tool_calls,
)
from tests.support import ADAPTER_KEY, QUESTION, TODO_TOOLS, adapter, stream_all, stream_error

# the events before the fourth text delta of 4 characters: on chat one delta a chunk after the
# role chunk; on Responses created, in_progress, item added and part added come first
CUT_BEFORE_FOURTH_DELTA = {"chat": 4, "responses": 7}


@pytest.fixture(params=["chat", "responses"])
def api(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def wire(fake_server: FakeServer, api: str) -> Iterator[Any]:
    p = adapter(api, fake_server.base_url)
    yield p
    p.close()


# ---- the answer, streamed ---------------------------------------------------------

def test_text_streams_as_it_arrives(fake_server: FakeServer, wire: Any) -> None:
    fake_server.script(text("hello world", chunk_size=3))
    parts, done = stream_all(wire)
    assert [p.text for p in parts] == ["hel", "lo ", "wor", "ld"]
    assert done.text == "hello world" and done.tool_calls == []
    assert done.finish_reason == "stop" and done.retries == 0 and done.latency_s > 0
    assert fake_server.history_errors == []


@pytest.mark.parametrize("api, interleave", [("chat", True), ("responses", False), ("responses", True)],
                         ids=["chat", "responses-sequential", "responses-interleaved"], indirect=["api"])
def test_split_tool_calls_are_assembled(fake_server: FakeServer, wire: Any, interleave: bool) -> None:
    install(fake_server, interleave=interleave)  # the chat route always interleaves the fragments
    fake_server.script(tool_calls(
        call("list_todos", {}),
        call("get_todo", {"todo_id": "todo-002"}),
        call("add_note", {"text": "周报", "tags": ["line one\nline two"]}),
        chunk_size=2, text="Checking.",
    ))
    parts, done = stream_all(wire)
    assert [(c.id, c.name) for c in done.tool_calls] == [
        ("call_1", "list_todos"), ("call_2", "get_todo"), ("call_3", "add_note")]
    assert json.loads(done.tool_calls[2].arguments) == {"text": "周报", "tags": ["line one\nline two"]}
    assert done.tool_calls[0].arguments == "{}"
    assert done.text == "Checking." and done.finish_reason == "tool_calls"
    assert done.tool_calls[1].arguments == '{"todo_id": "todo-002"}'
    assert [p.text for p in parts] == ["Ch", "ec", "ki", "ng", "."]  # only text streams; calls come whole
    assert all(isinstance(p, TextPart) for p in parts)


def test_calls_without_ids_get_generated_ones(fake_server: FakeServer, wire: Any) -> None:
    fake_server.script(tool_calls(call("a", {}, id=None), call("b", {"x": 1}, id=None)))
    _, done = stream_all(wire)
    ids = [c.id for c in done.tool_calls]
    assert all(i.startswith("call_") for i in ids) and len(set(ids)) == 2
    assert [c.name for c in done.tool_calls] == ["a", "b"]


def test_malformed_arguments_are_passed_through_raw(fake_server: FakeServer, wire: Any) -> None:
    fake_server.script(malformed_arguments("get_todo", '{"todo_id": "todo-0'))
    _, done = stream_all(wire)
    assert done.tool_calls[0].arguments == '{"todo_id": "todo-0'


def test_usage_with_cached_and_reasoning_tokens(fake_server: FakeServer, wire: Any) -> None:
    fake_server.script(text("ok", usage=(520, 38, 256, 30)))
    _, done = stream_all(wire)
    assert (done.usage.input_tokens, done.usage.cached_tokens, done.usage.output_tokens) == (520, 256, 38)
    assert done.usage.estimated is False
    assert done.usage.reasoning_tokens == 30


def test_missing_usage_is_estimated(fake_server: FakeServer, wire: Any) -> None:
    fake_server.script(text("a fairly long answer " * 10, usage=None))
    _, done = stream_all(wire)
    assert done.usage.estimated is True
    assert done.usage.input_tokens > 10 and 40 <= done.usage.output_tokens <= 60


def test_history_check_catches_an_unanswered_call(fake_server: FakeServer, wire: Any) -> None:
    fake_server.script(text("never"))
    broken = [*QUESTION, {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "name": "list_todos", "arguments": "{}"}]}, *QUESTION]
    err = stream_error(wire, broken)
    assert err.kind == "bad_request" and "unanswered" in err.message
    assert fake_server.history_errors and "call_1" in fake_server.history_errors[0]


# ---- retries and one-line errors --------------------------------------------------------

def test_server_error_then_success_counts_the_retry(fake_server: FakeServer, wire: Any, api: str) -> None:
    fake_server.script(fault_status(500, retry_after=0.01), text("recovered"))
    _, done = stream_all(wire)
    assert done.text == "recovered" and done.retries == 1
    assert [r.headers["x-stainless-retry-count"] for r in fake_server.requests_to(api)] == ["0", "1"]


def test_persistent_server_error(fake_server: FakeServer, wire: Any) -> None:
    fake_server.script(fault_status(503, retry_after=0.01), fault_status(503, retry_after=0.01))
    err = stream_error(wire)
    assert err.kind == "server" and "HTTP 503" in err.message and "after 1 retry" in err.message


def test_rate_limit_honours_retry_after_then_gives_up(fake_server: FakeServer, wire: Any, api: str) -> None:
    fake_server.script(fault_status(429, retry_after=0.3), fault_status(429, retry_after=0.3))
    started = time.monotonic()
    err = stream_error(wire)
    assert time.monotonic() - started >= 0.3  # waited as told, once
    assert err.kind == "rate_limit" and "rate limited" in err.message
    assert len(fake_server.requests_to(api)) == 2


def test_bad_key_names_the_env_var_and_never_the_key(fake_server: FakeServer, wire: Any) -> None:
    fake_server.api_key = "sk-the-right-one"  # the server echoes the wrong key back
    err = stream_error(wire)
    assert err.kind == "auth"
    assert "GLASSLOOP_TEST_KEY" in err.message and "fake" in err.message
    assert "\n" not in err.message
    assert fake_server.requests[0].headers["authorization"] == f"Bearer {ADAPTER_KEY}"


def test_key_echoed_by_the_server_is_redacted(fake_server: FakeServer, wire: Any) -> None:
    fake_server.script(fault_status(400, message=f"invalid header value Bearer {ADAPTER_KEY}"))
    err = stream_error(wire)
    assert err.kind == "bad_request" and "Bearer ***" in err.message


def test_without_a_key_no_environment_key_is_sent(fake_server: FakeServer, api: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    fake_server.script(text("hi"))
    p = adapter(api, fake_server.base_url, api_key=None)
    stream_all(p)
    p.close()
    assert "sk-from-the-environment" not in fake_server.requests[0].headers["authorization"]


def test_unknown_model(fake_server: FakeServer, wire: Any) -> None:
    fake_server.script(fault_status(404))
    err = stream_error(wire)
    assert err.kind == "not_found"
    assert "test-model" in err.message and fake_server.base_url in err.message


def test_nothing_listening_is_unreachable(api: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    p = adapter(api, base_url, max_retries=0)
    err = stream_error(p)
    p.close()
    assert err.kind == "unreachable" and base_url in err.message
    assert "refused" in err.message.lower()


def test_slow_server_times_out(fake_server: FakeServer, api: str) -> None:
    fake_server.script(slow_first_byte(1.5))
    p = adapter(api, fake_server.base_url, timeout_s=0.3, max_retries=0)
    err = stream_error(p)
    p.close()
    assert err.kind == "timeout" and "0.3 s" in err.message


# ---- the server's own words, and each failed attempt ---------------------------------------

RATE_LIMIT = ("Rate limit reached for test-model in organization org-123 on tokens per min (TPM): "
              "Limit 30000, Used 29876, Requested 1200. Please try again in 2.15s.")
HOSTILE = f"bad thing\x1b[2J\u202e here\nnext line Bearer {ADAPTER_KEY} " + "x" * 600


def test_a_rate_limit_shows_the_servers_own_message(fake_server: FakeServer, wire: Any) -> None:
    fake_server.script(*[fault_status(429, retry_after=0.01, message=RATE_LIMIT)] * 2)
    err = stream_error(wire)
    assert err.kind == "rate_limit"
    assert err.message == f"fake: rate limited (HTTP 429) after 1 retry: {RATE_LIMIT}"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422, 429, 500])
def test_every_http_error_shows_the_servers_message_redacted_escaped_and_cut(
        fake_server: FakeServer, wire: Any, status: int) -> None:
    fake_server.script(*[fault_status(status, retry_after=0.01, message=HOSTILE)] * 2)
    err = stream_error(wire)  # one line, never the key
    assert "bad thing\\x1b[2J\\u202e here next line Bearer ***" in err.message
    assert "\x1b" not in err.message and "\u202e" not in err.message
    assert "x" * 200 not in err.message and len(err.message) <= 400


def test_each_failed_attempt_reports_its_status_and_the_servers_answer(
        fake_server: FakeServer, wire: Any, api: str) -> None:
    fake_server.script(fault_status(429, retry_after=0.01, message=RATE_LIMIT), text("recovered"))
    parts = list(wire.stream(QUESTION, TODO_TOOLS))
    failed = [p for p in parts if isinstance(p, AttemptFailed)]
    assert [(f.attempt, f.status, f.reason, f.retried_as) for f in failed] == [(1, 429, "429 rate limited", 2)]
    assert failed[0].response["error"]["message"] == RATE_LIMIT  # the body as the server sent it
    sent = [p for p in parts if isinstance(p, RequestSent)]
    assert len(sent) == 1 and sent[0].body == fake_server.requests_to(api)[0].body  # one body, sent twice
    assert isinstance(parts[-1], Completed) and parts[-1].text == "recovered" and parts[-1].retries == 1


def test_the_last_failed_attempt_comes_before_the_error(fake_server: FakeServer, wire: Any) -> None:
    fake_server.script(*[fault_status(503, retry_after=0.01)] * 2)
    parts: list[Any] = []
    with pytest.raises(ProviderError):
        for part in wire.stream(QUESTION, TODO_TOOLS):
            parts.append(part)
    assert [type(p).__name__ for p in parts] == ["RequestSent", "AttemptFailed", "Retrying", "AttemptFailed"]
    assert [(p.attempt, p.status, p.retried_as) for p in parts if isinstance(p, AttemptFailed)] == [
        (1, 503, 2), (2, 503, None)]


def test_a_refused_connection_is_a_failed_attempt_without_a_status(api: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = adapter(api, f"http://127.0.0.1:{port}/v1", max_retries=0)
    parts: list[Any] = []
    with pytest.raises(ProviderError):
        for part in p.stream(QUESTION, TODO_TOOLS):
            parts.append(part)
    p.close()
    (failed,) = [x for x in parts if isinstance(x, AttemptFailed)]
    assert (failed.attempt, failed.status, failed.response, failed.reason, failed.retried_as) == (
        1, None, None, "connection failed", None)


# ---- the stream cut or closed ---------------------------------------------------------------

def test_cut_stream_keeps_the_partial_text(fake_server: FakeServer, wire: Any, api: str) -> None:
    fake_server.script(cut_stream_after(CUT_BEFORE_FOURTH_DELTA[api], text("partial answer here", chunk_size=4)))
    err = stream_error(wire)
    assert err.kind == "stream_cut" and err.partial_text == "partial answ"


def test_stream_without_finish_is_cut(fake_server: FakeServer, wire: Any) -> None:
    fake_server.script(text("abc", finish_reason=None))  # Responses: no terminal event
    err = stream_error(wire)
    assert err.kind == "stream_cut" and err.partial_text == "abc"


def test_closing_the_generator_closes_the_connection(fake_server: FakeServer, wire: Any) -> None:
    fake_server.script(slow_chunks(0.02, text("x" * 300, chunk_size=1)))
    gen = wire.stream(QUESTION, TODO_TOOLS)
    assert isinstance(next(gen), RequestSent)
    assert [next(gen), next(gen), next(gen)] == [TextPart("x")] * 3
    gen.close()  # what Ctrl-C does to the consumer's loop
    deadline = time.monotonic() + 3
    while fake_server.disconnects == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake_server.disconnects == 1


def test_importing_the_adapter_does_not_import_openai(api: str) -> None:
    code = (f"import sys, repl.providers.{api}, repl.providers.errors; "
            "assert 'openai' not in sys.modules, 'openai imported eagerly'")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- the same line from both ------------------------------------------------------------------

def same_error_on_both(fake_server: FakeServer, *replies: Any, **overrides: Any) -> ProviderError:
    errors = []
    for api in ("chat", "responses"):
        p = adapter(api, fake_server.base_url, **overrides)
        fake_server.script(*replies)
        errors.append(stream_error(p))
        p.close()
    chat, responses = errors
    assert (responses.kind, responses.message) == (chat.kind, chat.message)
    return responses


@pytest.mark.parametrize("replies, kind, words", [
    ((fault_status(503, retry_after=0.01),) * 2, "server", "HTTP 503) after 1 retry"),
    ((fault_status(404),), "not_found", "model 'test-model' not found"),
    ((fault_status(400, message=f"invalid header value Bearer {ADAPTER_KEY}"),), "bad_request", "Bearer ***"),
    ((fault_status(429, retry_after=0.2),) * 2, "rate_limit", "rate limited (HTTP 429) after 1 retry"),
])
def test_status_faults_read_the_same(fake_server: FakeServer, replies: tuple, kind: str, words: str) -> None:
    err = same_error_on_both(fake_server, *replies)
    assert err.kind == kind and words in err.message


def test_bad_key_reads_the_same(fake_server: FakeServer) -> None:
    fake_server.api_key = "sk-the-right-one"
    err = same_error_on_both(fake_server)
    assert err.kind == "auth" and "GLASSLOOP_TEST_KEY" in err.message


def test_timeout_reads_the_same(fake_server: FakeServer) -> None:
    err = same_error_on_both(fake_server, slow_first_byte(1.5), timeout_s=0.3, max_retries=0)
    assert err.kind == "timeout" and "0.3 s" in err.message
