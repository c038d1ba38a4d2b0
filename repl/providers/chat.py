"""Chat Completions adapter: neutral history in, provider-neutral parts out.

``openai`` is imported when the first request is made (it costs ~0.6 s), never
at module import, so the REPL can show its prompt first.

Sending, retries (the SDK's rules, each wait a ``Retrying`` part), reading the
stream and mapping errors are the shared skeleton's (``SdkEndpoint`` in
``endpoint.py``); this module builds the body and turns chunks into parts. A
server that refuses ``stream_options`` gets the request again at once without
them (not counted as a retry), and is remembered.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from repl.config.settings import ProviderSettings
from repl.providers.base import (
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolChoice,
    new_call_id,
    wire_field,
)
from repl.providers.endpoint import Assembly, SdkEndpoint
from tools.registry import ToolSchema


def to_wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Neutral history → Chat Completions messages."""
    wire = []
    for msg in messages:
        role = msg["role"]
        if role == "assistant":
            # "" rather than null: some servers reject null content next to tool_calls.
            out: dict[str, Any] = {"role": "assistant", "content": msg.get("content") or ""}
            calls = msg.get("tool_calls") or []
            if calls:
                out["tool_calls"] = [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["name"], "arguments": c.get("arguments") or "{}"}}
                    for c in calls
                ]
            wire.append(out)
        elif role == "tool":
            wire.append({"role": "tool", "tool_call_id": msg["tool_call_id"], "content": msg["content"]})
        else:
            wire.append({"role": role, "content": msg["content"]})
    return wire


def to_wire_tools(tools: list[ToolSchema]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {
            "name": t["name"], "description": t.get("description", ""),
            "parameters": t.get("parameters") or {"type": "object", "properties": {}}}}
        for t in tools
    ]


@dataclass
class _PendingCall:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class ChatAssembly(Assembly):
    """What one streamed answer has delivered so far."""

    raw: list[str] = field(default_factory=list)  # content as the model wrote it
    calls: dict[int, _PendingCall] = field(default_factory=dict)

    def content(self) -> str:
        return "".join(self.raw)

    def output_text(self) -> str:
        return self.content() + "".join("".join(p.arguments) for p in self.calls.values())

    def before_chunk(self) -> Iterator[Part]:
        """Parts due before a chunk is read (an adapter that words calls as text: the reply's start)."""
        return iter(())

    def take(self, content: str) -> Iterator[Part]:
        """A chunk's content, as the model wrote it: kept and shown."""
        self.raw.append(content)
        self.shown.append(content)
        yield TextPart(content)

    def add_fragment(self, frag: Any, path: str) -> None:
        call_id = wire_field(frag, "id", "a string", path)
        index = wire_field(frag, "index", "an integer", path)
        index = self._guess_index(call_id) if index is None else index
        pending = self.calls.setdefault(index, _PendingCall())
        if call_id and not pending.id:
            pending.id = call_id
        function = wire_field(frag, "function", "an object", path)
        name = wire_field(function, "name", "a string", f"{path}.function") if function else None
        if name and not pending.name:
            pending.name = name
        delta = (wire_field(function, "arguments", "a string", f"{path}.function") if function else None) or ""
        pending.arguments.append(delta)

    def _guess_index(self, call_id: str | None) -> int:
        """For servers that omit ``index``: a new id starts a new call."""
        if not self.calls:
            return 0
        last = max(self.calls)
        if call_id and self.calls[last].id not in (None, call_id):
            return last + 1
        return last

    def tool_calls(self) -> list[ToolCall]:
        return [
            ToolCall(id=p.id or new_call_id(), name=p.name,
                     arguments="".join(p.arguments) or "{}")
            for _, p in sorted(self.calls.items())
        ]


