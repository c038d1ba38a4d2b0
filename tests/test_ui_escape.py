"""Untrusted text is cleaned of terminal escapes and never read as Rich markup."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from repl.loop.events import (
    ErrorEvent,
    GuardTripped,
    Notice,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
    Usage,
)
from repl.ui.escape import clean, one_line
from repl.ui.render import Renderer

HOSTILE = "[red]x[/] then [/] and [bold]loud and \x1b[31mred\x1b[0m \x1b]0;pwned\x07 [link=http://a]l[/link]"


def console() -> Console:
    return Console(file=io.StringIO(), width=80, force_terminal=False, color_system=None, record=True)


def test_clean_removes_escape_sequences() -> None:
    assert clean("a\x1b[31mred\x1b[0m b") == "ared b"
    assert clean("\x1b[2J\x1b[H\x1b[10;5Hmoved") == "moved"
    assert clean("\x1b]0;title\x07text") == "text"  # OSC ended by BEL
    assert clean("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\") == "link"  # OSC 8 hyperlink, ST
    assert clean("\x9b31mC1 CSI") == "C1 CSI"
    assert clean("\x1bPq#0;2;0;0;0\x1b\\sixel") == "sixel"  # DCS
    assert clean("\x1b7saved\x1b8") == "saved"


def test_clean_removes_control_characters_but_keeps_newline_and_tab() -> None:
    assert clean("a\x00b\x07c\x08d\re\x7ff\x85g") == "abcdefg"
    assert clean("line 1\n\tline 2\r\n") == "line 1\n\tline 2\n"
    assert clean("lone escape \x1b") == "lone escape "
    assert clean("a\x1b\nb") == "a\nb"
    assert clean("abc\u202egnp.exe") == "abcgnp.exe"  # right-to-left override


def test_clean_keeps_ordinary_text() -> None:
    text = "写周报 — [red]markup stays[/] `code` émoji 🎉 | a | b |"
    assert clean(text) == text
    assert clean("") == ""


@given(st.text(alphabet=st.sampled_from(list("ab[];m\x1b\x07\x9b\\\n\t\r\x00 0123P"))))
def test_clean_by_lines_equals_clean_whole(text: str) -> None:
    # the Markdown stream cleans line by line; no pattern may span a newline
    assert "\n".join(clean(line) for line in text.split("\n")) == clean(text)
    assert clean(clean(text)).replace("\x1b", "") == clean(text)


def test_one_line() -> None:
    assert one_line("\n\n  first \x1b[1mline\x1b[0m \nsecond") == "first line"
    assert one_line("x" * 100, 10) == "x" * 9 + "…"
    assert one_line("   \n  ") == ""


def test_model_text_with_markup_and_ansi_is_shown_literally() -> None:
    out = console()
    renderer = Renderer(out, refresh_per_second=0)
    renderer(TurnStarted(1, "q"))
    for piece in (HOSTILE[:7], HOSTILE[7:19], HOSTILE[19:]):  # split inside markup and escapes
        renderer(TextDelta(1, piece))
    renderer(TurnFinished(1, "answer", 1, 0, Usage(), 0.1))
    text = out.export_text()
    assert "[red]x[/] then [/] and [bold]loud and red" in text
    assert "\x1b" not in text and "pwned" not in text and "\x07" not in text


def test_tool_names_arguments_and_results_are_escaped() -> None:
    out = console()
    renderer = Renderer(out, refresh_per_second=0)
    renderer(ToolCallStarted(1, "c1", "[bold]tool", {"q": HOSTILE}, False))
    result = {"ok": True, "result": {"text": "[/]\x1b[31m[red]boom"}}
    renderer(ToolCallFinished(1, "c1", "[bold]tool", True, result, 0.002))
    renderer(ToolCallStarted(1, "c2", "t2", "[/] not json", False))
    error = {"ok": False, "error": {"type": "[red]bad[/]", "message": "[/] \x1b[2Jcleared"}}
    renderer(ToolCallFinished(1, "c2", "t2", False, error, 0.001, "[red]bad[/]"))
    text = out.export_text()
    assert "[bold]tool" in text
    assert "→ [/][red]boom" in text
    assert "[/] not json" in text
    assert "✗ [red]bad[/]" in text and "→ [/] cleared" in text
    assert "\x1b" not in text


def test_notices_errors_guards_and_helpers_are_escaped() -> None:
    out = console()
    renderer = Renderer(out, refresh_per_second=0)
    renderer(Notice("[/]notice\x1b[1m"))
    renderer(ErrorEvent("auth", "[red]401[/] \x1b[31mbad key"))
    renderer(GuardTripped(2, "repeat", "[bold]same call"))
    renderer.info("[/]info")
    renderer.error("[bold]oops\nsecond line")
    renderer.header("[red]p", "[/]m", "ask", "[b]id")
    renderer.table("[red]t", ["[/]col"], [["[bold]cell\x1b[0m", None]])
    renderer.markdown("# [red]Title[/]\n\n\x1b[31mbody [/]")
    text = out.export_text()
    for literal in ("[/]notice", "error: [red]401[/] bad key", "guard repeat: [bold]same call",
                    "[/]info", "error: [bold]oops", "[red]p · [/]m", "[b]id", "[/]col",
                    "[bold]cell", "[red]Title[/]", "body [/]"):
        assert literal in text, literal
    assert "\x1b" not in text and "second line" not in text
