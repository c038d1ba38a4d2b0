"""The conversation, kept valid at all times.

Messages are provider-neutral dicts (each wire adapter converts them):

- ``{"role": "user", "content": str}``
- ``{"role": "assistant", "content": str, "tool_calls": [{"id", "name", "arguments"}]}``
- ``{"role": "tool", "tool_call_id": str, "name": str, "content": str}``

The system prompt (its parts: ``SystemPrompt``) is held apart and prepended by
``for_request()``; what part
of the history a request carries is decided in ``repl/loop/context.py``. The
invariant (every assistant tool call answered exactly once, in order, before
anything else; no result without its call; never two user messages side by
side) is enforced here and nowhere else: ``end_turn()`` repairs whatever an
interrupted or failed turn left behind. Text enters as valid Unicode
(``valid_text``), so the journal, ``/save`` and every request can encode it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from repl.loop.unicode import valid_data, valid_text
from repl.providers.base import CallRecord, Message, SystemPrompt, new_call_id

# Where the text of files a message attached (``@path``) begins, after what was typed: the
# mentions write it, the router and the trace views read what was typed before it.
ATTACHED = "\n\nAttached file "

NO_ANSWER = "[no answer: the session ended before the model replied]"
INTERRUPTED_RESULT = {"ok": False, "error": {"type": "interrupted", "message": "the user interrupted this call before it finished"}}


@dataclass(init=False)
class History:
    system_prompt: SystemPrompt
    messages: list[Message]
    # call_ids() cache: (messages counted, their call ids, the last message counted)
    _ids: tuple[int, Any, Any] = field(repr=False, compare=False)

    def __init__(self, system_prompt: SystemPrompt | str = "", messages: list[Message] | None = None) -> None:
        """``system_prompt`` as text (a test's, a saved history's): all instructions."""
        self.system_prompt = SystemPrompt(system_prompt) if isinstance(system_prompt, str) else system_prompt
        self.messages = [] if messages is None else messages
        self._ids = (0, frozenset(), None)

    # ---- building a turn -------------------------------------------------
    def begin_turn(self, text: str) -> None:
        self.end_turn()  # repair anything a crash left behind
        self.messages.append({"role": "user", "content": valid_text(text)})

    def add_assistant(self, text: str, tool_calls: list[CallRecord] | None = None) -> None:
        self._answer_pending()
        message: Message = {"role": "assistant", "content": valid_text(text)}
        if tool_calls:
            message["tool_calls"] = [valid_data(CallRecord(**c)) for c in tool_calls]
        self.messages.append(message)

    def add_tool_result(self, call_id: str, name: str, content: str) -> None:
        if call_id not in self.pending_call_ids():
            raise ValueError(f"no pending tool call {call_id!r}")
        self.messages.append(
            {"role": "tool", "tool_call_id": call_id, "name": name, "content": valid_text(content)}
        )

    def pending_call_ids(self) -> list[str]:
        """Ids of the last assistant message's calls that have no result yet."""
        for i in range(len(self.messages) - 1, -1, -1):
            message = self.messages[i]
            if message["role"] == "assistant":
                answered = {m["tool_call_id"] for m in self.messages[i + 1 :]}
                return [c["id"] for c in message.get("tool_calls", []) if c["id"] not in answered]
            if message["role"] != "tool":
                return []
        return []

    def call_ids(self) -> set[str]:
        """Ids of every tool call in the conversation; kept up to date as it grows, so a
        long conversation is not scanned again on every step. Do not modify the set."""
        counted, ids, last = self._ids
        if not counted or counted > len(self.messages) or self.messages[counted - 1] is not last:
            counted, ids = 0, set()  # new, cut back or replaced (/undo, /compact): count again
        for message in self.messages[counted:]:
            ids.update(c["id"] for c in message.get("tool_calls") or [])
        self._ids = (len(self.messages), ids, self.messages[-1] if self.messages else None)
        return ids

    def end_turn(self) -> None:
        """Answer unanswered calls and drop a question that got no answer at all.

        A question whose turn failed before the model said anything is removed
        (the user sees the error and can ask again) so that two user messages
        never stand side by side.
        """
        self._answer_pending()
        if self.messages and self.messages[-1]["role"] == "user":
            self.messages.pop()

    def _answer_pending(self) -> None:
        pending = self.pending_call_ids()
        if pending:
            names = self._call_names()
            for call_id in pending:
                self.add_tool_result(call_id, names.get(call_id, ""), json.dumps(INTERRUPTED_RESULT))

    # ---- whole turns -------------------------------------------------------
    def turn_starts(self) -> list[int]:
        return [i for i, m in enumerate(self.messages) if m["role"] == "user"]

    def drop_last_turn(self) -> list[Message]:
        starts = self.turn_starts()
        if not starts:
            return []
        removed = self.messages[starts[-1] :]
        del self.messages[starts[-1] :]
        return removed

    def replace_last(self, content: str) -> str:
        """Step mode's edit of the message about to be sent (the question or a tool result):
        a new message object, so the journal writes it; returns the old content."""
        last = self.messages[-1] if self.messages else None
        if last is None or last["role"] not in ("user", "tool"):
            raise ValueError("only a question or a tool result can be edited before it is sent")
        self.messages[-1] = {**last, "content": valid_text(content)}
        return last["content"]

    def take_back_answer(self) -> Message:
        """The last message, an answer without calls, removed (the model is asked for another:
        the loop's ``after_answer``); the question or the results before it stand unanswered."""
        last = self.messages[-1] if self.messages else None
        if last is None or last["role"] != "assistant" or last.get("tool_calls"):
            raise ValueError("only an answer without calls can be taken back")
        return self.messages.pop()

    def reset(self) -> None:
        self.messages.clear()

    def for_request(self) -> list[Message]:
        return self.system_prompt.messages() + [Message(**m) for m in self.messages]

    # ---- (de)serialisation -------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"system_prompt": self.system_prompt.text, "messages": self.messages}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> History:
        """A saved history (its system prompt as parts or text), repaired: a turn cut off by a
        crash keeps its question."""
        history = cls(data.get("system_prompt", ""), [m.copy() for m in data.get("messages", [])])
        history._answer_pending()
        if history.messages and history.messages[-1]["role"] == "user":
            history.add_assistant(NO_ANSWER)
        return history

    def _call_names(self) -> dict[str, str]:
        return {
            c["id"]: c["name"]
            for m in self.messages
            if m["role"] == "assistant"
            for c in m.get("tool_calls", [])
        }


