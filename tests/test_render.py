"""The Renderer: tool panels, usage and summary lines, decisions, the live area."""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
import time

import pytest
from rich.console import Console

from repl.loop.events import (
    ApprovalDecided,
    ApprovalRequested,
    ModelRequest,
    ModelUsage,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
    Usage,
)
from repl.ui.event_views import result_summary, summary_line, usage_line
from repl.ui.render import Renderer
from tests.terminal import replay


def console(terminal: bool = False, height: int = 25) -> Console:
    return Console(file=io.StringIO(), width=80, height=height, force_terminal=terminal,
                   color_system=None, record=not terminal, legacy_windows=False)


def finished(call_id: str, name: str, result: dict, ms: float, error: str | None = None) -> ToolCallFinished:
    return ToolCallFinished(1, call_id, name, bool(result.get("ok")), result, ms / 1000, error)


def test_two_parallel_calls_each_get_one_finished_panel() -> None:
    out = console()
    renderer = Renderer(out, refresh_per_second=0)
    renderer(TurnStarted(1, "q"))
    renderer(ModelRequest(1, "m", True))
    renderer(TextDelta(1, "Checking."))
    renderer(ToolCallStarted(1, "a", "list_todos", {}, False))
    renderer(ToolCallStarted(1, "b", "get_todo", {"todo_id": "todo-002"}, False))
    assert out.export_text(clear=False).rstrip() == "Checking."  # running calls are only live
    renderer(finished("b", "get_todo", {"ok": True, "result": {"id": "todo-002", "title": "写周报"}}, 1.2))
    renderer(finished("a", "list_todos", {"ok": True, "result": [{"id": 1}, {"id": 2}, {"id": 3}]}, 3))
    text = out.export_text()
    assert text.count("─ get_todo ─") == 1 and text.count("─ list_todos ─") == 1
    assert text.index("get_todo") < text.index("list_todos")  # in the order they finished
    assert '{"todo_id": "todo-002"}  → todo-002 写周报' in text
    assert "{}  → 3 items" in text
    assert "✓ 1 ms" in text and "✓ 3 ms" in text


def test_failed_denied_and_long_calls() -> None:
    out = console()
    renderer = Renderer(out, refresh_per_second=0)
    renderer(ToolCallStarted(1, "a", "calc", "{not json", False))
    error = {"ok": False, "error": {"type": "invalid_arguments", "message": "bad JSON\ndetails"}}
    renderer(finished("a", "calc", error, 0.4, "invalid_arguments"))
    renderer(ToolCallStarted(1, "b", "add_todo", {"title": "x"}, True))
    denied = {"ok": False, "error": {"type": "denied", "message": "the call was not allowed: busy"}}
    renderer(finished("b", "add_todo", denied, 0, "denied"))
    arguments = {"content": "line\n" * 400, "path": "p", "tags": [f"tag{i}" for i in range(30)]}
    renderer(ToolCallStarted(1, "c", "write_file", arguments, True))
    renderer(finished("c", "write_file", {"ok": True, "result": None}, 1520))
    text = out.export_text()
    assert "{not json  → bad JSON" in text and "✗ invalid_arguments · 0 ms" in text
    assert "→ the call was not allowed: busy" in text and "denied · 0 ms" in text
    assert "more lines" in text and "→ done" in text and "✓ 1520 ms" in text
    assert text.count("line") < 50 and "(2,000 characters)" in text  # long arguments are cut


def test_result_summaries() -> None:
    def summary(result: dict, ok: bool = True) -> str:
        return result_summary(finished("x", "t", {"ok": ok, **result}, 1))

    assert summary({"result": []}) == "0 items"
    assert summary({"result": [1]}) == "1 item"
    assert summary({"result": {"todos": [1, 2]}}) == "2 items"
    assert summary({"result": "first line\nsecond"}) == "first line"
    assert summary({"result": {"title": "写周报"}}) == "写周报"
    assert summary({"result": {"todo": {"id": "todo-001", "title": "meet", "status": "todo"}}}) == "todo-001 meet"
    assert summary({"result": 42}) == "42"
    assert summary({"value": 3}) == '{"value": 3}'
    assert summary({"error": {"type": "timeout", "message": "took too long"}}, ok=False) == "took too long"
    assert summary({"todo": {"id": "t-1", "title": "x"}, "arguments_edited_by_user": {"title": "x"}}) == (
        "t-1 x (arguments edited)")


