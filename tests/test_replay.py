"""``glassloop replay SESSION``: a saved session's questions on another model, side by side.

A 3-turn session is made with the real REPL against the scripted server; its replay on a
second scripted model prints each turn's tool calls and answers beside the original's and a
summary, and its side effects are a dry run: every file under the isolated home is the same,
byte for byte, after it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.fakeserver import call, text, tool_calls
from tests.support import glassloop_here

pytestmark = pytest.mark.timeout(60)

QUESTIONS = ["what is open?", "add milk to my todos", "thanks"]


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def saved_session(fake_server, home, tmp_path):
    """A 3-turn session (a read-only call, a note added, a plain answer); its id."""
    home["GLASSLOOP_NOTES_FILE"] = str(tmp_path / "notes.json")
    fake_server.script(tool_calls(call("list_todos", {})), text("Two are open."),
                       tool_calls(call("list_todos", {"status": "todo"})), text("Milk is on the list already."),
                       text("You are welcome."))
    made = glassloop_here("--base-url", fake_server.base_url, env=home,
                          stdin="".join(f"{q}\n" for q in QUESTIONS))
    assert made.returncode == 0, made.stderr
    return made.stdout.split("glassloop --resume ")[-1].split()[0]


def script_replay(fake_server):
    fake_server.script(tool_calls(call("list_todos", {})), text("There are two open todos."),
                       tool_calls(call("add_todo", {"title": "milk"}), call("add_note", {"text": "milk"})),
                       text("I could not add milk: it was denied."),
                       text("You are welcome."))


def test_replay_of_a_3_turn_session_compares_each_turn_and_changes_no_store(saved_session, fake_server, home,
                                                                           tmp_path):
    before = files_under(tmp_path)
    sent_before = len(fake_server.chat_requests())
    home["COLUMNS"] = "140"  # each cell on one line
    script_replay(fake_server)
    result = glassloop_here("replay", saved_session, "--model", "second-model", "--base-url", fake_server.base_url,
                            env=home)
    assert result.returncode == 0, result.stderr
    assert files_under(tmp_path) == before  # todos, notes, journal, trace: byte for byte
    replayed = fake_server.chat_requests()[sent_before:]
    assert {r.body["model"] for r in replayed} == {"second-model"}
    assert [m["content"] for m in replayed[-1].body["messages"] if m["role"] == "user"] == QUESTIONS
    assert "replay 1/3 on second-model: 'what is open?'" in result.stderr
    out = result.stdout
    assert re.findall(r"^turn (\d): '(.*)'$", out, flags=re.M) == [("1", QUESTIONS[0]), ("2", QUESTIONS[1]),
                                                                   ("3", QUESTIONS[2])]
    turn2 = out.split("turn 2:", 1)[1].split("turn 3:", 1)[0]
    header, original_model = turn2.splitlines()[1], fake_server.chat_requests()[0].body["model"]
    assert f"original · {original_model}" in header and "replay · second-model" in header
    calls = [line for line in turn2.splitlines() if "tool calls" in line or "add_note" in line]
    assert 'list_todos {"status": "todo"}' in calls[0] and 'add_todo {"title": "milk"} → denied' in calls[0]
    assert 'add_note {"text": "milk"} → denied' in turn2
    assert "Milk is on the list already." in turn2 and "I could not add milk: it was denied." in turn2
    summary = out.split("3 of 3 turns replayed on second-model", 1)[1]
    assert "side effects denied: 2 calls, nothing changed" in summary
    assert "same tools called: 2 of 3 turns (turn 2 differs)" in summary
    assert "answers differ: 2 of 3 turns" in summary
    assert re.search(r"^original: [\d,]+ tokens \([\d,]+ in, [\d,]+ out\) · [\d.]+ s$", summary, flags=re.M)
    assert re.search(r"^replay: [\d,]+ tokens \([\d,]+ in, [\d,]+ out\) · [\d.]+ s$", summary, flags=re.M)


def test_replay_json(saved_session, fake_server, home, tmp_path):
    before = files_under(tmp_path)
    script_replay(fake_server)
    result = glassloop_here("replay", saved_session, "--model", "second-model", "--base-url", fake_server.base_url,
                            "--json", env=home)
    assert result.returncode == 0, result.stderr
    assert files_under(tmp_path) == before
    report = json.loads(result.stdout)
    assert (report["session"], report["model"]) == (saved_session, "second-model")
    turns = report["turns"]
    assert [t["question"] for t in turns] == QUESTIONS
    assert [[c["name"] for c in t["replay"]["calls"]] for t in turns] == [["list_todos"], ["add_todo", "add_note"], []]
    assert [c["error"] for c in turns[1]["replay"]["calls"]] == ["denied", "denied"]
    assert turns[1]["original"]["calls"] == [{"name": "list_todos", "arguments": {"status": "todo"}, "error": None}]
    assert [(t["same_tools"], t["answers_differ"]) for t in turns] == [(True, True), (False, True), (True, False)]
    assert turns[0]["original"]["usage"]["input_tokens"] > 0 and turns[0]["original"]["duration_s"] >= 0
    assert report["summary"]["same_tools"] == [1, 3] and report["summary"]["answers_differ"] == [1, 2]


def test_replay_of_a_session_that_does_not_exist(home):
    result = glassloop_here("replay", "no-such-session", env=home)
    assert result.returncode == 1 and "no saved session 'no-such-session'" in result.stderr
    assert "Traceback" not in result.stderr


def test_replay_on_a_model_that_cannot_be_reached_says_so_in_one_line(saved_session, home, tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    before = files_under(tmp_path)
    result = glassloop_here("replay", saved_session, "--base-url", f"http://127.0.0.1:{port}/v1", env=home)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert re.search(r"^error: cannot reach provider .*Connection refused", result.stderr, flags=re.M), result.stderr
    assert "0 of 3 turns replayed" not in result.stdout and "1 of 3 turns replayed" in result.stdout
    assert files_under(tmp_path) == before
