"""Shared test helpers: seed data, an isolated environment, the CLI in a subprocess, one agent
turn, MCP stacks, a wire adapter's model call. Fixtures live in ``tests/conftest.py``; no test module imports another."""

from __future__ import annotations

import ast
import ctypes
import gc
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from repl.embedded.textchat import TextChatProvider
from repl.loop.agent import Limits, run_turn
from repl.loop.approval import Approver
from repl.loop.events import EventLog
from repl.loop.history import History
from repl.providers.base import Completed, ProviderError, RequestSent
from repl.providers.chat import ChatProvider
from repl.providers.responses import ResponsesProvider
from tools.mcp_client import McpManager, ServerConfig
from tools.registry import Registry

ROOT = Path(__file__).resolve().parent.parent


def parse_source(path: Path) -> ast.Module:
    """``path`` parsed with garbage collection off. CPython 3.11 counts the AST conversion's depth
    per interpreter: a collection during ``ast.parse`` that runs a finalizer (a pending asyncio
    task's, which logs) can let another parse in, and ``ast.parse`` then fails with
    "AST constructor recursion depth mismatch"."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(path.read_text(encoding="utf-8"), str(path))
    finally:
        if enabled:
            gc.enable()
SECRET = "sk-test-DO-NOT-LEAK-1234567890"
SEED_TODOS = [
    {"id": "todo-001", "title": "买菜", "status": "done", "priority": "low", "detail": "下班路上买鸡蛋、青菜和牛奶。"},
    {"id": "todo-002", "title": "写周报", "status": "todo", "priority": "high", "detail": "整理本周完成的接口联调、遗留问题和下周计划。"},
    {"id": "todo-003", "title": "回复邮件", "status": "todo", "priority": "medium", "detail": "回复项目会议纪要，确认接口字段和上线时间。"},
]


ENGLISH_TODOS = [dict(t, title=title, detail=detail) for t, (title, detail) in zip(SEED_TODOS, [
    ("Buy groceries", "Eggs, greens and milk on the way home."),
    ("Write the weekly report", "Summarise this week's integration work, open issues and next week's plan."),
    ("Reply to email", "Answer the meeting notes and confirm the API fields."),
], strict=True)]


def local_model_home(root: Path, model: Path) -> tuple[dict[str, str], Path]:
    """A home where ``glassloop`` picks the embedded model by itself (no key, no base URL; the
    weights at ``model``), with English todos; and its project folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GLASSLOOP_"))}
    for name in ("DATA", "STATE", "CONFIG", "CACHE"):
        env[f"XDG_{name}_HOME"] = str(root / name.lower())
    todos = root / "todos.json"
    todos.write_text(json.dumps(ENGLISH_TODOS), encoding="utf-8")
    env["GLASSLOOP_TODOS_FILE"] = str(todos)
    env["GLASSLOOP_KEEP_WARM_S"] = "0"  # the server stops with glassloop: nothing outlives a test
    project = root / "project"
    project.mkdir()
    user_config = root / "config" / "glassloop" / "config.toml"  # a project file would need trust
    user_config.parent.mkdir(parents=True)
    user_config.write_text(
        f'[providers.local]\nmodel_path = "{model}"\n[guards]\nmax_steps = 3\nturn_timeout_s = 900\n',
        encoding="utf-8")
    return env, project


FIRST_QUESTION = "Which todos are not done yet? Explain the highest-priority one."
# the real-model grammar and sampling tests' tools: a short prompt (conftest's five_tool_prompt_state)
FIVE_TOOLS = ("list_todos", "get_todo", "add_todo", "calculator", "get_weather")


@dataclass(frozen=True)
class FirstAsk:
    """``glassloop ask FIRST_QUESTION --json`` on a new machine: its home, project and run."""

    env: dict[str, str]
    project: Path
    result: subprocess.CompletedProcess[str]