def test_a_call_with_edited_arguments_shows_the_arguments_it_ran_with() -> None:
    out = console()
    renderer = Renderer(out, refresh_per_second=0)
    renderer(ToolCallStarted(1, "a", "add_todo", {"title": "3pm"}, True))
    result = {"ok": True, "todo": {"id": "todo-001", "title": "4pm"}, "arguments_edited_by_user": {"title": "4pm"}}
    renderer(finished("a", "add_todo", result, 2))
    text = out.export_text()
    assert '{"title": "4pm"}  → todo-001 4pm (arguments edited)' in text and "3pm" not in text


def test_a_repeated_call_gets_a_dim_line_not_a_panel() -> None:
    out = console()
    renderer = Renderer(out, refresh_per_second=0)
    renderer(ToolCallStarted(2, "b", "add_todo", {"title": "[bold]milk"}, True))
    repeat = {"ok": True, "already_ran": "add_todo already ran …", "earlier_result": {"todo": {"id": "todo-009"}}}
    renderer(ToolCallFinished(2, "b", "add_todo", True, repeat, 0.0, None, "a"))
    renderer(ToolCallStarted(3, "c", "add_todo", {"title": "x"}, True))
    denied = {"ok": False, "error": {"type": "denied", "message": "this identical call was denied earlier …"}}
    renderer(ToolCallFinished(3, "c", "add_todo", False, denied, 0.0, "denied", "a"))
    lines = out.export_text().splitlines()
    assert lines == ['add_todo {"title": "[bold]milk"} · already ran this turn, not run again',
                     'add_todo {"title": "x"} · denied earlier this turn, not asked again']


def test_usage_line() -> None:
    line = usage_line(ModelUsage(1, Usage(310, 256, 42), 0.81, "stop"))
    assert line.plain == "step 1 · in 310 (cached 256) · out 42 · 0.8 s"
    line = usage_line(ModelUsage(2, Usage(1520, 0, 38, estimated=True), 1.25, "stop", retries=2))
    assert line.plain == "step 2 · in ~1,520 · out ~38 · 1.2 s · 2 retries"


def test_summary_line_with_cost_and_highlighted_stop_reason() -> None:
    done = TurnFinished(3, "answer", 2, 3, Usage(870, 256, 40), 1.93)
    assert summary_line(done, 0.0012, width=120).plain == (
        "turn 3 · 2 steps · 3 tool calls · 910 tokens (in 870 · cached 256 · out 40)"
        " · $0.0012 · 1.9 s · answer")
    assert summary_line(done, 0.0012).plain == (  # 80 columns: shortened, not wrapped
        "turn 3 · 2 steps · 3 tool calls · 910 tokens · $0.0012 · 1.9 s · answer")
    stopped = summary_line(TurnFinished(1, "max_steps", 8, 1, Usage(10, 0, 5, True), 20.0), width=120)
    assert "1 tool call · ~15 tokens (in ~10 · out ~5) · 20.0 s · stopped: max_steps" in stopped.plain
    assert "$" not in stopped.plain
    assert any("yellow" in str(span.style) and stopped.plain[span.start:span.end] == "stopped: max_steps"
               for span in stopped.spans)


def test_renderer_prints_usage_and_priced_summary() -> None:
    out = console()
    renderer = Renderer(out, refresh_per_second=0, price=lambda usage: usage.total * 2e-6)
    renderer.verbose = True  # a usage line per call also in a one-call turn
    renderer(ModelUsage(1, Usage(300, 0, 20), 0.5, "stop"))
    renderer(TurnFinished(1, "answer", 1, 0, Usage(300, 0, 20), 0.5))
    quiet = console()
    hidden = Renderer(quiet, refresh_per_second=0, show_usage=False)
    hidden(ModelUsage(1, Usage(300, 0, 20), 0.5, "stop"))
    assert "step 1 · in 300 · out 20 · $0.0006 · 0.5 s" in out.export_text(clear=False)  # cost per call
    assert "$0.0006" in out.export_text()
    assert quiet.export_text() == ""


def test_decisions_by_rule_or_mode_get_a_dim_line_and_user_decisions_none() -> None:
    out = console()
    renderer = Renderer(out, refresh_per_second=0)
    renderer(ApprovalRequested(1, "a", "add_todo", {}))
    renderer(ApprovalDecided(1, "a", "add_todo", True, "mode"))
    renderer(ApprovalDecided(1, "b", "add_todo", True, "rule"))
    renderer(ApprovalDecided(1, "c", "add_todo", False, "mode", "read-only mode: side effects are not allowed"))
    renderer(ApprovalDecided(1, "d", "add_todo", True, "user"))
    lines = out.export_text().splitlines()
    assert lines == ["add_todo: auto-approved (mode auto)",
                     "add_todo: auto-approved (your earlier choice)",
                     "add_todo denied: read-only mode: side effects are not allowed"]


