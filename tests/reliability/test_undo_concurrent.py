"""/undo next to other writers: a compare-and-swap that never destroys another process's data.

A REPL in a pipe makes a turn that writes a store and stays open; another
process (``glassloop ask --yes``, its command line run in the test's own
process, or a direct store writer in one of its own) writes the same file;
then ``/undo`` in the REPL. The other process's items survive and only the
turn's own are taken back; when both changed the same item, /undo
refuses with one line naming the file and leaves it byte for byte as it was.
The in-process tests drive ``tools.undo.revert`` on real files for the
cases a pipe cannot order (another write between two writes of one turn).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from tests.fakeserver import call, text, tool_calls
from tests.reliability.helpers import record, scaled, wait_for
from tests.support import SEED_TODOS, glassloop_here
from tools import build_tools, safe_io, store, undo
from tools.registry import Registry

WIDE = {"COLUMNS": "400"}  # keep a long path on one line
SEED = int(os.environ.get("GLASSLOOP_RELIABILITY_SEED", "7"))
WRITER = """
import json, sys
from pathlib import Path
from tools import build_tools
from tools.registry import Registry
reg = Registry(build_tools(todos_path=Path(sys.argv[1]), notes_path=Path(sys.argv[2]),
                           files_root=Path(sys.argv[1]).parent, weather="sample"))
print(json.dumps(reg.call(sys.argv[3], json.loads(sys.argv[4]))))
"""


class Repl:
    """``glassloop --yes`` with stdin and stdout pipes, kept open across other processes' writes."""

    def __init__(self, env: dict[str, str], base_url: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "repl.cli", "--yes", "--base-url", base_url],
                                     env={**env, **WIDE}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def finish(self, *lines: str) -> tuple[str, str]:
        out, err = self.proc.communicate("".join(f"{line}\n" for line in lines), timeout=30)
        assert self.proc.returncode == 0, err
        assert "Traceback" not in out + err
        return out, err


