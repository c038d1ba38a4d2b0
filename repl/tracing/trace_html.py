"""One self-contained HTML page of a saved trace (``glassloop trace ID --html FILE``).

Every turn is drawn as the same timeline ``/trace`` shows (``timeline.turn_rows``: one
bar per model call, tool call and step-mode pause on the turn's time axis, from 0 at
the turn's start; an approval wait, a failed attempt and its wait to retry, the client's
start-up in their own colours), headed by the question as sent, its models, whether it
was undone or retried and what step mode changed; each model call with its model, tokens
and cost, its raw request and response (``ID.wire``) and each tool call's arguments and
result folded in ``<details>``. No script, no network, no external asset: the file opens
anywhere, offline. Every text in it comes from models, tools and servers, and the trace
file itself may come from someone else: every field is escaped (numbers are coerced),
and the page's Content-Security-Policy forbids scripts and fetches, so a value the
escaping missed still cannot run.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

from repl.config.settings import ModelPrice
from repl.loop.cost import format_usd, usd
from repl.loop.events import Usage
from repl.tracing.attached import Attached, notes_attached
from repl.tracing.timeline import (
    LEGEND,
    STEP_ACTIONS,
    TEXT_MAX,
    Part,
    Row,
    TurnHead,
    as_dict,
    as_int,
    as_number,
    as_text,
    compared,
    failed_attempt,
    raw_calls,
    routed_said,
    turn_head,
    turn_rows,
    undone_turns,
)
from repl.tracing.trace import read_records, read_wire, turns, wire_path
from repl.ui.escape import clean, json_display

CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
Prices = Callable[[str], ModelPrice | None]  # a model's price, as the config knows it now
STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:72em;padding:0 1em;color:#222}
h1{font-size:1.3em} h2{font-size:1.1em;margin:2em 0 .3em;border-top:1px solid #ccc;padding-top:1em}
.meta,.ticks,.info,.notes,.typed{color:#555;font-size:.9em} .typed{margin:.2em 0}
.tag{font-size:.75em;font-weight:normal;border-radius:.3em;padding:.05em .4em;margin-left:.5em;
 background:#eee;border:1px solid #bbb;vertical-align:middle}
.tag.undone{background:#fbe3e3;border-color:#d9534f} .tag.retry{background:#e3ecfb;border-color:#3b6fc9}
.tag.edited{background:#fff3c4;border-color:#e0b400}
.row,.axis{display:grid;grid-template-columns:8em 1fr 24em;gap:.6em;align-items:center;margin:3px 0}
.axis .ticks{display:flex;justify-content:space-between;border-bottom:1px solid #aaa}
.track{position:relative;height:1.2em;background:#f3f3f3}
.seg{position:absolute;top:0;bottom:0}
.seg.model,.seg.tool,.seg.pause{min-width:2px}
.seg.model,.sw.model{background:#3b6fc9} .seg.tool,.sw.tool{background:#3a9a5b}
.seg.approval,.sw.approval{background:repeating-linear-gradient(45deg,#e0b400 0 4px,#fff3c4 4px 8px)}
.seg.pause,.sw.pause{background:repeating-linear-gradient(90deg,#8a8a8a 0 3px,#e4e4e4 3px 6px)}
.seg.retry,.sw.retry{background:repeating-linear-gradient(-45deg,#d9534f 0 4px,#f6d3d2 4px 8px)}
.seg.setup,.sw.setup{background:#b9c9e8}
.label{font-family:ui-monospace,monospace;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.row.tool .label,.row.pause .label{padding-left:1em}
details{margin:.3em 0 .3em 1em} summary{cursor:pointer;font-family:ui-monospace,monospace}
pre{background:#f7f7f7;border:1px solid #ddd;padding:.5em;overflow:auto;max-height:40em;white-space:pre-wrap}
.legend .key{white-space:nowrap;margin-right:1.2em}
.legend .sw{display:inline-block;width:1.6em;height:.9em;margin-right:.35em;vertical-align:middle}
"""


