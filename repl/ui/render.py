"""Rich rendering of the agent loop's events.

One ``Live`` area (transient) holds what is still changing: the open tail of
the streamed answer, a spinner while the model has not answered yet, and a
panel per running tool call. Everything finished (text blocks, tool panels,
usage and summary lines) is printed to the scrollback once. Untrusted text is
cleaned (``escape.clean``) and reaches Rich only as ``Text`` or Markdown.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.panel import Panel
from rich.spinner import Spinner
from rich.text import Text

from repl.events import (
    ApprovalDecided,
    ApprovalRequested,
    ErrorEvent,
    Event,
    GuardTripped,
    ModelRequest,
    ModelUsage,
    Notice,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
    Usage,
)
from repl.ui.escape import clean, json_text, one_line
from repl.ui.mdstream import LiveArea, MarkdownStream, interrupts_deferred, make_markdown

Price = Callable[[Usage], "float | None"]
ARG_LINES = 12  # tallest argument display in a tool panel
ONE_LINE_ARGS = 60  # arguments this short stay on one line with the result
ARG_STRING_CHARS = 160  # longer argument strings are cut in the display
EDITED_KEY = "arguments_edited_by_user"  # in a result when the user edited the arguments


@dataclass
class _Running:
    call: ToolCallStarted
    spinner: Spinner = field(init=False)
    awaiting_approval: bool = False  # the dialog is open: not drawn

    def __post_init__(self) -> None:
        label = "waiting for approval" if self.call.side_effects else "running"
        self.spinner = Spinner("dots", Text(label, "dim"))


class Renderer:
    """Subscriber of the event stream; also the session's output helpers.

    Call it from one thread (the agent loop's); the live area's ticker thread
    only redraws. ``waiting()`` may be called from any thread.
    """

    def __init__(
        self,
        console: Console,
        *,
        show_usage: bool = True,
        price: Price | None = None,
        code_theme: str = "monokai",
        refresh_per_second: float = 12.0,
    ) -> None:
        self.console = console
        self.show_usage = show_usage
        self.price = price
        self._md = MarkdownStream(console, code_theme=code_theme)
        self._area = LiveArea(console, self._live_renderable, changed=self._redraw_needed,
                              refresh_per_second=refresh_per_second)
        self._lock = self._area.lock
        self._text_step: int | None = None
        self._running: dict[str, _Running] = {}
        self._waiting: Spinner | None = None
        self._suspended = 0  # nesting depth of suspended()
        self._approval_open = False
        self._handlers: dict[type, Callable[[Any], None]] = {
            TurnStarted: self._turn_started, ModelRequest: self._model_request,
            TextDelta: self._text, ModelUsage: self._usage, ToolCallStarted: self._call_started,
            ApprovalRequested: self._approval_requested, ApprovalDecided: self._approval_decided,
            ToolCallFinished: self._call_finished, GuardTripped: self._guard,
            Notice: self._notice, ErrorEvent: self._error_event, TurnFinished: self._turn_finished,
        }

    def __call__(self, event: Event) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            with interrupts_deferred(), self._lock:
                handler(event)

    # ----- output helpers for the session -----

    def print(self, *renderables: RenderableType) -> None:
        """``console.print`` that cooperates with the live area (trusted renderables only)."""
        with interrupts_deferred(), self._lock:
            self.console.print(*renderables)

    def header(self, provider: str, model: str, approval: str, session_id: str) -> None:
        self.print(Text.assemble(
            ("glassloop", "bold"), " · provider ", clean(provider), " (", clean(model), ")",
            " · approvals: ", (clean(approval), "bold"), " · session ", (clean(session_id), "dim"),
        ))

    def info(self, text: str, style: str = "") -> None:
        self.print(Text(clean(text), style=style))

    def notice(self, text: str) -> None:
        self.info(text, "dim")

    def warn(self, text: str) -> None:
        self.info(text, "yellow")

    def error(self, text: str) -> None:
        self.print(Text("error: " + one_line(text, 500), style="red"))

    def markdown(self, text: str) -> None:
        self.print(make_markdown(clean(text), self._md.code_theme))

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        from rich.table import Table

        table = Table(title=Text(clean(title), "bold"), title_justify="left", expand=False)
        for column in columns:
            table.add_column(Text(clean(column)))
        for row in rows:
            table.add_row(*(Text(clean("" if cell is None else str(cell))) for cell in row))
        self.print(table)

    def close(self) -> None:
        """Print what is still open and stop the live area (on Ctrl-C, before exiting)."""
        with interrupts_deferred(), self._lock:
            self._end_text()
            self._waiting = None
            self._area.stop()

    def refresh(self) -> None:
        """Redraw the live area if that would show something new (the ticker does this)."""
        self._area.refresh()

    def warm_up(self) -> None:
        """Load and exercise the Markdown renderer (imports, Pygments lexers: ~0.1 s) so
        the first answer does not pay for it; e.g. from a thread once the prompt is up."""
        scratch = Console(file=io.StringIO(), width=60, color_system="truecolor", force_terminal=True)
        sample = "# h\n\n- *a* `b`\n\n```python\nx = 1\n```\n\n| a |\n|---|\n| 1 |\n"
        scratch.print(make_markdown(sample, self._md.code_theme))

    @property
    def live_active(self) -> bool:
        """Whether a live area (streaming tail, spinners) is on the screen."""
        return self._area.active

    @contextmanager
    def suspended(self) -> Iterator[None]:
        """No live area inside this block (for prompts that need the terminal)."""
        with self._lock:
            self._suspended += 1
            self._area.stop()
        try:
            yield
        finally:
            with self._lock:
                self._suspended -= 1
                self._sync_live()

    def waiting(self, text: str | None) -> None:
        """A spinner line with ``text`` until the model answers; None removes it.

        Safe from any thread. Inside ``suspended()`` (e.g. while the prompt
        reads a line) it is only remembered, and shown when the block ends.
        """
        with self._lock:
            if text is None:
                self._waiting = None
            elif self._waiting is None:
                self._waiting = Spinner("dots", Text(clean(text), "dim"))
            else:
                self._waiting.update(text=Text(clean(text), "dim"))
            self._sync_live(refresh=True)

    # ----- event handlers -----

    def _turn_started(self, event: TurnStarted) -> None:
        self._end_text()
        self._running.clear()
        self._waiting = None  # the provider is ready once a turn starts
        self._approval_open = False

    def _model_request(self, event: ModelRequest) -> None:
        self._end_text()
        label = Text(f"step {event.step} · waiting for {clean(event.model)}", "dim")
        self._waiting = Spinner("dots", label)
        self._sync_live()

    def _text(self, event: TextDelta) -> None:
        if self._text_step != event.step:
            self._end_text()
            self._text_step = event.step
        self._waiting = None
        self._md.feed(event.text)
        if not self._area.active:
            self._sync_live()

    def _usage(self, event: ModelUsage) -> None:
        self._end_text()
        self._waiting = None
        if self.show_usage:
            self.console.print(usage_line(event, self.price(event.usage) if self.price else None))
        self._sync_live()

    def _call_started(self, event: ToolCallStarted) -> None:
        self._end_text()
        self._waiting = None
        self._running[event.call_id] = _Running(event)
        self._sync_live(refresh=True)

    def _approval_requested(self, event: ApprovalRequested) -> None:
        self._end_text()
        running = self._running.get(event.call_id)
        if running is not None:
            running.awaiting_approval = True
        self._approval_open = True  # the dialog needs the terminal; decided by a rule it is a flicker
        self._area.stop()

    def _approval_decided(self, event: ApprovalDecided) -> None:
        self._approval_open = False
        running = self._running.get(event.call_id)
        if running is not None:
            running.awaiting_approval = False
            running.spinner.update(text=Text("running" if event.allowed else "denied", "dim"))
        if event.by != "user":
            self.console.print(decision_line(event))
        self._sync_live()

    def _call_finished(self, event: ToolCallFinished) -> None:
        running = self._running.pop(event.call_id, None)
        arguments = event.result.get(EDITED_KEY, running.call.arguments if running else None)
        self.console.print(finished_panel(event, arguments))
        self._sync_live()

    def _guard(self, event: GuardTripped) -> None:
        self._end_text()
        self.console.print(Text(f"guard {event.guard}: {one_line(event.detail, 200)}", "yellow"))

    def _notice(self, event: Notice) -> None:
        self.console.print(Text(clean(event.message), "dim"))

    def _error_event(self, event: ErrorEvent) -> None:
        self._end_text()
        self.error(event.message)

    def _turn_finished(self, event: TurnFinished) -> None:
        self._end_text()
        self._running.clear()
        self._waiting = None
        self._approval_open = False
        self._area.stop()
        cost = self.price(event.usage) if self.price else None
        self.console.print(summary_line(event, cost, cost_unknown=self.price is not None and cost is None))

    # ----- the live area -----

    def _end_text(self) -> None:
        if self._text_step is not None or self._md.has_tail:
            self._md.finish()
        self._text_step = None

    def _wanted(self) -> bool:
        calls = any(not r.awaiting_approval for r in self._running.values())
        if self._suspended or self._approval_open:
            return False
        return self._md.has_tail or self._waiting is not None or calls

    def _sync_live(self, refresh: bool = False) -> None:
        if not self._wanted():
            self._area.stop()
        elif not self._area.active:
            self._area.start()
        elif refresh:
            self._area.refresh(force=True)

    def _redraw_needed(self) -> bool:
        spinning = self._waiting is not None or any(
            not r.awaiting_approval for r in self._running.values())
        return spinning or self._md.live_view().stale(self.console)

    def _live_renderable(self) -> RenderableType:
        parts: list[RenderableType] = []
        if self._md.has_tail:
            parts.append(self._md.live_view())
        if self._waiting is not None:
            parts.append(self._waiting)
        for running in list(self._running.values()):
            if not running.awaiting_approval:
                parts.append(running_panel(running.call, running.spinner))
        return Group(*parts)


# ----- pieces (pure functions of an event; tests call them directly) -----


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


def finished_panel(event: ToolCallFinished, arguments: Any) -> ToolPanel:
    status, colour = call_status(event)
    summary = Text("→ " + result_summary(event), "dim" if event.ok else colour)
    if arguments is None:
        body: RenderableType = summary
    else:
        args = arguments_text(arguments)
        one_line_args = "\n" not in args.plain and len(args.plain) <= ONE_LINE_ARGS
        body = Text.assemble(args, "  ", summary) if one_line_args else Group(args, summary)
    return ToolPanel(body, event.name, Text(status, colour), colour)


def call_status(event: ToolCallFinished) -> tuple[str, str]:
    """('✓ 3 ms' | '✗ timeout · 3 ms' | 'denied · 3 ms', colour)."""
    ms = f"{round(event.duration_s * 1000)} ms"
    if event.ok:
        return f"✓ {ms}", "green"
    if event.error_type == "denied":
        return f"denied · {ms}", "yellow"
    return f"✗ {clean(event.error_type or 'error')} · {ms}", "red"


def result_summary(event: ToolCallFinished) -> str:
    """A few words about a tool result: '3 items', its first line, or the error message."""
    result = event.result
    if not event.ok:
        error = result.get("error")
        message = error.get("message", "") if isinstance(error, dict) else str(error or "")
        return one_line(message, 100) or "failed"
    payload = result.get("result", {k: v for k, v in result.items() if k not in ("ok", EDITED_KEY)})
    summary = _describe(payload)
    return f"{summary} (arguments edited)" if EDITED_KEY in result else summary


def _describe(payload: Any) -> str:
    if payload is None or payload == {}:
        return "done"
    if isinstance(payload, list):
        return f"{len(payload)} item" + ("" if len(payload) == 1 else "s")
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


def usage_line(event: ModelUsage, cost: float | None = None) -> Text:
    """'step 1 · in 310 (cached 256) · out 42 · $0.0001 · 0.8 s' (~ marks estimated counts)."""
    usage, est = event.usage, event.usage.estimated
    incoming = f"in {_tokens(usage.input_tokens, est)}"
    if usage.cached_tokens:
        incoming += f" (cached {_tokens(usage.cached_tokens, est)})"
    parts = [f"step {event.step}", incoming, f"out {_tokens(usage.output_tokens, est)}",
             *([format_cost(cost)] if cost is not None else []), f"{event.latency_s:.1f} s"]
    if event.retries:
        parts.append(f"{event.retries} retr{'y' if event.retries == 1 else 'ies'}")
    return Text(" · ".join(parts), "dim")


def format_cost(cost: float) -> str:
    return f"${cost:.4f}" if cost < 0.01 else f"${cost:.2f}"


def summary_line(event: TurnFinished, cost: float | None = None, cost_unknown: bool = False) -> Text:
    """'turn 1 · 2 steps · 3 tool calls · 910 tokens (in 870 · out 40) · $0.0012 · 1.9 s · answer'."""
    usage, est = event.usage, event.usage.estimated
    tokens = f"{_tokens(usage.total, est)} tokens (in {_tokens(usage.input_tokens, est)}"
    if usage.cached_tokens:
        tokens += f" · cached {_tokens(usage.cached_tokens, est)}"
    tokens += f" · out {_tokens(usage.output_tokens, est)})"
    parts = [f"turn {event.turn}", _plural(event.steps, "step"),
             _plural(event.tool_calls, "tool call"), tokens]
    if cost is not None:
        parts.append(format_cost(cost))
    elif cost_unknown:
        parts.append("cost unknown")
    parts.append(f"{event.duration_s:.1f} s")
    line = Text(" · ".join(parts) + " · ", "dim")
    if event.stopped_by == "answer":
        line.append("answer", "dim")
    else:
        colour = "bold red" if event.stopped_by == "error" else "bold yellow"
        line.append(f"stopped by {event.stopped_by}", colour)
    return line


def decision_line(event: ApprovalDecided) -> Text:
    """'auto-approved (mode)' / 'denied: read-only mode …' for decisions no one was asked about."""
    name = clean(event.name)
    if event.allowed:
        why = "your earlier choice" if event.by == "rule" else "mode auto"
        return Text(f"{name}: auto-approved ({why})", "dim")
    return Text(f"{name} denied: {one_line(event.reason, 200) or event.by}", "dim yellow")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
