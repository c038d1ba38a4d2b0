"""Tools get a cancel signal (pi's ``AbortSignal``) and stop with the turn.

A tool that declares a ``cancel`` parameter receives its call's ``Cancel``
(never part of its JSON schema). The loop sets it when the call times out, when
the turn runs out of time and when the turn is interrupted (a real SIGINT while
the tool runs). An MCP call stops waiting for the server at once (the request is
cancelled on the client's loop, the server keeps working), and the weather tool
asks for no forecast once its call was cancelled.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from repl.loop.agent import Limits, run_turn
from repl.loop.approval import Approver
from repl.loop.events import Event, EventLog, ToolCallFinished, TurnFinished
from repl.loop.history import History, check
from tests.fakeserver import call, text, tool_calls
from tests.reliability.helpers import record, wait_for
from tests.scripted_provider import ScriptedProvider
from tools.cancel import Cancel
from tools.mcp_client import McpManager, ServerConfig
from tools.registry import Registry, tool
from tools.weather import make_weather_tool

pytestmark = pytest.mark.timeout(60)
MCP_TEST_SERVER = Path(__file__).resolve().parent.parent / "mcp_test_server.py"
# A bound on waiting, never on what was measured: a tool that never sees its signal waits 30 s
# (the MCP server sleeps 20 s), so a signal seen within this was the loop's.
SEEN_WITHIN_S = 10.0
TURN_S = 1.5  # turn_timeout_s where the deadline cuts a call


class Waiter:
    """A tool that waits on its cancel signal (up to 30 s) and records what it saw."""

    def __init__(self, timeout_s: float | None = None) -> None:
        self.started = threading.Event()
        self.ended = threading.Event()
        self.cancelled_after: float | None = None
        self.signal: Cancel | None = None

        def wait_for_news(cancel: Cancel) -> str:
            """Wait for news until told to stop."""
            began = time.monotonic()
            self.signal = cancel
            self.started.set()
            if cancel.wait(30):
                self.cancelled_after = time.monotonic() - began
            self.ended.set()
            return "stopped"

        self.tool = tool(wait_for_news, timeout_s=timeout_s)


def main_thread_blocked() -> bool:
    """The main thread is asleep in the kernel. A SIGINT that lands after it released the GIL but
    before it blocks sets Python's flag without waking the wait it then enters (for up to the
    call's timeout); once it sleeps, the signal interrupts the wait."""
    stat = Path(f"/proc/self/task/{threading.main_thread().native_id}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "S"


class SignalWhenReported(EventLog):
    """The events, and whether the waiter's signal was set when its call was reported finished."""

    def __init__(self, waiter: Waiter) -> None:
        super().__init__()
        self.waiter = waiter
        self.set_when_reported: bool | None = None

    def __call__(self, event: Event) -> None:
        if isinstance(event, ToolCallFinished) and self.waiter.started.wait(SEEN_WITHIN_S):
            assert self.waiter.signal is not None
            self.set_when_reported = self.waiter.signal.cancelled
        super().__call__(event)


def one_call_turn(scripted: ScriptedProvider, waiter: Waiter,
                  limits: Limits) -> tuple[TurnFinished, SignalWhenReported, History]:
    scripted.script(tool_calls(call("wait_for_news", {})), text("no news in time"))
    history, log = History("test"), SignalWhenReported(waiter)
    finished = run_turn(history, "any news?", provider=scripted, registry=Registry([waiter.tool]),
                        approver=Approver("auto"), limits=limits, emit=log)
    return finished, log, history


def test_the_signal_is_not_in_the_schema() -> None:
    waiter = Waiter()
    assert waiter.tool.parameters == {"type": "object", "properties": {}, "additionalProperties": False}
    assert waiter.tool.cancellable
    weather = make_weather_tool("sample")
    assert set(weather.parameters["properties"]) == {"city", "date"}
    import glassloop_tools  # what a user's tool file imports it from

    assert glassloop_tools.Cancel is Cancel


def test_a_tool_waiting_on_its_signal_stops_when_its_call_times_out(scripted) -> None:
    waiter = Waiter(timeout_s=0.3)
    finished, log, history = one_call_turn(scripted, waiter, Limits())
    assert waiter.ended.wait(SEEN_WITHIN_S) and waiter.cancelled_after is not None, "the tool never saw its signal"
    assert log.of(ToolCallFinished)[0].error_type == "timeout"
    assert log.set_when_reported is True  # set by the timeout itself, not later by the turn's end
    assert finished.stopped_by == "answer" and check(history.messages) == []
    record("cancel", case="call timeout", tool_timeout_s=0.3, stopped_after_s=round(waiter.cancelled_after, 3))


def test_a_tool_waiting_on_its_signal_stops_when_the_turn_runs_out_of_time(scripted) -> None:
    waiter = Waiter()  # its own timeout (tool_timeout_s = 30) is far off: the turn's deadline cuts it
    finished, log, history = one_call_turn(scripted, waiter, Limits(turn_timeout_s=TURN_S, tool_timeout_s=30))
    assert waiter.ended.wait(SEEN_WITHIN_S) and waiter.cancelled_after is not None, "the tool never saw its signal"
    [cut] = log.of(ToolCallFinished)
    assert cut.error_type == "timeout" and "turn's time ran out" in cut.result["error"]["message"]
    assert log.set_when_reported is True
    assert finished.stopped_by == "timeout" and check(history.messages) == []
    record("cancel", case="turn deadline", turn_timeout_s=TURN_S, stopped_after_s=round(waiter.cancelled_after, 3))


def test_a_tool_waiting_on_its_signal_stops_when_the_turn_is_interrupted(scripted) -> None:
    waiter = Waiter()

    def ctrl_c() -> None:  # the user's Ctrl-C, once the tool runs and the loop waits for it
        waiter.started.wait(10)
        wait_for(main_thread_blocked, 10, step=0.001)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=ctrl_c, daemon=True).start()
    finished, log, history = one_call_turn(scripted, waiter, Limits(tool_timeout_s=30))
    assert finished.stopped_by == "interrupted"
    assert waiter.ended.wait(SEEN_WITHIN_S) and waiter.cancelled_after is not None, "the tool never saw its signal"
    assert check(history.messages) == []
    record("cancel", case="interrupted", stopped_after_s=round(waiter.cancelled_after, 3))


