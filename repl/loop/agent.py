"""The agent loop: model → tools → model, bounded, emitting typed events.

A ``Runner`` holds a turn's collaborators (provider, registry, approver, limits,
emit, context window, session budget, step mode) and the pool its tool calls
run in; ``Runner.run_turn()`` runs a turn (``run_turn()``: one turn with a
runner of its own) and ``Runner.call_model()`` is the one streamed model call.

A turn never touches the terminal. It asks the injected ``Approver``
before side effects, runs the read-only calls of a step concurrently, appends
exactly one result per call in call order, and stops on an answer or a
tripped guard (then one more model call with tools disabled, so the user
still gets an answer). Ctrl-C ends the turn as ``interrupted`` with a valid
history; it is the only exception that crosses a tool call. The calls of an
answer cut off at the token limit (``finish_reason`` ``length``) may be
incomplete: none runs, each gets a ``truncated`` result, and the turn goes on.

``turn_timeout_s`` is a deadline, not only a check between steps: a model call
gets it (the provider drops a stream still open when it passes, even one kept
alive with keep-alive comments) and a tool call gets at most the time left.
Time spent waiting for the user's approval moves the deadline on. Each tool
call gets a cancel signal (``tools.cancel``), set when the call times out or
the turn ends, so a tool that checks it stops with the turn.

A call identical to one that already ran in the turn (same tool, same canonical
arguments) is not run again nor asked for again (``repeats.py``): its result says so and
carries the earlier one, so a model that repeats its call instead of answering (the 0.5B
local model, issue #13) can still answer. What counts: a call that succeeded, and one that
was denied (the prompt's "denied, do not retry": the repeat is denied without asking).
A call that failed otherwise may run again (a timeout may pass); read-only results
are forgotten once a side effect succeeds (a list after an add must show the add). A
repeat still counts as a tool call and against ``repeat_limit``.

Policy beyond moving the turn along is in hooks (``hooks.py``): the session's
(``Runner.hooks``; step mode, ``repl.loop.stepping``, pauses before each model call
and before a model's tool calls run, and the time paused moves the deadline on too),
then the loop's own per turn: ``Repeats`` (identical calls), ``FinalAnswer`` (the
tool-free call after a guard) and ``AnswerAgain`` (an answer the provider held back as an
echo of the question: one more call, once a turn).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from repl.config.settings import Limits, TurnCount
from repl.loop.approval import Allow, ApprovalRequest, Approver, Decision, PendingCall
from repl.loop.context import ContextWindow, cached_estimate, messages_tokens, tools_tokens
from repl.loop.events import (
    TRUNCATED,
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
    Routed,
    StopReason,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
    Usage,
    WireRecord,
)
from repl.loop.history import History
from repl.loop.hooks import (
    Amend,
    AnswerAgain,
    FinalAnswer,
    Hooks,
    Instead,
    ModelCall,
    StopTurn,
    display_args,
)
from repl.loop.repeats import Repeats
from repl.loop.unicode import split_high_surrogate, valid_text
from repl.loop.unsaid import UnsaidExamples
from repl.providers.base import (
    AttemptFailed,
    CallRecord,
    Completed,
    Message,
    Noted,
    Provider,
    ProviderError,
    ReasoningPart,
    RequestSent,
    Retrying,
    TextPart,
    ToolCall,
    ToolChoice,
    new_call_id,
)
from tools.cancel import Cancel
from tools.registry import Registry, Tool, ToolSchema
from tools.results import ToolError, ToolResult, error_of, error_result

UNNAMED = "unnamed_tool"  # stands for a tool call that came without a name
REPLACED_KEY = "arguments_replaced_by_hook"  # in a result: the arguments a user's hook put in
STOPPED_ANSWER = "[stopped by the user in step mode]"
TRUNCATED_MESSAGE = ("the reply was cut off at the token limit before this call was complete; it did not run. "
                     "Make the call again if it is still needed, with shorter arguments, or answer.")
# The answer asked for after a timeout gets this share of turn_timeout_s (at most the cap).
FINAL_GRACE_SHARE, FINAL_GRACE_CAP_S = 0.25, 30.0

# Given the turn's usage so far: why the session's budget is spent, or None.
SessionBudget = Callable[[Usage], "str | None"]
POOL_WORKERS = 8  # read-only calls of a step run at once, this many at a time


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a model call; ``partial_text`` is what streamed before it (as ProviderError's)."""

    def __init__(self, partial_text: str) -> None:
        super().__init__()
        self.partial_text = partial_text


