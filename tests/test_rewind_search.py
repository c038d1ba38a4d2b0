"""``/rewind N`` and searching every saved session (``glassloop search``, ``/sessions TEXT``).

The session runs against the scripted server over HTTP; the store files, the journals and the
search index are real files in ``tmp_path``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from repl.archive import search
from repl.archive.journal import load_checked
from repl.session import commands
from tests.fakeserver import call, text, tool_calls
from tests.support import chat_here, glassloop_here
from tools import build_tools
from tools.registry import Registry

ROOT = Path(__file__).resolve().parent.parent


def three_todo_turns(session, fake_server) -> list[bytes]:
    """Three turns, each adding a todo; the store's bytes before each turn and after the last."""
    todos = Path(session.settings.todos_file)
    seen = [todos.read_bytes() if todos.exists() else b""]
    for title in ("buy milk", "call mom", "water plants"):
        fake_server.script(tool_calls(call("add_todo", {"title": title})), text(f"added {title}"))
        session.ask(f"remind me to {title}")
        seen.append(todos.read_bytes())
    return seen


def test_rewind_restores_the_store_and_keeps_the_cut_turns_as_a_branch(session, fake_server):
    todos = Path(session.settings.todos_file)
    seen = three_todo_turns(session, fake_server)
    first_id = session.session_id
    commands.dispatch(session, "/rewind 2")
    assert todos.read_bytes() == seen[1]  # as turn 1 left it, byte for byte
    assert [m["content"] for m in session.history.messages if m["role"] == "user"] == ["remind me to buy milk"]
    said = session.ui.infos[-1]
    assert "rewound to before turn 2" in said and "removed" in said and "'water plants'" in said
    assert f"glassloop --resume {first_id}@1" in said
    fake_server.script(text("ok"))
    session.ask("anything else?")  # the model sees turn 1 and the new question only
    sent = fake_server.chat_requests()[-1].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["remind me to buy milk", "anything else?"]
    journal = session.journal.path
    assert [m["content"] for m in load_checked(journal).messages if m["role"] == "user"] == [
        "remind me to buy milk", "anything else?"]
    assert not load_checked(journal).notes  # the branch record is the journal's own
    commands.dispatch(session, "/sessions")
    assert session.ui.tables[-1][2][0][0] == f"{first_id} (current) +1 branch"

    assert session.resume(f"{first_id}@1")  # the cut turns reopen, as a new session
    assert session.session_id != first_id
    assert [m["content"] for m in session.history.messages if m["role"] == "user"] == [
        "remind me to buy milk", "remind me to call mom", "remind me to water plants"]
    assert any(f"branch {first_id}@1 opened as a new session" in line for line in session.ui.infos)
    fake_server.script(text("branch goes on"))
    session.ask("and now?")
    assert load_checked(session.journal.path).meta["branch_of"] == f"{first_id}@1"
    assert [m["role"] for m in load_checked(journal).messages].count("user") == 2  # the original is unchanged


def test_rewind_refuses_when_another_writer_changed_the_same_item(session, fake_server, tmp_path):
    todos = Path(session.settings.todos_file)
    three_todo_turns(session, fake_server)
    other = Registry(build_tools(todos_path=todos, notes_path=tmp_path / "other-notes.json",
                                 files_root=tmp_path, weather="sample"))
    added = json.loads(todos.read_text(encoding="utf-8"))["todos"][-1]["id"]
    assert other.call("update_todo", {"todo_id": added, "priority": "high"})["ok"]
    changed = todos.read_bytes()
    commands.dispatch(session, "/rewind 2")
    assert len(session.ui.errors) == 1 and "cannot undo" in session.ui.errors[0] and str(todos) in session.ui.errors[0]
    assert todos.read_bytes() == changed
    assert len(session.history.turn_starts()) == 3


def test_rewind_asks_for_a_turn_that_exists(session, fake_server):
    commands.dispatch(session, "/rewind 1")
    assert session.ui.infos[-1] == "nothing to rewind: no turn yet"
    fake_server.script(text("hi"))
    session.ask("hello")
    commands.dispatch(session, "/rewind 4")
    commands.dispatch(session, "/rewind")  # no terminal to pick in
    assert session.ui.errors == ["there is no turn 4: the conversation has turns 1 to 1",
                                 "no terminal to pick a turn in: give its number, /rewind 1 to 1"]


