"""Typed events emitted by the agent loop.

The loop never prints; the terminal renderer, the JSONL trace, the session
journal and the one-shot JSON output all subscribe to these. Every event is a
frozen dataclass with a ``type`` tag so it serialises to one JSON object.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from repl.config.settings import GuardReason
from repl.providers.base import Usage

# A guard's reason (declared with the guards), or the loop's own; "user": stopped in step mode
StopReason = Literal["answer", "interrupted", "error", "user"] | GuardReason
# "hook": a hook of the user's, let approve by [hooks] may_approve
Decider = Literal["user", "rule", "mode", "hook"]


@dataclass(frozen=True)
class TurnStarted:
    turn: int
    user_text: str
    type: Literal["turn_started"] = "turn_started"


@dataclass(frozen=True)
class ModelRequest:
    """About to call the model (step counts from 1; tools=False for the final call)."""

    step: int
    model: str
    tools: bool
    type: Literal["model_request"] = "model_request"


@dataclass(frozen=True)
class Routed:
    """The tools a model call may use, as the router decided before it was sent
    (``providers.base.ToolChoice``): ``mode`` none, auto or required among ``allowed``; ``top``
    the best candidates with their scores, ``threshold`` the score a tool needed, ``by`` what
    decided ("meaning", "follow_up", "named", "knowledge", "over <the words' tools>")."""

    step: int
    mode: str
    allowed: tuple[str, ...]
    top: tuple[tuple[str, float], ...]
    threshold: float
    by: str = ""
    type: Literal["routed"] = "routed"

    def said(self) -> str:
        """The decision in words, for the terminal and the trace (names unescaped):
        "routed to get_weather · get_weather 0.82 · none 0.11 · list_todos 0.04 (needs 0.50)"."""
        tools = ", ".join(self.allowed)
        head = {"none": "no tool: answered in text",
                "required": f"routed to {tools}" if tools else "a tool call required",
                "auto": f"the model may call {tools} or answer" if tools else "the model may call any tool"
                }.get(self.mode, self.mode)
        scores = " · ".join(f"{name} {score:.2f}" for name, score in self.top[:3])
        if self.by.startswith(("words ", "value ")):
            # the tools' cues found ('words "umbrella", "rain"') or a value of the shape of a
            # parameter's example ('value todo-002'); several tools found are in the order of their
            # meaning (no threshold: chosen otherwise)
            kind, found = self.by.split(" ", 1)
            head += f" by {found}" if kind == "words" else f" by the value {found}"
            return f"{head} · ranked by meaning: {scores}" if scores else head
        elif self.by == "small talk":
            head = "small talk: answered without tools"
        elif self.by == "knowledge":  # top: the probability it was a request, threshold: the least kept
            head = "a question of knowledge: answered without tools"
        elif self.by == "follow_up":
            head += " (a follow-up of the turn before)"
        elif self.by == "named":
            head += " (the message names it)"
        elif self.by == "meaning":
            head += " by meaning"
        elif self.by.startswith("over "):  # the words' choice overruled; threshold: the score that took
            head += f" by meaning, over {self.by.removeprefix('over ')} by words"
        return f"{head} · {scores} (needs {self.threshold:.2f})" if scores else head


@dataclass(frozen=True)
class TextDelta:
    step: int
    text: str
    type: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True)
class ReasoningDelta:
    """The model's reasoning as it streams (``reasoning_content``, Responses reasoning
    summaries): shown dimmed, traced, never sent back to the model."""

    step: int
    text: str
    type: Literal["reasoning_delta"] = "reasoning_delta"


@dataclass(frozen=True)
class ModelRetry:
    """A model call failed in a way worth retrying: attempt ``attempt`` of ``attempts``
    starts in ``delay_s`` seconds. ``reason`` is short: "429 rate limited", "timeout"."""

    step: int
    attempt: int
    attempts: int
    delay_s: float
    reason: str
    type: Literal["model_retry"] = "model_retry"


@dataclass(frozen=True)
class ModelUsage:
    step: int
    usage: Usage
    latency_s: float
    finish_reason: str | None
    retries: int = 0
    model: str | None = None  # the model the answer named (may differ from the one asked for)
    type: Literal["model_usage"] = "model_usage"


@dataclass(frozen=True)
class WireRecord:
    """What went over the wire for model call ``step``: the request body exactly as sent
    (``kind="request"``, after windowing and any text tool-call transform), the response
    as assembled from the stream (``kind="response"``: text, tool calls, usage, finish
    reason, and ``http``: the attempt, method, URL, status, the headers that matter, how many
    stream events came and when the first and last arrived), or an attempt that failed
    (``kind="error"``: ``attempt``, ``status``, the server's ``response`` body (an answer that
    broke off: what came of it), ``reason``, ``retried_as``, the attempt that retried it,
    ``method``, ``url``, ``headers``, ``elapsed_s``). The trace keeps these apart from the
    events, capped (``/trace --raw``)."""

    step: int
    kind: Literal["request", "response", "error"]
    body: Any
    type: Literal["wire"] = "wire"


@dataclass(frozen=True)
class ToolCallStarted:
    step: int
    call_id: str
    name: str
    arguments: Any  # parsed dict when valid JSON, else the raw string
    side_effects: bool
    type: Literal["tool_call_started"] = "tool_call_started"


@dataclass(frozen=True)
class ApprovalRequested:
    step: int
    call_id: str
    name: str
    arguments: Any
    type: Literal["approval_requested"] = "approval_requested"


@dataclass(frozen=True)
class ApprovalDecided:
    step: int
    call_id: str
    name: str
    allowed: bool
    by: Decider
    reason: str = ""
    decided_s: float = 0.0  # how long the person took (0 when a rule or the mode decided)
    type: Literal["approval_decided"] = "approval_decided"


TRUNCATED = "truncated"  # the error type of a call from an answer cut off at the token limit: it did not run


@dataclass(frozen=True)
class ToolCallFinished:
    step: int
    call_id: str
    name: str
    ok: bool
    result: dict[str, Any]
    duration_s: float
    error_type: str | None = None
    repeat_of: str = ""  # the id of the identical earlier call whose outcome this one got (it did not run)
    type: Literal["tool_call_finished"] = "tool_call_finished"


@dataclass(frozen=True)
class UserStep:
    """Something the user changed in step mode: ``edited_by_user`` (the message about to be
    sent), ``skipped_by_user`` / ``result_by_user`` (a tool call), ``tools_disabled_by_user``,
    ``stopped_by_user``. ``detail``: the message before and after, or the call's result."""

    step: int
    action: Literal["edited_by_user", "skipped_by_user", "result_by_user", "tools_disabled_by_user",
                    "stopped_by_user"]
    call_id: str = ""
    name: str = ""
    detail: Any = None
    type: Literal["user_step"] = "user_step"


