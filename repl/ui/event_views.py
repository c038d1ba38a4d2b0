"""What the renderer prints for an event: tool panels and usage, summary and decision lines.

Pure functions of an event (tests call them directly). Untrusted text goes
through ``escape.clean`` / ``json_text`` and reaches Rich only as ``Text``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.panel import Panel
from rich.spinner import Spinner
from rich.text import Text

from repl.loop.cost import format_usd
from repl.loop.events import (
    TRUNCATED,
    ApprovalDecided,
    ModelUsage,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)
from repl.ui.escape import clean, json_text, one_line

ARG_LINES = 12  # tallest argument display in a tool panel
ONE_LINE_ARGS = 60  # arguments this short stay on one line with the result
ARG_STRING_CHARS = 160  # longer argument strings are cut in the display
EDITED_KEY = "arguments_edited_by_user"  # in a result when the user edited the arguments
REPLACED_KEY = "arguments_replaced_by_hook"  # ... when a hook of the user's replaced them


def arguments_text(arguments: Any) -> Text:
    return json_text(arguments, max_lines=ARG_LINES, string_chars=ARG_STRING_CHARS,
                     one_line_chars=ONE_LINE_ARGS)


class ToolPanel:
    """A panel as wide as its content, but never narrower than its title and status."""

    def __init__(self, body: RenderableType, name: str, status: Text, colour: str) -> None:
        self.body, self.name, self.status, self.colour = body, name, status, colour

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Panel]:
        title = Text(clean(self.name), "bold")
        content = console.measure(self.body, options=options).maximum + 4
        width = min(options.max_width, max(content, title.cell_len + self.status.cell_len + 10))
        yield Panel(
            self.body, title=title, title_align="left", subtitle=self.status,
            subtitle_align="right", border_style=self.colour, width=width,
        )


def running_panel(call: ToolCallStarted, spinner: Spinner) -> ToolPanel:
    return ToolPanel(Group(arguments_text(call.arguments), spinner), call.name, Text(""), "cyan")


def finished_panel(event: ToolCallFinished, arguments: Any, decided_s: float = 0.0) -> ToolPanel:
    """The panel of a finished call: its own run time, and apart from it the person's time to decide."""
    status, colour = call_status(event)
    summary = Text("→ " + result_summary(event), "dim" if event.ok else colour)
    if arguments is None:
        body: RenderableType = summary
    else:
        args = arguments_text(arguments)
        one_line_args = "\n" not in args.plain and len(args.plain) <= ONE_LINE_ARGS
        body = Text.assemble(args, "  ", summary) if one_line_args else Group(args, summary)
    subtitle = Text(status, colour)
    if decided_s:
        subtitle.append(f" · decided in {decided_s:.1f} s", "dim")
    return ToolPanel(body, event.name, subtitle, colour)


def call_status(event: ToolCallFinished) -> tuple[str, str]:
    """('✓ 3 ms' | '✗ timeout · 3 ms' | 'denied · 3 ms' | '✗ cut off · not run', colour)."""
    ms = f"{round(event.duration_s * 1000)} ms"
    if event.ok:
        return f"✓ {ms}", "green"
    if event.error_type == "denied":
        return f"denied · {ms}", "yellow"
    if event.error_type == TRUNCATED:  # it never ran: no time to show
        return "✗ cut off · not run", "yellow"
    return f"✗ {clean(event.error_type or 'error')} · {ms}", "red"


def result_summary(event: ToolCallFinished) -> str:
    """A few words about a tool result: '3 items', its first line, or the error message."""
    result = event.result
    if not event.ok:
        error = result.get("error")
        message = error.get("message", "") if isinstance(error, dict) else str(error or "")
        return one_line(message, 100) or "failed"
    payload = result.get("result", {k: v for k, v in result.items()
                                    if k not in ("ok", EDITED_KEY, REPLACED_KEY)})
    summary = _describe(payload)
    if EDITED_KEY in result:
        return f"{summary} (arguments edited)"
    return f"{summary} (arguments from your hook)" if REPLACED_KEY in result else summary


def _describe(payload: Any) -> str:
    if payload is None or payload == {}:
        return "done"
    if isinstance(payload, list):
        return plural(len(payload), "item")
    if isinstance(payload, dict):
        for key in ("items", "todos", "notes", "results", "files", "entries"):
            if isinstance(payload.get(key), list):
                return _describe(payload[key])
        if len(payload) == 1 and isinstance(next(iter(payload.values())), dict):
            return _describe(next(iter(payload.values())))  # {"todo": {...}}
        named = [payload[key] for key in ("id", "title") if isinstance(payload.get(key), str)]
        if len(named) == 2:
            return one_line(" ".join(named), 80)
        for key in ("title", "text", "name", "id", "message"):
            if isinstance(payload.get(key), str):
                return one_line(payload[key], 80)
        return one_line(json.dumps(payload, ensure_ascii=False), 80)
    return one_line(str(payload), 80)