def test_search_finds_the_turn_in_another_session(fake_server, home):
    fake_server.script(tool_calls(call("add_todo", {"title": "buy milk"})), text("Added milk to your list."),
                       text("Sunny all day."))
    chat_here(home, fake_server.base_url, ["remind me to buy milk"], "--yes")
    chat_here(home, fake_server.base_url, ["weather in Paris?"])
    found = glassloop_here("search", "milk", "--json", env=home)
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert len(hits) == 1 and hits[0]["turn"] == 1 and hits[0]["field"] == "question"
    start, end = hits[0]["highlights"][0]
    assert hits[0]["snippet"][start:end] == "milk"
    assert hits[0]["resume"] == f"glassloop --resume {hits[0]['session']}"
    plain = glassloop_here("search", "milk", env=home)
    assert f"{hits[0]['session']}  turn 1" in plain.stdout and hits[0]["resume"] in plain.stdout
    assert glassloop_here("search", "add_todo", "--json", env=home).stdout.count('"field": "tools"') == 1
    missing = glassloop_here("search", "cheese", env=home)
    assert missing.returncode == 1 and "no saved turn holds 'cheese'" in missing.stderr
    fake_server.script(text("hello"))
    repl = chat_here(home, fake_server.base_url, ["hi", "/sessions MILK"])
    assert f"{hits[0]['session']}  turn 1" in repl.stdout and "buy milk" in repl.stdout


def test_a_damaged_index_is_rebuilt_with_one_line(fake_server, home):
    fake_server.script(text("noted: oat milk"))
    chat_here(home, fake_server.base_url, ["we need oat milk"])
    index = Path(home["XDG_DATA_HOME"]) / "glassloop" / "sessions" / search.INDEX_FILE
    assert index.exists()  # made at the turn's end
    index.write_bytes(b"not a database at all" * 100)
    found = glassloop_here("search", "oat", "milk", env=home)
    assert found.returncode == 0 and "Traceback" not in found.stderr
    assert len(found.stderr.splitlines()) == 1 and "was damaged" in found.stderr and "rebuilt" in found.stderr
    assert "we need oat milk" in found.stdout
    again = glassloop_here("search", "oat", env=home)
    assert again.stderr == "" and "oat milk" in again.stdout


def test_search_covers_branches_and_chinese(session, fake_server):
    three_todo_turns(session, fake_server)
    commands.dispatch(session, "/rewind 3")
    fake_server.script(text("好的，明天下午三点开会"))
    session.ask("提醒我明天下午三点开会")
    index = search.Index(session.journal.path.parent)
    water = index.search("water plants")
    assert [(h.turn.ref, h.turn.turn) for h in water] == [(f"{session.session_id}@1", 3)]
    assert [h.turn.turn for h in index.search("开会")] == [3]  # inside a sentence
    assert [h.turn.question for h in index.search("remind")] == [  # newest first, the branch's too
        "remind me to water plants", "remind me to call mom", "remind me to buy milk"]


def test_without_fts5_the_journals_are_scanned(session, fake_server, monkeypatch):
    three_todo_turns(session, fake_server)
    monkeypatch.setattr(search, "fts5_available", lambda: False)
    said: list[str] = []
    hits = search.Index(session.journal.path.parent, said.append).search("mom")
    assert [h.turn.question for h in hits] == ["remind me to call mom"]
    assert len(said) == 1 and "no FTS5" in said[0]


WRITER = """
import sys, time
from pathlib import Path
from repl.archive.search import Index, turn_text
folder, name = Path(sys.argv[1]), sys.argv[2]
journal = folder / f"{name}.jsonl"
journal.write_text("{}")
for n in range(1, 31):
    Index(folder).add_turn(turn_text(name, 0, n, [{"role": "user", "content": f"{name} turn {n}"}], time.time()), journal)
"""


@pytest.mark.timeout(60)
def test_two_writers_at_once_lose_no_turn(tmp_path):
    folder = tmp_path / "sessions"
    folder.mkdir()
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(folder), name], cwd=ROOT)
               for name in ("alpha", "beta")]
    assert [w.wait(timeout=60) for w in writers] == [0, 0]
    import sqlite3

    with sqlite3.connect(folder / search.INDEX_FILE) as con:
        rows = con.execute("SELECT session, count(*) FROM turns GROUP BY session ORDER BY session").fetchall()
    assert rows == [("alpha", 30), ("beta", 30)]


