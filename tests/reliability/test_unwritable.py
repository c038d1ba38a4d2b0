"""Places that cannot be written: ``/save`` and ``/trace --save`` to a missing folder, to
``/`` or to a name too long for the file system; a state dir, data dir, sessions dir or
HOME that is a regular file (the tests run as root, so a mode bit would not stop a write:
a file where a folder should be does); a sessions, traces, data or HOME folder that exists
but takes no new file (mode 0500, or for root a sysfs folder), found out at the first turn;
a folder that cannot be made at all (under ``/proc``) or a path through a file (``/dev/null/t.jsonl``).

Never a traceback: one clear line, and the session goes on (or starts without the part
that cannot be saved, saying so once).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakeserver import text
from tests.reliability.helpers import record
from tests.terminal import Repl

LONG_NAME = "n" * 300 + ".md"  # longer than NAME_MAX (255)


def run(args: list[str], env: dict[str, str], cwd: Path, lines: list[str] | None = None):
    started = time.monotonic()
    stdin = "".join(f"{line}\n" for line in lines) if lines is not None else None
    env = {**env, "COLUMNS": "400"}  # one message, one line: no wrapping of long paths
    result = subprocess.run([sys.executable, "-m", "repl.cli", *args], env=env, cwd=cwd, input=stdin,
                            capture_output=True, text=True, timeout=60)
    seconds = time.monotonic() - started
    record("unwritable", args=" ".join(args)[:60], seconds=round(seconds, 2))  # a hang ends at the timeout
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    return result


def a_file_at(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("a file where a folder should be\n", encoding="utf-8")
    return path


SYSFS = Path("/sys/kernel")  # creating a file here fails for root too (EACCES)


def read_only_folder(path: Path) -> Path:
    """``path`` made a folder that exists but takes no new file: mode 0500, or as root (whom a
    mode does not stop) a link to a sysfs folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        path.mkdir()
        path.chmod(0o500)
        return path
    if not SYSFS.is_dir():
        pytest.skip("root without sysfs: no folder here refuses a new file")
    path.symlink_to(SYSFS, target_is_directory=True)
    return path


def sessions(env: dict[str, str]) -> list[Path]:
    return sorted((Path(env["XDG_DATA_HOME"]) / "glassloop" / "sessions").glob("*.jsonl"))


def traces(env: dict[str, str]) -> list[Path]:
    return sorted((Path(env["XDG_STATE_HOME"]) / "glassloop" / "traces").glob("*.jsonl"))


# ---- /save and /trace --save ------------------------------------------------------


def test_save_and_trace_save_to_unwritable_paths(fake_server, home, tmp_path):
    fake_server.script(text("first answer"), text("still here"))
    bad = ["/no/such/folder/t.md", "/", LONG_NAME]
    lines = (["hello"] + [f"/save {p}" for p in bad] + [f"/trace --save {p}" for p in bad]
             + ["/save ok.md", "/trace --save ok.txt", "are you there?"])
    result = run(["--base-url", fake_server.base_url], home, tmp_path, lines)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    errors = [line for line in out.splitlines() if line.startswith("error: could not save")]
    assert len(errors) == 6, out
    assert "/no/such/folder/t.md" in errors[0] and "No such file or directory" in errors[0]
    assert "Is a directory" in errors[1] and "Is a directory" in errors[4]
    assert "File name too long" in errors[2] and "File name too long" in errors[5]
    assert "still here" in out
    assert "## You" in (tmp_path / "ok.md").read_text(encoding="utf-8")
    assert "stopped_by answer" in (tmp_path / "ok.txt").read_text(encoding="utf-8")
    assert not list(tmp_path.glob("n*"))


# ---- folders that cannot be created at start-up ---------------------------------------


def test_repl_state_dir_is_a_file(fake_server, home, tmp_path):
    a_file_at(Path(home["XDG_STATE_HOME"]))
    fake_server.script(text("answered"))
    result = run(["--base-url", fake_server.base_url], home, tmp_path, ["hello", "/trace"])
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stdout.splitlines() if "not be saved" in line]
    assert len(notes) == 1 and "trace" in notes[0] and str(home["XDG_STATE_HOME"]) in notes[0], result.stdout
    assert "answered" in result.stdout
    assert len(sessions(home)) == 1  # the journal still works


