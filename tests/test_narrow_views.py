"""Every view fits a narrow terminal: each is drawn at 60 and 40 columns and checked line by
line (nothing cut to a letter, no choice split across lines, nothing wrapped in every row)."""

from __future__ import annotations

import io
import re
from dataclasses import replace

import pytest
from prompt_toolkit.data_structures import Size
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output.vt100 import Vt100_Output
from rich.console import Console

from repl.loop.approval import ApprovalRequest, PendingCall
from repl.ui.approval_dialog import ApprovalDialog
from tests.fakeserver import call, text, tool_calls

WIDTHS = (60, 40)


def console(width: int) -> Console:
    return Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None, record=True)


def prompt_rows(raw: str) -> list[str]:
    """The rows of a prompt_toolkit question as its last draw left them on the screen."""
    draws = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", re.sub(r"\r\x1b\[\d+C", "", draw))
             for draw in raw.split("\x1b[J")]  # a CR then a move right: the last column of a full row
    last = [draw for draw in draws if draw.strip()][-1]
    return [row for row in last.split("\r\n") if row.strip()]


def asked(width: int, keys: str, ask) -> tuple[list[str], str]:
    """What ``ask(dialog)`` showed at ``width`` columns: the question's rows and the console's text."""
    screen, out = io.StringIO(), console(width)
    output = Vt100_Output(screen, lambda: Size(rows=24, columns=width), term="xterm")
    with create_pipe_input() as pipe:
        pipe.send_text("\x1b[1;1R" + keys)  # the cursor position report a terminal would send first
        ask(ApprovalDialog(out, input=pipe, output=output))
    return prompt_rows(screen.getvalue()), out.export_text()


def assert_fits(rows: list[str], width: int) -> None:
    for row in rows:
        assert len(row) <= width, row
        assert not re.search(r"\[[a-z]?$|^[a-z]?\]", row), f"a choice is split: {row!r}"


ADD = ApprovalRequest(1, "c1", "add_todo", {"title": "buy milk"},
                      {"before": None, "after": {"id": "todo-001", "title": "buy milk"}}, 1, 3)
LATER = (PendingCall("c2", "add_todo", {"title": "buy bread and a very long title that goes on and on"}),
         PendingCall("c3", "complete_todo", {"todo_id": "todo-001"}))


@pytest.mark.parametrize("width", WIDTHS)
def test_rest_of_step_lists_each_later_call_whole(width: int) -> None:
    rows, shown = asked(width, "ry", lambda d: d.ask(replace(ADD, later=LATER), lambda a: None))
    names = [line.strip() for line in shown.splitlines() if line.startswith("  ") and not line.startswith("    ")]
    assert names == ["add_todo", "complete_todo"]
    assert all(len(line) <= width for line in shown.splitlines())
    said = " ".join(" ".join(line for line in shown.splitlines() if line.startswith("    ")).split())
    assert "buy bread and a very long title that goes on and on" in said  # whole, wrapped
    assert "…" not in shown  # nothing approved is hidden
    assert_fits(rows, width)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_yes_no_question_breaks_between_words(width: int) -> None:
    rows, _ = asked(width, "y", lambda d: d.confirm("Add the command and its output to your next message?"))
    assert_fits(rows, width)
    assert rows[-1].endswith("[y]es [n]o › y")
    assert " ".join(rows) == "Add the command and its output to your next message? [y]es [n]o › y"


@pytest.mark.parametrize("width", WIDTHS)
def test_the_approval_choices_are_never_split(width: int) -> None:
    rows, _ = asked(width, "y", lambda d: d.ask(replace(ADD, later=LATER), lambda a: None))
    assert_fits(rows, width)
    assert any("[r]est of step (+2)" in row for row in rows)


# ----- the session's views, through the real terminal facade at a given width -----


@pytest.fixture
def narrow(fake_server, tmp_path, monkeypatch):
    """``open(width, model)``: a session (no prompt, approvals auto) against ``fake_server`` whose
    terminal draws into a console ``width`` columns wide; ``shown()`` gives what it drew."""
    from repl.config.load import load_settings
    from repl.session.chat import ChatSession
    from repl.ui.render import Renderer
    from repl.ui.terminal import Terminal

    for name in ("DATA", "STATE", "CONFIG"):
        monkeypatch.setenv(f"XDG_{name}_HOME", str(tmp_path / name.lower()))
    opened = []

    def open_(width: int, model: str = "m", rows: int = 0) -> tuple[ChatSession, Console]:
        """``rows``: a terminal of that height (else a console that is not one)."""
        settings = load_settings({"base_url": fake_server.base_url, "model": model, "approval": "auto",
                                  "weather": "sample", "todos_file": str(tmp_path / "todos.json")},
                                 cwd=tmp_path, env={})
        out = console(width) if not rows else Console(file=io.StringIO(), width=width, height=rows,
                                                      force_terminal=True, color_system=None, record=True)
        terminal = Terminal(settings, None, None, None)
        terminal.renderer = Renderer(out, price=terminal.cost, refresh_per_second=0)
        session = ChatSession(settings, terminal, interactive=False)
        terminal.attach(session)
        session.open_journal()
        opened.append(session)
        return session, out

    yield open_
    for session in opened:
        session.close()


