"""Item 8: ``turn_timeout_s`` holds inside a model call and a tool call, not only between steps.

The scripted server streams text without end, or sends only SSE keep-alive
comments after a few events (each resets the HTTP read timeout and yields no
event); a tool sleeps far longer than the turn may last. With
``turn_timeout_s = 2`` each turn ends on both wire APIs as ``timeout``, cut
where the deadline fell (inside the model's answer, or the tool given only
the time the model call left), with the streamed text kept and marked, the
server's stream dropped, and a history the server accepts on the next
question. The real command line (``glassloop ask``, in this process) shows the
same with the limit from its config file. The tests check what the loop decided; how long a turn
took on this machine is only recorded.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from repl.loop.agent import Limits, run_turn
from repl.loop.approval import Approver
from repl.loop.events import EventLog, GuardTripped, TextDelta, ToolCallFinished
from repl.loop.history import History, check
from tests.fakeserver import (
    FakeServer,
    Reply,
    call,
    endless_stream,
    keepalive_stream,
    text,
    tool_calls,
)
from tests.reliability.helpers import record, wait_for
from tests.support import ADAPTERS, glassloop_here
from tools.registry import Registry, tool

pytestmark = pytest.mark.timeout(60)
# Events before the first text delta: chat sends a role chunk; Responses sends
# created, in_progress, output_item.added and content_part.added.
OPENING = {"chat": 1, "responses": 4}
TURN_S = 2.0


@pytest.fixture(params=["chat", "responses"])
def api(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def provider(fake_server: FakeServer, api: str) -> Iterator[Any]:
    # timeout_s (the HTTP read timeout) is shorter than the turn: keep-alives must defeat it
    p = ADAPTERS[api](name="test", model="m", base_url=fake_server.base_url, api_key="sk-test",
                      max_retries=2, timeout_s=1)
    # one turn first: the SDK's import and the connection (seconds on a loaded machine) do not
    # eat into the 2 s turn under test, whose stream must have begun by its deadline
    fake_server.script(text("ready"))
    assert timed_turn(p, Registry([]), History("warm-up"), "hi", Limits())[0].answer == "ready"
    yield p
    p.close()


def timed_turn(provider: Any, registry: Registry, history: History, question: str,
               limits: Limits) -> tuple[Any, EventLog, float]:
    log = EventLog()
    started = time.monotonic()
    finished = run_turn(history, question, provider=provider, registry=registry,
                        approver=Approver("auto"), limits=limits, emit=log)
    return finished, log, time.monotonic() - started


def streamed(log: EventLog) -> str:
    return "".join(e.text for e in log.events if isinstance(e, TextDelta))


def follow_up(fake_server: FakeServer, provider: Any, history: History) -> None:
    """The next question goes out with the cut turn in it, and the server accepts the history."""
    fake_server.script(text("fine, next"))
    finished, _, _ = timed_turn(provider, Registry([]), history, "and now?", Limits())
    assert finished.stopped_by == "answer" and finished.answer == "fine, next"
    assert fake_server.history_errors == [] and check(history.messages) == []


@pytest.mark.parametrize("fault", ["endless text", "keep-alive comments"])
def test_a_stream_that_never_ends_is_dropped_at_the_deadline(fault, api, provider, fake_server):
    after = OPENING[api] + 2  # two text deltas, then the stream never finishes
    reply = endless_stream(after) if fault == "endless text" else keepalive_stream(after, every=0.05)
    fake_server.script(reply)
    history = History("test")
    finished, log, elapsed = timed_turn(provider, Registry([]), history, "talk", Limits(turn_timeout_s=TURN_S))

    assert elapsed >= TURN_S, elapsed  # not cut before the deadline
    assert finished.stopped_by == "timeout"
    # cut inside the model call (the stream never ends: no check between steps could stop it)
    assert [(e.guard, e.detail) for e in log.events if isinstance(e, GuardTripped)] == [
        ("timeout", "the turn's time ran out during the model's answer (step 1)")]
    shown = streamed(log)
    assert shown and finished.answer == shown  # what the user saw is the turn's answer
    last = history.messages[-1]
    assert last["role"] == "assistant" and last["content"].startswith(shown)
    assert "[cut off: the turn ran out of time]" in last["content"]
    assert check(history.messages) == []
    assert wait_for(lambda: fake_server.disconnects == 1), "the stream was not dropped"
    follow_up(fake_server, provider, history)
    record("turn_deadline", api=api, fault=fault, turn_timeout_s=TURN_S, elapsed_s=round(elapsed, 2),
           streamed_chars=len(shown))


def test_a_tool_gets_only_the_time_left_in_the_turn(api, provider, fake_server):
    release = threading.Event()

    @tool
    def wait_long() -> str:
        """Wait far longer than the turn may last."""
        release.wait(30)
        return "done"

    # the model takes a while to decide, so the tool must get less than the whole turn
    fake_server.script(tool_calls(call("wait_long", {}), first_byte_delay=0.5),
                       text("sorry, the tool was too slow"))
    history = History("test")
    limits = Limits(turn_timeout_s=TURN_S, tool_timeout_s=30)
    try:
        finished, log, elapsed = timed_turn(provider, Registry([wait_long]), history, "go", limits)
    finally:
        release.set()
    result = next(e for e in log.events if isinstance(e, ToolCallFinished))
    # the tool is stopped at the turn's deadline: the time the loop gave it is what the model call
    # (its first byte 0.5 s late) left of the turn, not the tool's own 30 s nor a whole TURN_S
    message = result.result["error"]["message"]
    given = re.fullmatch(r"wait_long was stopped after ([\d.]+) s: the turn's time ran out \(turn_timeout_s\)",
                         message)
    assert result.error_type == "timeout" and given, message
    assert 0 < float(given.group(1)) <= TURN_S - 0.5, message
    # the guard's last, tool-free call still answers (within its short grace)
    assert finished.stopped_by == "timeout" and finished.answer == "sorry, the tool was too slow"
    assert check(history.messages) == [] and fake_server.history_errors == []
    record("turn_deadline", api=api, fault="slow tool", turn_timeout_s=TURN_S, elapsed_s=round(elapsed, 2),
           tool_s=result.duration_s)


def test_a_server_that_never_answers_is_bounded_by_the_deadline(api, fake_server):
    """No headers at all: the request's timeout is cut to the time left, without retries."""
    p = ADAPTERS[api](name="test", model="m", base_url=fake_server.base_url, api_key="sk-test",
                      max_retries=2, timeout_s=30)
    fake_server.script(Reply(text="too late", first_byte_delay=10))
    history = History("test")
    try:
        finished, _, elapsed = timed_turn(p, Registry([]), history, "hello?", Limits(turn_timeout_s=TURN_S))
    finally:
        p.close()
    # the request gave up at the deadline: waiting out the server's 10 s would have got its answer
    assert finished.stopped_by == "timeout" and "too late" not in finished.answer
    assert len(fake_server.requests) == 1  # no retry past the deadline
    assert check(history.messages) == []
    record("turn_deadline", api=api, fault="no headers", turn_timeout_s=TURN_S, elapsed_s=round(elapsed, 2))


