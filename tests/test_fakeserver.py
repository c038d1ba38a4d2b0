"""The scripted server itself, spoken to with plain httpx."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.fakeserver import (
    Exchange,
    FakeServer,
    RecordedRequest,
    call,
    check_history,
    cut_stream_after,
    fault_status,
    reject_stream_options,
    text,
    tool_calls,
)

USER = [{"role": "user", "content": "hi"}]


def sse_chunks(base_url: str, body: dict) -> list[dict]:
    """POST a streaming chat request; the parsed data events up to [DONE]."""
    chunks = []
    with httpx.stream("POST", f"{base_url}/chat/completions", json=body, timeout=5) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line.startswith("data: "):
                data = line.removeprefix("data: ")
                if data == "[DONE]":
                    return chunks
                chunks.append(json.loads(data))
    raise AssertionError("stream ended without [DONE]")


def streamed_text(chunks: list[dict]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def test_text_streams_in_chunks_with_usage_only_when_asked(fake_server: FakeServer) -> None:
    fake_server.script(text("hello world", chunk_size=3, usage=(11, 4, 2)), text("again"))
    body = {"model": "m", "messages": USER, "stream": True, "stream_options": {"include_usage": True}}
    chunks = sse_chunks(fake_server.base_url, body)
    assert streamed_text(chunks) == "hello world"
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:5]] == ["hel", "lo ", "wor", "ld"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] == 2
    plain = sse_chunks(fake_server.base_url, {"model": "m", "messages": USER, "stream": True})
    assert streamed_text(plain) == "again"
    assert not any("usage" in c for c in plain)


def test_tool_calls_are_split_and_interleaved(fake_server: FakeServer) -> None:
    fake_server.script(tool_calls(call("list_todos", {}), call("get_todo", {"todo_id": "todo-002"}),
                                  chunk_size=3))
    chunks = sse_chunks(fake_server.base_url, {"model": "m", "messages": USER, "stream": True})
    frags = [f for c in chunks for f in c["choices"][0]["delta"].get("tool_calls") or []]
    assert [f["index"] for f in frags[:4]] == [0, 1, 0, 1]  # interleaved
    args = {0: "", 1: ""}
    for f in frags:
        args[f["index"]] += f["function"].get("arguments") or ""
    assert json.loads(args[1]) == {"todo_id": "todo-002"} and args[0] == "{}"
    assert [f["id"] for f in frags if "id" in f] == ["call_1", "call_2"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_non_streaming_completion_and_models(fake_server: FakeServer) -> None:
    fake_server.script(tool_calls(call("add", {"a": 1}), text="sure"))
    resp = httpx.post(f"{fake_server.base_url}/chat/completions",
                      json={"model": "m", "messages": USER}, timeout=5).json()
    message = resp["choices"][0]["message"]
    assert message["content"] == "sure"
    assert message["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 1}'}
    models = httpx.get(f"{fake_server.base_url}/models", timeout=5).json()
    assert models["data"][0]["id"] == "fake-model"


def test_dynamic_reply_sees_the_request_and_script_exhaustion(fake_server: FakeServer) -> None:
    fake_server.script(lambda body: text(f"you said {body['messages'][-1]['content']}"))
    chunks = sse_chunks(fake_server.base_url, {"model": "m", "messages": USER, "stream": True})
    assert streamed_text(chunks) == "you said hi"
    chunks = sse_chunks(fake_server.base_url, {"model": "m", "messages": USER, "stream": True})
    assert streamed_text(chunks) == "(script exhausted)"
    assert fake_server.unscripted == 1


def test_fault_status_with_retry_after(fake_server: FakeServer) -> None:
    fake_server.script(fault_status(429, retry_after=0.5))
    resp = httpx.post(f"{fake_server.base_url}/chat/completions", json={"model": "m", "messages": USER})
    assert resp.status_code == 429
    assert resp.headers["retry-after"] == "0.5"
    assert resp.json()["error"]["code"] == "rate_limit_exceeded"


def test_reject_stream_options_keeps_the_reply_for_the_retry(fake_server: FakeServer) -> None:
    fake_server.script(reject_stream_options(text("fine")))
    body = {"model": "m", "messages": USER, "stream": True, "stream_options": {"include_usage": True}}
    resp = httpx.post(f"{fake_server.base_url}/chat/completions", json=body)
    assert resp.status_code == 400 and "stream_options" in resp.text
    del body["stream_options"]
    assert streamed_text(sse_chunks(fake_server.base_url, body)) == "fine"


def test_cut_stream_breaks_the_chunked_body(fake_server: FakeServer) -> None:
    fake_server.script(cut_stream_after(2))
    body = {"model": "m", "messages": USER, "stream": True}
    with pytest.raises(httpx.RemoteProtocolError):
        sse_chunks(fake_server.base_url, body)


def test_requests_are_recorded_with_headers(fake_server: FakeServer) -> None:
    fake_server.api_key = "sk-good"
    headers = {"Authorization": "Bearer sk-bad"}
    resp = httpx.post(f"{fake_server.base_url}/chat/completions", headers=headers,
                      json={"model": "m", "messages": USER})
    assert resp.status_code == 401
    recorded = fake_server.requests[-1]
    assert recorded.headers["authorization"] == "Bearer sk-bad"
    assert recorded.body["model"] == "m"


def test_routes_can_be_added(fake_server: FakeServer) -> None:
    def echo(fake: FakeServer, ex: Exchange, req: RecordedRequest) -> None:
        ex.stream([("response.created", json.dumps(req.body))], fake.next_reply(req.body))

    fake_server.routes[("POST", "/v1/responses")] = echo
    with httpx.stream("POST", f"{fake_server.base_url}/responses", json={"x": 1}) as resp:
        body = resp.read().decode()
    assert body == 'event: response.created\ndata: {"x": 1}\n\n'


ASSISTANT_CALL = {"role": "assistant", "content": "",
                  "tool_calls": [{"id": "c1", "type": "function",
                                  "function": {"name": "f", "arguments": "{}"}}]}
TOOL_RESULT = {"role": "tool", "tool_call_id": "c1", "content": "{}"}


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (USER + [ASSISTANT_CALL, TOOL_RESULT, {"role": "assistant", "content": "ok"}], None),
        (USER + [ASSISTANT_CALL] + USER, "unanswered"),
        (USER + [ASSISTANT_CALL], "unanswered"),
        (USER + [TOOL_RESULT], "without a call"),
        (USER + [ASSISTANT_CALL, TOOL_RESULT, TOOL_RESULT], "second result"),
        (USER + USER, "two user messages"),
        (USER + [{"role": "assistant", "content": None}], "without content"),
    ],
)
def test_check_history(messages: list[dict], expected: str | None) -> None:
    errors = check_history(messages)
    if expected is None:
        assert errors == []
    else:
        assert len(errors) == 1 and expected in errors[0]


def test_history_violation_is_recorded_and_rejected(fake_server: FakeServer) -> None:
    fake_server.script(text("never sent"))
    body = {"model": "m", "messages": USER + [ASSISTANT_CALL] + USER}
    resp = httpx.post(f"{fake_server.base_url}/chat/completions", json=body)
    assert resp.status_code == 400 and "unanswered" in resp.text
    assert len(fake_server.history_errors) == 1


def test_standalone_process_serves_a_script_file(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        {"text": "from file", "chunk_size": 4},
        {"tool_calls": [{"name": "list_todos", "arguments": {}}], "usage": [5, 1, 0]},
    ]))
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakeserver", "--script", str(script)],
                            cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        body = {"model": "m", "messages": USER, "stream": True}
        assert streamed_text(sse_chunks(base_url, body)) == "from file"
        chunks = sse_chunks(base_url, body)
        assert chunks[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "list_todos"
    finally:
        proc.terminate()
        proc.wait(timeout=5)
