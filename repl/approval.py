"""Approval policy for side-effecting tool calls.

The agent loop asks ``Approver.decide()`` before every side effect. The mode
and the session's "always" rules decide without asking when they can; only
mode ``ask`` with an interactive prompt reaches the user.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from repl.events import Decider

Mode = Literal["ask", "auto", "read-only"]
MODES: tuple[Mode, ...] = ("ask", "auto", "read-only")


@dataclass(frozen=True)
class ApprovalRequest:
    step: int
    call_id: str
    name: str
    arguments: dict[str, Any]
    preview: dict[str, Any] | None  # {"before": ..., "after": ...} when the tool offers one
    index: int  # 1-based position among this step's side-effecting calls
    count: int


@dataclass(frozen=True)
class UserChoice:
    action: Literal["yes", "no", "always", "rest"]  # rest = yes to the rest of this step
    reason: str = ""
    arguments: dict[str, Any] | None = None  # edited arguments


@dataclass(frozen=True)
class Allow:
    by: Decider
    arguments: dict[str, Any] | None = None  # replacement arguments when edited


@dataclass(frozen=True)
class Deny:
    by: Decider
    reason: str = ""


Decision = Allow | Deny


class Asker(Protocol):
    def ask(
        self, request: ApprovalRequest, validate: Callable[[dict[str, Any]], str | None]
    ) -> UserChoice: ...


@dataclass
class Approver:
    """Mode + session rules + an optional interactive asker.

    With no asker (no terminal), mode ``ask`` denies: side effects need a
    person or an explicit ``--yes``.
    """

    mode: Mode = "ask"
    asker: Asker | None = None
    always: set[str] = field(default_factory=set)
    _rest_of_step: int | None = None

    def decide(
        self, request: ApprovalRequest, validate: Callable[[dict[str, Any]], str | None]
    ) -> Decision:
        if self.mode == "read-only":
            return Deny("mode", "read-only mode: side effects are not allowed")
        if self.mode == "auto":
            return Allow("mode")
        if request.name in self.always:
            return Allow("rule")
        if self._rest_of_step == request.step:
            return Allow("rule")
        if self.asker is None:
            return Deny("mode", "no one to approve it (not a terminal); rerun with --yes to allow")
        choice = self.asker.ask(request, validate)
        if choice.action == "no":
            return Deny("user", choice.reason)
        if choice.action == "always":
            self.always.add(request.name)
        elif choice.action == "rest":
            self._rest_of_step = request.step
        return Allow("user", choice.arguments)

    def new_turn(self) -> None:
        self._rest_of_step = None
