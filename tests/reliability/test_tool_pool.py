"""The tool pool belongs to the loop's runner: a stuck tool never holds a worker hostage.

A tool that ignores its cancel signal and never returns keeps its thread (Python
cannot kill one). Eight of them at once (the pool's size) used to fill the one
process-wide pool for good, so every later call timed out without running. Now a
call that overran leaves its worker to a retired pool and later calls get a fresh
one; and the pool is shut down with its runner, so no worker outlives the turn.
"""

from __future__ import annotations

import threading

import pytest

from repl.loop.agent import Limits, run_turn
from repl.loop.approval import Approver
from repl.loop.events import EventLog, ToolCallFinished
from repl.loop.history import History, check
from tests.fakeserver import call, text, tool_calls
from tests.reliability.helpers import record, wait_for
from tools.registry import Registry, tool

pytestmark = pytest.mark.timeout(60)
POOL_SIZE = 8


def test_stuck_calls_do_not_starve_the_next_call(scripted) -> None:
    release = threading.Event()
    running: list[int] = []  # the stuck calls that started
    ended: list[int] = []  # and those that returned
    seen_by_quick: list[tuple[int, int]] = []

    @tool(timeout_s=0.3)
    def stuck(n: int) -> str:
        """Never return in time, and ignore any cancel signal."""
        running.append(n)
        release.wait(30)
        ended.append(n)
        return "late"

    @tool
    def quick() -> str:
        """Answer at once."""
        seen_by_quick.append((len(running), len(ended)))
        return "fine"

    scripted.script(
        tool_calls(*(call("stuck", {"n": n}) for n in range(POOL_SIZE))),
        tool_calls(call("quick", {})),
        text("done"),
    )
    history, log = History("test"), EventLog()
    try:
        finished = run_turn(history, "go", provider=scripted, registry=Registry([stuck, quick]),
                            approver=Approver("auto"), limits=Limits(), emit=log)
    finally:
        release.set()  # let the stuck threads end
    results = {e.name: e for e in log.of(ToolCallFinished)}
    assert [e.error_type for e in log.of(ToolCallFinished)][:POOL_SIZE] == ["timeout"] * POOL_SIZE
    assert results["quick"].ok, results["quick"].result
    # it ran while every stuck call still held its worker: a starved call runs only once one lets go
    [(stuck_running, stuck_ended)] = seen_by_quick
    assert stuck_ended == 0, seen_by_quick
    assert finished.stopped_by == "answer" and check(history.messages) == []
    record("tool_pool", stuck_calls=POOL_SIZE, stuck_running=stuck_running,
           next_call_ms=round(results["quick"].duration_s * 1000, 1))


def test_no_worker_outlives_the_turn(scripted) -> None:
    ran_in: set[threading.Thread] = set()

    @tool
    def quick(n: int) -> str:
        """Answer at once."""
        ran_in.add(threading.current_thread())
        return str(n)

    scripted.script(tool_calls(*(call("quick", {"n": n}) for n in range(4))), text("done"))
    finished = run_turn(History("test"), "go", provider=scripted, registry=Registry([quick]),
                        approver=Approver("auto"), limits=Limits(), emit=EventLog())
    assert finished.stopped_by == "answer" and ran_in
    assert all(t.name.startswith("glassloop-tool") for t in ran_in)
    assert wait_for(lambda: not any(t.is_alive() for t in ran_in)), "tool workers still alive after the turn"
