"""``glassloop ask``: one turn, no terminal UI.

Progress goes to stderr as plain lines, the answer to stdout as it streams
(``AnswerStream``; or one JSON object with ``--json``). Exit codes: 0 answered (also after a guard stopped
the loop and the model gave a final answer), 1 the turn failed (provider
error) or ended without any answer text, 130 interrupted. With ``--json`` a failure
has a top-level ``"error": {"type", "message"}``. Configuration errors exit with 2 before this runs, a
``--trace-file`` that cannot be written before the model is asked.

Secrets are redacted from everything printed (answer, progress, ``--json``),
with a model call's text joined first. Model, tool and server text is
untrusted: progress lines on stderr are always cleaned of escape sequences
and control characters; the answer is cleaned only when stdout is a
terminal, so piped output stays byte-exact; ``--json`` escapes the C1
controls and bidirectional overrides that JSON itself leaves raw.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from repl.config.load import Settings
from repl.config.redact import Redactor, redactor_for
from repl.config.settings import ApprovalMode
from repl.loop.cost import Cost
from repl.loop.events import (
    ApprovalDecided,
    ErrorEvent,
    Event,
    EventLog,
    GuardTripped,
    ModelUsage,
    Notice,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    WireRecord,
    to_dict,
)
from repl.session.core import Door, SessionCore
from repl.session.runtime import McpStart
from repl.session.seams import Unattended
from repl.tracing.trace import joined_text
from repl.ui.escape import clean, json_display  # pure; imports no rich

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
MAX_HELD_CHARS = 8192  # streamed text held back for a line (or word) end, at most



class Progress:
    """Plain progress lines for scripts: ``step 1 call list_todos {}``, redacted and cleaned."""

    def __init__(self, out: TextIO, redact: Redactor | None = None) -> None:
        self.out = out
        self.redact = redact or Redactor()

    def __call__(self, event: Event) -> None:
        line = _progress_line(event)
        if line:
            self.say(line)

    def say(self, line: str) -> None:
        print(clean(self.redact(line)), file=self.out, flush=True)


def _progress_line(event: Event) -> str | None:
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


class _Lines(Unattended):
    """The core's surface for ``ask``: no terminal. Events go to this run's subscribers (the
    event log, the streamed answer, the progress lines); notes and errors are progress lines;
    what it waits for is a status line written over in place on a terminal stderr, else each
    phase once (``preparing …``, ``starting …``), not every tick."""

    def __init__(self, progress: Progress, err: TextIO) -> None:
        self.progress, self.err, self.terminal = progress, err, _is_terminal(err)
        self.subscribers: list[Callable[[Event], None]] = []
        self._phases: set[str] = set()
        self._in_place = False  # a status line is on the screen

    def render(self, event: Event) -> None:
        for subscriber in self.subscribers:
            subscriber(event)

    def info(self, text: str) -> None:
        self.progress.say(text)

    def error(self, text: str) -> None:
        self.progress.say(f"error: {text}")

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
            self.progress.say(phase.strip() + "…")


def run_ask(settings: Settings, question: str, *, as_json: bool, assume_yes: bool,
            trace_file: Path | None, stdout: TextIO | None = None,
            stderr: TextIO | None = None) -> int:
    """One turn through the session core (the REPL's), as the ``ask`` door: no journal, nobody
    to ask (side effects only with ``--yes``), the SDK imported while the rest starts."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr  # this run's streams, not the import's
    redact = redactor_for(settings)
    progress = Progress(stderr, redact)
    surface = _Lines(progress, stderr)
    mode: ApprovalMode = "auto" if assume_yes else ("read-only" if settings.approval == "read-only" else "ask")
    door = Door("ask", journal=False, trace_file=trace_file, warm=True, approval=mode)
    try:
        core = SessionCore(settings, surface, interactive=False, door=door)
    except OSError as exc:  # the trace file asked for by name: no answer without it
        progress.say(f"error: cannot write the trace file {trace_file}: {exc.strerror or exc}")
        return EXIT_USAGE
    log = EventLog()
    answer = None if as_json else AnswerStream(stdout, redact, _is_terminal(stdout))
    surface.subscribers = [log, *([answer] if answer else []), progress]
    for line in core.instructions.lines() if core.instructions else []:  # AGENTS.md read: said, as the REPL does
        progress.say(line)
    core.start_background()
    try:
        message = core.with_mentions(question)  # @path: the file's text goes with the question
        if message is None:
            return EXIT_USAGE
        finished = core.run_turn(message)
        if finished is None:
            failure = core.provider_failure
            if as_json:
                kind, message = (failure.kind, failure.message) if failure else ("interrupted", "interrupted")
                _print_json({"answer": "", "stopped_by": "error", "steps": 0,
                             "error": {"type": kind, "message": message}}, stdout, redact)
            return EXIT_FAILED if failure else EXIT_INTERRUPTED
        return _answer(finished, log, core.mcp_start, core.cost, as_json=as_json,
                       assume_yes=assume_yes, streamed=answer is not None, stdout=stdout,
                       stderr=stderr, progress=progress, redact=redact)
    finally:  # after the answer is out; a server still running is left to stop on its own
        core.close(detach=True)


def _answer(finished: TurnFinished, log: EventLog, mcp: McpStart | None, cost: Cost, *,
            as_json: bool, assume_yes: bool, streamed: bool, stdout: TextIO, stderr: TextIO,
            progress: Progress, redact: Redactor) -> int:
    """The turn's answer printed and flushed; the exit code."""
    denied = [e for e in log.of(ApprovalDecided) if not e.allowed]
    if denied and not assume_yes and not as_json:
        print(f"note: {len(denied)} side-effecting call(s) denied; rerun with --yes to allow them",
              file=stderr)
    failure = turn_failure(finished, log)
    if not streamed:
        _print_result(finished, log, as_json, stdout, redact, None if cost.unpriced else cost.usd, failure, mcp)
    if failure and failure[0] == "no_answer" and not as_json:
        progress.say(f"error: {failure[1]}")
    stdout.flush()
    if finished.stopped_by == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_FAILED if failure else EXIT_OK


def turn_failure(finished: TurnFinished, log: EventLog) -> tuple[str, str] | None:
    """(type, message) when the turn gave no answer: a provider error, Ctrl-C, or an
    answer without any text (a guard stopped the loop and the final call said nothing)."""
    if finished.stopped_by == "error":
        errors = log.of(ErrorEvent)
        return (errors[-1].kind, errors[-1].message) if errors else ("error", "the turn failed")
    if finished.stopped_by == "interrupted":
        return "interrupted", "interrupted before the answer was complete"
    if finished.answer.strip():
        return None
    guards = log.of(GuardTripped)
    if guards:
        why = f"the turn stopped ({guards[-1].guard}: {guards[-1].detail}) and the final answer was empty"
    else:
        why = "the model's answer was empty"
    return "no_answer", f"no answer: {why}"


def _print_result(finished: TurnFinished, log: EventLog, as_json: bool, out: TextIO,
                  redact: Redactor, cost_usd: float | None = None,
                  failure: tuple[str, str] | None = None, mcp: McpStart | None = None) -> None:
    if as_json:
        payload: dict[str, Any] = {
            "answer": finished.answer,
            "stopped_by": finished.stopped_by,
            "steps": finished.steps,
            "usage": asdict(finished.usage),
            "cost_usd": cost_usd,  # null when the model has no price
            "trace": [to_dict(e) for e in joined_text(log.events) if not isinstance(e, WireRecord)],  # bodies: ID.wire
        }
        if mcp is not None:  # with MCP servers configured: {"ready": [...], "not_ready": {name: why}}
            payload["mcp"] = mcp.as_json()
        if failure:  # one place for scripts to look: {"type", "message"}
            payload["error"] = {"type": failure[0], "message": failure[1]}
        _print_json(payload, out, redact)
    elif finished.answer:
        answer = redact(finished.answer)
        print(clean(answer) if _is_terminal(out) else answer, file=out)


def _print_json(payload: dict[str, Any], out: TextIO, redact: Redactor) -> None:
    print(json_display(redact.value(payload)), file=out)


def _is_terminal(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False