def isolated_env(tmp_path: Path) -> dict[str, str]:
    """The environment of the ``home`` fixture: XDG dirs in tmp, a seed todo file, a fake key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GLASSLOOP_"))}
    for name in ("DATA", "STATE", "CONFIG", "CACHE"):
        env[f"XDG_{name}_HOME"] = str(tmp_path / name.lower())
    todos = tmp_path / "todos.json"
    todos.write_text(json.dumps(SEED_TODOS, ensure_ascii=False), encoding="utf-8")
    env["GLASSLOOP_TODOS_FILE"] = str(todos)
    env["GLASSLOOP_WEATHER"] = "sample"
    env["GLASSLOOP_KEEP_WARM_S"] = "0"  # an embedded server stops with its test's glassloop
    env["OPENAI_API_KEY"] = SECRET
    env["PYTHONIOENCODING"] = "utf-8"
    env["PAGER"] = "cat"  # long output in a pseudo-terminal is printed, never held by less
    return env


def glassloop(*args: str, env: dict[str, str], cwd: Path | None = None, stdin: str | None = None):
    """The real command in a subprocess (``python -m repl.cli``)."""
    return subprocess.run([sys.executable, "-m", "repl.cli", *args], env=env, cwd=cwd, input=stdin,
                          capture_output=True, text=True, timeout=60)


def glassloop_here(*args: str, env: dict[str, str], cwd: Path | None = None,
                   stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real command line run in this process (Typer's test runner), answering as ``glassloop``
    does: exit code, stdout, stderr; an exception that escapes shows as its traceback on stderr,
    as a subprocess would print it. ``env`` replaces the environment for the run. It saves the
    interpreter's start (~0.8 s a run), ``cwd`` the working folder: for tests whose subject is not the process (its signals,
    its exit, its standard streams' encoding, what it leaves behind)."""
    from typer.testing import CliRunner

    from repl.cli import app
    from tools.user_api import set_store_folder, store_folder

    environment: dict[str, str | None] = {name: None for name in os.environ if name not in env}
    before, stores = Path.cwd(), store_folder()
    os.chdir(cwd or before)
    try:
        result = CliRunner().invoke(app, list(args), input=stdin, env={**environment, **env})
    finally:
        os.chdir(before)
        set_store_folder(stores)  # a session's user tools keep their stores in its data folder
    stderr = result.stderr
    if result.exc_info is not None and not isinstance(result.exc_info[1], SystemExit):
        stderr += "".join(traceback.format_exception(*result.exc_info))
    return subprocess.CompletedProcess(["glassloop", *args], result.exit_code, result.stdout, stderr)


def chat(env, base_url, lines, *extra):
    """The chat session with its standard input from a pipe: one line per entry of ``lines``."""
    return glassloop("--base-url", base_url, *extra, env=env, stdin="".join(f"{line}\n" for line in lines))


def chat_here(env, base_url, lines, *extra):
    """``chat`` run in this process (``glassloop_here``)."""
    return glassloop_here("--base-url", base_url, *extra, env=env, stdin="".join(f"{line}\n" for line in lines))


def todos_of(home_env: dict[str, str]) -> list[dict]:
    data = json.loads(Path(home_env["GLASSLOOP_TODOS_FILE"]).read_text(encoding="utf-8"))
    return data["todos"] if isinstance(data, dict) else data


def turn(provider, registry, question, *, mode="ask", limits=None, history=None):
    """One agent turn with an event log: (TurnFinished, EventLog, History)."""
    history = history or History("You are a test assistant.")
    log = EventLog()
    finished = run_turn(history, question, provider=provider, registry=registry,
                        approver=Approver(mode), limits=limits or Limits(), emit=log)
    return finished, log, history


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (an unreaped corpse)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _children() -> dict[int, str]:
    """This process's children, exited or not: pid → command name."""
    found = {}
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text() if entry.isdigit() else ""
        except OSError:
            continue
        if stat and int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
            found[int(entry)] = stat.split("(", 1)[1].rsplit(")", 1)[0]
    return found


PR_SET_CHILD_SUBREAPER = 36


@contextmanager
def adopting_orphans(wait_s: float = 20.0) -> Iterator[dict[int, tuple[str, int | None]]]:
    """Within the block, a process this one started that leaves a process of its own behind
    when it exits hands it to us, not to init (Linux ``PR_SET_CHILD_SUBREAPER``): what outlived
    its parent is ours to see, however late we look. On leaving, each child this process gained
    in the block is waited for (up to ``wait_s``, then killed) and the yielded dict filled:
    pid → (command name, wait status; None when it had to be killed)."""
    libc = ctypes.CDLL(None, use_errno=True)
    before = set(_children())
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    adopted: dict[int, tuple[str, int | None]] = {}
    try:
        yield adopted
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        deadline = time.monotonic() + wait_s
        for pid, name in _children().items():
            if pid in before:
                continue
            while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            if done[0] == 0:  # still running: it would outlive the test
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            adopted[pid] = (name, done[1] if done[0] else None)


