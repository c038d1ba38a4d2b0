"""Plain lines for scripts: the surface of ``glassloop ask``, with nobody at the terminal.

Progress goes to stderr as plain lines (``step 1 call list_todos {}``), the answer to stdout
as it streams (``AnswerStream``), or one JSON object (``PlainLines.json``). Secrets are
redacted from everything printed, with a model call's text joined first. Model, tool and
server text is untrusted: progress lines are always cleaned of escape sequences and control
characters; the answer is cleaned only when stdout is a terminal, so piped output stays
byte-exact; the JSON escapes the C1 controls and bidirectional overrides that JSON itself
leaves raw. No Rich here.
"""

from __future__ import annotations

import json
import re
from typing import Any, TextIO

from repl.config.load import Settings
from repl.config.redact import Redactor, redactor_for
from repl.loop.approval import Asker
from repl.loop.events import (
    ApprovalDecided,
    ErrorEvent,
    Event,
    EventLog,
    GuardTripped,
    ModelUsage,
    Notice,
    Routed,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)
from repl.ui.escape import clean, json_display

MAX_HELD_CHARS = 8192  # streamed text held back for a line (or word) end, at most


class Unattended:
    """The part of a surface with nobody at it (``ask``, a ``/compare`` run): no live area,
    no question answered, no one to approve, nothing to show while waiting."""

    def waiting(self, status: str | None) -> None:
        pass

    def stop_live(self) -> None:
        pass

    def confirm(self, question: str) -> bool:
        return False

    def asker(self) -> Asker | None:
        return None


class PlainLines(Unattended):
    """The session's surface for ``ask``: every event kept (``log``), the streamed answer on
    ``out`` unless the result is one JSON object, progress, notes and errors as lines on
    ``err``; what it waits for is a status line written over in place when ``err`` is a
    terminal, else each phase once (``preparing …``, ``starting …``), not every tick."""

    def __init__(self, settings: Settings, out: TextIO, err: TextIO, *, stream_answer: bool) -> None:
        self.out, self.err, self.terminal = out, err, _is_terminal(err)
        self.redact = redactor_for(settings)
        self.log = EventLog()
        self.answer = AnswerStream(out, self.redact, _is_terminal(out)) if stream_answer else None
        self._phases: set[str] = set()
        self._in_place = False  # a status line is on the screen

    def render(self, event: Event) -> None:
        self.log(event)
        if self.answer:
            self.answer(event)
        if line := _progress_line(event):
            self.info(line)

    def info(self, text: str) -> None:
        print(clean(self.redact(text)), file=self.err, flush=True)

    def error(self, text: str) -> None:
        self.info(f"error: {text}")

    def json(self, payload: dict[str, Any]) -> None:
        """The one JSON object of ``ask --json``, redacted."""
        print(json_display(self.redact.value(payload)), file=self.out, flush=True)

    def waiting(self, status: str | None) -> None:
        if status and status.startswith("waiting for MCP"):  # ticks each second: in place, or nothing
            if self.terminal:
                self.err.write("\r\x1b[2K" + clean(status))
                self.err.flush()
                self._in_place = True
            return
        if status is None:
            if self._in_place:
                self.err.write("\r\x1b[2K")
                self.err.flush()
                self._in_place = False
            return
        phase = status.split("…")[0]
        if phase not in self._phases:
            self._phases.add(phase)
            self.info(phase.strip() + "…")


def _progress_line(event: Event) -> str | None:
    """The progress line of an event, if it has one."""
    if isinstance(event, ToolCallStarted):
        args = json.dumps(event.arguments, ensure_ascii=False) if not isinstance(event.arguments, str) else event.arguments
        return f"step {event.step} call {event.name} {args}"
    if isinstance(event, ToolCallFinished):
        status = "ok" if event.ok else f"error {event.error_type}"
        if event.repeat_of:
            return f"step {event.step} repeat {event.name} {status}: identical to {event.repeat_of}, not run again"
        return f"step {event.step} done {event.name} {status} {event.duration_s * 1000:.0f} ms"
    if isinstance(event, ApprovalDecided) and not event.allowed:
        return f"step {event.step} denied {event.name}: {event.reason}"
    if isinstance(event, ModelUsage):
        u = event.usage
        mark = "~" if u.estimated else ""
        return (f"step {event.step} model in {mark}{u.input_tokens} (cached {u.cached_tokens}) "
                f"out {mark}{u.output_tokens} {event.latency_s:.2f} s")
    if isinstance(event, GuardTripped):
        return f"stopped: {event.guard} ({event.detail})"
    if isinstance(event, ErrorEvent):
        return f"error: {event.message}"
    if isinstance(event, Notice):
        return event.message
    if isinstance(event, Routed):
        return f"step {event.step} {event.said()}"
    return None


class AnswerStream:
    """The model's text on stdout as it streams (the answer, and any text it wrote before
    calling tools). On a terminal it is cleaned and written a word at a time; piped it
    stays byte-exact and is written a line at a time. Either way a secret is never split
    across two writes, so each write can be redacted on its own (keys hold no spaces)."""

    def __init__(self, out: TextIO, redact: Redactor, terminal: bool) -> None:
        self.out, self.redact, self.terminal = out, redact, terminal
        self._held = ""
        self._line_open = False  # the last write did not end a line

    def __call__(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self._held += event.text
            cut = _word_break(self._held) if self.terminal else self._held.rfind("\n") + 1
            if len(self._held) - cut > MAX_HELD_CHARS:  # a line (or word) without end: out it goes
                cut = len(self._held)
            ready, self._held = self._held[:cut], self._held[cut:]
            self._write(ready)
        elif isinstance(event, ModelUsage | ErrorEvent | TurnFinished):  # the call's text is whole
            ready, self._held = self._held, ""
            self._write(ready + ("\n" if self._line_open or (ready and not ready.endswith("\n")) else ""))

    def _write(self, text: str) -> None:
        if not text:
            return
        text = self.redact(text)
        self.out.write(clean(text) if self.terminal else text)
        self.out.flush()
        self._line_open = not text.endswith("\n")


def _word_break(text: str) -> int:
    """Where ``text`` may be cut for writing: after its last whitespace, unless the word
    before is "Bearer" (a token follows it; redaction needs both)."""
    for match in reversed(list(re.finditer(r"\s+", text))):
        before = text[: match.start()].rsplit(None, 1)
        if not (before and before[-1].lower() == "bearer"):
            return match.end()
    return 0


def _is_terminal(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False