# ---- MCP ------------------------------------------------------------------------------


@pytest.fixture
def mcp() -> Iterator[tuple[McpManager, Registry]]:
    registry = Registry([])

    def register(server: str, tools: list) -> None:
        registry.remove(server + "__")
        registry.add(tools)

    config = ServerConfig("t", command=sys.executable, args=(str(MCP_TEST_SERVER),), timeout_s=30)
    manager = McpManager([config], on_tools=register).start()
    assert manager.wait_ready(30)
    yield manager, registry
    manager.close()


def test_an_mcp_call_stops_waiting_when_its_signal_is_set(mcp) -> None:
    _, registry = mcp
    cancel = Cancel()
    threading.Timer(0.3, cancel.cancel).start()
    started = time.monotonic()
    result = registry.call("t__slow", {"seconds": 20}, cancel)
    elapsed = time.monotonic() - started
    assert result["ok"] is False and result["error"]["type"] == "cancelled", result
    assert elapsed < SEEN_WITHIN_S, elapsed  # not the server's 20 s: the call stopped waiting
    # the server was not harmed: the next call is answered
    assert registry.call("t__slow", {"seconds": 0.01})["content"] == {"result": "slept 0.01"}
    record("cancel", case="mcp call", stopped_after_s=round(elapsed, 3))


def test_an_mcp_call_is_cancelled_when_the_turn_runs_out_of_time(scripted, mcp) -> None:
    """The loop gives up at the deadline; the MCP call it left behind stops too (its worker
    thread ends), instead of waiting out the server's 30 s timeout."""
    _, registry = mcp
    slow = registry.get("t__slow")
    ran_in: list[threading.Thread] = []

    def noting_the_thread(**arguments: object) -> object:
        ran_in.append(threading.current_thread())
        return slow.fn(**arguments)

    registry.remove_names(["t__slow"])
    registry.add([replace(slow, fn=noting_the_thread)])
    scripted.script(tool_calls(call("t__slow", {"seconds": 20})), text("the server was slow"))
    finished = run_turn(History("test"), "go", provider=scripted, registry=registry, approver=Approver("auto"),
                        limits=Limits(turn_timeout_s=TURN_S, tool_timeout_s=30), emit=EventLog())
    assert finished.stopped_by == "timeout" and len(ran_in) == 1
    ran_in[0].join(SEEN_WITHIN_S)  # the server's 20 s are far off
    assert not ran_in[0].is_alive(), "the MCP call still holds its worker"
    assert registry.call("t__slow", {"seconds": 0.01})["content"] == {"result": "slept 0.01"}


# ---- weather --------------------------------------------------------------------------


class SlowGeocoder(BaseHTTPRequestHandler):
    asked = threading.Event()
    release = threading.Event()
    paths: list[str] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        type(self).paths.append(self.path.split("?")[0])
        if self.path.startswith("/v1/search"):
            type(self).asked.set()
            type(self).release.wait(10)
            body = {"results": [{"name": "Beijing", "latitude": 39.9, "longitude": 116.4}]}
        else:
            body = {"daily": {"time": ["2025-05-01"], "temperature_2m_max": [9.0],
                              "temperature_2m_min": [-1.0], "weather_code": [0]}}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_the_weather_tool_asks_for_no_forecast_once_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    SlowGeocoder.asked.clear()
    SlowGeocoder.release.clear()
    SlowGeocoder.paths = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), SlowGeocoder)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    registry = Registry([make_weather_tool("open-meteo", f"{base}/v1/search", f"{base}/v1/forecast", 5.0)])
    cancel = Cancel()
    results: list[dict] = []
    worker = threading.Thread(target=lambda: results.append(registry.call("get_weather", {"city": "Beijing"},
                                                                          cancel)))
    try:
        worker.start()
        assert SlowGeocoder.asked.wait(5)
        cancel.cancel()  # the call timed out, or its turn ended, while the city was looked up
        SlowGeocoder.release.set()
        worker.join(5)
    finally:
        SlowGeocoder.release.set()
        httpd.shutdown()
        httpd.server_close()
    assert results and results[0]["ok"] is False and results[0]["error"]["type"] == "cancelled", results
    assert SlowGeocoder.paths == ["/v1/search"]