class StubUI:
    """The session's ``UI`` without a terminal, recording what the session shows: no one to
    ask, no input (EOF), nothing to pause in."""

    width = 80

    def __init__(self) -> None:
        self.infos: list[str] = []
        self.errors: list[str] = []
        self.tables: list[tuple[str, list[str], list[tuple[str, ...]]]] = []
        self.events: list[Any] = []
        self.shown: list[str] = []  # lines(), json() and echo() output

    def read(self) -> str:
        raise EOFError

    def echo(self, line: str) -> None:
        self.shown.append("> " + line)

    def prefill(self, text: str) -> bool:
        return False

    def confirm(self, question: str) -> bool:
        return False

    def pick_session(self, sessions: list[Any]) -> str | None:
        return None

    def pick(self, title: str, rows: list[str], at: int = 0) -> int | None:
        return None

    def marked(self, pieces: list[tuple[str, bool]]) -> None:
        self.shown.append("".join(f"[{text}]" if hit else text for text, hit in pieces))

    def asker(self) -> None:
        return None

    def stepper(self) -> None:
        return None

    def render(self, event: Any) -> None:
        self.events.append(event)

    def info(self, text: str) -> None:
        self.infos.append(text)

    def error(self, text: str) -> None:
        self.errors.append(text)

    def lines(self, lines: list[str]) -> None:
        self.shown.extend(lines)

    def table(self, title: str, columns: list[str], rows: list[tuple[str, ...]],
              keep: tuple[str, ...] = ()) -> None:
        self.tables.append((title, columns, rows))

    def paged(self) -> AbstractContextManager[None]:
        return nullcontext()

    def page(self, blocks: list[tuple[str, Any]]) -> None:
        self.shown.extend(json.dumps(value, ensure_ascii=False) if kind == "json" else value
                          for kind, value in blocks)

    def recap(self, earlier: int, turns: list[dict[str, Any]]) -> None:
        return None

    def waiting(self, status: str | None) -> None:
        return None

    def stop_live(self) -> None:
        return None

    def copy(self, text: str) -> bool:
        return False

    def set_verbose(self, on: bool | None) -> bool:
        return bool(on)

    def set_reasoning(self, on: bool | None) -> bool:
        return bool(on)


# ---- MCP --------------------------------------------------------------------------------

MCP_TEST_SERVER = ROOT / "tests" / "mcp_test_server.py"


def mcp_config_file(tmp_path: Path, *, startup_timeout_s: float | None = None, **env: str) -> Path:
    """A config file with the stdio test server as MCP server ``t``, ``env`` its environment;
    ``startup_timeout_s`` sets ``[mcp] startup_timeout_s`` (else the default applies)."""
    path = tmp_path / "mcp.toml"
    table = ", ".join(f"{key} = {json.dumps(value)}" for key, value in env.items())
    startup = "" if startup_timeout_s is None else f"[mcp]\nstartup_timeout_s = {startup_timeout_s}\n"
    path.write_text(f"{startup}[mcp.servers.t]\ncommand = {json.dumps(sys.executable)}\n"
                    f"args = [{json.dumps(str(MCP_TEST_SERVER))}]\nenv = {{ {table} }}\n", encoding="utf-8")
    return path


def stdio_server(name: str = "t", **options) -> ServerConfig:
    """A ``ServerConfig`` for the stdio test server (``tests/mcp_test_server.py``)."""
    return ServerConfig(name, command=sys.executable, args=(str(MCP_TEST_SERVER),), **options)


class Stack:
    """An MCP manager wired to a registry the way the session wires it."""

    def __init__(self, configs: list[ServerConfig], **options) -> None:
        self.registry = Registry([])
        self.notices: list[str] = []
        self.manager = McpManager(configs, on_notice=self.notices.append, on_tools=self._register, **options)

    def _register(self, server: str, tools: list) -> None:
        self.registry.remove(server + "__")
        self.registry.add(tools)

    def start(self) -> Stack:
        self.manager.start()
        assert self.manager.wait_ready(30)
        return self


# ---- inputs that must answer fast ---------------------------------------------------------

