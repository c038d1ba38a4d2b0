"""How far an approval reaches: ``a`` rules, ``r`` (rest of step), destructive calls, edits.

The real agent loop with the in-process scripted provider and the real todo tools,
and the real approval dialog reading keys from a prompt_toolkit pipe; the
``/approve`` and ``/reset`` commands in the real program in a pseudo-terminal.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from repl.loop.agent import Limits, run_turn
from repl.loop.approval import Approver
from repl.loop.events import ApprovalDecided, EventLog
from repl.loop.history import History
from repl.ui.approval_dialog import ApprovalDialog
from tests.fakeserver import call, text, tool_calls
from tests.reliability.helpers import trace_records
from tests.terminal import BACKSPACES, ESC_ENTER


def run_with_keys(provider, registry, keys: str, turns: int = 1):
    """``turns`` turns (one "go" each) answered by ``keys``: the decisions and what the dialog printed."""
    out = Console(file=io.StringIO(), width=120, color_system=None, record=True)
    log, history = EventLog(), History("You are a test assistant.")
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        approver = Approver("ask", ApprovalDialog(out, input=pipe, output=DummyOutput()))
        for _ in range(turns):
            run_turn(history, "go", provider=provider, registry=registry, approver=approver,
                     limits=Limits(), emit=log)
    return [(e.name, e.allowed, e.by) for e in log.of(ApprovalDecided)], out.export_text()


def todos(path: Path) -> dict[str, dict]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {t["id"]: t for t in (data["todos"] if isinstance(data, dict) else data)}


def test_rest_lists_the_calls_first_and_destructive_calls_still_ask(scripted, registry,
                                                                     todos_file):
    scripted.script(tool_calls(call("add_todo", {"title": "buy milk"}),
                               call("update_todo", {"todo_id": "todo-003", "priority": "low"}),
                               call("delete_todo", {"todo_id": "todo-002"})),
                    text("done"))
    # r on the first call, yes to the list; at the delete: a is not offered (ignored), then n
    decisions, shown = run_with_keys(scripted, registry, "r" + "y" + "a" + "n\r")
    assert decisions == [("add_todo", True, "user"), ("update_todo", True, "rule"),
                         ("delete_todo", False, "user")]
    listing = shown.split("[r] approves")[1]
    assert "update_todo" in listing and "todo-003" in listing
    assert "still asked one by one" in listing and "delete_todo" in listing.split("still asked")[1]
    assert "todo-002" in todos(todos_file)
    assert "destructive: asked every time" in shown


def test_always_never_covers_a_destructive_tool(scripted, registry, todos_file):
    scripted.script(tool_calls(call("delete_todo", {"todo_id": "todo-001"})), text("deleted"),
                    tool_calls(call("delete_todo", {"todo_id": "todo-003"})), text("kept"))
    decisions, _ = run_with_keys(scripted, registry, "a" + "y" + "n\r", turns=2)
    assert decisions == [("delete_todo", True, "user"), ("delete_todo", False, "user")]
    assert set(todos(todos_file)) == {"todo-002", "todo-003"}


def test_an_edit_recomputes_the_preview(scripted, registry, todos_file):
    scripted.script(tool_calls(call("update_todo", {"todo_id": "todo-003", "priority": "low"})),
                    text("changed"))
    edited = '{"todo_id": "todo-002", "priority": "low"}'
    decisions, shown = run_with_keys(scripted, registry, "e" + BACKSPACES + edited + ESC_ENTER + "y")
    assert decisions == [("update_todo", True, "user")]
    _, before_edit, after_edit = shown.split("needs approval")  # the panel before and after the edit
    assert "回复邮件" in before_edit and "medium → low" in before_edit  # the original target, todo-003
    assert "arguments (edited)" in after_edit
    assert "写周报" in after_edit and "high → low" in after_edit  # the edited target, todo-002
    assert "回复邮件" not in after_edit
    assert todos(todos_file)["todo-002"]["priority"] == "low"
    assert todos(todos_file)["todo-003"]["priority"] == "medium"


def _dialog_or_done(repl, done: str) -> bool:
    """True when the approval question appears, False when the turn finished without it."""
    return repl.child.expect(["Allow", done]) == 0


def test_approve_and_reset_clear_the_always_rules(repl_factory, fake_server, home):
    fake_server.script(*[reply for name in ("A", "B", "C") for reply in (
        tool_calls(call("add_todo", {"title": f"item {name}"})), text(f"Added {name}."))])
    repl = repl_factory()
    repl.say("add A")
    repl.expect("Allow")
    repl.child.send("a")  # at once: the question is only drawn once keys count
    repl.expect("Added A")
    repl.ready()
    repl.say("/approve ask")
    repl.expect("approval mode is now ask")
    repl.ready()
    repl.say("add B")
    assert _dialog_or_done(repl, "Added B"), "the 'always' rule survived /approve ask"
    assert "approval rules cleared (always: add_todo)" in repl.screen()
    repl.child.send("a")  # at once: the question is only drawn once keys count
    repl.expect("Added B")
    repl.ready()
    repl.say("/reset")
    repl.expect("new conversation")
    repl.ready()
    repl.say("add C")
    assert _dialog_or_done(repl, "Added C"), "the 'always' rule survived /reset"
    flat = " ".join(repl.screen().split())  # the /reset line may wrap at the terminal's width
    assert flat.count("approval rules cleared (always: add_todo)") == 2
    repl.child.send("a")
    repl.expect("Added C")
    repl.ready()
    repl.say("/approve")
    repl.expect("approval mode: ask; always: add_todo")
    repl.ready()
    decided = [(r["allowed"], r["by"]) for r in trace_records(home) if r.get("type") == "approval_decided"]
    assert decided == [(True, "user")] * 3
    repl.close()
