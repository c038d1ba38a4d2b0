"""Item 11: malformed stream shapes, through the real openai SDK on both wire APIs.

The scripted server sends each stream verbatim (``raw_stream``): a Chat chunk
whose ``delta`` is a list, ``tool_calls`` an object, ``content`` a number,
usage counts as strings...; a Responses event whose ``delta`` is a number,
``item`` null, ``output`` a string... Every one ends the turn with
``stopped_by == "error"`` and one ``bad_response`` line, never a traceback;
the history stays valid (the next turn goes through the server's history
check). One shape also goes through the ``glassloop ask`` command line (in this
process), and so do tool-call arguments holding NaN and Infinity, which Python's json
reads and no strict parser does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from repl.loop.agent import Limits, run_turn
from repl.loop.approval import Approver
from repl.loop.events import ErrorEvent, EventLog
from repl.loop.history import History, check
from tests.fakeserver import FakeServer, call, raw_stream, text, tool_calls
from tests.reliability.helpers import record, strict_json, written_lines
from tests.support import ADAPTERS, glassloop_here


def chunk(delta: Any = None, finish: Any = None, **extra: Any) -> dict[str, Any]:
    body = {"id": "chatcmpl-raw", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": {} if delta is None else delta, "finish_reason": finish}]}
    return {**body, **extra}


def usage_chunk(**usage: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-raw", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [], "usage": usage}


def call_fragment(**fields: Any) -> dict[str, Any]:
    return {"index": 0, "id": "call_raw", "type": "function", **fields}


CHAT: dict[str, list[Any]] = {
    "delta is a list": [chunk(["hello"]), chunk({}, "stop"), "[DONE]"],
    "tool_calls is an object": [
        chunk({"tool_calls": call_fragment(function={"name": "list_todos", "arguments": "{}"})}),
        chunk({}, "tool_calls"), "[DONE]"],
    "content is a number": [chunk({"content": "partial "}), chunk({"content": 42}), chunk({}, "stop"), "[DONE]"],
    "usage counts are strings": [
        chunk({"content": "hi"}), chunk({}, "stop"),
        usage_chunk(prompt_tokens="twelve", completion_tokens="3", total_tokens="15"), "[DONE]"],
    "chunk is a list": [[1, 2], "[DONE]"],
    "choices is an object": [{**chunk(), "choices": {"index": 0, "delta": {"content": "x"}}}, "[DONE]"],
    "function is a string": [chunk({"tool_calls": [call_fragment(function="list_todos")]}),
                             chunk({}, "tool_calls"), "[DONE]"],
    "arguments is a number": [
        chunk({"tool_calls": [call_fragment(function={"name": "list_todos", "arguments": 5})]}),
        chunk({}, "tool_calls"), "[DONE]"],
    "finish_reason is a number": [chunk({"content": "a"}, 7), "[DONE]"],
}


def event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "sequence_number": 0, **fields}


def completed(**response: Any) -> dict[str, Any]:
    return event("response.completed", response={"id": "resp_raw", "object": "response",
                                                 "status": "completed", "output": [], **response})


FUNCTION_ITEM = {"type": "function_call", "id": "fc_1", "call_id": "call_raw", "name": "list_todos",
                 "arguments": ""}
RESPONSES: dict[str, list[Any]] = {
    "delta is a number": [
        event("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0, delta="partial "),
        event("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0, delta=5),
        completed()],
    "item is null": [event("response.output_item.added", output_index=0, item=None), completed()],
    "output is a string": [completed(output="hello")],
    "usage counts are strings": [
        event("response.output_text.delta", item_id="msg_1", delta="hi"),
        completed(usage={"input_tokens": "twelve", "output_tokens": "4", "total_tokens": "16"})],
    "response is null": [event("response.completed", response=None)],
    "event is a list": [[1, 2], completed()],
    "arguments delta is an object": [
        event("response.output_item.added", output_index=0, item=FUNCTION_ITEM),
        event("response.function_call_arguments.delta", item_id="fc_1", delta={"a": 1}), completed()],
    "name is a number": [event("response.output_item.added", output_index=0, item={**FUNCTION_ITEM, "name": 5}),
                         completed()],
    "message content is a string": [
        event("response.output_item.done", output_index=0,
              item={"type": "message", "id": "msg_1", "role": "assistant", "content": "hello"}),
        completed()],
}
SHAPES = [("chat", name) for name in CHAT] + [("responses", name) for name in RESPONSES]


@pytest.fixture
def provider_for(fake_server: FakeServer) -> Iterator[Any]:
    made: list[Any] = []

    def make(api: str) -> Any:
        made.append(ADAPTERS[api](name="test", model="m", base_url=fake_server.base_url,
                                  api_key="sk-test", max_retries=0, timeout_s=10))
        return made[-1]

    yield make
    for provider in made:
        provider.close()


def one_turn(provider: Any, registry: Any, history: History, question: str) -> tuple[Any, EventLog]:
    log = EventLog()
    finished = run_turn(history, question, provider=provider, registry=registry,
                        approver=Approver("ask"), limits=Limits(), emit=log)
    return finished, log


@pytest.mark.parametrize(("api", "shape"), SHAPES, ids=[f"{a}: {s}" for a, s in SHAPES])
def test_a_malformed_shape_is_one_error_line(api, shape, fake_server, provider_for, registry):
    events = (CHAT if api == "chat" else RESPONSES)[shape]
    provider = provider_for(api)
    history = History("You are a test assistant.")
    fake_server.script(raw_stream(*events))
    finished, log = one_turn(provider, registry, history, "first question")  # raises on a traceback
    errors = log.of(ErrorEvent)
    assert finished.stopped_by == "error", f"{shape}: stopped by {finished.stopped_by}"
    assert [e.kind for e in errors] == ["bad_response"]
    message = errors[0].message
    assert "\n" not in message and len(message) <= 400 and message.startswith("test:")
    assert check(history.messages) == []
    fake_server.script(text("second answer"))
    again, _ = one_turn(provider, registry, history, "second question")
    assert again.stopped_by == "answer" and again.answer == "second answer"
    assert fake_server.history_errors == [] and check(history.messages) == []
    record("malformed_streams", api=api, shape=shape, message=message)


def test_partial_text_before_a_bad_chunk_is_kept_and_marked(fake_server, provider_for, registry):
    provider = provider_for("chat")
    history = History("You are a test assistant.")
    fake_server.script(raw_stream(*CHAT["content is a number"]))
    finished, _ = one_turn(provider, registry, history, "q")
    assert finished.stopped_by == "error" and finished.answer == "partial "
    assert history.messages[-1]["content"].startswith("partial ")
    assert "[answer cut off]" in history.messages[-1]["content"]


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_ask_prints_one_line_for_a_bad_shape(api, fake_server, home):
    events = CHAT["delta is a list"] if api == "chat" else RESPONSES["item is null"]
    fake_server.script(raw_stream(*events))
    result = glassloop_here("ask", "hello", "--api", api, "--base-url", fake_server.base_url, env=home)
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if "malformed" in line]
    assert len(lines) == 1 and result.returncode != 0, result.stderr


def test_numbers_json_cannot_hold_leave_ask_and_the_trace_as_json(fake_server, home):
    fake_server.script(tool_calls(call("get_weather", '{"city": NaN, "days": [Infinity, -Infinity]}')),
                       text("No such city."))
    result = glassloop_here("ask", "weather?", "--json", "--base-url", fake_server.base_url, env=home)
    assert result.returncode == 0, result.stderr
    out = strict_json(result.stdout)
    (started,) = [e for e in out["trace"] if e["type"] == "tool_call_started"]
    assert started["arguments"] == {"city": "NaN", "days": ["Infinity", "-Infinity"]}
    assert out["answer"] == "No such city."
    written = written_lines(home)  # trace, raw bodies, journal
    assert len(written) > 5 and all(strict_json(line) for line in written)