CALCULATOR_BOMBS = [
    "9**9**9",
    "4000000**4000000",
    "-" * 100_000 + "4",
    "+".join(["1"] * 5000),
    "(" * 500 + "1" + ")" * 500,
    "(" * 150 + "1" + ")" * 150,
    "(" * 99 + "7" + ")" * 99 + "**" + "9" * 700,
    "-" * 990 + "4",
    "1e308 * 10",
    "1e999",
    "10.0 ** 400",
    "(10 ** 3000) / 3",
    "(10 ** 10000) / 3",
    "(2 ** 5000) ** -1",
    "2 ** 9999 * 2 ** 9999",
    "(2 ** 9000) % 7.5",
    "9" * 999,
    "2**2**2**2**2**2",
    "(((2**100)**100)**100)",
]


# ---- a wire adapter (the real openai SDK) against the scripted server ----------------------

ADAPTERS: dict[str, Any] = {"chat": ChatProvider, "responses": ResponsesProvider}
ADAPTER_KEY = "sk-test-0123456789abcdef"  # never in an error message
QUESTION = [{"role": "user", "content": "what is left to do?"}]
TODO_TOOLS = [{"name": "list_todos", "description": "List todos.",
               "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}]


def adapter(api: str, base_url: str, **overrides: Any) -> Any:
    """The ``api`` adapter ("chat" or "responses") on ``base_url``: one retry, a 5 s timeout; for
    "chat" with ``tool_call_format="text"``, the one with tool calls as text."""
    options: dict[str, Any] = dict(name="fake", model="test-model", base_url=base_url, api_key=ADAPTER_KEY,
                                   api_key_env="GLASSLOOP_TEST_KEY", timeout_s=5, max_retries=1)
    text_calls = api == "chat" and overrides.get("tool_call_format") == "text"
    return (TextChatProvider if text_calls else ADAPTERS[api])(**{**options, **overrides})


def stream_all(p: Any, messages: list[dict] = QUESTION,
               tools: list[dict] | None = TODO_TOOLS) -> tuple[list, Completed]:
    """One model call's parts before ``Completed``, and ``Completed``; exactly one ``RequestSent``."""
    parts = list(p.stream(messages, tools))
    assert sum(isinstance(x, RequestSent) for x in parts) == 1  # the body as sent (/trace --raw)
    parts = [x for x in parts if not isinstance(x, RequestSent)]
    assert isinstance(parts[-1], Completed)
    assert not any(isinstance(x, Completed) for x in parts[:-1])
    return parts[:-1], parts[-1]


def stream_error(p: Any, messages: list[dict] = QUESTION) -> ProviderError:
    """The one-line error a model call ends with (never the key)."""
    with pytest.raises(ProviderError) as info:
        list(p.stream(messages, TODO_TOOLS))
    assert ADAPTER_KEY not in info.value.message and "\n" not in info.value.message
    return info.value


class TableRouter:
    """A router (``repl.loop.routing.Router``) that chooses from a table: a question's
    ``ToolChoice`` by its text, else ``otherwise``. Each request it is asked is kept (``asked``)."""

    def __init__(self, table: dict[str, Any] | None = None, otherwise: Any = None) -> None:
        from repl.providers.base import ToolChoice

        self.table = dict(table or {})
        self.otherwise = ToolChoice("none") if otherwise is None else otherwise
        self.asked: list[Any] = []

    def choose(self, request: Any) -> Any:
        self.asked.append(request)
        return self.table.get(request.question, self.otherwise)


def route_with(monkeypatch: pytest.MonkeyPatch, router: Any) -> Any:
    """Sessions made from now on, on a profile with ``router = true``, ask ``router`` instead of
    the routers the session core makes (their models: the routers' own tests); the core's hook
    (``loop.routing.Routing``) is the real one."""
    import repl.session.core as core
    from repl.loop.routing import Routing

    monkeypatch.setattr(core, "Routing", lambda *args, **kwargs: Routing(router))
    return router


def turn_after_weather(question: str) -> list[Any]:
    """A history: a weather question, its call and answer, then ``question`` (a follow-up)."""
    call = {"id": "c1", "name": "get_weather", "arguments": '{"city": "Rome"}'}
    return [{"role": "system", "content": "s"}, {"role": "user", "content": "Is it warm in Rome?"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": '{"ok": true}'},
            {"role": "assistant", "content": "Yes, 24 degrees."}, {"role": "user", "content": question}]
