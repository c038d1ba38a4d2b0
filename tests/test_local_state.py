"""The embedded model's saved prompt state: the fixed prefix is evaluated once, ever.

The first test needs nothing but the code; the others run the real llama.cpp
server (the 'local' extra) on short prompts and compare its answers at
temperature 0, so they are about what the model is given, never its wording.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import util
from pathlib import Path
from typing import Any

import httpx
import pytest

from repl.config.settings import ProviderSettings
from repl.providers.textcalls import to_text_messages
from repl.providers.weights import ensure_model
from repl.session.runtime import system_prompt_for
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
    history = [{"role": "system", "content": system_prompt_for(ProviderSettings(name="local"), registry, extra, today)},
               {"role": "user", "content": "hi"}]
    return to_text_messages(history, tools)[0]["content"]


def test_sessions_on_other_days_share_the_instructions_and_the_built_in_tool_block(tmp_path):
    first = _wire_system(tmp_path, dt.date(2025, 5, 1), "", mcp=False)
    later = _wire_system(tmp_path, dt.date(2026, 1, 31), "Answer in French.", mcp=True)
    last_builtin = first.index("\n</tools>")  # the end of the last built-in tool's line
    assert later[:last_builtin] == first[:last_builtin]
    assert "Today is 2026-01-31." in later and "Answer in French." in later
    assert later.index("Today is") > later.index("</tool_call>")  # per-session text comes last


# ---------------------------------------------------------------- the real server

SYSTEM = ("You are a terse assistant for a small shop. Prices: apples 3 coins, pears 4 coins, "
          "plums 2 coins, cherries 9 coins per bag, bread 5 coins, milk 2 coins, eggs 6 coins "
          "per box. Opening hours: 8 to 18 on weekdays, 9 to 13 on Saturdays, closed on Sundays. "
          "Answer with the number only when asked for a price, and in one short sentence otherwise.")
FIRST, SECOND = "What do pears cost?", "How much are two bags of cherries and one bread?"


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    return ensure_model(tmp_path_factory.mktemp("local-model"))


def _server(model: Path, state_dir: Path, log: Path) -> Any:
    from repl.providers.local import LocalServer

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
