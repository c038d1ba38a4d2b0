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
import threading
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from repl.config.load import Settings
from repl.config.redact import Redactor, redactor_for
from repl.config.settings import ApprovalMode
from repl.loop.agent import Runner
from repl.loop.approval import Approver
from repl.loop.cost import Cost, price_for, session_budget, usd
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
    Usage,
    WireRecord,
    to_dict,
)
from repl.loop.history import History
from repl.loop.prompts import system_prompt
from repl.providers.base import ProviderError
from repl.session.runtime import (
    McpStart,
    build_registry,
    make_provider,
    new_id,
    not_saved,
    open_trace,
    start_mcp,
    wait_for_mcp,
)
from repl.session.user_tools import UserTools
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


def _phase_printer(progress: Progress):
    """Status lines for scripts: each phase once (``preparing …``, ``starting …``), not every tick."""
    seen: set[str] = set()

    def status(text: str | None) -> None:
        phase = (text or "").split("…")[0]
        if text and phase not in seen:
            seen.add(phase)
            progress.say(phase.strip() + "…")

    return status


def run_ask(settings: Settings, question: str, *, as_json: bool, assume_yes: bool,
            trace_file: Path | None, stdout: TextIO | None = None,
            stderr: TextIO | None = None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr  # this run's streams, not the import's
    session_id = new_id()
    log = EventLog()
    redact = redactor_for(settings)
    progress = Progress(stderr, redact)
    try:
        trace = open_trace(settings, session_id, trace_file, say=progress.say)
    except OSError as exc:
        if trace_file is not None:  # asked for by name: no answer without it
            progress.say(f"error: cannot write the trace file {trace_file}: {exc.strerror or exc}")
            return EXIT_USAGE
        trace = None
        progress.say(not_saved("the trace", settings.trace_dir, exc))
    answer = None if as_json else AnswerStream(stdout, redact, _is_terminal(stdout))
    subscribers: list[Any] = [log, *([answer] if answer else []), progress, *([trace] if trace else [])]

    def emit(event: Event) -> None:
        for subscriber in subscribers:
            subscriber(event)

    mode: ApprovalMode = "auto" if assume_yes else ("read-only" if settings.approval == "read-only" else "ask")
    history = History(system_prompt(extra=settings.system_prompt,
                                    compact=settings.active.embedded))
    registry = build_registry(settings)
    # MCP servers start first, so their start overlaps the SDK's import and the provider's set-up.
    mcp = start_mcp(settings, registry, lambda text: emit(Notice(text)))
    try:
        provider = make_provider(settings.active, settings, _phase_printer(progress))
    except ProviderError as exc:
        if mcp is not None:
            mcp.close(detach=True)
        progress.say(f"error: {exc.message}")
        if as_json:
            _print_json({"answer": "", "stopped_by": "error", "steps": 0,
                         "error": {"type": exc.kind, "message": exc.message}}, stdout, redact)
        return EXIT_FAILED
    if notice := getattr(provider, "notice", None):  # the local server's start
        emit(Notice(notice))
    warming = _warm(provider)
    for line in UserTools(settings, registry, lambda text: None).load().problems:
        emit(Notice(line))
    try:
        return _answer(settings, history, question, provider, registry, mode, emit, log, warming, mcp,
                       as_json=as_json, assume_yes=assume_yes, streamed=answer is not None,
                       stdout=stdout, stderr=stderr, progress=progress, redact=redact)
    finally:  # after the answer is out; a server still running is left to stop on its own
        provider.close()
        if trace:
            trace.close()
        if mcp is not None:
            mcp.close(detach=True)


def _answer(settings: Settings, history: History, question: str, provider: Any, registry: Any,
            mode: ApprovalMode, emit: Any, log: EventLog, warming: threading.Thread, mcp: Any, *,
            as_json: bool, assume_yes: bool, streamed: bool, stdout: TextIO, stderr: TextIO,
            progress: Progress, redact: Redactor) -> int:
    """The turn, its answer printed and flushed; the exit code."""
    warming.join()
    started = None if mcp is None else wait_for_mcp(mcp, _status_line(stderr))
    if started is not None and (line := started.line()):
        emit(Notice(line))
    with Runner(provider, registry, Approver(mode), settings.guards, emit,
                budget=session_budget(settings, Usage(), Cost())) as runner:
        finished = runner.run_turn(history, question)
    denied = [e for e in log.of(ApprovalDecided) if not e.allowed]
    if denied and not assume_yes and not as_json:
        print(f"note: {len(denied)} side-effecting call(s) denied; rerun with --yes to allow them",
              file=stderr)
    failure = turn_failure(finished, log)
    if not streamed:
        _print_result(finished, log, as_json, stdout, redact, usd(finished.usage, price_for(settings)), failure,
                      started)
    if failure and failure[0] == "no_answer" and not as_json:
        progress.say(f"error: {failure[1]}")
    stdout.flush()
    if finished.stopped_by == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_FAILED if failure else EXIT_OK


def _warm(provider: Any) -> threading.Thread:
    """The provider's SDK imported on a thread, while MCP servers start and user tools load;
    a failure here is left for the model call to report."""
    def warm() -> None:
        try:
            getattr(provider, "warm", lambda: None)()
        except Exception:  # noqa: BLE001 - the first model call meets it again and says why
            pass

    thread = threading.Thread(target=warm, daemon=True, name="glassloop-warm")
    thread.start()
    return thread


def _status_line(out: TextIO) -> Callable[[str | None], None]:
    """A status line written over in place on a terminal ``out`` (None clears it); nothing when
    ``out`` is not a terminal (scripts get the progress lines only)."""
    terminal = _is_terminal(out)

    def status(text: str | None) -> None:
        if terminal:
            out.write("\r\x1b[2K" + (clean(text) if text else ""))
            out.flush()

    return status


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
