"""The real ``glassloop`` command line against the scripted server: run in this process
(``glassloop_here``), in a subprocess where the process is the subject (how it exits, what
``main`` makes of a usage error)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakeserver import call, fault_status, text, tool_calls
from tests.support import ROOT, SECRET, glassloop, glassloop_here


def test_ask_json_runs_list_get_answer(fake_server, home, tmp_path):
    fake_server.script(tool_calls(call("list_todos", {"status": "todo"})),
                       tool_calls(call("get_todo", {"todo_id": "todo-002"})),
                       text("写周报优先级最高。"))
    trace_file = tmp_path / "t.jsonl"
    result = glassloop_here("ask", "今天还有哪些没完成？把优先级最高的一项展开说明。", "--json",
                            "--base-url", fake_server.base_url, "--trace-file", str(trace_file), env=home)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["answer"] == "写周报优先级最高。"
    assert payload["stopped_by"] == "answer" and payload["steps"] == 3
    assert payload["usage"]["input_tokens"] > 0
    calls = [e["name"] for e in payload["trace"] if e["type"] == "tool_call_started"]
    assert calls == ["list_todos", "get_todo"]
    assert "step 1 call list_todos" in result.stderr
    records = [json.loads(line) for line in trace_file.read_text(encoding="utf-8").splitlines()]
    assert [r["name"] for r in records if r["type"] == "tool_call_finished"] == calls
    assert all({"run", "session", "turn", "time"} <= r.keys() for r in records)
    # the key went over HTTP as a bearer token, but no file or output holds it
    assert fake_server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(encoding="utf-8", errors="replace"), path
    assert SECRET not in result.stdout + result.stderr
    shown = glassloop_here("trace", str(trace_file), "--events", env=home)
    assert "call list_todos" in shown.stdout and "stopped_by answer" in shown.stdout
    drawn = glassloop_here("trace", str(trace_file), env=home)  # the default: every turn's timeline
    assert "list_todos" in drawn.stdout and "get_todo" in drawn.stdout and "stopped_by answer" in drawn.stdout


def test_ask_denies_side_effects_without_yes(fake_server, home):
    fake_server.script(tool_calls(call("add_todo", {"title": "x"})), text("I could not add it."))
    before = Path(home["GLASSLOOP_TODOS_FILE"]).read_bytes()
    result = glassloop_here("ask", "add x", "--base-url", fake_server.base_url, env=home)
    assert result.returncode == 0
    assert "denied add_todo" in result.stderr and "--yes" in result.stderr
    assert Path(home["GLASSLOOP_TODOS_FILE"]).read_bytes() == before
    fake_server.script(tool_calls(call("add_todo", {"title": "x"})), text("Added."))
    result = glassloop_here("ask", "add x", "--yes", "--base-url", fake_server.base_url, env=home)
    assert result.returncode == 0 and "Added." in result.stdout
    assert '"x"' in Path(home["GLASSLOOP_TODOS_FILE"]).read_text(encoding="utf-8")


def test_ask_reads_stdin(fake_server, home):
    fake_server.script(text("piped ok"))
    result = glassloop_here("ask", "--base-url", fake_server.base_url, env=home, stdin="hello from a pipe\n")
    assert result.stdout.strip() == "piped ok"
    assert fake_server.chat_requests()[0].body["messages"][-1]["content"] == "hello from a pipe"


@pytest.mark.parametrize("status, words", [(401, "OPENAI_API_KEY"), (404, "not found"), (500, "server")])
def test_provider_failures_are_one_line(fake_server, home, status, words):
    fake_server.script(*[fault_status(status)] * 4)
    result = glassloop_here("ask", "hi", "--base-url", fake_server.base_url, env=home)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and words.lower() in error_lines[0].lower()
    assert SECRET not in result.stderr


def test_unreachable_server(home):
    result = glassloop_here("ask", "hi", "--base-url", "http://127.0.0.1:9/v1", env=home)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "127.0.0.1:9" in result.stderr


@pytest.mark.parametrize("content, words", [
    ("provider = \n", "line"),
    ("nonsense = 1\n", "nonsense"),
    ("[guards]\nmax_steps = \"many\"\n", "guards.max_steps"),
    ("approval = \"sometimes\"\n", "approval"),
])
def test_bad_config_exits_2_with_one_line(home, tmp_path, content, words):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "glassloop.toml").write_text(content, encoding="utf-8")
    result = glassloop_here("config", env=home, cwd=project)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "glassloop.toml" in lines[0] and words in lines[0]


def test_config_shows_sources_and_redacts_keys(home, tmp_path):
    result = glassloop_here("config", "--model", "gpt-test", env=home, cwd=tmp_path)
    assert result.returncode == 0
    assert SECRET not in result.stdout
    model_line = next(line for line in result.stdout.splitlines() if line.startswith("providers.openai.model"))
    assert "gpt-test" in model_line and "--model" in model_line


def test_version_and_help(home):
    assert glassloop_here("--version", env=home).stdout.startswith("glassloop ")
    help_text = glassloop_here("ask", "--help", env=home).stdout
    assert "--json" in help_text and "Exit codes" in help_text


def test_ask_writes_to_the_streams_of_its_run_not_those_at_import(fake_server, home):
    """Twice in one process: each run's answer reaches that run's stdout (the streams were
    default arguments bound when the module was imported)."""
    for answer in ("first answer", "second answer"):
        fake_server.script(text(answer))
        result = glassloop_here("ask", "hi", "--base-url", fake_server.base_url, env=home)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == answer


EXIT_PROBE = """
import atexit, os, sys, threading

