"""The conversation, kept valid at all times.

Messages are provider-neutral dicts (each wire adapter converts them):

- ``{"role": "user", "content": str}``
- ``{"role": "assistant", "content": str, "tool_calls": [{"id", "name", "arguments"}]}``
- ``{"role": "tool", "tool_call_id": str, "name": str, "content": str}``

The system prompt is held apart and prepended by ``for_request()``. The
invariant (every assistant tool call answered exactly once, in order, before
anything else; no result without its call; never two user messages side by
side) is enforced here and nowhere else: ``end_turn()`` repairs whatever an
interrupted or failed turn left behind. Text enters as valid Unicode
(``valid_text``), so the journal, ``/save`` and every request can encode it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from repl.providers.base import new_call_id
from repl.unicode import valid_data, valid_text

NO_ANSWER = "[no answer: the session ended before the model replied]"
INTERRUPTED_RESULT = {"ok": False, "error": {"type": "interrupted", "message": "the user interrupted this call before it finished"}}


@dataclass
class History:
    system_prompt: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    # call_ids() cache: (messages counted, their call ids, the last message counted)
    _ids: tuple[int, Any, Any] = field(default=(0, frozenset(), None), repr=False, compare=False)

    # ---- building a turn -------------------------------------------------
    def begin_turn(self, text: str) -> None:
        self.end_turn()  # repair anything a crash left behind
        self.messages.append({"role": "user", "content": valid_text(text)})

    def add_assistant(self, text: str, tool_calls: list[dict[str, str]] | None = None) -> None:
        self._answer_pending()
        message: dict[str, Any] = {"role": "assistant", "content": valid_text(text)}
        if tool_calls:
            message["tool_calls"] = [valid_data(dict(c)) for c in tool_calls]
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

    def drop_last_turn(self) -> list[dict[str, Any]]:
        starts = self.turn_starts()
        if not starts:
            return []
        removed = self.messages[starts[-1] :]
        del self.messages[starts[-1] :]
        return removed

    def replace_last(self, content: str) -> str:
        """Step mode's edit of the message about to be sent (the question or a tool result):
        a new message object, so the journal writes it; returns the old content."""
        last = self.messages[-1] if self.messages else {}
        if last.get("role") not in ("user", "tool"):
            raise ValueError("only a question or a tool result can be edited before it is sent")
        self.messages[-1] = {**last, "content": valid_text(content)}
        return last["content"]

    def reset(self) -> None:
        self.messages.clear()

    def for_request(self) -> list[dict[str, Any]]:
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return system + [dict(m) for m in self.messages]

    # ---- (de)serialisation -------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"system_prompt": self.system_prompt, "messages": self.messages}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> History:
        """A saved history, repaired: a turn cut off by a crash keeps its question."""
        history = cls(data.get("system_prompt", ""), [dict(m) for m in data.get("messages", [])])
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


def check(messages: list[dict[str, Any]]) -> list[str]:
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


def repair(messages: list[Any]) -> tuple[list[dict[str, Any]], list[str]]:
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
    out: list[dict[str, Any]] = []
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


def _name_of(messages: list[dict[str, Any]], call_id: str) -> str:
    calls = messages[-1].get("tool_calls", []) if messages else []
    return next((c["name"] for c in calls if c["id"] == call_id), "")


def _clean(raw: Any, fixes: dict[str, int]) -> dict[str, Any] | None:
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
        message: dict[str, Any] = {"role": "assistant", "content": valid_text(content)}
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


def _clean_calls(calls: Any, fixes: dict[str, int]) -> list[dict[str, str]]:
    if calls is None:
        return []
    items = calls if isinstance(calls, list) else [calls]
    clean = []
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


# ---- context window -------------------------------------------------------------

KEEP_RESULT_CHARS = 300  # head + tail kept of an old tool result when the window is tight


@dataclass(frozen=True)
class WindowPlan:
    """How one request is cut to fit: some old tool results shortened, the oldest turns dropped.

    Indices refer to the unfitted request (``History.for_request()``). A plan
    stays valid for every later request that extends that one, so applying it
    again keeps the request prefix byte-identical (see ``repl/context.py``).
    """

    first: int  # 1 when messages[0] is the system prompt, else 0
    cut_at: int  # index of the first message kept after the system prompt
    shortened: frozenset[int]  # tool results (kept ones) sent head and tail only
    total: int  # estimated tokens of the fitted request
    actions: tuple[str, ...]  # what was done, for the notice


def plan_window(
    messages: list[dict[str, Any]], budget: int, estimate: Callable[[str], int],
    *, size: int | None = None, target: int | None = None,
) -> WindowPlan | None:
    """How to cut ``messages`` to fit ``budget`` tokens; None when they fit as they are.

    ``size`` is the request's size when the caller knows better than the sum of
    the messages' estimates (reported tokens, tools). An oversized request is
    cut down to ``target`` (default ``budget``): first old tool results are
    shortened (head and tail kept, marked), then the oldest whole turns are
    dropped. The system prompt and the current turn are never touched, and a
    call is never separated from its results.
    """
    if size is not None and size <= budget:
        return None
    texts = [text_of(m) for m in messages]
    if size is None and sum(map(len, texts)) <= budget:  # an estimate never exceeds the character count
        return None
    sizes = [estimate(t) for t in texts]
    total = sum(sizes) if size is None else size
    if total <= budget:
        return None
    target = budget if target is None else min(target, budget)
    starts = [i for i, m in enumerate(messages) if m["role"] == "user"]
    current = starts[-1] if starts else len(messages)
    shortened: set[int] = set()
    for i in range(current):
        if total <= target:
            break
        content = messages[i].get("content") or ""
        if messages[i]["role"] == "tool" and len(content) > 2 * KEEP_RESULT_CHARS:
            new_size = estimate(shorten_result(content))
            total += new_size - sizes[i]
            sizes[i] = new_size
            shortened.add(i)
    first = 1 if messages and messages[0]["role"] == "system" else 0
    cut_at = first
    for nxt in [s for s in starts if s > first]:
        if total <= target or nxt > current:
            break
        total -= sum(sizes[cut_at:nxt])
        cut_at = nxt
    kept = frozenset(i for i in shortened if i >= cut_at)
    actions = [f"shortened {len(kept)} old tool results"] if kept else []
    dropped = sum(1 for s in starts if first <= s < cut_at)
    if dropped:
        actions.append(f"dropped the {dropped} oldest turns")
    return WindowPlan(first, cut_at, kept, total, tuple(actions))


def apply_window(messages: list[dict[str, Any]], plan: WindowPlan | None) -> list[dict[str, Any]]:
    """``messages`` as ``plan`` cuts them (the list itself when there is no plan)."""
    if plan is None:
        return messages
    out = messages[: plan.first]
    for i in range(plan.cut_at, len(messages)):
        message = messages[i]
        if i in plan.shortened:
            message = {**message, "content": shorten_result(message["content"])}
        out.append(message)
    return out


def fit_window(
    messages: list[dict[str, Any]], budget: int, estimate: Callable[[str], int]
) -> tuple[list[dict[str, Any]], list[str]]:
    """``messages`` cut to fit ``budget`` tokens, and what was done (for a notice).

    The stored history is not changed: only the request is windowed.
    """
    plan = plan_window(messages, budget, estimate)
    return apply_window(messages, plan), list(plan.actions if plan else ())


def shorten_result(content: str) -> str:
    """An old tool result's head and tail, marked (deterministic: the same input, the same bytes)."""
    cut = len(content) - 2 * KEEP_RESULT_CHARS
    return (f"{content[:KEEP_RESULT_CHARS]} …[{cut} characters of an old result "
            f"cut to fit the context window]… {content[-KEEP_RESULT_CHARS:]}")


def text_of(message: dict[str, Any]) -> str:
    """The text of a message that counts towards its size (content and tool calls)."""
    calls = message.get("tool_calls") or []
    return (message.get("content") or "") + "".join(c["name"] + c["arguments"] for c in calls)
