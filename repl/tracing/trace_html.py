"""One self-contained HTML page of a saved trace (``glassloop trace ID --html FILE``).

Every turn is drawn as the same timeline ``/trace`` shows (``timeline.turn_rows``: one
bar per model call and tool call on the turn's time axis, the approval wait apart),
followed by each model call's raw request and response (``ID.wire``) and each tool
call's arguments and result, folded in ``<details>``. No script, no network, no
external asset: the file opens anywhere, offline. Every text in it comes from models,
tools and servers, and the trace file itself may come from someone else: every field is
escaped (numbers are coerced), and the page's Content-Security-Policy forbids scripts and
fetches, so a value the escaping missed still cannot run.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from repl.tracing.timeline import Row, as_int, failed_attempt, raw_calls, turn_rows
from repl.tracing.trace import read_wire, wire_path
from repl.ui.escape import clean, json_display

CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:70em;padding:0 1em;color:#222}
h1{font-size:1.3em} h2{font-size:1.1em;margin-top:2em;border-top:1px solid #ccc;padding-top:1em}
.meta,.axis,.info,.notes{color:#555;font-size:.9em}
.row{display:grid;grid-template-columns:12em 1fr 16em;gap:.5em;align-items:center;margin:2px 0}
.axis{display:grid;grid-template-columns:12em 1fr 16em;gap:.5em}
.axis .ends{display:flex;justify-content:space-between}
.track{position:relative;height:1.1em;background:#f3f3f3}
.track span{position:absolute;top:0;bottom:0;min-width:2px}
.model .bar{background:#3b6fc9} .tool .bar{background:#3a9a5b}
.wait{background:repeating-linear-gradient(45deg,#e0b400 0 4px,#fff3c4 4px 8px)}
.label{font-family:ui-monospace,monospace;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
details{margin:.3em 0 .3em 1em} summary{cursor:pointer;font-family:ui-monospace,monospace}
pre{background:#f7f7f7;border:1px solid #ddd;padding:.5em;overflow:auto;max-height:40em;white-space:pre-wrap}
.legend span{display:inline-block;width:1.5em;height:.8em;margin:0 .3em 0 1em;vertical-align:middle}
"""


def _text(value: Any) -> str:
    return html.escape(clean(str(value)), quote=True)


def _json(value: Any, cls: str) -> str:
    return f'<pre class="{cls}">{html.escape(json_display(value, indent=2), quote=False)}</pre>'


