"""Sizing and fitting each request to the context window, across a session.

The agent loop asks ``ContextWindow.fit()`` before every model call. The size
of a request is the prompt tokens the server reported for the previous one
plus an estimate of what was added since; with nothing reported (first call,
a server without usage) it is an estimate of the whole request.

When a request does not fit, ``plan_window`` cuts it (old tool results
shortened, oldest turns dropped) down to ``refill`` of the budget, and the cut
is kept: later requests that only add messages get the very same cut, so
their prefix stays byte-identical and providers' prefix caches keep working,
until the window fills up again. Cutting just enough on every request would
shift the prefix on every request and defeat those caches.

A session owns one ``ContextWindow`` (switching the model starts a new one);
``run_turn`` makes a throwaway one when it is not given any.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from repl.events import Usage
from repl.history import WindowPlan, apply_window, plan_window, text_of
from repl.providers.base import estimate_tokens

REFILL = 0.75  # an overflowing request is cut down to this share of the budget

Messages = list[dict[str, Any]]


@lru_cache(maxsize=16384)
def cached_estimate(text: str) -> int:
    """``estimate_tokens`` remembered per string (history strings are re-sent on every request)."""
    return estimate_tokens(text)


def messages_tokens(messages: Messages, estimate: Callable[[str], int] = cached_estimate) -> int:
    return sum(estimate(text_of(m)) for m in messages)


def tools_tokens(tools: list[dict[str, Any]] | None) -> int:
    return cached_estimate(json.dumps(tools, ensure_ascii=False)) if tools else 0


@dataclass
class ContextWindow:
    refill: float = REFILL
    last_size: int = 0  # tokens of the last request (reported once the answer came)
    _full: Messages = field(default_factory=list)  # the last request before fitting
    _sent: Messages = field(default_factory=list)  # ... and as sent
    _plan: WindowPlan | None = None
    _tools: int = 0  # estimated tokens of the tools sent with it
    _reported: int | None = None  # prompt tokens the server reported for it

    def fit(self, messages: Messages, tools: list[dict[str, Any]] | None,
            budget: int) -> tuple[Messages, list[str]]:
        """The request to send (``messages`` cut when needed) and what was cut, if anything new."""
        tool_tokens = tools_tokens(tools)
        plan = self._plan if self._plan and _extends(messages, self._full) else None
        candidate = apply_window(messages, plan)
        size = self.size(candidate, tool_tokens)
        actions: list[str] = []
        if size > budget:
            whole = size if plan is None else self.size(messages, tool_tokens)
            plan = plan_window(messages, budget, cached_estimate, size=whole,
                               target=int(budget * self.refill))
            candidate = apply_window(messages, plan)
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
