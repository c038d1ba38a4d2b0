"""Request windowing: what part of the history goes into each request, in one place.

The stored history (``repl/loop/history.py``) is complete; a request is a window
on it. ``ContextWindow.fit()`` is the one entry point: the agent loop asks it
before every model call, ``/compact`` before its summary call. The size of a
request is the prompt tokens the server reported for the previous one plus an
estimate of what was added since; with nothing reported (first call, a server
without usage) it is an estimate of the whole request.

When a request does not fit, it is cut (``_plan_cut``: old tool results
shortened to head and tail, then the oldest whole turns dropped, so a tool call
is never separated from its results and the system prompt and the current turn
are never touched) down to ``refill`` of the budget, and the cut is kept: later
requests that only add messages get the very same cut, so their prefix stays
byte-identical and providers' prefix caches keep working, until the window
fills up again. Cutting just enough on every request would shift the prefix on
every request and defeat those caches.

A session owns one ``ContextWindow`` (switching the model starts a new one);
``run_turn`` makes a throwaway one when it is not given any.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from repl.loop.events import Usage
from repl.providers.base import Message, estimate_tokens
from tools.registry import ToolSchema

REFILL = 0.75  # an overflowing request is cut down to this share of the budget
KEEP_RESULT_CHARS = 300  # head + tail kept of an old tool result when the window is tight

Messages = list[Message]


@lru_cache(maxsize=16384)
def cached_estimate(text: str) -> int:
    """``estimate_tokens`` remembered per string (history strings are re-sent on every request)."""
    return estimate_tokens(text)


def text_of(message: Message) -> str:
    """The text of a message that counts towards its size (content and tool calls)."""
    calls = message.get("tool_calls") or []
    return (message.get("content") or "") + "".join(c["name"] + c["arguments"] for c in calls)


def messages_tokens(messages: Messages, estimate: Callable[[str], int] = cached_estimate) -> int:
    return sum(estimate(text_of(m)) for m in messages)


def tools_tokens(tools: list[ToolSchema] | None) -> int:
    return cached_estimate(json.dumps(tools, ensure_ascii=False)) if tools else 0


@dataclass
class ContextWindow:
    """The sizes and the cut of one conversation's requests (see the module's text)."""

    refill: float = REFILL
    last_size: int = 0  # tokens of the last request (reported once the answer came)
    _full: Messages = field(default_factory=list)  # the last request before fitting
    _sent: Messages = field(default_factory=list)  # ... and as sent
    _plan: WindowPlan | None = None  # the cut kept while requests only grow
    _tools: int = 0  # estimated tokens of the tools sent with it
    _reported: int | None = None  # prompt tokens the server reported for it

    def fit(self, messages: Messages, tools: list[ToolSchema] | None,
            budget: int) -> tuple[Messages, list[str]]:
        """The request to send (``messages`` cut to ``budget`` tokens when needed) and what was
        cut, if anything new (for a notice). The stored history is not changed."""
        tool_tokens = tools_tokens(tools)
        plan = self._plan if self._plan and _extends(messages, self._full) else None
        candidate = _apply_cut(messages, plan)
        size = self.size(candidate, tool_tokens)
        actions: list[str] = []
        if size > budget:
            whole = size if plan is None else self.size(messages, tool_tokens)
            plan = _plan_cut(messages, budget, cached_estimate, size=whole, target=int(budget * self.refill))
            candidate = _apply_cut(messages, plan)
            if plan is not None:
                size, actions = plan.total, list(plan.actions)
            if size > budget:
                actions.append(f"still ~{size} tokens: the current turn alone does not fit")
        self._full, self._sent, self._plan = messages, candidate, plan
        self._tools, self._reported, self.last_size = tool_tokens, None, size
        return candidate, actions

    def size(self, messages: Messages, tool_tokens: int) -> int:
        """Tokens of a request: the last report plus the estimated difference, else an estimate."""
        if self._reported is None:
            return messages_tokens(messages) + tool_tokens
        n = len(self._sent)
        if _extends(messages, self._sent):
            added = messages_tokens(messages[n:])
        else:  # cut differently (/undo, /compact, a new cut): correct the report by the estimates
            added = messages_tokens(messages) - messages_tokens(self._sent)
        return max(0, self._reported + added + tool_tokens - self._tools)

    def reported(self, usage: Usage) -> None:
        """The answer's usage: a reported prompt size anchors the next estimate."""
        if not usage.estimated and usage.input_tokens > 0:
            self._reported = usage.input_tokens
            self.last_size = usage.input_tokens


def _extends(messages: Messages, earlier: Messages) -> bool:
    # Requests are fresh copies of the history's dicts sharing their strings,
    # so this equality check mostly compares identities: cheap.
    return len(messages) >= len(earlier) and messages[: len(earlier)] == earlier


@dataclass(frozen=True)
class WindowPlan:
    """How one request is cut to fit: some old tool results shortened, the oldest turns dropped.

    Indices refer to the unfitted request (``History.for_request()``). A plan
    stays valid for every later request that extends that one, so applying it
    again keeps the request prefix byte-identical.
    """

    first: int  # 1 when messages[0] is the system prompt, else 0
    cut_at: int  # index of the first message kept after the system prompt
    shortened: frozenset[int]  # tool results (kept ones) sent head and tail only
    total: int  # estimated tokens of the fitted request
    actions: tuple[str, ...]  # what was done, for the notice


def _plan_cut(
    messages: list[Message], budget: int, estimate: Callable[[str], int],
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
    actions = [f"shortened {len(kept)} old tool result{'' if len(kept) == 1 else 's'}"] if kept else []
    dropped = sum(1 for s in starts if first <= s < cut_at)
    if dropped:
        actions.append("dropped the oldest turn" if dropped == 1 else f"dropped the {dropped} oldest turns")
    return WindowPlan(first, cut_at, kept, total, tuple(actions))


def _apply_cut(messages: list[Message], plan: WindowPlan | None) -> list[Message]:
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


def shorten_result(content: str) -> str:
    """An old tool result's head and tail, marked (deterministic: the same input, the same bytes)."""
    cut = len(content) - 2 * KEEP_RESULT_CHARS
    return (f"{content[:KEEP_RESULT_CHARS]} …[{cut} characters of an old result "
            f"cut to fit the context window]… {content[-KEEP_RESULT_CHARS:]}")