def drawn(out: Console) -> list[str]:
    return out.export_text().splitlines()


def command(session, line: str) -> None:
    from repl.session import commands

    commands.dispatch(session, line)


def three_turns(fake_server, session) -> None:
    fake_server.script(tool_calls(call("add_todo", {"title": "buy milk"})), text("added"), text("hello"),
                       text("and again"))
    session.ask("add milk")
    session.ask("hi")
    session.ask("once more")


@pytest.mark.parametrize("width", WIDTHS)
def test_usage_of_an_unpriced_model_says_cost_unknown_once(narrow, fake_server, width: int) -> None:
    session, out = narrow(width)
    three_turns(fake_server, session)
    out.export_text()  # the turns' own lines
    command(session, "/usage")
    lines = drawn(out)
    assert all(len(line) <= width for line in lines)
    assert sum("unknown" in line for line in lines) == 1 and "cost unknown" in " ".join(lines)
    rows = [row for row in (line.replace("│", " ").split() for line in lines) if row[:1] in (["1"], ["2"], ["3"], ["all"])]
    assert [row[0] for row in rows][:4] == ["1", "2", "3", "all"]  # a row a line, as a table
    assert rows[0][1:5] == ["2", str(session.ledger[0].finished.usage.input_tokens), "0", "10"]


@pytest.mark.parametrize("width", WIDTHS)
def test_usage_of_a_priced_model_fits(narrow, fake_server, width: int) -> None:
    session, out = narrow(width, "gpt-4o-mini")
    three_turns(fake_server, session)
    out.export_text()
    command(session, "/usage")
    lines = drawn(out)
    assert all(len(line) <= width for line in lines)
    assert sum("$0.000" in line for line in lines) == 5  # each turn's cost, the total and the session's, whole
    assert not any(line.strip() in ("cost", "unknown", "by") for line in lines)


@pytest.mark.parametrize("width", WIDTHS)
def test_turn_lines_fit(narrow, fake_server, width: int) -> None:
    session, out = narrow(width, "gpt-4o-mini")
    three_turns(fake_server, session)
    lines = drawn(out)
    assert all(len(line.rstrip()) <= width for line in lines)
    steps = [line for line in lines if line.startswith("step ")]
    assert len(steps) == 2 and all(line.rstrip().endswith((" s", "0001", "0000")) for line in steps)


def test_an_empty_todo_list_says_so(narrow) -> None:
    session, out = narrow(60)
    command(session, "/todos")
    lines = drawn(out)
    assert lines[0].startswith("no todos in ") and str(session.settings.todos_file) in "".join(lines)


@pytest.mark.parametrize("width", WIDTHS)
def test_todos_sessions_and_tools_fit(narrow, fake_server, width: int) -> None:
    session, out = narrow(width)
    three_turns(fake_server, session)
    out.export_text()
    command(session, "/todos")
    todos = drawn(out)
    assert any(line.replace("│", " ").split()[:1] == ["todo-001"] and "buy milk" in line for line in todos)
    command(session, "/sessions")
    sessions = drawn(out)
    assert any(line.startswith(session.session_id) or f"│ {session.session_id}" in line for line in sessions)
    command(session, "/tools")
    tools = drawn(out)
    names = [line.replace("│", " ").split()[0] for line in tools if "built-in" in line]
    assert "complete_todo" in names and "search_files" in names  # whole, never "complete…"
    for line in todos + sessions + tools:
        assert len(line.rstrip()) <= width, line


@pytest.mark.parametrize("width", (100, *WIDTHS))
def test_the_resume_picker_shows_session_ids(width: int) -> None:
    from pathlib import Path

    from repl.archive.journal import SessionInfo
    from repl.ui.picker import session_rows

    same_minute = [SessionInfo(Path(f"20261201-184500-{tail}.jsonl"), 1_764_614_700.0, turns, "gpt-4o-mini",
                               "add milk to the shopping list and remind me tomorrow")
                   for tail, turns in (("a1b2", 1), ("c3d4", 12))]
    rows = session_rows(same_minute, width - 4)  # the picker's own margin
    assert [row.split()[0] for row in rows] == ["20261201-184500-a1b2", "20261201-184500-c3d4"]
    assert all(len(row) <= width - 4 and "add milk" in row for row in rows)
    assert ("1 turn " in rows[0] and "12 turns" in rows[1]) == (width > 40)


