"""Responses API adapter (``api = "responses"``): neutral history in, neutral parts out.

glassloop keeps the conversation itself and sends it whole on every request
(``store=False``, no ``previous_response_id``), so any server offering
``/v1/responses`` works and nothing is left stored on the server. Neutral
messages become input items: the leading system prompt becomes
``instructions``; user and assistant text become messages; every assistant
tool call becomes a ``function_call`` item and every tool result a
``function_call_output`` item with the same ``call_id``.

Tools go out in the Responses format (top-level ``name``/``parameters``). The
API treats ``strict`` as on unless told otherwise, and strict mode rejects
schemas with optional properties, so ``strict`` is set only for schemas that
already meet its rules (see ``is_strict_compatible``); the schema is never
rewritten.

As in ``chat.py``, ``openai`` is imported on the first request; sending,
retrying, reading the stream and mapping errors are ``SdkEndpoint``'s
(``repl/providers/endpoint.py``): this module only translates the wire format.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from repl.config.settings import ProviderSettings
from repl.providers.base import (
    BadShape,
    Message,
    Part,
    ProviderError,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolChoice,
    new_call_id,
    wire_field,
)
from repl.providers.endpoint import Assembly, SdkEndpoint
from repl.providers.errors import make_error
from tools.registry import ToolSchema

TERMINAL = ("response.completed", "response.incomplete", "response.failed", "error")
_NOT_STRICT_KEYWORDS = ("default",)  # accepted by plain JSON Schema, refused in strict mode


def to_input_items(messages: list[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """Neutral history → (instructions, input items)."""
    leading = []
    for msg in messages:
        if msg["role"] != "system":
            break
        leading.append(msg["content"])
    items: list[dict[str, Any]] = []
    for msg in messages[len(leading):]:
        role = msg["role"]
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": msg["tool_call_id"],
                          "output": msg["content"]})
        elif role == "assistant":
            if msg.get("content") or not msg.get("tool_calls"):  # an empty answer still separates two questions
                items.append({"type": "message", "role": "assistant", "content": msg.get("content") or ""})
            items += [{"type": "function_call", "call_id": c["id"], "name": c["name"],
                       "arguments": c.get("arguments") or "{}"}
                      for c in msg.get("tool_calls") or []]
        else:  # user, or a system note later in the conversation
            items.append({"type": "message", "role": role, "content": msg["content"]})
    return ("\n\n".join(leading) if leading else None), items


def is_strict_compatible(schema: Any) -> bool:
    """True when strict mode accepts the schema as it is.

    Every object lists all its properties in ``required`` and sets
    ``additionalProperties: false``, at every depth; no keyword strict mode
    refuses (``default``) appears.
    """
    if isinstance(schema, list):
        return all(is_strict_compatible(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if any(k in schema for k in _NOT_STRICT_KEYWORDS):
        return False
    props = schema.get("properties")
    if schema.get("type") == "object" or props is not None:
        if schema.get("additionalProperties") is not False:
            return False
        if set(props or {}) != set(schema.get("required") or []):
            return False
    nested = [*(props or {}).values(), schema.get("items"), *(schema.get("$defs") or {}).values(),
              *(schema.get("anyOf") or [])]
    return all(is_strict_compatible(s) for s in nested if s is not None)


def to_wire_tools(tools: list[ToolSchema]) -> list[dict[str, Any]]:
    wire = []
    for t in tools:
        params = t.get("parameters") or {"type": "object", "properties": {}}
        wire.append({"type": "function", "name": t["name"], "description": t.get("description", ""),
                     "parameters": params, "strict": is_strict_compatible(params)})
    return wire


@dataclass
class _PendingCall:
    index: int
    call_id: str
    name: str
    arguments: list[str] = field(default_factory=list)
    final: str | None = None  # the whole arguments from the item's done event

    def to_call(self) -> ToolCall:
        return ToolCall(self.call_id, self.name, self.final or "".join(self.arguments) or "{}")


@dataclass
class _Assembly(Assembly):
    """What one streamed response has delivered so far."""

    streamed_items: set[str] = field(default_factory=set)  # message items that sent deltas
    calls: dict[str, _PendingCall] = field(default_factory=dict)  # by item id

    def tool_calls(self) -> list[ToolCall]:
        return [p.to_call() for p in sorted(self.calls.values(), key=lambda p: p.index)]

    def output_text(self) -> str:
        return self.text + "".join(c.arguments for c in self.tool_calls())


class ResponsesProvider(SdkEndpoint):
    """One endpoint spoken to through ``/v1/responses`` (see ``Provider``)."""

    PROMPT_FIELDS = ("instructions", "input")
    USAGE_NAMES = ("input", "output")
    MAX_TOKENS_FIELD = "max_output_tokens"

    def __init__(self, profile: ProviderSettings | None = None, **fields: Any) -> None:
        super().__init__(profile, **fields)
        if self.settings.tool_call_format != "native":
            raise ValueError("the Responses API needs tool_call_format = 'native'")

    def _prepare(self, messages: list[Message], tools: list[ToolSchema],
                 choice: ToolChoice | None = None) -> tuple[dict[str, Any], _Assembly]:
        tools, tool_choice = self._chosen(tools, choice)
        params = self.request_params(messages, tools)
        if tool_choice is not None:
            params["tool_choice"] = tool_choice
        return params, _Assembly()

    def _named_choice(self, name: str) -> Any:
        return {"type": "function", "name": name}

    def wire_messages(self, messages: list[Message], tools: list[ToolSchema] | None = None,
                      choice: ToolChoice | None = None) -> list[dict[str, Any]]:
        """``messages`` as this API carries them (step mode shows them): the instructions, then the input items."""
        instructions, items = to_input_items(messages)
        return ([{"instructions": instructions}] if instructions is not None else []) + items

    def request_params(
        self, messages: list[Message], tools: list[ToolSchema] | None
    ) -> dict[str, Any]:
        """The body sent for ``messages`` (without ``stream``)."""
        instructions, items = to_input_items(messages)
        params: dict[str, Any] = {"model": self.model, "input": items, "store": False}
        if instructions is not None:
            params["instructions"] = instructions
        if tools:
            params["tools"] = to_wire_tools(tools)
        return params | self._profile_fields()

    def _resource(self, client: Any) -> Any:
        return client.responses

    def _create(self, client: Any, params: dict[str, Any], headers: dict[str, str]) -> Any:
        # extra_body skips the SDK's per-item parameter transform (see chat.py)
        body = dict(params)
        return self._resource(client).create(model=body.pop("model"), stream=True, extra_body=body,
                                             extra_headers=headers)

    def _parts_of(self, event: Any, acc: _Assembly) -> Iterator[Part]:
        kind = wire_field(event, "type", "a string", "event")
        acc.ended = kind in TERMINAL
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            delta = wire_field(event, "delta", "a string", kind)
            if delta:
                acc.streamed_items.add(wire_field(event, "item_id", "a string", kind))
                acc.shown.append(delta)
                yield TextPart(delta)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            delta = wire_field(event, "delta", "a string", kind)
            if delta:
                acc.reasoning.append(delta)
                yield ReasoningPart(delta)
        elif kind == "response.function_call_arguments.delta":
            pending = acc.calls.get(wire_field(event, "item_id", "a string", kind))
            delta = wire_field(event, "delta", "a string", kind) or ""
            if pending is not None:
                pending.arguments.append(delta)
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = wire_field(event, "item", "an object", kind)
            if item is None:
                raise BadShape(f"{kind}.item is null, expected an object")
            yield from self._item_event(item, kind.endswith(".done"), acc, f"{kind}.item")
        elif kind in ("response.completed", "response.incomplete"):
            response = wire_field(event, "response", "an object", kind)
            if response is None:
                raise BadShape(f"{kind}.response is null, expected an object")
            yield from self._finish(response, acc)
        elif kind in ("response.failed", "error"):
            raise self._stream_failure(kind, event, acc)

    def _item_event(self, item: Any, done: bool, acc: _Assembly, path: str) -> Iterator[Part]:
        item_type = wire_field(item, "type", "a string", path)
        call_id = wire_field(item, "call_id", "a string", path)
        item_id = wire_field(item, "id", "a string", path) or call_id or ""
        if item_type == "function_call":
            name = wire_field(item, "name", "a string", path) or ""
            arguments = wire_field(item, "arguments", "a string", path)
            pending = acc.calls.get(item_id)
            if pending is None:
                call_id = call_id or new_call_id()
                pending = acc.calls[item_id] = _PendingCall(len(acc.calls), call_id, name)
            if done and arguments:
                pending.final = arguments
        elif item_type == "message" and done and item_id not in acc.streamed_items:
            whole = _message_text(item, path)
            if not item_id and acc.shown:
                return  # no id to tell whether its text was streamed: assume it was
            acc.streamed_items.add(item_id)  # a server that sent the text only whole
            if whole:
                acc.shown.append(whole)
                yield TextPart(whole)

    def _finish(self, response: Any, acc: _Assembly) -> Iterator[Part]:
        """The final response: pick up items the deltas did not deliver, then the reason."""
        for n, item in enumerate(wire_field(response, "output", "a list", "response") or []):
            yield from self._item_event(item, True, acc, f"response.output[{n}]")
        acc.name_model(response)
        usage = wire_field(response, "usage", "an object", "response")
        acc.usage, acc.reported_usage = (self._reported_usage(usage), usage) if usage else (None, None)
        details = wire_field(response, "incomplete_details", "an object", "response")
        if wire_field(response, "status", "a string", "response") == "incomplete" or details is not None:
            reason = wire_field(details, "reason", "a string", "response.incomplete_details") if details else None
            acc.finish_reason = "length" if reason == "max_output_tokens" else (reason or "incomplete")
        else:
            acc.finish_reason = "tool_calls" if acc.calls else "stop"

    def _stream_failure(self, kind: str, event: Any, acc: _Assembly) -> ProviderError:
        """The failure the server reported; a malformed report still ends the turn as this error."""
        error = event if kind == "error" else getattr(getattr(event, "response", None), "error", None)
        detail = getattr(error, "message", None)
        detail = detail if isinstance(detail, str) and detail else "the response failed"
        msg = f"{self.name}: error reported during the answer: {detail}"
        return make_error("server", msg, self._context(), acc.text)


def _message_text(item: Any, path: str) -> str:
    parts = wire_field(item, "content", "a list", path) or []
    texts = []
    for n, part in enumerate(parts):
        where = f"{path}.content[{n}]"
        texts.append(wire_field(part, "text", "a string", where) or wire_field(part, "refusal", "a string", where) or "")
    return "".join(texts)
