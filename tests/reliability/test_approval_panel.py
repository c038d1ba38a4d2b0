"""Approvals in the real program in a pseudo-terminal: ``r`` lists what it approves, the
panel shows every value whole within 60 columns, a call that will fail says so, ``/undo``
names what it undid."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakeserver import call, text, tool_calls


def todos(home_env) -> dict[str, dict]:
    data = json.loads(Path(home_env["GLASSLOOP_TODOS_FILE"]).read_text(encoding="utf-8"))
    return {t["id"]: t for t in (data["todos"] if isinstance(data, dict) else data)}


def panel(screen: str, name: str) -> list[str]:
    """The lines of the last approval panel of ``name`` on the screen."""
    lines = screen.splitlines()
    top = max(i for i, line in enumerate(lines) if line.startswith(f"╭─ {name} — needs approval"))
    bottom = next(i for i in range(top, len(lines)) if lines[i].startswith("╰"))
    return lines[top : bottom + 1]


def test_rest_of_step_lists_every_call_and_a_delete_still_asks(sized_repl, fake_server, home):
    fake_server.script(tool_calls(call("add_todo", {"title": "buy milk"}),
                                  call("update_todo", {"todo_id": "todo-003", "priority": "low"}),
                                  call("delete_todo", {"todo_id": "todo-002"})),
                       text("done"))
    repl = sized_repl()
    repl.say("tidy up")
    repl.expect("Allow")
    repl.key("r")
    repl.expect(r"Approve this call and these 1 call\?|Approve this call and these")
    listing = repl.child.before
    assert "update_todo" in listing and "todo-003" in listing and '"priority": "low"' in listing
    assert "still asked one by one" in listing and "delete_todo" in listing
    repl.key("y")
    repl.expect("destructive: asked every time")  # the delete gets its own panel
    repl.expect("Allow")
    repl.key("n")
    repl.expect("Reason")
    repl.say("")
    repl.expect("done")
    repl.ready()
    now = todos(home)
    assert "todo-002" in now and now["todo-003"]["priority"] == "low"
    assert any(t["title"] == "buy milk" for t in now.values())
    repl.close()


def test_the_panel_shows_every_value_whole_at_60_columns(sized_repl, fake_server):
    fake_server.script(tool_calls(call("add_todo", {
        "title": "call mum about the weekend plans, the train and who brings the cake",
        "detail": "ask about the train times " * 8, "priority": "high", "due": "2026-12-01",
        "tag": "family"})), text("Added."))
    repl = sized_repl(cols=60, rows=30)
    repl.say("remind me")
    repl.expect("Allow")
    repl.key("n")
    repl.expect("Reason")
    repl.say("")
    repl.expect("Added")
    repl.ready()
    shown = panel(repl.screen(), "add_todo")
    assert len(shown) <= 30 - 3 and all(len(line) <= 60 for line in shown), "\n".join(shown)
    assert "arguments" not in "\n".join(shown)  # the preview already says all of them
    assert "…" not in "\n".join(shown)  # the long detail is wrapped, not cut
    unwrapped = " ".join(" ".join(line.strip("│ ") for line in shown).split())
    assert " ".join(("ask about the train times " * 8).split()) in unwrapped
    repl.close()


def test_a_call_that_will_fail_says_so(sized_repl, fake_server):
    fake_server.script(tool_calls(call("delete_todo", {"todo_id": "todo-099"})), text("No such item."))
    repl = sized_repl(cols=60)
    repl.say("delete 99")
    repl.expect("Allow")
    assert "no todo todo-099: this call will fail" in repl.screen() + repl.child.before
    repl.key("y")
    repl.expect("No such item")
    repl.ready()
    repl.close()


def test_undo_says_which_items_it_undid(sized_repl, fake_server, home):
    before = Path(home["GLASSLOOP_TODOS_FILE"]).read_bytes()
    fake_server.script(tool_calls(call("add_todo", {"title": "call mum"}),
                                  call("delete_todo", {"todo_id": "todo-003"}),
                                  call("update_todo", {"todo_id": "todo-002", "priority": "low"})),
                       text("Done."))
    repl = sized_repl("--yes")
    repl.say("reshuffle")
    repl.expect("Done")
    repl.ready()
    repl.say("/undo")
    repl.expect(r"removed the last turn[^\r\n]*")
    said = repl.child.after
    repl.ready()
    said = " ".join(repl.screen().split("removed the last turn", 1)[1].split())  # unwrapped
    assert "removed todo-004 'call mum'" in said
    assert "restored todo-003 '回复邮件'" in said
    assert "put back todo-002 '写周报' (priority" in said
    assert "todos.json" not in said  # the items, not the file
    assert Path(home["GLASSLOOP_TODOS_FILE"]).read_bytes() == before
    repl.close()
