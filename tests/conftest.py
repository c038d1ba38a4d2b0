"""Shared pytest fixtures (helpers that are not fixtures live in ``tests/support.py`` and
``tests/terminal.py``; no test module imports another)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from repl.providers.chat import ChatProvider
from tests.fakeserver import FakeServer
from tests.scripted_provider import ScriptedProvider
from tests.support import (
    FIRST_QUESTION,
    FIVE_TOOLS,
    SEED_TODOS,
    FirstAsk,
    isolated_env,
    local_model_home,
)
from tests.terminal import Repl, SizedRepl
from tools import build_tools
from tools.registry import Registry

# tests/opt_in/ needs programs CI has not: collected only when GLASSLOOP_PHOENIX names one
collect_ignore_glob = [] if os.environ.get("GLASSLOOP_PHOENIX") else ["opt_in/*"]


def pytest_configure(config: pytest.Config) -> None:
    """Tests that interrupt (in-process SIGINT, Ctrl-C in a pseudo-terminal) need Python's own
    handler; a suite started in a script's background inherits SIGINT ignored, and so would
    every worker and every program it starts."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # an embedded server started by a test stops with it, not 5 minutes later (keep_warm_s)
    os.environ["GLASSLOOP_KEEP_WARM_S"] = "0"


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than the CPUs. Most tests wait on a program they started (a
    ``glassloop`` process, a pseudo-terminal, a server), and a worker per CPU left the cores
    partly idle (two cores, two pairs of runs of the whole suite: 594 s with two workers against
    564 s with three, and 597 s against 590 s)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cpus + 1


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """``--dist loadgroup`` sends the tests of one ``xdist_group`` to one worker by a ``@group``
    suffix on their node ids. pytest 9.2 ignores how pytest-xdist 3.8 sets it (pytest-xdist
    issue 1386), so the marks were silently dropped; this sets it where pytest 9.2 reads it."""
    result = yield
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # an older pytest, where xdist's own suffix works
        return result
    if not getattr(config.option, "loadgroup", False):
        return result
    for item in items:
        group = "_".join(sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                                 for mark in item.iter_markers("xdist_group")}))
        if group and not item.nodeid.endswith("@" + group) and hasattr(item, "_id"):
            item._id = NodeId.parse(f"{item.nodeid}@{group}")
    return result