def _new_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=POOL_WORKERS, thread_name_prefix="glassloop-tool")


@dataclass
class Runner:
    """The turn's collaborators in one object, the shape of pi's ``agentLoop(context, config,
    signal)`` and openai-agents' ``RunConfig``: ``run_turn()`` runs a turn with them, and
    ``call_model()`` is the one streamed model call (``/compact`` makes its call through it).

    The runner owns the pool its tool calls run in. Each call gets a ``Cancel`` that is set
    when the call times out or its turn ends; a call that overran and still runs keeps its
    worker in a retired pool (the runner opens a fresh one), so a stuck tool never holds a
    worker another call needs. ``close()`` cancels every call still running and shuts the
    pools down without waiting.
    """

    provider: Provider
    registry: Registry
    approver: Approver
    limits: Limits
    emit: Emit
    context: ContextWindow = field(default_factory=ContextWindow)  # request sizes across turns
    budget: SessionBudget | None = None  # stops a turn before a model call once the session's is spent
    hooks: tuple[Hooks, ...] = ()  # the session's (step mode), before the loop's own
    _pools: list[ThreadPoolExecutor] = field(default_factory=lambda: [_new_pool()], init=False, repr=False)
    _cancel: Cancel = field(default_factory=Cancel, init=False, repr=False)

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Every tool call still running is told to cancel; the pools shut down without waiting."""
        self._cancel.cancel()
        for pool in self._pools:
            pool.shutdown(wait=False, cancel_futures=True)

    def run_turn(self, history: History, user_text: str, turn: int = 1) -> TurnFinished:
        """One turn: ``user_text`` answered on ``history``, every guard applied."""
        return _Turn(self, history, turn, self._cancel.child()).run(user_text)

    def call_model(self, messages: list[Message], tools: list[ToolSchema] | None, *,
                   step: int = 1, deadline: float | None = None, choice: ToolChoice | None = None) -> Completed:
        """One streamed model call: each part becomes an event as it arrives (text made valid
        Unicode, a character split across chunks joined), then ``ModelUsage``. The answer's
        text is valid Unicode; its calls are as the model sent them. Raises ProviderError and,
        on Ctrl-C, ``Interrupted``, each with the text streamed so far; the stream is closed.
        ``choice``: the tools the call may use, as a router decided (a ``Routed`` event first)."""
        emit = self.emit
        if choice is not None and tools:
            emit(Routed(step, choice.mode, choice.allowed, choice.top, choice.threshold, choice.by))
        emit(ModelRequest(step, self.provider.model, bool(tools)))
        completed: Completed | None = None
        text: list[str] = []
        held = ""  # the first half of a character whose second half may be in the next chunk
        stream = self.provider.stream(messages, tools or None, deadline=deadline,
                                      choice=choice if tools else None)
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
                elif isinstance(part, AttemptFailed):
                    emit(WireRecord(step, "error", asdict(part)))
                elif isinstance(part, Completed):
                    completed = part
            if held:
                text.append(valid_text(held))
                emit(TextDelta(step, text[-1]))
        except KeyboardInterrupt as stop:
            raise Interrupted("".join(text)) from stop
        except ProviderError as exc:
            exc.partial_text = valid_text(exc.partial_text or "".join(text))
            raise
        finally:
            stream.close()
        if completed is None:
            raise ProviderError("stream_cut", "the model's answer ended without a final message", "".join(text))
        emit(ModelUsage(step, completed.usage, completed.latency_s, completed.finish_reason, completed.retries,
                        completed.model))
        if completed.response is not None:
            emit(WireRecord(step, "response", completed.response))
        return replace(completed, text=valid_text(completed.text))

    def room(self) -> int:
        """Tokens a request may fill: the provider's context window less room for the
        answer (``max_tokens``, at most a quarter of the window); 0 when no window is known."""
        window = self.provider.context_window
        if not window or window <= 0:
            return 0
        return window - min(self.provider.max_tokens or 2048, window // 4)

    def _start(self, name: str, arguments: Any, cancel: Cancel) -> Future:
        return self._pools[-1].submit(_timed, self.registry.call, name, arguments, cancel)

    def _overran(self, future: Future, cancel: Cancel) -> None:
        """A call out of time is told to cancel; one still running keeps its worker in a
        retired pool (shut down once its calls end) and later calls get a fresh pool."""
        cancel.cancel()
        if not future.cancel() and not future.done():
            self._pools[-1].shutdown(wait=False)
            self._pools.append(_new_pool())


@dataclass
class _Turn:
    """One turn's state; the loop's steps are its methods, its collaborators the runner's."""

    runner: Runner
    history: History
    number: int
    cancel: Cancel  # set when the turn ends: a call still running is told to stop
    started: float = field(default_factory=time.monotonic)
    steps: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    answer: str = ""
    hooks: tuple[Hooks, ...] = field(init=False)
    deadline: float = math.inf  # time.monotonic() when the turn's time is up

    def __post_init__(self) -> None:
        self.hooks = (*self.runner.hooks, Repeats(self.runner.limits.repeat_limit), UnsaidExamples(), FinalAnswer(),
                      AnswerAgain())

    # ---- what a hook sees (``hooks.TurnView``) ----------------------------------
    @property
    def provider(self) -> Provider:
        return self.runner.provider

    @property
    def registry(self) -> Registry:
        return self.runner.registry

    @property
    def emit(self) -> Emit:
        return self.runner.emit

    def request(self, tools: list[ToolSchema] | None, final_note: str) -> list[Message]:
        messages = self.history.for_request()
        if final_note and messages[-1]["role"] == "user":
            noted: Noted = {**messages[-1], "content": f"{messages[-1]['content']}\n\n{final_note}", "note": final_note}
            messages[-1] = noted
        elif final_note:
            messages.append(Noted(role="user", content=final_note, note=final_note))
        return self._windowed(messages, tools)

    def paused(self, ask: Callable[[Any], Any], view: Any) -> Any:
        """The person's answer; the time they took does not count against the turn."""
        asked = time.monotonic()
        try:
            return ask(view)
        finally:
            self.deadline += time.monotonic() - asked

    def time_left(self) -> float:
        return self.deadline - time.monotonic()

    def run(self, user_text: str) -> TurnFinished:
        runner, history = self.runner, self.history
        self.deadline = self.started + runner.limits.turn_timeout_s
        runner.approver.new_turn()
        history.begin_turn(user_text)
        runner.emit(TurnStarted(self.number, user_text))
        stopped_by: StopReason = "answer"
        try:
            stopped_by = self._loop()
        except KeyboardInterrupt:
            stopped_by = "interrupted"
        except StopTurn:
            stopped_by = "user"
            history.add_assistant(STOPPED_ANSWER)
        except _OutOfTime as cut:
            stopped_by = "timeout"
            runner.emit(GuardTripped(self.steps, "timeout", str(cut)))
        except ProviderError as exc:
            stopped_by = "error"
            if exc.partial_text:
                history.add_assistant(exc.partial_text + "\n\n[answer cut off]")
                self.answer = exc.partial_text
            runner.emit(ErrorEvent(exc.kind, exc.message))
        finally:
            self.cancel.cancel()
            history.end_turn()
        finished = TurnFinished(
            self.number, stopped_by, self.steps, self.tool_calls, self.usage,
            round(time.monotonic() - self.started, 3), self.answer,
        )
        runner.emit(finished)
        return finished

    def _loop(self) -> StopReason:
        runner = self.runner
        note = ""  # a hook's note for this call (``after_answer``)
        while True:
            try:
                self._check_limits()
            except _Guard as guard:
                return self._final_answer(guard)
            if self._over_session_budget():
                return "budget"
            self.steps += 1
            # Read each step: an MCP server that listed its tools after the first request
            # (``ask`` does not wait for a slow one) is offered from the next call of the turn.
            completed = self._call_model(request_tools(runner.registry.schemas()), note)
            note = ""
            if not completed.tool_calls:
                note = self._after_answer(completed)
                if note:
                    continue
                return "answer"
            if completed.finish_reason == "length":
                self._cut_off(completed.tool_calls)
                continue
            decided: dict[str, Instead] = {}
            for hook in self.hooks:
                decided = {**hook.before_tool_calls(self, completed.tool_calls), **decided}
            try:
                self._run_tools(completed.tool_calls, decided)
            except _Guard as guard:
                return self._final_answer(guard)

    def _after_answer(self, completed: Completed) -> str:
        """The first hook's note for one more call instead of this answer (taken back), or ""
        when it stands: then an answer the provider held back as an echo is shown as it is."""
        note = next((n for hook in self.hooks if (n := hook.after_answer(self, completed))), None)
        if note:
            self.history.take_back_answer()
            self.answer = ""
            if completed.echoed:  # two model calls for one answer: the screen says why
                self.runner.emit(Notice(f"step {self.steps}: the answer only repeated your message "
                                        "and was not shown; asked once more"))
            return note
        if completed.echoed and completed.text:
            self.runner.emit(TextDelta(self.steps, completed.text))
        return ""

    def _over_session_budget(self) -> bool:
        budget = self.runner.budget
        reason = budget(self.usage) if budget else None
        if reason:
            self.runner.emit(GuardTripped(self.steps, "budget", reason))
        return bool(reason)

    def _check_limits(self) -> None:
        """The guards on the turn's counts, as declared (``Limits.bounds``)."""
        limits = self.runner.limits
        counts: dict[TurnCount, float] = {
            "steps": self.steps, "tokens": self.usage.total, "tool_calls": self.tool_calls,
            "seconds": limits.turn_timeout_s - self.time_left(),  # pauses moved the deadline on
        }
        for bound, limit in limits.bounds():
            if counts[bound.count] >= limit:
                raise _Guard(bound.reason, bound.says.format(used=counts[bound.count], limit=limit))

    def _windowed(self, messages: list[Message], tools: list[ToolSchema] | None) -> list[Message]:
        """The request cut to the provider's context window, leaving room for the answer."""
        runner = self.runner
        room = runner.room()
        if room <= 0:
            return messages
        fitted, actions = runner.context.fit(messages, tools, room)
        if actions:
            runner.emit(Notice(f"context window ({runner.provider.context_window} tokens): " + "; ".join(actions)))
        return fitted

    def _call_model(self, tools: list[ToolSchema] | None, final_note: str = "") -> Completed:
        runner, history, step = self.runner, self.history, self.steps
        call = ModelCall(step, self.request(tools, final_note), tools, final_note)
        for hook in self.hooks:
            call = hook.before_model_call(self, call)
        messages, tools = call.messages, call.tools
        sent = time.monotonic()
        try:
            completed = runner.call_model(messages, tools, step=step, deadline=self.deadline, choice=call.choice)
        except Interrupted as cut:
            if cut.partial_text:
                history.add_assistant(cut.partial_text + "\n\n[interrupted]")
                self.answer = cut.partial_text
            self._count_interrupted(messages, tools, cut.partial_text, sent)
            raise
        except ProviderError as exc:
            if self.time_left() <= 0:  # the provider dropped the stream at the deadline
                self._keep_cut_answer(exc.partial_text)
                raise _OutOfTime(f"the turn's time ran out during the model's answer (step {step})") from exc
            raise
        self.usage += completed.usage
        runner.context.reported(completed.usage)
        completed = replace(completed, tool_calls=_replayable(completed.tool_calls, history))
        calls = [CallRecord(id=c.id, name=c.name, arguments=c.arguments) for c in completed.tool_calls]
        history.add_assistant(completed.text, calls)
        self.answer = completed.text
        return completed

    def _count_interrupted(self, messages: list[Message], tools: list[ToolSchema] | None,
                           text: str, sent: float) -> None:
        """A call stopped mid-way reports no usage, but its request was sent (and is billed):
        count it as estimated, the answer so far too."""
        usage = Usage(messages_tokens(messages) + tools_tokens(tools), 0, cached_estimate(text) if text else 0,
                      estimated=True)
        self.usage += usage
        self.runner.emit(ModelUsage(self.steps, usage, round(time.monotonic() - sent, 3), "interrupted"))

    def _keep_cut_answer(self, partial: str) -> None:
        """The text streamed before the deadline stays the answer, marked; the question keeps an answer."""
        mark = "[cut off: the turn ran out of time]"
        self.history.add_assistant(f"{partial}\n\n{mark}" if partial else mark)
        self.answer = partial

    def _final_answer(self, guard: _Guard) -> StopReason:
        self.runner.emit(GuardTripped(self.steps, guard.reason, guard.detail))
        note = next((n for hook in self.hooks if (n := hook.after_guard(self, guard.reason, guard.detail))), None)
        if note is None:
            return guard.reason
        if self._over_session_budget():
            return "budget"
        self.steps += 1
        if guard.reason == "timeout":  # a short, bounded last call instead of none at all
            grace = min(self.runner.limits.turn_timeout_s * FINAL_GRACE_SHARE, FINAL_GRACE_CAP_S)
            self.deadline = time.monotonic() + grace
        self._call_model(None, final_note=note)
        return guard.reason

    def _cut_off(self, calls: list[ToolCall]) -> None:
        """The answer reached the token limit (``finish_reason`` ``length``) while making
        ``calls``: any of them may be incomplete, so none runs. Each gets a ``truncated``
        result telling the model, and the turn goes on (it may call again, shorter, or answer)."""
        provider = self.runner.provider
        limit = f" ({provider.max_tokens} tokens)" if provider.max_tokens else ""
        self.runner.emit(Notice(
            f"step {self.steps}: the answer reached the token limit{limit} before its tool calls were complete; "
            f"{len(calls)} call{'' if len(calls) == 1 else 's'} did not run ([providers.{provider.name}] "
            "max_tokens raises the limit)"))
        cut = Instead(error_result(TRUNCATED, TRUNCATED_MESSAGE))
        self._run_tools(calls, {call.id: cut for call in calls})

    def _run_tools(self, calls: list[ToolCall], decided: dict[str, Instead]) -> None:
        """Run one step's calls; results go into the history in call order, whatever happens.
        ``decided``: results hooks gave before any call ran (those calls do not run). Ends the
        turn (StopTurn, or a guard) after the results are in when a hook's result says so."""
        emit, limits, step = self.runner.emit, self.runner.limits, self.steps
        results: dict[str, ToolResult] = {}
        ends: list[Instead] = []
        try:
            runnable = []
            for call in calls:
                if call.id in decided:
                    emit(ToolCallStarted(step, call.id, call.name, display_args(call.arguments), False))
                    self._answered(call, decided[call.id], results, ends)
                else:
                    runnable.append(call)
            self.tool_calls += len(calls)
            self._execute(runnable, results, ends)
        finally:
            for call in calls:
                if call.id in results:
                    self.history.add_tool_result(call.id, call.name,
                                                 clip_result(results[call.id], limits.max_tool_result_chars))
        if any(end.ends == "user" for end in ends):
            raise StopTurn
        if ends:
            raise _Guard(ends[0].ends or "repeat", ends[0].detail)

    def _before(self, call: ToolCall, side_effects: bool
                ) -> tuple[ToolCall, Instead | None, Amend | None]:
        """The hooks' answers to ``call`` just before it would run or be asked for: the call as they
        changed it (``Amend``: the later hooks see the change), the first one's result instead of
        running it, and the change."""
        amend: Amend | None = None
        for hook in self.hooks:
            answer = hook.before_tool_call(self, call, side_effects)
            if isinstance(answer, Instead):
                return call, answer, amend
            if isinstance(answer, Amend) and answer.arguments is not None:
                call = replace(call, arguments=json.dumps(answer.arguments, ensure_ascii=False))
            if isinstance(answer, Amend):
                amend = answer if amend is None else _merged(amend, answer)
        return call, None, amend

    def _ran(self, call: ToolCall, result: ToolResult, side_effects: bool, ran_with: str) -> None:
        for hook in self.hooks:
            hook.after_tool_call(self, call, result, side_effects=side_effects, ran_with=ran_with)

    def _answered(self, call: ToolCall, instead: Instead, results: dict[str, ToolResult],
                  ends: list[Instead]) -> None:
        """``call`` answered by a hook, not run (its ToolCallStarted is already out)."""
        results[call.id] = instead.result
        _emit_finished(self.runner.emit, self.steps, call, instead.result, time.monotonic(),
                       repeat_of=instead.repeat_of)
        if instead.ends:
            ends.append(instead)

    def _execute(self, calls: list[ToolCall], results: dict[str, ToolResult], ends: list[Instead]) -> None:
        runner, step = self.runner, self.steps
        running: list[tuple[ToolCall, Future, float, Cancel]] = []
        effectful: list[tuple[ToolCall, Tool]] = []  # with the tool as found now (a lost MCP server may drop it)
        amends: dict[str, Amend | None] = {}
        for call in calls:
            tool = runner.registry.get(call.name)
            runner.emit(ToolCallStarted(step, call.id, call.name, display_args(call.arguments),
                                        bool(tool and tool.side_effects)))
            if tool is not None and tool.side_effects:
                effectful.append((call, tool))
                continue
            call, instead, amends[call.id] = self._before(call, False)
            if instead is not None:
                self._answered(call, instead, results, ends)
            elif self.time_left() <= 0:
                results[call.id] = _no_time(call)
                _emit_finished(runner.emit, step, call, results[call.id], time.monotonic())
            else:  # read-only and invalid calls run at once, concurrently
                cancel = self.cancel.child()
                running.append((call, runner._start(call.name, call.arguments, cancel), time.monotonic(), cancel))
        # read-only results first: their panels complete before any approval dialog opens
        for call, future, started, cancel in running:
            result, ended = self._wait(call, future, started, cancel)
            results[call.id] = _replaced(result, amends.get(call.id))
            _emit_finished(runner.emit, step, call, results[call.id], started, ended)
            self._ran(call, results[call.id], False, call.arguments)
        for index in range(len(effectful)):
            self._run_effectful(effectful, index, results, ends)

    def _run_effectful(self, effectful: list[tuple[ToolCall, Tool]], index: int,
                       results: dict[str, ToolResult], ends: list[Instead]) -> None:
        """The side-effecting call ``effectful[index]``: asked for, then run (or denied)."""
        runner, step, (call, tool) = self.runner, self.steps, effectful[index]
        call, instead, amend = self._before(call, True)
        if instead is not None:  # e.g. identical to one before it in this step
            self._answered(call, instead, results, ends)
            return
        registry = runner.registry
        started = time.monotonic()
        arguments, error = registry.parse_arguments(call.name, call.arguments)
        ran_with = call.arguments  # the arguments an identical later call is matched on
        if error is None:
            assert arguments is not None  # parse_arguments sets one of the two
            later = tuple(PendingCall(c.id, c.name, display_args(c.arguments), t.destructive)
                          for c, t in effectful[index + 1:])
            replaced_by = amend.by if amend and amend.arguments is not None else ""
            request = ApprovalRequest(step, call.id, call.name, arguments, None, index + 1, len(effectful),
                                      tool.destructive, later, amended_by=replaced_by)
            by_hook = bool(amend and amend.approved) and runner.approver.needs_person(request)
            if runner.approver.will_ask(request) and not by_hook:  # a preview only for a person
                preview = self._preview(tool, arguments, self.time_left())
                left = self.time_left()  # an edit's preview gets what the turn had when the person was asked
                request = replace(request, preview=preview,
                                  preview_for=lambda edited: self._preview(tool, edited, left))
            runner.emit(ApprovalRequested(step, call.id, call.name, arguments))

            def validate(args: dict[str, Any]) -> str | None:
                failure = registry.parse_arguments(call.name, args)[1]
                error = None if failure is None else error_of(failure)
                return None if error is None else error[1]

            asked = time.monotonic()
            decision: Decision = (Allow("hook") if by_hook
                                  else runner.approver.decide(request, validate))
            started = time.monotonic()  # the duration shown is the call's, not the user's
            self.deadline += started - asked  # the user's time does not count against the turn
            decided_s = round(started - asked, 3) if decision.by == "user" else 0.0
            runner.emit(ApprovalDecided(step, call.id, call.name, isinstance(decision, Allow), decision.by,
                                        getattr(decision, "reason", ""), decided_s))
            if isinstance(decision, Allow) and self.time_left() <= 0:
                error = _no_time(call)
            elif isinstance(decision, Allow):
                edited = decision.arguments
                cancel = self.cancel.child()
                future = runner._start(call.name, edited if edited is not None else arguments, cancel)
                error, _ = self._wait(call, future, started, cancel)
                if edited is not None and edited != arguments:
                    error["arguments_edited_by_user"] = edited
                    ran_with = json.dumps(edited, ensure_ascii=False)  # the model's own never ran
            else:
                reason = f": {decision.reason}" if decision.reason else ""
                error = error_result("denied", f"the call was not allowed{reason}")
        results[call.id] = _replaced(error, amend)
        _emit_finished(runner.emit, step, call, results[call.id], started)
        self._ran(call, results[call.id], True, ran_with)

    def _wait(self, call: ToolCall, future: Future, started: float, cancel: Cancel) -> tuple[ToolResult, float]:
        """The call's result, or a timeout result after min(its timeout, the turn's time left)
        (the call is then told to cancel)."""
        tool = self.runner.registry.get(call.name)
        timeout = (tool.timeout_s if tool and tool.timeout_s else self.runner.limits.tool_timeout_s)
        until = min(started + timeout, self.deadline)
        try:
            return _result_by(future, until)
        except FutureTimeout:
            self.runner._overran(future, cancel)
            why = (f"did not finish within {timeout:g} s" if until < self.deadline
                   else f"was stopped after {until - started:.1f} s: the turn's time ran out (turn_timeout_s)")
            return error_result("timeout", f"{call.name} {why}"), time.monotonic()

    def _preview(self, tool: Tool, arguments: dict[str, Any], left: float) -> dict[str, Any] | None:
        """The tool's preview run like its call: in the pool, for at most its timeout and ``left``
        (the turn's time); one that does not finish by then is ``{"unavailable": "timed out"}``."""
        if tool.preview is None:
            return None
        limit = min(tool.timeout_s or self.runner.limits.tool_timeout_s, left)
        if limit <= 0:
            return {"unavailable": "timed out"}
        cancel = self.cancel.child()
        future = self.runner._pools[-1].submit(_preview, tool, arguments)
        try:
            return _result_by(future, time.monotonic() + limit)
        except FutureTimeout:
            self.runner._overran(future, cancel)
            return {"unavailable": "timed out"}


