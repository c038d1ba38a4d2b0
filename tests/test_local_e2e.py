"""The embedded model end to end: real llama.cpp inference through the real CLI and REPL.

Assertions are on structure and data (tool calls, approvals, files, processes),
never on the model's wording.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from importlib import util
from pathlib import Path

import pexpect
import pytest

from tests.support import ENGLISH_TODOS, FirstAsk, alive, local_model_home

pytestmark = [
    pytest.mark.skipif(util.find_spec("llama_cpp") is None,
                       reason="needs the 'local' extra: pip install 'glassloop[local]'"),
    pytest.mark.xdist_group("llama"),  # real inference uses every CPU: one test worker runs it all
]


@pytest.fixture
def local_home(tmp_path: Path, embedded_model: Path) -> tuple[dict[str, str], Path]:
    """No key, no base URL: provider auto picks the local model (weights from the fixture)."""
    return local_model_home(tmp_path, embedded_model)


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.mark.timeout(1500)
def test_ask_answers_a_todo_question_through_the_todo_tools(embedded_first_ask: FirstAsk, tmp_path: Path) -> None:
    result = embedded_first_ask.result  # the first glassloop on this machine: no saved prompt state
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    calls = [e["name"] for e in payload["trace"] if e["type"] == "tool_call_started"]
    assert any(name in ("list_todos", "get_todo") for name in calls), (calls, payload["answer"])
    # how its first step was routed, in the JSON and on stderr: the tool the router chose first
    routes = [(e["step"], e["mode"], e["allowed"][:1]) for e in payload["trace"] if e["type"] == "routed"]
    assert routes == [(1, "required", ["list_todos"])], routes
    assert "step 1 routed to list_todos" in result.stderr
    assert payload["stopped_by"] in ("answer", "max_steps", "repeat", "budget", "timeout")
    assert payload["steps"] >= 2  # a tool step and an answer
    assert payload["usage"]["output_tokens"] > 0
    assert "Traceback" not in result.stderr
    assert result.stderr.count("building its saved prompt state") == 1  # the one line of a first start
    # the fixture's home is shared: the second glassloop runs in a copy of it
    root = Path(embedded_first_ask.env["XDG_CACHE_HOME"]).parent
    shutil.copytree(root, tmp_path / "home")
    env = {name: value.replace(str(root), str(tmp_path / "home")) for name, value in embedded_first_ask.env.items()}
    project = tmp_path / "home" / embedded_first_ask.project.relative_to(root)
    # a second glassloop restores the prompt state the first one saved
    log = Path(env["XDG_STATE_HOME"]) / "glassloop" / "local-server.log"
    again = subprocess.run([sys.executable, "-m", "repl.cli", "ask", "What is 2+2?", "--json"],
                           env=env, cwd=project, capture_output=True, text=True, timeout=1200)
    assert again.returncode == 0, again.stderr
    assert "prompt state" not in again.stderr
    states = [line for line in log.read_text().splitlines() if "glassloop prefix state:" in line]
    assert states[0].split(": ", 1)[1].startswith("missing")
    assert any(line.split(": ", 1)[1].startswith("loaded") for line in states[1:]), states


@pytest.mark.timeout(1500)
def test_repl_approval_writes_the_todo_and_leaves_no_server_behind(local_home, embedded_prompt_state):
    env, project = local_home
    shutil.copytree(embedded_prompt_state, env["XDG_CACHE_HOME"], dirs_exist_ok=True)  # its build is not tested here
    env = {**env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}
    child = pexpect.spawn(sys.executable, ["-m", "repl.cli"], env=env, cwd=str(project),
                          encoding="utf-8", dimensions=(40, 120), timeout=600)
    try:
        child.expect("local model")  # the one line saying auto picked the embedded model
        child.expect_exact("\x1b[?2004h")
        # explicit arguments: left to itself the 0.5B model adds todo_id/status fields,
        # which the schema rejects before any approval is asked
        child.send('Call add_todo with exactly these arguments: {"title": "buy milk"}\r')
        child.expect("needs approval")
        servers = _children_of(child.pid)
        assert servers, "the local model server runs as a child of glassloop"
        child.expect("Allow")
        time.sleep(0.3)
        child.send("y")
        child.expect(r"turn 1 ·")
        child.expect_exact("\x1b[?2004h")
        todos = json.loads(Path(env["GLASSLOOP_TODOS_FILE"]).read_text(encoding="utf-8"))
        items = todos["todos"] if isinstance(todos, dict) else todos
        assert len(items) == len(ENGLISH_TODOS) + 1
        assert "milk" in items[-1]["title"].lower()
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        if child.isalive():
            child.kill(9)
    deadline = time.monotonic() + 15
    while any(alive(pid) for pid in servers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in servers), "the model server outlived the session"


@pytest.mark.timeout(1500)
def test_a_second_ask_uses_the_server_the_first_kept_warm(embedded_first_ask: FirstAsk, tmp_path: Path) -> None:
    """The profile's keep_warm_s reaches the server, and its key the provider: the second ask
    starts no server (no new line from one in the log) and is answered by the first's."""
    root = Path(embedded_first_ask.env["XDG_CACHE_HOME"]).parent
    shutil.copytree(root, tmp_path / "home")
    env = {name: value.replace(str(root), str(tmp_path / "home")) for name, value in embedded_first_ask.env.items()}
    env["GLASSLOOP_KEEP_WARM_S"] = "60"
    project = tmp_path / "home" / embedded_first_ask.project.relative_to(root)
    log = Path(env["XDG_STATE_HOME"]) / "glassloop" / "local-server.log"
    cache = Path(env["XDG_CACHE_HOME"])
    pids = []
    try:
        for _ in range(2):
            done = subprocess.run([sys.executable, "-m", "repl.cli", "ask", "What is 2+2?", "--json"],
                                  env=env, cwd=project, capture_output=True, text=True, timeout=1200)
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["steps"] >= 1
            records = list(cache.rglob("server-*.json"))
            assert len(records) == 1
            pids.append(json.loads(records[0].read_text())["pid"])
            assert alive(pids[-1])  # it outlived the ask
        assert pids[0] == pids[1]
        starts = [line for line in log.read_text().splitlines()  # one line of each server's start
                  if line.startswith("glassloop prefix state: ") and "saved" not in line]
        assert len(starts) == 2, starts  # the fixture's server and the kept one: the second ask started none
    finally:
        for pid in set(pids):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