def test_live_area_shows_spinner_panels_and_leaves_only_finished_panels() -> None:
    out = console(terminal=True, height=20)
    renderer = Renderer(out, refresh_per_second=0)
    renderer(TurnStarted(1, "q"))
    renderer(ModelRequest(1, "gpt", True))
    assert "waiting for gpt" in replay(out.file.getvalue(), 80, 20)[-1]
    renderer(ToolCallStarted(1, "a", "slow_tool", {"n": 1}, False))
    renderer(ToolCallStarted(1, "b", "other_tool", {"n": 2}, True))
    screen = replay(out.file.getvalue(), 80, 20)
    assert sum("running" in line for line in screen) == 1  # a spinner in each panel
    assert sum("waiting for approval" in line for line in screen) == 1
    renderer(ApprovalRequested(1, "b", "other_tool", {"n": 2}))  # the dialog gets a clean screen
    assert "running" not in "\n".join(replay(out.file.getvalue(), 80, 20))
    renderer(ApprovalDecided(1, "b", "other_tool", True, "user"))
    renderer(finished("a", "slow_tool", {"ok": True, "result": "ok"}, 5))
    renderer(finished("b", "other_tool", {"ok": True, "result": "fine"}, 7))
    renderer(TurnFinished(1, "answer", 1, 2, Usage(1, 0, 1), 0.1))
    screen = replay(out.file.getvalue(), 80, 20)
    text = "\n".join(screen)
    assert "running" not in text and "waiting" not in text
    assert text.count("─ slow_tool ─") == 1 and text.count("─ other_tool ─") == 1
    assert screen[-1].startswith("turn 1")


def test_close_prints_the_open_tail_and_stops_the_live_area() -> None:
    out = console(terminal=True)
    renderer = Renderer(out, refresh_per_second=50)
    renderer(TurnStarted(1, "q"))
    renderer(TextDelta(1, "Partial answer that was cut"))
    time.sleep(0.05)
    renderer.close()
    assert not renderer.live_active
    screen = replay(out.file.getvalue(), 80, 25)
    assert screen == ["Partial answer that was cut"]


def test_suspended_and_waiting_from_another_thread() -> None:
    out = console(terminal=True)
    renderer = Renderer(out, refresh_per_second=50)
    with renderer.suspended():
        worker = threading.Thread(target=renderer.waiting, args=("starting the local model… 3 s",))
        worker.start()
        worker.join()
        assert not renderer.live_active  # remembered, not drawn, while suspended
    assert renderer.live_active
    renderer.refresh()
    assert "starting the local model… 3 s" in replay(out.file.getvalue(), 80, 25)[-1]
    renderer.waiting(None)
    assert not renderer.live_active
    assert replay(out.file.getvalue(), 80, 25) == []


def test_terminal_echo_is_off_only_while_the_live_area_is_up(monkeypatch) -> None:
    termios = pytest.importorskip("termios")  # POSIX only
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    with os.fdopen(slave, "w", encoding="utf-8", closefd=False) as tty_out, \
            os.fdopen(slave, "r", encoding="utf-8", closefd=False) as tty_in:
        monkeypatch.setattr(sys, "stdin", tty_in)
        out = Console(file=tty_out, width=80, height=25, force_terminal=True, color_system=None)
        renderer = Renderer(out, refresh_per_second=0)

        def echo() -> bool:
            return bool(termios.tcgetattr(slave)[3] & termios.ECHO)

        assert echo()
        renderer(ModelRequest(1, "m", True))
        assert not echo()  # a typed key (or ^C) would shift the live area's lines
        renderer(ApprovalRequested(1, "a", "add_todo", {}))
        assert echo()  # the dialog's prompt handles the terminal itself
        renderer(ApprovalDecided(1, "a", "add_todo", True, "user"))
        renderer(TurnFinished(1, "answer", 1, 0, Usage(), 0.1))
        assert echo()
    os.close(slave)
    os.close(master)


def test_ctrl_c_while_rendering_is_raised_after_the_event_is_drawn(monkeypatch) -> None:
    out = console()
    renderer = Renderer(out, refresh_per_second=0)
    original_print = out.print

    def interrupted_print(*args, **kwargs) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C arrives in the middle of drawing
        original_print(*args, **kwargs)

    monkeypatch.setattr(out, "print", interrupted_print)
    with pytest.raises(KeyboardInterrupt):
        renderer(TextDelta(1, "First block.\n\nSecond block.\n"))
    monkeypatch.setattr(out, "print", original_print)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    renderer.close()
    text = out.export_text()
    assert text.count("First block.") == 1 and text.count("Second block.") == 1


