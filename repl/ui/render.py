"""Rich rendering of the agent loop's events.

One ``Live`` area (transient) holds what is still changing: the open tail of
the streamed answer, a spinner while the model has not answered yet, and a
panel per running tool call. Everything finished (text blocks, tool panels,
usage and summary lines, built in ``event_views``) is printed to the scrollback
once. Untrusted text is cleaned (``escape.clean``) and reaches Rich only as
``Text`` or Markdown.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.spinner import Spinner
from rich.text import Text

from repl.loop.events import (
    ApprovalDecided,
    ApprovalRequested,
    ErrorEvent,
    Event,
    GuardTripped,
    HookRan,
    ModelRequest,
    ModelRetry,
    ModelUsage,
    Notice,
    ReasoningDelta,
    Routed,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
    Usage,
    UserStep,
)
from repl.ui.escape import clean, one_line
from repl.ui.event_views import (
    EDITED_KEY,
    REPLACED_KEY,
    SUMMARY_WIDTH,
    decision_line,
    finished_panel,
    repeat_line,
    running_panel,
    summary_line,
    usage_line,
)
from repl.ui.live import LiveArea, interrupt_main, interrupts_deferred
from repl.ui.mdstream import MarkdownStream, make_markdown

Price = Callable[[Usage], "float | None"]


@dataclass
class _Running:
    call: ToolCallStarted
    spinner: Spinner = field(init=False)
    awaiting_approval: bool = False  # the dialog is open: not drawn
    decided_s: float = 0.0  # how long the person took to approve or deny it

    def __post_init__(self) -> None:
        label = "waiting for approval" if self.call.side_effects else "running"
        self.spinner = Spinner("dots", Text(label, "dim"))


STOP_HINT = "Ctrl-C to stop"  # Esc stops a turn too (docs/COMMANDS.md, /help)
REASONING_LINES = 3  # lines of the streaming reasoning kept in the live area


@dataclass
class _Wait:
    """A pending model call: what the spinner line says, counting the seconds."""

    label: str
    since: float = field(default_factory=time.monotonic)
    retry: ModelRetry | None = None
    retry_at: float = 0.0  # time.monotonic() when the next attempt starts

    def text(self, now: float, width: int = 0) -> str:
        """The line within ``width`` columns (0: any): the stop hint gives way, then the end is
        cut with "…": the live line stays one row."""
        r = self.retry
        if r is not None and now < self.retry_at:
            said = f"retrying in {math.ceil(self.retry_at - now)} s (attempt {r.attempt} of {r.attempts}: {r.reason})"
        else:
            said = f"{self.label} · {now - self.since:.0f} s"
        hinted = f"{said} · {STOP_HINT}"
        if not width or cell_len(hinted) <= width:
            return hinted
        line = Text(said)
        line.truncate(width, overflow="ellipsis")
        return line.plain


@dataclass
class _Reasoning:
    step: int
    since: float = field(default_factory=time.monotonic)
    pieces: list[str] = field(default_factory=list)


SHORT_CELL = 16  # a column whose cells are all this narrow is never wrapped
TEXT_ROOM = 30  # the least width a text column gets in a table; less, and each row is a block


def _table(header: list[str], cells: list[list[str]], widths: list[int], fixed: list[bool],
           boxed: bool) -> RenderableType:
    from rich.box import HEAVY_HEAD
    from rich.table import Table

    table = Table(expand=False, box=HEAVY_HEAD if boxed else None,
                  collapse_padding=not boxed, pad_edge=boxed, header_style="bold" if boxed else "bold underline")
    for name, width, short in zip(header, widths, fixed, strict=True):
        table.add_column(Text(name), no_wrap=short, min_width=width if short else None)
    for row in cells:
        table.add_row(*(Text(cell) for cell in row))
    return table


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
        escape_stops: bool = False,
        show_reasoning: bool = True,
    ) -> None:
        """``escape_stops``: Esc stops a turn as Ctrl-C does (a REPL on a terminal)."""
        self.console = console
        self.show_usage = show_usage
        self.price = price
        self.show_reasoning = show_reasoning  # /reasoning on|off: the model's reasoning, dimmed
        self._md = MarkdownStream(console, code_theme=code_theme)
        self._area = LiveArea(console, self._live_renderable, changed=self._redraw_needed,
                              refresh_per_second=refresh_per_second,
                              on_escape=interrupt_main if escape_stops else None)
        self._lock = self._area.lock
        self._text_step: int | None = None
        self._running: dict[str, _Running] = {}
        self._waiting: Spinner | None = None
        self._wait: _Wait | None = None  # what the spinner counts while a model call is pending
        self._reasoning: _Reasoning | None = None  # the reasoning streaming now
        self._suspended = 0  # nesting depth of suspended()
        self._approval_open = False
        self._paging: list[RenderableType] | None = None  # what paged() collects
        self.verbose = False  # a usage line for every model call, also in one-call turns
        self._held_usage: Text | None = None  # a turn's first usage line, until it has a second call
        self._routed: tuple[str, tuple[str, ...]] | None = None  # the turn's routing shown last
        self._handlers: dict[type, Callable[[Any], None]] = {
            TurnStarted: self._turn_started, ModelRequest: self._model_request,
            TextDelta: self._text, ModelUsage: self._usage, ToolCallStarted: self._call_started,
            ReasoningDelta: self._reasoning_delta, ModelRetry: self._retry,
            ApprovalRequested: self._approval_requested, ApprovalDecided: self._approval_decided,
            ToolCallFinished: self._call_finished, GuardTripped: self._guard, UserStep: self._user_step,
            Routed: self._route, Notice: self._notice, ErrorEvent: self._error_event, TurnFinished: self._turn_finished,
            HookRan: self._hook_ran,
        }

    def __call__(self, event: Event) -> None:
        handler = self._handlers.get(type(event))
        if handler is not None:
            with interrupts_deferred(), self._lock:
                handler(event)

    # ----- output helpers for the session -----

    def print(self, *renderables: RenderableType) -> None:
        """``console.print`` that cooperates with the live area (trusted renderables only)."""
        if self._paging is not None:
            self._paging.extend(renderables)
            return
        with interrupts_deferred(), self._lock:
            self.console.print(*renderables)

    @contextmanager
    def paged(self) -> Iterator[None]:
        """What is printed inside goes through the pager when the console is a terminal and it
        is taller than the screen (``repl.ui.pager``), else it is printed as it would be."""
        from repl.ui.pager import page

        self._paging = []
        try:
            yield
        finally:
            parts, self._paging = self._paging, None
        whole = Group(*parts)
        if self.console.is_terminal:  # wrapped between words at the screen's width, as it would be printed
            with self.console.capture() as captured:
                self.console.print(whole)
            if page(captured.get(), height=self.console.height):
                return
        self.print(whole)

    def header(self, provider: str, model: str, approval: str, session_id: str) -> None:
        self.print(Text.assemble(  # the toolbar's words: provider · model · approvals MODE
            ("glassloop", "bold"), " · ", clean(provider), " · ", clean(model),
            " · approvals ", (clean(approval), "bold"), " · session ", (clean(session_id), "dim"),
            (" · /help for commands", "dim"),
        ))

    def clipboard(self, text: str) -> None:
        """OSC 52: ask the terminal to put ``text`` on the clipboard (also over SSH)."""
        import base64

        data = base64.b64encode(text.encode("utf-8")).decode("ascii")
        with interrupts_deferred(), self._lock:
            self.console.file.write(f"\x1b]52;c;{data}\x07")
            self.console.file.flush()

    def info(self, text: str, style: str = "") -> None:
        self.print(Text(clean(text), style=style))

    def notice(self, text: str) -> None:
        self.info(text, "dim")

    def error(self, text: str) -> None:
        self.print(Text("error: " + one_line(text, 500), style="red"))

    def markdown(self, text: str) -> None:
        self.print(make_markdown(clean(text), self._md.code_theme))

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
              keep: Sequence[str] = ()) -> None:
        """A boxed table when it fits the console; else the same without a box; else each row
        as a line of its short cells with its text below. Short cells (numbers, names, states)
        and the ``keep`` columns (ids to copy) are never wrapped or cut; text columns give way."""
        header = [clean(column) for column in columns]
        cells = [[clean("" if cell is None else str(cell)) for cell in row] for row in rows]
        widths = [max([0, *(max(map(cell_len, row[n].splitlines()), default=0) for row in cells if n < len(row))])
                  for n in range(len(header))]
        fixed = [column in keep or widths[n] <= SHORT_CELL for n, column in enumerate(columns)]
        widths = [max(w, cell_len(name) if kept else max(map(cell_len, name.split()), default=0))  # a header too
                  for w, name, kept in zip(widths, header, fixed, strict=True)]
        text_room = sum(min(w, TEXT_ROOM) for w, f in zip(widths, fixed, strict=True) if not f)
        short = sum(w for w, f in zip(widths, fixed, strict=True) if f)
        self.print(Text(clean(title), "bold"))
        for boxed, overhead in ((True, 3 * len(columns) + 1), (False, len(columns) - 1)):
            if short + overhead + text_room <= self.console.width:
                self.print(_table(header, cells, widths, fixed, boxed))
                return
        self._row_blocks([header], fixed, "dim", beside=False)
        self._row_blocks(cells, fixed)

    def _row_blocks(self, rows: list[list[str]], fixed: list[bool], style: str = "", beside: bool = True) -> None:
        """Each row as a line of its short cells and its texts under it, indented and wrapped
        under themselves; when every row has one text and that takes fewer lines, the texts go
        beside the short cells instead, in one column. A row without short cells starts at the edge."""
        from rich.table import Table

        split = [("  ".join(c for c, f in zip(row, fixed, strict=False) if f and c),
                  [c for c, f in zip(row, fixed, strict=False) if not f and c]) for row in rows]
        width = self.console.width
        room = width - 2 - max((cell_len(head) for head, _ in split), default=0)

        def lines(text: str, room: int) -> int:
            return max(1, len(Text(text).wrap(self.console, room)))

        if beside and room >= 10 and all(len(texts) <= 1 for _, texts in split) and (
                sum(lines(texts[0] if texts else "", room) for _, texts in split)
                <= sum(bool(head) + sum(lines(text, width - 2) for text in texts) for head, texts in split)):
            grid = Table.grid(padding=(0, 2))
            grid.add_column(no_wrap=True)
            grid.add_column()
            for head, texts in split:
                grid.add_row(Text(head, style), Text(texts[0] if texts else "", style))
            self.print(grid)
            return
        for head, texts in split:
            if head:
                self.print(Text(head, style))
            for n, text in enumerate(texts):
                if not head and n == 0:
                    self.print(Text(text, style))
                    continue
                grid = Table.grid()
                grid.add_column(no_wrap=True)
                grid.add_column()
                grid.add_row(Text("  ", style), Text(text, style))
                self.print(grid)

    def recap(self, earlier: int, turns: Sequence[dict[str, Any]]) -> None:
        """A resumed session's last turns (the question, one line per tool call, the answer),
        then how many earlier turns are not shown. The answers as text, not Markdown: a resume
        draws this before its prompt, and Markdown with its code highlighting costs ~70 ms there."""
        for turn in turns:
            self.print(Text("› " + one_line(turn["user"], max(20, self.console.width - 2)), "bold"))
            for name, arguments, ok in turn["calls"]:
                mark = ("✓", "green") if ok else ("✗", "red") if ok is False else ("·", "dim")
                self.print(Text.assemble("  ", mark, " ", (one_line(f"{name} {arguments}",
                                                                    max(20, self.console.width - 4)), "dim")))
            if turn["answer"].strip():
                self.print(Text(clean(turn["answer"].strip("\n"))))
        if earlier:
            self.notice(f"… {earlier} earlier turn{'' if earlier == 1 else 's'}, /trace all to see them")

    def close(self) -> None:
        """Print what is still open and stop the live area (on Ctrl-C, before exiting)."""
        with interrupts_deferred(), self._lock:
            self._end_text()
            self._waiting = None
            self._area.stop()

    def refresh(self) -> None:
        """Redraw the live area if that would show something new (the ticker does this)."""
        self._area.refresh()

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
            self._wait = None  # this spinner says what it is given; it counts nothing
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
        self._held_usage = None
        self._routed = None
        self._running.clear()
        self._waiting = None  # the provider is ready once a turn starts
        self._approval_open = False

    def _model_request(self, event: ModelRequest) -> None:
        self._end_text()
        self._wait = _Wait(f"step {event.step} · waiting for {clean(event.model)}")
        self._waiting = Spinner("dots", Text(self._wait.text(time.monotonic(), self.console.width - 2), "dim"))
        self._sync_live()

    def _retry(self, event: ModelRetry) -> None:
        if self._wait is None:
            self._wait = _Wait(f"step {event.step} · waiting")
        self._wait.retry, self._wait.retry_at = event, time.monotonic() + event.delay_s
        if self._waiting is None:
            self._waiting = Spinner("dots", Text(self._wait.text(time.monotonic(), self.console.width - 2), "dim"))
        self._sync_live(refresh=True)

    def _reasoning_delta(self, event: ReasoningDelta) -> None:
        if self._reasoning is None or self._reasoning.step != event.step:
            self._end_reasoning()
            self._reasoning = _Reasoning(event.step)
            if self._wait is not None:
                self._wait.label = f"step {event.step} · thinking"
        self._reasoning.pieces.append(event.text)
        if not self._area.active:
            self._sync_live()

    def _end_reasoning(self) -> None:
        """The reasoning of a model call, once it is over: dimmed, or one line when hidden."""
        done, self._reasoning = self._reasoning, None
        text = clean("".join(done.pieces)).strip() if done else ""
        if done is None or not text:
            return
        if self.show_reasoning:
            self.console.print(Text(text, "dim italic"))
        else:
            self.console.print(Text(f"thought for {time.monotonic() - done.since:.1f} s ({len(text):,} characters; "
                                    "/reasoning on shows them)", "dim"))

    def _text(self, event: TextDelta) -> None:
        self._end_reasoning()
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
            line = usage_line(event, self.price(event.usage) if self.price else None, self.console.width)
            if self.verbose or event.step > 1 or event.finish_reason == "tool_calls" or event.retries:
                self._print_held_usage()
                self.console.print(line)
            else:  # the turn's summary says it all when this stays its only call
                self._held_usage = line
        self._sync_live()

    def _print_held_usage(self) -> None:
        if self._held_usage is not None:
            self.console.print(self._held_usage)
            self._held_usage = None

    def _call_started(self, event: ToolCallStarted) -> None:
        self._end_text()
        self._print_held_usage()
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
            running.decided_s = event.decided_s
            running.spinner.update(text=Text("running" if event.allowed else "denied", "dim"))
        if event.by != "user":
            self.console.print(decision_line(event))
        self._sync_live()

    def _call_finished(self, event: ToolCallFinished) -> None:
        running = self._running.pop(event.call_id, None)
        shown = running.call.arguments if running else None
        arguments = event.result.get(EDITED_KEY, event.result.get(REPLACED_KEY, shown))
        if event.repeat_of:
            self.console.print(repeat_line(event, arguments))
        else:
            self.console.print(finished_panel(event, arguments, running.decided_s if running else 0.0))
        self._sync_live()

    def _user_step(self, event: UserStep) -> None:
        """What the user changed in step mode, once more in the scrollback (the trace has it too)."""
        said = {"edited_by_user": "the message was edited before sending",
                "skipped_by_user": f"{event.name} skipped: it gets a skipped_by_user result",
                "result_by_user": f"{event.name} does not run: its result is the one made by hand",
                "tools_disabled_by_user": "sent without tools",
                "stopped_by_user": "turn stopped; every call has a result"}
        self.console.print(Text(f"step mode · {clean(said.get(event.action, event.action))}", "dim"))

    def _guard(self, event: GuardTripped) -> None:
        self._end_text()
        self.console.print(Text(f"guard {event.guard}: {one_line(event.detail, 200)}", "yellow"))

    def _route(self, event: Routed) -> None:
        # once a turn (a step asked again after an echo is routed the same way)
        if self._routed != (event.mode, event.allowed):
            self._routed = (event.mode, event.allowed)
            self.console.print(Text(clean(event.said()), "dim"))

    def _notice(self, event: Notice) -> None:
        self.console.print(Text(clean(event.message), "dim"))

    def _hook_ran(self, event: HookRan) -> None:
        """One of the user's hooks ran: one dim line, whatever it did."""
        self._end_text()
        self.console.print(Text(clean(event.said()), "dim"))

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
        if event.steps > 1:
            self._print_held_usage()
        self._held_usage = None
        self.console.print(summary_line(event, cost, cost_unknown=self.price is not None and cost is None,
                                        width=min(SUMMARY_WIDTH, self.console.width)))

    # ----- the live area -----

    def _reasoning_tail(self) -> Text:
        """The last few lines of the streaming reasoning, each cut to the width."""
        assert self._reasoning is not None
        width = max(20, self.console.width)
        tail = clean("".join(self._reasoning.pieces)[-REASONING_LINES * width:])
        lines = [line[-width:] for line in tail.splitlines()[-REASONING_LINES:]]
        return Text("\n".join(lines), "dim italic", no_wrap=True, overflow="crop")

    def _end_text(self) -> None:
        self._end_reasoning()
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
        if self._reasoning is not None and self.show_reasoning:
            parts.append(self._reasoning_tail())
        if self._waiting is not None:
            if self._wait is not None:
                self._waiting.update(text=Text(self._wait.text(time.monotonic(), self.console.width - 2), "dim"))
            parts.append(self._waiting)
        for running in list(self._running.values()):
            if not running.awaiting_approval:
                parts.append(running_panel(running.call, running.spinner))
        return Group(*parts)
