"""Part 3: crash safety of the todo and note stores and of the session journal.

A writer process (``crash_writer.py``) adds todos and notes through the real
tools and journals whole turns, acknowledging each completed write; it is
killed with SIGKILL at a random moment, over and over, on the same files.
After every kill: each store parses as a valid version holding everything
acknowledged (and at most the one write in flight), the journal replays to a
valid history holding every acknowledged turn, and ``glassloop --resume``
continues the session. Then two processes add todos concurrently, and a
corrupt todo file is reported and left byte-identical.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from repl.archive.journal import load
from repl.loop.history import History, check
from tests.fakeserver import FakeServer, call, text, tool_calls
from tests.reliability.crash_writer import SECRET
from tests.reliability.helpers import record, scaled
from tests.support import glassloop_here
from tools.store import read_json
from tools.todos import DEFAULT as TODOS_DEFAULT
from tools.todos import _validate as validate_todos

ROOT = Path(__file__).resolve().parents[2]
KILL_TRIALS = scaled(100, 8)
ADDS_PER_PROCESS = scaled(500, 100)
SEED = int(os.environ.get("GLASSLOOP_RELIABILITY_SEED", "7"))


@dataclass
class Acked:
    todos: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    next_start: int = 0
    kills: int = 0  # each kill may leave one unacknowledged write per file


def writer(kind: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.reliability.crash_writer", kind, *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill_at_random(paths: dict[str, Path], acked: Acked, rng: random.Random) -> int:
    """One trial: start the writer, kill -9 it after a random delay; returns the acks seen."""
    proc = writer("mixed", str(paths["todos"]), str(paths["notes"]), str(paths["journal"]),
                  str(acked.next_start))
    assert proc.stdout.readline().startswith("ready"), proc.stderr.read()
    # every other kill lands after the first acknowledged write: on a loaded machine the writer
    # may otherwise never get that far, and the trials would test no write at all
    first = proc.stdout.readline() if acked.kills % 2 else ""
    time.sleep(rng.uniform(0.0, 0.6))
    os.kill(proc.pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err
    lines = [line.split(" ", 1) for line in (first + out).splitlines()]
    for kind, name in lines:
        {"todo": acked.todos, "note": acked.notes, "turn": acked.questions}[kind].append(name)
    acked.next_start += len([1 for kind, _ in lines if kind == "todo"]) + 1
    acked.kills += 1
    return len(lines)


def check_stores(paths: dict[str, Path], acked: Acked) -> None:
    todos = [t["title"] for t in read_json(paths["todos"], TODOS_DEFAULT, validate_todos)["todos"]]
    assert set(acked.todos) <= set(todos), "an acknowledged todo was lost"
    assert len(todos) - len(acked.todos) <= acked.kills and len(set(todos)) == len(todos)
    # a writer killed before its first note (a loaded machine is slow to start one) made no file
    notes = ([n["text"] for n in json.loads(paths["notes"].read_text(encoding="utf-8"))["notes"]]
             if paths["notes"].exists() else [])
    assert set(acked.notes) <= set(notes), "an acknowledged note was lost"
    assert len(notes) - len(acked.notes) <= acked.kills


def check_journal(path: Path, acked: Acked) -> History:
    meta, messages = load(path)
    history = History.from_json({"system_prompt": meta.get("system_prompt", ""), "messages": messages})
    assert check(history.messages) == [], "the journal replays to a broken history"
    users = [m["content"] for m in history.messages if m["role"] == "user"]
    assert set(acked.questions) <= set(users), "an acknowledged turn was lost"
    return history


def resume_with_cli(env: dict[str, str], server: FakeServer, session: str, acked: Acked, trial: int) -> None:
    server.script(text(f"resumed fine {trial}"))
    # in this process (the start of the program is not the subject here; the kills are)
    result = glassloop_here("--resume", session, "--base-url", server.base_url, env=env, stdin=f"r{trial}\n")
    assert result.returncode == 0, result.stderr
    assert f"resumed fine {trial}" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    sent = [m["content"] for m in server.chat_requests()[-1].body["messages"] if m["role"] == "user"]
    assert sent[-1] == f"r{trial}"  # older turns may be cut to fit the context window
    assert server.history_errors == []
    acked.questions.append(f"r{trial}")


@pytest.mark.timeout(1800)
def test_kill_9_at_random_moments(home, tmp_path, fake_server):
    sessions = Path(home["XDG_DATA_HOME"]) / "glassloop" / "sessions"
    sessions.mkdir(parents=True)
    paths = {"todos": tmp_path / "kill" / "todos.json", "notes": tmp_path / "kill" / "notes.json",
             "journal": sessions / "20250101-000000-crash.jsonl"}
    rng, acked, writes, started = random.Random(SEED), Acked(), 0, time.monotonic()
    for trial in range(KILL_TRIALS):
        writes += kill_at_random(paths, acked, rng)
        check_stores(paths, acked)
        check_journal(paths["journal"], acked)
        resume_with_cli(home, fake_server, paths["journal"].stem, acked, trial)
        check_journal(paths["journal"], acked)
    assert SECRET not in paths["journal"].read_text(encoding="utf-8")
    leftovers = [p.name for p in paths["todos"].parent.iterdir() if p.suffix == ".tmp"]
    seconds = time.monotonic() - started
    record("crash_safety", trials=KILL_TRIALS, seed=SEED, acknowledged_writes=writes,
           todos=len(acked.todos), notes=len(acked.notes), turns=len(acked.questions),
           resumes=KILL_TRIALS, lost=0, temp_files_left=len(leftovers),
           seconds=round(seconds, 1))
    assert writes > 0 and len(acked.questions) >= KILL_TRIALS  # every resume added its turn
    assert len(leftovers) <= 2 * acked.kills, leftovers  # at most the write in flight, per store and kill


def test_two_processes_add_todos_concurrently(tmp_path):
    path = tmp_path / "todos.json"
    started = time.monotonic()
    procs = [writer("adder", str(path), name, str(ADDS_PER_PROCESS)) for name in ("a", "b")]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    todos = read_json(path, TODOS_DEFAULT, validate_todos)["todos"]
    assert len(todos) == 2 * ADDS_PER_PROCESS
    assert {t["title"] for t in todos} == {f"{n}-{i}" for n in "ab" for i in range(ADDS_PER_PROCESS)}
    assert len({t["id"] for t in todos}) == 2 * ADDS_PER_PROCESS
    seconds = time.monotonic() - started
    record("crash_safety", concurrent_processes=2, adds_each=ADDS_PER_PROCESS, final_count=len(todos),
           seconds=round(seconds, 1))


def test_corrupt_todo_file_is_reported_and_left_untouched(fake_server, home):
    """A store cut off mid-write by something else: the tools and /todos name it, nobody rewrites it."""
    todos = Path(home["GLASSLOOP_TODOS_FILE"])
    corrupt = b'{"version": 1, "todos": [{"id": "todo-001", "title": "half a fi'
    todos.write_bytes(corrupt)
    fake_server.script(tool_calls(call("add_todo", {"title": "x"}), call("list_todos", {})),
                       text("could not"))
    env = {**home, "COLUMNS": "400"}  # keep the path on one line
    result = glassloop_here("--yes", "--base-url", fake_server.base_url, env=env, stdin="add x\n/todos\n")
    assert result.returncode == 0 and "Traceback" not in result.stdout + result.stderr
    sent = [json.loads(m["content"]) for m in fake_server.chat_requests()[-1].body["messages"]
            if m["role"] == "tool"]
    assert [r["error"]["type"] for r in sent] == ["corrupt_store", "corrupt_store"]
    assert all(str(todos) in r["error"]["message"] for r in sent)
    errors = [line for line in result.stdout.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(todos) in errors[0] and "not valid JSON" in errors[0]
    assert todos.read_bytes() == corrupt
