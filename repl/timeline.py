"""Turning trace records into a readable timeline (``/trace``, ``glassloop trace``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repl.trace import read_records, turns


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
    grouped = turns(read_records(path))
    if not grouped:
        return ["(the trace is empty)"]
    if which == "all":
        chosen = grouped
    elif which == "last":
        chosen = grouped[-1:]
    else:
        try:
            number = int(which)
        except ValueError:
            raise ValueError(f"--turn takes a number, 'last' or 'all', not {which!r}") from None
        chosen = [g for g in grouped if g and g[0].get("turn") == number]
        if not chosen:
            raise ValueError(f"no turn {number} in {path}")
    if as_json:
        return [json.dumps(r, ensure_ascii=False) for group in chosen for r in group]
    return [line for group in chosen for line in format_turn(group)]


def format_turn(records: list[dict[str, Any]]) -> list[str]:
    """One line per model request and tool call, with timings relative to the turn start."""
    if not records:
        return []
    start = records[0].get("time", 0.0)
    lines: list[str] = []
    for r in records:
        at = f"{r.get('time', start) - start:7.2f}s"
        line = _describe(r)
        if line:
            lines.append(f"{at}  {line}")
    return lines


def _describe(r: dict[str, Any]) -> str | None:
    kind = r.get("type")
    if kind == "turn_started":
        return f"turn {r.get('turn')}: {r.get('user_text', '')[:200]!r}"
    if kind == "model_usage":
        u = r.get("usage", {})
        mark = "~" if u.get("estimated") else ""
        retries = f" · retries {r['retries']}" if r.get("retries") else ""
        return (f"model step {r.get('step')}: in {mark}{u.get('input_tokens')} (cached {u.get('cached_tokens')})"
                f" out {mark}{u.get('output_tokens')} · {r.get('latency_s', 0):.2f} s"
                f" · finish {r.get('finish_reason')}{retries}")
    if kind == "tool_call_started":
        return f"  call {r.get('name')} {json.dumps(r.get('arguments'), ensure_ascii=False)}"
    if kind == "approval_decided":
        verdict = "allowed" if r.get("allowed") else "denied"
        reason = f": {r['reason']}" if r.get("reason") else ""
        took = f" in {r['decided_s']:.1f} s" if isinstance(r.get("decided_s"), int | float) and r["decided_s"] else ""
        return f"  {verdict} {r.get('name')} by {r.get('by')}{took}{reason}"
    if kind == "tool_call_finished":
        status = "ok" if r.get("ok") else f"error {r.get('error_type')}"
        result = json.dumps(r.get("result"), ensure_ascii=False)
        return f"  result {r.get('name')} {status} · {r.get('duration_s', 0) * 1000:.0f} ms · {result}"
    if kind == "guard_tripped":
        return f"guard {r.get('guard')}: {r.get('detail')}"
    if kind == "error":
        return f"error ({r.get('kind')}): {r.get('message')}"
    if kind == "turn_finished":
        u = r.get("usage", {})
        return (f"turn end: stopped_by {r.get('stopped_by')} · {r.get('steps')} steps · "
                f"{r.get('tool_calls')} tool calls · {u.get('input_tokens', 0) + u.get('output_tokens', 0)} tokens")
    return None
