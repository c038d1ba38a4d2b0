"""Text that is not valid Unicode at every door: lone UTF-16 surrogates from the model
(an emoji split across two stream chunks, half of one alone), in tool arguments, in a file
name that is not UTF-8, in the ``ask`` argument, on standard input, typed at the prompt.

Nothing may end in a traceback: a split pair shows as the character it stands for, a
lone half or an undecodable byte as U+FFFD, the trace and journal stay valid UTF-8 JSON
lines, and the session goes on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.fakeserver import call, text, tool_calls
from tests.reliability.helpers import record
from tests.terminal import Repl

EMOJI = "\U0001f600"  # 😀
SPLIT = "\ud83d\ude00"  # the same emoji as two UTF-16 halves: chunk_size=1 sends them in two chunks
LONE = "\ud83d"
BAD_NAME = b"caf\xe9.txt"  # Latin-1, not UTF-8


def run(args: list[str | bytes], env: dict[str, str], cwd: Path, stdin: bytes = b""):
    """The real program with byte-exact arguments and input; output decoded strictly."""
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "repl.cli", *args], env=env, cwd=cwd, input=stdin,
                            capture_output=True, timeout=60)
    seconds = time.monotonic() - started
    record("unicode", args=len(args), seconds=round(seconds, 2))  # a hang ends at the run's timeout
    return result.returncode, result.stdout.decode("utf-8"), result.stderr.decode("utf-8")


def jsonl_valid(path: Path) -> list[dict]:
    """Every line of ``path`` is strict UTF-8 and JSON."""
    lines = path.read_bytes().decode("utf-8").splitlines()
    assert lines, path
    return [json.loads(line) for line in lines]


def todo_titles(env: dict[str, str]) -> list[str]:
    data = json.loads(Path(env["GLASSLOOP_TODOS_FILE"]).read_text(encoding="utf-8"))
    return [t["title"] for t in (data["todos"] if isinstance(data, dict) else data)]


def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "plain.txt").write_text("hello\n", encoding="utf-8")
    with open(os.path.join(os.fsencode(folder), BAD_NAME), "wb") as file:
        file.write(b"latin-1 name\n")
    return folder


def script_every_case(fake_server) -> None:
    """One step listing files and adding a todo whose title is a split emoji, then an answer
    with a split emoji and a lone half."""
    fake_server.script(
        tool_calls(call("list_files", {}), call("add_todo", '{"title": "party ' + SPLIT + '"}'), chunk_size=1),
        text(f"Done {SPLIT} and a lone {LONE} half.", chunk_size=1),
    )


def sent_tool_results(fake_server) -> str:
    return " ".join(m["content"] for m in fake_server.chat_requests()[-1].body["messages"] if m["role"] == "tool")


def test_ask_model_text_tool_arguments_and_file_names(fake_server, home, tmp_path):
    ws = workspace(tmp_path)
    script_every_case(fake_server)
    trace_file = tmp_path / "trace.jsonl"
    code, out, err = run(["ask", "what is here?", "--yes", "--base-url", fake_server.base_url,
                          "--trace-file", str(trace_file)], home, ws)
    assert code == 0, err
    assert "Traceback" not in out + err
    assert out.strip() == f"Done {EMOJI} and a lone \ufffd half."
    assert f"party {EMOJI}" in todo_titles(home)  # the joined pair reached the tool
    assert "caf\ufffd.txt" in sent_tool_results(fake_server)  # the model sees a valid name
    assert "step 1 call add_todo" in err
    assert [r["type"] for r in jsonl_valid(trace_file)][-1] == "turn_finished"
    # --json: one valid object, the same answer
    script_every_case(fake_server)
    code, out, err = run(["ask", "again", "--json", "--yes", "--base-url", fake_server.base_url], home, ws)
    assert code == 0 and "Traceback" not in err
    assert json.loads(out)["answer"] == f"Done {EMOJI} and a lone \ufffd half."


def test_ask_argument_and_stdin_that_are_not_utf8(fake_server, home, tmp_path):
    fake_server.script(text("answered one"), text("answered two"))
    code, out, err = run(["ask", b"caf\xe9 ou th\xe9?", "--base-url", fake_server.base_url], home, tmp_path)
    assert code == 0 and "Traceback" not in err, err
    assert out.strip() == "answered one"
    code, out, err = run(["ask", "--base-url", fake_server.base_url], home, tmp_path,
                         stdin=b"th\xe9 \xff\xfe from a pipe\n")
    assert code == 0 and "Traceback" not in err, err
    assert out.strip() == "answered two"
    asked = [r.body["messages"][-1]["content"] for r in fake_server.chat_requests()]
    assert asked == ["caf\ufffd ou th\ufffd?", "th\ufffd \ufffd\ufffd from a pipe"]


def test_repl_pipe_every_case_and_the_session_goes_on(fake_server, home, tmp_path):
    ws = workspace(tmp_path)
    fake_server.script(text("first"))
    script_every_case(fake_server)
    fake_server.script(text("still here"))
    lines = [b"caf\xe9 typed badly", b"what is here?", b"/trace", b"/save t.md", b"/save t.json", b"last one"]
    code, out, err = run(["--yes", "--base-url", fake_server.base_url], home, ws, stdin=b"\n".join(lines) + b"\n")
    assert code == 0, err
    assert "Traceback" not in out + err
    assert f"Done {EMOJI} and a lone \ufffd half." in out
    assert "still here" in out
    assert f"party {EMOJI}" in todo_titles(home)
    users = [m["content"] for m in fake_server.chat_requests()[-1].body["messages"] if m["role"] == "user"]
    assert users == ["caf\ufffd typed badly", "what is here?", "last one"]
    assert "caf\ufffd.txt" in (ws / "t.md").read_text(encoding="utf-8")
    json.loads((ws / "t.json").read_text(encoding="utf-8"))
    journal = next((Path(home["XDG_DATA_HOME"]) / "glassloop" / "sessions").glob("*.jsonl"))
    messages = [r["message"] for r in jsonl_valid(journal) if r.get("kind") == "message"]
    assert any(m.get("content") == f"Done {EMOJI} and a lone \ufffd half." for m in messages)
    trace = next((Path(home["XDG_STATE_HOME"]) / "glassloop" / "traces").glob("*.jsonl"))
    assert sum(r["type"] == "turn_finished" for r in jsonl_valid(trace)) == 3


def test_pty_typed_bytes_and_a_split_emoji(fake_server, home, tmp_path):
    fake_server.script(text(f"Here {SPLIT} it is", chunk_size=1), text("second answer"))
    repl = Repl(home, fake_server.base_url)
    try:
        os.write(repl.child.child_fd, b"caf\xe9 typed\r")
        repl.expect("it is")
        repl.ready()
        repl.say("again")
        repl.expect("second answer")
        repl.ready()
        screen = repl.screen()
        assert f"Here {EMOJI} it is" in screen
        assert "Traceback" not in screen
        assert fake_server.chat_requests()[0].body["messages"][-1]["content"] == "caf\ufffd typed"
    finally:
        repl.close()
    repl.child.close()
    assert repl.child.exitstatus == 0
