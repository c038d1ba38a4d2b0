"""Commands to look into the loop and try it again: /step, /retry, /compare."""

from __future__ import annotations

import json

from repl.command_table import command
from repl.commands import _model_completions, undone_text
from repl.compare import Attempt, compare, last_question
from repl.config import ConfigError
from repl.stepping import STEP_ON
from repl.ui.escape import one_line
from tools.store import StoreError

ANSWER_LINES = 3  # first lines of each answer in the /compare table


@command("step", args="[on|off]", help="Step mode: pause before each model call (see what it adds, edit, "
         "send without tools) and before tools run (skip a call, give a result by hand).",
         complete=lambda session: ["on", "off"], means=("pause", "breakpoint", "stepper", "steps"))
def _step(session, args):
    if args and args[0] not in ("on", "off") or len(args) > 1:
        session.ui.error("usage: /step [on|off]")
        return
    on = (args[0] == "on") if args else session.stepping.stepper is None
    if session.set_step(on):
        session.ui.info(STEP_ON if on else "step mode off: the loop runs without pausing")


def _options(session, args: list[str], names: tuple[str, ...], usage: str) -> dict[str, str] | None:
    """``--name VALUE`` / ``--name=VALUE`` pairs; None after one error line."""
    found: dict[str, str] = {}
    rest = list(args)
    while rest:
        word = rest.pop(0)
        name, _, value = word.partition("=")
        if name not in names or (not value and not rest):
            session.ui.error(f"usage: {usage}")
            return None
        found[name[2:]] = value or rest.pop(0)
    return found


@command("retry", args="[--model NAME] [--provider NAME]",
         help="Undo the last turn (as /undo) and run its message again, optionally on another model "
              "(which stays the model); the earlier attempt stays in /trace.",
         complete=lambda session: ["--model", "--provider"], means=("rerun", "regenerate", "reroll"))
def _retry(session, args):
    options = _options(session, args, ("--model", "--provider"), "/retry [--model NAME] [--provider NAME]")
    if options is None:
        return
    if not session.turns:
        session.ui.info("nothing to retry: no turn yet")
        return
    record = session.turns[-1]
    if record.restore is not None:
        session.ui.error("the last change was /compact: /undo it first, then /retry")
        return
    if "provider" in options and options["provider"] not in session.settings.providers:
        session.ui.error(f"no provider profile {options['provider']!r}; "
                         f"known: {', '.join(sorted(session.settings.providers))}")
        return
    starts = session.history.turn_starts()
    text = session.history.messages[starts[-1]]["content"] if record.in_history and starts else record.question
    try:
        reverted = session.undo()
    except StoreError as exc:
        session.ui.error(f"nothing retried: {exc.message}")
        return
    if options and not session.switch(**options):
        session.ui.info("the last turn was undone; send its message again when the model is right")
        return
    session.ui.info(f"retrying turn {record.number} on {session.settings.active.model} "
                    f"({session.settings.active.name}); undone: {undone_text(reverted)}")
    session.ask(text)


@command("compare", args="MODEL [MODEL…]",
         help="Run your last message on each model (side effects denied: a dry run) and show the runs "
              "side by side; nothing enters the conversation.", complete=_model_completions,
         means=("versus", "vs", "bench", "diff"))
def _compare(session, args):
    if not args:
        session.ui.error("usage: /compare MODEL [MODEL…] (the models of the active provider)")
        return
    if last_question(session.history) is None:
        session.ui.info("nothing to compare: send a message first")
        return

    def started(n: int, model: str) -> None:
        session.ui.info(f"compare {n}/{len(args)}: {model} (side effects denied) · Ctrl-C stops")

    try:
        attempts = compare(session.settings, session.registry, session.history, list(args), started)
    except ConfigError as exc:
        session.ui.error(str(exc))
        return
    except KeyboardInterrupt:
        session.ui.info("comparison stopped")
        return
    session.ui.table("compare · your last message · nothing kept", ["", *[a.model for a in attempts]],
                     compare_rows(attempts))


def compare_rows(attempts: list[Attempt]) -> list[tuple[str, ...]]:
    """One row per measure, one column per model."""
    def cells(show) -> tuple[str, ...]:
        return tuple(show(a) if a.finished else "—" for a in attempts)

    def tokens(a: Attempt) -> str:
        u, mark = a.finished.usage, "~" if a.finished.usage.estimated else ""
        return f"in {mark}{u.input_tokens:,} (cached {u.cached_tokens:,})\nout {mark}{u.output_tokens:,}"

    def answer(a: Attempt) -> str:
        lines = [one_line(line, 60) for line in a.finished.answer.splitlines() if line.strip()]
        return "\n".join(lines[:ANSWER_LINES] + (["…"] if len(lines) > ANSWER_LINES else [])) or "—"

    return [
        ("tool calls", *cells(lambda a: "\n".join(
            one_line(f"{name} {json.dumps(arguments, ensure_ascii=False)}", 60) + (f" → {failed}" if failed else "")
            for name, arguments, failed in a.calls) or "none")),
        ("steps", *cells(lambda a: str(a.finished.steps))),
        ("tokens", *cells(tokens)),
        ("latency", *cells(lambda a: f"{a.finished.duration_s:.1f} s")),
        ("cost", *cells(lambda a: a.cost.text())),
        ("stopped by", *(a.finished.stopped_by if a.finished else "not run" for a in attempts)),
        ("answer", *cells(answer)),
        *([("error", *(one_line(a.error, 60) or "—" for a in attempts))] if any(a.error for a in attempts) else []),
    ]