def test_rewind_picker_and_highlighted_search_in_the_terminal(repl_factory, fake_server, home):
    todos = Path(home["GLASSLOOP_TODOS_FILE"])
    fake_server.script(tool_calls(call("add_todo", {"title": "buy milk"})), text("Added milk."),
                       tool_calls(call("add_todo", {"title": "call mom"})), text("Added mom."))
    repl = repl_factory("--yes")
    repl.say("remind me to buy milk")
    repl.expect("Added milk")
    repl.ready()
    after_first = todos.read_bytes()
    repl.say("remind me to call mom")
    repl.expect("Added mom")
    repl.ready()
    repl.say("/rewind")
    repl.expect("rewind to before which turn")
    repl.expect("turn   2  remind me to call mom  \\[add_todo\\]")
    repl.key("\r")  # the last turn is chosen at first
    repl.expect("rewound to before turn 2")
    repl.ready()
    assert todos.read_bytes() == after_first
    repl.say("/sessions milk")
    repl.expect("1 turn with 'milk'")
    repl.ready()
    drawn = repl.transcript[-1]
    assert " turn 1  " in drawn and "remind me to buy \x1b[1;7mmilk\x1b[0m" in drawn  # the word highlighted
    repl.close()


def test_glassloop_resume_reopens_a_branch(fake_server, home):
    fake_server.script(text("one"), text("two"), text("three"))
    first = chat_here({**home, "COLUMNS": "400"}, fake_server.base_url, ["first question", "second question",
                                                                     "/rewind 1"])
    assert first.returncode == 0 and "Traceback" not in first.stdout + first.stderr
    ref = first.stdout.split("kept as branch ")[1].split()[0]
    assert ref.endswith("@1")
    assert "nothing saved" not in first.stdout  # the goodbye line names the branch instead
    assert f"no turns left; the turns rewound are kept as branch {ref} (glassloop --resume {ref})" in first.stdout
    wide = {**home, "COLUMNS": "400"}
    again = chat_here(wide, fake_server.base_url, ["third question"], "--resume", ref)
    assert again.returncode == 0, again.stderr
    assert f"branch {ref} opened as a new session" in again.stdout
    sent = fake_server.chat_requests()[-1].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["first question", "second question", "third question"]
    missing = chat_here(wide, fake_server.base_url, [], "--resume", ref.replace("@1", "@2"))
    assert missing.returncode == 1 and "has no branch @2 (its branches: @1)" in missing.stdout + missing.stderr


def test_a_search_reads_the_journals_the_write_log_names(session, fake_server, monkeypatch):
    monkeypatch.setattr(search, "SETTLED_S", -1e9)  # the folder's time is trusted at once
    three_todo_turns(session, fake_server)
    index = search.Index(session.journal.path.parent)
    assert [h.turn.turn for h in index.search("remind")] == [3, 2, 1]  # a full look: the index is new
    session.undo()  # its journal writes are logged; the folder's time does not change
    assert [h.turn.turn for h in index.search("remind")] == [2, 1]
    assert [h.turn.turn for h in index.search("remind")] == [2, 1]  # the log read at two looks
    with open(session.journal.path, "a", encoding="utf-8") as file:  # by hand: no log
        file.write(json.dumps({"kind": "message", "message": {"role": "user", "content": "remind me by hand"}}) + "\n")
    assert [h.turn.turn for h in index.search("remind")] == [2, 1]
    monkeypatch.setattr(search, "FULL_SCAN_S", 0.0)  # the last full look is old
    assert [h.turn.question for h in index.search("remind")][-1] == "remind me by hand"


def test_rewind_past_a_resume_needs_turns_without_side_effects(session, fake_server):
    three_todo_turns(session, fake_server)
    fake_server.script(text("just talk"))
    session.ask("how are you?")
    assert session.resume(session.session_id)  # this run saw none of the writes
    fake_server.script(text("fine"))
    session.ask("and now?")
    commands.dispatch(session, "/rewind 2")
    assert session.ui.errors[-1] == ("turns 2 to 4 ran before this session was resumed and called add_todo: their "
                                     "changes were not recorded, so /rewind cannot undo them exactly (the earliest "
                                     "turn it can reach is 5)")
    commands.dispatch(session, "/rewind 4")  # a turn of the earlier run that called no tool, and this run's
    assert [m["content"] for m in session.history.messages if m["role"] == "user"] == [
        "remind me to buy milk", "remind me to call mom", "remind me to water plants"]
