"""``POST /v1/responses`` for the scripted server: the Responses API, streaming or not.

Every ``FakeServer`` serves it (it registers ``handle_responses``); the same
scripted ``Reply`` objects drive both wire APIs, so one script works on either:

    with FakeServer() as server:
        server.script(tool_calls(call("list_todos", {})), text("done"))
        ...client.responses.create(model=..., input=[...], stream=True)...

The stream follows the real API's event shapes: ``response.created``,
``response.in_progress``, then per output item ``response.output_item.added``,
its deltas (``response.output_text.delta`` / ``response.function_call_arguments.delta``,
split by ``chunk_size``), ``...done`` events and ``response.output_item.done``,
and finally a terminal event chosen by ``Reply.finish_reason``:

- ``AUTO``, ``"stop"``, ``"tool_calls"``: ``response.completed`` with usage
  (``Reply.usage`` may be ``(input, output, cached)`` or ``(input, output, cached, reasoning)``);
- ``"length"``: ``response.incomplete`` (reason ``max_output_tokens``);
- ``"failed"``: ``response.failed`` carrying ``Reply.error_message``;
- ``"error"``: an ``error`` event carrying ``Reply.error_message``;
- ``None``: no terminal event (the stream just ends).

Status faults, Retry-After, cut streams and delays work as on the chat route.
Each request's input is checked (``check_input``); violations are added to
``server.history_errors`` and answered with HTTP 400, like the chat route.
``install(server, interleave=True)`` interleaves the argument deltas of
several calls (real servers send items one after another; clients must not
depend on it).
"""

from __future__ import annotations

import json
import time
from functools import partial
from itertools import chain, zip_longest
from typing import Any

from tests.fakeserver import (
    API_PATHS,
    Call,
    Exchange,
    FakeServer,
    RecordedRequest,
    Reply,
    _split,
    error_body,
    raw_sse,
    usage_numbers,
)

PATH = API_PATHS["responses"]
Event = dict[str, Any]


def install(server: FakeServer, *, interleave: bool = False) -> FakeServer:
    server.routes[("POST", PATH)] = partial(handle_responses, interleave=interleave)
    return server


# ---- the request check ------------------------------------------------------

def check_input(items: Any) -> list[str]:
    """Responses input rules; one string per violation."""
    if isinstance(items, str):
        return []
    errors: list[str] = []
    pending: set[str] = set()
    answered: set[str] = set()
    prev_role = None
    for i, item in enumerate(items if isinstance(items, list) else []):
        kind = item.get("type") or ("message" if "role" in item else None)
        cid = item.get("call_id")
        if kind == "function_call":
            if not cid or cid in pending or cid in answered or not item.get("name"):
                errors.append(f"item {i}: function_call without a name or a unique call_id ({cid!r})")
            pending.add(cid)
            prev_role = "assistant"
        elif kind == "function_call_output":
            if cid in pending:
                pending.discard(cid)
                answered.add(cid)
            else:
                what = "second output" if cid in answered else "output without its call"
                errors.append(f"item {i}: function_call_output {what} (call_id={cid!r})")
            prev_role = "tool"
        elif kind == "message":
            role = item.get("role")
            if pending and role != "assistant":
                errors.append(f"item {i} ({role}): unanswered function calls {sorted(pending)}")
                pending.clear()
            if role == "user" and prev_role == "user":
                errors.append(f"item {i}: two user messages side by side")
            prev_role = role
        elif kind != "reasoning":
            errors.append(f"item {i}: unknown input item type {kind!r}")
    if pending:
        errors.append(f"end of input: unanswered function calls {sorted(pending)}")
    return errors


def check_tools(tools: Any) -> list[str]:
    """Function tools must be flat: ``{"type": "function", "name", "parameters", ...}``."""
    return [f"tools[{i}]: missing 'name' (a Chat Completions tool?)"
            for i, t in enumerate(tools or []) if t.get("type") == "function" and not t.get("name")]


# ---- building the answer ----------------------------------------------------

def usage_json(reply: Reply, body: dict[str, Any], fake: FakeServer | None = None) -> dict[str, Any] | None:
    if (numbers := usage_numbers(reply, body, fake)) is None:
        return None
    prompt, completion, cached, reasoning = numbers
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": prompt + completion}


