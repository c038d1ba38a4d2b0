"""Numbers a person types (``/rewind N``, ``/trace N``, ``--resume ID@k``, ``glassloop trace
--turn N``, ``glassloop search --limit N``): read as ASCII digits within bounds, or refused in one
line naming the value; never a traceback, and the REPL goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from repl.archive.typed_numbers import MOST, NotANumber, typed_number
from repl.session import commands
from tests.fakeserver import text
from tests.support import chat_here, glassloop

MANY = "9" * 5000  # int() refuses this many digits (Python's limit on converting text)


@pytest.mark.parametrize(("typed", "number"), [("1", 1), ("007", 7), ("0" * 5000 + "7", 7),
                                             (str(MOST), MOST)])
def test_digits_are_a_number(typed: str, number: int) -> None:
    assert typed_number(typed, "/x takes a number") == number


@pytest.mark.parametrize("typed", ["²", "٣", "１", "+3", " 3", "3 ", "1_0", "-1", "0", "", "1e3",
                                   str(MOST + 1), MANY, "0" * 5000 + "1" * 8])
def test_anything_else_is_refused_in_one_line_naming_it(typed: str) -> None:
    with pytest.raises(NotANumber) as refused:
        typed_number(typed, "/x takes a number")
    line = str(refused.value)
    assert line.startswith("/x takes a number") and "\n" not in line and len(line) < 100
    assert repr(typed[:10])[:-1] in line


def one_turn(session, fake_server) -> None:
    fake_server.script(text("hello"))
    session.ask("hi")


@pytest.mark.parametrize("typed", ["²", MANY, "٣", "1_0", "+1"])
def test_rewind_refuses_what_is_no_turn_number(session, fake_server, typed: str) -> None:
    one_turn(session, fake_server)
    commands.dispatch(session, f"/rewind {typed}")
    assert len(session.ui.errors) == 1 and session.ui.errors[0].startswith("/rewind takes a turn number")
    assert len(session.history.turn_starts()) == 1  # nothing rewound
    commands.dispatch(session, "/rewind 1")  # a number still works
    assert session.ui.infos[-1].startswith("rewound to before turn 1")


@pytest.mark.parametrize("typed", ["０_1", "0_1", "１", MANY])
def test_trace_refuses_what_is_no_turn_number(session, fake_server, typed: str) -> None:
    one_turn(session, fake_server)
    shown = len(session.ui.shown)
    commands.dispatch(session, f"/trace {typed}")
    assert len(session.ui.errors) == 1 and session.ui.errors[0].startswith("/trace takes 'all' or a turn number")
    assert len(session.ui.shown) == shown  # no timeline of turn 1 drawn
    commands.dispatch(session, "/trace 1")
    assert session.ui.errors[1:] == []


def test_the_repl_refuses_a_superscript_and_five_thousand_digits_and_goes_on(repl_factory, fake_server):
    fake_server.script(text("hello there"))
    repl = repl_factory()
    repl.say("hi")
    repl.expect("hello there")
    repl.ready()
    for typed, shown in (("²", "'²'"), (MANY, "'" + "9" * 8)):
        repl.say(f"/rewind {typed}")
        said = repl.expect(r"/rewind takes a turn number[^\r\n]*\r\n")
        repl.ready()
        assert shown in said
        assert repl.child.isalive()
    repl.say("/rewind 1")
    repl.expect("rewound to before turn 1")
    repl.ready()
    screen = repl.screen()
    assert "Traceback" not in screen and "ValueError" not in screen
    assert screen.count("/rewind takes a turn number") == 2  # one line each
    repl.close()


@pytest.mark.parametrize(("branch", "why"), [("²", "in digits 0-9, not '²'"),
                                             (MANY, "from 1 to 1000000, not '9999"),
                                             ("0", "from 1 to 1000000, not '0'")])
def test_resume_of_a_branch_that_is_no_number_is_one_line(fake_server, home, branch: str, why: str) -> None:
    fake_server.script(text("one"))
    first = chat_here(home, fake_server.base_url, ["first question"])
    assert first.returncode == 0, first.stderr
    session = next(p.stem for p in (home_data(home) / "sessions").glob("*.jsonl"))
    wide = {**home, "COLUMNS": "400"}  # a pipe's 80 columns would wrap the line
    run = glassloop("--base-url", fake_server.base_url, "--resume", f"{session}@{branch}", env=wide, stdin="")
    said = [line for line in (run.stdout + run.stderr).splitlines() if line.strip()]
    assert run.returncode == 1
    assert "Traceback" not in run.stderr and "ValueError" not in run.stderr
    errors = [line for line in said if "ID@k takes a branch number k" in line]
    assert len(errors) == 1 and why in errors[0] and "cannot resume" in errors[0]


@pytest.mark.parametrize("typed", ["²", "1_0", MANY])
def test_trace_turn_flag_refuses_in_one_line(fake_server, home, typed: str) -> None:
    fake_server.script(text("one"))
    chat_here(home, fake_server.base_url, ["first question"])
    run = glassloop("trace", "--turn", typed, env=home)
    assert run.returncode == 2 and run.stdout == ""
    assert len(run.stderr.splitlines()) == 1 and run.stderr.startswith("error: --turn takes")


def home_data(home: dict[str, str]) -> Path:
    return Path(home["XDG_DATA_HOME"]) / "glassloop"