def test_glassloop_ask_stops_a_keepalive_stream_at_turn_timeout(api, fake_server, home, tmp_path: Path):
    config = tmp_path / "deadline.toml"
    config.write_text(f"[guards]\nturn_timeout_s = {TURN_S:g}\n", encoding="utf-8")
    fake_server.script(keepalive_stream(OPENING[api] + 2, every=0.05))
    started = time.monotonic()
    result = glassloop_here("ask", "talk", "--json", "--api", api, "--config", str(config),
                            "--base-url", fake_server.base_url, env=home)
    elapsed = time.monotonic() - started
    assert "Traceback" not in result.stderr, result.stderr
    payload = json.loads(result.stdout)
    assert payload["stopped_by"] == "timeout" and payload["answer"]
    assert [e["detail"] for e in payload["trace"] if e["type"] == "guard_tripped"] == [
        "the turn's time ran out during the model's answer (step 1)"]
    turn_s = next(e["duration_s"] for e in payload["trace"] if e["type"] == "turn_finished")
    # the config file's 2 s cut it: not before, and nowhere near the default turn_timeout_s (300 s)
    assert TURN_S <= turn_s < 10 * TURN_S, turn_s
    record("turn_deadline", api=api, fault="keep-alive, glassloop ask", turn_s=turn_s, command_s=round(elapsed, 2))
