"""MCP servers as tools: the stdio test server, an HTTP one, a published one, and the agent loop."""

from __future__ import annotations

import datetime as dt
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from repl.config.load import load_settings
from repl.config.settings import ProviderSettings
from repl.loop.agent import Limits, run_turn
from repl.loop.approval import Approver
from repl.loop.events import ApprovalDecided, EventLog, ToolCallFinished, ToolCallStarted
from repl.loop.history import History, check
from repl.providers.chat import ChatProvider
from repl.session import commands
from repl.session.runtime import (
    McpStart,
    build_registry,
    start_mcp,
    system_prompt_for,
    wait_for_mcp,
)
from repl.session.templates import Templates
from tests.fakeserver import call, text, tool_calls
from tests.support import Stack, StubUI, stdio_server
from tools import build_tools
from tools.mcp_client import McpManager, ServerConfig
from tools.mcp_convert import advice_phrase, parameters_from, result_to_data, tool_name
from tools.registry import Registry
from tools.results import ToolError

ROOT = Path(__file__).resolve().parent.parent
TEST_SERVER = ROOT / "tests" / "mcp_test_server.py"
pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    config = stdio_server(env={"MCP_TEST_NOTES": str(tmp_path / "notes.txt")})
    s = Stack([config], log_dir=tmp_path / "logs").start()
    yield s
    s.manager.close()


# ---- listing and calling ---------------------------------------------------------------


def test_tools_are_registered_with_their_schemas_and_side_effects(stack: Stack) -> None:
    names = stack.registry.names()
    assert {"t__lookup", "t__write_note", "t__fail", "t__slow", "t__crash", "t__stats"} <= set(names)
    lookup = stack.registry.get("t__lookup")
    assert lookup.parameters["required"] == ["country"]
    assert lookup.parameters["properties"]["country"]["type"] == "string"
    assert lookup.description.startswith("Look up the capital")
    assert lookup.side_effects is False  # readOnlyHint
    assert stack.registry.get("t__write_note").side_effects is True  # no hint: side effects assumed
    assert stack.manager.servers["t"].status == "ready" and stack.notices == []


def test_read_only_tool_call_returns_its_content(stack: Stack) -> None:
    result = stack.registry.call("t__lookup", {"country": "France"})
    assert result == {"ok": True, "content": {"result": "The capital of France is Paris."}}
    assert stack.registry.call("t__stats", '{"numbers": [1, 2.5]}')["content"] == json.dumps(
        {"sum": 3.5, "count": 2}, indent=2)


def test_side_effecting_tool_really_runs(stack: Stack, tmp_path: Path) -> None:
    result = stack.registry.call("t__write_note", {"text": "buy milk"})
    assert result == {"ok": True, "content": {"result": "saved: buy milk"}}
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "buy milk\n"


def test_is_error_result_becomes_a_structured_error(stack: Stack) -> None:
    result = stack.registry.call("t__fail", {"reason": "disk on fire"})
    assert result["ok"] is False
    assert result["error"]["type"] == "mcp_tool_error"
    assert "disk on fire" in result["error"]["message"]


def test_arguments_are_validated_against_the_servers_schema(stack: Stack) -> None:
    result = stack.registry.call("t__lookup", {"country": 3})
    assert result["error"]["type"] == "invalid_arguments"
    assert "country" in result["error"]["message"]


def test_read_only_tools_from_config_override_the_default(tmp_path: Path) -> None:
    s = Stack([stdio_server(read_only_tools=("write_note",))]).start()
    try:
        assert s.registry.get("t__write_note").side_effects is False
    finally:
        s.manager.close()


def test_slow_tool_times_out_and_the_server_keeps_working(tmp_path: Path) -> None:
    s = Stack([stdio_server(timeout_s=0.5)]).start()
    try:
        assert s.registry.get("t__slow").timeout_s == 0.5  # the agent loop waits this long too
        result = s.registry.call("t__slow", {"seconds": 5})
        assert result["error"]["type"] == "timeout"  # not the answer 5 s later
        assert s.registry.call("t__slow", {"seconds": 0.01})["content"] == {"result": "slept 0.01"}
    finally:
        s.manager.close()


