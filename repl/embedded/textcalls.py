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
- Tool results go back as TEXT too: one user message of ``<tool_response>``
  blocks per step, the very bytes the template renders for consecutive
  ``role: "tool"`` messages. Tool messages answering no native call would be
  refused by any server that checks the history, so text mode never sends them.
- ``content: null`` on an assistant message is rejected (HTTP 500): always str.
- After tool results a short nudge is added to them (the dialect's, see
  ``dialect.py``); without it this model echoes its call and invents a result
  instead of answering.
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

from repl.embedded.compact import compact_result
from repl.embedded.dialect import TEXT_CALLS, WHOLE, Dialect, flat, repeats
from repl.providers.base import CallRecord, Message, SystemPrompt, ToolCall, note_of
from tools.registry import JsonScan, ToolSchema

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
RESULT_OPEN, RESULT_CLOSE = "<tool_response>\n", "\n</tool_response>"
FENCE = "```"
_TOKENS = (OPEN_TAG, CLOSE_TAG, FENCE, "{")
_JSON_FENCE_INFOS = frozenset({"", "json", "json5", "jsonc", "tool_call", "tool_code"})
_NAME_RE = re.compile(r'"(?:name|function|tool)"\s*:\s*"([A-Za-z0-9_.\-]+)"')
_ARGS_KEY_RE = re.compile(r'"(?:arguments|parameters|args)"\s*:\s*')
_NON_SPACE = re.compile(r"\S")
_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."  # the template's own
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


def tools_system_block(tools: list[ToolSchema]) -> str:
    """The tool section Qwen2.5 was trained on, to append to the system text."""
    lines = [
        json.dumps({"type": "function", "function": tool}, ensure_ascii=False)
        for tool in tools
    ]
    return _TOOLS_INTRO + "".join("\n" + line for line in lines) + _TOOLS_OUTRO


def _call_as_text(call: CallRecord) -> str:
    raw = call.get("arguments") or "{}"
    try:
        arguments: Any = json.loads(raw)
    except (TypeError, ValueError):
        arguments = raw  # keep what the model wrote; it was told it was invalid
    body = json.dumps({"name": call.get("name", ""), "arguments": arguments}, ensure_ascii=False)
    return f"{OPEN_TAG}\n{body}\n{CLOSE_TAG}"


def _assistant_text(message: Message) -> str:
    parts = [message.get("content") or ""]
    parts += [_call_as_text(call) for call in message.get("tool_calls") or []]
    return "\n".join(part for part in parts if part)


def to_text_messages(
    messages: list[Message],
    tools: list[ToolSchema] | None,
    dialect: Dialect = TEXT_CALLS,
) -> list[dict[str, Any]]:
    """Neutral history → plain chat messages that any chat server accepts.

    Calls and results travel as text only: an assistant message carries its
    calls as ``<tool_call>`` blocks, and the results of one step go back as
    one user message of ``<tool_response>`` blocks (the bytes Qwen's template
    renders for ``role: "tool"`` messages). A ``tool`` message answering no
    native call is refused by servers that check the history. User text that
    follows results (a note, the next question) joins that message: two user
    messages never stand side by side.

    When the history ends with tool results, the dialect's nudge is added to
    them (never stored in the history): without it the 0.5B model mostly
    echoes its call and invents a result instead of answering.

    The dialect's ``compact_results`` > 0: each tool result goes as compact text
    of at most that many characters (``compact.compact_result``), not as the
    stored JSON.
    """
    out: list[dict[str, Any]] = []
    previous = None
    last = messages[-1] if messages else None
    # the loop's note after results (a message of its own) comes after the nudge
    alone = last if last is not None and note_of(last) and last["content"] == note_of(last) else None
    for message in messages[:-1] if alone else messages:
        role, content = message["role"], message.get("content") or ""
        if role == "assistant":
            out.append({"role": "assistant", "content": _assistant_text(message)})
        elif role == "tool":
            if dialect.compact_results:
                content = compact_result(content, dialect.compact_results)
            block = f"{RESULT_OPEN}{content}{RESULT_CLOSE}"
            if previous == "tool":
                out[-1]["content"] += "\n" + block
            else:
                _add_user_text(out, block)
        elif role == "user":
            _add_user_text(out, content)
        else:
            out.append({"role": role, "content": content})
        previous = role
    if tools:
        # the advice, the date and the user's own prompt go after the tools: the fixed prefix
        # (instructions + tool block) is then the same for every session
        system = messages[0] if messages and messages[0]["role"] == "system" else None
        if system is None:
            prompt = SystemPrompt(_DEFAULT_SYSTEM)
        else:
            out.pop(0)
            prompt = system.get("prompt") or SystemPrompt(system["content"])  # one made elsewhere: all instructions
        out.insert(0, {"role": "system", "content": prompt.around(tools_system_block(tools))})
    if nudge := dialect.nudge(messages):
        _add_user_text(out, nudge)
    if alone:
        _add_user_text(out, alone["content"])
    return out


