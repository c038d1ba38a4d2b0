"""``/compact``: the older turns summarised by the model into one exchange.

Everything before the last turn goes to the model (no tools) with a request
to summarise it; the answer replaces those turns as one user/assistant pair,
so the history stays valid (whole turns only, calls never split from their
results). The caller keeps the old messages to undo it. The call is the loop's
(``Runner.call_model``), cut to the runner's provider's window like a turn's request.
"""

from __future__ import annotations

from dataclasses import dataclass

from repl.loop.agent import Runner
from repl.loop.context import ContextWindow, messages_tokens
from repl.loop.events import Usage
from repl.providers.base import Message, ProviderError, SystemPrompt, estimate_tokens

SUMMARY_REQUEST = (
    "Summarise our conversation so far; your summary will replace it in your memory. "
    "Keep what later turns may need: the user's goals and preferences, decisions, facts "
    "and figures from tool results (ids, names, dates, numbers), what was changed "
    "(todos, notes, files) and what is still open. Leave out small talk and anything "
    "superseded. Write a compact list in the user's language; no preamble."
)
SUMMARY_QUESTION = "[/compact] Summarise our conversation so far."
SUMMARY_HEADING = "Summary of the earlier conversation:\n\n"


@dataclass(frozen=True)
class Compacted:
    messages: list[Message]  # the new history messages
    turns: int  # how many turns the summary replaced
    before: int  # estimated tokens of system prompt + history, before and after
    after: int
    usage: Usage  # of the summarising call
    latency_s: float
    model: str | None = None  # the model the summary's answer named


def older_turns(messages: list[Message]) -> int:
    """Where the last turn starts: the messages before it are what a summary replaces."""
    starts = [i for i, m in enumerate(messages) if m["role"] == "user"]
    return starts[-1] if len(starts) >= 2 else 0


def compact(system_prompt: SystemPrompt, messages: list[Message], runner: Runner,
            instructions: str = "") -> Compacted | None:
    """Summarise all but the last turn with ``runner``'s model call (no tools); None
    when there are fewer than two turns.

    Raises ProviderError (and KeyboardInterrupt) like any model call; nothing
    is changed then.
    """
    split = older_turns(messages)
    if split == 0:
        return None
    request = SUMMARY_REQUEST + (f"\n\nAlso: {instructions.strip()}" if instructions.strip() else "")
    sent = [*system_prompt.messages(), *(m.copy() for m in messages[:split]), Message(role="user", content=request)]
    if (room := runner.room()) > 0:
        sent, _ = ContextWindow(refill=1.0).fit(sent, None, room)  # a one-off request: cut just enough
    completed = runner.call_model(sent, None)
    summary = completed.text.strip()
    if not summary:
        raise ProviderError("other", "the model returned an empty summary; nothing was changed")
    question = SUMMARY_QUESTION + (f" ({instructions.strip()})" if instructions.strip() else "")
    new: list[Message] = [{"role": "user", "content": question},
                          {"role": "assistant", "content": SUMMARY_HEADING + summary}, *messages[split:]]
    turns = sum(1 for m in messages[:split] if m["role"] == "user")
    base = estimate_tokens(system_prompt.text)
    return Compacted(new, turns, base + messages_tokens(messages), base + messages_tokens(new),
                     completed.usage, completed.latency_s, completed.model)

