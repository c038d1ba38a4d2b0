"""The embedded model's saved prompt state: the fixed prefix is evaluated once, ever.

The first test needs nothing but the code; the others run the real llama.cpp
server (the 'local' extra) on short prompts and compare its answers at
temperature 0, so they are about what the model is given, never its wording.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from importlib import util
from pathlib import Path
from typing import Any

import httpx
import pytest

from repl.config.load import Settings
from repl.config.settings import ProviderSettings
from repl.embedded.textcalls import to_text_messages
from repl.session.runtime import system_prompt_for
from tests.fakeserver import FakeServer, text
from tools import build_tools
from tools.registry import Registry

needs_extra = pytest.mark.skipif(util.find_spec("llama_cpp") is None,
                                 reason="needs the 'local' extra: pip install 'glassloop[local]'")
pytestmark = pytest.mark.xdist_group("llama")  # real llama.cpp servers: all on one test worker


def _wire_system(tmp_path: Path, today: dt.date, extra: str, mcp: bool) -> str:
    registry = Registry(build_tools(todos_path=tmp_path / "t.json", notes_path=tmp_path / "n.json",
                                    files_root=tmp_path, weather="sample"))
    tools = registry.schemas()
    if mcp:  # MCP tools are registered after the built-in ones
        tools.append({"name": "docs__search", "description": "Search the docs.",
                      "parameters": {"type": "object", "properties": {}}})
    history = [*system_prompt_for(ProviderSettings(name="local"), registry, extra, today).messages(),
               {"role": "user", "content": "hi"}]
    return to_text_messages(history, tools)[0]["content"]


def test_sessions_on_other_days_share_the_instructions_and_the_built_in_tool_block(tmp_path):
    first = _wire_system(tmp_path, dt.date(2025, 5, 1), "", mcp=False)
    later = _wire_system(tmp_path, dt.date(2026, 1, 31), "Answer in French.", mcp=True)
    last_builtin = first.index("\n</tools>")  # the end of the last built-in tool's line
    assert later[:last_builtin] == first[:last_builtin]
    assert "Today is 2026-01-31." in later and "Answer in French." in later
    assert later.index("Today is") > later.index("</tool_call>")  # per-session text comes last


# ------------------------------------------- building the state at start (a scripted server)

BUILDING = "building its saved prompt state"


@pytest.fixture
def embedded(fake_server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Settings]:
    """Settings of the embedded profile whose provider is glassloop's own (the chat adapter
    with the profile's dialect, owning a ``LocalServer``) but served by ``fake_server``: the
    server reports the saved-state outcome given (``missing``, ``loaded``), no process runs."""
    from repl.config.load import load_settings
    from repl.embedded.dialect import Dialect
    from repl.embedded.server import LocalServer
    from repl.embedded.textchat import TextChatProvider
    from repl.session import runtime

    def served(profile: ProviderSettings, settings: Settings, status: Any = None) -> Any:
        (tmp_path / "m.gguf").write_bytes(b"x")
        server = LocalServer(tmp_path / "m.gguf", log_path=tmp_path / "server.log", state_dir=tmp_path / "state")
        server.base_url = fake_server.base_url
        server.prefix_state = outcome[0]
        return runtime._WithServer(TextChatProvider(replace(profile, base_url=fake_server.base_url),
                                                Dialect.of(profile)), server)

    outcome = [""]
    monkeypatch.setattr("repl.session.core.make_provider", served)

    def settings(state: str) -> Settings:
        outcome[0] = state
        return load_settings({"provider": "local", "approval": "auto", "weather": "sample",
                              "todos_file": str(tmp_path / "todos.json")}, cwd=tmp_path, env={})
    return settings


def test_the_repl_builds_the_prompt_state_before_the_first_message(embedded, fake_server) -> None:
    from repl.session.core import SessionCore
    from tests.support import StubUI

    fake_server.script(text("."), text("Hi! How can I help?"))
    ui = StubUI()
    core = SessionCore(embedded("missing (0.00 s)"), ui, interactive=False)  # the REPL's door
    try:
        core.start_background()  # what the REPL does once its prompt is drawn
        core.provider()
        assert core.state_build is not None and core.turn_count() == 0
        core.state_build.join(30)
        [build] = fake_server.chat_requests()
        assert build.body["max_tokens"] == 1 and not build.body.get("stream")
        assert [e.message for e in ui.events if BUILDING in getattr(e, "message", "")]
        core.run_turn("which todos are still open?")  # a question for a tool: asked under the tool prompt
    finally:
        core.close()
    first = fake_server.chat_requests()[1].body
    # what was built is the first request's prefix: its system text (instructions, tools) as sent
    assert build.body["messages"][0] == first["messages"][0] and "<tools>" in first["messages"][0]["content"]


def test_no_build_when_the_state_was_loaded_nor_by_ask(embedded, fake_server) -> None:
    from repl.session.core import Door, SessionCore
    from tests.support import StubUI

    for state, door in (("loaded 2400 tokens (0.05 s)", None), ("missing (0.00 s)", Door("ask", warm=True))):
        core = SessionCore(embedded(state), StubUI(), interactive=False, **({"door": door} if door else {}))
        try:
            core.start_background()
            core.provider()
            assert core.state_build is None
        finally:
            core.close()
    assert fake_server.chat_requests() == []


def test_ask_says_once_that_it_builds_the_state_and_only_then(embedded, fake_server) -> None:
    from repl.session.oneshot import run_ask

    for state in ("missing (0.00 s)", "loaded 2400 tokens (0.05 s)", "unusable (truncated) (0.01 s)"):
        fake_server.script(text("Hello."))
        out, err = io.StringIO(), io.StringIO()
        assert run_ask(embedded(state), "hi", as_json=False, assume_yes=False, trace_file=None,
                       stdout=out, stderr=err) == 0
        said = [line for line in err.getvalue().splitlines() if "prompt state" in line]
        if state.startswith("missing"):
            assert said == ["local model: building its saved prompt state (once; the first answer "
                            "waits for it), later starts reuse it"]
        elif state.startswith("unusable"):
            assert len(said) == 1 and "truncated" in said[0] and "building it again" in said[0]
        else:
            assert said == []
    assert len(fake_server.chat_requests()) == 3  # each ask's own turn; no separate build


# ---------------------------------------------------------------- the real server

SYSTEM = ("You are a terse assistant for a small shop. Prices: apples 3 coins, pears 4 coins, "
          "plums 2 coins, cherries 9 coins per bag, bread 5 coins, milk 2 coins, eggs 6 coins "
          "per box. Opening hours: 8 to 18 on weekdays, 9 to 13 on Saturdays, closed on Sundays. "
          "Answer with the number only when asked for a price, and in one short sentence otherwise.")
FIRST, SECOND = "What do pears cost?", "How much are two bags of cherries and one bread?"


@pytest.fixture(scope="module")
def model_file(embedded_model: Path) -> Path:
    return embedded_model


def _server(model: Path, state_dir: Path, log: Path) -> Any:
    from repl.embedded.server import LocalServer

    return LocalServer(model, n_ctx=1024, log_path=log, state_dir=state_dir)


def _answer(server: Any, question: str, max_tokens: int = 12) -> str:
    reply = httpx.post(f"{server.base_url}/chat/completions", timeout=600, json={
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
        "temperature": 0, "seed": 1, "max_tokens": max_tokens})
    reply.raise_for_status()
    return str(reply.json()["choices"][0]["message"]["content"])


def _log_lines(log: Path, needle: str) -> list[str]:
    return [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines()
            if needle in line]


@pytest.fixture(scope="module")
def saved_state(model_file: Path, tmp_path_factory) -> Path:
    """A state dir holding what a first session saved (it asked FIRST)."""
    folder = tmp_path_factory.mktemp("state")
    log = folder.parent / "first.log"
    with _server(model_file, folder, log) as server:
        assert server.prefix_state and server.prefix_state.startswith("missing")
        assert server.notice and "first answer" in server.notice
        _answer(server, FIRST, max_tokens=1)
    assert _log_lines(log, "glassloop prefix state: saved"), log.read_text()[-2000:]
    assert [p.name for p in folder.iterdir()] == [server.state_path().name]  # no temporary left
    return folder


@pytest.fixture(scope="module")
def cold_answer(model_file: Path, tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("cold")
    with _server(model_file, folder / "empty", folder / "cold.log") as server:
        return _answer(server, SECOND)


@needs_extra
@pytest.mark.timeout(900)
def test_a_new_server_with_the_saved_state_answers_exactly_like_a_cold_one(
        model_file, saved_state, cold_answer, tmp_path):
    log = tmp_path / "warm.log"
    with _server(model_file, saved_state, log) as server:
        assert server.prefix_state and server.prefix_state.startswith("loaded")
        assert server.notice is None
        warm = _answer(server, SECOND)
    assert warm == cold_answer and warm.strip()
    reused = _log_lines(log, "prefix-match hit")  # llama-cpp-python skipped the saved prefix
    assert reused and int(reused[0].split("Llama.generate: ")[1].split()[0]) > 60
    assert not _log_lines(log, "glassloop prefix state: saved")  # it still fits: kept as is


@needs_extra
@pytest.mark.timeout(900)
def test_a_prefix_another_system_text_set_aside_is_put_back_for_the_next_request(
        model_file, cold_answer, tmp_path):
    """A request with another system text (the chat without tools) evicted the cache; the next
    request of the conversation before it evaluated its whole prompt again."""
    log = tmp_path / "kept.log"
    with _server(model_file, tmp_path / "state", log) as server:
        first = _answer(server, SECOND)
        reply = httpx.post(f"{server.base_url}/chat/completions", timeout=600, json={
            "messages": [{"role": "system", "content": "Reply with one friendly word."},
                         {"role": "user", "content": "hello"}], "temperature": 0, "max_tokens": 4})
        reply.raise_for_status()
        again = _answer(server, SECOND)
    assert first == again == cold_answer
    assert len(_log_lines(log, "glassloop kept prefix: set aside")) == 1  # the shop's (the chat's is short)
    assert len(back := _log_lines(log, "glassloop kept prefix: put back")) == 1, log.read_text()[-3000:]
    assert int(back[0].split("put back ")[1].split()[0]) > 60
    reused = _log_lines(log, "prefix-match hit")
    assert int(reused[-1].split("Llama.generate: ")[1].split()[0]) > 60  # the shop's prefix, not evaluated again


def _truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _flipped(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:]


def _other_key(data: bytes) -> bytes:
    magic, header, rest = data.split(b"\n", 2)
    head = json.loads(header)
    head["key"] = "0" * 64
    return b"\n".join([magic, json.dumps(head).encode(), rest])


@needs_extra
@pytest.mark.timeout(900)
def test_a_damaged_or_mismatched_state_file_means_a_cold_start_with_a_notice(
        model_file, saved_state, cold_answer, tmp_path):
    [good] = list(saved_state.iterdir())
    data = good.read_bytes()
    damages = {"truncated": _truncated, "checksum mismatch": _flipped,
               "made for another model": _other_key, "not a state file": lambda d: b"\0" * 4096}
    for number, (reason, damage) in enumerate(damages.items()):
        folder = tmp_path / f"state{number}"
        folder.mkdir()
        (folder / good.name).write_bytes(damage(data))
        log = tmp_path / f"damaged{number}.log"
        with _server(model_file, folder, log) as server:
            assert server.prefix_state and server.prefix_state.startswith("unusable"), reason
            assert server.notice and reason in server.notice and "starting cold" in server.notice
            if number == 0:  # one full answer: cold, identical, and the file is rebuilt
                assert _answer(server, SECOND) == cold_answer
                assert not _log_lines(log, "prefix-match hit")
                assert _log_lines(log, "glassloop prefix state: saved")
    with _server(model_file, tmp_path / "state0", tmp_path / "rebuilt.log") as server:
        assert server.prefix_state and server.prefix_state.startswith("loaded")


@needs_extra
@pytest.mark.timeout(900)
def test_two_servers_saving_at_once_leave_one_whole_state_file(model_file, tmp_path):
    folder = tmp_path / "state"
    folder.mkdir()
    month_ago = time.time() - 31 * 86400
    for name, age in (("prefix-old.bin", month_ago), (".prefix-x.partial", time.time() - 7200),
                      ("prefix-recent.bin", time.time())):
        (folder / name).write_bytes(b"left over")
        os.utime(folder / name, (age, age))
    servers = [_server(model_file, folder, tmp_path / f"s{n}.log") for n in range(2)]
    try:
        for server in servers:
            server.start()
        with ThreadPoolExecutor(2) as pool:  # both first answers, so both save
            list(pool.map(lambda s: _answer(s, FIRST, max_tokens=1), servers))
    finally:
        for server in servers:
            server.stop()
    for n in range(2):
        assert _log_lines(tmp_path / f"s{n}.log", "glassloop prefix state: saved")
    # one state file, no temporary; leftovers swept except another setting's recent file
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [servers[0].state_path().name, "prefix-recent.bin"])
    with _server(model_file, folder, tmp_path / "reader.log") as server:
        assert server.prefix_state and server.prefix_state.startswith("loaded")


def test_each_context_size_has_its_own_state_file(tmp_path):
    from repl.embedded.server import LocalServer

    (tmp_path / "m.gguf").write_bytes(b"x")
    servers = [LocalServer(tmp_path / "m.gguf", n_ctx=n, log_path=tmp_path / "log", state_dir=tmp_path)
               for n in (4096, 8192, 16384)]
    assert len({s.state_path() for s in servers}) == 3  # a changed n_ctx finds no state: it builds its own
    for server in servers:
        command = server.command(8080)
        assert command[command.index("--n_ctx") + 1] == str(server.n_ctx)


@needs_extra
@pytest.mark.timeout(300)
def test_a_stop_while_the_state_is_built_leaves_none_or_a_whole_one(model_file, tmp_path):
    folder = tmp_path / "state"
    prompt = [{"role": "system", "content": SYSTEM * 6}, {"role": "user", "content": "Hello"}]
    server = _server(model_file, folder, tmp_path / "stopped.log")
    server.start()
    building = ThreadPoolExecutor(1).submit(server.build_state, prompt)
    time.sleep(1)  # the request is in; the stop comes during its prefill (or, on a fast machine, after)
    server.stop()
    building.result(60)
    with _server(model_file, folder, tmp_path / "next.log") as server:
        assert server.prefix_state and server.prefix_state.startswith(("missing", "loaded"))
        if server.prefix_state.startswith("missing"):
            assert server.build_state(prompt)
            assert _log_lines(tmp_path / "next.log", "glassloop prefix state: saved")
    assert not [p for p in folder.iterdir() if p.name.endswith(".partial")]