@dataclass(frozen=True)
class StepPaused:
    """Step mode held the loop for ``paused_s`` seconds, ending now, before model call ``step``
    (``before="model_call"``) or before its tool calls ran (``"tools"``), so the timeline
    draws the pause as a pause."""

    step: int
    before: Literal["model_call", "tools"]
    paused_s: float
    type: Literal["step_paused"] = "step_paused"


def short_command(command: str, limit: int = 40) -> str:
    """A command as a label: each path by its last part (``python3 guard.py``), at most ``limit``
    characters (the trace keeps it whole)."""
    short = " ".join(part.rstrip("/").rsplit("/", 1)[-1] or part for part in command.split())
    return short if len(short) <= limit else short[: limit - 1] + "…"


# What a hook of the user's decided: went on, allowed, denied (blocked), or the turn went on without
# it (it could not run, failed, printed what is not an answer, or was killed at its timeout).
HookDecision = Literal["continue", "allow", "deny", "failed", "timeout"]


@dataclass(frozen=True)
class HookRan:
    """One of the user's own commands ran at a point of the loop (``[[hooks.EVENT]]``):
    ``command`` as typed, its ``exit`` status (None: it did not start, or was killed), what it
    decided and ``detail`` (its reason, the arguments it replaced, why it failed); ``tool``: the
    call's tool, for the tool events."""

    event: str
    command: str
    exit: int | None
    decision: HookDecision
    duration_s: float
    detail: str = ""
    tool: str = ""
    type: Literal["hook_ran"] = "hook_ran"

    def said(self) -> str:
        """One line: "hook pre_tool_use delete_todo · python3 guard.py · exit 2 · blocked: not
        today · 12 ms"."""
        tool = f" {self.tool}" if self.tool else ""
        head = f"hook {self.event}{tool} · {short_command(self.command)}"
        outcome = {"continue": f"exit {self.exit}", "allow": f"exit {self.exit} · allowed",
                   "deny": f"exit {self.exit} · blocked", "failed": "failed",
                   "timeout": "timed out"}[self.decision]
        detail = f": {self.detail}" if self.detail else ""
        if self.decision in ("continue", "allow") and detail:
            detail = f" · {self.detail}"
        after = " (the turn goes on)" if self.decision in ("failed", "timeout") else ""
        return f"{head} · {outcome}{detail}{after} · {self.duration_s * 1000:.0f} ms"


@dataclass(frozen=True)
class TurnUndone:
    """``/undo`` or ``/retry`` took turn ``turn`` back (traced: a read-back marks it undone)."""

    turn: int
    type: Literal["turn_undone"] = "turn_undone"


@dataclass(frozen=True)
class Compared:
    """``/compare`` ran turn ``turn``'s question on ``model`` (side effects denied, nothing of it
    kept in the conversation); traced so a read-back shows each run beside the turn."""

    turn: int
    model: str
    tool_calls: tuple[str, ...]  # the tools it called, in order
    usage: Usage
    duration_s: float
    stopped_by: str
    answer: str
    error: str = ""  # why it could not run, or the error that ended it
    type: Literal["compared"] = "compared"


@dataclass(frozen=True)
class GuardTripped:
    step: int
    guard: StopReason
    detail: str
    type: Literal["guard_tripped"] = "guard_tripped"


@dataclass(frozen=True)
class Notice:
    """Something the user should see that is not an error (dim line)."""

    message: str
    type: Literal["notice"] = "notice"


@dataclass(frozen=True)
class ErrorEvent:
    """A failure that ended the turn (provider unreachable, 401, ...)."""

    kind: str
    message: str
    type: Literal["error"] = "error"


@dataclass(frozen=True)
class TurnFinished:
    turn: int
    stopped_by: StopReason
    steps: int
    tool_calls: int
    usage: Usage
    duration_s: float
    answer: str = ""
    type: Literal["turn_finished"] = "turn_finished"


Event = (
    TurnStarted
    | ModelRequest
    | Routed
    | TextDelta
    | ReasoningDelta
    | ModelRetry
    | ModelUsage
    | WireRecord
    | ToolCallStarted
    | ApprovalRequested
    | ApprovalDecided
    | ToolCallFinished
    | UserStep
    | StepPaused
    | HookRan
    | TurnUndone
    | Compared
    | GuardTripped
    | Notice
    | ErrorEvent
    | TurnFinished
)
Emit = Callable[[Event], None]


def to_dict(event: Event) -> dict[str, Any]:
    """JSON-ready dict of an event (Usage nested as a dict)."""
    return asdict(event)


@dataclass
class EventLog:
    """A subscriber that keeps every event (tests, one-shot JSON output)."""

    events: list[Event] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]
