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
from repl.loop.cost import Cost, price_for
from repl.loop.events import (
    ErrorEvent,
    Event,
    EventLog,
    ModelUsage,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)
from repl.loop.history import History
from repl.session.core import Door, SessionCore
from repl.session.seams import Unattended
from tools.registry import Registry

# A comparison's run: the session core with side effects denied, no journal, no trace; the
# tools are the session's own (loaded already: nothing to wait for).
COMPARE = Door("compare", journal=False, trace=False, dry_run=True, user_tools_wait_s=0)


@dataclass
class Attempt:
    model: str
    finished: TurnFinished | None = None
    calls: list[tuple[str, Any, str]] = field(default_factory=list)  # (name, arguments, error type or "")
    cost: Cost = field(default_factory=Cost)
    error: str = ""  # why the model could not run, or the error that ended its turn


class _Quiet(Unattended):
    """The surface of a comparison's run: its events to a log, nothing shown (a provider that
    cannot start is the attempt's error: ``SessionCore.provider_failure``)."""

    def __init__(self, log: EventLog) -> None:
        self.log = log

    def render(self, event: Event) -> None:
        self.log(event)

    def info(self, text: str) -> None:
        pass

    def error(self, text: str) -> None:
        pass


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
        log = EventLog()
        core = SessionCore(run_settings, _Quiet(log), interactive=False, door=COMPARE, shared_registry=registry,
                           history=History(history.system_prompt, [dict(m) for m in before]))
        try:
            attempt.finished = core.run_turn(question)
        finally:
            core.close()
        if attempt.finished is None:  # no model to run it on
            attempt.error = core.provider_failure.message if core.provider_failure else "cancelled"
            continue
        price = price_for(run_settings)
        attempt.cost = sum((Cost.of(u.usage, price) for u in log.of(ModelUsage)), Cost())
        outcome = {f.call_id: f.error_type or "error" for f in log.of(ToolCallFinished) if not f.ok}
        attempt.calls = [(c.name, c.arguments, outcome.get(c.call_id, "")) for c in log.of(ToolCallStarted)]
        attempt.error = next((e.message for e in log.of(ErrorEvent)), "")
        if attempt.finished.stopped_by == "interrupted":
            break
    return attempts