class ChatProvider(SdkEndpoint):
    """One OpenAI-compatible Chat Completions endpoint (see ``Provider``), with native tool calls;
    tool calls written as text are a subclass's (the embedded package's ``TextChatProvider``)."""

    PROMPT_FIELDS = ("messages",)
    USAGE_NAMES = ("prompt", "completion")
    TOOL_CALLS = "native"  # the profile's tool_call_format this adapter sends

    def __init__(self, profile: ProviderSettings | None = None, **fields: Any) -> None:
        super().__init__(profile, **fields)
        if self.settings.tool_call_format != self.TOOL_CALLS:
            raise ValueError(f"tool_call_format {self.settings.tool_call_format!r}: this adapter "
                             f"sends {self.TOOL_CALLS} tool calls")
        self.stream_options_supported = True  # set False once the server rejects them

    def _prepare(self, messages: list[Message], tools: list[ToolSchema],
                 choice: ToolChoice | None = None) -> tuple[dict[str, Any], ChatAssembly]:
        tools, tool_choice = self._chosen(tools, choice)
        params = self._params(to_wire_messages(messages), tools)
        if tool_choice is not None:
            params["tool_choice"] = tool_choice
        return params, ChatAssembly()

    def wire_messages(self, messages: list[Message], tools: list[ToolSchema] | None = None,
                      choice: ToolChoice | None = None) -> list[dict[str, Any]]:
        """``messages`` as this endpoint is sent them (step mode shows them)."""
        return to_wire_messages(messages)

    def _params(self, wire: list[dict[str, Any]], tools: list[ToolSchema]) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "messages": wire}
        if tools:
            params["tools"] = to_wire_tools(tools)
        return params | self._profile_fields()

    def _sent_fields(self, params: dict[str, Any]) -> dict[str, Any]:
        return {**params, "stream": True, **self._stream_options()}

    def _stream_options(self) -> dict[str, Any]:
        return {"stream_options": {"include_usage": True}} if self.stream_options_supported else {}

    def _resource(self, client: Any) -> Any:
        return client.chat.completions

    def _create(self, client: Any, params: dict[str, Any], headers: dict[str, str]) -> Any:
        import openai

        use_options = self.stream_options_supported
        try:
            # The body goes out as extra_body: the SDK's typed-parameter transform costs
            # ~0.25 ms per message (145 ms for a 600-message request); the JSON is the same.
            body = {**params, **self._stream_options()}
            model = body.pop("model")
            return self._resource(client).create(model=model, messages=[], stream=True,
                                                 extra_body=body, extra_headers=headers)
        except openai.APIStatusError as err:
            if use_options and err.status_code in (400, 422) and _mentions_stream_options(err):
                self.stream_options_supported = False  # remembered for this provider
                return self._create(client, params, headers)  # at once: not a retry
            raise

    def _parts_of(self, chunk: Any, acc: ChatAssembly) -> Iterator[Part]:
        yield from acc.before_chunk()
        acc.name_model(chunk)
        usage = wire_field(chunk, "usage", "an object", "chunk")
        if usage:
            acc.usage, acc.reported_usage = self._reported_usage(usage), usage
        for n, choice in enumerate(wire_field(chunk, "choices", "a list", "chunk") or []):
            path = f"choices[{n}]"
            if wire_field(choice, "index", "an integer", path) not in (0, None):
                continue
            finish = wire_field(choice, "finish_reason", "a string", path)
            if finish:
                acc.finish_reason = finish
            delta = wire_field(choice, "delta", "an object", path)
            if delta is None:  # some servers send a bare final choice
                continue
            reasoning = _optional_text(delta, "reasoning_content") or _optional_text(delta, "reasoning")
            if reasoning:
                acc.reasoning.append(reasoning)
                yield ReasoningPart(reasoning)
            content = wire_field(delta, "content", "a string", f"{path}.delta")
            if content:
                yield from acc.take(content)
            frags = wire_field(delta, "tool_calls", "a list", f"{path}.delta") or []
            for i, frag in enumerate(frags):
                acc.add_fragment(frag, f"{path}.delta.tool_calls[{i}]")


def _optional_text(record: Any, name: str) -> str | None:
    """A field servers add beyond the API (``reasoning_content``): its text, or None when it
    is absent or not text (an extension is not worth failing the answer for)."""
    value = record.get(name) if isinstance(record, dict) else getattr(record, name, None)
    return value if isinstance(value, str) else None


def _mentions_stream_options(err: Any) -> bool:
    return "stream_options" in f"{err.message} {err.body}".lower()