def test_repl_data_dir_or_sessions_dir_is_a_file(fake_server, home, tmp_path):
    for blocked in (Path(home["XDG_DATA_HOME"]) / "glassloop" / "sessions", Path(home["XDG_DATA_HOME"])):
        shutil.rmtree(home["XDG_DATA_HOME"], ignore_errors=True)
        a_file_at(blocked)
        fake_server.script(text("answered"))
        result = run(["--base-url", fake_server.base_url], home, tmp_path, ["hello", "/sessions", "/save x.md"])
        assert result.returncode == 0, result.stderr
        notes = [line for line in result.stdout.splitlines() if "not be saved" in line]
        assert len(notes) == 1 and "session" in notes[0], result.stdout
        assert "answered" in result.stdout and "saved the transcript" in result.stdout
        assert "--resume" not in result.stdout.splitlines()[-1]  # no journal: nothing to resume
        assert len(traces(home)) >= 1  # the trace still works


def test_repl_home_is_a_file(fake_server, home, tmp_path):
    env = {k: v for k, v in home.items() if not k.startswith("XDG_")}
    env["HOME"] = str(a_file_at(tmp_path / "home"))
    fake_server.script(text("answered"))
    result = run(["--base-url", fake_server.base_url], env, tmp_path, ["hello"])
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stdout.splitlines() if "not be saved" in line]
    assert len(notes) == 2, result.stdout
    assert "answered" in result.stdout


def test_pty_data_dir_is_a_file(fake_server, home):
    a_file_at(Path(home["XDG_DATA_HOME"]))  # also where the input history lives
    fake_server.script(text("answered in a terminal"))
    repl = Repl(home, fake_server.base_url)
    try:
        repl.say("hello")
        repl.expect("answered in a terminal")
        repl.ready()
        assert "not be saved" in repl.screen() and "Traceback" not in repl.screen()
    finally:
        repl.close()
    repl.child.close()
    assert repl.child.exitstatus == 0


# ---- folders that exist but take no file: found out at the first turn ---------------------


@pytest.mark.parametrize(("blocked", "saying"), [
    ("data/glassloop/sessions", ["session"]),
    ("state/glassloop/traces", ["trace"]),
    ("data/glassloop", ["session"]),  # the input history lives there too
    ("home", ["trace", "session"]),
])
def test_pty_folder_that_takes_no_file(fake_server, home, tmp_path, blocked, saying):
    env = home
    if blocked == "home":
        env = {k: v for k, v in home.items() if not k.startswith("XDG_")}
        env["HOME"] = str(tmp_path / "home")
    read_only_folder(tmp_path / blocked)
    fake_server.script(text("first answer"), text("second answer"))
    repl = Repl(env, fake_server.base_url, cols=400)  # one line each: no wrapping of paths
    try:
        repl.say("hello there")
        repl.expect("first answer")
        repl.ready()
        repl.say("/trace")
        repl.ready()
        repl.say("still there?")
        repl.expect("second answer")
        repl.ready()
    finally:
        repl.close()
    repl.child.close()
    screen = repl.screen()
    for crash in ("Traceback", "Exception", "PermissionError", "Press ENTER"):  # prompt_toolkit's own report too
        assert crash not in screen, screen
    notes = [line for line in screen.splitlines() if "will not be saved" in line]
    assert len(notes) == len(saying), screen
    for what in saying:
        assert len([note for note in notes if what in note]) == 1, notes
    assert "hello there" in str(fake_server.chat_requests()[0].body["messages"])  # the message was not lost
    assert repl.child.exitstatus == 0
    if "session" in saying:  # no journal: nothing to resume
        assert screen.strip().splitlines()[-1] == "nothing saved", screen


