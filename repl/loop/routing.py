"""Routing: which tools a question's first model call may use, decided once before it is sent.

A router (``Router``) reads the question and the tools offered and returns a ``ToolChoice``:
none, auto, or required among some tools, with its best candidates' scores. The loop carries
the choice in the model call (``Runner.call_model``: a ``Routed`` event, then
``Provider.stream(choice=...)``), where each adapter turns it into what its API or grammar
takes. The routing is a hook (``Routing``, before the model call), so the loop itself stays the
same for a profile without a router; which profiles route is their ``router`` setting.

Only the first call of a question is routed: after tool results the model answers (or calls
again) as its adapter decides. An answer asked again within the same turn (an echo held back,
``hooks.AnswerAgain``) keeps the turn's choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from repl.loop.events import Notice
from repl.loop.history import ATTACHED
from repl.loop.hooks import Hooks, ModelCall, TurnView
from repl.providers.base import Message, ToolChoice, note_of
from tools.registry import ToolSchema


@dataclass(frozen=True)
class RouteRequest:
    """What a router decides from: the question, the one before it and the tools that answered
    it (a short follow-up, "and in Paris?", continues them), and the tools offered."""

    question: str
    before: str
    called_before: tuple[str, ...]
    tools: tuple[ToolSchema, ...]
    # what came just before the question asked something of the person (a question or a
    # call): "ok, sounds good" then answers it, and is no small talk; as a first message it
    # answers nothing. A request made by hand, without the history, counts as asked
    asked: bool = True


class Router(Protocol):
    def choose(self, request: RouteRequest) -> ToolChoice | None:
        """The choice for ``request``'s first model call; None: no decision (auto)."""
        ...


class Routing(Hooks):
    """The hook that asks a router before a question's first model call. A router that fails
    (its model missing or broken) is said once, as a notice, and the model chooses alone."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self._turn: tuple[int, ToolChoice | None] | None = None  # the choice made this turn
        self.failed = ""  # why the router could not decide ("": it can)
        self._said = False  # ... and whether the session was told

    def warm(self) -> None:
        """The router's model loaded ahead of the first question (a thread's work: never raises)."""
        warm = getattr(self.router, "warm", None)
        if warm is not None and not self.failed:
            try:
                warm()
            except Exception as exc:  # noqa: BLE001 - said at the first question, as a notice
                self.failed = _why(exc)

    def _choose(self, turn: TurnView, request: RouteRequest) -> ToolChoice | None:
        if not self.failed:
            try:
                return self.router.choose(request)
            except Exception as exc:  # noqa: BLE001 - failures are data: said once, the turn goes on
                self.failed = _why(exc)
        if not self._said:
            self._said = True
            turn.emit(Notice(f"the router could not choose tools ({self.failed}); the model chooses alone"))
        return None

    def before_model_call(self, turn: TurnView, call: ModelCall) -> ModelCall:
        if not call.tools or call.choice is not None or not call.messages:
            return call
        last = call.messages[-1]
        if last["role"] != "user":  # a step after results: the adapter's own rules
            return call
        if call.final_note:  # asked again for the question's first answer: the turn's choice
            again = last["content"] != call.final_note and self._turn and self._turn[0] == turn.number
            return replace(call, choice=self._turn[1]) if again and self._turn else call
        choice = self._choose(turn, route_request(call.messages, call.tools))
        self._turn = (turn.number, choice)
        return replace(call, choice=choice)


def route_request(messages: Sequence[Message], tools: Sequence[ToolSchema]) -> RouteRequest:
    """The question (the last user message, without the loop's note), the question before it
    and the tools the turn before called."""
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if not users:
        return RouteRequest("", "", (), tuple(tools))
    question = _typed(messages[users[-1]])
    before, called = "", []
    if len(users) > 1:
        before = _typed(messages[users[-2]])
        for message in messages[users[-2] + 1:users[-1]]:
            called += [c["name"] for c in message.get("tool_calls") or ()]
    said = next((m for m in reversed(messages[:users[-1]]) if m["role"] != "system"), None)
    asked = said is not None and (said["role"] != "assistant" or bool(said.get("tool_calls"))
                                  or _text(said).rstrip().endswith(("?", "？")))
    return RouteRequest(question, before, tuple(dict.fromkeys(called)), tuple(tools), asked)


def _typed(message: Message) -> str:
    """What the person typed: without the loop's note or the files the message attached."""
    text, note = _text(message), note_of(message)
    if note:
        text = text.removesuffix(f"\n\n{note}")
    return text.split(ATTACHED, 1)[0]


def _text(message: Message) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def _why(exc: Exception) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:200]


class FirstOf:
    """Routers asked in turn: the first that decides decides (``Router``)."""

    def __init__(self, *routers: Router) -> None:
        self.routers = routers

    def warm(self) -> None:
        for router in self.routers:
            warm = getattr(router, "warm", None)
            if warm is not None:
                warm()

    def choose(self, request: RouteRequest) -> ToolChoice | None:
        return next((c for r in self.routers if (c := r.choose(request)) is not None), None)