def check(messages: list[Message]) -> list[str]:
    """Every way ``messages`` breaks the invariant (empty when valid)."""
    errors: list[str] = []
    pending: list[str] = []
    previous_role = None
    for i, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                errors.append(f"message {i}: result for unknown or answered call {message.get('tool_call_id')!r}")
            else:
                pending.remove(message["tool_call_id"])
        else:
            if pending:
                errors.append(f"message {i}: calls {pending} were never answered")
                pending = []
            if role == "user" and previous_role == "user":
                errors.append(f"message {i}: two user messages side by side")
            if role == "assistant":
                pending = [c["id"] for c in message.get("tool_calls", [])]
                if message.get("content") is None:
                    errors.append(f"message {i}: assistant content is null")
        previous_role = role
    if pending:
        errors.append(f"end: calls {pending} were never answered")
    return errors


def repair(messages: list[Any]) -> tuple[list[Message], list[str]]:
    """Messages from a file someone may have edited or damaged, made valid; and one
    line per kind of fix (empty when nothing was wrong).

    Each message becomes a well-typed neutral dict, or is dropped when it cannot
    (not an object, unknown role, no text). Then the order: a result without its
    call is dropped, calls left unanswered before the next message get an
    ``interrupted`` result, a call id used before gets a fresh one, and two
    questions in a row get a placeholder answer between them. Calls still open
    at the very end are left for ``History.from_json`` (a crash, not damage).
    """
    fixes: dict[str, int] = {}
    out: list[Message] = []
    pending: dict[str, list[str]] = {}  # call id as written -> ids given, of the last calls
    used: set[str] = set()
    for raw in messages:
        message = _clean(raw, fixes)
        if message is None:
            continue
        if message["role"] == "tool":
            ids = pending.get(message["tool_call_id"])
            if not ids:
                _count(fixes, "dropped tool results without their call")
                continue
            message["tool_call_id"] = ids.pop(0)
            out.append(message)
            continue
        if any(pending.values()):
            open_ids = [i for ids in pending.values() for i in ids]
            _count(fixes, "answered calls left without a result", len(open_ids))
            out += [{"role": "tool", "tool_call_id": i, "name": _name_of(out, i),
                     "content": json.dumps(INTERRUPTED_RESULT)} for i in open_ids]
        pending = {}
        if message["role"] == "user" and out and out[-1]["role"] == "user":
            _count(fixes, "put a placeholder answer between two questions")
            out.append({"role": "assistant", "content": NO_ANSWER})
        for call in message.get("tool_calls", []):
            written = call["id"]
            if not written or written in used:
                _count(fixes, "gave repeated call ids fresh ones")
                call["id"] = new_call_id()
            used.add(call["id"])
            pending.setdefault(written, []).append(call["id"])
        out.append(message)
    return out, [f"{what} ({n})" for what, n in fixes.items()]