def _tokens(count: int, estimated: bool) -> str:
    return f"{'~' if estimated else ''}{count:,}"


def usage_line(event: ModelUsage, cost: float | None = None, width: int = 0) -> Text:
    """'step 1 · in 310 (cached 256) · out 42 · $0.0001 · 0.8 s' (~ marks estimated counts);
    narrower than ``width`` columns (0: any) by leaving out the time, then the cost."""
    usage, est = event.usage, event.usage.estimated
    incoming = f"in {_tokens(usage.input_tokens, est)}"
    if usage.cached_tokens:
        incoming += f" (cached {_tokens(usage.cached_tokens, est)})"
    seconds, money = f"{event.latency_s:.1f} s", format_usd(cost) if cost is not None else ""
    parts = [f"step {event.step}", incoming, f"out {_tokens(usage.output_tokens, est)}", money, seconds]
    if event.retries:
        parts.append(f"{event.retries} retr{'y' if event.retries == 1 else 'ies'}")
    for optional in (seconds, money):
        if width and len(" · ".join(p for p in parts if p)) > width:
            parts.remove(optional)
    return Text(" · ".join(p for p in parts if p), "dim")


SUMMARY_WIDTH = 80  # a turn's summary line is shortened to fit this, never wrapped


def summary_line(event: TurnFinished, cost: float | None = None, cost_unknown: bool = False,
                 width: int = SUMMARY_WIDTH) -> Text:
    """'turn 1 · 2 steps · 3 tool calls · 910 tokens (in 870 · out 40) · $0.0012 · 1.9 s · answer',
    shortened to ``width`` columns: the token breakdown, the tool calls and the time go first."""
    usage, est = event.usage, event.usage.estimated
    detail = [f"in {_tokens(usage.input_tokens, est)}",
              *([f"cached {_tokens(usage.cached_tokens, est)}"] if usage.cached_tokens else []),
              f"out {_tokens(usage.output_tokens, est)}"]
    total = f"{_tokens(usage.total, est)} tokens"
    money = format_usd(cost) if cost is not None else ("cost unknown" if cost_unknown else "")
    stop = "answer" if event.stopped_by == "answer" else f"stopped: {event.stopped_by}"
    calls = plural(event.tool_calls, "tool call") if event.tool_calls else ""
    seconds = f"{event.duration_s:.1f} s"
    shorter = [  # each a little shorter than the one before
        [calls, f"{total} ({' · '.join(detail)})", money, seconds],
        [calls, f"{total} ({' · '.join(d for d in detail if not d.startswith('cached'))})", money, seconds],
        [calls, total, money, seconds],
        [calls.replace("tool call", "call"), total, money, seconds],
        [total, money, seconds],
        [total, money],
        [total],
    ]
    for middle in shorter:
        parts = [f"turn {event.turn}", plural(event.steps, "step"), *(p for p in middle if p)]
        head = " · ".join(parts) + " · "
        if len(head) + len(stop) <= width:
            break
    line = Text(head, "dim")
    if event.stopped_by == "answer":
        line.append(stop, "dim")
    else:
        line.append(stop, "bold red" if event.stopped_by == "error" else "bold yellow")
    line.no_wrap, line.overflow = True, "ellipsis"  # narrower than the shortest form: cut, not wrapped
    return line


def repeat_line(event: ToolCallFinished, arguments: Any) -> Text:
    """A call identical to one earlier in the turn, which did not run (or was not asked about) again."""
    shown = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    head = f"{clean(event.name)} {one_line(shown, ONE_LINE_ARGS)}".rstrip()
    if event.ok:
        return Text(f"{head} · already ran this turn, not run again", "dim")  # the model gets its result
    return Text(f"{head} · denied earlier this turn, not asked again", "dim")


def decision_line(event: ApprovalDecided) -> Text:
    """'auto-approved (mode)' / 'denied: read-only mode …' for decisions no one was asked about."""
    name = clean(event.name)
    if event.allowed:
        why = "your earlier choice" if event.by == "rule" else "mode auto"
        return Text(f"{name}: auto-approved ({why})", "dim")
    return Text(f"{name} denied: {one_line(event.reason, 200) or event.by}", "dim yellow")


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