def _field(value: Any) -> str:
    """A field of the trace as one line of text, whole (``as_text`` cuts it for a terminal)."""
    return as_text(value, TEXT_MAX)


def _text(value: Any) -> str:
    return html.escape(clean(str(value)), quote=True)


def _json(value: Any, cls: str) -> str:
    return f'<pre class="{cls}">{html.escape(json_display(value, indent=2), quote=False)}</pre>'


def trace_page(path: Path, groups: list[list[dict[str, Any]]], prices: Prices | None = None) -> str:
    """The page for ``groups`` (turns of the trace at ``path``); raw bodies from beside it.
    ``prices``: a model's price, for each call's cost (unknown without it)."""
    wire, dropped = read_wire(wire_path(path))
    every = turns(read_records(path))  # undone and retried turns are told by the turns around them
    undone, heads = undone_turns(every), [head for group in every if (head := turn_head(group))]
    compares: dict[int, list[dict[str, Any]]] = {}  # /compare runs, by the turn whose question they ran
    for r in (r for group in every for r in group if r.get("type") == "compared"):
        compares.setdefault(as_int(r.get("turn")), []).append(r)
    drawn = [(group, *turn_rows(group)) for group in groups]
    parts = {seg.part for _, rows, _ in drawn for row in rows for seg in row.segments}
    body = [f"<h1>glassloop trace {_text(path.stem)}</h1>",
            f'<p class="meta">{_count(groups, undone)} · times from each turn\'s start · costs at the prices '
            "configured now</p>",
            '<p class="legend">' + "".join(f'<span class="key"><span class="sw {part}"></span>{_text(LEGEND[part])}'
                                           "</span>" for part in LEGEND if part in parts) + "</p>"]
    if dropped:
        body.append(f'<p class="meta">{dropped} older raw records were dropped to keep under [trace] raw_max_kb.</p>')
    body += [_turn(group, rows, total, wire, undone, heads, prices, compares) for group, rows, total in drawn]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<title>glassloop trace {_text(path.stem)}</title><style>{STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def _count(groups: list[list[dict[str, Any]]], undone: set[int]) -> str:
    """'2 turns', as ``/sessions`` counts them: the turns kept (notices from before a first turn
    are none; the undone ones are counted apart)."""
    numbers = [head.number for group in groups if (head := turn_head(group))]
    kept, gone = sum(n not in undone for n in numbers), sum(n in undone for n in numbers)
    return f"{kept} turn{'' if kept == 1 else 's'}" + (f" and {gone} undone" if gone else "")


def _turn(group: list[dict[str, Any]], rows: list[Row], total: float, wire: list[dict[str, Any]], undone: set[int],
          heads: list[TurnHead], prices: Prices | None, compares: dict[int, list[dict[str, Any]]]) -> str:
    head = turn_head(group)
    number = head.number if head else as_int(group[0].get("turn"))
    out = [f'<section class="turn" data-turn="{_text(number)}">', f"<h2>{_title(head, number, undone, heads)}</h2>"]
    if head and head.typed:
        out.append(f'<p class="typed">typed <q>{_text(head.typed)}</q>; sent as edited in step mode</p>')
    said = [r for r in group if head and notes_attached(r, {a.path for a in head.attached})]
    out += [_attached(a, said) for a in (head.attached if head else ())]
    costs = {row.step: _cost(row, prices) for row in rows if row.kind == "model"}
    out.append(_summary(group, head, [c for c in costs.values() if c is not None], len(costs)))
    if rows:
        out.append(_timeline(rows, total, costs))
    calls, missing = raw_calls([group], wire)
    raw = {c["step"]: c for c in calls}
    results = {r["call_id"]: r for r in group if r.get("type") == "tool_call_finished" and isinstance(r.get("call_id"), str)}
    out += [_model_details(row, raw.get(row.step), costs.get(row.step)) if row.kind == "model"
            else _tool_details(row, results) for row in rows if row.kind != "pause"]
    if missing:
        out.append(f'<p class="meta">{missing} model call(s) without raw records (off, or dropped by the cap).</p>')
    models = {row.step: row.model for row in rows if row.kind == "model"}
    notes = [note for r in group if not any(r is s for s in said) and (note := _note(r, models))]
    if notes:
        out.append('<ul class="notes">' + "".join(f"<li>{note}</li>" for note in notes) + "</ul>")
    if head and compares.get(number):
        out.append(_compared(compares[number], prices))
    out.append("</section>")
    return "\n".join(out)


def _attached(file: Attached, said: list[dict[str, Any]]) -> str:
    """A file sent with the turn's message, folded: the notice that said so (else its path and
    size), then its text as sent."""
    note = next((r["message"] for r in said if notes_attached(r, {file.path})), "")
    lines = file.text.count("\n") + 1 if file.text else 0
    summary = note or f"attached {file.path} ({lines:,} line{'' if lines == 1 else 's'}, {len(file.text):,} characters)"
    return (f'<details class="attached"><summary>{_text(_field(summary))}</summary>'
            f'<pre class="attached">{_text(file.text)}</pre></details>')


def _compared(runs: list[dict[str, Any]], prices: Prices | None) -> str:
    """The turn's question as ``/compare`` ran it on other models, each run with its model, tools,
    tokens, cost and answer."""
    items = []
    for r in runs:
        model, u = _field(r.get("model")), as_dict(r.get("usage"))
        price = prices(model) if prices else None
        cost = usd(Usage(as_int(u.get("input_tokens")), as_int(u.get("cached_tokens")), as_int(u.get("output_tokens"))),
                   price) if price else None
        line = compared(r) + (f" · {format_usd(cost)}" if cost is not None else "")
        items.append(f'<li>{_text(line)}<details class="compared-answer"><summary>answer</summary>'
                     f'{_json(r.get("answer"), "answer")}</details></li>')
    return ('<h4>/compare: this question on other models, side effects denied, nothing kept</h4>'
            '<ul class="notes compared">' + "".join(items) + "</ul>")


def _title(head: TurnHead | None, number: int, undone: set[int], heads: list[TurnHead]) -> str:
    if head is None:
        return f"Before turn {_text(number + 1)}"
    tags = ['<span class="tag edited">edited in step mode</span>'] if head.typed else []
    before = next((h for h in reversed(heads) if h.number < head.number), None)
    if before is not None and before.number in undone and {before.sent, before.typed} & {head.sent, head.typed} - {""}:
        tags.append(f'<span class="tag retry">retry of turn {_text(before.number)}</span>')
    if number in undone:
        tags.append('<span class="tag undone">undone</span>')
    return f"Turn {_text(number)}: <q>{_text(head.sent)}</q>" + "".join(tags)


def _summary(group: list[dict[str, Any]], head: TurnHead | None, costs: list[float], calls: int) -> str:
    bits = [f"on {_text(', '.join(head.models))}"] if head and head.models else []
    end = next((r for r in group if r.get("type") == "turn_finished"), None)
    if end:
        u, steps, tool_calls = as_dict(end.get("usage")), as_int(end.get("steps")), as_int(end.get("tool_calls"))
        bits += [f"stopped by {_text(_field(end.get('stopped_by')))}", f"{steps} step{'' if steps == 1 else 's'}",
                 f"{tool_calls} tool call{'' if tool_calls == 1 else 's'}", f"{as_int(u.get('input_tokens')):,} in",
                 f"{as_int(u.get('output_tokens')):,} out", f"{as_number(end.get('duration_s')):.2f} s"]
    if calls:
        bits.append(format_usd(sum(costs)) + (" + unknown" if len(costs) < calls else "") if costs
                    else "cost unknown")
    return f'<p class="meta">{" · ".join(bits)}</p>'


def _cost(row: Row, prices: Prices | None) -> float | None:
    price = prices(row.model) if prices and row.model else None
    if price is None or not row.usage:
        return None
    u = row.usage
    return usd(Usage(as_int(u.get("input_tokens")), as_int(u.get("cached_tokens")), as_int(u.get("output_tokens"))),
               price)


def _info(row: Row, cost: float | None) -> str:
    if row.kind != "model":
        return row.info
    price = "" if cost is None else f"${cost:.6f}" if 0 < cost < 0.0001 else format_usd(cost)  # not "$0.0000"
    return " · ".join(bit for bit in (row.model, row.info, price) if bit)


def _timeline(rows: list[Row], total: float, costs: dict[int, float | None]) -> str:
    span = max(total, 1e-6)

    def seg(part: Part, start: float, end: float, note: str) -> str:
        left, width = 100 * start / span, max(0.0, 100 * (end - start) / span)
        tip = f"{LEGEND[part]} {end - start:.2f} s" + (f": {note}" if note else "")
        return f'<span class="seg {part}" title="{_text(tip)}" style="left:{left:.2f}%;width:{width:.2f}%"></span>'

    ticks = "".join(f"<span>{total * i / 4:.2f} s</span>" if i else "<span>0 s</span>" for i in range(5))
    out = [f'<div class="timeline"><div class="axis"><span></span><span class="ticks">{ticks}</span><span></span></div>']
    for row in rows:
        boxes = "".join(seg(s.part, s.start, s.end, s.note) for s in row.segments)
        attrs = f'data-step="{_text(row.step)}"' + (f' data-call-id="{_text(row.call_id)}"' if row.call_id else "")
        out.append(f'<div class="row {row.kind}" {attrs}><span class="label">{_text(row.label.strip())}</span>'
                   f'<span class="track">{boxes}</span><span class="info">{_text(_info(row, costs.get(row.step)))}'
                   "</span></div>")
    return "\n".join(out) + "</div>"


def _model_details(row: Row, call: dict[str, Any] | None, cost: float | None) -> str:
    parts = [f'<details class="model-call" data-step="{_text(row.step)}"><summary>{_text(row.label)} · '
             f"{_text(_info(row, cost))}</summary>"]
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


def _note(r: dict[str, Any], models: dict[int, str]) -> str:
    """One line of what happened beside the bars (decisions, step mode, retries, errors); "" for none."""
    kind, step = r.get("type"), as_int(r.get("step"))
    if kind == "approval_decided":
        verdict = "allowed" if r.get("allowed") is True else "denied"
        return _text(f"{verdict} {_field(r.get('name'))} by {_field(r.get('by'))}"
                     + (f": {_field(r['reason'])}" if r.get("reason") else ""))
    if kind == "user_step":
        return _text(_step_note(r))
    if kind == "model_retry":
        return _text(f"model call {step} on {models.get(step) or '?'}: attempt {as_int(r.get('attempt'))} of "
                     f"{as_int(r.get('attempts'))} after {as_number(r.get('delay_s')):g} s ({_field(r.get('reason'))})")
    if kind == "guard_tripped":
        return _text(f"guard {_field(r.get('guard'))}: {_field(r.get('detail'))}")
    if kind == "error":
        return _text(f"error ({_field(r.get('kind'))}): {_field(r.get('message'))}")
    if kind == "notice":
        return _text(_field(r.get("message")))
    if kind == "routed":
        return _text(f"model call {step}: {routed_said(r)}")
    return ""


def _step_note(r: dict[str, Any]) -> str:
    action, step = _field(r.get("action")), as_int(r.get("step"))
    what = STEP_ACTIONS.get(action, action)
    if action == "edited_by_user":
        detail = as_dict(r.get("detail"))
        role = "the question" if detail.get("role") == "user" else "the tool result"
        return f"step mode: {role} edited before model call {step}: {_field(detail.get('after'))}"
    if action == "tools_disabled_by_user":
        return f"step mode: model call {step} sent without tools"
    if action in ("skipped_by_user", "result_by_user"):
        tail = f": {_field(r.get('detail'))}" if action == "result_by_user" else ""
        return f"step mode: {_field(r.get('name'))} {what}{tail}"
    return f"step mode: {what} ({_field(r.get('detail'))})" if r.get("detail") else f"step mode: {what}"