class Teardown:  # freed by the interpreter's teardown, which `ask` skips
    def __del__(self, write=os.write):
        write(2, b"teardown ran\\n")

kept = Teardown()
atexit.register(lambda: print("atexit ran", file=sys.stderr))

def after_main(path=sys.argv[1]):  # not a daemon: an exit waits for it
    threading.main_thread().join()
    with open(path, "w") as out:
        out.write("written after main")

threading.Thread(target=after_main).start()
sys.argv = ["glassloop", *sys.argv[2:]]
from repl.cli import main
main()
"""


def test_ask_leaves_without_the_teardown_but_after_what_an_exit_must_do(fake_server, home, tmp_path):
    """The interpreter's teardown (freeing every module, ~0.1 s once the SDK is loaded) is skipped;
    threads that are not daemons are still waited for, atexit handlers run, the answer and the
    trace are complete, and the exit code is the answer's."""
    fake_server.script(tool_calls(call("list_todos", {})), text("two open"))
    trace_file, late = tmp_path / "t.jsonl", tmp_path / "late.txt"
    result = subprocess.run([sys.executable, "-c", EXIT_PROBE, str(late), "ask", "what is open?",
                             "--base-url", fake_server.base_url, "--trace-file", str(trace_file)],
                            env=home, cwd=ROOT, capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == "two open\n"
    assert "atexit ran" in result.stderr and "teardown ran" not in result.stderr
    assert late.read_text(encoding="utf-8") == "written after main"
    records = [json.loads(line) for line in trace_file.read_text(encoding="utf-8").splitlines()]
    assert records[-1]["type"] == "turn_finished"
    failed = subprocess.run([sys.executable, "-c", EXIT_PROBE, str(late), "ask", "hi", "--base-url",
                             "http://127.0.0.1:9/v1"], env=home, cwd=ROOT, capture_output=True, text=True,
                            timeout=60, stdin=subprocess.DEVNULL)
    assert failed.returncode == 1 and "teardown ran" not in failed.stderr


UNFLUSHED_TOOL = '''from glassloop_tools import tool

log = open({path!r}, "a", encoding="utf-8")  # kept open, never flushed: the exit closes it


@tool
def note_it() -> str:
    """Write a line to the log."""
    log.write("called\\n")
    return "noted"
'''


def test_ask_with_user_tools_exits_as_python_does_so_their_open_files_are_flushed(fake_server, home, tmp_path):
    """The quick exit skips the teardown that closes a user tool's module-level file: with user
    tools loaded, ``ask`` leaves the ordinary way and nothing they buffered is lost."""
    log = tmp_path / "tool.log"
    tools_dir = Path(home["XDG_CONFIG_HOME"]) / "glassloop" / "tools"
    tools_dir.mkdir(parents=True, exist_ok=True)
    (tools_dir / "note.py").write_text(UNFLUSHED_TOOL.format(path=str(log)), encoding="utf-8")
    fake_server.script(tool_calls(call("note_it", {})), text("noted it"))
    result = glassloop("ask", "note it", "--base-url", fake_server.base_url, env=home)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "noted it"
    assert log.read_text(encoding="utf-8") == "called\n"


ELSEWHERE = "http://127.0.0.1:9/v1"  # the default endpoint here: a message must never go to it unasked


@pytest.mark.parametrize("door", [[], ["ask"]])
def test_flags_after_the_question_choose_the_endpoint_and_stay_out_of_the_message(fake_server, home, door):
    """``glassloop "question" --base-url URL --model m``: the flags are parsed wherever they stand."""
    fake_server.script(text("from the chosen server"))
    env = {**home, "OPENAI_BASE_URL": ELSEWHERE}
    result = glassloop_here(*door, "what is open?", "--base-url", fake_server.base_url, "--model", "chosen-model",
                            env=env, stdin="")
    assert result.returncode == 0, result.stderr
    assert "from the chosen server" in result.stdout
    [sent] = fake_server.chat_requests()
    assert sent.body["model"] == "chosen-model"
    assert [m["content"] for m in sent.body["messages"] if m["role"] == "user"] == ["what is open?"]


@pytest.mark.parametrize("door", [[], ["ask"]])
def test_a_question_that_starts_with_a_dash_goes_after_two_dashes(fake_server, home, door):
    fake_server.script(text("minus one is less"))
    result = glassloop_here(*door, "--base-url", fake_server.base_url, "--", "-1 or 1: which is less?",
                            env=home, stdin="")
    assert result.returncode == 0, result.stderr
    [sent] = fake_server.chat_requests()
    assert [m["content"] for m in sent.body["messages"] if m["role"] == "user"] == ["-1 or 1: which is less?"]


def test_an_unknown_option_among_the_words_of_a_question_is_one_line(fake_server, home):
    result = glassloop_here("what", "does", "-v", "mean", "--base-url", fake_server.base_url,
                            env={**home, "OPENAI_BASE_URL": ELSEWHERE}, stdin="")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "-v" in lines[0] and "--" in lines[0]
    assert fake_server.requests == []


def test_a_usage_error_of_any_command_is_one_line_naming_its_help(fake_server, home):
    """Not Typer's boxed usage text: one line, the command's own help named, exit 2."""
    for argv, help_ in ((["ask", "q", "--bogus"], "glassloop ask -h"), (["--bogus"], "glassloop -h"),
                        (["trace", "--turn"], "glassloop trace -h")):
        result = glassloop(*argv, env={**home, "OPENAI_BASE_URL": fake_server.base_url}, stdin="")
        assert result.returncode == 2, (argv, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and help_ in lines[0], (argv, lines)
    assert fake_server.requests == []


def test_a_config_of_two_top_level_lines_chooses_the_endpoint_and_the_model(fake_server, home, tmp_path):
    """``model = "x"`` and ``base_url = "..."``: the first lines anyone writes, for the profile in use."""
    mine = tmp_path / "mine.toml"
    mine.write_text(f'model = "first-model"\nbase_url = "{fake_server.base_url}"\n', encoding="utf-8")
    fake_server.script(text("from the configured server"))
    result = glassloop_here("ask", "hi", "--config", str(mine), env=home)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "from the configured server"
    assert fake_server.chat_requests()[0].body["model"] == "first-model"
    shown = glassloop_here("config", "--config", str(mine), env=home).stdout.splitlines()
    assert any(line.split()[:3] == ["model", "first-model", str(mine)] for line in shown), shown
    assert any(line.split()[:2] == ["providers.openai.model", "first-model"] for line in shown), shown
