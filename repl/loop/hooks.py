"""Hooks: the policy a turn applies at fixed points, kept out of the loop's own steps.

The loop (``agent.py``) only moves a turn along: request, model call, tool calls, results.
What to do at each point beyond that is a hook, in the shape of pi's ``AgentLoopConfig``
(``transformContext``, ``beforeToolCall``/``afterToolCall``, ``shouldStopAfterTurn``) and
openai-agents' ``call_model_input_filter``:

- ``before_model_call``: the request about to be sent may be changed, or the turn stopped
  (``StopTurn``). Step mode pauses here (``stepping.Stepping``).
- ``before_tool_calls``: a model's calls before any runs; a hook may answer some itself
  (``Instead``): step mode's skipped and hand-made results.
- ``before_tool_call`` / ``after_tool_call``: one call just before it would run (or be asked
  for), and once it ran. Identical calls are answered from the earlier one
  (``repeats.Repeats``); the user's own commands (``repl/session/user_hooks.py``) may refuse a
  call or change its arguments (``Amend``: checked again, shown at the approval).
- ``after_guard``: a guard tripped; the note for one more, tool-free model call, or None for
  none. ``FinalAnswer`` is the default: the user still gets an answer.
- ``after_answer``: a step's answer without calls; the note for one more model call instead
  of it (the answer leaves the history), or None: it stands. ``AnswerAgain`` asks once a turn
  for an answer the provider held back as a repeat of the question (``Completed.echoed``).

A turn runs the session's hooks (``Runner.hooks``: step mode) and then the loop's own
(``Repeats``, ``FinalAnswer``, ``AnswerAgain``), each a fresh object per turn where it keeps state. The first
hook to answer a call decides it. A hook sees the turn through ``TurnView`` only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from repl.loop.events import Emit, StopReason
from repl.loop.history import History
from repl.providers.base import Completed, Message, Provider, ToolCall, ToolChoice
from tools.registry import Registry, ToolSchema
from tools.results import ToolResult

FINAL_NOTE = (
    "Stop calling tools now ({reason}). Answer the user with what you have, "
    "and say briefly what is missing."
)
# The embedded 0.5B model answered "好的，没问题。" with "好的，没问题。" and a weather result
# with the question (issue #22). Asked again after results, it is asked for an answer; after
# small talk, for a kind word back: asked only not to repeat itself, it refused ("I'm sorry, but
# I can't assist with that.") on the development half.
ECHO_NOTE = "Reply to my message above in your own words; do not repeat it."
ECHO_NOTE_TALK = "Say something kind back to me in a few words of your own."

T = TypeVar("T")
V = TypeVar("V")


@dataclass(frozen=True)
class ModelCall:
    """A model call about to be made: what it sends. ``final_note`` is the note at the end of
    the request (already in ``messages``): the tool-free call's after a guard tripped, or a
    hook's after an answer (``after_answer``), with the step's tools."""

    step: int
    messages: list[Message]
    tools: list[ToolSchema] | None
    final_note: str = ""
    choice: ToolChoice | None = None  # the tools it may use, as a router decided (``routing.Routing``)


@dataclass(frozen=True)
class Instead:
    """A call's result decided by a hook: the call does not run. ``ends`` ends the turn after
    the step's results are in: ``"user"`` (stopped in step mode) or a guard, with ``detail``."""

    result: ToolResult
    ends: StopReason | None = None
    detail: str = ""
    repeat_of: str = ""  # the id of the earlier identical call whose result this is


@dataclass(frozen=True)
class Amend:
    """A call goes on, changed by a hook (``by`` names it): ``arguments`` replace the model's
    (checked against the tool's schema again, shown at the approval, named in the result);
    ``approved``: a side effect the approval rules would ask about is allowed without asking
    (only a hook the user let approve). The later hooks see the changed call."""

    by: str
    arguments: dict[str, Any] | None = None
    approved: bool = False


class StopTurn(Exception):
    """Raised by a hook before a model call: the turn ends here (every call answered)."""


class TurnView(Protocol):
    """What a hook may see and do in the running turn."""

    number: int
    steps: int
    history: History

    @property
    def provider(self) -> Provider: ...

    @property
    def registry(self) -> Registry: ...

    @property
    def emit(self) -> Emit: ...

    def request(self, tools: list[ToolSchema] | None, final_note: str) -> list[Message]:
        """The messages a call with ``tools`` would send now (after a hook changed the history)."""
        ...

    def paused(self, ask: Callable[[V], T], view: V) -> T:
        """``ask(view)``, a person's answer: the time it takes does not count against the turn."""
        ...


class Hooks:
    """No-op defaults: a hook overrides the points it needs."""

    def before_model_call(self, turn: TurnView, call: ModelCall) -> ModelCall:
        return call

    def before_tool_calls(self, turn: TurnView, calls: list[ToolCall]) -> dict[str, Instead]:
        return {}

    def before_tool_call(self, turn: TurnView, call: ToolCall, side_effects: bool
                         ) -> Instead | Amend | None:
        return None

    def after_tool_call(self, turn: TurnView, call: ToolCall, result: ToolResult, *,
                        side_effects: bool, ran_with: str) -> None:
        """``ran_with``: the arguments the call ran with (edited at the approval, or its own)."""

    def after_guard(self, turn: TurnView, reason: StopReason, detail: str) -> str | None:
        return None

    def after_answer(self, turn: TurnView, completed: Completed) -> str | None:
        """``completed``: an answer without calls, in the history. A note: it is taken back and
        the model called once more with the note at the end of the request; None: it stands."""
        return None


class FinalAnswer(Hooks):
    """After a guard, one more model call with tools off, so the user still gets an answer."""

    def after_guard(self, turn: TurnView, reason: StopReason, detail: str) -> str | None:
        return FINAL_NOTE.format(reason=detail)


class AnswerAgain(Hooks):
    """An answer the provider held back as a repeat of the question (``Completed.echoed``, never
    shown): the model is asked once more, once a turn; the request then carries the note, so the
    answer to it is shown as it comes, an echo too."""

    def __init__(self) -> None:
        self.asked = False

    def after_answer(self, turn: TurnView, completed: Completed) -> str | None:
        if not completed.echoed or self.asked:
            return None
        self.asked = True
        before = turn.history.messages[-2:-1]  # what the held-back answer answered
        return ECHO_NOTE if before and before[0]["role"] == "tool" else ECHO_NOTE_TALK


def display_args(arguments: str) -> Any:
    """A call's arguments as shown and traced: parsed when valid JSON, else the raw text."""
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments
