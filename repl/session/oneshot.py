"""``glassloop ask``: one turn through the session core, no terminal UI.

Its output is the plain surface's (``repl.ui.plain.PlainLines``): progress on stderr, the
answer on stdout as it streams, one JSON object with ``--json``, or each event as a JSON line
and that object last with ``--stream-json``. The turn is a session's, journaled as the REPL's
(unless ``save`` is off: ``--no-save``), and may continue a saved one (``-c``, ``--session``)
with the REPL's resume. Exit codes: 0 answered (also after a guard stopped the loop and the
model gave a final answer), 1 the turn failed (provider error) or ended without any answer
text, 2 the session to continue cannot be (no such session, an unreadable journal), 130
interrupted. With ``--json`` a failure has a top-level ``"error": {"type", "message"}``.
Configuration errors exit with 2 before this runs, a ``--trace-file`` that cannot be written
before the model is asked.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from repl.config.load import Settings
from repl.config.settings import ApprovalMode
from repl.loop.events import (
    ApprovalDecided,
    ErrorEvent,
    EventLog,
    GuardTripped,
    TurnFinished,
    WireRecord,
    to_dict,
)
from repl.session.core import Door, SessionCore
from repl.tracing.trace import joined_text
from repl.ui.plain import PlainLines  # pure; imports no rich

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def run_ask(settings: Settings, question: str, *, as_json: bool, assume_yes: bool,
            trace_file: Path | None, piped: str = "", stdout: TextIO | None = None,
            stderr: TextIO | None = None, stream_json: bool = False, session: str | None = None,
            save: bool = False) -> int:
    """One turn through the session core (the REPL's), as the ``ask`` door: nobody to ask (side
    effects only with ``--yes``), the SDK imported while the rest starts. ``question`` is what
    the person typed: its ``@path`` mentions attach files; ``piped`` (text on standard input)
    goes along as data and attaches nothing. ``session``: the saved session to continue (an
    id, its start, ``ID@k`` or ``last``); ``save``: journal the turn as the REPL does."""
    # this run's streams, not the import's
    structured = as_json or stream_json
    lines = PlainLines(settings, stdout or sys.stdout, stderr or sys.stderr, stream_answer=not structured,
                       stream_events=stream_json)
    mode: ApprovalMode = "auto" if assume_yes else ("read-only" if settings.approval == "read-only" else "ask")
    door = Door("ask", journal=save, trace_file=trace_file, warm=True, approval=mode)
    try:
        core = SessionCore(settings, lines, interactive=False, door=door)
    except OSError as exc:  # the trace file asked for by name: no answer without it
        reason = exc.strerror or str(exc)
        if exc.filename and Path(exc.filename) != trace_file:  # one of its folders
            reason = f"cannot make the folder {exc.filename} ({reason})"
        lines.error(f"cannot write the trace file {trace_file}: {reason}")
        return EXIT_USAGE
    try:
        if session is not None:
            if not core.resume(session):  # said in one line
                return EXIT_USAGE
            for line in core.resumed_lines():
                lines.info(line)
        else:
            core.open_journal()
            for line in core.instructions.lines() if core.instructions else []:  # AGENTS.md read: said, as the REPL does
                lines.info(line)
        core.start_background()
        return _turn(core, lines, question, piped, structured=structured, assume_yes=assume_yes)
    finally:  # after the answer is out; a server still running is left to stop on its own
        core.close(detach=True)


def _turn(core: SessionCore, lines: PlainLines, question: str, piped: str, *,
          structured: bool, assume_yes: bool) -> int:
    message = core.with_mentions(question) if question else ""  # @path: the file goes along
    if message is None:
        return EXIT_USAGE
    finished = core.run_turn(_with_piped(message, piped))
    if finished is None:
        return _unanswered(core, lines, structured)
    return _answered(finished, core, lines, as_json=structured, assume_yes=assume_yes)


def _with_piped(question: str, piped: str) -> str:
    """The question, then the piped text in a fence longer than any inside it (the piped text
    alone when nothing was typed)."""
    if not piped.strip():
        return question
    if not question:
        return piped.strip()
    fence = "```"
    while fence in piped:
        fence += "`"
    return f"{question}\n\n{fence}\n{piped.strip(chr(10))}\n{fence}"


def _unanswered(core: SessionCore, lines: PlainLines, as_json: bool) -> int:
    """No turn ran: no model could be reached (the error is said already), or Ctrl-C while it started."""
    failure = core.provider_failure
    blocked = core.prompt_blocked  # a hook of the user's kept the message back (its line is out)
    if as_json:
        kind, message = (("blocked_by_hook", blocked) if blocked else (failure.kind, failure.message)
                         if failure else ("interrupted", "interrupted"))
        lines.json({"answer": "", "stopped_by": "error", "steps": 0, "session": _saved_as(core),
                    "error": {"type": kind, "message": message}})
    return EXIT_FAILED if failure or blocked else EXIT_INTERRUPTED


def _saved_as(core: SessionCore) -> str | None:
    """The id ``--session`` continues this session by; None when it is not saved (``--no-save``,
    a journal that could not be written, no turn in it)."""
    return core.session_id if core.saved else None


def _answered(finished: TurnFinished, core: SessionCore, lines: PlainLines, *,
              as_json: bool, assume_yes: bool) -> int:
    """The end of the turn said (the answer itself streamed already, unless ``--json``); the exit code."""
    denied = [e for e in lines.log.of(ApprovalDecided) if not e.allowed]
    if denied and not assume_yes and not as_json:
        lines.info(f"note: {len(denied)} side-effecting call(s) denied; rerun with --yes to allow them")
    failure = turn_failure(finished, lines.log)
    if as_json:
        lines.json(_result(finished, core, lines.log, failure))
    elif failure and failure[0] == "no_answer":
        lines.error(failure[1])
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


def _result(finished: TurnFinished, core: SessionCore, log: EventLog,
            failure: tuple[str, str] | None) -> dict[str, Any]:
    """The one JSON object of ``ask --json``."""
    result: dict[str, Any] = {
        "answer": finished.answer,
        "stopped_by": finished.stopped_by,
        "steps": finished.steps,
        "usage": asdict(finished.usage),
        "cost_usd": None if core.cost.unpriced else core.cost.usd,  # null when the model has no price
        "trace": [to_dict(e) for e in joined_text(log.events) if not isinstance(e, WireRecord)],  # bodies: ID.wire
        "session": _saved_as(core),
    }
    if core.mcp_start is not None:  # with MCP servers configured: {"ready": [...], "not_ready": {name: why}}
        result["mcp"] = core.mcp_start.as_json()
    if failure:  # one place for scripts to look: {"type", "message"}
        result["error"] = {"type": failure[0], "message": failure[1]}
    return result