def _count(fixes: dict[str, int], what: str, n: int = 1) -> None:
    fixes[what] = fixes.get(what, 0) + n


def _name_of(messages: list[Message], call_id: str) -> str:
    calls = messages[-1].get("tool_calls", []) if messages else []
    return next((c["name"] for c in calls if c["id"] == call_id), "")


def _clean(raw: Any, fixes: dict[str, int]) -> Message | None:
    """One message with exactly the keys and types of its role, or None (counted in ``fixes``)."""
    role = raw.get("role") if isinstance(raw, dict) else None
    content = raw.get("content") if isinstance(raw, dict) else None
    if role not in ("user", "assistant", "tool"):
        _count(fixes, "dropped messages that are not user, assistant or tool messages")
        return None
    if role == "assistant":
        calls = _clean_calls(raw.get("tool_calls"), fixes)
        if not isinstance(content, str):
            _count(fixes, "emptied answers whose text was not text")
            content = ""
        message: Message = {"role": "assistant", "content": valid_text(content)}
        if calls:
            message["tool_calls"] = calls
        return message
    if isinstance(content, (dict, list)) and role == "tool":  # a result stored as data: keep it as JSON
        _count(fixes, "turned tool results stored as data into text")
        content = json.dumps(content, ensure_ascii=False)
    call_id = raw.get("tool_call_id")
    if not isinstance(content, str) or (role == "tool" and not (isinstance(call_id, str) and call_id)):
        _count(fixes, f"dropped {role} messages without text" + (" or call id" if role == "tool" else ""))
        return None
    if role == "user":
        return {"role": "user", "content": valid_text(content)}
    name = raw.get("name")
    return {"role": "tool", "tool_call_id": valid_text(call_id), "name": valid_text(name) if isinstance(name, str) else "",
            "content": valid_text(content)}


def _clean_calls(calls: Any, fixes: dict[str, int]) -> list[CallRecord]:
    if calls is None:
        return []
    items = calls if isinstance(calls, list) else [calls]
    clean: list[CallRecord] = []
    for call in items:
        name = call.get("name") if isinstance(call, dict) else None
        if not isinstance(name, str) or not name:
            continue
        arguments = call.get("arguments")
        if not isinstance(arguments, str):
            arguments = "{}" if arguments is None else json.dumps(arguments, ensure_ascii=False, default=str)
        call_id = call.get("id")
        clean.append({"id": valid_text(call_id) if isinstance(call_id, str) else "", "name": valid_text(name),
                      "arguments": valid_text(arguments)})
    if len(clean) != len(items) or not isinstance(calls, list):
        _count(fixes, "dropped tool calls that were not well formed", len(items) - len(clean) or 1)
    return clean