_SLICE_S = 0.1


def _result_by(future: Future, until: float) -> Any:
    """``future``'s result, or FutureTimeout once ``time.monotonic()`` reaches ``until``. Waits in
    short slices: a SIGINT that lands between releasing the GIL and blocking in the wait does not
    wake it, and would otherwise wait for the whole timeout."""
    while (left := until - time.monotonic()) > 0:
        try:
            return future.result(timeout=min(left, _SLICE_S))
        except FutureTimeout:
            continue
    return future.result(timeout=0)


class _Guard(Exception):
    def __init__(self, reason: StopReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class _OutOfTime(Exception):
    """The deadline passed during a model call (the stream was dropped)."""


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
    hooks: tuple[Hooks, ...] = (),
) -> TurnFinished:
    """One turn with a runner of its own, closed when the turn ends (see ``Runner``)."""
    with Runner(provider, registry, approver, limits, emit, context or ContextWindow(), budget, hooks) as runner:
        return runner.run_turn(history, user_text, turn)


def request_tools(schemas: list[ToolSchema]) -> list[ToolSchema]:
    """Tools in a fixed order, so the request prefix stays byte-identical for prompt caches:
    local tools as registered, then MCP tools (``server__tool``) by name, whichever
    server connected or restarted first. An MCP server whose tools arrive after the
    first request changes the list once (one cache miss), as does ``/mcp restart``
    when the server's tools changed."""
    return sorted(schemas, key=lambda s: ("__" in s["name"], s["name"] if "__" in s["name"] else ""))


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


