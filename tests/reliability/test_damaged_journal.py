"""Item 15: ``--resume`` of a journal damaged by hand.

A real journal (written by ``Journal`` from a real ``History``: a tool-call
turn, a plain turn, an undone turn) is damaged in one of twenty ways, then the
real command line resumes it with standard input from a pipe and asks one
question of the scripted server (in this process, Typer's test runner: the
program's start is not the subject). Every time: no traceback, exactly one
notice line saying the journal was damaged, the question answered, and the history the
server received passes its check (the chat route checks every request; one
case goes through the Responses route too). A second resume of the same file
(for some kinds; all of them in a full run) sends the same valid history again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from repl.archive.journal import Journal, load
from repl.archive.recap import peek
from repl.config.redact import Redactor
from repl.loop.history import History, check
from tests.fake_responses import check_input
from tests.fakeserver import FakeServer, check_history, text
from tests.reliability.helpers import FULL, record, trace_records
from tests.support import glassloop_here

pytestmark = pytest.mark.timeout(60)
SESSION = "20260101-120000-d4m9"
NOTICE = f"the journal {SESSION}.jsonl was damaged"
SYSTEM = "You are the resumed assistant."

Lines = list[str]


def baseline(path: Path) -> Lines:
    """A real journal: meta, a turn with a tool call, a plain turn, an undone turn (truncate)."""
    history = History(SYSTEM)
    journal = Journal(path, Redactor(), {"session": SESSION, "provider": "default", "model": "m",
                                         "system_prompt": SYSTEM})
    history.begin_turn("what is open?")
    history.add_assistant("", [{"id": "call_1", "name": "list_todos", "arguments": "{}"}])
    history.add_tool_result("call_1", "list_todos", json.dumps({"ok": True, "items": ["写周报"]}))
    history.add_assistant("One item: 写周报.")
    history.begin_turn("thanks")
    history.add_assistant("You're welcome.")
    journal.sync(history)
    history.begin_turn("add a todo")
    history.add_assistant("Added.")
    journal.sync(history)
    history.drop_last_turn()  # /undo
    journal.sync(history)
    journal.close()
    return path.read_text(encoding="utf-8").splitlines()


def records(lines: Lines) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines]


def dump(recs: list[Any]) -> Lines:
    return [json.dumps(r, ensure_ascii=False) for r in recs]


def with_message(lines: Lines, index: int, change: Callable[[dict[str, Any]], Any]) -> Lines:
    """The journal with its ``index``-th message record's message replaced by ``change(message)``."""
    recs = records(lines)
    message_recs = [r for r in recs if r["kind"] == "message"]
    message_recs[index]["message"] = change(message_recs[index]["message"])
    return dump(recs)


def inserted(lines: Lines, at: int, *new: Any) -> Lines:
    return lines[:at] + [n if isinstance(n, str) else json.dumps(n) for n in new] + lines[at:]


def message(msg: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "message", "message": msg}


