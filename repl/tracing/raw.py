"""The raw view of model calls (``/trace --raw``, ``glassloop trace ID --raw``).

Each model call as it went over the wire: the request body, each failed attempt (method,
URL, status, the headers that matter, the server's answer, the attempt that retried it) and
the response as assembled from the stream with the exchange that brought it (attempt, status,
headers, how many stream events came and when the first and last arrived).

A turn's second and later requests repeat the first one's tools and conversation, so by
default such a request shows only what is new since the previous request of its turn:
the messages appended, the tools changed (or a line saying they are not), the fields
that differ. ``full`` shows every request whole.

The view is a list of blocks, ``(kind, value)``: ``heading`` and ``note`` lines of text,
``json`` values (None: a note that there is nothing to show). A trace may come from someone
else, and a line can name a field of a body (any name a server or a hand put there): each
line is made by ``_line``, one line without terminal controls, whatever it holds, and a JSON
value is shown by ``json_display``, its names and strings escaped, so the blocks are safe to
print as they are.
"""

from __future__ import annotations

from typing import Any, Literal

from repl.tracing.timeline import TEXT_MAX, as_dict, as_text, failed_attempt
from repl.ui.escape import json_display, one_line

Block = tuple[str, Any]  # ("heading" | "note", text) or ("json", a JSON value)
NO_RESPONSE = "(none: the call failed or was stopped before it was answered)"
NAME_MAX = 40  # a field's name in a line


def _line(kind: Literal["heading", "note"], text: str) -> Block:
    """A ``heading`` or ``note`` line: one line, without terminal controls."""
    return kind, as_text(text, TEXT_MAX)


def _name(key: Any) -> str:
    return as_text(key, NAME_MAX)


def raw_view(calls: list[dict[str, Any]], *, full: bool = False) -> list[Block]:
    """The blocks of ``calls`` (``timeline.raw_calls``); a call whose last attempt failed
    shows that failure in place of a response."""
    out: list[Block] = []
    previous: dict[int, tuple[int, Any]] = {}  # by turn: (step, body) of its last request shown
    for c in calls:
        where = f"turn {c['turn']} · model call {c['step']}"
        request, (before_step, before) = c["request"], previous.get(c["turn"], (0, None))
        if full or not _diffable(request) or not _diffable(before):
            out.append(_line("heading", f"── {where} · request, as sent"))
            out.append(("json", request))
        else:
            out.append(_line("heading", f"── {where} · request, what is new since model call {before_step}"))
            out += request_changes(before, request)
        if _diffable(request):
            previous[c["turn"]] = (c["step"], request)
        failed = c.get("failed_attempts") or []
        for f in failed:
            out.append(_line("heading", f"── {where} · {failed_attempt(f)}"))
            if line := exchange_line(f):
                out.append(_line("note", line))
            out.append(("json", f))
        if c["response"] is not None or not failed:
            out.append(_line("heading", f"── {where} · response, as assembled from the stream"))
            if line := exchange_line(as_dict(c["response"]).get("http")):
                out.append(_line("note", line))
            out.append(("json", c["response"]))
    return out


def _diffable(value: Any) -> bool:
    return isinstance(value, dict) and "omitted_bytes" not in value


def request_changes(before: dict[str, Any], now: dict[str, Any]) -> list[Block]:
    """What ``now`` adds to or changes of ``before``, field by field: a list that grew
    (the conversation) shows its new items, ``tools`` by name, other fields only when they differ."""
    out: list[Block] = []
    same: list[str] = []
    for key, value in now.items():
        old = before.get(key)
        if value == old:
            if key == "tools" and isinstance(value, list):
                out.append(_line("note", f"tools: unchanged ({len(value)}: {', '.join(_names(value))})"))
            else:
                same.append(key)
        elif key == "tools" and isinstance(value, list) and isinstance(old, list):
            out += _tool_changes(old, value)
        elif isinstance(value, list) and isinstance(old, list) and value[: len(old)] == old:
            out.append(_line("note", f"{_name(key)}: the first {len(old)} as before, {len(value) - len(old)} appended:"))
            out.append(("json", value[len(old):]))
        else:
            out.append(_line("note", f"{_name(key)}: " + ("new:" if key not in before else "changed, now:")))
            out.append(("json", value))
    if gone := [k for k in before if k not in now]:
        out.append(_line("note", f"no longer sent: {', '.join(_name(k) for k in gone)}"))
    if same:
        out.append(_line("note", f"unchanged: {', '.join(_name(k) for k in same)}"))
    return out


def _tool_name(tool: Any) -> str:
    if not isinstance(tool, dict):
        return "?"
    function = tool.get("function")
    name = function.get("name") if isinstance(function, dict) else tool.get("name")
    return one_line(str(name), 60) if name is not None else "?"


def _names(tools: list[Any]) -> list[str]:
    return [_tool_name(t) for t in tools]


def _tool_changes(old: list[Any], now: list[Any]) -> list[Block]:
    """Tools added, changed (their schema shown) and removed, by name."""
    before = {_tool_name(t): t for t in old}
    after = {_tool_name(t): t for t in now}
    added = [t for name, t in after.items() if name not in before]
    changed = [t for name, t in after.items() if name in before and before[name] != t]
    removed = [name for name in before if name not in after]
    kept = len(after) - len(added) - len(changed)
    out: list[Block] = [_line("note", f"tools: {kept} unchanged, {len(changed)} changed, {len(added)} added, "
                                 f"{len(removed)} removed" + (f" ({', '.join(removed)})" if removed else "")
                                 + (":" if changed or added else ""))]
    if changed or added:
        out.append(("json", changed + added))
    return out


def exchange_line(http: Any) -> str:
    """'attempt 2 · POST http://host/v1/chat/completions → 200 · 7 stream events, the first
    0.012 s after sending, the last 0.050 s' from an attempt's record ('' without one)."""
    if not isinstance(http, dict) or not (http.get("method") or http.get("url")):
        return ""
    status = http.get("status")
    parts = [f"{one_line(str(http.get('method') or '?'), 10)} {one_line(str(http.get('url') or '?'), 200)} → "
             + (str(status) if isinstance(status, int) else "no answer")]
    if isinstance(http.get("attempt"), int):
        parts.insert(0, f"attempt {http['attempt']}")
    events, first, last = http.get("events"), http.get("first_event_s"), http.get("last_event_s")
    if isinstance(events, int) and isinstance(first, int | float) and isinstance(last, int | float):
        parts.append(f"{events} stream event{'' if events == 1 else 's'}, the first {first:.3f} s after "
                     f"sending, the last {last:.3f} s")
    elif isinstance(http.get("elapsed_s"), int | float):
        parts.append(f"{http['elapsed_s']:.3f} s after sending")
    return " · ".join(parts)


def raw_text(blocks: list[Block]) -> str:
    """The blocks as plain text, each JSON value indented (escaped for a terminal)."""
    lines = [value if kind != "json" else NO_RESPONSE if value is None else json_display(value, indent=2)
             for kind, value in blocks]
    return "\n".join(lines) + "\n"
