"""Identical tool calls within one turn, in one place.

A call is identical to another when it names the same tool with the same canonical
arguments (order and spacing ignored). Two things follow from it, both here: how often
each was asked for (past ``repeat_limit`` the call is refused and the turn ends with a
final answer), and what an identical call gets instead of running (or being asked for)
again: the result of the one that ran, or the denial it met. A call is remembered by the
arguments it ran with: after an edit at the approval, the edited ones, so a later call
with the model's own arguments is asked for again.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from repl.loop.hooks import Hooks, Instead, TurnView
from repl.providers.base import ToolCall
from tools.results import ToolResult, error_of, error_result, success


def canonical(name: str, arguments: str) -> str:
    """A key under which identical calls collide (argument order and spacing ignored)."""
    try:
        return name + json.dumps(json.loads(arguments or "{}"), sort_keys=True, ensure_ascii=False)
    except (ValueError, TypeError):
        return name + arguments.strip()


@dataclass(frozen=True)
class Earlier:
    """A call that succeeded or was denied in this turn: what an identical one gets."""

    call_id: str
    step: int
    result: ToolResult
    side_effects: bool


@dataclass
class Repeats(Hooks):
    """One turn's identical calls: counted against ``limit``, answered from what ran."""

    limit: int
    _asked: Counter[str] = field(default_factory=Counter)
    _done: dict[str, Earlier] = field(default_factory=dict)

    def before_tool_call(self, turn: TurnView, call: ToolCall, side_effects: bool) -> Instead | None:
        """Past the limit: refused, and the turn ends with a final answer; identical to one that
        ran (or was denied): answered from it."""
        if (refused := self.too_many(call)) is not None:
            return Instead(refused, "repeat", f"{call.name} repeated with identical arguments")
        if (earlier := self.earlier(call)) is not None:
            return Instead(self.answer(call, earlier), repeat_of=earlier.call_id)
        return None

    def after_tool_call(self, turn: TurnView, call: ToolCall, result: ToolResult, *,
                        side_effects: bool, ran_with: str) -> None:
        self.remember(call, turn.steps, result, side_effects, ran_with)

    def too_many(self, call: ToolCall) -> ToolResult | None:
        """Counts ``call``; past the limit, the result that refuses it (the turn then ends)."""
        key = canonical(call.name, call.arguments)
        self._asked[key] += 1
        if self._asked[key] <= self.limit:
            return None
        return error_result("repeated_call", f"{call.name} was already called {self.limit} times with these arguments")

    def earlier(self, call: ToolCall) -> Earlier | None:
        """The identical call that ran (or was denied) earlier in the turn, if any."""
        return self._done.get(canonical(call.name, call.arguments))

    def remember(self, call: ToolCall, step: int, result: ToolResult, side_effects: bool,
                 arguments: str | None = None) -> None:
        """A call that succeeded or was denied answers the identical calls after it: the same
        tool with the same ``arguments`` (those that ran; default: the call's own). A side
        effect that succeeded forgets what read-only calls returned (it may have changed)."""
        error = error_of(result)
        if error is not None and error[0] != "denied":
            return
        if error is None and side_effects:
            self._done = {key: d for key, d in self._done.items() if d.side_effects}
        key = canonical(call.name, call.arguments if arguments is None else arguments)
        self._done[key] = Earlier(call.id, step, result, side_effects)

    @staticmethod
    def answer(call: ToolCall, earlier: Earlier) -> ToolResult:
        """What a call identical to ``earlier`` gets instead of running (or being asked for)."""
        error = error_of(earlier.result)
        if error is None:
            return success({
                "already_ran": f"{call.name} already ran with these arguments in this turn (step {earlier.step}) "
                               "and was not run again. Its result is below: answer the user from it.",
                "earlier_result": {k: v for k, v in earlier.result.items() if k != "ok"},
            })
        return error_result(
            "denied", f"this identical call was denied earlier in this turn ({error[1]}); it was not asked "
                      "again. Do not retry it: answer the user.")
