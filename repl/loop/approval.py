"""Approval policy for side-effecting tool calls.

The agent loop asks ``Approver.decide()`` before every side effect. The mode
and the session's rules decide without asking when they can; only mode ``ask``
with an interactive prompt reaches the user (``will_ask``: the loop makes a
tool's preview only then).

Session rules: ``a`` (always: this tool, until ``/approve`` or ``/reset`` clears
it) and ``r`` (the later side-effecting calls of this step, listed to the user
first). A destructive tool's calls are never covered by a rule: each is asked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

from repl.config.settings import ApprovalMode as Mode
from repl.loop.events import Decider

MODES: tuple[Mode, ...] = get_args(Mode)


@dataclass(frozen=True)
class PendingCall:
    """A later side-effecting call of the same step (what ``r`` would approve)."""

    call_id: str
    name: str
    arguments: Any  # as the model sent them (may be invalid)
    destructive: bool = False


@dataclass(frozen=True)
class ApprovalRequest:
    step: int
    call_id: str
    name: str
    arguments: dict[str, Any]
    # {"before": ..., "after": ...} when the tool offers one; {"fails": message} when it refuses
    # these arguments; {"unavailable": why} when it did not finish in time
    preview: dict[str, Any] | None
    index: int  # 1-based position among this step's side-effecting calls
    count: int
    destructive: bool = False  # never covered by a session rule
    later: tuple[PendingCall, ...] = ()  # the step's side-effecting calls after this one
    # the preview for other (edited) arguments; None when the tool offers none
    preview_for: Callable[[dict[str, Any]], dict[str, Any] | None] | None = field(
        default=None, compare=False, repr=False)
    amended_by: str = ""  # the hook of the user's that replaced the model's arguments with these

    def rest(self) -> tuple[PendingCall, ...]:
        """The later calls that ``r`` approves: all but the destructive ones."""
        return tuple(c for c in self.later if not c.destructive)


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
    _rest: frozenset[tuple[int, str]] = frozenset()  # (step, call id) approved with ``r``

    def will_ask(self, request: ApprovalRequest) -> bool:
        """Whether ``decide`` puts this call to a person (the loop makes a preview only then)."""
        return self.mode == "ask" and self.asker is not None and not self._by_rule(request)

    def needs_person(self, request: ApprovalRequest) -> bool:
        """Whether the rules leave this call to a person (asked, or denied when nobody can be):
        what a hook of the user's may approve instead, with ``[hooks] may_approve``."""
        return self.mode == "ask" and not self._by_rule(request)

    def _by_rule(self, request: ApprovalRequest) -> bool:
        return not request.destructive and (
            request.name in self.always or (request.step, request.call_id) in self._rest)

    def decide(
        self, request: ApprovalRequest, validate: Callable[[dict[str, Any]], str | None]
    ) -> Decision:
        if self.mode == "read-only":
            return Deny("mode", "read-only mode: side effects are not allowed")
        if self.mode == "auto":
            return Allow("mode")
        if self._by_rule(request):
            return Allow("rule")
        if self.asker is None:
            return Deny("mode", "no one to approve it (not a terminal); rerun with --yes to allow")
        choice = self.asker.ask(request, validate)
        if choice.action == "no":
            return Deny("user", choice.reason)
        if choice.action == "always" and not request.destructive:
            self.always.add(request.name)
        elif choice.action == "rest":
            self._rest = frozenset((request.step, c.call_id) for c in request.rest())
        return Allow("user", choice.arguments)

    def new_turn(self) -> None:
        self._rest = frozenset()

    def clear_rules(self) -> list[str]:
        """Forget the session's rules; the tools that had an "always" rule."""
        cleared = sorted(self.always)
        self.always.clear()
        self._rest = frozenset()
        return cleared
