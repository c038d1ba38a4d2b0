"""ResponsesProvider with the real openai SDK over HTTP to the scripted ``/v1/responses`` route."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from repl.providers.base import Completed, ProviderError, RequestSent, TextPart
from repl.providers.chat import ChatProvider
from repl.providers.responses import ResponsesProvider, is_strict_compatible, to_wire_tools
from tests.fake_responses import install, response_events, responses_requests
from tests.fakeserver import (
    Exchange,
    FakeServer,
    RecordedRequest,
    call,
    cut_stream_after,
    fault_status,
    malformed_arguments,
    slow_chunks,
    slow_first_byte,
    text,
    tool_calls,
)

USER = [{"role": "user", "content": "what is left to do?"}]
TOOLS = [{"name": "list_todos", "description": "List todos.",
          "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}]
SECRET = "sk-test-0123456789abcdef"
OPTIONS: dict[str, Any] = dict(name="fake", model="test-model", api_key=SECRET,
                               api_key_env="GLASSLOOP_TEST_KEY", timeout_s=5, max_retries=1)


def make_provider(base_url: str, **overrides: Any) -> ResponsesProvider:
    return ResponsesProvider(**{**OPTIONS, "base_url": base_url, **overrides})


@pytest.fixture
def provider(fake_server: FakeServer) -> Iterator[ResponsesProvider]:
    p = make_provider(fake_server.base_url)
    yield p
    p.close()


def run(p: Any, messages: list[dict] = USER, tools: list[dict] | None = TOOLS) -> tuple[list, Completed]:
    parts = list(p.stream(messages, tools))
    assert sum(isinstance(x, RequestSent) for x in parts) == 1  # the body as sent (/trace --raw)
    parts = [x for x in parts if not isinstance(x, RequestSent)]
    assert isinstance(parts[-1], Completed)
    assert not any(isinstance(x, Completed) for x in parts[:-1])
    return parts[:-1], parts[-1]


def fail(p: Any, messages: list[dict] = USER) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        list(p.stream(messages, TOOLS))
    assert SECRET not in info.value.message and "\n" not in info.value.message
    return info.value


def test_text_streams_as_it_arrives(fake_server: FakeServer, provider: ResponsesProvider) -> None:
    fake_server.script(text("hello world", chunk_size=3))
    parts, done = run(provider)
    assert [p.text for p in parts] == ["hel", "lo ", "wor", "ld"]
    assert done.text == "hello world" and done.tool_calls == []
    assert done.finish_reason == "stop" and done.retries == 0 and done.latency_s > 0
    body = responses_requests(fake_server)[0].body
    assert body["stream"] is True and body["store"] is False
    assert "previous_response_id" not in body and "messages" not in body
    assert fake_server.history_errors == []


THREE_CALLS = tool_calls(
    call("list_todos", {}),
    call("get_todo", {"todo_id": "todo-002"}),
    call("add_note", {"text": "周报", "tags": ["line one\nline two"]}),
    chunk_size=2, text="Checking.",
)


@pytest.mark.parametrize("interleave", [False, True], ids=["sequential", "interleaved"])
def test_split_tool_calls_are_assembled(fake_server: FakeServer, provider: ResponsesProvider,
                                        interleave: bool) -> None:
    install(fake_server, interleave=interleave)
    fake_server.script(THREE_CALLS)
    parts, done = run(provider)
    assert [(c.id, c.name) for c in done.tool_calls] == [
        ("call_1", "list_todos"), ("call_2", "get_todo"), ("call_3", "add_note")]
    assert json.loads(done.tool_calls[2].arguments) == {"text": "周报", "tags": ["line one\nline two"]}
    assert done.tool_calls[0].arguments == "{}"
    assert done.text == "Checking." and done.finish_reason == "tool_calls"
    assert done.tool_calls[1].arguments == '{"todo_id": "todo-002"}'
    assert all(isinstance(p, TextPart) for p in parts)  # only text streams; calls come whole
    sent = [json.loads(data)["output_index"] for kind, data in response_events(fake_server, THREE_CALLS, {}, interleave)
            if kind == "response.function_call_arguments.delta"]
    assert (sent != sorted(sent)) is interleave  # the route really interleaves them


def test_calls_without_call_ids_get_generated_ones(fake_server: FakeServer, provider: ResponsesProvider) -> None:
    fake_server.script(tool_calls(call("a", {}, id=None), call("b", {"x": 1}, id=None)))
    _, done = run(provider)
    ids = [c.id for c in done.tool_calls]
    assert all(i.startswith("call_") for i in ids) and len(set(ids)) == 2
    assert [c.name for c in done.tool_calls] == ["a", "b"]


def test_malformed_arguments_are_passed_through_raw(fake_server: FakeServer, provider: ResponsesProvider) -> None:
    fake_server.script(malformed_arguments("get_todo", '{"todo_id": "todo-0'))
    _, done = run(provider)
    assert done.tool_calls[0].arguments == '{"todo_id": "todo-0'


def test_usage_with_cached_and_reasoning_tokens(fake_server: FakeServer, provider: ResponsesProvider) -> None:
    fake_server.script(text("ok", usage=(520, 38, 256, 30)))
    _, done = run(provider)
    assert (done.usage.input_tokens, done.usage.cached_tokens, done.usage.output_tokens) == (520, 256, 38)
    assert done.usage.estimated is False
    assert done.usage.reasoning_tokens == 30


def test_missing_usage_is_estimated(fake_server: FakeServer, provider: ResponsesProvider) -> None:
    fake_server.script(text("a fairly long answer " * 10, usage=None))
    _, done = run(provider)
    assert done.usage.estimated is True
    assert done.usage.input_tokens > 10 and 40 <= done.usage.output_tokens <= 60


def test_wire_format_of_history_and_tools(fake_server: FakeServer) -> None:
    fake_server.script(text("done"), text("final"))
    p = make_provider(fake_server.base_url, temperature=0.2, max_tokens=100)
    loose = {"name": "list_files", "description": "d", "parameters": {
        "type": "object", "properties": {"path": {"type": "string", "default": "."}},
        "additionalProperties": False}}
    history = [
        {"role": "system", "content": "be brief"},
        *USER,
        {"role": "assistant", "content": "Looking.", "tool_calls": [
            {"id": "call_9", "name": "list_todos", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "call_9", "name": "list_todos", "content": '{"ok": true}'},
    ]
    run(p, history, [*TOOLS, loose])
    run(p, history, None)
    p.close()
    first, second = (r.body for r in responses_requests(fake_server))
    assert first["instructions"] == "be brief"
    assert first["input"] == [
        {"type": "message", "role": "user", "content": "what is left to do?"},
        {"type": "message", "role": "assistant", "content": "Looking."},
        {"type": "function_call", "call_id": "call_9", "name": "list_todos", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_9", "output": '{"ok": true}'},
    ]
    assert first["tools"] == [{"type": "function", **TOOLS[0], "strict": True},
                              {"type": "function", **loose, "strict": False}]
    assert (first["temperature"], first["max_output_tokens"], first["model"]) == (0.2, 100, "test-model")
    assert "tools" not in second and second["input"] == first["input"]
    assert fake_server.history_errors == []


@pytest.mark.parametrize("schema, strict", [
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
      "additionalProperties": False}, True),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}, False),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, False),
    ({"type": "object", "properties": {"a": {"type": "string", "default": "x"}}, "required": ["a"],
      "additionalProperties": False}, False),
    ({"type": "object", "properties": {"a": {"type": "array", "items": {
        "type": "object", "properties": {"b": {"type": "integer"}}, "additionalProperties": False}}},
      "required": ["a"], "additionalProperties": False}, False),  # nested object with an optional key
    ({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
      "required": ["a"], "additionalProperties": False}, True),
])
def test_strict_only_for_strict_compatible_schemas(schema: dict, strict: bool) -> None:
    assert is_strict_compatible(schema) is strict
    wire = to_wire_tools([{"name": "t", "description": "", "parameters": schema}])
    assert wire == [{"type": "function", "name": "t", "description": "", "parameters": schema, "strict": strict}]


def test_history_check_catches_an_unanswered_call(fake_server: FakeServer, provider: ResponsesProvider) -> None:
    fake_server.script(text("never"))
    broken = [*USER, {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "name": "list_todos", "arguments": "{}"}]}, *USER]
    err = fail(provider, broken)
    assert err.kind == "bad_request" and "unanswered" in err.message
    assert fake_server.history_errors and "call_1" in fake_server.history_errors[0]


def test_history_check_catches_an_output_without_its_call(fake_server: FakeServer,
                                                          provider: ResponsesProvider) -> None:
    orphan = [*USER, {"role": "tool", "tool_call_id": "call_7", "name": "x", "content": "{}"}]
    err = fail(provider, orphan)
    assert err.kind == "bad_request" and "without its call" in err.message
    assert fake_server.unscripted == 0  # refused before any reply was used


# ---- faults: the same one-line errors as the chat adapter -------------------

def both_providers(base_url: str, **overrides: Any) -> list[Any]:
    options = {**OPTIONS, "base_url": base_url, **overrides}
    return [ChatProvider(**options), ResponsesProvider(**options)]


def same_error_on_both(fake_server: FakeServer, *replies: Any, **overrides: Any) -> ProviderError:
    errors = []
    for p in both_providers(fake_server.base_url, **overrides):
        fake_server.script(*replies)
        errors.append(fail(p))
        p.close()
    chat, responses = errors
    assert (responses.kind, responses.message) == (chat.kind, chat.message)
    return responses


@pytest.mark.parametrize("replies, kind, words", [
    ((fault_status(503, retry_after=0.01),) * 2, "server", "HTTP 503) after 1 retry"),
    ((fault_status(404),), "not_found", "model 'test-model' not found"),
    ((fault_status(400, message=f"invalid header value Bearer {SECRET}"),), "bad_request", "Bearer ***"),
    ((fault_status(429, retry_after=0.2),) * 2, "rate_limit", "rate limited (HTTP 429) after 1 retry"),
])
def test_status_faults(fake_server: FakeServer, replies: tuple, kind: str, words: str) -> None:
    err = same_error_on_both(fake_server, *replies)
    assert err.kind == kind and words in err.message


def test_rate_limit_honours_retry_after(fake_server: FakeServer, provider: ResponsesProvider) -> None:
    fake_server.script(fault_status(429, retry_after=0.3), fault_status(429, retry_after=0.3))
    started = time.monotonic()
    assert fail(provider).kind == "rate_limit"
    assert time.monotonic() - started >= 0.3
    assert len(responses_requests(fake_server)) == 2


def test_server_error_then_success_counts_the_retry(fake_server: FakeServer, provider: ResponsesProvider) -> None:
    fake_server.script(fault_status(500, retry_after=0.01), text("recovered"))
    _, done = run(provider)
    assert done.text == "recovered" and done.retries == 1
    assert [r.headers["x-stainless-retry-count"] for r in responses_requests(fake_server)] == ["0", "1"]


def test_bad_key_names_the_env_var(fake_server: FakeServer) -> None:
    fake_server.api_key = "sk-the-right-one"  # the server echoes the wrong key back
    err = same_error_on_both(fake_server)
    assert err.kind == "auth" and "GLASSLOOP_TEST_KEY" in err.message


def test_slow_server_times_out(fake_server: FakeServer) -> None:
    err = same_error_on_both(fake_server, slow_first_byte(1.5), timeout_s=0.3, max_retries=0)
    assert err.kind == "timeout" and "0.3 s" in err.message


def test_nothing_listening_is_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    p = make_provider(base_url, max_retries=0)
    err = fail(p)
    p.close()
    assert err.kind == "unreachable" and base_url in err.message and "refused" in err.message.lower()


def test_cut_stream_keeps_the_partial_text(fake_server: FakeServer, provider: ResponsesProvider) -> None:
    # created, in_progress, item added, part added, then text deltas of 4 characters
    fake_server.script(cut_stream_after(7, text("partial answer here", chunk_size=4)))
    err = fail(provider)
    assert err.kind == "stream_cut" and err.partial_text == "partial answ"


def test_stream_without_a_terminal_event_is_cut(fake_server: FakeServer, provider: ResponsesProvider) -> None:
    fake_server.script(text("abc", finish_reason=None))
    err = fail(provider)
    assert err.kind == "stream_cut" and err.partial_text == "abc"


@pytest.mark.parametrize("finish", ["failed", "error"])
def test_failure_reported_in_the_stream(fake_server: FakeServer, provider: ResponsesProvider, finish: str) -> None:
    fake_server.script(text("half an", finish_reason=finish, error_message="overloaded, try later"))
    err = fail(provider)
    assert err.kind == "server" and err.partial_text == "half an"
    assert err.message == "fake: error reported during the answer: overloaded, try later"


def test_incomplete_response_ends_with_length(fake_server: FakeServer, provider: ResponsesProvider) -> None:
    fake_server.script(text("a long answ", finish_reason="length"))
    _, done = run(provider)
    assert done.text == "a long answ" and done.finish_reason == "length"


def test_closing_the_generator_closes_the_connection(fake_server: FakeServer,
                                                     provider: ResponsesProvider) -> None:
    fake_server.script(slow_chunks(0.02, text("x" * 300, chunk_size=1)))
    gen = provider.stream(USER, TOOLS)
    assert isinstance(next(gen), RequestSent)
    assert [next(gen), next(gen), next(gen)] == [TextPart("x")] * 3
    gen.close()  # what Ctrl-C does to the consumer's loop
    deadline = time.monotonic() + 3
    while fake_server.disconnects == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake_server.disconnects == 1


def test_items_delivered_only_in_the_final_response(fake_server: FakeServer, provider: ResponsesProvider) -> None:
    """A server that streams no deltas still yields the text and the calls."""
    output = [{"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": "Let me see.", "annotations": []}]},
              {"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "list_todos",
               "arguments": '{"status": "todo"}', "status": "completed"}]

    def terse(fake: FakeServer, ex: Exchange, req: RecordedRequest) -> None:
        done = {"type": "response.completed", "sequence_number": 0, "response": {
            "id": "r", "object": "response", "status": "completed", "output": output, "usage": None}}
        ex.stream([("response.completed", json.dumps(done))], fake.next_reply(req.body))

    fake_server.routes[("POST", "/v1/responses")] = terse
    parts, done = run(provider)
    assert [p.text for p in parts if isinstance(p, TextPart)] == ["Let me see."]
    assert [(c.id, c.name, c.arguments) for c in done.tool_calls] == [("c1", "list_todos", '{"status": "todo"}')]
    assert done.finish_reason == "tool_calls" and done.usage.estimated is True


def test_text_tool_call_format_is_refused(fake_server: FakeServer) -> None:
    with pytest.raises(ValueError, match="native"):
        make_provider(fake_server.base_url, tool_call_format="text")


def test_importing_the_adapter_does_not_import_openai() -> None:
    code = ("import sys, repl.providers.responses; "
            "assert 'openai' not in sys.modules, 'openai imported eagerly'")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- the route itself, through the SDK without the adapter --------------------

def test_route_answers_without_streaming(fake_server: FakeServer) -> None:
    fake_server.script(tool_calls(call("get_todo", {"todo_id": "todo-002"}), text="Looking.", usage=(9, 4, 2, 1)))
    client = openai.OpenAI(base_url=fake_server.base_url, api_key="x", max_retries=0)
    response = client.responses.create(model="m", input="hi", tools=to_wire_tools(TOOLS))
    client.close()
    assert response.status == "completed" and response.output_text == "Looking."
    calls = [item for item in response.output if item.type == "function_call"]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_1", "get_todo", {"todo_id": "todo-002"})]
    assert response.usage.input_tokens_details.cached_tokens == 2
    assert response.usage.output_tokens_details.reasoning_tokens == 1


def test_route_streams_typed_events_in_order(fake_server: FakeServer) -> None:
    fake_server.script(tool_calls(call("a", {"x": 1}), text="hi", chunk_size=4))
    client = openai.OpenAI(base_url=fake_server.base_url, api_key="x", max_retries=0)
    with client.responses.create(model="m", input="hi", stream=True) as stream:
        events = list(stream)
    client.close()
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [e.type for e in events]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert kinds[-1] == "response.completed" and "response.function_call_arguments.done" in kinds
    assert type(events[-1]).__name__ == "ResponseCompletedEvent"
    final = events[-1].response
    assert [item.type for item in final.output] == ["message", "function_call"]


def test_route_refuses_chat_shaped_tools(fake_server: FakeServer) -> None:
    chat_tool = {"type": "function", "function": TOOLS[0]}
    client = openai.OpenAI(base_url=fake_server.base_url, api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="missing 'name'"):
        client.responses.create(model="m", input="hi", tools=[chat_tool])  # type: ignore[list-item]
    client.close()
    assert fake_server.history_errors == []  # a tool problem, not a history problem
