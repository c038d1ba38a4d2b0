"""The approval dialog, driven through prompt_toolkit pipe input."""

from __future__ import annotations

import io
from dataclasses import replace
from typing import Any

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from repl.loop.approval import ApprovalRequest, PendingCall, UserChoice
from repl.ui.approval_dialog import ApprovalDialog, check_arguments
from tests.terminal import BACKSPACES, ESC_ENTER

NEW_TODO = ApprovalRequest(
    1, "c1", "add_todo", {"title": "明天下午三点开会", "priority": "medium"},
    {"before": None, "after": {"id": "todo-004", "title": "明天下午三点开会", "priority": "medium",
                               "due": None, "detail": ""}},
    1, 2,
)
CHANGE = ApprovalRequest(
    1, "c2", "update_todo", {"todo_id": "todo-002", "priority": "high"},
    {"before": {"id": "todo-002", "title": "写周报", "priority": "low", "status": "todo"},
     "after": {"id": "todo-002", "title": "写周报", "priority": "high", "status": "todo"}},
    2, 2,
)
DELETE = ApprovalRequest(
    1, "c3", "delete_todo", {"todo_id": "todo-001"},
    {"before": {"id": "todo-001", "title": "[red]old[/] item"}, "after": None}, 1, 1,
)
NOTE = ApprovalRequest(1, "c4", "save_note", {"text": "[bold]hi\x1b[31m"}, None, 1, 1)


def priority_schema(arguments: dict[str, Any]) -> str | None:
    if arguments.get("priority") not in ("low", "medium", "high"):
        return "priority must be one of low, medium, high"
    return None


def ask(keys: str, request: ApprovalRequest = NEW_TODO, validate=priority_schema) -> tuple[UserChoice, str]:
    out = Console(file=io.StringIO(), width=80, force_terminal=False, color_system=None, record=True)
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        dialog = ApprovalDialog(out, input=pipe, output=DummyOutput())
        choice = dialog.ask(request, validate)
    return choice, out.export_text()


def test_yes_shows_a_preview_of_the_new_item() -> None:
    choice, shown = ask("y")
    assert choice == UserChoice("yes")
    assert "add_todo — needs approval (1/2)" in shown
    assert "+ new item" in shown and "todo-004" in shown and "明天下午三点开会" in shown
    assert "due" not in shown and "detail" not in shown  # empty fields say nothing


def test_no_with_a_reason() -> None:
    choice, shown = ask("nnot today\r", CHANGE)
    assert choice == UserChoice("no", "not today")
    assert "~ change todo-002" in shown and "low → high" in shown and "写周报" in shown
    assert "status" not in shown  # unchanged fields other than the title are left out


def test_no_without_a_reason() -> None:
    assert ask("N\r")[0] == UserChoice("no", "")


def test_always_and_rest_of_step() -> None:
    choice, shown = ask("a", DELETE)
    assert choice == UserChoice("always")
    assert "- delete todo-001" in shown and "[red]old[/] item" in shown
    later = (PendingCall("c2", "update_todo", {"todo_id": "todo-002", "priority": "high"}),)
    assert ask("ry", replace(NEW_TODO, later=later))[0] == UserChoice("rest")  # r, then yes to the list


def test_other_keys_are_ignored() -> None:
    assert ask("xq\r zy")[0] == UserChoice("yes")


def test_edit_with_valid_json_reshows_the_panel_then_asks_again() -> None:
    edited = '{"title": "改期", "priority": "high"}'
    choice, shown = ask("e" + BACKSPACES + edited + ESC_ENTER + "y")
    assert choice == UserChoice("yes", arguments={"title": "改期", "priority": "high"})
    assert shown.count("needs approval") == 2
    assert "arguments (edited)" in shown and "改期" in shown


def test_edit_with_invalid_json_then_a_schema_error_then_a_fix() -> None:
    keys = ("e" + BACKSPACES + "{oops" + ESC_ENTER
            + BACKSPACES + '{"title": "t", "priority": "urgent"}' + ESC_ENTER
            + BACKSPACES + '{"title": "t", "priority": "low"}' + ESC_ENTER + "y")
    choice, shown = ask(keys)
    assert choice.arguments == {"title": "t", "priority": "low"}
    assert "✗ not valid JSON" in shown
    assert "✗ priority must be one of low, medium, high" in shown


def test_edit_cancelled_with_ctrl_c_keeps_the_arguments() -> None:
    choice, shown = ask("e" + BACKSPACES + '{"title": "lost"' + "\x03" + "y")
    assert choice == UserChoice("yes")
    assert "edit cancelled" in shown


def test_edit_then_no_keeps_the_reason() -> None:
    choice, _ = ask("e" + BACKSPACES + '{"title": "t", "priority": "low"}' + ESC_ENTER + "nlater\r")
    assert choice == UserChoice("no", "later", {"title": "t", "priority": "low"})


def test_ctrl_c_and_ctrl_d_at_the_choice_raise_keyboard_interrupt() -> None:
    with pytest.raises(KeyboardInterrupt):
        ask("\x03")
    with pytest.raises(KeyboardInterrupt):
        ask("\x04")


def test_a_call_without_preview_shows_escaped_arguments() -> None:
    choice, shown = ask("y", NOTE)
    assert choice.action == "yes"
    assert '"text": "[bold]hi\\u001b[31m"' in shown and "\x1b" not in shown  # JSON-escaped
    assert "needs approval (" not in shown  # a single call has no position


def test_a_preview_that_timed_out_says_so_and_the_call_is_still_asked() -> None:
    late = replace(NEW_TODO, preview={"unavailable": "timed out"})
    choice, shown = ask("y", late)
    assert choice.action == "yes"
    assert "preview unavailable (timed out)" in shown
    assert '"title": "明天下午三点开会"' in shown  # the arguments say what will be done


def test_check_arguments() -> None:
    assert check_arguments('{"priority": "low"}', priority_schema) == ({"priority": "low"}, None)
    assert check_arguments("[1]", priority_schema)[1] == "the arguments must be a JSON object"
    assert "not valid JSON" in (check_arguments("{", priority_schema)[1] or "")


def test_confirm() -> None:
    out = Console(file=io.StringIO(), width=80, color_system=None)
    for keys, expected in (("y", True), ("n", False), ("\x03", False), ("zY", True)):
        with create_pipe_input() as pipe:
            pipe.send_text(keys)
            dialog = ApprovalDialog(out, input=pipe, output=DummyOutput())
            assert dialog.confirm("continue for 8 more steps?") is expected
