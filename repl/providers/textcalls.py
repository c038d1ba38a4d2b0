"""Text tool-call protocol for small local models (``tool_call_format = "text"``).

Wire format, measured against llama-cpp-python 0.3.36 serving the
Qwen2.5-Coder-0.5B-Instruct GGUF (details and figures: docs/LOCAL_MODEL.md):

- The server renders the GGUF's own Jinja template (ChatML); generation stops
  at ``<|im_end|>``, which the server strips: no stop strings needed.
- We do not send ``tools=``; the tool list goes into the system message in the
  form Qwen2.5 was trained on (``<tools>`` JSON lines + the ``<tool_call>``
  instruction), exactly as the template itself would render it.
- Earlier calls go back as assistant TEXT with ``<tool_call>`` blocks whose
  ``arguments`` is a JSON object (the template's own ``tool_calls`` path
  applies ``tojson`` to the OpenAI argument *string*: double encoding).
- Tool results go back as ``{"role": "tool", "tool_call_id", "content"}``; the
  server requires ``tool_call_id``, and the template renders consecutive tool
  messages as one user turn of ``<tool_response>`` blocks.
- ``content: null`` on an assistant message is rejected (HTTP 500): always str.
- After tool results a short user nudge is appended (AFTER_RESULTS); without
  it this model echoes its call and invents a result instead of answering.
- The model itself rarely follows the format: it writes fenced ```json blocks
  or bare JSON objects (several, comma-separated, sometimes broken), never
  ``<tool_call>`` tags in our corpus. TextCallFilter accepts all of these.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterable
from typing import Any

from repl.prompts import split_session_part
from repl.providers.base import ToolCall

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
FENCE = "```"
_TOKENS = (OPEN_TAG, CLOSE_TAG, FENCE, "{")
_JSON_FENCE_INFOS = frozenset({"", "json", "json5", "jsonc", "tool_call", "tool_code"})
_NAME_RE = re.compile(r'"(?:name|function|tool)"\s*:\s*"([A-Za-z0-9_.\-]+)"')
_ARGS_RE = re.compile(r'"(?:arguments|parameters|args)"\s*:\s*(.*?)\s*}?\s*$', re.DOTALL)
_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."  # the template's own
# Wording measured to work (see docs/LOCAL_MODEL.md); words like "call another
# tool if needed" made the model list calls to every tool instead.
AFTER_RESULTS = (
    "Use the tool results above to answer my question in plain words. "
    "Do not repeat the tool call."
)

_TOOLS_INTRO = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query."
    "\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_TOOLS_OUTRO = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


# ---------------------------------------------------------------- history out


def tools_system_block(tools: list[dict[str, Any]]) -> str:
    """The tool section Qwen2.5 was trained on, to append to the system text."""
    lines = [
        json.dumps({"type": "function", "function": tool}, ensure_ascii=False)
        for tool in tools
    ]
    return _TOOLS_INTRO + "".join("\n" + line for line in lines) + _TOOLS_OUTRO


def _call_as_text(call: dict[str, Any]) -> str:
    raw = call.get("arguments") or "{}"
    try:
        arguments: Any = json.loads(raw)
    except (TypeError, ValueError):
        arguments = raw  # keep what the model wrote; it was told it was invalid
    body = json.dumps({"name": call.get("name", ""), "arguments": arguments}, ensure_ascii=False)
    return f"{OPEN_TAG}\n{body}\n{CLOSE_TAG}"


def _assistant_text(message: dict[str, Any]) -> str:
    parts = [message.get("content") or ""]
    parts += [_call_as_text(call) for call in message.get("tool_calls") or []]
    return "\n".join(part for part in parts if part)


def to_text_messages(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    after_results: str | None = AFTER_RESULTS,
) -> list[dict[str, Any]]:
    """Neutral history → plain chat messages for a template-driven local server.

    When the history ends with tool results, ``after_results`` is appended as
    a user message (never stored in the history): without it the 0.5B model
    mostly echoes its call and invents a result instead of answering.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "assistant":
            out.append({"role": "assistant", "content": _assistant_text(message)})
        elif role == "tool":
            out.append({
                "role": "tool",
                "tool_call_id": message.get("tool_call_id") or "",
                "content": message.get("content") or "",
            })
        else:
            out.append({"role": role, "content": message.get("content") or ""})
    if tools:
        if out and out[0]["role"] == "system":
            system = out.pop(0)["content"]
        else:
            system = _DEFAULT_SYSTEM
        # the date and the user's own prompt go after the tools: the fixed prefix
        # (instructions + tool block) is then the same for every session
        fixed, session = split_session_part(system)
        out.insert(0, {"role": "system", "content": fixed + tools_system_block(tools) + session})
    if after_results and messages and messages[-1]["role"] == "tool":
        out.append({"role": "user", "content": after_results})
    return out