def test_ask_traces_folder_that_takes_no_file(fake_server, home, tmp_path):
    read_only_folder(Path(home["XDG_STATE_HOME"]) / "glassloop" / "traces")
    fake_server.script(text("answered anyway"), text("answered in JSON"))
    result = run(["ask", "hello", "--base-url", fake_server.base_url], home, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "answered anyway"
    notes = [line for line in result.stderr.splitlines() if "not be saved" in line]
    assert len(notes) == 1 and "trace" in notes[0], result.stderr
    result = run(["ask", "hello", "--json", "--base-url", fake_server.base_url], home, tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["answer"] == "answered in JSON"
    assert len([line for line in result.stderr.splitlines() if "not be saved" in line]) == 1, result.stderr


def test_ask_state_dir_is_a_file_and_an_unwritable_trace_file(fake_server, home, tmp_path):
    a_file_at(Path(home["XDG_STATE_HOME"]))
    fake_server.script(text("answered anyway"))
    result = run(["ask", "hello", "--base-url", fake_server.base_url], home, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "answered anyway"
    assert [line for line in result.stderr.splitlines() if "not be saved" in line], result.stderr
    # a trace file the user asked for and cannot get: stop before asking, with one line
    blocked = a_file_at(tmp_path / "plain") / "t.jsonl"
    result = run(["ask", "hello", "--json", "--trace-file", str(blocked), "--base-url", fake_server.base_url],
                 home, tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith(f"error: cannot write the trace file {blocked}: ")
    assert len(fake_server.chat_requests()) == 1


PROC_NONE = Path("/proc/glassloop-none")  # mkdir here fails "not found" though /proc exists


def test_private_folder_that_cannot_be_made(tmp_path):
    from repl.tracing.trace import private_folder

    plain = a_file_at(tmp_path / "plain")
    cases = [(PROC_NONE / "deeper", str(PROC_NONE), "No such file or directory"),
             (Path("/dev/null"), None, "/dev/null is not a folder"),
             (plain, None, f"{plain} is not a folder"),
             (plain / "sub" / "deeper", None, f"{plain} is not a folder")]
    for folder, filename, says in cases:
        if folder.is_relative_to("/proc") and not Path("/proc").is_dir():
            continue
        with pytest.raises(OSError) as raised:  # bounded: no RecursionError
            private_folder(folder)
        assert (raised.value.filename, raised.value.strerror) == (filename, says), folder
    private_folder(tmp_path / "made" / "here")
    assert (tmp_path / "made" / "here").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("where", ["proc", "dev_null"])
def test_ask_trace_file_whose_folder_cannot_be_made(fake_server, home, tmp_path, where):
    if where == "proc" and not Path("/proc").is_dir():
        pytest.skip("no /proc here")
    trace_file, says = {"proc": (PROC_NONE / "t.jsonl", f"cannot make the folder {PROC_NONE} (No such file or directory)"),
                        "dev_null": (Path("/dev/null/t.jsonl"), "/dev/null is not a folder")}[where]
    result = run(["ask", "hello", "--trace-file", str(trace_file), "--base-url", fake_server.base_url], home, tmp_path)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr == f"error: cannot write the trace file {trace_file}: {says}\n"
    assert fake_server.chat_requests() == []  # stopped before asking, as for any trace file it cannot get


def test_ask_state_dir_that_cannot_be_made(fake_server, home, tmp_path):
    if not Path("/proc").is_dir():
        pytest.skip("no /proc here")
    fake_server.script(text("answered anyway"))
    result = run(["ask", "hello", "--base-url", fake_server.base_url], {**home, "XDG_STATE_HOME": str(PROC_NONE)},
                 tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "answered anyway"
    notes = [line for line in result.stderr.splitlines() if "not be saved" in line]
    assert notes == [f"the trace will not be saved: cannot write {PROC_NONE}/glassloop/traces "
                     "(No such file or directory)"], result.stderr


def test_mcp_server_starts_when_its_log_folder_cannot_be_written(tmp_path):
    from tests.support import Stack, stdio_server

    stack = Stack([stdio_server()], log_dir=a_file_at(tmp_path / "state") / "mcp").start()
    try:
        assert stack.manager.servers["t"].status == "ready", stack.notices
        assert any(name.startswith("t__") for name in stack.registry.names())
    finally:
        stack.manager.close()
