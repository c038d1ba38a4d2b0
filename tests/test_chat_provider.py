"""ChatProvider with the real openai SDK over HTTP to the scripted server."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from repl.providers.base import Completed, ProviderError, RequestSent, TextPart
from repl.providers.chat import ChatProvider
from tests.fakeserver import (
    FakeServer,
    call,
    cut_stream_after,
    fault_status,
    malformed_arguments,
    reject_stream_options,
    slow_chunks,
    slow_first_byte,
    text,
    tool_calls,
)

USER = [{"role": "user", "content": "what is left to do?"}]
TOOLS = [{"name": "list_todos", "description": "List todos.",
          "parameters": {"type": "object", "properties": {}}}]
SECRET = "sk-test-0123456789abcdef"


@pytest.fixture
def provider(fake_server: FakeServer) -> Iterator[ChatProvider]:
    p = make_provider(fake_server.base_url)
    yield p
    p.close()


def make_provider(base_url: str, **overrides: Any) -> ChatProvider:
    options: dict[str, Any] = dict(name="fake", model="test-model", base_url=base_url,
                                   api_key=SECRET, api_key_env="GLASSLOOP_TEST_KEY",
                                   timeout_s=5, max_retries=1)
    return ChatProvider(**{**options, **overrides})


def run(p: ChatProvider, messages: list[dict] = USER, tools: list[dict] | None = TOOLS) -> tuple[list, Completed]:
    parts = list(p.stream(messages, tools))
    assert sum(isinstance(x, RequestSent) for x in parts) == 1  # the body as sent (/trace --raw)
    parts = [x for x in parts if not isinstance(x, RequestSent)]
    assert isinstance(parts[-1], Completed)
    assert not any(isinstance(x, Completed) for x in parts[:-1])
    return parts[:-1], parts[-1]


def fail(p: ChatProvider, messages: list[dict] = USER) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        list(p.stream(messages, TOOLS))
    assert SECRET not in info.value.message
    return info.value


def test_text_streams_as_it_arrives(fake_server: FakeServer, provider: ChatProvider) -> None:
    fake_server.script(text("hello world", chunk_size=3))
    parts, done = run(provider)
    assert [p.text for p in parts] == ["hel", "lo ", "wor", "ld"]
    assert done.text == "hello world" and done.tool_calls == []
    assert done.finish_reason == "stop" and done.retries == 0 and done.latency_s > 0
    assert fake_server.history_errors == []


def test_interleaved_tool_calls_are_assembled(fake_server: FakeServer, provider: ChatProvider) -> None:
    fake_server.script(tool_calls(
        call("list_todos", {}),
        call("get_todo", {"todo_id": "todo-002"}),
        call("add_note", {"title": "周报", "body": "line one\nline two"}),
        chunk_size=2, text="Checking.",
    ))
    parts, done = run(provider)
    assert [(c.id, c.name) for c in done.tool_calls] == [
        ("call_1", "list_todos"), ("call_2", "get_todo"), ("call_3", "add_note")]
    assert json.loads(done.tool_calls[2].arguments) == {"title": "周报", "body": "line one\nline two"}
    assert done.tool_calls[0].arguments == "{}"
    assert done.text == "Checking." and done.finish_reason == "tool_calls"
    assert done.tool_calls[1].arguments == '{"todo_id": "todo-002"}'
    assert [p.text for p in parts] == ["Ch", "ec", "ki", "ng", "."]  # only text streams; calls come whole


def test_calls_without_ids_get_generated_ones(fake_server: FakeServer, provider: ChatProvider) -> None:
    fake_server.script(tool_calls(call("a", {}, id=None), call("b", {"x": 1}, id=None)))
    _, done = run(provider)
    ids = [c.id for c in done.tool_calls]
    assert all(i.startswith("call_") for i in ids) and len(set(ids)) == 2
    assert [c.name for c in done.tool_calls] == ["a", "b"]


def test_malformed_arguments_are_passed_through_raw(fake_server: FakeServer, provider: ChatProvider) -> None:
    fake_server.script(malformed_arguments("get_todo", '{"todo_id": "todo-0'))
    _, done = run(provider)
    assert done.tool_calls[0].arguments == '{"todo_id": "todo-0'


def test_usage_is_reported_with_cached_tokens(fake_server: FakeServer, provider: ChatProvider) -> None:
    fake_server.script(text("ok", usage=(520, 38, 256)))
    _, done = run(provider)
    assert (done.usage.input_tokens, done.usage.cached_tokens, done.usage.output_tokens) == (520, 256, 38)
    assert done.usage.estimated is False
    assert fake_server.requests[0].body["stream_options"] == {"include_usage": True}


def test_missing_usage_is_estimated(fake_server: FakeServer, provider: ChatProvider) -> None:
    fake_server.script(text("a fairly long answer " * 10, usage=None))
    _, done = run(provider)
    assert done.usage.estimated is True
    assert done.usage.input_tokens > 10 and 40 <= done.usage.output_tokens <= 60


def test_rejected_stream_options_are_dropped_and_remembered(fake_server: FakeServer) -> None:
    fake_server.reject_stream_options = True
    fake_server.script(text("first"), text("second"))
    p = make_provider(fake_server.base_url)
    _, done = run(p)
    assert done.text == "first" and done.usage.estimated is True
    assert p.stream_options_supported is False
    _, done = run(p)
    assert done.text == "second"
    assert ["stream_options" in r.body for r in fake_server.chat_requests()] == [True, False, False]
    p.close()


def test_reply_level_stream_options_rejection(fake_server: FakeServer, provider: ChatProvider) -> None:
    fake_server.script(reject_stream_options(text("fine")))
    _, done = run(provider)
    assert done.text == "fine" and len(fake_server.chat_requests()) == 2


def test_server_error_then_success_counts_the_retry(fake_server: FakeServer, provider: ChatProvider) -> None:
    fake_server.script(fault_status(500, retry_after=0.01), text("recovered"))
    _, done = run(provider)
    assert done.text == "recovered" and done.retries == 1
    assert [r.headers["x-stainless-retry-count"] for r in fake_server.chat_requests()] == ["0", "1"]


def test_persistent_server_error(fake_server: FakeServer, provider: ChatProvider) -> None:
    fake_server.script(fault_status(503, retry_after=0.01), fault_status(503, retry_after=0.01))
    err = fail(provider)
    assert err.kind == "server" and "HTTP 503" in err.message and "after 1 retry" in err.message


def test_bad_key_names_the_env_var_and_never_the_key(fake_server: FakeServer, provider: ChatProvider) -> None:
    fake_server.api_key = "sk-the-right-one"  # the server echoes the wrong key back
    err = fail(provider)
    assert err.kind == "auth"
    assert "GLASSLOOP_TEST_KEY" in err.message and "fake" in err.message
    assert "\n" not in err.message
    assert fake_server.requests[0].headers["authorization"] == f"Bearer {SECRET}"


def test_without_a_key_no_environment_key_is_sent(fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    fake_server.script(text("hi"))
    p = make_provider(fake_server.base_url, api_key=None)
    run(p)
    p.close()
    assert "sk-from-the-environment" not in fake_server.requests[0].headers["authorization"]


def test_unknown_model(fake_server: FakeServer, provider: ChatProvider) -> None:
    fake_server.script(fault_status(404))
    err = fail(provider)
    assert err.kind == "not_found"
    assert "test-model" in err.message and fake_server.base_url in err.message


def test_rate_limit_honours_retry_after_then_gives_up(fake_server: FakeServer, provider: ChatProvider) -> None:
    fake_server.script(fault_status(429, retry_after=0.3), fault_status(429, retry_after=0.3))
    started = time.monotonic()
    err = fail(provider)
    assert time.monotonic() - started >= 0.3  # waited as told, once
    assert err.kind == "rate_limit" and "rate limited" in err.message
    assert len(fake_server.chat_requests()) == 2


def test_nothing_listening_is_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    p = make_provider(base_url, max_retries=0)
    err = fail(p)
    p.close()
    assert err.kind == "unreachable" and base_url in err.message
    assert "refused" in err.message.lower()


def test_slow_server_times_out(fake_server: FakeServer) -> None:
    fake_server.script(slow_first_byte(1.5))
    p = make_provider(fake_server.base_url, timeout_s=0.3, max_retries=0)
    err = fail(p)
    p.close()
    assert err.kind == "timeout" and "0.3 s" in err.message


def test_cut_stream_keeps_the_partial_text(fake_server: FakeServer, provider: ChatProvider) -> None:
    fake_server.script(cut_stream_after(4, text("partial answer here", chunk_size=4)))
    err = fail(provider)
    assert err.kind == "stream_cut" and err.partial_text == "partial answ"


def test_stream_without_finish_is_cut(fake_server: FakeServer, provider: ChatProvider) -> None:
    fake_server.script(text("abc", finish_reason=None))
    err = fail(provider)
    assert err.kind == "stream_cut" and err.partial_text == "abc"


def test_closing_the_generator_closes_the_connection(fake_server: FakeServer, provider: ChatProvider) -> None:
    fake_server.script(slow_chunks(0.02, text("x" * 300, chunk_size=1)))
    gen = provider.stream(USER, TOOLS)
    assert isinstance(next(gen), RequestSent)
    assert [next(gen), next(gen), next(gen)] == [TextPart("x")] * 3
    gen.close()  # what Ctrl-C does to the consumer's loop
    deadline = time.monotonic() + 3
    while fake_server.disconnects == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake_server.disconnects == 1


def test_wire_format_of_history_and_tools(fake_server: FakeServer) -> None:
    fake_server.script(text("done"), text("final"))
    p = make_provider(fake_server.base_url, temperature=0.2, max_tokens=100)
    history = [
        {"role": "system", "content": "be brief"},
        *USER,
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_9", "name": "list_todos", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "call_9", "name": "list_todos", "content": '{"ok": true}'},
    ]
    run(p, history, TOOLS)
    run(p, history, None)
    p.close()
    first, second = (r.body for r in fake_server.chat_requests())
    assert first["messages"][2] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_9", "type": "function", "function": {"name": "list_todos", "arguments": "{}"}}]}
    assert first["messages"][3] == {"role": "tool", "tool_call_id": "call_9", "content": '{"ok": true}'}
    assert first["tools"] == [{"type": "function", "function": TOOLS[0]}]
    assert (first["temperature"], first["max_tokens"], first["model"]) == (0.2, 100, "test-model")
    assert "tools" not in second
    assert fake_server.history_errors == []


def test_history_check_catches_an_unanswered_call(fake_server: FakeServer, provider: ChatProvider) -> None:
    fake_server.script(text("never"))
    broken = [*USER, {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "name": "list_todos", "arguments": "{}"}]}, *USER]
    err = fail(provider, broken)
    assert err.kind == "bad_request" and "unanswered" in err.message
    assert fake_server.history_errors and "call_1" in fake_server.history_errors[0]


def test_text_tool_call_format(fake_server: FakeServer) -> None:
    reply = 'Let me look.<tool_call>{"name": "list_todos", "arguments": {}}</tool_call>'
    fake_server.script(text(reply, chunk_size=5))
    p = make_provider(fake_server.base_url, tool_call_format="text")
    parts, done = run(p)
    p.close()
    assert done.text == "Let me look." and "".join(x.text for x in parts) == "Let me look."
    assert [c.name for c in done.tool_calls] == ["list_todos"]
    assert done.finish_reason == "tool_calls"
    assert "tools" not in fake_server.requests[0].body


def test_importing_the_adapter_does_not_import_openai() -> None:
    code = ("import sys, repl.providers.chat, repl.providers.errors; "
            "assert 'openai' not in sys.modules, 'openai imported eagerly'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_key_echoed_by_the_server_is_redacted(fake_server: FakeServer, provider: ChatProvider) -> None:
    fake_server.script(fault_status(400, message=f"invalid header value Bearer {SECRET}"))
    err = fail(provider)
    assert err.kind == "bad_request" and "Bearer ***" in err.message