# ---------------------------------------------------------------- parsing in


def _json_values(text: str) -> list[Any] | None:
    """All JSON values in ``text`` when it is nothing but JSON values, else None."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos].isspace():
            pos += 1
        if pos == end:
            return values or None
        try:
            value, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return None
        values.append(value)


def _arguments_text(arguments: Any) -> str:
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments)  # double-encoded: unwrap once
        except ValueError:
            return arguments
        return json.dumps(decoded, ensure_ascii=False) if isinstance(decoded, dict) else arguments
    return json.dumps(arguments, ensure_ascii=False)


def _call_fields(value: Any) -> tuple[str, str] | None:
    """(name, arguments JSON text) of one call-shaped object, else None."""
    if not isinstance(value, dict):
        return None
    inner = value.get("function")
    if isinstance(inner, dict) and isinstance(inner.get("name"), str):
        value = inner
    name = value.get("name", inner if isinstance(inner, str) else value.get("tool"))
    if not isinstance(name, str) or not name:
        return None
    for key in ("arguments", "parameters", "args"):
        if key in value:
            return name, _arguments_text(value[key])
    return name, "{}"


def _calls_in(values: list[Any]) -> list[tuple[str, str]] | None:
    flat: list[Any] = []
    for value in values:
        flat.extend(value if isinstance(value, list) else [value])
    calls = [_call_fields(value) for value in flat]
    if not calls or any(call is None for call in calls):
        return None
    return [call for call in calls if call is not None]


def _malformed_call(text: str) -> tuple[str, str] | None:
    """Best effort for broken JSON: a recognisable name plus the raw arguments text."""
    name = _NAME_RE.search(text)
    if name is None:
        return None
    args = _ARGS_RE.search(text, name.end()) or _ARGS_RE.search(text)
    return name.group(1), (args.group(1) if args else text.strip())


def _scan_json(text: str) -> tuple[int, list[str], bool]:
    """(end of the first balanced value or -1, closers still open, inside a string)."""
    stack: list[str] = []
    in_string = escaped = False
    first_end = -1
    for index, char in enumerate(text):
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]" and stack:
            stack.pop()
            if not stack and first_end < 0:
                first_end = index + 1
    return first_end, stack, in_string


def _closed(text: str) -> str | None:
    """``text`` with its missing closing brackets added, when only those are missing."""
    _, stack, in_string = _scan_json(text)
    tail = text.rstrip()[-1:]
    if in_string or not stack or not (tail in '"}]' or tail.isalnum()):
        return None  # cut inside a value: do not guess the rest
    return text.rstrip() + "".join(reversed(stack))


def _parse_calls(text: str) -> list[tuple[str, str]] | None:
    """Calls in ``text``: valid JSON call objects, or one recognisable broken call."""
    values = _json_values(text)
    if values is None and (repaired := _closed(text)) is not None:
        values = _json_values(repaired)
    if values is not None:
        return _calls_in(values)
    broken = _malformed_call(text)
    return [broken] if broken else None


def _strip_fence(body: str) -> str:
    """``<tool_call>`` bodies sometimes wrap the JSON in a fenced block."""
    text = body.strip()
    if not text.startswith(FENCE):
        return body
    text = (text.split("\n", 1)[1] if "\n" in text else "").rstrip()
    return text[: -len(FENCE)] if text.endswith(FENCE) else text


def _partial_token_tail(text: str) -> int:
    """Length of the longest tail of ``text`` that starts one of the tokens."""
    for size in range(min(len(text), len(CLOSE_TAG) - 1), 0, -1):
        tail = text[-size:]
        if any(token.startswith(tail) and token != tail for token in _TOKENS):
            return size
    return 0


class TextCallFilter:
    """Splits a streamed reply into visible text and tool calls written as text.

    ``feed`` returns what can be shown now; only text that may still turn out
    to be a call is held back. ``finish`` returns the rest and the calls.
    Chunk boundaries never change the result.
    """

    def __init__(self, tool_names: Iterable[str], id_prefix: str | None = None) -> None:
        self._known = frozenset(tool_names)
        self._prefix = id_prefix or f"call_text_{secrets.token_hex(3)}_"
        self._buf = ""
        self._in_code = False  # inside a fenced block that is not JSON
        self._after_call = False  # the model sometimes separates bare calls with commas
        self._calls: list[ToolCall] = []

    def feed(self, chunk: str) -> str:
        self._buf += chunk
        return self._drain(final=False)

    def finish(self) -> tuple[str, list[ToolCall]]:
        return self._drain(final=True), list(self._calls)

    def _drain(self, final: bool) -> str:
        shown: list[str] = []
        while self._buf:
            if self._after_call and self._buf[0] == ",":
                self._buf, self._after_call = self._buf[1:], False
                continue
            calls_before = len(self._calls)
            step = self._code_step(final) if self._in_code else self._step(final)
            if step is None:
                break
            visible, consumed = step
            shown.append(visible)
            self._buf = self._buf[consumed:]
            self._after_call = len(self._calls) > calls_before
        return "".join(shown)

    def _add(self, calls: list[tuple[str, str]]) -> None:
        for name, arguments in calls:
            call_id = f"{self._prefix}{len(self._calls) + 1}"
            self._calls.append(ToolCall(id=call_id, name=name, arguments=arguments))

    def _step(self, final: bool) -> tuple[str, int] | None:
        buf = self._buf
        hits = [(buf.find(token), token) for token in _TOKENS if token in buf]
        if not hits:
            hold = 0 if final else _partial_token_tail(buf)
            return (buf[: len(buf) - hold], len(buf) - hold) if hold < len(buf) else None
        start, token = min(hits)
        if start > 0:
            return buf[:start], start
        if token == OPEN_TAG:
            return self._tagged(final)
        if token == CLOSE_TAG:
            return "", len(CLOSE_TAG)  # a stray closing tag is never shown
        if token == FENCE:
            return self._fenced(final)
        return self._bare(final)

    def _tagged(self, final: bool) -> tuple[str, int] | None:
        buf, body_start = self._buf, len(OPEN_TAG)
        ends = [i for i in (buf.find(CLOSE_TAG, body_start), buf.find(OPEN_TAG, body_start)) if i >= 0]
        if not ends and not final:
            return None
        end = min(ends) if ends else len(buf)
        consumed = end + len(CLOSE_TAG) if buf.startswith(CLOSE_TAG, end) else end
        body = buf[body_start:end]
        calls = _parse_calls(_strip_fence(body))
        if calls is None:
            return body.strip(), consumed
        self._add(calls)
        return "", consumed

    def _fenced(self, final: bool) -> tuple[str, int] | None:
        buf = self._buf
        line_end = buf.find("\n", len(FENCE))
        if line_end < 0:
            return (buf, len(buf)) if final else None
        if buf[len(FENCE):line_end].strip().lower() not in _JSON_FENCE_INFOS:
            self._in_code = True
            return buf[: line_end + 1], line_end + 1
        close = buf.find(FENCE, line_end)
        if close < 0 and not final:
            return None
        end = close + len(FENCE) if close >= 0 else len(buf)
        body = buf[line_end + 1 : close if close >= 0 else len(buf)]
        if self._take_known(body):
            return "", end
        return buf[:end], end

    def _bare(self, final: bool) -> tuple[str, int] | None:
        buf = self._buf
        rest = buf[1:].lstrip()
        if not rest:
            return ("{", 1) if final else None
        if rest[0] not in '"}':
            return "{", 1  # prose with a brace, not a JSON object
        end = _scan_json(buf)[0]
        if end < 0 and not final:
            return None
        end = end if end >= 0 else len(buf)
        if self._take_known(buf[:end]):
            return "", end
        return buf[:end], end

    def _take_known(self, text: str) -> bool:
        """Record the calls in ``text`` if it is (only) calls to known tools."""
        calls = _parse_calls(text)
        if not calls or any(name not in self._known for name, _ in calls):
            return False
        self._add(calls)
        return True

    def _code_step(self, final: bool) -> tuple[str, int] | None:
        buf = self._buf
        close = buf.find(FENCE)
        if close >= 0:
            self._in_code = False
            return buf[: close + len(FENCE)], close + len(FENCE)
        hold = 0 if final else len(buf) - len(buf.rstrip("`"))
        return (buf[: len(buf) - hold], len(buf) - hold) if hold < len(buf) else None


def parse_text_calls(text: str, tool_names: Iterable[str]) -> tuple[str, list[ToolCall]]:
    """Whole-reply form of TextCallFilter (same result as any chunking)."""
    text_filter = TextCallFilter(tool_names, id_prefix="call_text_")
    shown = text_filter.feed(text)
    rest, calls = text_filter.finish()
    return shown + rest, calls
