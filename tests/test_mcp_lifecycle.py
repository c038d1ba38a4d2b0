"""An MCP stdio server's life around `glassloop ask`: connected without the SDK, a late
server's tools offered from the next model call, and a bounded stop for a server that
ignores its stdin closing and SIGTERM."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from repl.loop.agent import Limits, run_turn
from repl.loop.approval import Approver
from repl.loop.events import EventLog
from repl.loop.history import History, check
from repl.providers.chat import ChatProvider
from tests.fakeserver import call, text, tool_calls
from tests.support import Stack, adopting_orphans, mcp_config_file, stdio_server
from tools.mcp_client import STOP_GRACE_S
from tools.mcp_stdio import StdioConnection

pytestmark = pytest.mark.timeout(60)


def _pids_with(marker: str) -> list[int]:
    """Processes whose environment holds ``MCP_TEST_MARK=marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if f"MCP_TEST_MARK={marker}".encode() in environ.split(b"\0"):
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; its parent reaps it


def _gone_within(pid: int, timeout: float) -> bool:
    """True once ``pid`` has exited (pidfd: readable at its exit), False after ``timeout``."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0]) or not _alive(pid)
    finally:
        os.close(fd)


def test_ask_talks_to_a_stdio_server_without_importing_the_mcp_sdk(fake_server, home, tmp_path):
    """The SDK's import (~0.4 s of pydantic models and server modules) competed with the
    provider's for the GIL on every `ask`; a stdio server now needs none of it."""
    config = mcp_config_file(tmp_path, startup_timeout_s=30)  # listed before the first request, however loaded
    fake_server.script(tool_calls(call("t__lookup", {"country": "France"})),
                       lambda body: text("got: " + json.loads(body["messages"][-1]["content"])["content"]["result"]))
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "repl.cli", "ask", "capital?", "--yes",
                             "--config", str(config), "--base-url", fake_server.base_url],
                            env=home, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "got: The capital of France is Paris."
    imported = {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert not {name for name in imported if name == "mcp" or name.startswith(("mcp.", "mcp_types"))}
    assert "tools.mcp_client" in imported  # the check sees our modules


def test_ask_vets_a_servers_tools_without_importing_jsonschema(fake_server, home, tmp_path):
    """The server's tools are checked before they are offered (a broken schema is refused:
    tests/reliability/test_broken_schema.py), but plain shapes need no jsonschema (~50 ms of import beside the
    provider SDK's)."""
    seen: dict = {}

    def answer(body: dict):
        seen["tools"] = [t["function"]["name"] for t in body.get("tools", [])]
        return text("done")

    fake_server.script(answer)
    config = mcp_config_file(tmp_path, startup_timeout_s=30)  # listed before the first request, however loaded
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "repl.cli", "ask", "hi",
                             "--config", str(config), "--base-url", fake_server.base_url],
                            env=home, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    assert {"t__lookup", "t__stats", "t__write_note"} <= set(seen["tools"])
    imported = {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "tools.mcp_client" in imported and "jsonschema" not in imported
    assert not imported & {"rich", "prompt_toolkit"}  # ask prints plain lines: no terminal UI to load


def test_a_late_servers_tools_are_offered_from_the_next_model_call(fake_server, registry):
    """The first request goes out without a server still starting; once it has listed its
    tools, the next request of the same turn offers them and the model can call one."""
    stack = Stack([stdio_server(env={"MCP_TEST_START_DELAY": "0.3"})])
    offered: list[list[str]] = []

    def first(body: dict):
        offered.append([t["function"]["name"] for t in body.get("tools", [])])
        assert stack.manager.wait_ready(30)  # the server lists its tools while the model "thinks"
        return tool_calls(call("list_todos", {}))

    def second(body: dict):
        offered.append([t["function"]["name"] for t in body.get("tools", [])])
        return tool_calls(call("t__lookup", {"country": "Japan"}))

    fake_server.script(first, second, text("Tokyo"))
    stack.registry = registry  # the built-in tools, then the server's once listed
    stack.manager.start()
    provider = ChatProvider(name="test", model="m", base_url=fake_server.base_url, api_key="sk-test-0000",
                            max_retries=0, timeout_s=10)
    history = History("test")
    log = EventLog()
    try:
        finished = run_turn(history, "capital of Japan?", provider=provider, registry=stack.registry,
                            approver=Approver("auto"), limits=Limits(), emit=log)
    finally:
        provider.close()
        stack.manager.close()
    assert not any(name.startswith("t__") for name in offered[0])  # still starting: not waited for
    assert "t__lookup" in offered[1] and "list_todos" in offered[1]
    assert finished.answer == "Tokyo"
    results = [json.loads(m["content"]) for m in history.messages if m.get("role") == "tool"]
    assert results[-1]["content"]["result"] == "The capital of Japan is Tokyo."
    assert check(history.messages) == [] and fake_server.history_errors == []


def test_stop_is_bounded_for_a_server_that_ignores_stdin_close_and_sigterm(monkeypatch):
    """Stdin closed, ``STOP_GRACE_S``, SIGTERM, ``STOP_GRACE_S``, SIGKILL: the server is gone
    after three graces at most, 0.6 s. (The SDK's path waited 0.5 s after closing stdin and 0.5 s
    after SIGTERM: never under 1.0 s for this server.) The waits and signals are what the stop
    decided; how long it took on this machine is not checked."""
    marker = uuid.uuid4().hex
    stack = Stack([stdio_server(env={"MCP_TEST_IGNORE_STDIN_CLOSE": "1", "MCP_TEST_IGNORE_SIGTERM": "1",
                                     "MCP_TEST_MARK": marker})]).start()
    (pid,) = _pids_with(marker)
    assert stack.registry.call("t__lookup", {"country": "China"})["ok"] is True
    steps: list[tuple[str, float]] = []
    exited, killpg = StdioConnection._exited, os.killpg

    async def waiting(self: StdioConnection, timeout: float) -> bool:
        steps.append(("wait", timeout))
        return await exited(self, timeout)

    def signalling(pgid: int, sig: int) -> None:
        steps.append(("signal", sig))
        killpg(pgid, sig)

    monkeypatch.setattr(StdioConnection, "_exited", waiting)
    monkeypatch.setattr(os, "killpg", signalling)
    stack.manager.close()
    monkeypatch.undo()
    grace = ("wait", STOP_GRACE_S)
    assert steps == [grace, ("signal", signal.SIGTERM), grace, ("signal", signal.SIGKILL), grace], steps
    assert 3 * STOP_GRACE_S < 1.0  # under the SDK's path, whatever the machine
    assert _gone_within(pid, 10.0), "the server outlived its SIGKILL"
    assert stack.manager.servers["t"].status == "stopped"


def test_ask_exits_without_waiting_for_a_server_that_ignores_stdin_close_and_sigterm(fake_server, home, tmp_path):
    """Once the answer is out, ``ask`` closes the server's stdin and exits; a reaper sends
    SIGTERM and then SIGKILL to the server's group, so it does not outlive us for long."""
    config = mcp_config_file(tmp_path, startup_timeout_s=30, MCP_TEST_IGNORE_STDIN_CLOSE="1",
                             MCP_TEST_IGNORE_SIGTERM="1")
    seen: dict = {}

    def answer(body: dict):
        seen["tools"] = [t["function"]["name"] for t in body.get("tools", [])]
        return text("done")

    fake_server.script(answer)
    with adopting_orphans() as adopted:
        result = subprocess.run([sys.executable, "-m", "repl.cli", "ask", "hi", "--config", str(config),
                                 "--base-url", fake_server.base_url],
                                env=home, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "done" and "t__lookup" in seen["tools"]
    # ask did not wait for it (the old exit gave it 0.5 s after closing its stdin and 0.5 s after
    # SIGTERM): the server outlived ask, so it was handed to this process, and the reaper ask left
    # behind killed it (SIGTERM is ignored), within 20 s
    servers = [status for name, status in adopted.values() if name != "sh"]
    assert [status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) for status in servers] == [
        signal.SIGKILL], adopted