def other_writer(env: dict[str, str], notes: Path, tool: str, args: dict) -> dict:
    """One tool call from a separate Python process on the same store files."""
    done = subprocess.run([sys.executable, "-c", WRITER, env["GLASSLOOP_TODOS_FILE"], str(notes), tool,
                           json.dumps(args)], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def titles(path: Path) -> list[str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return [item["title"] for item in (data["todos"] if isinstance(data, dict) else data)]


def turn_written(fake_server, requests: int) -> bool:
    """The REPL's tool call ran and its follow-up request arrived (so its write is on disk)."""
    return len(fake_server.chat_requests()) >= requests


def test_undo_keeps_a_todo_another_ask_added(fake_server, home):
    todos = Path(home["GLASSLOOP_TODOS_FILE"])
    fake_server.script(tool_calls(call("add_todo", {"title": "ours"})), text("Added ours."),
                       tool_calls(call("add_todo", {"title": "theirs"})), text("Added theirs."))
    repl = Repl(home, fake_server.base_url)
    repl.send("add ours")
    assert wait_for(lambda: turn_written(fake_server, 2), timeout=20)
    started = time.monotonic()
    other = glassloop_here("ask", "add theirs", "--yes", "--base-url", fake_server.base_url, env=home)
    assert other.returncode == 0, other.stderr
    assert titles(todos)[-2:] == ["ours", "theirs"]
    out, _ = repl.finish("/undo", "/todos")
    assert titles(todos) == [t["title"] for t in SEED_TODOS] + ["theirs"]
    assert "another process changed it too" in out and str(todos) in out
    table = out.split("removed the last turn")[-1].split("todos ·", 1)[1]  # the /todos after it
    assert "theirs" in table and "ours" not in table
    seconds = time.monotonic() - started
    record("undo_concurrent", case="other ask added a todo", seconds=round(seconds, 2))


def test_undo_refuses_when_another_process_changed_the_same_todo(fake_server, home, tmp_path):
    todos = Path(home["GLASSLOOP_TODOS_FILE"])
    fake_server.script(tool_calls(call("update_todo", {"todo_id": "todo-002", "priority": "low"})),
                       text("Lowered."))
    repl = Repl(home, fake_server.base_url)
    repl.send("lower the report")
    assert wait_for(lambda: turn_written(fake_server, 2), timeout=20)
    result = other_writer(home, tmp_path / "notes.json", "update_todo",
                          {"todo_id": "todo-002", "title": "weekly report, changed elsewhere"})
    assert result["ok"] is True
    theirs = todos.read_bytes()
    out, _ = repl.finish("/undo", "/undo")
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 2 and all(str(todos) in e and "todo-002" in e for e in errors), out
    assert "removed the last turn" not in out  # the turn stays: nothing was undone
    assert todos.read_bytes() == theirs


def test_undo_of_a_store_the_turn_created_keeps_the_other_notes(fake_server, home, tmp_path):
    notes = tmp_path / "notes.json"
    env = {**home, "GLASSLOOP_NOTES_FILE": str(notes)}
    assert not notes.exists()
    fake_server.script(tool_calls(call("add_note", {"text": "ours"})), text("Noted."))
    repl = Repl(env, fake_server.base_url)
    repl.send("note ours")
    assert wait_for(lambda: turn_written(fake_server, 2), timeout=20)
    assert other_writer(env, notes, "add_note", {"text": "theirs"})["ok"] is True
    repl.finish("/undo")
    assert notes.exists(), "undo deleted a file holding another process's note"
    assert [n["text"] for n in json.loads(notes.read_text(encoding="utf-8"))["notes"]] == ["theirs"]


def test_undo_without_other_writers_still_restores_the_exact_bytes(fake_server, home, tmp_path):
    notes = tmp_path / "notes.json"
    env = {**home, "GLASSLOOP_NOTES_FILE": str(notes)}
    todos = Path(home["GLASSLOOP_TODOS_FILE"])
    before = todos.read_bytes()  # the legacy bare-list format: must come back as it was
    fake_server.script(tool_calls(call("add_todo", {"title": "x"}), call("add_note", {"text": "y"})),
                       tool_calls(call("delete_todo", {"todo_id": "todo-001"})), text("Done."))
    out, _ = Repl(env, fake_server.base_url).finish("do things", "/undo")
    assert todos.read_bytes() == before and not notes.exists()
    assert "another process" not in out


# ---- undo.revert on real files, in process ---------------------------------------------


def tools_on(tmp_path: Path) -> tuple[Registry, Path, list[store.StoreWrite]]:
    """The tools, reporting their writes to the list returned, as a session's registry does."""
    path = tmp_path / "todos.json"
    path.write_text(json.dumps(SEED_TODOS, ensure_ascii=False), encoding="utf-8")
    ours: list[store.StoreWrite] = []
    reg = Registry(build_tools(todos_path=path, notes_path=tmp_path / "notes.json", files_root=tmp_path,
                               weather="sample"), on_write=ours.append)
    return reg, path, ours


def as_other(reg: Registry, name: str, args: dict) -> None:
    """A write this session does not record (what another process does): the same tools
    called through a registry that reports to no one."""
    other = Registry([tool for name_ in reg.names() if (tool := reg.get(name_)) is not None])
    assert other.call(name, args)["ok"] is True


def test_revert_undoes_each_write_of_a_turn_around_another_write(tmp_path):
    reg, path, ours = tools_on(tmp_path)
    reg.call("add_todo", {"title": "ours"})  # todo-004
    as_other(reg, "add_todo", {"title": "theirs"})  # todo-005
    reg.call("complete_todo", {"todo_id": "todo-004"})
    reg.call("delete_todo", {"todo_id": "todo-002"})
    as_other(reg, "update_todo", {"todo_id": "todo-003", "priority": "low"})
    assert [r.merged for r in undo.revert(ours)] == [True]
    todos = reg.call("list_todos", {})["todos"]
    assert [t["title"] for t in todos] == ["买菜", "写周报", "回复邮件", "theirs"]  # deleted one back in place
    assert todos[2]["priority"] == "low"  # the other process's change stays


def test_revert_conflict_is_all_or_nothing_across_files(tmp_path):
    reg, path, ours = tools_on(tmp_path)
    notes = tmp_path / "notes.json"
    reg.call("add_note", {"text": "ours"})
    reg.call("delete_todo", {"todo_id": "todo-003"})
    as_other(reg, "add_todo", {"title": "takes the freed id"})  # todo-003 again
    todo_bytes, note_bytes = path.read_bytes(), notes.read_bytes()
    try:
        undo.revert(ours)
    except safe_io.StoreError as exc:
        assert exc.type == "undo_conflict" and str(path) in exc.message and "todo-003" in exc.message
    else:
        raise AssertionError("revert overwrote another process's todo-003")
    assert path.read_bytes() == todo_bytes and notes.read_bytes() == note_bytes  # neither file touched


def test_revert_of_an_item_added_and_deleted_in_one_turn_leaves_a_reused_id_alone(tmp_path):
    reg, path, ours = tools_on(tmp_path)
    reg.call("add_todo", {"title": "ours"})  # todo-004
    reg.call("delete_todo", {"todo_id": "todo-004"})
    as_other(reg, "add_todo", {"title": "theirs"})  # todo-004 again
    assert [r.merged for r in undo.revert(ours)] == [True]
    assert reg.call("get_todo", {"todo_id": "todo-004"})["todo"]["title"] == "theirs"


def test_revert_when_the_other_writer_already_removed_the_added_item(tmp_path):
    reg, path, ours = tools_on(tmp_path)
    reg.call("add_todo", {"title": "ours"})
    as_other(reg, "delete_todo", {"todo_id": "todo-004"})
    now = path.read_bytes()
    assert [r.merged for r in undo.revert(ours)] == [True]
    assert path.read_bytes() == now  # nothing left to undo, nothing rewritten


TURNS = scaled(400, 25)
SERVE = """
import json, sys
from pathlib import Path
from tools.registry import Registry
from tools.todos import make_todo_tools
reg = Registry(make_todo_tools(Path(sys.argv[1])))
for line in sys.stdin:
    name, args = json.loads(line)
    print(json.dumps(reg.call(name, args)), flush=True)
"""


class OtherProcess:
    """Another process writing the same todo file, one acknowledged call at a time."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", SERVE, str(path)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.items: dict[str, str] = {}  # its own todos still in the file: id -> title

    def call(self, name: str, args: dict) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps([name, args]) + "\n")
        self.proc.stdin.flush()
        result = json.loads(self.proc.stdout.readline())
        assert result["ok"], result
        return result

    def step(self, rng: random.Random, n: int) -> None:
        if self.items and rng.random() < 0.3:
            victim = rng.choice(sorted(self.items))
            self.call("delete_todo", {"todo_id": victim})
            del self.items[victim]
        elif self.items and rng.random() < 0.3:
            self.call("complete_todo", {"todo_id": rng.choice(sorted(self.items))})
        else:
            item = self.call("add_todo", {"title": f"theirs-{n}"})["todo"]
            self.items[item["id"]] = item["title"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0


def test_undo_interleaved_with_another_process_many_times(tmp_path):
    """Random interleavings of a turn's writes, another process's writes and the revert.

    The other process only touches its own todos, so every revert must succeed,
    keep all of them exactly and take back everything the turn did.
    """
    reg, path, _ = tools_on(tmp_path)
    detail = SEED_TODOS[2]["detail"]
    other, rng, how = OtherProcess(path), random.Random(SEED), {"exact": 0, "merged": 0}
    started, other_writes = time.monotonic(), 0
    try:
        for turn in range(TURNS):
            ours: list[store.StoreWrite] = []
            steps = [("add_todo", {"title": f"ours-{turn}"}), ("complete_todo", None),
                     ("update_todo", {"todo_id": "todo-003", "detail": f"turn {turn}"}), ("delete_todo", None)]
            added = None
            for name, args in [steps[0], *rng.sample(steps[1:], rng.randint(0, 3))]:
                while rng.random() < 0.4:  # the other process writes between our writes
                    other.step(rng, other_writes)
                    other_writes += 1
                if name in ("complete_todo", "delete_todo"):
                    if added is None:
                        continue
                    args = {"todo_id": added}
                reg.on_write = ours.append  # this turn's writes
                result = reg.call(name, args)
                assert result["ok"], result
                if name == "add_todo":
                    added = result["todo"]["id"]
                elif name == "delete_todo":
                    added = None
            while rng.random() < 0.5:
                other.step(rng, other_writes)
                other_writes += 1
            for reverted in undo.revert(ours):
                how["merged" if reverted.merged else "exact"] += 1
    finally:
        other.close()
    todos = reg.call("list_todos", {})["todos"]
    assert [(t["id"], t["title"]) for t in todos[3:]] == list(other.items.items())
    assert [t["title"] for t in todos[:3]] == [t["title"] for t in SEED_TODOS]
    assert reg.call("get_todo", {"todo_id": "todo-003"})["todo"]["detail"] == detail
    assert how["merged"] > 0 and how["exact"] > 0
    seconds = time.monotonic() - started
    record("undo_concurrent", case="random interleavings with another process", turns=TURNS,
           other_writes=other_writes, seconds=round(seconds, 2), **how)
    assert other_writes > 0