def _merged(first: Amend, then: Amend) -> Amend:
    """Two hooks' changes to one call: the later arguments, an approval by either."""
    if then.arguments is None:
        return replace(first, approved=first.approved or then.approved)
    return replace(then, approved=first.approved or then.approved)


def _replaced(result: ToolResult, amend: Amend | None) -> ToolResult:
    """``result``, saying which arguments a hook of the user's put in place of the model's."""
    if amend is None or amend.arguments is None:
        return result
    return {**result, REPLACED_KEY: amend.arguments}


def _no_time(call: ToolCall) -> ToolResult:
    return error_result("timeout", f"{call.name} was not run: the turn's time ran out (turn_timeout_s)")


def _timed(fn: Callable[..., ToolResult], *args: Any) -> tuple[ToolResult, float]:
    """Run in a worker: the result and when it was ready (so durations exclude waiting)."""
    return fn(*args), time.monotonic()


def _emit_finished(emit: Emit, step: int, call: ToolCall, result: ToolResult, started: float,
                   ended: float | None = None, repeat_of: str = "") -> None:
    error = error_of(result)
    duration = round((ended or time.monotonic()) - started, 4)
    emit(ToolCallFinished(step, call.id, call.name, error is None, result, duration,
                          None if error is None else error[0], repeat_of))


def _preview(tool: Tool, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """Run in a worker: ``{"before", "after"}`` from the tool; ``{"fails": message}`` when the tool
    already refuses these arguments (a todo that does not exist): the person is told, not asked blindly."""
    if tool.preview is None:
        return None
    try:
        return tool.preview(arguments)
    except ToolError as exc:
        return {"fails": exc.message}
    except Exception:  # a preview is a courtesy; the call itself reports real errors
        return None


def clip_result(result: ToolResult, limit: int) -> str:
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
