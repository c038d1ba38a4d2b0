"""Commands on what the loop did and what it cost, and how much of it is shown:
the trace, usage, verbose, reasoning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repl.archive.typed_numbers import NotANumber, typed_number
from repl.loop.cost import context_window_for
from repl.loop.unicode import json_dumps
from repl.session.commands.context import CommandContext, command, save_text
from repl.tracing.raw import raw_view
from repl.tracing.timeline import (
    draw_turn,
    format_turn,
    missing_raw,
    pick_turns,
    raw_calls,
    undone_turns,
    usage_bars,
)
from repl.tracing.trace import Trace, read_records, read_wire, turns, wire_path

TRACE_FLAGS = ("--raw", "--full", "--events", "--json")
TRACE_ARGS = "[N|all] [--raw [--full]] [--events] [--json] [--save PATH]"


@command("trace", args=TRACE_ARGS,
         help="A turn as a timeline: one bar per model call and tool call on one time axis; --raw: the "
         "exact requests (what each adds to the previous one of its turn; --full: whole), attempts and "
         "responses, paged; --events: every event; --json: the records; --save: to a file.",
         complete=lambda ctx: ["all", *TRACE_FLAGS, "--save"], means=("log", "timeline", "debug", "events"),
         brief="the last turn as a timeline; --raw: the exact wire traffic")
def trace(ctx: CommandContext, args: list[str]) -> None:
    if ctx.trace is None:
        ctx.ui.error("no trace in this session ([trace] enabled = false, or its folder cannot be written)")
        return
    flags, save, which = {a for a in args if a in TRACE_FLAGS}, None, "last"
    rest = [a for a in args if a not in TRACE_FLAGS]
    if "--save" in rest:
        i = rest.index("--save")
        if i + 1 >= len(rest):
            ctx.ui.error("--save needs a path")
            return
        save = Path(rest[i + 1])
        del rest[i : i + 2]
    if [a for a in rest if a.startswith("--")] or len(rest) > 1 or ("--full" in flags and "--raw" not in flags):
        ctx.ui.error(f"usage: /trace {TRACE_ARGS}")
        return
    if rest:
        which = rest[0]
    if which not in ("last", "all"):
        try:
            which = str(typed_number(which, "/trace takes 'all' or a turn number"))
        except NotANumber as exc:
            ctx.ui.error(str(exc))
            return
    path = ctx.trace.path
    try:
        grouped = turns(read_records(path)) if path.exists() else []  # made by the session's first turn
    except OSError as exc:  # replaced by something unreadable, or its disk gone
        ctx.ui.error(f"cannot read the trace {path}: {exc.strerror or exc}")
        return
    try:
        chosen = pick_turns(grouped, which)
    except ValueError:
        chosen = None
    if chosen is None:
        ctx.ui.error(f"no turn {which!r}; there are {len(grouped)}")
        return
    if "--raw" in flags:
        _trace_raw(ctx, ctx.trace, chosen, save, full="--full" in flags)
        return
    records = [r for g in chosen for r in g]
    if "--json" in flags:
        lines = [json_dumps(r, ensure_ascii=False) for r in records]
    elif "--events" in flags:
        lines = [line for g in chosen for line in format_turn(g)]
    else:
        width = min(ctx.ui.width, 120)
        undone = undone_turns(grouped)
        lines = [line for n, g in enumerate(chosen) for line in ([""] if n else []) + draw_turn(g, width, undone)]
    if save:
        if saved := save_text(ctx, save, "\n".join(lines) + "\n"):
            ctx.ui.info(f"saved {len(records)} records to {saved}")
    else:
        ctx.ui.lines(lines)


def _trace_raw(ctx: CommandContext, trace: Trace, chosen: list[list[dict[str, Any]]], save: Path | None,
               full: bool) -> None:
    """The chosen turns' model calls as sent and as answered (``--save``: as JSON, whole)."""
    try:
        wire, dropped = read_wire(wire_path(trace.path))
    except OSError as exc:
        ctx.ui.error(f"cannot read the raw calls {wire_path(trace.path)}: {exc.strerror or exc}")
        return
    calls, missing = raw_calls(chosen, wire)
    if save:
        text = json_dumps(calls, ensure_ascii=False, indent=2) + "\n"
        if saved := save_text(ctx, save, text):
            ctx.ui.info(f"saved {len(calls)} model call{'' if len(calls) == 1 else 's'} to {saved}")
    elif calls:
        ctx.ui.page(raw_view(calls, full=full))
    if missing:
        ctx.ui.info(missing_raw(missing, dropped, trace.raw_off))
    elif not calls:
        ctx.ui.info("no model call in this turn")