# ---- failures --------------------------------------------------------------------------


class _CommandSession:
    """What the /mcp command reads from a session."""

    def __init__(self, manager: McpManager | None) -> None:
        self.mcp = manager
        self.ui = StubUI()
        self.templates = Templates()  # none of your own commands


def test_crash_mid_session_gives_tool_errors_and_restart_reconnects(stack: Stack) -> None:
    crashed = stack.registry.call("t__crash", {})
    assert crashed["error"]["type"] == "mcp_unavailable"  # at the crash, not the call's timeout
    assert "/mcp restart t" in crashed["error"]["message"]
    after = stack.registry.call("t__lookup", {"country": "Japan"})
    assert after["error"]["type"] == "mcp_unavailable"
    assert len(stack.notices) == 1 and "'t'" in stack.notices[0] and "\n" not in stack.notices[0]

    session = _CommandSession(stack.manager)
    commands.dispatch(session, "/mcp")
    (_, _, rows), = session.ui.tables
    assert rows[0][:2] == ("t", "lost")
    commands.dispatch(session, "/mcp restart t")
    assert session.ui.infos[-1].startswith("MCP server 't': ready, ")
    assert stack.registry.call("t__lookup", {"country": "Japan"})["ok"] is True
    assert stack.registry.names().count("t__lookup") == 1


def test_mcp_command_lists_servers_and_tools(stack: Stack) -> None:
    session = _CommandSession(stack.manager)
    commands.dispatch(session, "/mcp")
    (title, _, rows), = session.ui.tables
    assert title == "MCP servers"
    server, status, where, tools, problem = rows[0]
    assert (server, status, problem) == ("t", "ready", "")
    assert "lookup (ro)" in tools and "write_note," in tools
    commands.dispatch(session, "/mcp restart nope")
    assert session.ui.errors[-1].startswith("usage: /mcp restart NAME")
    empty = _CommandSession(None)
    commands.dispatch(empty, "/mcp")
    assert "no MCP servers configured" in empty.ui.infos[0]


def test_a_bad_server_is_one_line_and_the_others_still_work(tmp_path: Path) -> None:
    s = Stack([ServerConfig("bad", command=str(tmp_path / "no-such-server")), stdio_server("good")])
    s.manager.start()
    assert s.manager.servers["good"].status == "connecting"  # never blocks the caller: still starting
    try:
        not_ready = s.manager.wait_started()
        assert list(not_ready) == ["bad"] and not_ready["bad"].startswith("FileNotFoundError")
        assert "\n" not in not_ready["bad"]
        assert s.notices == []  # named by the first turn's wait, once
        assert s.manager.servers["bad"].status == "failed"
        assert s.registry.call("good__lookup", {"country": "China"})["ok"] is True
        assert not any(n.startswith("bad__") for n in s.registry.names())
    finally:
        s.manager.close()


def test_a_server_that_never_answers_times_out(tmp_path: Path) -> None:
    silent = ServerConfig("mute", command=sys.executable, args=("-c", "import time; time.sleep(60)"))
    s = Stack([silent], connect_timeout_s=1.0)
    s.start()
    try:
        assert s.manager.servers["mute"].status == "failed"
        assert s.manager.wait_started() == {"mute": "no answer within 1 s"}
    finally:
        s.manager.close()


