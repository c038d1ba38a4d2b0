"""What only the Responses API adapter has (the rest is ``test_provider_contract.py``): its wire
format, strict tool schemas, failures reported in the stream, the ``/v1/responses`` route itself.
The real openai SDK over HTTP to the scripted server."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from repl.providers.base import TextPart
from repl.providers.responses import ResponsesProvider, is_strict_compatible, to_wire_tools
from tests.fake_responses import response_events
from tests.fakeserver import Exchange, FakeServer, RecordedRequest, call, text, tool_calls
from tests.support import QUESTION, TODO_TOOLS, adapter, stream_all, stream_error


@pytest.fixture
def provider(fake_server: FakeServer) -> Iterator[ResponsesProvider]:
    p = adapter("responses", fake_server.base_url)
    yield p
    p.close()


def test_each_request_is_whole_and_not_stored(fake_server: FakeServer, provider: ResponsesProvider) -> None:
    fake_server.script(text("hello world", chunk_size=3))
    stream_all(provider)
    body = fake_server.requests_to("responses")[0].body
    assert body["stream"] is True and body["store"] is False
    assert "previous_response_id" not in body and "messages" not in body


THREE_CALLS = tool_calls(
    call("list_todos", {}),
    call("get_todo", {"todo_id": "todo-002"}),
    call("add_note", {"text": "周报", "tags": ["line one\nline two"]}),
    chunk_size=2, text="Checking.",
)


@pytest.mark.parametrize("interleave", [False, True], ids=["sequential", "interleaved"])
def test_route_can_interleave_argument_deltas(fake_server: FakeServer, interleave: bool) -> None:
    """What ``test_split_tool_calls_are_assembled`` (the contract) reads, in the order sent."""
    sent = [json.loads(data)["output_index"] for kind, data in response_events(fake_server, THREE_CALLS, {}, interleave)
            if kind == "response.function_call_arguments.delta"]
    assert (sent != sorted(sent)) is interleave  # the route really interleaves them


def test_wire_format_of_history_and_tools(fake_server: FakeServer) -> None:
    fake_server.script(text("done"), text("final"))
    p = adapter("responses", fake_server.base_url, temperature=0.2, max_tokens=100)
    loose = {"name": "list_files", "description": "d", "parameters": {
        "type": "object", "properties": {"path": {"type": "string", "default": "."}},
        "additionalProperties": False}}
    history = [
        {"role": "system", "content": "be brief"},
        *QUESTION,
        {"role": "assistant", "content": "Looking.", "tool_calls": [
            {"id": "call_9", "name": "list_todos", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "call_9", "name": "list_todos", "content": '{"ok": true}'},
    ]
    stream_all(p, history, [*TODO_TOOLS, loose])
    stream_all(p, history, None)
    p.close()
    first, second = (r.body for r in fake_server.requests_to("responses"))
    assert first["instructions"] == "be brief"
    assert first["input"] == [
        {"type": "message", "role": "user", "content": "what is left to do?"},
        {"type": "message", "role": "assistant", "content": "Looking."},
        {"type": "function_call", "call_id": "call_9", "name": "list_todos", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_9", "output": '{"ok": true}'},
    ]
    assert first["tools"] == [{"type": "function", **TODO_TOOLS[0], "strict": True},
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


def test_history_check_catches_an_output_without_its_call(fake_server: FakeServer,
                                                          provider: ResponsesProvider) -> None:
    orphan = [*QUESTION, {"role": "tool", "tool_call_id": "call_7", "name": "x", "content": "{}"}]
    err = stream_error(provider, orphan)
    assert err.kind == "bad_request" and "without its call" in err.message
    assert fake_server.unscripted == 0  # refused before any reply was used


@pytest.mark.parametrize("finish", ["failed", "error"])
def test_failure_reported_in_the_stream(fake_server: FakeServer, provider: ResponsesProvider, finish: str) -> None:
    fake_server.script(text("half an", finish_reason=finish, error_message="overloaded, try later"))
    err = stream_error(provider)
    assert err.kind == "server" and err.partial_text == "half an"
    assert err.message == "fake: error reported during the answer: overloaded, try later"


def test_incomplete_response_ends_with_length(fake_server: FakeServer, provider: ResponsesProvider) -> None:
    fake_server.script(text("a long answ", finish_reason="length"))
    _, done = stream_all(provider)
    assert done.text == "a long answ" and done.finish_reason == "length"


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
    parts, done = stream_all(provider)
    assert [p.text for p in parts if isinstance(p, TextPart)] == ["Let me see."]
    assert [(c.id, c.name, c.arguments) for c in done.tool_calls] == [("c1", "list_todos", '{"status": "todo"}')]
    assert done.finish_reason == "tool_calls" and done.usage.estimated is True


def test_text_tool_call_format_is_refused(fake_server: FakeServer) -> None:
    with pytest.raises(ValueError, match="native"):
        adapter("responses", fake_server.base_url, tool_call_format="text")


# ---- the route itself, through the SDK without the adapter --------------------

def test_route_answers_without_streaming(fake_server: FakeServer) -> None:
    fake_server.script(tool_calls(call("get_todo", {"todo_id": "todo-002"}), text="Looking.", usage=(9, 4, 2, 1)))
    client = openai.OpenAI(base_url=fake_server.base_url, api_key="x", max_retries=0)
    response = client.responses.create(model="m", input="hi", tools=to_wire_tools(TODO_TOOLS))
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
    chat_tool = {"type": "function", "function": TODO_TOOLS[0]}
    client = openai.OpenAI(base_url=fake_server.base_url, api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="missing 'name'"):
        client.responses.create(model="m", input="hi", tools=[chat_tool])  # type: ignore[list-item]
    client.close()
    assert fake_server.history_errors == []  # a tool problem, not a history problem