def _add_user_text(out: list[dict[str, Any]], text: str) -> None:
    if out and out[-1]["role"] == "user":
        out[-1]["content"] += "\n\n" + text
    else:
        out.append({"role": "user", "content": text})


# ---------------------------------------------------------------- parsing in
#
# Everything below is linear in the reply's length: no pattern has nested or
# adjacent unbounded quantifiers, brackets are counted by one scanner, and a
# held piece of a streamed reply is only re-read once it can be decided.


def _json_values(text: str) -> list[Any] | None:
    """All JSON values in ``text`` when it is nothing but JSON values, else None."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    pos = 0
    while (start := _NON_SPACE.search(text, pos)) is not None:
        try:
            value, pos = decoder.raw_decode(text, start.start())
        except (ValueError, RecursionError):  # deep nesting exhausts the decoder's stack
            return None
        values.append(value)
    return values or None


def _arguments_text(arguments: Any) -> str:
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments)  # double-encoded: unwrap once
        except (ValueError, RecursionError):
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
    """Best effort for broken JSON: a recognisable name plus the raw arguments text
    (what follows the arguments key, without one closing brace at the end)."""
    name = _NAME_RE.search(text)
    if name is None:
        return None
    args = _ARGS_KEY_RE.search(text, name.end()) or _ARGS_KEY_RE.search(text)
    if args is None:
        return name.group(1), text.strip()
    raw = text[args.end() :].rstrip()
    return name.group(1), (raw[:-1].rstrip() if raw.endswith("}") else raw)


def _closed(text: str) -> str | None:
    """``text`` with its missing closing brackets added, when only those are missing."""
    scan = JsonScan()
    scan.feed(text)
    tail = text.rstrip()[-1:]
    if scan.in_string or not scan.stack or not (tail in '"}]' or tail.isalnum()):
        return None  # cut inside a value: do not guess the rest
    return text.rstrip() + "".join(reversed(scan.stack))


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


def _partial_token_tail(text: str, start: int) -> int:
    """Length of the longest tail of ``text[start:]`` that starts one of the tokens."""
    for size in range(min(len(text) - start, len(CLOSE_TAG) - 1), 0, -1):
        tail = text[-size:]
        if any(token.startswith(tail) and token != tail for token in _TOKENS):
            return size
    return 0


class _UntilAny:
    """A hold that can end once one of ``tokens`` appears in the text fed from now on
    (``text[start:]``, already searched, can only contribute the start of one)."""

    def __init__(self, tokens: tuple[str, ...], text: str, start: int) -> None:
        self._tokens = tokens
        self._keep = max(len(token) for token in tokens) - 1
        self._tail = text[max(start, len(text) - self._keep) :]

    def ready(self, chunk: str) -> bool:
        window = self._tail + chunk
        if any(token in window for token in self._tokens):
            return True
        self._tail = window[max(0, len(window) - self._keep) :]
        return False


class _UntilNonSpace:
    def ready(self, chunk: str) -> bool:
        return _NON_SPACE.search(chunk) is not None


class _UntilBalanced:
    def __init__(self, scan: JsonScan) -> None:
        self._scan = scan

    def ready(self, chunk: str) -> bool:
        return self._scan.feed(chunk, stop_when_closed=True) >= 0


_Hold = _UntilAny | _UntilNonSpace | _UntilBalanced


class TextCallFilter:
    """Splits a streamed reply into visible text and tool calls written as text.

    ``feed`` returns what can be shown now; only text that may still turn out
    to be a call is held back. ``finish`` returns the rest and the calls.
    Chunk boundaries never change the result, and the work is linear in the
    reply: a held piece waits for what could decide it (a closing tag, a
    fence, the bracket that balances it) and is read again only then.
    """

    def __init__(self, tool_names: Iterable[str], id_prefix: str | None = None) -> None:
        self._known = frozenset(tool_names)
        self._prefix = id_prefix or f"call_text_{secrets.token_hex(3)}_"
        self._buf = ""  # the undecided text starts at _pos
        self._pos = 0
        self._pieces: list[str] = []  # fed since the last look at the buffer
        self._hold: _Hold | None = None  # what the held text waits for; None: look at every piece
        self._found: dict[str, int] = {}  # first position of each token from _pos on (-1: none)
        self._in_code = False  # inside a fenced block that is not JSON
        self._after_call = False  # the model sometimes separates bare calls with commas
        self._calls: list[ToolCall] = []

    def feed(self, chunk: str) -> str:
        self._pieces.append(chunk)
        if self._hold is not None and not self._hold.ready(chunk):
            return ""
        return self._drain(final=False)

    def finish(self) -> tuple[str, list[ToolCall]]:
        return self._drain(final=True), list(self._calls)

    def _drain(self, final: bool) -> str:
        self._buf = self._buf[self._pos :] + "".join(self._pieces)
        self._pos, self._pieces, self._hold, self._found = 0, [], None, {}
        shown: list[str] = []
        while self._pos < len(self._buf):
            if self._after_call and self._buf[self._pos] == ",":
                self._pos, self._after_call = self._pos + 1, False
                continue
            calls_before = len(self._calls)
            step = self._code_step(final) if self._in_code else self._step(final)
            if step is None:
                break
            visible, self._pos = step
            shown.append(visible)
            self._after_call = len(self._calls) > calls_before
        return "".join(shown)

    def _next(self, token: str, start: int) -> int:
        """The first ``token`` at or after ``start`` (-1: none); starts only grow within a drain."""
        at = self._found.get(token)
        if at is None or 0 <= at < start:
            at = self._found[token] = self._buf.find(token, start)
        return at

    def _add(self, calls: list[tuple[str, str]]) -> None:
        for name, arguments in calls:
            call_id = f"{self._prefix}{len(self._calls) + 1}"
            self._calls.append(ToolCall(id=call_id, name=name, arguments=arguments))

    # Each step decides the text at _pos: (visible text, new _pos), or None when it
    # needs more input (having set _hold when the wait may be long).

    def _step(self, final: bool) -> tuple[str, int] | None:
        buf, pos = self._buf, self._pos
        hits = [(at, token) for token in _TOKENS if (at := self._next(token, pos)) >= 0]
        if not hits:
            end = len(buf) - (0 if final else _partial_token_tail(buf, pos))
            return (buf[pos:end], end) if end > pos else None
        start, token = min(hits)
        if start > pos:
            return buf[pos:start], start
        if token == OPEN_TAG:
            return self._tagged(final)
        if token == CLOSE_TAG:
            return "", pos + len(CLOSE_TAG)  # a stray closing tag is never shown
        if token == FENCE:
            return self._fenced(final)
        return self._bare(final)

    def _tagged(self, final: bool) -> tuple[str, int] | None:
        buf, body_start = self._buf, self._pos + len(OPEN_TAG)
        ends = [at for at in (self._next(CLOSE_TAG, body_start), self._next(OPEN_TAG, body_start)) if at >= 0]
        if not ends and not final:
            self._hold = _UntilAny((CLOSE_TAG, OPEN_TAG), buf, body_start)
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
        buf, pos = self._buf, self._pos
        line_end = self._next("\n", pos + len(FENCE))
        if line_end < 0:
            if final:
                return buf[pos:], len(buf)
            self._hold = _UntilAny(("\n",), buf, pos + len(FENCE))
            return None
        if buf[pos + len(FENCE) : line_end].strip().lower() not in _JSON_FENCE_INFOS:
            self._in_code = True
            return buf[pos : line_end + 1], line_end + 1
        close = self._next(FENCE, line_end)
        if close < 0 and not final:
            self._hold = _UntilAny((FENCE,), buf, line_end)
            return None
        end = close + len(FENCE) if close >= 0 else len(buf)
        body = buf[line_end + 1 : close if close >= 0 else len(buf)]
        if self._take_known(body):
            return "", end
        return buf[pos:end], end

    def _bare(self, final: bool) -> tuple[str, int] | None:
        buf, pos = self._buf, self._pos
        first = _NON_SPACE.search(buf, pos + 1)
        if first is None:
            if final:
                return "{", pos + 1
            self._hold = _UntilNonSpace()
            return None
        if buf[first.start()] not in '"}':
            return "{", pos + 1  # prose with a brace, not a JSON object
        scan = JsonScan()
        end = scan.feed(buf, pos, stop_when_closed=True)
        if end < 0 and not final:
            self._hold = _UntilBalanced(scan)
            return None
        end = end if end >= 0 else len(buf)
        if self._take_known(buf[pos:end]):
            return "", end
        return buf[pos:end], end

    def _take_known(self, text: str) -> bool:
        """Record the calls in ``text`` if it is (only) calls to known tools."""
        calls = _parse_calls(text)
        if not calls or any(name not in self._known for name, _ in calls):
            return False
        self._add(calls)
        return True

    def _code_step(self, final: bool) -> tuple[str, int] | None:
        buf, pos = self._buf, self._pos
        close = self._next(FENCE, pos)
        if close >= 0:
            self._in_code = False
            return buf[pos : close + len(FENCE)], close + len(FENCE)
        backticks = len(buf) - len(buf.rstrip("`"))
        end = len(buf) - (0 if final else min(backticks, len(buf) - pos))
        return (buf[pos:end], end) if end > pos else None


class EchoHold:
    """Holds back a streamed answer while it may be ``question`` repeated (``dialect.repeats``):
    while its flat form (``dialect.flat``) is a start of the question's, or, for a question of
    ``WHOLE`` flat characters or more, starts with all of it; such a question may come after a
    few characters of ``PREAMBLE`` ("好的，" + the question: the 0.5B model's echo of a chat it was
    not gated on). What diverges is let out with what was held, in order, and nothing is held
    again; the text compared is at most the question and the preamble long.
    The words the answer is led in with (``lead``, the grammar's: "根据工具结果，") are held
    and then skipped: the 0.5B model went on from them with the question.
    ``finish`` tells what is left: the text to show, or the answer held back as an echo."""

    PREAMBLE = 4  # flat characters an echo of a long question may begin with ("ok, ", "好的，")

    def __init__(self, question: str, lead: str = "") -> None:
        self._question = question
        self._flat = flat(question)
        self._lead = flat(lead)
        self._said = ""  # the answer's flat text so far, while it may still become an echo
        self._whole = False  # the question was said whole: the rest is held for ``finish``
        self._held: list[str] | None = []  # None: let out, nothing is held any more

    def feed(self, text: str) -> str:
        if self._held is None:
            return text
        self._held.append(text)
        if self._follows(flat(text)):
            return ""
        held, self._held = "".join(self._held), None
        return held

    def _follows(self, said: str) -> bool:
        if self._whole:
            return True
        self._said += said
        if self._lead.startswith(self._said):
            return True  # (still) the lead
        skip = len(self._lead) if self._said.startswith(self._lead) else 0
        long = len(self._flat) >= WHOLE
        for start in range(min(self.PREAMBLE, len(self._said) - skip) + 1 if long else 1):
            rest = self._said[skip + start:]
            if self._flat.startswith(rest):
                return True  # a start of the question, or of a preamble
            if long and rest.startswith(self._flat):
                self._whole = True
                return True
        return False  # (a short question said and more: an answer that begins with it)

    def finish(self) -> tuple[str, str]:
        """(the held text to show, the answer held back as an echo of the question): one is ""."""
        held, self._held = "".join(self._held or ()), None
        return ("", held) if repeats(held, self._question) else (held, "")


def parse_text_calls(text: str, tool_names: Iterable[str]) -> tuple[str, list[ToolCall]]:
    """Whole-reply form of TextCallFilter (same result as any chunking)."""
    text_filter = TextCallFilter(tool_names, id_prefix="call_text_")
    shown = text_filter.feed(text)
    rest, calls = text_filter.finish()
    return shown + rest, calls