def message_item(text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
    return {"id": "msg_fake", "type": "message", "role": "assistant", "status": status, "content": content}


def call_items(fake: FakeServer, calls: tuple[Call, ...]) -> list[dict[str, Any]]:
    items = []
    for n, c in enumerate(calls, 1):
        item: dict[str, Any] = {"id": f"fc_fake_{n}", "type": "function_call", "status": "completed",
                                "name": c.name, "arguments": c.arguments}
        if (cid := fake.call_id_of(c)) is not None:
            item["call_id"] = cid
        items.append(item)
    return items


def response_object(fake: FakeServer, body: dict[str, Any], status: str,
                    output: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": "resp_fake", "object": "response", "created_at": int(time.time()), "status": status,
            "model": body.get("model") or fake.model, "output": output, "usage": usage,
            "error": None, "incomplete_details": None, "instructions": body.get("instructions"),
            "tools": body.get("tools") or [], "parallel_tool_calls": True, "tool_choice": "auto",
            "store": bool(body.get("store", True)), "metadata": {}}


def _text_events(reply: Reply, index: int) -> list[Event]:
    ids = {"item_id": "msg_fake", "output_index": index}
    part = {**ids, "content_index": 0}
    events: list[Event] = [
        {"type": "response.output_item.added", "output_index": index, "item": message_item("", "in_progress")},
        {"type": "response.content_part.added", **part, "part": {"type": "output_text", "text": "", "annotations": []}},
    ]
    events += [{"type": "response.output_text.delta", **part, "delta": piece, "logprobs": []}
               for piece in _split(reply.text, reply.chunk_size)]
    events += [
        {"type": "response.output_text.done", **part, "text": reply.text, "logprobs": []},
        {"type": "response.content_part.done", **part, "part": message_item(reply.text)["content"][0]},
        {"type": "response.output_item.done", "output_index": index, "item": message_item(reply.text)},
    ]
    return events


def _call_events(item: dict[str, Any], index: int, size: int) -> tuple[Event, list[Event], list[Event]]:
    """(added, argument deltas, done events) of one function call item."""
    ids = {"item_id": item["id"], "output_index": index}
    added = {"type": "response.output_item.added", "output_index": index,
             "item": {**item, "arguments": "", "status": "in_progress"}}
    deltas = [{"type": "response.function_call_arguments.delta", **ids, "delta": piece}
              for piece in _split(item["arguments"], size) if piece]
    done = [{"type": "response.function_call_arguments.done", **ids, "name": item["name"],
             "arguments": item["arguments"]},
            {"type": "response.output_item.done", "output_index": index, "item": item}]
    return added, deltas, done


def _terminal(fake: FakeServer, reply: Reply, body: dict[str, Any], output: list[dict[str, Any]]) -> Event | None:
    finish = reply.finish_reason
    if finish is None:
        return None
    message = reply.error_message or "The model failed to generate a response."
    if finish == "error":
        return {"type": "error", "code": "server_error", "message": message, "param": None}
    usage = usage_json(reply, body, fake)
    if finish == "failed":
        failed = response_object(fake, body, "failed", output, usage)
        failed["error"] = {"code": "server_error", "message": message}
        return {"type": "response.failed", "response": failed}
    if finish == "length":
        cut = response_object(fake, body, "incomplete", output, usage)
        cut["incomplete_details"] = {"reason": "max_output_tokens"}
        return {"type": "response.incomplete", "response": cut}
    return {"type": "response.completed", "response": response_object(fake, body, "completed", output, usage)}


def response_events(fake: FakeServer, reply: Reply, body: dict[str, Any],
                    interleave: bool = False) -> list[tuple[str, str]]:
    started = response_object(fake, body, "in_progress", [])
    events: list[Event] = [{"type": "response.created", "response": started},
                           {"type": "response.in_progress", "response": started}]
    output: list[dict[str, Any]] = []
    if reply.text:
        events += _text_events(reply, 0)
        output.append(message_item(reply.text))
    items = call_items(fake, reply.calls)
    per_call = [_call_events(item, len(output) + n, reply.chunk_size) for n, item in enumerate(items)]
    output += items
    if interleave:
        events += [added for added, _, _ in per_call]
        events += [d for d in chain.from_iterable(zip_longest(*(d for _, d, _ in per_call))) if d]
        events += list(chain.from_iterable(done for _, _, done in per_call))
    else:
        events += list(chain.from_iterable([added, *deltas, *done] for added, deltas, done in per_call))
    if (last := _terminal(fake, reply, body, output)) is not None:
        events.append(last)
    return [(e["type"], json.dumps({**e, "sequence_number": n}, ensure_ascii=False))
            for n, e in enumerate(events)]


def handle_responses(fake: FakeServer, ex: Exchange, req: RecordedRequest, *, interleave: bool = False) -> None:
    body = req.body if isinstance(req.body, dict) else {}
    history = check_input(body.get("input")) if fake.check_history else []
    errors = history + check_tools(body.get("tools"))
    if errors:
        fake.history_errors.extend(history)
        ex.send_json(400, error_body("invalid request: " + "; ".join(errors), "invalid_request_error"))
        return
    reply = fake.next_reply(body)
    if ex.send_fault(reply, str(body.get("model"))):
        return
    if body.get("stream"):
        raw = reply.raw_events is not None
        ex.stream(raw_sse(reply, named=True) if raw else response_events(fake, reply, body, interleave), reply)
        return
    time.sleep(reply.first_byte_delay)
    output = ([message_item(reply.text)] if reply.text else []) + call_items(fake, reply.calls)
    ex.send_json(200, response_object(fake, body, "completed", output, usage_json(reply, body, fake)))
