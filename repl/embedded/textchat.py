"""The Chat Completions adapter with tool calls written as text (``tool_call_format = "text"``).

The hosted adapter (``repl/providers/chat.py``) sends native calls; this subclass words each
request by the profile's dialect (``dialect.py``): the tool block and the calls and results as
text (``textcalls.py``), the grammar and the start of the reply the embedded server continues,
the chat prompt for a question the router sent to no tool. Reading the reply, it takes calls
out of the text (``TextCallFilter``) and holds back an answer that may only repeat the
question (``EchoHold``); it remembers that answer (``Held``), so that the request the loop
then makes with its note, asking again, has a grammar that keeps the reply from beginning like
it. ``runtime.make_provider`` picks it for a profile with text calls.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from repl.config.settings import ProviderSettings
from repl.embedded.dialect import Dialect
from repl.embedded.textcalls import EchoHold, TextCallFilter, to_text_messages
from repl.providers.base import Completed, Message, Part, TextPart, ToolCall, ToolChoice
from repl.providers.chat import ChatAssembly, ChatProvider
from tools.registry import ToolSchema


@dataclass
class _TextAssembly(ChatAssembly):
    """What one streamed answer written as text has delivered so far."""

    text_filter: TextCallFilter = field(default_factory=lambda: TextCallFilter([]))  # calls out of the content
    text_calls: list[ToolCall] = field(default_factory=list)  # parsed by the text filter
    hold: EchoHold | None = None  # the answer held back while it may repeat the question
    start: str = ""  # the reply's start, written in the request (Dialect.reply_start): content before the first chunk's
    close: str = ""  # ... and its end, content after the last chunk's when the server ended the reply ("stop")

    def finish(self, calls: list[ToolCall]) -> str | None:
        """Calls parsed from text are ``tool_calls``, unless the reply was cut at the token
        limit: then, as with native calls, none of them may run."""
        if calls and self.finish_reason != "length":
            return "tool_calls"
        return self.finish_reason

    def before_chunk(self) -> Iterator[Part]:
        if self.start:
            start, self.start = self.start, ""
            yield from self.take(start)

    def take(self, content: str) -> Iterator[Part]:
        self.raw.append(content)
        yield from self.show(self.text_filter.feed(content))

    def end(self) -> Iterator[Part]:
        # not after a cut ("length": that call may not run), nor after a reply that wrote it (a
        # server that decoded the whole call)
        if self.close and self.finish_reason == "stop" and not self.content().rstrip().endswith(self.close):
            yield from self.take(self.close)
        rest, calls = self.text_filter.finish()
        self.text_calls = list(calls)
        yield from self.show(rest)
        if self.hold is not None:
            rest, echo = self.hold.finish()
            if self.text_calls:  # text before a call is no answer: shown as it was
                rest, echo = rest + echo, ""
            self.echo = echo
            yield from self.show(rest)

    def show(self, text: str) -> Iterator[Part]:
        """Reply text as the text filter let it out, shown unless the echo hold keeps it back."""
        if self.hold is not None:
            text = self.hold.feed(text)
        if text:
            self.shown.append(text)
            yield TextPart(text)

    def tool_calls(self) -> list[ToolCall]:
        return self.text_calls


@dataclass(frozen=True)
class Held:
    """The answer the last reply held back as an echo, and the question it repeated."""

    question: str
    echo: str


class TextChatProvider(ChatProvider):
    """A Chat Completions endpoint whose tool calls and results travel as text (see ``Provider``)."""

    TOOL_CALLS = "text"

    def __init__(self, profile: ProviderSettings | None = None, dialect: Dialect | None = None,
                 **fields: Any) -> None:
        """``dialect``: how requests are worded (the grammar, compact results, ...); by default
        the profile's own (``Dialect.of``)."""
        super().__init__(profile, **fields)
        self.dialect = dialect or Dialect.of(self.settings)
        self._text_tools: list[ToolSchema] = []  # the last tool list sent
        self._held: Held | None = None  # the last reply's, when it was held back as an echo

    def stream(self, messages: list[Message], tools: list[ToolSchema] | None,
               deadline: float | None = None, choice: ToolChoice | None = None) -> Generator[Part, None, None]:
        """See ``Provider.stream``; a reply held back as an echo is remembered for the next request."""
        held, parts = None, super().stream(messages, tools, deadline, choice)
        try:
            for part in parts:
                if isinstance(part, Completed) and part.echoed:
                    held = Held(self.dialect.echo_question(messages), part.text)
                yield part
        finally:
            parts.close()  # at once, on Ctrl-C too: it drops the HTTP stream
            self._held = held

    def _echoed(self, messages: list[Message]) -> str:
        """The echo held back of the question this request asks again (with the loop's note), or ""."""
        held = self._held
        asked = self.dialect.asked_again(messages)
        return held.echo if held is not None and asked and held.question == asked else ""

    def _prepare(self, messages: list[Message], tools: list[ToolSchema],
                 choice: ToolChoice | None = None) -> tuple[dict[str, Any], _TextAssembly]:
        # The final no-tools call keeps the last tool block in the system text:
        # the prompt prefix then matches the previous request, and the local
        # server reuses its evaluated tokens instead of re-reading ~1,500 tokens.
        # With no names to recognise, anything call-shaped stays visible text.
        self._text_tools = tools or self._text_tools
        chat = self.dialect.chats(messages, tools, choice)
        params = self._params(self._text_messages(messages, self._text_tools, chat), [])
        reply = self.dialect.reply_start(messages, tools, choice, self._echoed(messages))
        if reply.grammar:
            params["grammar"] = reply.grammar
        params["messages"] = _started(params["messages"], reply.start)
        question = self.dialect.echo_question(messages)
        return params, _TextAssembly(start=reply.start, close=reply.end,
                                     text_filter=TextCallFilter([] if chat else [t["name"] for t in tools]),
                                     hold=EchoHold(question, self.dialect.answer_lead(messages)) if question else None)

    def wire_messages(self, messages: list[Message], tools: list[ToolSchema] | None = None,
                      choice: ToolChoice | None = None) -> list[dict[str, Any]]:
        """``messages`` as this endpoint is sent them (step mode shows them): in text form with
        ``tools`` (none: the tool list last sent, as ``stream`` does)."""
        start = self.dialect.reply_start(messages, tools or [], choice, self._echoed(messages)).start
        tools = tools or self._text_tools
        return _started(self._text_messages(messages, tools, self.dialect.chats(messages, tools, choice)), start)

    def _text_messages(self, messages: list[Message], tools: list[ToolSchema], chat: bool) -> list[dict[str, Any]]:
        """The wire messages: with the tool block, or for a question the dialect answers as chat
        (``Dialect.chats``), under its chat prompt without it."""
        if chat:
            return to_text_messages(self.dialect.chat_history(messages), [], self.dialect)
        return to_text_messages(messages, tools, self.dialect)


def _started(wire: list[dict[str, Any]], start: str) -> list[dict[str, Any]]:
    """Wire messages ending with the reply's ``start`` as the assistant's message, which the
    embedded server continues (``Dialect.reply_start``); as they are without one."""
    return [*wire, {"role": "assistant", "content": start}] if start else wire