def test_the_first_turns_wait_shows_what_it_waits_for_and_names_the_late_server() -> None:
    """``wait_for_mcp``, the REPL's and ask's wait: a status while a server starts, cleared after;
    a server still starting at the start-up timeout is not ready (the test server slow to start
    that both doors offer: tests/reliability/test_mcp_start.py)."""
    s = Stack([ServerConfig("late", command="sleep", args=("60",))], connect_timeout_s=1.5)
    shown: list[str | None] = []
    s.manager.start()
    try:
        started = wait_for_mcp(s.manager, shown.append)
    finally:
        s.manager.close()
    assert started == McpStart(ready=[], not_ready={"late": "no answer within 1.5 s"})
    assert started.line() == "MCP server not ready, its tools not offered: late (no answer within 1.5 s)"
    *waiting, cleared = shown
    assert waiting and cleared is None
    assert all(isinstance(line, str) and line.startswith("waiting for MCP server late… ") for line in waiting)
    assert s.notices == [] and not any(name.startswith("late__") for name in s.registry.names())


def test_an_mcp_tools_description_gives_the_embedded_models_advice(stack: Stack, tmp_path: Path) -> None:
    """An MCP tool carries no examples: its description's first sentence stands for them, so
    the embedded model is advised to call it like a built-in tool."""
    registry = Registry(build_tools(todos_path=tmp_path / "t.json", notes_path=tmp_path / "n.json",
                                    files_root=tmp_path, weather="sample"))
    built_in = system_prompt_for(ProviderSettings(name="local"), registry).text
    registry.add(stack.registry.get(name) for name in ("t__write_note", "t__lookup"))
    system = system_prompt_for(ProviderSettings(name="local"), registry).text
    assert stack.registry.get("t__lookup").examples == ()  # an MCP tool says nothing of what people ask
    weather = built_in.index("call get_weather; ") + len("call get_weather; ")
    assert system[:weather] == built_in[:weather]  # MCP tools last, by name
    assert system[weather:].startswith("for look up the capital of a country call t__lookup; "
                                       "for save a note (a side effect) call t__write_note; for notes (笔记)")
    hosted, day = ProviderSettings(name="openai"), dt.date(2025, 5, 1)
    assert system_prompt_for(hosted, registry, today=day) == system_prompt_for(hosted, Registry([]), today=day)
    assert [advice_phrase(text) for text in ("Get the time. In a zone.", "MCP status!", "天气。今天")] == \
        ["get the time", "MCP status", "天气"]


def test_tool_names_are_sanitised_for_the_wire() -> None:
    assert tool_name("my server", "do.it/now") == "my_server__do_it_now"
    assert len(tool_name("s", "x" * 100)) == 64


