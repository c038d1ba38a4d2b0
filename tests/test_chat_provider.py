"""What only the Chat Completions adapter has (the rest is ``test_provider_contract.py``):
``stream_options``, its wire format, tool calls written as text. The real openai SDK over HTTP
to the scripted server."""

from __future__ import annotations

from contextlib import closing

from tests.fakeserver import FakeServer, reject_stream_options, text
from tests.support import QUESTION, TODO_TOOLS, adapter, stream_all


def test_usage_is_asked_for_in_the_stream(fake_server: FakeServer) -> None:
    fake_server.script(text("ok", usage=(520, 38, 256)))
    with closing(adapter("chat", fake_server.base_url)) as p:
        _, done = stream_all(p)
    assert (done.usage.input_tokens, done.usage.cached_tokens, done.usage.output_tokens) == (520, 256, 38)
    assert fake_server.requests[0].body["stream_options"] == {"include_usage": True}


def test_rejected_stream_options_are_dropped_and_remembered(fake_server: FakeServer) -> None:
    fake_server.reject_stream_options = True
    fake_server.script(text("first"), text("second"))
    p = adapter("chat", fake_server.base_url)
    _, done = stream_all(p)
    assert done.text == "first" and done.usage.estimated is True
    assert p.stream_options_supported is False
    _, done = stream_all(p)
    assert done.text == "second"
    assert ["stream_options" in r.body for r in fake_server.chat_requests()] == [True, False, False]
    p.close()


def test_reply_level_stream_options_rejection(fake_server: FakeServer) -> None:
    fake_server.script(reject_stream_options(text("fine")))
    with closing(adapter("chat", fake_server.base_url)) as p:
        _, done = stream_all(p)
    assert done.text == "fine" and len(fake_server.chat_requests()) == 2


def test_wire_format_of_history_and_tools(fake_server: FakeServer) -> None:
    fake_server.script(text("done"), text("final"))
    p = adapter("chat", fake_server.base_url, temperature=0.2, max_tokens=100)
    history = [
        {"role": "system", "content": "be brief"},
        *QUESTION,
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_9", "name": "list_todos", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "call_9", "name": "list_todos", "content": '{"ok": true}'},
    ]
    stream_all(p, history, TODO_TOOLS)
    stream_all(p, history, None)
    p.close()
    first, second = (r.body for r in fake_server.chat_requests())
    assert first["messages"][2] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_9", "type": "function", "function": {"name": "list_todos", "arguments": "{}"}}]}
    assert first["messages"][3] == {"role": "tool", "tool_call_id": "call_9", "content": '{"ok": true}'}
    assert first["tools"] == [{"type": "function", "function": TODO_TOOLS[0]}]
    assert (first["temperature"], first["max_tokens"], first["model"]) == (0.2, 100, "test-model")
    assert "tools" not in second
    assert fake_server.history_errors == []


def test_text_tool_call_format(fake_server: FakeServer) -> None:
    reply = 'Let me look.<tool_call>{"name": "list_todos", "arguments": {}}</tool_call>'
    fake_server.script(text(reply, chunk_size=5))
    p = adapter("chat", fake_server.base_url, tool_call_format="text")
    parts, done = stream_all(p)
    p.close()
    assert done.text == "Let me look." and "".join(x.text for x in parts) == "Let me look."
    assert [c.name for c in done.tool_calls] == ["list_todos"]
    assert done.finish_reason == "tool_calls"
    assert "tools" not in fake_server.requests[0].body