def trace_page(path: Path, groups: list[list[dict[str, Any]]]) -> str:
    """The page for ``groups`` (turns of the trace at ``path``); raw bodies from beside it."""
    wire, dropped = read_wire(wire_path(path))
    body = [f"<h1>glassloop trace {_text(path.stem)}</h1>",
            '<p class="legend">model call<span style="background:#3b6fc9"></span> tool running'
            '<span style="background:#3a9a5b"></span> waiting for approval<span class="wait"></span></p>']
    if dropped:
        body.append(f'<p class="meta">{dropped} older raw records were dropped to keep under [trace] raw_max_kb.</p>')
    body += [_turn(group, wire) for group in groups]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<title>glassloop trace {_text(path.stem)}</title><style>{STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def _turn(group: list[dict[str, Any]], wire: list[dict[str, Any]]) -> str:
    first = group[0]
    number = as_int(first.get("turn"))
    rows, total = turn_rows(group)
    title = (f"Turn {_text(number)}: <q>{_text(first.get('user_text', ''))}</q>"
             if first.get("type") == "turn_started" else f"Before turn {_text(number + 1)}")
    out = [f'<section class="turn" data-turn="{_text(number)}">', f"<h2>{title}</h2>"]
    end = next((r for r in group if r.get("type") == "turn_finished"), None)
    if end:
        usage = end.get("usage")
        u = usage if isinstance(usage, dict) else {}
        out.append(f'<p class="meta">stopped by {_text(end.get("stopped_by"))} · {as_int(end.get("steps"))} steps · '
                   f'{as_int(end.get("tool_calls"))} tool calls · {as_int(u.get("input_tokens"))} in · '
                   f'{as_int(u.get("output_tokens"))} out · {_text(end.get("duration_s"))} s</p>')
    if rows:
        out.append(_timeline(rows, total))
    calls, missing = raw_calls([group], wire)
    raw = {c["step"]: c for c in calls}
    results = {r["call_id"]: r for r in group if r.get("type") == "tool_call_finished" and isinstance(r.get("call_id"), str)}
    out += [_model_details(row, raw.get(row.step)) if row.kind == "model" else _tool_details(row, results)
            for row in rows]
    if missing:
        out.append(f'<p class="meta">{missing} model call(s) without raw records (off, or dropped by the cap).</p>')
    notes = [r for r in group if r.get("type") in ("approval_decided", "guard_tripped", "error", "notice")]
    if notes:
        out.append('<ul class="notes">' + "".join(f"<li>{_note(r)}</li>" for r in notes) + "</ul>")
    out.append("</section>")
    return "\n".join(out)


def _timeline(rows: list[Row], total: float) -> str:
    origin = min(row.start for row in rows)
    span = max(total - origin, 1e-6)

    def box(cls: str, start: float, end: float) -> str:
        left = 100 * (start - origin) / span
        return f'<span class="{cls}" style="left:{left:.2f}%;width:{max(0.0, 100 * (end - start) / span):.2f}%"></span>'

    out = [f'<div class="timeline"><div class="axis"><span></span><span class="ends"><span>{origin:.2f} s</span>'
           f"<span>{total:.2f} s</span></span><span></span></div>"]
    for row in rows:
        boxes = box("wait", *row.wait) if row.wait else ""
        boxes += box("bar", row.wait[1] if row.wait else row.start, row.end)
        attrs = f'data-step="{_text(row.step)}"' + (f' data-call-id="{_text(row.call_id)}"' if row.call_id else "")
        out.append(f'<div class="row {row.kind}" {attrs}><span class="label">{_text(row.label.strip())}</span>'
                   f'<span class="track">{boxes}</span><span class="info">{_text(row.info)}</span></div>')
    return "\n".join(out) + "</div>"


def _model_details(row: Row, call: dict[str, Any] | None) -> str:
    parts = [f'<details class="model-call" data-step="{_text(row.step)}"><summary>{_text(row.label)} · '
             f"{_text(row.info)}</summary>"]
    if call is None:
        parts.append("<p>no raw record of this call</p>")
    else:
        parts.append("<h4>request, as sent</h4>" + (_json(call["request"], "request") if call["request"] is not None
                                                    else "<p>not kept</p>"))
        failed = call.get("failed_attempts") or []
        parts += [f"<h4>{_text(failed_attempt(f))}</h4>" + _json(f, "failed-attempt") for f in failed]
        if call["response"] is not None or not failed:
            parts.append("<h4>response, as assembled from the stream</h4>"
                         + (_json(call["response"], "response") if call["response"] is not None
                            else "<p>none: the call failed or was stopped</p>"))
    return "".join(parts) + "</details>"


def _tool_details(row: Row, results: dict[Any, dict[str, Any]]) -> str:
    done = results.get(row.call_id) or {}
    return (f'<details class="tool-call" data-call-id="{_text(row.call_id)}"><summary>{_text(row.label.strip())} · '
            f"{_text(row.info)}</summary><h4>arguments</h4>{_json(row.record.get('arguments'), 'arguments')}"
            f"<h4>result</h4>{_json(done.get('result'), 'result')}</details>")


def _note(r: dict[str, Any]) -> str:
    kind = r.get("type")
    if kind == "approval_decided":
        verdict = "allowed" if r.get("allowed") else "denied"
        return _text(f"{verdict} {r.get('name')} by {r.get('by')}" + (f": {r['reason']}" if r.get("reason") else ""))
    if kind == "guard_tripped":
        return _text(f"guard {r.get('guard')}: {r.get('detail')}")
    if kind == "error":
        return _text(f"error ({r.get('kind')}): {r.get('message')}")
    return _text(r.get("message", ""))
