"""Step mode: the loop pauses before each model call and before a model's tool calls run.

The agent loop asks an injected ``Stepper`` (the terminal implements it; the loop
never reads a key) and carries out the answer so the history stays valid
whatever it is: an edited message replaces the one about to be sent, a skipped
call gets a ``skipped_by_user`` result, a hand-made result must look like a
result, and stopping ends the turn with every call answered. Each change is an
event (``UserStep``), so the trace marks it (``edited_by_user``,
``skipped_by_user``, ``result_by_user``, ``tools_disabled_by_user``,
``stopped_by_user``).

``Stepping`` is the session's, and one of its turn hooks (``hooks.py``): it pauses before
a model call (``before_model_call``) and before a model's calls run (``before_tool_calls``)
while its stepper is set, and remembers the last request sent (also while step mode is
off), so the view before a call shows what that call adds.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from repl.loop.context import messages_tokens, tools_tokens
from repl.loop.events import Emit, StepPaused, UserStep
from repl.loop.hooks import Hooks, Instead, ModelCall, StopTurn, TurnView, display_args
from repl.providers.base import Message, ToolCall, ToolChoice
from tools.registry import ToolSchema
from tools.results import error_result

SKIPPED = "skipped_by_user"
STEP_ON = ("step mode on: the loop pauses before each model call and before tools run "
           "(/step off to stop pausing)")


@dataclass(frozen=True)
class RequestView:
    """What the next model call will send, as the user sees it before it goes."""

    step: int
    model: str
    new_messages: tuple[Any, ...]  # what it adds since the previous request, in wire form
    total_messages: int  # messages (wire items) in the whole request
    tools: tuple[str, ...]  # the tool names offered; empty when tools are off
    input_tokens: int  # estimated
    prefix_tokens: int  # of them, the prefix unchanged since the previous request (cacheable)
    last_role: str  # the history's last message ("user" or "tool"): what an edit changes
    last_content: str
    final: bool = False  # a guard tripped: this is the last call, tools are off already
    request: Any = None  # the whole body as it will be sent (``request_body``)


@dataclass(frozen=True)
class CallView:
    """A tool call the model just made, before it runs."""

    index: int  # 1-based among the answer's calls
    count: int
    call_id: str
    name: str
    arguments: Any  # parsed when valid JSON, else the raw text
    side_effects: bool  # will still ask for approval when it runs


@dataclass(frozen=True)
class Continue:
    pass


@dataclass(frozen=True)
class Edit:
    """Send ``text`` instead of the last message (a question, or a tool result as JSON)."""

    text: str


@dataclass(frozen=True)
class NoTools:
    pass


@dataclass(frozen=True)
class Stop:
    pass


@dataclass(frozen=True)
class Skip:
    pass


@dataclass(frozen=True)
class Result:
    """A result made by hand (already checked with ``check_result``)."""

    result: dict[str, Any]


BeforeCall = Continue | Edit | NoTools | Stop
ForCall = Continue | Skip | Result | Stop


class Stepper(Protocol):
    def before_model_call(self, view: RequestView) -> BeforeCall: ...

    def after_model_answer(self, calls: list[CallView]) -> list[ForCall]:
        """One choice per call, in order; a ``Stop`` anywhere stops the turn (no call runs)."""
        ...


@dataclass
class Stepping(Hooks):
    """The session's step mode: the stepper when on, and the last request sent."""

    stepper: Stepper | None = None
    _messages: list[Message] = field(default_factory=list)  # the last request, as the history has it
    _wire: list[Any] = field(default_factory=list)  # ... and in wire form
    _tools: list[ToolSchema] | None = None

    def before_model_call(self, turn: TurnView, call: ModelCall) -> ModelCall:
        """Paused while step mode is on: the call as the user leaves it (edited, tools off),
        or StopTurn. The request that goes is remembered either way."""
        if self.stepper is not None:
            call = self._pause_before_call(turn, call, self.stepper)
        self.sent(turn.provider, call.messages, call.tools, call.choice)
        return call

    def _pause_before_call(self, turn: TurnView, call: ModelCall, stepper: Stepper) -> ModelCall:
        history, step = turn.history, call.step
        while True:
            view = self.view(step, turn.provider, call.messages, call.tools, history.messages[-1],
                             final=bool(call.final_note) and not call.tools, choice=call.choice)
            choice = turn.paused(stepper.before_model_call, view)
            if isinstance(choice, Stop):
                turn.emit(UserStep(step, "stopped_by_user", detail="before the model call"))
                raise StopTurn
            if isinstance(choice, NoTools):
                if call.tools:
                    turn.emit(UserStep(step, "tools_disabled_by_user"))
                    call = replace(call, tools=None, messages=turn.request(None, call.final_note))
                return call
            if not isinstance(choice, Edit):
                return call
            before = history.replace_last(choice.text)
            turn.emit(UserStep(step, "edited_by_user", detail={"role": view.last_role, "before": before,
                                                               "after": history.messages[-1]["content"]}))
            # a router's choice was made for the question as typed: an edited one goes without it
            routed = None if view.last_role == "user" else call.choice
            call = replace(call, messages=turn.request(call.tools, call.final_note), choice=routed)

    def before_tool_calls(self, turn: TurnView, calls: list[ToolCall]) -> dict[str, Instead]:
        """Paused while step mode is on: the results the user decided (skipped, made by hand);
        a stop gives every call a skipped result and ends the turn."""
        if self.stepper is None:
            return {}
        views = [CallView(n, len(calls), c.id, c.name, display_args(c.arguments),
                          bool((tool := turn.registry.get(c.name)) and tool.side_effects))
                 for n, c in enumerate(calls, 1)]
        choices = list(turn.paused(self.stepper.after_model_answer, views))
        choices += [Skip()] * (len(calls) - len(choices))  # a stepper that answered too few: skip the rest
        if any(isinstance(c, Stop) for c in choices):
            turn.emit(UserStep(turn.steps, "stopped_by_user", detail="before the tool calls ran"))
            stopped = error_result(SKIPPED, "the user stopped the turn in step mode; the call did not run")
            return {c.id: Instead(stopped, "user") for c in calls}
        decided: dict[str, Instead] = {}
        for call, choice in zip(calls, choices, strict=False):
            if isinstance(choice, Skip):
                decided[call.id] = Instead(error_result(SKIPPED, "the user skipped this call in step mode; it did not run"))
                turn.emit(UserStep(turn.steps, "skipped_by_user", call.id, call.name))
            elif isinstance(choice, Result):
                decided[call.id] = Instead(choice.result)
                turn.emit(UserStep(turn.steps, "result_by_user", call.id, call.name, choice.result))
        return decided

    def view(self, step: int, provider: Any, messages: list[Message],
             tools: list[ToolSchema] | None, last: Message, final: bool = False,
             choice: ToolChoice | None = None) -> RequestView:
        """The view of a request of ``messages``; ``last`` is the history's last message;
        ``choice`` the tools a router allowed it."""
        wire = wire_messages(provider, messages, tools, choice)
        shared = _common(wire, self._wire)
        same = _common(messages, self._messages)
        total = messages_tokens(messages) + tools_tokens(tools)
        prefix = (tools_tokens(tools) + messages_tokens(messages[:same])
                  if same and (tools or None) == (self._tools or None) else 0)
        return RequestView(step, getattr(provider, "model", ""), tuple(wire[shared:]), len(wire),
                           tuple(t["name"] for t in tools or ()), total, min(prefix, total),
                           last["role"], last["content"], final,
                           request_body(provider, messages, tools, wire, choice))

    def sent(self, provider: Any, messages: list[Message], tools: list[ToolSchema] | None,
             choice: ToolChoice | None = None) -> None:
        self._messages, self._tools = messages, tools
        self._wire = wire_messages(provider, messages, tools, choice)


