"""Turning trace records into a readable timeline (``/trace``, ``glassloop trace``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

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


def select_turns(path: Path, which: str, *, as_json: bool = False) -> list[str]:
    chosen = chosen_turns(path, which)
    if not chosen:
        return ["(the trace is empty)"]
    if as_json:
        return [json_display(r) for group in chosen for r in group]
    return [line for group in chosen for line in format_turn(group)]


def chosen_turns(path: Path, which: str) -> list[list[dict[str, Any]]]:
    """The turns of the trace at ``path`` that ``which`` names (a number, 'last' or 'all');
    ValueError naming what is wrong."""
    grouped = turns(read_records(path))
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
    if kind == "guard_tripped":
        return f"guard {as_text(r.get('guard'))}: {as_text(r.get('detail'))}"
    if kind == "error":
        return f"error ({as_text(r.get('kind'))}): {as_text(r.get('message'), 500)}"
    if kind == "turn_finished":
        u = as_dict(r.get("usage"))
        return (f"turn end: stopped_by {as_text(r.get('stopped_by'))} · {as_int(r.get('steps'))} steps · "
                f"{as_int(r.get('tool_calls'))} tool calls · "
                f"{as_int(u.get('input_tokens')) + as_int(u.get('output_tokens'))} tokens")
    return None


# ---- the turn as bars on one time axis (``/trace``, the HTML page) ---------------------

MODEL_CELL, TOOL_CELL, WAIT_CELL = "█", "▓", "░"
LEGEND = {MODEL_CELL: "model call", TOOL_CELL: "tool running", WAIT_CELL: "waiting for approval"}
LABEL_MAX, INFO_MAX, BAR_MIN = 18, 30, 12


@dataclass
class Row:
    """One model call or tool call of a turn; times in seconds from the turn's start."""

    kind: Literal["model", "tool"]
    label: str
    step: int
    start: float
    end: float
    wait: tuple[float, float] | None = None  # waiting for the person's approval
    info: str = ""  # model: tokens in (cached) out; tool: status and duration
    call_id: str = ""
    record: dict[str, Any] = field(default_factory=dict)  # the call's tool_call_started record


def turn_rows(records: list[dict[str, Any]]) -> tuple[list[Row], float]:
    """The rows of one turn's records, in the order they started, and the turn's length."""
    t0 = _time(records[0], 0.0) if records else 0.0
    last = max((_time(r, t0) for r in records), default=t0) - t0
    rows: list[Row] = []
    models: dict[int, Row] = {}
    tools: dict[str, Row] = {}
    for r in records:
        at, kind, step = _time(r, t0) - t0, r.get("type"), as_int(r.get("step"))
        if kind == "model_request":
            models[step] = Row("model", f"model {step}", step, at, at)
            rows.append(models[step])
        elif kind == "model_usage":
            row = models.pop(step, None) or _add(rows, Row("model", f"model {step}", step, 0.0, at))
            row.start = max(row.start, at - as_number(r.get("latency_s")))  # the call, not the client's set-up
            row.end, row.info = at, _tokens(r)
        elif kind == "error":
            for row in models.values():
                row.end, row.info = at, "error"
            models.clear()
        elif kind == "tool_call_started":
            tools[_call_id(r)] = _add(rows, Row("tool", f"  {as_text(r.get('name'))}", step, at, at,
                                                call_id=_call_id(r), record=r))
        elif kind in ("approval_requested", "approval_decided") and _call_id(r) in tools:
            row = tools[_call_id(r)]
            row.wait = (at, at) if kind == "approval_requested" else ((row.wait or (at, at))[0], at)
        elif kind == "tool_call_finished" and _call_id(r) in tools:
            row = tools.pop(_call_id(r))
            ran = as_number(r.get("duration_s"))
            row.end = (row.wait[1] if row.wait else row.start) + ran
            status = "ok" if r.get("ok") is True else as_text(r.get("error_type") or "error")
            waited = row.wait[1] - row.wait[0] if row.wait else 0.0
            row.info = f"{status} {_took(ran)}" + (f" · waited {_took(waited)}" if waited >= 0.05 else "")
    for row in [*models.values(), *tools.values()]:  # cut off (Ctrl-C, a crash): up to the last record
        row.end, row.info = max(row.end, last), row.info or "unfinished"
    total = max([last, *(row.end for row in rows)])
    return rows, total


def _add(rows: list[Row], row: Row) -> Row:
    rows.append(row)
    return row


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


def draw_turn(records: list[dict[str, Any]], width: int = 80) -> list[str]:
    """A turn as text: its question, a time axis, one bar per model call and tool call
    (scaled to its duration, so concurrent calls overlap; the approval wait drawn with
    its own cells), a legend, what was decided or went wrong, and how it ended. No line
    is wider than ``width``."""
    if not records:
        return []
    rows, total = turn_rows(records)
    lines = [_fit(line, width) for r in records[:1] if (line := _describe(r))]
    if rows:
        label_w = min(LABEL_MAX, max(len(row.label) for row in rows))
        info_w = min(INFO_MAX, max(len(row.info) for row in rows))
        bar_w = max(BAR_MIN, width - label_w - info_w - 2)
        label_w = min(label_w, max(4, width - bar_w - info_w - 2))
        origin = min(row.start for row in rows)  # the axis starts at the first call, not the set-up before it
        start, end = f"{origin:.2f} s", f"{total:.2f} s"
        lines.append(_fit(" " * (label_w + 1) + start.ljust(max(len(start) + 1, bar_w - len(end))) + end, width))
        bars = [_bar(row, origin, total, bar_w) for row in rows]
        for row, bar in zip(rows, bars, strict=True):
            lines.append(_fit(f"{_fit(row.label, label_w):<{label_w}} {bar} {_fit(row.info, info_w)}", width))
        used = {cell for bar in bars for cell in bar} - {" "}
        lines.append(_fit("  ".join(f"{cell} {name}" for cell, name in LEGEND.items() if cell in used), width))
    notes = [r for r in records[1:] if r.get("type") in ("approval_decided", "user_step", "guard_tripped", "error",
                                                          "model_retry", "turn_finished")
             and not (r.get("type") == "approval_decided" and r.get("by") == "mode" and r.get("allowed"))]
    lines += [_fit(line, width) for r in notes if (line := _describe(r))]
    return lines


def _bar(row: Row, origin: float, total: float, width: int) -> str:
    scale = width / (total - origin) if total > origin else 0.0
    cells = [" "] * width

    def at(time: float) -> float:  # times too far apart for a float (a damaged trace) draw at the start
        x = (time - origin) * scale
        return x if math.isfinite(x) else 0.0

    def paint(start: float, end: float, cell: str) -> None:
        a = min(width - 1, max(0, int(at(start))))
        b = min(width, max(a + 1, round(at(end))))
        cells[a:b] = cell * (b - a)

    run_start = row.start
    if row.wait is not None:
        paint(row.wait[0], row.wait[1], WAIT_CELL)
        run_start = row.wait[1]
    if row.kind == "model" or row.end > run_start or row.wait is None:
        paint(run_start, row.end, MODEL_CELL if row.kind == "model" else TOOL_CELL)
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
    what = f"HTTP {status}" if isinstance(status, int) else one_line(str(record.get("reason") or "no answer"), 80)
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
