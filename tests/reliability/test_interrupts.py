"""Part 1, the interrupt matrix: Ctrl-C in the real REPL (pseudo-terminal) at every stage of a turn.

Each case: the prompt comes back while the turn still had long to go (a 15 s
first byte, a 30 s answer, a 20 s tool, an approval nobody gives; how soon is
only recorded), the trace records the turn as ``interrupted``, the next turn
gets its answer, and the scripted server found nothing wrong with any history
it was sent. Then: Ctrl-C twice at an empty
prompt exits and leaves the terminal sane, and a Ctrl-C that lands while the
end of a turn is being drawn does not end the program.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pexpect
import pytest

from repl.config.load import load_settings
from repl.loop.events import ErrorEvent, TurnFinished
from repl.loop.history import check
from repl.session.chat import ChatSession
from tests.fakeserver import (
    FakeServer,
    Reply,
    call,
    fault_status,
    slow_chunks,
    slow_first_byte,
    text,
    tool_calls,
)
from tests.reliability.helpers import finished_turns, record, wait_for
from tests.support import StubUI
from tests.terminal import READY, Repl

ROOT = Path(__file__).resolve().parents[2]
MCP_SERVER = ROOT / "tests" / "mcp_test_server.py"
pytestmark = pytest.mark.timeout(120)
latencies: dict[str, float] = {}


@dataclass(frozen=True)
class Case:
    name: str
    reply: Reply
    ready_to_interrupt: Callable[[Repl, FakeServer], None]
    mcp: bool = False


def after_request(extra_s: float) -> Callable[[Repl, FakeServer], None]:
    def wait(repl: Repl, server: FakeServer) -> None:
        assert wait_for(lambda: len(server.chat_requests()) >= 1, 30)
        time.sleep(extra_s)

    return wait


def on_screen(pattern: str) -> Callable[[Repl, FakeServer], None]:
    def wait(repl: Repl, server: FakeServer) -> None:
        repl.expect(pattern)
        time.sleep(0.2)

    return wait


LONG_TITLE = "t" * 400
CASES = [
    Case("before the first token", slow_first_byte(15, text("too late")), after_request(0.5)),
    Case("in the middle of text", slow_chunks(0.1, text("word " * 300, chunk_size=5)), on_screen("word")),
    Case("while tool-call arguments stream",
         slow_chunks(0.05, tool_calls(call("add_todo", {"title": LONG_TITLE}), chunk_size=2)),
         after_request(0.8)),
    Case("at an approval prompt", tool_calls(call("delete_todo", {"todo_id": "todo-002"})), on_screen("Allow")),
    Case("during a slow tool", tool_calls(call("t__slow", {"seconds": 20})), on_screen("t__slow"), mcp=True),
]


def mcp_config(folder: Path) -> Path:
    path = folder / "mcp.toml"
    path.write_text(f"[mcp.servers.t]\ncommand = {json.dumps(sys.executable)}\n"
                    f"args = [{json.dumps(str(MCP_SERVER))}]\n", encoding="utf-8")
    return path


def tool_results(body: dict) -> list[dict]:
    return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_ctrl_c(case: Case, repl_factory, fake_server, home, tmp_path):
    todos_before = Path(home["GLASSLOOP_TODOS_FILE"]).read_bytes()
    fake_server.script(case.reply)
    repl = repl_factory(*(["--config", str(mcp_config(tmp_path))] if case.mcp else []))
    repl.say("go")
    case.ready_to_interrupt(repl, fake_server)
    started = time.monotonic()
    repl.child.sendintr()
    repl.ready()
    latency = time.monotonic() - started
    latencies[case.name] = latency
    assert wait_for(lambda: len(finished_turns(home)) == 1)
    assert finished_turns(home)[0]["stopped_by"] == "interrupted"

    fake_server.script(text("second answer"))
    repl.say("again")
    repl.expect("second answer")
    repl.ready()
    assert [t["stopped_by"] for t in finished_turns(home)] == ["interrupted", "answer"]
    assert fake_server.history_errors == []
    last = fake_server.chat_requests()[-1].body
    assert check(last["messages"][1:]) == []
    if case.name in ("at an approval prompt", "during a slow tool"):
        assert tool_results(last)[-1]["error"]["type"] == "interrupted"
    assert Path(home["GLASSLOOP_TODOS_FILE"]).read_bytes() == todos_before
    assert "Traceback" not in repl.screen()
    repl.close()
    record("interrupts", case=case.name, prompt_back_s=round(latency, 3))


# ---- leaving the program --------------------------------------------------------------

SGR = re.compile(r"\x1b\[[0-9;]*m")
ESCAPE = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[@-Z\\-_])")


def test_double_ctrl_c_exits_and_leaves_the_terminal_sane(fake_server, home):
    """Run the REPL under a shell that prints ``stty -a`` once it has exited."""
    fake_server.script(slow_chunks(0.1, text("word " * 300, chunk_size=5)))
    env = {**home, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "COLUMNS": "100", "LINES": "40"}
    script = (f"trap : INT; {sys.executable} -m repl.cli --base-url {fake_server.base_url}; "
              "echo EXIT=$?; stty -a; echo END")
    child = pexpect.spawn("/bin/sh", ["-c", script], env=env, cwd=str(ROOT), encoding="utf-8",
                          dimensions=(40, 100), timeout=30)
    child.expect_exact(READY)
    child.send("talk\r")
    child.expect("word")
    child.sendintr()  # the turn: the live area had echo off
    child.expect_exact(READY)
    started = time.monotonic()
    child.sendintr()
    child.expect_exact(READY)
    child.sendintr()
    child.expect("EXIT=(\\d+)")
    exit_s = time.monotonic() - started
    output, code = child.before, int(child.match.group(1))
    child.expect("END")
    stty = child.before
    child.expect(pexpect.EOF)
    assert code == 0
    assert re.search(r"(?<![-\w])echo(?!\w)", stty) and re.search(r"(?<![-\w])icanon\b", stty), stty
    assert output.rfind("\x1b[?2004l") > output.rfind("\x1b[?2004h")  # bracketed paste off
    assert output.rfind("\x1b[?25h") > output.rfind("\x1b[?25l")  # cursor shown
    tail = output[output.rfind("\x1b[?2004l") + len("\x1b[?2004l"):]
    assert [e for e in ESCAPE.findall(tail) if not SGR.fullmatch(e)] == []  # only colours after
    styles = SGR.findall(output)
    assert styles[-1] in ("\x1b[0m", "\x1b[m")  # and the last colour is a reset
    record("interrupts", case="double Ctrl-C at an empty prompt", exit_s=round(exit_s, 3),
           max_prompt_back_s=round(max(latencies.values(), default=0), 3))


# ---- Ctrl-C while the end of a turn is drawn --------------------------------------------


class CtrlCWhileDrawing(StubUI):
    """The terminal facade: reads scripted lines; the first ``on`` event drawn is followed by
    Ctrl-C (the renderer defers a Ctrl-C until the event is drawn, then raises it)."""

    def __init__(self, lines: list[str], on: type) -> None:
        super().__init__()
        self.lines, self.on, self.fired = list(lines), on, False

    def read(self) -> str:
        if not self.lines:
            raise EOFError
        return self.lines.pop(0)

    def render(self, event: object) -> None:
        super().render(event)
        if isinstance(event, self.on) and not self.fired:
            self.fired = True
            raise KeyboardInterrupt


@pytest.mark.parametrize("on", [ErrorEvent, TurnFinished], ids=["error line", "turn summary"])
def test_ctrl_c_while_a_turn_ends_does_not_exit(on, fake_server, tmp_path, monkeypatch):
    for name in ("DATA", "STATE", "CONFIG"):
        monkeypatch.setenv(f"XDG_{name}_HOME", str(tmp_path / name.lower()))
    settings = load_settings({"base_url": fake_server.base_url, "weather": "sample",
                              "todos_file": str(tmp_path / "todos.json")}, cwd=tmp_path, env={})
    first = fault_status(400) if on is ErrorEvent else text("first answer")
    fake_server.script(first, text("second answer"))
    ui = CtrlCWhileDrawing(["first question", "second question"], on)
    session = ChatSession(settings, ui, interactive=False)
    session.open_journal()
    try:
        code = session.loop()
    except KeyboardInterrupt:
        pytest.fail("a Ctrl-C while the turn's end was drawn ended the session")
    finally:
        session.close()
    assert code == 0  # ended by EOF after both lines
    assert ui.fired
    answers = [e.answer for e in ui.events if isinstance(e, TurnFinished)]
    assert answers[-1] == "second answer" and fake_server.history_errors == []
    assert check(session.history.messages) == []


def test_ctrl_c_stops_a_turn_when_started_with_the_interrupt_ignored(fake_server, home):
    """A job a script starts in the background inherits SIGINT ignored; at a terminal Ctrl-C is
    still the user's key to stop a turn (and the suite itself may run that way)."""
    fake_server.script(slow_chunks(0.1, text("word " * 300, chunk_size=5)))
    ignoring = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                "os.execv(sys.executable, [sys.executable, '-m', 'repl.cli', *sys.argv[1:]])")
    repl = Repl(home, fake_server.base_url, program=("-c", ignoring))
    repl.say("go")
    repl.expect("word")
    repl.child.sendintr()
    repl.ready()  # the answer had ~30 s to go
    assert wait_for(lambda: len(finished_turns(home)) == 1)
    assert finished_turns(home)[0]["stopped_by"] == "interrupted"
    fake_server.script(text("second answer"))
    repl.say("again")
    repl.expect("second answer")
    repl.ready()  # a Ctrl-D typed while the turn still ends is typed ahead of the prompt: dropped
    repl.close()
