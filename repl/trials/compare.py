"""``/compare``: the last question run again on other models, one after the other.

Each run works on a copy of the conversation before that question, as a dry run
(a side-effecting call gets a ``denied`` result, a read-only one of a tool not
glassloop's own a ``not_run`` one, and the model carries on: ``core.DryRun``,
``core.NotOurs``), no step mode, no journal and no trace: nothing of the
comparison enters the conversation. What each run did comes back as an
``Attempt`` for the side-by-side table (``compare_rows``). ``glassloop replay``
runs a whole session's questions the same way (``dry_core``, ``run_attempt``).
"""

from __future__ import annotations

import json
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
from repl.providers.base import Message
from repl.session.core import Door, SessionCore
from repl.ui.escape import one_line
from repl.ui.plain import Unattended
from tools.registry import Registry

# A comparison's run: the session core with side effects denied, no journal, no trace; the
# tools are the session's own (loaded already: nothing to wait for).
COMPARE = Door("compare", journal=False, trace=False, dry_run=True, user_tools_wait_s=0)
ANSWER_LINES = 3  # first lines of each answer in the side-by-side table


@dataclass
class Attempt:
    model: str
    finished: TurnFinished | None = None
    calls: list[tuple[str, Any, str]] = field(default_factory=list)  # (name, arguments, error type or "")
    cost: Cost = field(default_factory=Cost)
    error: str = ""  # why the model could not run, or the error that ended its turn


class Quiet(Unattended):
    """The surface of a dry run: its events to a log (a new one per attempt), nothing shown (a
    provider that cannot start is the attempt's error: ``SessionCore.provider_failure``)."""

    def __init__(self, log: EventLog) -> None:
        self.log = log

    def render(self, event: Event) -> None:
        self.log(event)

    def info(self, text: str) -> None:
        pass

    def error(self, text: str) -> None:
        pass


def last_question(history: History) -> tuple[list[Message], str] | None:
    """The conversation before the last question, and the question; None without one."""
    starts = history.turn_starts()
    if not starts:
        return None
    return history.messages[: starts[-1]], history.messages[starts[-1]]["content"]


def dry_core(settings: Settings, history: History, door: Door, registry: Registry | None = None) -> SessionCore:
    """A session core for dry runs (``door.dry_run``): side effects denied and tools not
    glassloop's own not run, but those ``door.calls`` names; nobody asked, its events to a
    ``Quiet`` surface; ``registry``: tools loaded already (the REPL's)."""
    return SessionCore(settings, Quiet(EventLog()), interactive=False, door=door, shared_registry=registry,
                       history=history)


def run_attempt(core: SessionCore, question: str) -> Attempt:
    """``question`` as the next turn of ``core`` (made by ``dry_core``), and what it did."""
    surface = core.ui
    assert isinstance(surface, Quiet)
    log = surface.log = EventLog()
    attempt = Attempt(core.settings.active.model)
    attempt.finished = core.run_turn(question)
    if attempt.finished is None:  # no model to run it on
        attempt.error = core.provider_failure.message if core.provider_failure else "cancelled"
        return attempt
    price = price_for(core.settings)
    attempt.cost = sum((Cost.of(u.usage, price) for u in log.of(ModelUsage)), Cost())
    outcome = {f.call_id: f.error_type or "error" for f in log.of(ToolCallFinished) if not f.ok}
    attempt.calls = [(c.name, c.arguments, outcome.get(c.call_id, "")) for c in log.of(ToolCallStarted)]
    attempt.error = next((e.message for e in log.of(ErrorEvent)), "")
    return attempt


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
        started(n, model)
        core = dry_core(with_overrides(settings, model=model),
                        History(history.system_prompt, [m.copy() for m in before]), COMPARE, registry)
        try:
            attempts.append(run_attempt(core, question))
        finally:
            core.close()
        attempts[-1].model = model
        if attempts[-1].finished is not None and attempts[-1].finished.stopped_by == "interrupted":
            break
    return attempts


def compare_rows(attempts: list[Attempt]) -> list[tuple[str, ...]]:
    """One row per measure, one column per attempt (its cells may hold several lines)."""
    def cells(show: Callable[[Attempt, TurnFinished], str]) -> tuple[str, ...]:
        return tuple(show(a, a.finished) if a.finished else "—" for a in attempts)

    def tokens(_: Attempt, finished: TurnFinished) -> str:
        u, mark = finished.usage, "~" if finished.usage.estimated else ""
        return f"in {mark}{u.input_tokens:,} (cached {u.cached_tokens:,})\nout {mark}{u.output_tokens:,}"

    def answer(_: Attempt, finished: TurnFinished) -> str:
        lines = [one_line(line, 60) for line in finished.answer.splitlines() if line.strip()]
        return "\n".join(lines[:ANSWER_LINES] + (["…"] if len(lines) > ANSWER_LINES else [])) or "—"

    return [
        ("tool calls", *cells(lambda a, _: "\n".join(
            one_line(f"{name} {json.dumps(arguments, ensure_ascii=False)}", 60) + (f" → {failed}" if failed else "")
            for name, arguments, failed in a.calls) or "none")),
        ("steps", *cells(lambda _, finished: str(finished.steps))),
        ("tokens", *cells(tokens)),
        ("latency", *cells(lambda _, finished: f"{finished.duration_s:.1f} s")),
        ("cost", *cells(lambda a, _: a.cost.text())),
        ("stopped by", *(a.finished.stopped_by if a.finished else "not run" for a in attempts)),
        ("answer", *cells(answer)),
        *([("error", *(one_line(a.error, 60) or "—" for a in attempts))] if any(a.error for a in attempts) else []),
    ]
