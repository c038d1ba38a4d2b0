"""Turning trace records into a readable timeline (``/trace``, ``glassloop trace``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from repl.loop.events import Routed, short_command
from repl.tracing.attached import Attached, split_message
from repl.tracing.trace import read_records, turns
from repl.ui.escape import clean, json_display, one_line


def trace_path(trace_dir: Path, session: str) -> Path | None:
    """The trace file for a session id, a path, or ``last`` (newest file)."""
    candidate = Path(session)
    if candidate.suffix == ".jsonl" and candidate.is_file():
        return candidate
    if session == "last":
        files = sorted(trace_dir.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
        return files[-1] if files else None
    path = trace_dir / f"{session}.jsonl"
    return path if path.is_file() else None


def select_turns(path: Path, which: str, view: Literal["timeline", "events", "json"] = "timeline",
                 width: int = 80) -> list[str]:
    """The lines of ``view`` for the turns ``which`` names: their timelines, their events, or
    their records as JSON."""
    grouped = turns(read_records(path))
    chosen = _chosen(grouped, which, path)
    if not chosen:
        return ["(the trace is empty)"]
    if view == "json":
        return [json_display(r) for group in chosen for r in group]
    if view == "events":
        return [line for group in chosen for line in format_turn(group)]
    undone = undone_turns(grouped)
    return [line for n, group in enumerate(chosen) for line in ([""] if n else []) + draw_turn(group, width, undone)]


def chosen_turns(path: Path, which: str) -> list[list[dict[str, Any]]]:
    """The turns of the trace at ``path`` that ``which`` names (a number, 'last' or 'all');
    ValueError naming what is wrong."""
    return _chosen(turns(read_records(path)), which, path)


def _chosen(grouped: list[list[dict[str, Any]]], which: str, path: Path) -> list[list[dict[str, Any]]]:
    try:
        chosen = pick_turns(grouped, which)
    except ValueError:
        raise ValueError(f"--turn takes a number, 'last' or 'all', not {which!r}") from None
    if chosen is None:
        raise ValueError(f"no turn {int(which)} in {path}")
    return chosen


def pick_turns(grouped: list[list[dict[str, Any]]], which: str) -> list[list[dict[str, Any]]] | None:
    """The turns (record groups) that ``which`` names: a number, 'last' or 'all'; [] when there
    are none, None when no turn has that number; ValueError when ``which`` is no number."""
    if not grouped or which == "all":
        return grouped
    if which == "last":
        return grouped[-1:]
    number = int(which)
    return [g for g in grouped if g and g[0].get("turn") == number] or None


def format_turn(records: list[dict[str, Any]]) -> list[str]:
    """One line per model request and tool call, with timings relative to the turn start."""
    if not records:
        return []
    start = _time(records[0], 0.0)
    lines: list[str] = []
    for r in records:
        at = f"{_time(r, start) - start:7.2f}s"
        line = _describe(r)
        if line:
            lines.append(f"{at}  {line}")
    return lines


def _describe(r: dict[str, Any]) -> str | None:
    kind = r.get("type")
    if kind == "turn_started":
        return f"turn {as_int(r.get('turn'))}: {as_text(r.get('user_text', ''))!r}"
    if kind == "model_usage":
        u = as_dict(r.get("usage"))
        mark = "~" if u.get("estimated") is True else ""
        retries = f" · retries {as_int(r.get('retries'))}" if as_int(r.get("retries")) else ""
        return (f"model step {as_int(r.get('step'))}: in {mark}{as_int(u.get('input_tokens'))} "
                f"(cached {as_int(u.get('cached_tokens'))}) out {mark}{as_int(u.get('output_tokens'))} · "
                f"{as_number(r.get('latency_s')):.2f} s · finish {as_text(r.get('finish_reason'))}{retries}")
    if kind == "compared":
        return f"/compare of turn {as_int(r.get('turn'))}'s question: {compared(r)}"
    if kind == "tool_call_started":
        return f"  call {as_text(r.get('name'))} {json_display(r.get('arguments'))}"
    if kind == "approval_decided":
        verdict = "allowed" if r.get("allowed") is True else "denied"
        reason = f": {as_text(r['reason'])}" if r.get("reason") else ""
        took = f" in {decided:.1f} s" if (decided := as_number(r.get("decided_s"))) else ""
        return f"  {verdict} {as_text(r.get('name'))} by {as_text(r.get('by'))}{took}{reason}"
    if kind == "tool_call_finished":
        status = "ok" if r.get("ok") is True else f"error {as_text(r.get('error_type'))}"
        if r.get("repeat_of"):
            status += f" · identical to {as_text(r['repeat_of'])}, not run again"
        return (f"  result {as_text(r.get('name'))} {status} · {as_number(r.get('duration_s')) * 1000:.0f} ms · "
                f"{json_display(r.get('result'))}")
    if kind == "model_retry":
        return (f"  retry of model step {as_int(r.get('step'))}: attempt {as_int(r.get('attempt'))} of "
                f"{as_int(r.get('attempts'))} after {as_number(r.get('delay_s')):g} s ({as_text(r.get('reason'))})")
    if kind == "user_step":  # what the user changed in step mode
        what = f" {as_text(r['name'])}" if r.get("name") else ""
        return f"  {as_text(r.get('action'))}{what} (step mode)"
    if kind == "step_paused":
        before = "the tools ran" if r.get("before") == "tools" else f"model call {as_int(r.get('step'))}"
        return f"  paused {_took(as_number(r.get('paused_s')))} before {before} (step mode)"
    if kind == "turn_undone":
        return f"turn {as_int(r.get('turn'))} undone"
    if kind == "guard_tripped":
        return f"guard {as_text(r.get('guard'))}: {as_text(r.get('detail'))}"
    if kind == "routed":
        return f"  model step {as_int(r.get('step'))} {routed_said(r)}"
    if kind == "hook_ran":  # the decision first: a narrow screen cuts the end
        tool = f" {as_text(r['tool'])}" if r.get("tool") else ""
        detail = f" ({as_text(r['detail'])})" if r.get("detail") else ""
        return (f"  hook {as_text(r.get('event'))}{tool}: {as_text(r.get('decision'))}{detail} · "
                f"{short_command(as_text(r.get('command')))}")
    if kind == "error":
        return f"error ({as_text(r.get('kind'))}): {as_text(r.get('message'), 500)}"
    if kind == "turn_finished":
        u, steps, calls = as_dict(r.get("usage")), as_int(r.get("steps")), as_int(r.get("tool_calls"))
        return (f"turn end: stopped_by {as_text(r.get('stopped_by'))} · {steps} step{'' if steps == 1 else 's'} · "
                f"{calls} tool call{'' if calls == 1 else 's'} · "
                f"{as_int(u.get('input_tokens')) + as_int(u.get('output_tokens'))} tokens")
    return None


def compared(r: dict[str, Any]) -> str:
    """A ``/compare`` run in one line: its model, the tools it called, tokens, time, how it ended."""
    u, calls = as_dict(r.get("usage")), r.get("tool_calls")
    tools = ", ".join(as_text(c) for c in calls) if isinstance(calls, list) and calls else "no tool call"
    error = f" · {as_text(r['error'])}" if r.get("error") else ""
    return (f"on {as_text(r.get('model'))} (side effects denied): {tools} · "
            f"{as_int(u.get('input_tokens')) + as_int(u.get('output_tokens')):,} tokens · "
            f"{as_number(r.get('duration_s')):.1f} s · stopped_by {as_text(r.get('stopped_by'))}{error}")


# ---- the turn as bars on one time axis (``/trace``, the HTML page) ---------------------

Part = Literal["model", "tool", "approval", "pause", "retry", "setup"]
CELLS: dict[Part, str] = {"model": "█", "tool": "▓", "approval": "░", "pause": "─", "retry": "×", "setup": "▒"}
LEGEND: dict[Part, str] = {"model": "model call", "tool": "tool running", "approval": "waiting for approval",
                           "pause": "paused in step mode", "retry": "failed attempt and the wait to retry",
                           "setup": "before the request (client start-up)"}
LABEL_MAX, INFO_MAX, BAR_MIN = 18, 30, 12
TEXT_MAX = 20_000  # a field read for the timeline: whole (the HTML page shows it all; a terminal cuts it to fit)
STEP_ACTIONS = {"edited_by_user": "edited", "tools_disabled_by_user": "tools off", "skipped_by_user": "skipped",
                "result_by_user": "result by hand", "stopped_by_user": "stopped"}


@dataclass(frozen=True)
class Segment:
    """A stretch of a row: what the time went to. ``note``: what it was (a failed attempt's reason)."""

    part: Part
    start: float
    end: float
    note: str = ""


@dataclass
class Row:
    """One model call, tool call or step-mode pause of a turn; times in seconds from the turn's start."""

    kind: Literal["model", "tool", "pause"]
    label: str
    step: int
    start: float
    end: float
    segments: list[Segment] = field(default_factory=list)
    info: str = ""  # model: tokens in (cached) out; tool: status and duration; pause: its length and what changed
    call_id: str = ""
    model: str = ""  # a model call's model, as the request named it
    usage: dict[str, Any] = field(default_factory=dict)  # a model call's usage record
    record: dict[str, Any] = field(default_factory=dict)  # the call's tool_call_started record


@dataclass(frozen=True)
class TurnHead:
    """What a turn was: its number, the question as sent (an edit in step mode replaces what
    was typed, kept in ``typed``), without the files attached to it (``attached``: path and
    text, raw), and the models it called."""

    number: int
    sent: str
    typed: str = ""
    models: tuple[str, ...] = ()
    attached: tuple[Attached, ...] = ()


def turn_head(records: list[dict[str, Any]]) -> TurnHead | None:
    """The head of a turn's records; None for records from before a first turn."""
    if not records or records[0].get("type") != "turn_started":
        return None
    typed = records[0].get("user_text", "")
    sent, edited = typed, False
    for r in records:
        detail = as_dict(r.get("detail"))
        if r.get("type") == "user_step" and r.get("action") == "edited_by_user" and detail.get("role") == "user":
            sent, edited = detail.get("after"), True
    sent, attached = split_message(sent) if isinstance(sent, str) else (sent, ())
    typed = split_message(typed)[0] if isinstance(typed, str) else typed
    models = dict.fromkeys(as_text(r.get("model"), TEXT_MAX) for r in records if r.get("type") == "model_request")
    return TurnHead(as_int(records[0].get("turn")), as_text(sent, TEXT_MAX), as_text(typed, TEXT_MAX) if edited else "",
                    tuple(models), attached)


def undone_turns(groups: list[list[dict[str, Any]]]) -> set[int]:
    """The numbers of the turns ``/undo`` or ``/retry`` took back (a ``turn_undone`` record
    is written under whichever turn was last then: read it from every group)."""
    return {as_int(r.get("turn")) for group in groups for r in group if r.get("type") == "turn_undone"}


def turn_rows(records: list[dict[str, Any]]) -> tuple[list[Row], float]:
    """The rows of one turn's records, in the order they started, and the turn's length
    (time 0 is the turn's start)."""
    t0 = _time(records[0], 0.0) if records else 0.0
    ended = next((n for n, r in enumerate(records) if r.get("type") == "turn_finished"), len(records))
    last = max((_time(r, t0) for r in records[: ended + 1]), default=t0) - t0  # not an /undo after it
    rows: list[Row] = []
    models: dict[int, Row] = {}
    retries: dict[int, list[tuple[float, float, str]]] = {}  # per model call: (failed at, wait, reason)
    tools: dict[str, Row] = {}
    pause: Row | None = None
    done: list[str] = []  # what the person changed in that pause
    for r in records:
        at, kind, step = _time(r, t0) - t0, r.get("type"), as_int(r.get("step"))
        if kind == "model_request":
            models[step] = _add(rows, Row("model", f"model {step}", step, at, at, model=as_text(r.get("model"), TEXT_MAX)))
            retries[step] = []
        elif kind == "model_retry" and step in models:
            retries[step].append((at, max(0.0, as_number(r.get("delay_s"))), _retry_note(r)))
        elif kind == "model_usage":
            row = models.pop(step, None) or _add(rows, Row("model", f"model {step}", step, at, at))
            began = max(row.start, at - as_number(r.get("latency_s")))  # the call, not the client's set-up
            _close_model(row, began, at, retries.pop(step, []))
            row.info, row.usage = _tokens(r), as_dict(r.get("usage"))
        elif kind == "error":
            for step_of, row in models.items():
                _close_model(row, row.start, at, retries.pop(step_of, []))
                row.info = "error"
            models.clear()
        elif kind == "step_paused":
            label = "paused" if r.get("before") == "model_call" else "  paused"
            if not (rows and rows[-1] is pause and pause.label == label and pause.step == step):
                pause, done = _add(rows, Row("pause", label, step, at, at)), []  # (else: shown again after an edit)
            pause.start = min(pause.start, max(0.0, at - max(0.0, as_number(r.get("paused_s")))))
            pause.end, pause.segments = at, [Segment("pause", pause.start, at)]
            pause.info = " · ".join([f"step mode {_took(at - pause.start)}", *done])
        elif kind == "user_step" and pause is not None and pause.step == step:
            what = STEP_ACTIONS.get(as_text(r.get("action")), as_text(r.get("action")))
            done.append(what + (f" {as_text(r.get('name'))}" if r.get("name") else ""))
            pause.info = " · ".join([f"step mode {_took(pause.end - pause.start)}", *done])
        elif kind == "tool_call_started":
            tools[_call_id(r)] = _add(rows, Row("tool", f"  {as_text(r.get('name'), TEXT_MAX)}", step, at, at,
                                                call_id=_call_id(r), record=r))
        elif kind in ("approval_requested", "approval_decided") and _call_id(r) in tools:
            _approval(tools[_call_id(r)], at, kind == "approval_decided")
        elif kind == "tool_call_finished" and _call_id(r) in tools:
            _close_tool(tools.pop(_call_id(r)), r)
    for step_of, row in models.items():  # cut off (Ctrl-C, a crash): up to the last record
        _close_model(row, row.start, max(row.end, last), retries.pop(step_of, []))
        row.info = "unfinished"
    for row in tools.values():
        row.end = max(row.end, last)
        row.segments.append(Segment("tool", row.segments[-1].end if row.segments else row.start, row.end))
        row.info = "unfinished"
    total = max([last, *(row.end for row in rows)])
    return rows, total


def _add(rows: list[Row], row: Row) -> Row:
    rows.append(row)
    return row


def _close_model(row: Row, began: float, end: float, retries: list[tuple[float, float, str]]) -> None:
    """A model call's segments: the set-up before its request went, each failed attempt with
    the wait before the next, then the attempt that answered (or failed for good)."""
    row.end = end
    if began > row.start:
        row.segments.append(Segment("setup", row.start, began))
    cursor = began
    for failed_at, wait, note in retries:
        until = min(end, max(cursor, failed_at + wait))
        row.segments.append(Segment("retry", cursor, until, note))
        cursor = until
    row.segments.append(Segment("model", cursor, end))


def _approval(row: Row, at: float, decided: bool) -> None:
    if not decided:
        row.segments = [Segment("approval", at, at)]
    else:
        began = row.segments[0].start if row.segments else at
        row.segments = [Segment("approval", began, at)]
    row.end = at


def _close_tool(row: Row, r: dict[str, Any]) -> None:
    ran = as_number(r.get("duration_s"))
    wait = row.segments[0] if row.segments else None
    run_start = wait.end if wait else row.start
    row.end = run_start + ran
    row.segments.append(Segment("tool", run_start, row.end))
    status = "ok" if r.get("ok") is True else as_text(r.get("error_type") or "error")
    waited = wait.end - wait.start if wait else 0.0
    row.info = f"{status} {_took(ran)}" + (f" · waited {_took(waited)}" if waited >= 0.05 else "")


def _retry_note(r: dict[str, Any]) -> str:
    return (f"attempt {as_int(r.get('attempt')) - 1} failed ({as_text(r.get('reason'), 80)}); "
            f"retried after {as_number(r.get('delay_s')):g} s")


# A trace file may come from someone else, or be damaged by hand: each field is read through
# one of these, so a value of the wrong type is read as 0, {} or "?", never raises, and text
# reaches the terminal as one line without escape sequences.
def as_int(value: Any) -> int:
    """``value`` when it is an integer (a turn, step or token count), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def as_number(value: Any, default: float = 0.0) -> float:
    """``value`` when it is a finite number (a time or a duration in seconds), else ``default``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    try:
        number = float(value)
    except OverflowError:  # an integer too big for a float
        return default
    return number if math.isfinite(number) else default


def routed_said(r: dict[str, Any]) -> str:
    """A ``routed`` record in words (``Routed.said``), each field read as the others are."""
    def texts(value: Any) -> tuple[str, ...]:
        return tuple(as_text(item) for item in value) if isinstance(value, list) else ()

    def scores(value: Any) -> tuple[tuple[str, float], ...]:
        pairs = value if isinstance(value, list) else []
        return tuple((as_text(p[0]), as_number(p[1])) for p in pairs[:3] if isinstance(p, list) and len(p) == 2)

    return Routed(as_int(r.get("step")), as_text(r.get("mode")), texts(r.get("allowed")), scores(r.get("top")),
                  as_number(r.get("threshold")), as_text(r.get("by"))).said()


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_text(value: Any, limit: int = 200) -> str:
    """``value`` as one line for the terminal: a string (anything else as JSON) without terminal
    controls, its line breaks made spaces, cut to ``limit``; "?" when it is missing."""
    if value is None:
        return "?"
    text = " ".join(clean(value if isinstance(value, str) else json_display(value)).split())
    return _fit(text, limit)


def _call_id(record: dict[str, Any]) -> str:
    value = record.get("call_id")
    return value if isinstance(value, str) else ""


def _time(record: dict[str, Any], default: float) -> float:
    return as_number(record.get("time"), default)


def _tokens(r: dict[str, Any]) -> str:
    u = as_dict(r.get("usage"))
    mark = "~" if u.get("estimated") is True else ""
    return (f"in {mark}{as_int(u.get('input_tokens')):,} ({as_int(u.get('cached_tokens')):,} cached) "
            f"out {mark}{as_int(u.get('output_tokens')):,}")


def _took(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def draw_turn(records: list[dict[str, Any]], width: int = 80, undone: set[int] | None = None) -> list[str]:
    """A turn as text: its question as sent, a time axis from 0 (the turn's start), one bar
    per model call, tool call and step-mode pause (scaled to its duration, so concurrent
    calls overlap; an approval wait, a retry and the client's start-up in cells of their
    own), a legend, what was decided or went wrong, and how it ended. ``undone``: the turns
    taken back. No line is wider than ``width``."""
    if not records:
        return []
    rows, total = turn_rows(records)
    lines = [_fit(line, width) for line in _title(records, undone or set())]
    if rows:
        label_w = min(LABEL_MAX, max(len(row.label) for row in rows))
        info_w = min(INFO_MAX, max(len(row.info) for row in rows))
        bar_w = max(BAR_MIN, width - label_w - info_w - 2)
        label_w = min(label_w, max(4, width - bar_w - info_w - 2))
        end = f"{total:.2f} s"
        lines.append(_fit(" " * (label_w + 1) + "0 s".ljust(max(4, bar_w - len(end))) + end, width))
        bars = [_bar(row, total, bar_w) for row in rows]
        for row, bar in zip(rows, bars, strict=True):
            lines.append(_fit(f"{_fit(row.label, label_w):<{label_w}} {bar} {_fit(row.info, info_w)}", width))
        used = {cell for bar in bars for cell in bar}
        lines += _wrapped([f"{cell} {LEGEND[part]}" for part, cell in CELLS.items() if cell in used], width)
    notes = [r for r in records[1:] if r.get("type") in ("routed", "approval_decided", "user_step", "guard_tripped",
                                                          "error", "model_retry", "turn_finished", "compared", "hook_ran")
             and not (r.get("type") == "approval_decided" and r.get("by") == "mode" and r.get("allowed"))]
    lines += [_fit(line, width) for r in notes if (line := _describe(r))]
    return lines


def _title(records: list[dict[str, Any]], undone: set[int]) -> list[str]:
    """The turn's question as sent, its models, whether it was undone; what was typed when
    step mode edited it."""
    head = turn_head(records)
    if head is None:
        return [_describe(records[0]) or "before the first turn"]
    title = f"turn {head.number}: {head.sent!r}" + "".join(f" · {model}" for model in head.models)
    title += "".join(f" · attached {as_text(a.path)}" for a in head.attached)
    title += " · undone" if head.number in undone else ""
    return [title, *([f"  (edited in step mode; typed {head.typed!r})"] if head.typed else [])]


def _wrapped(items: list[str], width: int) -> list[str]:
    lines = [""]
    for item in items:
        if lines[-1] and len(lines[-1]) + 2 + len(item) > width:
            lines.append("")
        lines[-1] += ("  " if lines[-1] else "") + item
    return [_fit(line, width) for line in lines if line]


MAIN_PARTS = ("model", "tool", "pause")  # drawn at least one cell wide, however short


def _bar(row: Row, total: float, width: int) -> str:
    scale = width / total if total > 0 else 0.0
    cells = [" "] * width

    def at(time: float) -> float:  # times too far apart for a float (a damaged trace) draw at the start
        x = time * scale
        return x if math.isfinite(x) else 0.0

    for seg in row.segments:
        main = seg.part in MAIN_PARTS
        a = min(width - 1, max(0, int(at(seg.start)) if main else round(at(seg.start))))
        b = min(width, max(a + main, round(at(seg.end))))
        cells[a:b] = CELLS[seg.part] * (b - a)
    return "".join(cells)


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


# ---- the raw wire records of a turn's model calls (``/trace --raw``) -------------------


def raw_calls(groups: list[list[dict[str, Any]]], wire: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The model calls of ``groups`` (turns of a trace) with their raw request, their failed
    attempts (``failed_attempts``: status, the server's answer, the attempt that retried it)
    and their response (``wire`` records, paired by turn and step in file order), and how many
    of those turns' model calls have no raw request (raw records were off then, or the cap
    dropped them)."""
    numbers = {as_int(r.get("turn")) for group in groups for r in group if r.get("type") == "turn_started"}
    calls: list[dict[str, Any]] = []
    for w in wire:
        if as_int(w.get("turn")) not in numbers or w.get("kind") not in ("request", "error", "response"):
            continue
        body = w.get("body") if "omitted_bytes" not in w else {"omitted_bytes": w["omitted_bytes"]}
        key = (as_int(w.get("turn")), as_int(w.get("step")))
        if w["kind"] == "request":
            calls.append({"turn": key[0], "step": key[1], "request": body, "failed_attempts": [], "response": None})
            continue
        open_call = next((c for c in reversed(calls) if (c["turn"], c["step"]) == key and c["response"] is None), None)
        if open_call is None:
            calls.append(open_call := {"turn": key[0], "step": key[1], "request": None, "failed_attempts": [],
                                       "response": None})
        if w["kind"] == "error":
            open_call["failed_attempts"].append(body)
        else:
            open_call["response"] = body
    made = sum(1 for group in groups for r in group if r.get("type") == "model_request")
    return calls, max(0, made - sum(1 for c in calls if c["request"] is not None))


def failed_attempt(record: Any) -> str:
    """'attempt 1 failed: HTTP 429, retried as attempt 2' for an error record."""
    if not isinstance(record, dict):
        return "a failed attempt"
    attempt, status, retry = (record.get(k) for k in ("attempt", "status", "retried_as"))
    what = (f"HTTP {status}" if isinstance(status, int) and status >= 400  # else the answer broke off, or none came
            else one_line(str(record.get("reason") or "no answer"), 80))
    then = f"retried as attempt {retry}" if isinstance(retry, int) else "the call failed"
    return f"attempt {attempt if isinstance(attempt, int) else '?'} failed: {what}, {then}"


def missing_raw(missing: int, dropped: int, why_off: str = "") -> str:
    """Why ``missing`` model calls have no raw record (``dropped``: records the cap dropped)."""
    calls = f"{missing} model call{'' if missing == 1 else 's'}"
    if dropped:
        return f"{calls} without raw records: the oldest were dropped to keep under [trace] raw_max_kb"
    return f"{calls} without raw records" + (f": {why_off}" if why_off else ": they were not kept then")


# ---- tokens per turn (``/usage``) --------------------------------------------------------

CACHED_CELL, INPUT_CELL, OUTPUT_CELL = "░", "▒", "█"


def usage_bars(rows: list[tuple[str, int, int, int, str]], width: int = 40) -> list[str]:
    """One bar per turn from (label, input, cached, output, note): cached input, the rest of
    the input and the output in their own cells, scaled to the biggest turn, so a growing
    context or a cache miss stands out."""
    if not rows:
        return []
    biggest = max(inp + out for _, inp, _, out, _ in rows) or 1
    label_w = max(len(label) for label, *_ in rows)
    lines = [f"tokens per turn  {CACHED_CELL} cached input  {INPUT_CELL} input  {OUTPUT_CELL} output"]
    for label, inp, cached, out, note in rows:
        parts = [(CACHED_CELL, cached), (INPUT_CELL, inp - cached), (OUTPUT_CELL, out)]
        cells = [max(1, round(n * width / biggest)) if n > 0 else 0 for _, n in parts]  # a part > 0 shows
        while sum(cells) > width:  # rounding up the small parts went over: the biggest gives way
            cells[cells.index(max(cells))] -= 1
        bar = "".join(cell * n for (cell, _), n in zip(parts, cells, strict=True))
        lines.append(f"{label:>{label_w}} {bar:<{width}} {inp + out:>9,}" + (f"  {note}" if note else ""))
    return lines
