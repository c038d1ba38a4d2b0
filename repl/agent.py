"""The agent loop: model → tools → model, bounded, emitting typed events.

``run_turn()`` never touches the terminal. It asks the injected ``Approver``
before side effects, runs the read-only calls of a step concurrently, appends
exactly one result per call in call order, and stops on an answer or a
tripped guard (then one more model call with tools disabled, so the user
still gets an answer). Ctrl-C ends the turn as ``interrupted`` with a valid
history; it is the only exception that crosses a tool call.

``turn_timeout_s`` is a deadline, not only a check between steps: a model call
gets it (the provider drops a stream still open when it passes, even one kept
alive with keep-alive comments) and a tool call gets at most the time left.
Time spent waiting for the user's approval moves the deadline on.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from typing import Any

from repl.approval import Allow, ApprovalRequest, Approver, PendingCall
from repl.context import ContextWindow, cached_estimate, messages_tokens, tools_tokens
from repl.events import (
    ApprovalDecided,
    ApprovalRequested,
    Emit,
    ErrorEvent,
    GuardTripped,
    ModelRequest,
    ModelUsage,
    Notice,
    StopReason,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
    Usage,
)
from repl.history import History
from repl.providers.base import (
    Completed,
    Provider,
    ProviderError,
    TextPart,
    ToolCall,
)
from repl.unicode import split_high_surrogate, valid_text
from tools.registry import Registry, error_result

UNNAMED = "unnamed_tool"  # stands for a tool call that came without a name
FINAL_NOTE = (
    "Stop calling tools now ({reason}). Answer the user with what you have, "
    "and say briefly what is missing."
)
# The answer asked for after a timeout gets this share of turn_timeout_s (at most the cap).
FINAL_GRACE_SHARE, FINAL_GRACE_CAP_S = 0.25, 30.0

# Given the turn's usage so far: why the session's budget is spent, or None.
SessionBudget = Callable[[Usage], "str | None"]


@dataclass(frozen=True)
class Limits:
    max_steps: int = 8
    max_turn_tokens: int = 60_000
    repeat_limit: int = 3  # identical calls (tool + canonical arguments) allowed per turn
    turn_timeout_s: float = 300.0
    tool_timeout_s: float = 30.0
    max_tool_result_chars: int = 8_000


@dataclass
class _Turn:
    number: int
    started: float = field(default_factory=time.monotonic)
    steps: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    answer: str = ""
    seen: Counter[str] = field(default_factory=Counter)
    context: ContextWindow = field(default_factory=ContextWindow)
    budget: SessionBudget | None = None
    deadline: float = math.inf  # time.monotonic() when the turn's time is up

    def time_left(self) -> float:
        return self.deadline - time.monotonic()


class _Guard(Exception):
    def __init__(self, reason: StopReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class _OutOfTime(Exception):
    """The deadline passed during a model call (the stream was dropped)."""


_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="glassloop-tool")


def run_turn(
    history: History,
    user_text: str,
    *,
    provider: Provider,
    registry: Registry,
    approver: Approver,
    limits: Limits,
    emit: Emit,
    turn: int = 1,
    context: ContextWindow | None = None,
    budget: SessionBudget | None = None,
) -> TurnFinished:
    """One turn. ``context`` carries request sizes across turns (the session's);
    ``budget`` stops the turn before a model call once the session's budget is spent."""
    state = _Turn(turn, context=context or ContextWindow(), budget=budget)
    state.deadline = state.started + limits.turn_timeout_s
    approver.new_turn()
    history.begin_turn(user_text)
    emit(TurnStarted(turn, user_text))
    stopped_by: StopReason = "answer"
    try:
        stopped_by = _loop(state, history, provider, registry, approver, limits, emit)
    except KeyboardInterrupt:
        stopped_by = "interrupted"
    except _OutOfTime as cut:
        stopped_by = "timeout"
        emit(GuardTripped(state.steps, "timeout", str(cut)))
    except ProviderError as exc:
        stopped_by = "error"
        if exc.partial_text:
            history.add_assistant(exc.partial_text + "\n\n[answer cut off]")
            state.answer = exc.partial_text
        emit(ErrorEvent(exc.kind, exc.message))
    finally:
        history.end_turn()
    finished = TurnFinished(
        turn, stopped_by, state.steps, state.tool_calls, state.usage,
        round(time.monotonic() - state.started, 3), state.answer,
    )
    emit(finished)
    return finished


def _loop(state, history, provider, registry, approver, limits, emit) -> StopReason:
    tools = request_tools(registry.schemas())
    while True:
        try:
            _check_limits(state, limits)
        except _Guard as guard:
            return _final_answer(state, history, provider, limits, emit, guard)
        if _over_session_budget(state, emit):
            return "budget"
        state.steps += 1
        completed = _call_model(state, history, provider, tools, emit)
        if not completed.tool_calls:
            return "answer"
        try:
            _run_tools(state, history, completed.tool_calls, registry, approver, limits, emit)
        except _Guard as guard:
            return _final_answer(state, history, provider, limits, emit, guard)


def request_tools(schemas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tools in a fixed order, so the request prefix stays byte-identical for prompt caches:
    local tools as registered, then MCP tools (``server__tool``) by name, whichever
    server connected or restarted first. An MCP server whose tools arrive after the
    first request changes the list once (one cache miss), as does ``/mcp restart``
    when the server's tools changed."""
    return sorted(schemas, key=lambda s: ("__" in s["name"], s["name"] if "__" in s["name"] else ""))


def _over_session_budget(state: _Turn, emit: Emit) -> bool:
    reason = state.budget(state.usage) if state.budget else None
    if reason:
        emit(GuardTripped(state.steps, "budget", reason))
    return bool(reason)


def _check_limits(state: _Turn, limits: Limits) -> None:
    if state.steps >= limits.max_steps:
        raise _Guard("max_steps", f"reached the limit of {limits.max_steps} steps")
    if state.usage.total >= limits.max_turn_tokens:
        raise _Guard("budget", f"used {state.usage.total} of {limits.max_turn_tokens} tokens")
    if state.time_left() <= 0:
        raise _Guard("timeout", f"the turn ran over {limits.turn_timeout_s:g} s")


def _call_model(state, history, provider, tools, emit, final_note: str = "") -> Completed:
    step = state.steps
    messages = history.for_request()
    if final_note and messages[-1]["role"] == "user":
        messages[-1] = {**messages[-1], "content": f"{messages[-1]['content']}\n\n{final_note}"}
    elif final_note:
        messages.append({"role": "user", "content": final_note})
    messages = _windowed(messages, tools, provider, emit, state.context)
    emit(ModelRequest(step, provider.model, bool(tools)))
    completed: Completed | None = None
    text: list[str] = []
    held = ""  # the first half of a character whose second half may be in the next chunk
    sent = time.monotonic()
    stream = provider.stream(messages, tools or None, deadline=state.deadline)
    try:
        for part in stream:
            if isinstance(part, TextPart):
                ready, held = split_high_surrogate(held + part.text)
                if ready:
                    text.append(valid_text(ready))
                    emit(TextDelta(step, text[-1]))
            elif isinstance(part, Completed):
                completed = part
        if held:
            text.append(valid_text(held))
            emit(TextDelta(step, text[-1]))
    except KeyboardInterrupt:
        if text:
            history.add_assistant("".join(text) + "\n\n[interrupted]")
            state.answer = "".join(text)
        _count_interrupted(state, step, messages, tools, "".join(text), sent, emit)
        raise
    except ProviderError as exc:
        exc.partial_text = valid_text(exc.partial_text or "".join(text))
        if state.time_left() <= 0:  # the provider dropped the stream at the deadline
            _keep_cut_answer(state, history, exc.partial_text)
            raise _OutOfTime(f"the turn's time ran out during the model's answer (step {step})") from exc
        raise
    finally:
        stream.close()
    if completed is None:
        raise ProviderError("stream_cut", "the model's answer ended without a final message", "".join(text))
    state.usage += completed.usage
    state.context.reported(completed.usage)
    emit(ModelUsage(step, completed.usage, completed.latency_s, completed.finish_reason, completed.retries))
    completed = replace(completed, text=valid_text(completed.text),
                        tool_calls=_replayable(completed.tool_calls, history))
    calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in completed.tool_calls]
    history.add_assistant(completed.text, calls)
    state.answer = completed.text
    return completed


def _count_interrupted(state: _Turn, step: int, messages, tools, text: str, sent: float, emit: Emit) -> None:
    """A call stopped mid-way reports no usage, but its request was sent (and is billed):
    count it as estimated, the answer so far too."""
    usage = Usage(messages_tokens(messages) + tools_tokens(tools), 0, cached_estimate(text) if text else 0,
                  estimated=True)
    state.usage += usage
    emit(ModelUsage(step, usage, round(time.monotonic() - sent, 3), "interrupted"))


def _keep_cut_answer(state: _Turn, history: History, partial: str) -> None:
    """The text streamed before the deadline stays the answer, marked; the question keeps an answer."""
    mark = "[cut off: the turn ran out of time]"
    history.add_assistant(f"{partial}\n\n{mark}" if partial else mark)
    state.answer = partial


def _replayable(calls: list[ToolCall], history: History) -> list[ToolCall]:
    """The calls as every wire API accepts them back: some servers repeat an id (within
    one answer or across answers) or send a call without a name. A repeated or missing
    id gets a fresh one (each call must get exactly one result); a missing name a
    placeholder (the call then fails as an unknown tool). Text is made valid Unicode
    (``valid_text``: the halves of a character streamed apart are joined)."""
    if not calls:
        return calls
    taken, fresh, fixed = history.call_ids(), set(), []
    for call in calls:
        call = replace(call, id=valid_text(call.id or ""), name=valid_text(call.name or ""),
                       arguments=valid_text(call.arguments or ""))
        if not call.id or call.id in taken or call.id in fresh:
            call = replace(call, id=f"call_{uuid.uuid4().hex[:24]}")
        if not call.name:
            call = replace(call, name=UNNAMED)
        fresh.add(call.id)
        fixed.append(call)
    return fixed


def _windowed(messages, tools, provider, emit, context: ContextWindow) -> list[dict[str, Any]]:
    """The request cut to the provider's context window, leaving room for the answer."""
    window = getattr(provider, "context_window", 0) or 0
    if window <= 0:
        return messages
    reserve = min(getattr(provider, "max_tokens", None) or 2048, window // 4)
    fitted, actions = context.fit(messages, tools, window - reserve)
    if actions:
        emit(Notice(f"context window ({window} tokens): " + "; ".join(actions)))
    return fitted


def _final_answer(state, history, provider, limits, emit, guard: _Guard) -> StopReason:
    emit(GuardTripped(state.steps, guard.reason, guard.detail))
    if _over_session_budget(state, emit):
        return "budget"
    state.steps += 1
    note = FINAL_NOTE.format(reason=guard.detail)
    if guard.reason == "timeout":  # a short, bounded last call instead of none at all
        grace = min(limits.turn_timeout_s * FINAL_GRACE_SHARE, FINAL_GRACE_CAP_S)
        state.deadline = time.monotonic() + grace
    _call_model(state, history, provider, None, emit, final_note=note)
    return guard.reason


def canonical(name: str, arguments: str) -> str:
    """A key under which identical calls collide (argument order and spacing ignored)."""
    try:
        return name + json.dumps(json.loads(arguments or "{}"), sort_keys=True, ensure_ascii=False)
    except (ValueError, TypeError):
        return name + arguments.strip()


def _run_tools(state, history, calls: list[ToolCall], registry, approver, limits, emit) -> None:
    """Run one step's calls; results go into the history in call order, whatever happens."""
    results: dict[str, dict[str, Any]] = {}
    repeated: _Guard | None = None
    try:
        runnable = []
        for call in calls:
            state.seen[canonical(call.name, call.arguments)] += 1
            if state.seen[canonical(call.name, call.arguments)] > limits.repeat_limit:
                emit(ToolCallStarted(state.steps, call.id, call.name, _display_args(call.arguments), False))
                results[call.id] = error_result(
                    "repeated_call",
                    f"{call.name} was already called {limits.repeat_limit} times with these arguments")
                _emit_finished(emit, state.steps, call, results[call.id], time.monotonic())
                repeated = _Guard("repeat", f"{call.name} repeated with identical arguments")
            else:
                runnable.append(call)
        state.tool_calls += len(calls)
        _execute(state, runnable, registry, approver, limits, emit, results)
    finally:
        for call in calls:
            if call.id in results:
                history.add_tool_result(call.id, call.name, clip_result(results[call.id], limits.max_tool_result_chars))
    if repeated:
        raise repeated


def _execute(state: _Turn, calls, registry, approver, limits, emit, results) -> None:
    step = state.steps
    futures: dict[str, tuple[ToolCall, Future, float]] = {}
    effectful = []
    for call in calls:
        tool = registry.get(call.name)
        emit(ToolCallStarted(step, call.id, call.name, _display_args(call.arguments), bool(tool and tool.side_effects)))
        if tool is not None and tool.side_effects:
            effectful.append(call)
        elif state.time_left() <= 0:
            results[call.id] = _no_time(call)
            _emit_finished(emit, step, call, results[call.id], time.monotonic())
        else:  # read-only and invalid calls run at once, concurrently
            futures[call.id] = (call, _pool.submit(_timed, registry.call, call.name, call.arguments),
                                time.monotonic())
    # read-only results first: their panels complete before any approval dialog opens
    for call, future, started in futures.values():
        results[call.id], ended = _wait(call, future, started, registry, limits, state.deadline)
        _emit_finished(emit, step, call, results[call.id], started, ended)
    for index, call in enumerate(effectful, 1):
        later = tuple(PendingCall(c.id, c.name, _display_args(c.arguments), registry.get(c.name).destructive)
                      for c in effectful[index:])
        _run_effectful(state, call, index, len(effectful), later, registry, approver, limits, emit, results)


def _no_time(call: ToolCall) -> dict[str, Any]:
    return error_result("timeout", f"{call.name} was not run: the turn's time ran out (turn_timeout_s)")


def _run_effectful(state: _Turn, call, index, count, later, registry, approver, limits, emit, results) -> None:
    step = state.steps
    started = time.monotonic()
    arguments, error = registry.parse_arguments(call.name, call.arguments)
    if error is None:
        tool = registry.get(call.name)
        preview = _preview(tool, arguments)
        request = ApprovalRequest(step, call.id, call.name, arguments, preview, index, count,
                                  tool.destructive, later, lambda edited: _preview(tool, edited))
        emit(ApprovalRequested(step, call.id, call.name, arguments))

        def validate(args: dict[str, Any]) -> str | None:
            failure = registry.parse_arguments(call.name, args)[1]
            return failure["error"]["message"] if failure else None

        asked = time.monotonic()
        decision = approver.decide(request, validate)
        started = time.monotonic()  # the duration shown is the call's, not the user's
        state.deadline += started - asked  # the user's time does not count against the turn
        decided_s = round(started - asked, 3) if decision.by == "user" else 0.0
        emit(ApprovalDecided(step, call.id, call.name, isinstance(decision, Allow), decision.by,
                             getattr(decision, "reason", ""), decided_s))
        if isinstance(decision, Allow) and state.time_left() <= 0:
            error = _no_time(call)
        elif isinstance(decision, Allow):
            edited = decision.arguments
            future = _pool.submit(_timed, registry.call, call.name, edited if edited is not None else arguments)
            error, _ = _wait(call, future, started, registry, limits, state.deadline)
            if edited is not None and edited != arguments:
                error["arguments_edited_by_user"] = edited
        else:
            reason = f": {decision.reason}" if decision.reason else ""
            error = error_result("denied", f"the call was not allowed{reason}")
    results[call.id] = error
    _emit_finished(emit, step, call, error, started)


def _timed(fn, *args) -> tuple[dict[str, Any], float]:
    """Run in a worker: the result and when it was ready (so durations exclude waiting)."""
    return fn(*args), time.monotonic()


def _wait(call, future: Future, started: float, registry, limits, deadline: float) -> tuple[dict[str, Any], float]:
    """The call's result, or a timeout result after min(its timeout, the turn's time left)."""
    tool = registry.get(call.name)
    timeout = (tool.timeout_s if tool and tool.timeout_s else limits.tool_timeout_s)
    until = min(started + timeout, deadline)
    try:
        return future.result(timeout=max(0.0, until - time.monotonic()))
    except FutureTimeout:
        future.cancel()
        why = (f"did not finish within {timeout:g} s" if until < deadline
               else f"was stopped after {until - started:.1f} s: the turn's time ran out (turn_timeout_s)")
        return error_result("timeout", f"{call.name} {why}"), time.monotonic()


def _emit_finished(emit, step, call, result, started, ended: float | None = None) -> None:
    ok = bool(result.get("ok"))
    error_type = None if ok else result.get("error", {}).get("type")
    duration = round((ended or time.monotonic()) - started, 4)
    emit(ToolCallFinished(step, call.id, call.name, ok, result, duration, error_type))


def _preview(tool, arguments) -> dict[str, Any] | None:
    if tool is None or tool.preview is None:
        return None
    try:
        return tool.preview(arguments)
    except Exception:  # a preview is a courtesy; the call itself reports real errors
        return None


def _display_args(arguments: str) -> Any:
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments


def clip_result(result: dict[str, Any], limit: int) -> str:
    """The result as JSON text, at most ``limit`` (>= 1) chars: head and tail around a marker."""
    text = json.dumps(result, ensure_ascii=False)
    if len(text) <= limit:
        return text
    room = limit - len(_cut_marker(len(text)))  # the real cut is shorter, so its marker fits
    if room < 2:  # too small for a marker with both ends: the bare head
        return text[:max(limit, 0)]
    head, tail = room - room // 2, room // 2
    return text[:head] + _cut_marker(len(text) - head - tail) + text[len(text) - tail:]


def _cut_marker(cut: int) -> str:
    return f" …[{cut} characters cut]… "
