"""Item 4: ``glassloop ask`` on a terminal passes no escape sequences through.

The scripted server puts an OSC 52 clipboard write, a window title, a clear
screen and an 8-bit CSI into the answer, into a tool name and into tool
arguments that are not valid JSON (shown raw on the progress line), and into
a server error message. Run in a pseudo-terminal, none of them reaches the
terminal; ``--json`` on a terminal carries no raw control character either.
Piped, the answer on stdout stays byte-exact; progress lines on stderr are
always cleaned.
"""

from __future__ import annotations

import json
import sys

import pexpect
import pytest

from tests.fakeserver import call, fault_status, text, tool_calls
from tests.reliability.helpers import record
from tests.support import glassloop

CLIPBOARD = "\x1b]52;c;ZXZpbA==\x07"
TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
CSI8 = "\x9b2J"  # the same clear screen as one 8-bit control
FORBIDDEN = ("\x1b]52", "\x1b]0", "\x1b[2J", "\x9b")
EVIL = f"{CLIPBOARD}{TITLE}{CLEAR}{CSI8}"
ANSWER = f"the answer {EVIL} ends here"
pytestmark = pytest.mark.timeout(60)


def ask_in_pty(env: dict[str, str], *args: str) -> tuple[str, int]:
    child = pexpect.spawn(sys.executable, ["-m", "repl.cli", "ask", *args], env={**env, "TERM": "xterm"},
                          encoding="utf-8", dimensions=(40, 100), timeout=30)
    child.expect(pexpect.EOF)
    child.close()
    return child.before, child.exitstatus


def leaked(output: str) -> list[str]:
    return [seq for seq in FORBIDDEN if seq in output]


def evil_tools() -> tuple:
    return tool_calls(call(f"evil{TITLE}{CLEAR}", {}),
                      call("get_todo", f'{{"todo_id": "{CLIPBOARD}{CLEAR}{CSI8}'))  # invalid JSON: shown raw


def test_answer_and_tool_lines_reach_a_terminal_clean(fake_server, home):
    fake_server.script(evil_tools(), text(ANSWER, chunk_size=5))
    out, code = ask_in_pty(home, "go", "--base-url", fake_server.base_url)
    assert code == 0, out
    assert "step 1 call evil" in out and "step 1 call get_todo" in out and "the answer" in out
    assert leaked(out) == []
    record("ask terminal", paths=["answer", "tool name", "tool arguments"],
           sequences=len(FORBIDDEN), reaching_terminal=0)


def test_server_error_line_reaches_a_terminal_clean(fake_server, home):
    fake_server.script(fault_status(400, message=f"bad request {EVIL} from the server"))
    out, code = ask_in_pty(home, "go", "--base-url", fake_server.base_url)
    assert code == 1 and "bad request" in out and "from the server" in out, out
    assert leaked(out) == []
    record("ask terminal", paths=["error"], sequences=len(FORBIDDEN), reaching_terminal=0)


def test_json_on_a_terminal_carries_no_raw_controls(fake_server, home):
    fake_server.script(evil_tools(), text(ANSWER, chunk_size=5))
    out, code = ask_in_pty(home, "go", "--json", "--base-url", fake_server.base_url)
    assert code == 0, out
    assert leaked(out) == []
    payload = json.loads(out.strip().splitlines()[-1])
    assert payload["answer"] == ANSWER  # escaped in the JSON text, whole in its value


def test_piped_answer_stays_byte_exact(fake_server, home):
    fake_server.script(evil_tools(), text(ANSWER, chunk_size=5))
    result = glassloop("ask", "go", "--base-url", fake_server.base_url, env=home)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ANSWER + "\n"
    assert "step 1 call evil" in result.stderr and leaked(result.stderr) == []  # progress: always clean


def test_trace_timeline_of_such_a_turn_is_clean(fake_server, home, tmp_path):
    fake_server.script(evil_tools(), fault_status(400, message=f"bad request {EVIL} from the server"))
    trace_file = tmp_path / "t.jsonl"
    glassloop("ask", "go", "--base-url", fake_server.base_url, "--trace-file", str(trace_file), env=home)
    for view in ((), ("--events",)):  # the timeline, and the event list
        shown = glassloop("trace", str(trace_file), *view, env=home)
        assert shown.returncode == 0 and "evil" in shown.stdout and "bad request" in shown.stdout, shown
        assert leaked(shown.stdout) == []