NESTED = "[" * 100_000 + "]" * 100_000
# Each damage: the journal's lines (meta, 8 messages, truncate to 6) -> its new text.
# Records added after the truncate (at len(ls)) all reach the replayed history.
DAMAGES: dict[str, Callable[[Lines], str | bytes]] = {
    "truncated last line": lambda ls: "\n".join(ls[:-1] + [ls[-1][: len(ls[-1]) // 2]]),
    "truncated line in the middle": lambda ls: "\n".join(ls[:3] + [ls[3][:20]] + ls[4:]),
    "empty file": lambda ls: "",
    "binary garbage": lambda ls: "\n".join(ls[:4]).encode() + b"\n\x00\xff\xfe\x80garbage\x00\n"
                                 + os.urandom(64).replace(b"\n", b"") + b"\n" + "\n".join(ls[4:]).encode(),
    "non-dict lines": lambda ls: "\n".join(inserted(ls, 2, "[1, 2]", '"text"', "42", "null", "true")),
    "unknown role": lambda ls: "\n".join(with_message(ls, 4, lambda m: {**m, "role": "wizard"})),
    "wrong types in every field": lambda ls: "\n".join(inserted(
        ls, len(ls), message({"role": 5, "content": "x"}), message({"role": "user", "content": ["a", 1]}),
        message({"role": "assistant", "content": {"x": 1}, "tool_calls": "call it"}),
        message({"role": "tool", "tool_call_id": 7, "content": 3}),
        {"kind": "message", "message": "not a message"}, {"kind": 3}, {"kind": "truncate", "length": "2"})),
    "tool result without a call": lambda ls: "\n".join(inserted(
        ls, 6, message({"role": "tool", "tool_call_id": "call_nowhere", "name": "x", "content": "{}"}))),
    "call without a result": lambda ls: "\n".join(ls[:3] + ls[4:]),  # the result of call_1 is gone
    "two user messages in a row": lambda ls: "\n".join(inserted(ls, 6, message({"role": "user", "content": "again?"}))),
    "huge numbers": lambda ls: "\n".join(inserted(
        ls, len(ls), '{"kind": "truncate", "length": 100000000000000000000000000000}',
        '{"kind": "truncate", "length": 1e308}', '{"kind": "truncate", "length": -3}',
        '{"kind": "message", "message": {"role": "user", "content": 1e999}}',
        '{"kind": "message", "message": {"role": "user", "content": ' + "9" * 5000 + "}}")),
    "missing fields": lambda ls: "\n".join(inserted(
        ls, len(ls), message({"content": "no role"}), message({"role": "tool", "content": "no id"}),
        {"kind": "message"}, {"message": {"role": "user", "content": "no kind"}}, {"kind": "truncate"})),
    "null content": lambda ls: "\n".join(with_message(with_message(ls, 5, lambda m: {**m, "content": None}),
                                                      4, lambda m: {**m, "content": None})),
    "nested garbage": lambda ls: "\n".join(inserted(
        with_message(ls, 3, lambda m: {**m, "extra": {"a": [[[[{"b": None}]]]]}, "content": m["content"]}),
        len(ls), '{"kind": "message", "message": ' + NESTED + "}",
        message({"role": "assistant", "content": "ok", "tool_calls": [{"id": "c9", "name": {"n": 1},
                                                                       "arguments": [[1]]}]}))),
    "duplicate call ids": lambda ls: "\n".join(ls[:5] + ls[2:5] + ls[5:]),  # the tool turn twice
    "truncate past the end": lambda ls: "\n".join(inserted(ls, 4, {"kind": "truncate", "length": 999})),
    "meta damaged": lambda ls: "\n".join(dump([{**records(ls)[0], "system_prompt": ["not", "text"]}])
                                         + ls[1:] + dump([{"kind": "meta", "system_prompt": "second"}])),
    "meta missing": lambda ls: "\n".join(ls[1:]),
    "tool calls malformed": lambda ls: "\n".join(with_message(ls, 1, lambda m: {
        **m, "tool_calls": [{"id": "call_1", "name": "list_todos", "arguments": {"as": "object"}}, "junk",
                            {"id": None, "name": "list_todos"}]})),
    "crlf and blank lines": lambda ls: "\r\n\r\n".join(ls) + "\r\n\r\n\r\n" + ls[2][:5],
}


NO_META = {"empty file", "meta damaged", "meta missing"}
# Resumed a second time in every run (all kinds with GLASSLOOP_RELIABILITY_FULL=1).
SECOND_RESUME = {"call without a result", "duplicate call ids", "unknown role", "wrong types in every field"}


def write_damaged(home: dict[str, str], damage: str) -> Path:
    folder = Path(home["XDG_DATA_HOME"]) / "glassloop" / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{SESSION}.jsonl"
    damaged = DAMAGES[damage](baseline(path))
    path.write_bytes(damaged if isinstance(damaged, bytes) else damaged.encode("utf-8", "surrogatepass"))
    return path


def resume(server: FakeServer, home: dict[str, str], *extra: str) -> Any:
    """``glassloop --resume`` with one question piped in (in this process)."""
    server.script(text("resumed answer"))
    return glassloop_here("--resume", SESSION, "--base-url", server.base_url, *extra, env=home,
                          stdin="what now?\n")


def test_there_are_enough_kinds_of_damage() -> None:
    assert len(DAMAGES) >= 15


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_the_look_before_the_prompt_declines_each_damage(damage: str, home) -> None:
    """``--resume`` in a terminal draws its recap from a look at the journal's lines
    (``recap.peek``); every damage here is in the lines it reads, so it declines and the
    session is built before the prompt, notice first, as in the runs above. It never raises."""
    assert peek(write_damaged(home, damage)) is None


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_resume_of_a_damaged_journal(damage: str, fake_server: FakeServer, home) -> None:
    path = write_damaged(home, damage)
    result = resume(fake_server, home)
    out = result.stdout + result.stderr
    assert "Traceback" not in out, out
    assert result.returncode == 0, out
    assert [line for line in out.splitlines() if NOTICE in line] != [], out
    assert len([line for line in out.splitlines() if NOTICE in line]) == 1
    assert "resumed answer" in result.stdout
    assert fake_server.history_errors == []
    sent = fake_server.chat_requests()[-1].body["messages"]
    assert check_history(sent) == [] and sent[-1] == {"role": "user", "content": "what now?"}
    if damage not in NO_META:  # the journal's own system prompt, else the default one
        assert [m["content"] for m in sent if m["role"] == "system"] == [SYSTEM]

    notices = [r["message"] for r in trace_records(home) if r["type"] == "notice" and NOTICE in r["message"]]
    assert len(notices) == 1  # the whole line, as traced (the terminal wraps it)
    record("damaged_journal", damage=damage, notice=notices[0], messages_sent=len(sent))
    if damage not in SECOND_RESUME and not FULL:
        return
    # the file now holds the repair: a second resume sends the same valid history, plus the new turn
    first = sent
    result = resume(fake_server, home)
    assert "Traceback" not in result.stdout + result.stderr and "resumed answer" in result.stdout
    again = fake_server.chat_requests()[-1].body["messages"]
    assert fake_server.history_errors == [] and again[: len(first)] == first
    assert check(History.from_json({"messages": load(path)[1]}).messages) == []


def test_a_damaged_journal_resumes_on_the_responses_api(fake_server: FakeServer, home) -> None:
    write_damaged(home, "wrong types in every field")
    result = resume(fake_server, home, "--api", "responses")
    out = result.stdout + result.stderr
    assert "Traceback" not in out and NOTICE in out and "resumed answer" in result.stdout, out
    body = [r.body for r in fake_server.requests if r.path == "/v1/responses"][-1]
    assert check_input(body["input"]) == [] and fake_server.history_errors == []


def test_an_intact_journal_resumes_without_a_notice(fake_server: FakeServer, home) -> None:
    folder = Path(home["XDG_DATA_HOME"]) / "glassloop" / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    baseline(folder / f"{SESSION}.jsonl")
    result = resume(fake_server, home)
    assert "was damaged" not in result.stdout + result.stderr and "resumed answer" in result.stdout
    sent = fake_server.chat_requests()[-1].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["what is open?", "thanks", "what now?"]