# ----- numbers agree -----


def test_the_toolbar_says_cost_unknown_for_an_unpriced_model_from_the_start(narrow, fake_server) -> None:
    session, _ = narrow(100)
    assert session.ui.toolbar(0).endswith("0 tokens · cost unknown")
    three_turns(fake_server, session)
    assert session.ui.toolbar(0).endswith("tokens · cost unknown")
    priced, _ = narrow(100, "gpt-4o-mini")
    assert priced.ui.toolbar(0).endswith(" 0 tokens · $0.0000")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_toolbar_fits(narrow, fake_server, width: int) -> None:
    session, _ = narrow(width, "gpt-4o-mini")
    three_turns(fake_server, session)
    bar = session.ui.toolbar(width - 1)
    assert len(bar) <= width - 1 and bar.startswith("openai · gpt-4o-mini")


def test_the_exit_line_counts_what_usage_counts(narrow, fake_server) -> None:
    """Through undo, /compact and a resume: the goodbye line's tokens are /usage's, written alike."""
    from repl.session.chat import ChatSession

    session, out = narrow(100)
    three_turns(fake_server, session)
    command(session, "/undo")
    fake_server.script(text("a summary of the turns"))
    command(session, "/compact")
    session.close()
    again = ChatSession(session.settings, session.ui, interactive=False)
    session.ui.attach(again)
    assert again.resume(session.session_id, show=False)
    fake_server.script(text("back again"))
    again.ask("one more")
    out.export_text()
    command(again, "/usage")
    said = re.search(r"session: ([\d,]+) tokens", " ".join(drawn(out)))
    assert said, drawn(out)
    session.ui.goodbye(again)
    goodbye = " ".join(drawn(out))
    again.close()
    assert f"· {said.group(1)} tokens ·" in goodbye, goodbye
    assert said.group(1) == f"{again.usage.total:,}" and again.usage.total > 1000


def test_one_step_and_one_tool_call_are_singular(tmp_path) -> None:
    from repl.tracing.timeline import format_turn
    from repl.tracing.trace_html import trace_page

    def turn(steps: int, calls: int) -> list[dict]:
        return [{"type": "turn_started", "turn": 1, "user_text": "q", "t": 0.0},
                {"type": "turn_finished", "turn": 1, "stopped_by": "answer", "steps": steps, "tool_calls": calls,
                 "usage": {"input_tokens": 10, "output_tokens": 2}, "duration_s": 0.5, "t": 0.5}]

    assert "· 1 step · 1 tool call ·" in "\n".join(format_turn(turn(1, 1)))
    assert "· 2 steps · 0 tool calls ·" in "\n".join(format_turn(turn(2, 0)))
    (tmp_path / "t.jsonl").write_text("", encoding="utf-8")
    page = trace_page(tmp_path / "t.jsonl", [turn(1, 1)])
    assert "1 step · 1 tool call ·" in page and "1 steps" not in page


def test_the_step_limit_question_says_one_more_step(fake_server, tmp_path, monkeypatch) -> None:
    from repl.config.load import load_settings
    from repl.session.chat import ChatSession
    from tests.support import StubUI

    class Asked(StubUI):
        questions: list[str] = []

        def confirm(self, question: str) -> bool:
            self.questions.append(question)
            return False

    for name in ("DATA", "STATE", "CONFIG"):
        monkeypatch.setenv(f"XDG_{name}_HOME", str(tmp_path / name.lower()))
    settings = load_settings({"base_url": fake_server.base_url, "approval": "auto", "max_steps": 1,
                              "todos_file": str(tmp_path / "todos.json")}, cwd=tmp_path, env={})
    fake_server.script(tool_calls(call("list_todos", {})), text("the final answer"))
    ui = Asked()
    session = ChatSession(settings, ui, interactive=True)
    try:
        session.ask("what is left?")
    finally:
        session.close()
    assert ui.questions == ["stopped after 2 steps; continue for 1 more step?"]  # the step limit, then the answer


# ----- your own tools: their preview and their undo -----


def test_a_new_item_without_an_id_is_previewed_as_one_new_item() -> None:
    request = ApprovalRequest(1, "c1", "add_item", {"name": "milk", "quantity": 2},
                              {"before": None, "after": {"name": "milk", "quantity": 2}}, 1, 1)
    for width in WIDTHS:
        out = console(width)
        from repl.ui.approval_dialog import approval_panel

        out.print(approval_panel(request, dict(request.arguments), False))
        lines = drawn(out)
        assert "│ + new item " in lines[1] and "item item" not in "\n".join(lines)
        assert all(len(line) <= width for line in lines)


