"""Tool results as short text for small local models (``compact_results`` of a profile).

A tool result is stored as JSON (``{"ok": true, "todos": [{...}, ...]}``); a
0.5B model on two CPU cores reads every token of it again at ~20-45 tokens/s
in the next request. ``compact_result`` renders the same data with less
punctuation and nothing empty, the same way for every tool (built-in, user
tools, MCP), and keeps every non-empty value: ids, titles, statuses, numbers.

- ``"ok": true`` is dropped; null, ``""``, ``[]`` and ``{}`` values are dropped, except an
  empty list of the result itself: ``todos (0): none`` (with "count: 0" alone the 0.5B model
  repeated the question instead of saying there is nothing).
- A ``count`` equal to the length of a list beside it is dropped: the list's line says it
  (``todos (3):``). With "count: 3" first, the 0.5B model answered a question about open tasks with
  "there are 3 todos" instead of naming them.
- A failure stays explicit: ``error (not_found): no todo todo-9``.
- Scalars: one ``key: value`` line each.
- A list of records: a ``key (N):`` line, then one line per record,
  ``- id=todo-2, title=Write the report, status=todo``. (A table naming the
  keys once is ~17% shorter for four todos; named values were chosen so
  that each value says what it is, untested against the table.)
- A nested object: on one line as ``{key=value, ...}``, or one field per
  line (indented) when that line would be long or it holds records.
- Anything that is not JSON (a result cut by the history, plain text) is sent
  as it is; everything is cut to the profile's limit at a line end, with a
  marker saying how much was left out.

Only the text sent to the model is compact: the history, trace and journal keep
the JSON (``textcalls.to_text_messages`` applies this when it is asked to).
"""

from __future__ import annotations

import json
from typing import Any

_INLINE_DEPTH = 3  # deeper structures are written as compact JSON
_LINE = 160  # a longer object is written one field per line


def compact_result(content: str, limit: int) -> str:
    """``content`` (a stored tool result) as compact text of at most ``limit`` (>= 1) chars."""
    try:
        value = json.loads(content)
    except (ValueError, RecursionError):
        return _cap(content, limit)
    return _cap(_render(value), limit)


def _render(value: Any) -> str:
    if not isinstance(value, dict):
        return "\n".join(_field("result", value)) if _present(value) else "(empty result)"
    lines: list[str] = []
    error = value.get("error")
    if value.get("ok") is False or (value.get("ok") is not True and isinstance(error, dict)
                                    and "message" in error):
        lines.append(_error_line(error))
        value = {k: v for k, v in value.items() if k not in ("ok", "error")}
    elif value.get("ok") is True:
        value = {k: v for k, v in value.items() if k != "ok"}
    for key, item in value.items():
        if key == "count" and type(item) is int and any(isinstance(v, list) and len(v) == item
                                                        for v in value.values()):
            continue  # the list's own line says how many ("todos (3):")
        if _present(item):
            lines += _field(str(key), item)
        elif item == []:  # an empty list is an answer ("no todos"), not noise
            lines.append(f"{key} (0): none")
    return "\n".join(lines) or "ok"


def _error_line(error: Any) -> str:
    if isinstance(error, dict):
        kind = error.get("type")
        rest = {k: v for k, v in error.items() if k not in ("type", "message") and _present(v)}
        text = _inline(error.get("message", "")) + ("; " + _pairs(rest, 1) if rest else "")
        return f"error ({_inline(kind)}): {text}" if _present(kind) else f"error: {text}"
    return f"error: {_inline(error)}" if _present(error) else "error"


def _field(key: str, value: Any, indent: str = "") -> list[str]:
    if _is_records(value):
        return [f"{indent}{key} ({len(value)}):", *(indent + line for line in _records(value))]
    if isinstance(value, str) and "\n" in value:
        return [f"{indent}{key}:", value]  # multi-line text (a file's lines) as it is
    if isinstance(value, dict) and len(indent) < 2 * _INLINE_DEPTH and (
            len(_inline(value)) > _LINE or any(_is_records(item) for item in value.values())):
        lines = [f"{indent}{key}:"]  # a big object (an MCP tool's structured content): its fields below
        for inner, item in _kept(value).items():
            lines += _field(inner, item, indent + "  ")
        return lines
    return [f"{indent}{key}: {_inline(value)}"]


def _is_records(value: Any) -> bool:
    return isinstance(value, list) and any(isinstance(item, dict) for item in value)


def _records(items: list[Any]) -> list[str]:
    return ["- " + (_pairs(item, 1) if isinstance(item, dict) else _inline(item, 1)) for item in items]


def _kept(record: dict[str, Any]) -> dict[str, Any]:
    return {str(k): v for k, v in record.items() if _present(v)}


def _pairs(record: dict[str, Any], depth: int) -> str:
    return ", ".join(f"{k}={_inline(v, depth + 1)}" for k, v in _kept(record).items())


def _inline(value: Any, depth: int = 0) -> str:
    """One value on one line: strings bare, numbers and booleans as JSON writes them."""
    if isinstance(value, str):
        return " ".join(value.split()) if "\n" in value else value
    if depth >= _INLINE_DEPTH:
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return "{" + _pairs(value, depth) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v, depth + 1) for v in value if _present(v)) + "]"
    return json.dumps(value, ensure_ascii=False)


def _present(value: Any) -> bool:
    return value is not None and value != "" and value != [] and value != {}


def _cap(text: str, limit: int) -> str:
    """At most ``limit`` chars: the head, cut at a line end when one is near, and a marker."""
    if len(text) <= limit:
        return text
    marker = f"\n[… {len(text)} characters in all; the rest is not shown]"
    room = limit - len(marker)
    if room < 1:
        return text[:limit]
    head = text[:room]
    line_end = head.rfind("\n")
    if line_end >= room // 2:
        head = head[:line_end]
    return head + marker