def wire_messages(provider: Any, messages: list[Message], tools: list[ToolSchema] | None,
                  choice: ToolChoice | None = None) -> list[Any]:
    """``messages`` as the provider's wire API carries them (its ``wire_messages``), else as they are."""
    convert = getattr(provider, "wire_messages", None)
    if convert is None:
        return [dict(m) for m in messages]
    try:
        return list(convert(messages, tools, choice) if choice is not None else convert(messages, tools))
    except Exception:  # noqa: BLE001 - a display aid: fall back to the neutral form
        return [dict(m) for m in messages]


def request_body(provider: Any, messages: list[Message], tools: list[ToolSchema] | None,
                 wire: list[Any], choice: ToolChoice | None = None) -> Any:
    """The body the provider will send for ``messages`` (its ``request_body``); without one, the
    model, the ``wire`` messages and the tools."""
    body = getattr(provider, "request_body", None)
    if body is not None:
        try:
            return body(messages, tools, choice) if choice is not None else body(messages, tools)
        except Exception:  # noqa: BLE001 - a display aid: fall back to what the loop knows
            pass
    return {"model": getattr(provider, "model", ""), "messages": wire, **({"tools": tools} if tools else {})}


def _common(now: list[Any], before: list[Any]) -> int:
    n = 0
    while n < min(len(now), len(before)) and now[n] == before[n]:
        n += 1
    return n


def check_result(value: Any) -> str | None:
    """Why ``value`` is not a tool result (``{"ok": true, ...}`` or ``{"ok": false, "error":
    {"type": str, "message": str}}``, only values JSON can hold), or None when it is one."""
    if not isinstance(value, dict):
        return "a result is a JSON object"
    if not isinstance(value.get("ok"), bool):
        return 'a result needs "ok": true or false'
    error = value.get("error")
    if not value["ok"] and (not isinstance(error, dict) or not isinstance(error.get("type"), str)
                            or not isinstance(error.get("message"), str)):
        return 'a failed result needs "error": {"type": "...", "message": "..."}'
    if not _finite(value):  # Python's json reads them; the trace, the journal and the model could not
        return "NaN and Infinity are not JSON: write a number, or a string"
    return None


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    if isinstance(value, list):
        return all(_finite(item) for item in value)
    return True


def check_edit(role: str, text: str) -> str | None:
    """Why ``text`` cannot replace the last message (a tool result must stay a result)."""
    if role != "tool":
        return None if text.strip() else "the message is empty"
    try:
        return check_result(json.loads(text))
    except ValueError as exc:
        return f"not valid JSON: {exc}"


@dataclass
class TimedStepper:
    """A stepper whose every pause is told (``StepPaused``: how long, before what), so the
    trace's timeline draws the time a person took as a pause, not as the model's or a tool's."""

    stepper: Stepper
    emit: Emit
    _step: int = 0  # the model call last paused before: the one whose tool calls come next

    def before_model_call(self, view: RequestView) -> BeforeCall:
        self._step = view.step
        asked = time.monotonic()
        try:
            return self.stepper.before_model_call(view)
        finally:
            self.emit(StepPaused(view.step, "model_call", round(time.monotonic() - asked, 3)))

    def after_model_answer(self, calls: list[CallView]) -> list[ForCall]:
        asked = time.monotonic()
        try:
            return self.stepper.after_model_answer(calls)
        finally:
            self.emit(StepPaused(self._step, "tools", round(time.monotonic() - asked, 3)))