@pytest.fixture(scope="session", autouse=True)
def own_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The user cache of this run's in-process code (the router's unpacked encoder and the
    vectors it keeps): written once per worker, and never the cache of whoever runs the tests."""
    cache = tmp_path_factory.mktemp("xdg-cache")
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)
    yield cache
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture(scope="session")
def embedded_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded model's weights (~500 MB), assembled and checked once per run: the xdist
    workers share one copy in the run's temporary root (``ensure_model`` locks against a race).
    Read only."""
    from repl.embedded.weights import ensure_model

    base = tmp_path_factory.getbasetemp()
    return ensure_model((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "embedded-model")


@pytest.fixture(scope="session")
def embedded_first_ask(embedded_model: Path, tmp_path_factory: pytest.TempPathFactory) -> FirstAsk:
    """The embedded model's first ``ask`` on a new machine, once per run: it builds and saves the
    prompt state for the built-in tools (nearly a minute of prompt evaluation), which
    ``test_local_e2e`` checks and the other real-model tests copy instead of building it again.
    Read only."""
    env, project = local_model_home(tmp_path_factory.mktemp("first-ask"), embedded_model)
    result = subprocess.run([sys.executable, "-m", "repl.cli", "ask", FIRST_QUESTION, "--json"], env=env,
                            cwd=project, capture_output=True, text=True, timeout=1200, stdin=subprocess.DEVNULL)
    return FirstAsk(env, project, result)


@pytest.fixture(scope="session")
def embedded_prompt_state(embedded_first_ask: FirstAsk) -> Path:
    """A cache dir (an ``XDG_CACHE_HOME``) holding the embedded model's saved prompt state for the
    built-in tools, as the first ``ask`` saved it. Read only."""
    cache = Path(embedded_first_ask.env["XDG_CACHE_HOME"])
    assert list(cache.rglob("prefix-*.bin")), ("no prompt state was saved", embedded_first_ask.result.stderr[-2000:])
    return cache


@pytest.fixture(scope="session")
def five_tool_prompt_state(embedded_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state dir holding the embedded server's saved prompt state (``n_ctx`` 2048) for the
    system prompt over ``FIVE_TOOLS``, built once per run: the grammar and sampling tests copy
    it, where each built its own (~1,300 tokens of prompt evaluation, 14–17 s idle each). A
    loaded state decodes exactly as a cold one (``test_local_state``). Read only."""
    from bench.tool_use import fixture
    from repl.config.settings import ProviderSettings
    from repl.embedded.server import LocalServer
    from repl.embedded.textcalls import to_text_messages
    from repl.session.runtime import system_prompt_for

    folder = tmp_path_factory.mktemp("five-tools")
    registry = fixture(folder / "tools")
    tools = [s for s in registry.schemas() if s["name"] in FIVE_TOOLS]
    messages = [*system_prompt_for(ProviderSettings(name="local"), registry).messages(),
                {"role": "user", "content": "hi"}]
    with LocalServer(embedded_model, n_ctx=2048, log_path=folder / "server.log", state_dir=folder / "state") as server:
        assert server.build_state(to_text_messages(messages, tools)), (folder / "server.log").read_text()[-2000:]
    assert list((folder / "state").glob("prefix-*.bin")), (folder / "server.log").read_text()[-2000:]
    return folder / "state"


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    """A scripted OpenAI-compatible server on 127.0.0.1 (``base_url`` ends with /v1)."""
    with FakeServer() as server:
        yield server


@pytest.fixture
def scripted() -> ScriptedProvider:
    """A ``Provider`` in-process fed ``fake_server``'s scripts (``tests/scripted_provider.py``),
    for loop tests where the wire is irrelevant."""
    return ScriptedProvider()


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """An isolated environment: XDG dirs in tmp, a seed todo file, a fake key."""
    return isolated_env(tmp_path)


@pytest.fixture
def todos_file(tmp_path: Path) -> Path:
    path = tmp_path / "todos.json"
    path.write_text(json.dumps(SEED_TODOS, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.fixture
def registry(tmp_path: Path, todos_file: Path) -> Registry:
    """The built-in tools on files in tmp (sample weather)."""
    return Registry(build_tools(todos_path=todos_file, notes_path=tmp_path / "notes.json",
                                files_root=tmp_path, weather="sample"))


@pytest.fixture
def provider(fake_server: FakeServer) -> Iterator[ChatProvider]:
    """The Chat Completions adapter (real openai SDK) pointed at ``fake_server``."""
    p = ChatProvider(name="test", model="m", base_url=fake_server.base_url, api_key="sk-test-secret-0000",
                     max_retries=2, timeout_s=10)
    yield p
    p.close()


@pytest.fixture
def quiet_provider(fake_server: FakeServer) -> Iterator[ChatProvider]:
    """Like ``provider`` but never retries: a cut or slow call is seen once."""
    p = ChatProvider(name="test", model="m", base_url=fake_server.base_url, api_key="sk-test",
                     max_retries=0, timeout_s=10)
    yield p
    p.close()


def _killing(started: list[Repl]) -> None:
    for session in started:
        if session.child.isalive():
            session.child.kill(signal.SIGKILL)


@pytest.fixture
def session(fake_server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A non-interactive ``ChatSession`` against ``fake_server`` with its journal open (approvals
    auto, sample weather, todos in ``tmp_path``, every XDG dir in ``tmp_path``)."""
    from repl.config.load import load_settings
    from repl.session.chat import ChatSession
    from tests.support import StubUI

    for name in ("DATA", "STATE", "CONFIG"):
        monkeypatch.setenv(f"XDG_{name}_HOME", str(tmp_path / name.lower()))
    settings = load_settings({"base_url": fake_server.base_url, "approval": "auto", "weather": "sample",
                              "todos_file": str(tmp_path / "todos.json")}, cwd=tmp_path, env={})
    chat_session = ChatSession(settings, StubUI(), interactive=False)
    chat_session.open_journal()
    yield chat_session
    chat_session.close()


@pytest.fixture
def repl_factory(home: dict[str, str], fake_server: FakeServer) -> Iterator[Callable[..., Repl]]:
    """``start(*args)``: the REPL in a 100x40 pseudo-terminal against ``fake_server``."""
    sessions: list[Repl] = []

    def start(*args: str) -> Repl:
        sessions.append(Repl(home, fake_server.base_url, *args))
        return sessions[-1]

    yield start
    _killing(sessions)


@pytest.fixture
def sized_repl(home: dict[str, str], fake_server: FakeServer) -> Iterator[Callable[..., SizedRepl]]:
    """``start(*args, cols=100, rows=40, url=True, wait=True)``: the REPL against the scripted server."""
    started: list[SizedRepl] = []

    def start(*args: str, cols: int = 100, rows: int = 40, url: bool = True, wait: bool = True) -> SizedRepl:
        started.append(SizedRepl(home, list(args), cols, rows, fake_server.base_url if url else None, wait))
        return started[-1]

    yield start
    _killing(started)