@command("usage", help="Tokens and cost per turn and for the session, and the context in use.",
         aliases=("cost",), means=("tokens", "stats", "price", "spend", "billing", "context", "status"),
         brief="tokens and cost per turn and for the session")
def usage(ctx: CommandContext, args: list[str]) -> None:
    priced = bool(ctx.cost.usd) or not ctx.cost.unpriced  # no price at all: said once, not in every row
    rows = []
    for t in ctx.ledger:  # undone turns stay: their tokens were spent
        u = t.finished.usage
        mark = "~" if u.estimated else ""
        compacted = t.restore is not None
        stopped = "" if compacted else t.finished.stopped_by
        rows.append(("compact" if compacted else str(t.number), str(t.calls),
                     f"{mark}{u.input_tokens}", str(u.cached_tokens), f"{mark}{u.output_tokens}",
                     *([t.cost.text()] if priced else []),
                     f"undone ({stopped})" if t.undone and stopped else "undone" if t.undone else stopped))
    u = ctx.usage
    rows.append(("all", str(sum(t.calls for t in ctx.ledger)), str(u.input_tokens),
                 str(u.cached_tokens), str(u.output_tokens), *([ctx.cost.text()] if priced else []), ""))
    ctx.ui.table("usage", ["turn", "calls", "in", "cached", "out", *(["cost"] if priced else []), "stopped by"], rows)
    bars = [("c" if t.restore is not None else str(t.number), t.finished.usage.input_tokens,
             t.finished.usage.cached_tokens, t.finished.usage.output_tokens, "undone" if t.undone else "")
            for t in ctx.ledger]
    if bars:
        ctx.ui.lines(usage_bars(bars, width=max(8, min(40, ctx.ui.width - 16))))
        ctx.ui.info(f"session: {u.total:,} tokens ({u.input_tokens:,} in, {u.cached_tokens:,} of them cached; "
                    f"{u.output_tokens:,} out) · {ctx.cost.text()}")
    window = context_window_for(ctx.settings)
    if window and ctx.last_prompt_tokens:
        ctx.ui.info(f"context: {ctx.last_prompt_tokens:,} of {window:,} tokens "
                    f"({100 * ctx.last_prompt_tokens / window:.0f}%)")


@command("verbose", args="[on|off]", help="A usage line for every model call, not only in multi-step turns.",
         complete=lambda ctx: ["on", "off"])
def verbose(ctx: CommandContext, args: list[str]) -> None:
    if args and args[0] not in ("on", "off"):
        ctx.ui.error("usage: /verbose [on|off]")
        return
    on = ctx.ui.set_verbose(args[0] == "on" if args else None)
    ctx.ui.info("verbose: a usage line for every model call" if on
                else "verbose off: one summary line for a one-call turn")


@command("reasoning", args="[on|off]", help="Show a reasoning model's thinking dimmed as it streams, or one line.",
         complete=lambda ctx: ["on", "off"], means=("thinking", "think"))
def reasoning(ctx: CommandContext, args: list[str]) -> None:
    if args and args[0] not in ("on", "off"):
        ctx.ui.error("usage: /reasoning [on|off]")
        return
    on = ctx.ui.set_reasoning(args[0] == "on" if args else None)
    ctx.ui.info("reasoning: shown dimmed as it streams" if on
                else "reasoning hidden: one line per model call says how long it thought")
