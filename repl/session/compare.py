"""``/compare``: the last question run again on other models, one after the other.

Each run works on a copy of the conversation before that question, with side
effects denied (a dry run: a side-effecting call gets a ``denied`` result and
the model carries on), no step mode, no journal and no trace: nothing of the
comparison enters the conversation. What each run did comes back as an
``Attempt`` for the side-by-side table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from repl.config.load import Settings, with_overrides
from repl.loop.agent import run_turn
from repl.loop.approval import ApprovalRequest, Deny
from repl.loop.context import ContextWindow
from repl.loop.cost import Cost, price_for
from repl.loop.events import (
    ErrorEvent,
    EventLog,
    ModelUsage,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)
from repl.loop.history import History
from repl.providers.base import ProviderError
from repl.session.runtime import make_provider
from tools.registry import Registry

DRY_RUN = "a dry run (/compare): side effects are not carried out"


@dataclass
class Attempt:
    model: str
    finished: TurnFinished | None = None
    calls: list[tuple[str, Any, str]] = field(default_factory=list)  # (name, arguments, error type or "")
    cost: Cost = field(default_factory=Cost)
    error: str = ""  # why the model could not run, or the error that ended its turn


class _DryRun:
    """The approver of a comparison: every side effect denied, nobody asked."""

    def new_turn(self) -> None:
        pass

    def will_ask(self, request: ApprovalRequest) -> bool:
        return False

    def decide(self, request: ApprovalRequest, validate: Callable[[dict[str, Any]], str | None]) -> Deny:
        return Deny("mode", DRY_RUN)


def last_question(history: History) -> tuple[list[dict[str, Any]], str] | None:
    """The conversation before the last question, and the question; None without one."""
    starts = history.turn_starts()
    if not starts:
        return None
    return history.messages[: starts[-1]], history.messages[starts[-1]]["content"]


def compare(settings: Settings, registry: Registry, history: History, models: list[str],
            started: Callable[[int, str], None] = lambda n, model: None) -> list[Attempt]:
    """The last question on each of ``models`` in turn (``started`` is told before each).
    Ctrl-C during a run ends the comparison with what ran so far. ConfigError for a bad name."""
    found = last_question(history)
    if found is None:
        return []
    before, question = found
    attempts = []
    for n, model in enumerate(models, 1):
        attempt = Attempt(model)
        attempts.append(attempt)
        started(n, model)
        run_settings = with_overrides(settings, model=model)
        try:
            provider = make_provider(run_settings.active, run_settings)
        except ProviderError as exc:
            attempt.error = exc.message
            continue
        log = EventLog()
        try:
            attempt.finished = run_turn(
                History(history.system_prompt, [dict(m) for m in before]), question, provider=provider,
                registry=registry, approver=_DryRun(), limits=run_settings.guards, emit=log,  # type: ignore[arg-type]
                turn=n, context=ContextWindow())
        finally:
            provider.close()
        price = price_for(run_settings)
        attempt.cost = sum((Cost.of(u.usage, price) for u in log.of(ModelUsage)), Cost())
        outcome = {f.call_id: f.error_type or "error" for f in log.of(ToolCallFinished) if not f.ok}
        attempt.calls = [(c.name, c.arguments, outcome.get(c.call_id, "")) for c in log.of(ToolCallStarted)]
        attempt.error = next((e.message for e in log.of(ErrorEvent)), "")
        if attempt.finished.stopped_by == "interrupted":
            break
    return attempts