def test_results_and_schemas_are_converted() -> None:
    """From the wire's JSON (the SDK's own models dump to the same shape for HTTP servers)."""
    from mcp.types import CallToolResult, ImageContent, TextContent

    mixed = CallToolResult(content=[TextContent(text="a chart"),
                                    ImageContent(data="QUJD" * 10, mime_type="image/png")])
    wire = mixed.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert result_to_data(wire) == {"ok": True, "content": [
        "a chart", {"type": "image", "mime_type": "image/png", "bytes": 30}]}
    lines = {"content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}
    assert result_to_data(lines) == {"ok": True, "content": "one\ntwo"}
    assert result_to_data({"content": [], "structuredContent": {"n": 1}}) == {"ok": True, "content": {"n": 1}}
    linked = {"content": [{"type": "resource_link", "uri": "file:///a", "name": "a"},
                          {"type": "resource", "resource": {"uri": "file:///b", "text": "bee"}}, "junk"]}
    assert result_to_data(linked) == {"ok": True, "content": [
        {"type": "resource_link", "uri": "file:///a", "name": "a"}, "bee"]}
    with pytest.raises(ToolError) as failed:
        result_to_data({"content": [], "isError": True})
    assert failed.value.type == "mcp_tool_error"
    assert parameters_from({"type": "array"}) == {"type": "object", "properties": {}}
    assert parameters_from({"type": "object", "title": "x"}) == {"type": "object", "properties": {}}


# ---- transports and a published server -------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def http_server() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(TEST_SERVER), "--http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.kill()
    proc.wait()


def test_streamable_http_server_with_headers(http_server: str) -> None:
    s = Stack([ServerConfig("web", url=http_server, headers={"X-Test-Token": "tok-123"})]).start()
    try:
        assert s.notices == []
        assert s.registry.call("web__echo_header", {}) == {"ok": True, "content": {"result": "tok-123"}}
        assert s.registry.get("web__write_note").side_effects is True
    finally:
        s.manager.close()


def test_published_time_server() -> None:
    """``mcp-server-time``, installed from the package index, runs offline."""
    config = ServerConfig("time", command=sys.executable,
                          args=("-m", "mcp_server_time", "--local-timezone", "UTC"))
    s = Stack([config]).start()
    try:
        assert s.notices == []
        assert {"time__get_current_time", "time__convert_time"} <= set(s.registry.names())
        result = s.registry.call("time__convert_time", {"source_timezone": "UTC", "time": "12:00",
                                                        "target_timezone": "Asia/Tokyo"})
        assert result["content"]["target"]["datetime"].endswith("T21:00:00+09:00")
        bad = s.registry.call("time__get_current_time", {"timezone": "Mars/Olympus"})
        assert bad["error"]["type"] == "mcp_tool_error"
    finally:
        s.manager.close()


# ---- wiring and the agent loop ---------------------------------------------------------


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    notes = tmp_path / "mcp-notes.txt"
    config = tmp_path / "glassloop.toml"
    config.write_text(
        "[mcp.servers.t]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(TEST_SERVER))}]\n"
        f"env = {{ MCP_TEST_NOTES = {json.dumps(str(notes))} }}\n"
        'read_only_tools = ["stats"]\ntimeout_s = 5\n', encoding="utf-8")
    return load_settings(cwd=tmp_path, env={}, config_file=config)


def test_config_reaches_the_manager(settings) -> None:
    assert settings.mcp_servers["t"]["read_only_tools"] == ["stats"]
    assert ServerConfig.from_table("t", settings.mcp_servers["t"]).timeout_s == 5.0


def test_run_turn_calls_mcp_tools_like_local_ones(fake_server, settings, tmp_path: Path) -> None:
    registry = build_registry(settings)
    local = len(registry.names())
    notices: list[str] = []
    manager = start_mcp(settings, registry, notices.append)
    provider = ChatProvider(name="test", model="m", base_url=fake_server.base_url, api_key="sk-test-0000",
                            max_retries=0, timeout_s=10)
    try:
        assert manager.wait_ready(30) and notices == []
        assert registry.names()[local:][0] == "t__lookup"  # appended after the local tools
        fake_server.script(
            tool_calls(call("t__lookup", {"country": "Japan"}), call("t__write_note", {"text": "Tokyo"})),
            lambda body: text("Answer: " + json.loads(body["messages"][-2]["content"])["content"]["result"]),
        )
        log = EventLog()
        history = History("test")
        finished = run_turn(history, "capital of Japan? note it", provider=provider, registry=registry,
                            approver=Approver("auto"), limits=Limits(), emit=log)
    finally:
        provider.close()
        manager.close()
    assert finished.stopped_by == "answer"
    assert finished.answer == "Answer: The capital of Japan is Tokyo."
    sent_tools = [t["function"]["name"] for t in fake_server.chat_requests()[0].body["tools"]]
    assert "t__lookup" in sent_tools and "t__write_note" in sent_tools
    assert [(e.name, e.side_effects) for e in log.of(ToolCallStarted)] == [
        ("t__lookup", False), ("t__write_note", True)]
    assert [(e.name, e.allowed) for e in log.of(ApprovalDecided)] == [("t__write_note", True)]
    assert all(e.ok for e in log.of(ToolCallFinished))
    assert (tmp_path / "mcp-notes.txt").read_text(encoding="utf-8") == "Tokyo\n"
    assert fake_server.history_errors == [] and check(history.messages) == []


def test_no_servers_means_no_manager_and_no_sdk_import(tmp_path: Path) -> None:
    code = ("import sys; from repl.session import chat as session, commands, runtime; "
            "print('mcp' in sys.modules, 'tools.mcp_client' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
