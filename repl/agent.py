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

Step mode (``repl.stepping``): a ``Stepping`` with a stepper pauses the loop
before each model call (continue, edit the message about to be sent, send
without tools, stop) and before a model's tool calls run (continue, skip, a
result by hand, stop); the time paused moves the deadline on too.
"""

from __future__ import annotations

import json
import math
import time
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
    ModelRetry,
    ModelUsage,
    Notice,
    ReasoningDelta,
    StopReason,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
    Usage,
    UserStep,
    WireRecord,
)
from repl.history import History
from repl.providers.base import (
    Completed,
    Provider,
    ProviderError,
    ReasoningPart,
    RequestSent,
    Retrying,
    TextPart,
    ToolCall,
    new_call_id,
)
from repl.settings import Limits
from repl.stepping import SKIPPED, CallView, Edit, NoTools, Result, Skip, Stepping, Stop
from repl.unicode import split_high_surrogate, valid_text
from tools.registry import Registry, ToolError, error_result

UNNAMED = "unnamed_tool"  # stands for a tool call that came without a name
FINAL_NOTE = (
    "Stop calling tools now ({reason}). Answer the user with what you have, "
    "and say briefly what is missing."
)
STOPPED_ANSWER = "[stopped by the user in step mode]"
# The answer asked for after a timeout gets this share of turn_timeout_s (at most the cap).
FINAL_GRACE_SHARE, FINAL_GRACE_CAP_S = 0.25, 30.0

# Given the turn's usage so far: why the session's budget is spent, or None.
SessionBudget = Callable[[Usage], "str | None"]


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
    stepping: Stepping | None = None

    def time_left(self) -> float:
        return self.deadline - time.monotonic()


class _Guard(Exception):
    def __init__(self, reason: StopReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class _OutOfTime(Exception):
    """The deadline passed during a model call (the stream was dropped)."""


class _StoppedByUser(Exception):
    """``q`` in step mode: the turn ends here, every call answered."""


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
    stepping: Stepping | None = None,
) -> TurnFinished:
    """One turn. ``context`` carries request sizes across turns (the session's);
    ``budget`` stops the turn before a model call once the session's budget is spent;
    ``stepping`` (the session's) pauses it when its stepper is set."""
    state = _Turn(turn, context=context or ContextWindow(), budget=budget, stepping=stepping)
    state.deadline = state.started + limits.turn_timeout_s
    approver.new_turn()
    history.begin_turn(user_text)
    emit(TurnStarted(turn, user_text))
    stopped_by: StopReason = "answer"
    try:
        stopped_by = _loop(state, history, provider, registry, approver, limits, emit)
    except KeyboardInterrupt:
        stopped_by = "interrupted"
    except _StoppedByUser:
        stopped_by = "user"
        history.add_assistant(STOPPED_ANSWER)
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
        stepper = state.stepping.stepper if state.stepping else None
        preset, stop = _pause_before_tools(state, stepper, completed.tool_calls, registry, emit) if stepper \
            else ({}, False)
        try:
            _run_tools(state, history, completed.tool_calls, registry, approver, limits, emit, preset)
        except _Guard as guard:
            return _final_answer(state, history, provider, limits, emit, guard)
        if stop:
            raise _StoppedByUser


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


def _request(state, history, provider, tools, emit, final_note: str) -> list[dict[str, Any]]:
    messages = history.for_request()
    if final_note and messages[-1]["role"] == "user":
        messages[-1] = {**messages[-1], "content": f"{messages[-1]['content']}\n\n{final_note}"}
    elif final_note:
        messages.append({"role": "user", "content": final_note})
    return _windowed(messages, tools, provider, emit, state.context)


def _call_model(state, history, provider, tools, emit, final_note: str = "") -> Completed:
    step = state.steps
    messages = _request(state, history, provider, tools, emit, final_note)
    if state.stepping is not None:
        if state.stepping.stepper is not None:
            tools, messages = _pause_before_call(state, history, provider, tools, emit, final_note, messages)
        state.stepping.sent(provider, messages, tools)
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
            elif isinstance(part, ReasoningPart):
                emit(ReasoningDelta(step, valid_text(part.text)))
            elif isinstance(part, Retrying):
                emit(ModelRetry(step, part.attempt, part.attempts, part.delay_s, part.reason))
            elif isinstance(part, RequestSent):
                emit(WireRecord(step, "request", part.body))
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
    if completed.response is not None:
        emit(WireRecord(step, "response", completed.response))
    completed = replace(completed, text=valid_text(completed.text),
                        tool_calls=_replayable(completed.tool_calls, history))
    calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in completed.tool_calls]
    history.add_assistant(completed.text, calls)
    state.answer = completed.text
    return completed


def _paused(state: _Turn, ask: Callable[[Any], Any], view: Any) -> Any:
    """The stepper's answer; the time the user took does not count against the turn."""
    asked = time.monotonic()
    try:
        return ask(view)
    finally:
        state.deadline += time.monotonic() - asked


def _pause_before_call(state, history, provider, tools, emit, final_note, messages):
    """Step mode before a model call: the (tools, messages) to send, or _StoppedByUser."""
    stepper, step = state.stepping.stepper, state.steps
    while True:
        view = state.stepping.view(step, provider, messages, tools, history.messages[-1], final=bool(final_note))
        choice = _paused(state, stepper.before_model_call, view)
        if isinstance(choice, Stop):
            emit(UserStep(step, "stopped_by_user", detail="before the model call"))
            raise _StoppedByUser
        if isinstance(choice, NoTools):
            if tools:
                emit(UserStep(step, "tools_disabled_by_user"))
                tools = None
                messages = _request(state, history, provider, tools, emit, final_note)
            return tools, messages
        if not isinstance(choice, Edit):
            return tools, messages
        before = history.replace_last(choice.text)
        emit(UserStep(step, "edited_by_user", detail={"role": view.last_role, "before": before,
                                                      "after": history.messages[-1]["content"]}))
        messages = _request(state, history, provider, tools, emit, final_note)


def _pause_before_tools(state: _Turn, stepper, calls: list[ToolCall], registry,
                        emit) -> tuple[dict[str, dict[str, Any]], bool]:
    """Step mode before tools run: the results the user decided (skipped, made by hand),
    and whether the user stopped the turn (then every call gets a skipped result)."""
    views = [CallView(n, len(calls), c.id, c.name, _display_args(c.arguments),
                      bool((tool := registry.get(c.name)) and tool.side_effects))
             for n, c in enumerate(calls, 1)]
    choices = list(_paused(state, stepper.after_model_answer, views))
    choices += [Skip()] * (len(calls) - len(choices))  # a stepper that answered too few: skip the rest
    if any(isinstance(c, Stop) for c in choices):
        emit(UserStep(state.steps, "stopped_by_user", detail="before the tool calls ran"))
        stopped = error_result(SKIPPED, "the user stopped the turn in step mode; the call did not run")
        return {c.id: stopped for c in calls}, True
    preset: dict[str, dict[str, Any]] = {}
    for call, choice in zip(calls, choices, strict=False):
        if isinstance(choice, Skip):
            preset[call.id] = error_result(SKIPPED, "the user skipped this call in step mode; it did not run")
            emit(UserStep(state.steps, "skipped_by_user", call.id, call.name))
        elif isinstance(choice, Result):
            preset[call.id] = choice.result
            emit(UserStep(state.steps, "result_by_user", call.id, call.name, choice.result))
    return preset, False


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
            call = replace(call, id=new_call_id())
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


def _run_tools(state, history, calls: list[ToolCall], registry, approver, limits, emit,
               preset: dict[str, dict[str, Any]] | None = None) -> None:
    """Run one step's calls; results go into the history in call order, whatever happens.
    ``preset``: results decided in step mode (those calls do not run)."""
    results: dict[str, dict[str, Any]] = {}
    repeated: _Guard | None = None
    try:
        runnable = []
        for call in calls:
            if preset and call.id in preset:
                emit(ToolCallStarted(state.steps, call.id, call.name, _display_args(call.arguments), False))
                results[call.id] = preset[call.id]
                _emit_finished(emit, state.steps, call, results[call.id], time.monotonic())
                continue
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
    """``{"before", "after"}`` from the tool; ``{"fails": message}`` when the tool already
    refuses these arguments (a todo that does not exist): the person is told, not asked blindly."""
    if tool is None or tool.preview is None:
        return None
    try:
        return tool.preview(arguments)
    except ToolError as exc:
        return {"fails": exc.message}
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
