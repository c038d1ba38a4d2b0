"""Store and journal files that are not what they seem: FIFOs, devices, huge or read-only files.

A todo or note store that is a FIFO (an ``open`` for reading would wait for a
writer forever) or a symlink to ``/dev/zero`` (a read never ends), a store
over the size limit, and a session journal that is one of these on
``--resume``: each gives one clear line (or a structured tool error naming
the file), never a wait, and the file is left as it was. A read-only store
(mode 0444) is never replaced (root could, ``os.replace`` ignores the mode);
a writable one keeps its permission bits across writes.

The children run with an address-space limit, so the old code's endless read
of ``/dev/zero`` ends in a MemoryError instead of eating the machine's memory.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakeserver import call, text, tool_calls
from tests.reliability.helpers import record
from tests.support import SEED_TODOS
from tools import build_tools, safe_io, store, undo
from tools.registry import Registry

WIDE = {"COLUMNS": "400"}  # keep a long path on one line
MEMORY_LIMIT = 2 * 1024**3
OVER_LIMIT = 65 * 1024 * 1024  # the documented store limit is 64 MB
timings: dict[str, float] = {}  # for the report; a run that waits on the file ends at its timeout


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run(*args: str, env: dict[str, str], stdin: str = "") -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "repl.cli", *args], env={**env, **WIDE}, input=stdin,
                            capture_output=True, text=True, timeout=30, preexec_fn=_limit_memory)
    return result, time.monotonic() - started


def make_odd(path: Path, kind: str) -> None:
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


def unchanged(path: Path, kind: str) -> bool:
    if kind == "fifo":
        return stat.S_ISFIFO(path.lstat().st_mode)
    return path.is_symlink() and os.readlink(path) == "/dev/zero"


def tool_errors(fake_server) -> list[dict | None]:
    """The error of each tool result the model got back (None for a success)."""
    sent = fake_server.chat_requests()[-1].body["messages"]
    return [json.loads(m["content"]).get("error") for m in sent if m["role"] == "tool"]


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize("kind", ["fifo", "devzero"])
def test_todo_store_that_is_no_regular_file(fake_server, home, kind):
    path = Path(home["GLASSLOOP_TODOS_FILE"])
    make_odd(path, kind)
    fake_server.script(tool_calls(call("list_todos", {}), call("add_todo", {"title": "x"})), text("sorry"))
    result, seconds = run("--yes", "--base-url", fake_server.base_url, env=home, stdin="what is left?\n/todos\n")
    assert result.returncode == 0 and "Traceback" not in result.stdout + result.stderr
    errors = error_lines(result.stdout)
    assert len(errors) == 1 and str(path) in errors[0] and "not a regular file" in errors[0], result.stdout
    assert [e["type"] for e in tool_errors(fake_server)] == ["unreadable_store"] * 2
    assert all(str(path) in e["message"] for e in tool_errors(fake_server))
    assert unchanged(path, kind)
    timings[f"todos {kind} (chat turn + /todos)"] = round(seconds, 2)


@pytest.mark.parametrize("kind", ["fifo", "devzero"])
def test_notes_store_that_is_no_regular_file_in_ask(fake_server, home, tmp_path, kind):
    notes = tmp_path / "notes.json"
    make_odd(notes, kind)
    fake_server.script(tool_calls(call("search_notes", {"query": "passport"}), call("add_note", {"text": "x"})),
                       text("sorry"))
    result, seconds = run("ask", "note it", "--yes", "--base-url", fake_server.base_url,
                          env={**home, "GLASSLOOP_NOTES_FILE": str(notes)})
    assert result.returncode == 0 and "sorry" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    errors = tool_errors(fake_server)
    assert [e["type"] for e in errors] == ["unreadable_store"] * 2
    assert all(str(notes) in e["message"] and "not a regular file" in e["message"] for e in errors)
    assert unchanged(notes, kind)
    timings[f"notes {kind} (ask)"] = round(seconds, 2)


@pytest.mark.parametrize("kind", ["fifo", "devzero"])
def test_resume_of_a_journal_that_is_no_regular_file(fake_server, home, kind):
    folder = Path(home["XDG_DATA_HOME"]) / "glassloop" / "sessions"
    folder.mkdir(parents=True)
    journal = folder / "20250101-000000-abcd.jsonl"
    make_odd(journal, kind)
    result, seconds = run("--resume", "20250101-000000-abcd", "--base-url", fake_server.base_url, env=home)
    assert result.returncode == 1 and "Traceback" not in result.stdout + result.stderr
    errors = error_lines(result.stdout + result.stderr)
    assert len(errors) == 1 and str(journal) in errors[0] and "not a regular file" in errors[0], result
    assert unchanged(journal, kind) and fake_server.requests == []
    timings[f"journal {kind} (--resume)"] = round(seconds, 2)


def test_todo_store_over_the_size_limit(fake_server, home):
    path = Path(home["GLASSLOOP_TODOS_FILE"])
    path.unlink()
    with open(path, "wb") as sparse:  # 65 MB of holes: costs no disk
        sparse.truncate(OVER_LIMIT)
    result, seconds = run("--base-url", fake_server.base_url, env=home, stdin="/todos\n")
    errors = error_lines(result.stdout)
    assert len(errors) == 1 and str(path) in errors[0] and "64 MB limit" in errors[0], result.stdout
    assert path.stat().st_size == OVER_LIMIT
    timings["todos over 64 MB (/todos)"] = round(seconds, 2)


def test_read_only_todo_store_is_not_replaced(fake_server, home):
    path = Path(home["GLASSLOOP_TODOS_FILE"])
    path.chmod(0o444)
    before = path.read_bytes()
    fake_server.script(tool_calls(call("add_todo", {"title": "x"})), text("could not"))
    result, _ = run("ask", "add x", "--yes", "--base-url", fake_server.base_url, env=home)
    assert result.returncode == 0 and "Traceback" not in result.stdout + result.stderr
    [error] = tool_errors(fake_server)
    assert error is not None, "the read-only file was replaced"
    assert error["type"] == "read_only_store" and str(path) in error["message"] and "read-only" in error["message"]
    assert path.read_bytes() == before and stat.S_IMODE(path.stat().st_mode) == 0o444


def registry_on(tmp_path: Path) -> tuple[Registry, Path]:
    path = tmp_path / "todos.json"
    path.write_text(json.dumps(SEED_TODOS, ensure_ascii=False), encoding="utf-8")
    return Registry(build_tools(todos_path=path, notes_path=tmp_path / "notes.json", files_root=tmp_path,
                                weather="sample")), path


def test_writes_keep_the_file_mode(tmp_path):
    reg, path = registry_on(tmp_path)
    path.chmod(0o640)
    assert reg.call("add_todo", {"title": "x"})["ok"] is True
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_undo_does_not_replace_a_store_made_read_only_since(tmp_path):
    reg, path = registry_on(tmp_path)
    writes: list[store.StoreWrite] = []
    with store.reporting(writes.append):
        assert reg.call("add_todo", {"title": "x"})["ok"] is True
    path.chmod(0o444)
    before = path.read_bytes()
    with pytest.raises(safe_io.StoreError) as caught:
        undo.revert(writes)
    assert caught.value.type == "read_only_store" and str(path) in caught.value.message
    assert path.read_bytes() == before


# ---- a write that fails part-way: the disk fills up --------------------------------------

FULL_DISK = """
import json, resource, sys
from pathlib import Path
from tools import build_tools, safe_io
from tools.registry import Registry

