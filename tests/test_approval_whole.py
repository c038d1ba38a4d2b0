"""The approval card shows every value it asks about whole: wrapped at any width, never cut
with "…"; a value taller than the screen is folded, the card saying how much is hidden and
``[v]iew`` showing it whole (through the pager when it is taller than the screen)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from repl.loop.approval import ApprovalRequest, UserChoice
from repl.ui.approval_dialog import ApprovalDialog, approval_panel, preview_view
from tests.fakeserver import call, text, tool_calls
from tests.support import todos_of

LONG_TITLE = ("call the plumber about the leaking kitchen tap and ask whether the part is in stock "
              "or needs ordering from the wholesaler, then book the earliest slot next week that "
              "does not clash with the dentist, and if nobody answers leave a message with the "
              "flat number and the landlord's landline, high priority")
assert len(LONG_TITLE) == 300


def add_todo(title: str, **fields: str) -> ApprovalRequest:
    after = {"id": "todo-004", "title": title, "detail": "", "priority": "medium", "due": None, **fields}
    return ApprovalRequest(1, "c1", "add_todo", {"title": title, **fields},
                           {"before": None, "after": after}, 1, 1)


def drawn(renderable: object, width: int, height: int = 40) -> list[str]:
    out = Console(file=io.StringIO(), width=width, height=height, force_terminal=False,
                  color_system=None, record=True)
    out.print(renderable)
    return out.export_text().splitlines()


def squeezed(lines: list[str]) -> str:
    """The card's text without its border and without the spaces wrapping put in or took out."""
    return "".join("".join(line.strip().strip("│").split()) for line in lines)


def unspaced(value: str) -> str:
    return "".join(value.split())


@pytest.mark.parametrize("width", [60, 100])
def test_a_long_title_is_shown_whole(width: int) -> None:
    lines = drawn(approval_panel(add_todo(LONG_TITLE), {"title": LONG_TITLE}, False), width)
    assert unspaced(LONG_TITLE) in squeezed(lines)
    assert "…" not in "\n".join(lines)
    assert all(len(line) <= width for line in lines)
    title_rows = [n for n, line in enumerate(lines) if line.startswith("│ title ")]
    assert len(title_rows) == 1
    value_column = lines[title_rows[0]].index("call the plumber")
    continued = lines[title_rows[0] + 1 : title_rows[0] + 4]
    assert all(line[2:value_column].strip() == "" and line[value_column] != " " for line in continued)


@pytest.mark.parametrize("width", [60, 100])
def test_a_change_shows_old_and_new_whole(width: int) -> None:
    before = {"id": "todo-002", "title": "call the plumber", "priority": "low"}
    lines = drawn(preview_view(before, {**before, "title": LONG_TITLE}), width)
    assert unspaced(f"title call the plumber → {LONG_TITLE}") in squeezed(lines)
    assert "…" not in "\n".join(lines) and all(len(line) <= width for line in lines)


def test_edited_arguments_are_shown_whole() -> None:
    request = add_todo("short")
    lines = drawn(approval_panel(request, {"title": LONG_TITLE, "priority": "high"}, True), 60)
    assert unspaced(json.dumps(LONG_TITLE)) in squeezed(lines)
    assert "…" not in "\n".join(lines)


def test_model_text_stays_escaped_when_wrapped() -> None:
    hostile = "[bold red]not markup[/] \x1b[31mred\x1b[0m \x1b]0;title\x07 " + "word " * 40
    lines = drawn(approval_panel(add_todo(hostile), {"title": hostile}, False), 60)
    shown = "\n".join(lines)
    assert "[bold red]not markup[/]" in shown and "\x1b" not in shown and "\x07" not in shown


HUGE = " ".join(f"w{n:05d}" for n in range(3000))  # 20,999 characters


def ask(keys: str, request: ApprovalRequest, width: int = 60, height: int = 24) -> tuple[UserChoice, str]:
    out = Console(file=io.StringIO(), width=width, height=height, force_terminal=False,
                  color_system=None, record=True)
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        choice = ApprovalDialog(out, input=pipe, output=DummyOutput()).ask(request, lambda a: None)
    return choice, out.export_text()


