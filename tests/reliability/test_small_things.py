"""Small things: /tools and the toolbar at narrow widths, `glassloop config` order, the
missing local extra at start, `ask` failures for scripts, resizing while streaming.

The real program in a pseudo-terminal (`ask` and `config`: the command line in this process)
against the scripted server; screens are rebuilt from the captured byte stream with pyte.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from collections import Counter

import pexpect
import pyte

from tests.fakeserver import call, fault_status, slow_chunks, text, tool_calls
from tests.support import glassloop_here
from tests.terminal import READY


def screen_lines(raw: str, cols: int, rows: int, resize_at: int | None = None,
                 new_cols: int | None = None) -> list[str]:
    """The scrollback and screen a terminal shows for ``raw`` (resized at byte ``resize_at``)."""
    screen = pyte.HistoryScreen(cols, rows, history=5000)
    stream = pyte.Stream(screen)
    stream.feed(raw if resize_at is None else raw[:resize_at])
    if resize_at is not None:
        screen.resize(rows, new_cols)
        stream.feed(raw[resize_at:])
    top = ["".join(line[x].data for x in sorted(line)).rstrip() for line in screen.history.top]
    return top + [line.rstrip() for line in screen.display]


def test_tools_descriptions_are_cut_at_a_word(sized_repl):
    repl = sized_repl(cols=100)
    repl.say("/tools")
    repl.expect("calculator")
    repl.ready()
    screen = repl.screen()
    assert "finished." in screen  # "Mark a todo as done. Use when the user says a task is finished."
    assert not re.search(r"finish(?!ed)", screen)  # old: cut at 60 characters, mid-word
    repl.close()


class Emulator:
    """A pyte terminal fed with everything the program writes, answering its cursor
    position requests (prompt_toolkit draws the bottom toolbar only once it knows them)."""

    def __init__(self, child: pexpect.spawn, cols: int, rows: int) -> None:
        self.child = child
        self.screen = pyte.HistoryScreen(cols, rows, history=5000)
        self.screen.write_process_input = child.send  # the terminal's answers go to the program
        self.stream = pyte.Stream(self.screen)

    def write(self, data: str) -> None:
        self.stream.feed(data)

    def flush(self) -> None:
        pass


def test_the_toolbar_at_60_columns_drops_whole_fields(home, fake_server):
    fake_server.script(text("hello there"))
    env = {**home, "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "0"}
    child = pexpect.spawn(sys.executable, ["-m", "repl.cli", "--base-url", fake_server.base_url], env=env,
                          encoding="utf-8", dimensions=(20, 60), timeout=20)
    terminal = Emulator(child, 60, 20)
    child.logfile_read = terminal
    child.expect_exact(READY)
    child.send("hi\r")
    child.expect("hello there")
    child.expect_exact(READY)
    child.expect(pexpect.TIMEOUT, timeout=0.5)  # the toolbar is drawn once the cursor position is known
    bottom = [line.rstrip() for line in terminal.screen.display if line.strip()][-1]
    fields = bottom.strip().split(" · ")
    whole = re.compile(r"openai|gpt-4o-mini|approvals ask|[\d,]+ tokens|context \d+%|\$[\d.]+|cost unknown")
    assert all(whole.fullmatch(f) for f in fields), bottom
    assert "gpt-4o-mini" in fields and "approvals ask" in fields and len(bottom) <= 60
    child.sendcontrol("d")
    child.expect(pexpect.EOF)


def test_config_shows_the_active_profile_first_without_keys_that_do_not_apply(home):
    result = glassloop_here("config", "--provider", "deepseek", env=home)
    assert result.returncode == 0, result.stderr
    keys = [line.split()[0] for line in result.stdout.splitlines() if line.strip()]
    assert keys[0] == "provider" and keys[1].startswith("providers.deepseek.")
    profile = [k for k in keys if k.startswith("providers.deepseek.")]
    assert keys[1 : 1 + len(profile)] == profile  # all of it, right after the provider
    assert not any(k.endswith((".n_ctx", ".model_path", ".threads")) for k in keys
                   if not k.startswith(("providers.local.", "providers.local-large.")))
    assert "providers.local.n_ctx" in keys


def test_a_missing_local_extra_is_reported_before_the_first_question(home, tmp_path):
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text('import sys\nsys.modules["llama_cpp"] = None  # not installed\n')
    env = {**home, "PYTHONPATH": os.pathsep.join(filter(None, [str(hide), os.environ.get("PYTHONPATH")])),
           "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "COLUMNS": "100", "LINES": "30"}
    child = pexpect.spawn(sys.executable, ["-m", "repl.cli", "--provider", "local"], env=env,
                          encoding="utf-8", dimensions=(30, 100), timeout=20)
    child.expect_exact(READY)
    assert "'local' extra" in child.before  # before the prompt, not after a question
    child.sendcontrol("d")
    child.expect(pexpect.EOF)


def test_a_base_url_without_a_scheme_is_one_line(home):
    result = glassloop_here("ask", "hi", "--base-url", "localhost:8000/v1", env=home)
    assert result.returncode == 2  # the config check names the key and what it expects
    assert "base_url" in result.stderr and "http://" in result.stderr and "https://" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_ask_json_failure_has_a_top_level_error(fake_server, home):
    fake_server.script(fault_status(401, message="bad key"))
    result = glassloop_here("ask", "hi", "--json", "--base-url", fake_server.base_url, env=home)
    assert result.returncode == 1
    payload = json.loads(result.stdout)
    assert payload["stopped_by"] == "error"
    assert payload["error"]["type"] == "auth" and payload["error"]["message"]
    fake_server.script(text("fine"))
    ok = json.loads(glassloop_here("ask", "hi", "--json", "--base-url", fake_server.base_url,
                                   env=home).stdout)
    assert "error" not in ok and ok["answer"] == "fine"


def test_ask_without_any_answer_text_exits_1_with_a_reason(fake_server, home):
    fake_server.script(text(""))
    result = glassloop_here("ask", "hi", "--base-url", fake_server.base_url, env=home)
    assert result.returncode == 1 and result.stdout == ""
    assert "no answer: the model's answer was empty" in result.stderr
    fake_server.script(tool_calls(call("list_todos", {})), text(""))  # the guard's final call says nothing
    result = glassloop_here("ask", "hi", "--max-steps", "1", "--json", "--base-url", fake_server.base_url,
                            env=home)
    assert result.returncode == 1
    error = json.loads(result.stdout)["error"]
    assert error["type"] == "no_answer" and "max_steps" in error["message"]


ANSWER = "".join(f"Paragraph {i}: the quick brown fox number {i} jumps over the lazy dog, "
                 "again and again, until the line is long.\n\n" for i in range(10))


def test_resizing_while_streaming_leaves_no_duplicated_lines(sized_repl, fake_server):
    fake_server.script(slow_chunks(0.1, text(ANSWER, chunk_size=40)))  # ~2.5 s of streaming
    repl = sized_repl(cols=100, rows=24)
    log = io.StringIO()
    repl.child.logfile_read = log
    repl.say("go")
    repl.child.expect("Paragraph 3")
    repl.child.expect(pexpect.TIMEOUT, timeout=0.1)  # what was drawn at 100 columns is read
    resized_at = len(log.getvalue())
    assert "Paragraph 8" not in log.getvalue()  # the resize comes while the answer streams
    repl.child.setwinsize(24, 60)
    repl.child.expect(r"turn 1[^\r\n]*answer")
    repl.ready()
    lines = screen_lines(log.getvalue(), 100, 24, resized_at, 60)
    starts = Counter(line.split(":")[0] for line in lines if line.startswith("Paragraph"))
    assert all(count == 1 for count in starts.values()), starts
    assert len(starts) == 10
    repl.close()
