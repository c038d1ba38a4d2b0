"""A process that writes todos, notes and a session journal until it is killed.

    python -m tests.reliability.crash_writer mixed TODOS NOTES JOURNAL START
    python -m tests.reliability.crash_writer adder TODOS NAME COUNT

``mixed``: forever, through the real tool functions and the real journal, add
a todo, add a note and journal one whole turn (question, tool call, result,
answer; some answers long enough to span several writes). After each write
has returned it prints an acknowledgement line (``todo T``, ``note N``,
``turn Q``), so everything acknowledged must survive a kill -9. An existing
journal is resumed the way the session resumes one.

``adder``: add COUNT todos titled NAME-i, then exit.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from repl.archive.journal import Journal, load
from repl.config.redact import Redactor
from repl.loop.history import History
from tools.notes import make_note_tools
from tools.registry import Registry
from tools.todos import make_todo_tools

SECRET = "sk-crash-writer-secret-000000"
THINK_S = 0.01


def ack(kind: str, name: str) -> None:
    sys.stdout.write(f"{kind} {name}\n")
    sys.stdout.flush()


def open_journal(path: Path) -> tuple[Journal, History]:
    if path.exists():
        meta, messages = load(path)
        history = History.from_json({"system_prompt": meta.get("system_prompt", ""), "messages": messages})
        journal = Journal(path, Redactor([SECRET]))
        journal.adopt(history)
        journal.sync(history)
        return journal, history
    history = History("crash test")
    return Journal(path, Redactor([SECRET]), {"session": path.stem, "system_prompt": "crash test"}), history


def journal_turn(journal: Journal, history: History, question: str, n: int) -> None:
    """One turn, synced after each message as the session does; the pauses stand for
    the model and the tool at work (most of a real turn is spent waiting)."""
    history.begin_turn(question)
    journal.sync(history)
    time.sleep(THINK_S)
    call_id = f"{question}-call"
    history.add_assistant("", [{"id": call_id, "name": "list_todos", "arguments": "{}"}])
    journal.sync(history)
    time.sleep(THINK_S)
    history.add_tool_result(call_id, "list_todos", json.dumps({"ok": True, "count": n}))
    journal.sync(history)
    time.sleep(THINK_S)
    size = 20_000 if n % 3 == 0 else 40  # long answers take several write calls
    history.add_assistant(f"answer {question} " + "x" * size)
    journal.sync(history)


def mixed(todos: Path, notes: Path, journal_path: Path, start: int) -> None:
    registry = Registry([*make_todo_tools(todos), *make_note_tools(notes)])
    journal, history = open_journal(journal_path)
    ack("ready", str(start))
    n = start
    while True:
        result = registry.call("add_todo", {"title": f"t{n}", "detail": "d" * (n % 500)})
        assert result["ok"], result
        ack("todo", f"t{n}")
        result = registry.call("add_note", {"text": f"n{n}"})
        assert result["ok"], result
        ack("note", f"n{n}")
        journal_turn(journal, history, f"q{n}", n)
        ack("turn", f"q{n}")
        n += 1


def adder(todos: Path, name: str, count: int) -> None:
    registry = Registry(make_todo_tools(todos))
    for i in range(count):
        result = registry.call("add_todo", {"title": f"{name}-{i}"})
        assert result["ok"], result


if __name__ == "__main__":
    if sys.argv[1] == "mixed":
        mixed(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), int(sys.argv[5]))
    else:
        adder(Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
