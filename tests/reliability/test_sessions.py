"""Sessions you can find and continue: the real program, in a pipe and in a pseudo-terminal
(runs whose subject is not the process: the command line in this process, ``chat_here``).

An empty session leaves no file and is never listed or picked by ``last``;
``-c`` continues the newest session with a turn; ``--resume`` without a value
and ``/resume`` open a picker (arrow keys, Enter); a resumed session shows its
last turns and continues its numbers (tokens, cost, context share, turn
numbers, one trace file); ``/reset`` starts a new session and keeps the old
one whole; after ``/undo`` the usage table, the toolbar and the context share
agree.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from repl.session import commands
from repl.session.chat import ChatSession
from tests.fakeserver import call, text, tool_calls
from tests.reliability.helpers import record
from tests.support import StubUI, chat_here, glassloop_here

pytestmark = pytest.mark.timeout(60)


def journals(env: dict[str, str]) -> list[Path]:
    return sorted((Path(env["XDG_DATA_HOME"]) / "glassloop" / "sessions").glob("*.jsonl"))


def traces(env: dict[str, str]) -> list[Path]:
    return sorted((Path(env["XDG_STATE_HOME"]) / "glassloop" / "traces").glob("*.jsonl"))


def users_sent(server) -> list[str]:
    return [m["content"] for m in server.chat_requests()[-1].body["messages"] if m["role"] == "user"]


def test_an_empty_session_is_never_written_listed_or_picked(fake_server, home):
    fake_server.script(text("kept answer"), text("continued"))
    chat_here(home, fake_server.base_url, ["the only question"])
    kept = journals(home)
    empty = chat_here(home, fake_server.base_url, ["/sessions"])  # a launch without a turn
    assert "the only question" in empty.stdout  # listed: the session with a turn
    assert "--resume" not in empty.stdout.splitlines()[-1]  # the exit line names no session
    assert journals(home) == kept and len(traces(home)) == 1  # the empty launch wrote nothing
    resumed = chat_here(home, fake_server.base_url, ["next"], "--resume", "last")
    assert resumed.returncode == 0, resumed.stderr
    assert users_sent(fake_server) == ["the only question", "next"]
    record("sessions", case="empty launch", files_written=0, picked_by_last=kept[0].stem)


def test_continue_flag_resumes_the_newest_session_with_a_turn(fake_server, home):
    fake_server.script(text("one"), text("two"), text("three"))
    chat_here(home, fake_server.base_url, ["older question"])
    time.sleep(0.02)  # distinct modification times
    chat_here(home, fake_server.base_url, ["newer question"])
    chat_here(home, fake_server.base_url, [])  # empty: not a candidate
    result = chat_here(home, fake_server.base_url, ["follow-up"], "-c")
    assert result.returncode == 0, result.stderr
    assert users_sent(fake_server) == ["newer question", "follow-up"]
    assert "newer question" in result.stdout  # the recap of the last turn


def test_continue_in_a_terminal_shows_the_last_turns(repl_factory, fake_server):
    fake_server.script(tool_calls(call("list_todos", {"status": "todo"})), text("answer **one**"),
                       text("answer two"), text("answer three"), text("answer four"), text("answer five"))
    first = repl_factory()
    for n in ("one", "two", "three", "four"):
        first.say(f"question {n}")
        first.expect(f"answer.*{n}")
        first.ready()
    first.close()
    resumed = repl_factory("-c")
    screen = resumed.screen()
    assert "… 1 earlier turn, /trace all to see them" in screen
    assert screen.index("answer four") < screen.index("… 1 earlier turn")  # the recap, then the count
    assert "question one" not in screen and "› question two" in screen and "› question four" in screen
    assert "answer four" in screen and "resumed session" in screen
    resumed.say("question five")
    resumed.expect("answer five")
    resumed.ready()
    resumed.close()


def test_resume_without_a_value_opens_a_picker(repl_factory, fake_server, home):
    fake_server.script(text("alpha answer"), text("beta answer"), text("picked it"))
    chat_here(home, fake_server.base_url, ["alpha question"])
    time.sleep(0.02)
    chat_here(home, fake_server.base_url, ["beta question"])
    picker = repl_factory("--resume")
    picker.expect("alpha question")  # the last row: the whole list is drawn
    shown = picker.screen()
    assert "resume which session" in shown and "alpha question" in shown and "beta question" in shown
    assert shown.index("beta question") < shown.index("alpha question")  # newest first
    assert re.search(r"1 turn\s+fake-model|1 turn\s+gpt", shown)
    picker.child.send("\x1b[B")  # ↓ to the older one
    picker.child.send("\r")
    picker.expect("resumed session")
    picker.ready()
    picker.say("which one?")
    picker.expect("picked it")
    picker.ready()
    assert users_sent(fake_server) == ["alpha question", "which one?"]
    picker.close()


def test_slash_resume_opens_the_picker_and_sessions_lists(repl_factory, fake_server, home):
    fake_server.script(text("saved answer"), text("back in it"))
    chat_here(home, fake_server.base_url, ["saved question"])
    repl = repl_factory()
    repl.say("/sessions")
    repl.expect("first message")
    repl.ready()
    assert "saved question" in repl.screen()
    repl.say("/resume")
    repl.expect("resume which session")
    repl.child.send("\r")
    repl.expect("resumed session")
    repl.ready()
    repl.say("and now?")
    repl.expect("back in it")
    repl.ready()
    assert users_sent(fake_server) == ["saved question", "and now?"]
    repl.close()


def test_reset_starts_a_new_session_and_keeps_the_old_one(repl_factory, fake_server, home):
    fake_server.script(text("before reset"), text("after reset"), text("old one back"))
    repl = repl_factory()
    repl.say("first conversation")
    repl.expect("before reset")
    repl.ready()
    repl.say("/reset")
    out = repl.expect(r"/resume \d{8}-\d{6}-[0-9a-f]{4}")
    old_id = re.search(r"/resume (\d{8}-\d{6}-[0-9a-f]{4})", out).group(1)
    repl.ready()
    repl.say("second conversation")
    repl.expect("after reset")
    repl.ready()
    repl.say("/trace 1")
    repl.expect("turn end")
    repl.ready()
    trace_shown = repl.screen().rsplit("/trace 1", 1)[-1]
    assert "second conversation" in trace_shown and "first conversation" not in trace_shown  # no merge
    repl.close()
    assert len(journals(home)) == 2 and len(traces(home)) == 2
    old = [p for p in journals(home) if p.stem == old_id]
    assert old, "the old session's journal is gone"
    resumed = chat_here(home, fake_server.base_url, ["still there?"], "--resume", old_id)
    assert resumed.returncode == 0, resumed.stderr
    assert users_sent(fake_server) == ["first conversation", "still there?"]


def test_one_session_one_trace_with_continuing_turn_numbers(fake_server, home):
    fake_server.script(text("a1"), text("a2"), text("a3"))
    first = chat_here(home, fake_server.base_url, ["q1", "q2"])
    session_id = first.stdout.split("glassloop --resume ")[-1].split()[0]
    chat_here(home, fake_server.base_url, ["q3", "/trace all"], "--resume", session_id)
    assert [p.stem for p in traces(home)] == [session_id]
    records = [json.loads(line) for line in traces(home)[0].read_text(encoding="utf-8").splitlines()]
    started = [(r["turn"], r["user_text"]) for r in records if r["type"] == "turn_started"]
    assert started == [(1, "q1"), (2, "q2"), (3, "q3")]
    shown = glassloop_here("trace", session_id, "--turn", "all", env=home)
    assert re.findall(r"turn (\d): '(q\d)'", shown.stdout) == [("1", "q1"), ("2", "q2"), ("3", "q3")]
    record("sessions", case="trace continuity", trace_files=1, turns=[t for t, _ in started])


def test_resumed_totals_continue_from_the_journal(fake_server, home):
    fake_server.script(text("a1", usage=(100, 10, 0)), text("a2", usage=(200, 20, 50)), text("a3", usage=(300, 30, 0)))
    first = chat_here(home, fake_server.base_url, ["q1", "q2", "/usage"])
    session_id = first.stdout.split("glassloop --resume ")[-1].split()[0]
    assert re.search(r"all\s*│\s*2\s*│\s*300\s*│\s*50\s*│\s*30", first.stdout), first.stdout
    again = chat_here(home, fake_server.base_url, ["q3", "/usage"], "--resume", session_id)
    table = again.stdout.rsplit("usage", 1)[-1]
    assert re.search(r"│\s*1\s*│\s*1\s*│\s*100\s*│", table) and re.search(r"│\s*3\s*│\s*1\s*│\s*300\s*│", table)
    assert re.search(r"all\s*│\s*3\s*│\s*600\s*│\s*50\s*│\s*60", table), table
    assert "660 tokens" in again.stdout.rsplit("session ", 1)[-1]  # the exit line counts the whole session


def test_undo_keeps_usage_toolbar_and_context_consistent(fake_server, session):
    fake_server.script(text("a1", usage=(1000, 10, 0)), text("a2", usage=(3000, 30, 0)))
    session.run_turn("q1")
    session.run_turn("q2")
    assert session.last_prompt_tokens == 3000
    commands.dispatch(session, "/undo")
    assert session.last_prompt_tokens == 1000  # the context share is back to before the undone turn
    commands.dispatch(session, "/usage")
    _, columns, rows = session.ui.tables[-1]
    stopped = [row[columns.index("stopped by")] for row in rows[:-1]]
    assert stopped == ["answer", "undone (answer)"]
    inputs = [int(row[columns.index("in")]) for row in rows]
    assert inputs[-1] == sum(inputs[:-1]) == session.usage.input_tokens == 4000  # rows add up to "all"
    toolbar_tokens = session.usage.total
    assert toolbar_tokens == 4040  # spent tokens stay spent
    # the same numbers after a resume
    session.close()
    again = ChatSession(session.settings, StubUI(), interactive=False)
    assert again.resume(session.session_id, show=False)
    assert (again.usage, again.last_prompt_tokens) == (session.usage, 1000)
    assert [t.undone for t in again.ledger] == [False, True] and again.turn_count() == 1
    again.close()


def test_recent_sessions_skip_sessions_without_a_turn(tmp_path):
    from repl.archive.journal import recent_sessions

    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "20260101-000000-aaaa.jsonl").write_text('{"kind": "meta", "model": "m"}\n', encoding="utf-8")
    (folder / "20260101-000001-bbbb.jsonl").write_text(
        '{"kind": "meta", "model": "m", "time": 1}\n'
        '{"kind": "message", "message": {"role": "user", "content": "hi"}}\n', encoding="utf-8")
    assert [s.id for s in recent_sessions(folder)] == ["20260101-000001-bbbb"]


def damaged_times(env: dict[str, str]) -> list[str]:
    """Journals whose start time no clock can show (written by hand or damaged), newest last; their first messages."""
    folder = Path(env["XDG_DATA_HOME"]) / "glassloop" / "sessions"
    firsts = []
    for n, stamp in enumerate(["1e300", "NaN", "-Infinity", "1e17"]):
        firsts.append(f"damaged time {n}")
        (folder / f"20260101-00000{n}-dddd.jsonl").write_text(
            f'{{"kind": "meta", "model": "m", "time": {stamp}}}\n'
            f'{{"kind": "message", "message": {{"role": "user", "content": "{firsts[-1]}"}}}}\n'
            '{"kind": "message", "message": {"role": "assistant", "content": "fine"}}\n', encoding="utf-8")
        time.sleep(0.02)  # distinct modification times
    return firsts


def test_a_journal_with_a_time_out_of_range_is_still_listed_picked_and_continued(repl_factory, fake_server, home):
    fake_server.script(text("intact answer"), text("continued"), text("picked"))
    chat_here(home, fake_server.base_url, ["intact question"])
    firsts = damaged_times(home)
    listed = chat_here(home, fake_server.base_url, ["/sessions"])
    assert listed.returncode == 0 and "Traceback" not in listed.stdout + listed.stderr, listed.stderr
    assert all(first in listed.stdout for first in ["intact question", *firsts]), listed.stdout
    resumed = chat_here(home, fake_server.base_url, ["follow-up"], "-c")
    assert resumed.returncode == 0, resumed.stderr
    assert users_sent(fake_server) == [firsts[-1], "follow-up"]
    picker = repl_factory("--resume")
    picker.expect("intact question")  # the last row: the whole list is drawn
    assert all(first in picker.screen() for first in firsts)
    picker.child.send("\r")
    picker.expect("resumed session")
    picker.ready()
    picker.say("still fine?")
    picker.expect("picked")
    picker.ready()
    picker.close()