def test_undo_names_the_store_it_changed(tmp_path) -> None:
    from repl.session.commands.conversation import undone_text
    from tools.undo import ItemUndone, Reverted

    milk = ItemUndone("2", None, {"id": "2", "name": "milk"})
    eggs = ItemUndone("3", {"id": "3", "name": "eggs", "quantity": 1}, {"id": "3", "name": "eggs", "quantity": 6})
    said = undone_text([Reverted(tmp_path / "shopping.json", False, (milk, eggs))])
    assert said == "shopping: removed 2 'milk'; put back 3 'eggs' (quantity)"
    assert "todos" not in undone_text([]) and "notes" not in undone_text([])


def test_help_all_goes_through_the_pager_when_taller_than_the_screen(narrow, tmp_path, monkeypatch) -> None:
    """/help stays one screen, printed; /help all (taller than a 24-row terminal) is paged."""
    paged = tmp_path / "paged.txt"
    monkeypatch.setenv("PAGER", f"sh -c 'cat > {paged}'")
    session, out = narrow(60, rows=24)
    command(session, "/help")
    assert "/help all" in out.export_text() and not paged.exists()
    command(session, "/help all")
    assert "/compare" not in out.export_text()  # not printed: paged
    text = paged.read_text(encoding="utf-8")
    assert "/compare" in text and "Ctrl-D exits" in text


@pytest.mark.parametrize("width", WIDTHS)
def test_the_waiting_line_fits(width: int) -> None:
    """The stop hint gives way first, then the line is cut: it never wraps in the live area."""
    from repl.loop.events import ModelRequest, TurnStarted
    from repl.ui.render import Renderer
    from tests.terminal import replay

    for model, hinted in (("gpt-4o", width == 60), ("qwen2.5-coder-7b-instruct-q4_k_m", False)):
        out = Console(file=io.StringIO(), width=width, height=20, force_terminal=True, color_system=None)
        renderer = Renderer(out, refresh_per_second=0)
        renderer(TurnStarted(1, "q"))
        renderer(ModelRequest(1, model, True))
        screen = replay(out.file.getvalue(), width, 20)
        assert screen[-1][2:].startswith("step 1 · waiting for") and len(screen[-1]) <= width
        assert ("Ctrl-C to stop" in screen[-1]) == hinted
        renderer.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_approval_cards_fit(width: int) -> None:
    from repl.ui.approval_dialog import approval_panel

    long = "call mum about the weekend plans, the train and who brings the cake"
    cards = [ApprovalRequest(1, "c1", "update_todo", {"todo_id": "todo-002", "title": long},
                             {"before": {"id": "todo-002", "title": "call mum", "priority": "low"},
                              "after": {"id": "todo-002", "title": long, "priority": "low"}}, 1, 2),
             ApprovalRequest(1, "c2", "delete_todo", {"todo_id": "todo-001"},
                             {"before": {"id": "todo-001", "title": long}, "after": None}, 2, 2)]
    out = console(width)
    for card in cards:
        out.print(approval_panel(card, dict(card.arguments), False))
    lines = drawn(out)
    assert all(len(line) <= width for line in lines)
    assert any("~ change todo-002" in line for line in lines) and any("- delete todo-001" in line for line in lines)
    assert "…" not in "\n".join(lines)  # wrapped whole, never cut
    assert "".join(long.split()) in "".join("".join(line.strip("│ ").split()) for line in lines)


@pytest.mark.parametrize(("provider", "keep_warm", "said"), [
    ("local", "300", "stays loaded for the next glassloop: it exits after 5 min unused"),
    ("local", "0", ""), ("openai", "300", "")])
def test_the_exit_line_says_when_the_local_model_stays_loaded(tmp_path, provider, keep_warm, said) -> None:
    """A kept-warm embedded server outlives the REPL (``keep_warm_s``): the goodbye says so, and
    how to have it unloaded at exit, rather than leave a model in memory unannounced."""
    from types import SimpleNamespace

    from repl.config.load import load_settings
    from repl.ui.render import Renderer
    from repl.ui.terminal import Terminal

    settings = load_settings({"provider": provider}, cwd=tmp_path,
                             env={"GLASSLOOP_KEEP_WARM_S": keep_warm, "OPENAI_API_KEY": "k"})
    terminal = Terminal(settings, None, None, None)
    out = console(120)
    terminal.renderer = Renderer(out, price=terminal.cost, refresh_per_second=0)
    terminal.goodbye(SimpleNamespace(settings=settings, kept_branch=None, saved=False, turn_count=lambda: 0))
    shown = " ".join(out.export_text().split())
    assert "no turns: nothing saved" in shown
    assert (said in shown and "keep_warm_s = 0" in shown) if said else "stays loaded" not in shown, shown