def test_a_value_taller_than_the_screen_is_folded_and_v_shows_it() -> None:
    out = Console(file=io.StringIO(), width=60, height=24, force_terminal=False, color_system=None,
                  record=True)
    card = approval_panel(add_todo(HUGE), {"title": HUGE}, False)
    out.print(card)
    lines = out.export_text().splitlines()
    assert len(lines) <= 24 - 3  # room for the question under it
    assert "…" not in "\n".join(lines)
    notice = " ".join(" ".join(line.strip("│ ") for line in lines).split())
    assert "more lines hidden" in notice and "[v]iew" in notice
    assert [h.label for h in card.hidden(out)] == ["title"]
    choice, shown = ask("vy", add_todo(HUGE))
    assert choice == UserChoice("yes")
    assert unspaced(HUGE) in unspaced(shown)  # [v] printed it whole (no terminal: no pager)


def test_v_is_offered_only_when_something_is_folded() -> None:
    _, shown = ask("vy", add_todo(LONG_TITLE))  # v is not a key here: ignored
    assert "[v]iew" not in shown and shown.count("needs approval") == 1
    assert unspaced(LONG_TITLE) in squeezed(shown.splitlines())


def test_a_preview_without_room_folds_every_long_value() -> None:
    request = add_todo(HUGE, detail=HUGE)
    out = Console(file=io.StringIO(), width=60, height=30, force_terminal=False, color_system=None,
                  record=True)
    card = approval_panel(request, dict(request.arguments), False)
    out.print(card)
    lines = out.export_text().splitlines()
    assert len(lines) <= 30 - 3
    assert [h.label for h in card.hidden(out)] == ["title", "detail"]


# ----- the real program in a pseudo-terminal -----


def card_text(screen: str) -> str:
    lines = screen.splitlines()
    top = max(i for i, line in enumerate(lines) if "needs approval" in line)
    bottom = next(i for i in range(top, len(lines)) if lines[i].startswith("╰"))
    return "\n".join(lines[top : bottom + 1])


def test_the_repl_shows_a_300_character_title_whole_at_60_columns(sized_repl, fake_server, home):
    fake_server.script(tool_calls(call("add_todo", {"title": LONG_TITLE, "priority": "high"})),
                       text("Added."))
    repl = sized_repl(cols=60, rows=30)
    repl.say("remind me about the plumber")
    shown = repl.expect(r"Allow\?[^›]*›")
    assert "[v]iew" not in shown
    repl.key("y")
    repl.expect("Added")
    repl.ready()
    card = card_text(repl.screen())
    assert unspaced(LONG_TITLE) in squeezed(card.splitlines()) and "…" not in card
    assert all(len(line) <= 60 for line in card.splitlines())
    assert any(t["title"] == LONG_TITLE for t in todos_of(home))
    repl.close()


def test_the_repl_folds_a_huge_title_and_v_pages_it(sized_repl, fake_server, home, tmp_path):
    paged = tmp_path / "paged.txt"
    home["PAGER"] = f"sh -c 'cat > {paged}'"
    fake_server.script(tool_calls(call("add_todo", {"title": HUGE})), text("Added."))
    repl = sized_repl(cols=60, rows=24)
    repl.say("remember all of this")
    shown = repl.expect(r"Allow\?[^›]*›")
    assert "[v]iew" in shown
    card = card_text(repl.screen())
    assert len(card.splitlines()) <= 24 - 3
    assert "more lines hidden" in " ".join(card.split()) and "…" not in card
    repl.key("v")
    repl.expect("› v")  # the key taken
    repl.expect(r"Allow\?[^›]*›")  # and the question asked again once the pager is done
    assert unspaced(HUGE) in unspaced(Path(paged).read_text(encoding="utf-8"))
    repl.key("y")
    repl.expect("Added")
    repl.ready()
    assert any(t["title"] == HUGE for t in todos_of(home))
    repl.close()


def test_a_long_line_counts_as_the_rows_it_wraps_to(tmp_path, monkeypatch):
    """One 2,000-character line is 34 rows on a 60-column screen: paged on a 24-row one."""
    from repl.ui.pager import page

    paged = tmp_path / "paged.txt"
    monkeypatch.setenv("PAGER", f"sh -c 'cat > {paged}'")
    assert not page("\x1b[1m" + "x" * 60 + "\x1b[0m\n", height=3, width=60)  # styles take no room
    assert not paged.exists()
    assert page("x" * 2000 + "\n", height=24, width=60)
    assert paged.read_text() == "x" * 2000 + "\n"