target, limit, what = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
registry = Registry(build_tools(todos_path=target, notes_path=target.parent / "notes.json",
                                files_root=target.parent, weather="sample"))
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # no file grows past `limit` bytes: EFBIG
if what == "add_todo":
    print(json.dumps(registry.call("add_todo", {"title": "y" * 4 * limit})))
else:
    try:
        safe_io.atomic_write(target, lambda out: out.write(b"x" * 4 * limit))
    except OSError as exc:
        print(json.dumps({"errno": exc.errno}))
"""


def write_past_a_full_disk(target: Path, what: str) -> dict:
    """``what`` done to ``target`` in a child whose writes stop after 4 KB, as on a full disk: the
    kernel writes the first bytes and refuses the rest, whatever the code does with the file."""
    result = subprocess.run([sys.executable, "-c", FULL_DISK, str(target), "4096", what], capture_output=True,
                            text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return json.loads(result.stdout)


def test_atomic_write_that_fails_part_way_leaves_the_old_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "data.json"
    path.write_bytes(b'{"old": true}\n')
    assert write_past_a_full_disk(path, "atomic_write") == {"errno": errno.EFBIG}
    assert path.read_bytes() == b'{"old": true}\n'
    assert os.listdir(tmp_path) == ["data.json"]


def test_todo_store_write_that_fails_part_way_leaves_the_old_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "todos.json"
    path.write_text(json.dumps(SEED_TODOS, ensure_ascii=False), encoding="utf-8")
    before = path.read_bytes()
    result = write_past_a_full_disk(path, "add_todo")
    assert result["ok"] is False and "File too large" in result["error"]["message"], result
    assert path.read_bytes() == before
    assert set(os.listdir(tmp_path)) <= {"todos.json", "todos.json.lock"}
    assert Registry(build_tools(todos_path=path, notes_path=tmp_path / "notes.json", files_root=tmp_path,
                                weather="sample")).call("add_todo", {"title": "x"})["ok"] is True


def test_record_store_file_figures() -> None:
    """What ran before it in this worker: how long each whole run took, for the report."""
    record("store_files", seconds=timings)


def test_a_folder_is_made_whole_or_not_at_all_and_another_writers_stays(tmp_path: Path) -> None:
    from tools.safe_io import atomic_folder, remove_folder

    def half(folder: Path) -> None:
        (folder / "a").write_text("1")
        raise OSError(errno.ENOSPC, "No space left on device")

    target = tmp_path / "copy"
    with pytest.raises(OSError):
        atomic_folder(target, half)
    assert list(tmp_path.iterdir()) == []  # nothing half made, no temporary folder left

    assert atomic_folder(target, lambda folder: (folder / "a").write_text("theirs"))
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    assert not atomic_folder(target, lambda folder: (folder / "a").write_text("ours"))
    assert (target / "a").read_text() == "theirs" and [p.name for p in tmp_path.iterdir()] == ["copy"]

    remove_folder(target)
    remove_folder(target)  # gone already: nothing
    assert list(tmp_path.iterdir()) == []
