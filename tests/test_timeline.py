"""The timeline of a turn (``/trace``, ``glassloop trace ID``, the HTML page), from trace records
with known times: the axis starts at 0 at the turn's start, a step-mode pause, an approval
wait, a retry and the client's start-up are drawn as what they are, a turn sent with an
edited question is titled with what was sent, and undone and retried turns are marked.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest

from repl.loop.stepping import Continue
from repl.tracing.timeline import CELLS, draw_turn, turn_rows, undone_turns
from repl.tracing.trace import turns
from tests.fakeserver import call, text, tool_calls
from tests.support import glassloop_here

T = 1_800_000_000.0  # the turn's start, as a wall clock would stamp it
USAGE = {"input_tokens": 900, "cached_tokens": 0, "output_tokens": 20}


def paused_turn(turn: int = 1, model: str = "gpt-4o-mini", typed: str = "what is open?",
                sent: str = "what is open today?", start: float = T) -> list[dict[str, Any]]:
    """A turn in step mode: 3 s paused before the first call (the question edited), the call
    (0.5 s of client start-up, an attempt refused with 429 and 0.5 s waited, then 1 s),
    a todo approved after 2 s that runs 0.1 s, then the answer in 0.5 s. 8 s in all."""
    def at(seconds: float, record: dict[str, Any]) -> dict[str, Any]:
        return {"turn": turn, "time": start + seconds, **record}

    return [
        at(0.0, {"type": "turn_started", "turn": turn, "user_text": typed}),
        at(3.0, {"type": "step_paused", "step": 1, "before": "model_call", "paused_s": 3.0}),
        at(3.0, {"type": "user_step", "step": 1, "action": "edited_by_user",
                 "detail": {"role": "user", "before": typed, "after": sent}}),
        at(3.0, {"type": "model_request", "step": 1, "model": model, "tools": True}),
        at(4.0, {"type": "model_retry", "step": 1, "attempt": 2, "attempts": 3, "delay_s": 0.5,
                 "reason": "429 rate limited"}),
        at(5.5, {"type": "model_usage", "step": 1, "usage": USAGE, "latency_s": 2.0, "finish_reason": "tool_calls",
                 "retries": 1}),
        at(5.5, {"type": "tool_call_started", "step": 1, "call_id": "c1", "name": "add_todo",
                 "arguments": {"title": "pack"}, "side_effects": True}),
        at(5.5, {"type": "approval_requested", "step": 1, "call_id": "c1", "name": "add_todo", "arguments": {}}),
        at(7.5, {"type": "approval_decided", "step": 1, "call_id": "c1", "name": "add_todo", "allowed": True,
                 "by": "user", "decided_s": 2.0}),
        at(7.5, {"type": "tool_call_finished", "step": 1, "call_id": "c1", "name": "add_todo", "ok": True,
                 "result": {"ok": True}, "duration_s": 0.0}),
        at(7.5, {"type": "model_request", "step": 2, "model": model, "tools": True}),
        at(8.0, {"type": "model_usage", "step": 2, "usage": USAGE, "latency_s": 0.5, "finish_reason": "stop"}),
        at(8.0, {"type": "turn_finished", "turn": turn, "stopped_by": "answer", "steps": 2, "tool_calls": 1,
                 "usage": USAGE, "duration_s": 8.0}),
    ]


def cells(line: str, cell: str) -> list[int]:
    return [i for i, ch in enumerate(line) if ch == cell]


def test_the_axis_starts_at_0_and_a_3_second_step_pause_is_drawn():
    lines = draw_turn(paused_turn(), 80)
    axis = next(line for line in lines if line.rstrip().endswith("8.00 s"))
    pause = next(line for line in lines if line.startswith("paused"))
    model = next(line for line in lines if line.startswith("model 1"))
    bar_at = axis.index("0 s")
    assert axis[:bar_at].strip() == "" and axis[bar_at - 1] == " "
    width = axis.index("8.00 s") + len("8.00 s") - bar_at  # the bar's cells, from 0 to the turn's end
    dots = cells(pause, CELLS["pause"])
    assert dots[0] == bar_at and dots == list(range(bar_at, dots[-1] + 1))  # from 0, without a gap
    assert len(dots) == pytest.approx(width * 3 / 8, abs=1)  # 3 s of 8
    assert "step mode 3.0 s · edited" in pause
    # the call after it: start-up, then the refused attempt and its wait, then the answer
    setup, retry, answer = (cells(model, CELLS[part]) for part in ("setup", "retry", "model"))
    assert setup and retry and answer and max(dots) < min(setup) < min(retry) < min(answer)
    assert len(retry) == pytest.approx(width * 1 / 8, abs=1)
    todo = next(line for line in lines if line.startswith("  add_todo"))
    assert len(cells(todo, CELLS["approval"])) == pytest.approx(width * 2 / 8, abs=1) and "waited 2.0 s" in todo
    assert all(len(line) <= 80 for line in lines), lines
    legend = " ".join(lines)
    assert "─ paused in step mode" in legend and "× failed attempt and the wait to retry" in legend


def test_a_turn_sent_with_an_edited_question_is_titled_with_what_was_sent():
    lines = draw_turn(paused_turn(), 100)
    assert lines[0] == "turn 1: 'what is open today?' · gpt-4o-mini"
    assert lines[1] == "  (edited in step mode; typed 'what is open?')"


def test_rows_in_seconds_from_the_turns_start():
    rows, total = turn_rows(paused_turn())
    assert total == 8.0
    assert [(row.kind, row.start, row.end) for row in rows] == [
        ("pause", 0.0, 3.0), ("model", 3.0, 5.5), ("tool", 5.5, 7.5), ("model", 7.5, 8.0)]
    assert [(s.part, s.start, s.end) for s in rows[1].segments] == [
        ("setup", 3.0, 3.5), ("retry", 3.5, 4.5), ("model", 4.5, 5.5)]


def test_an_undo_after_the_turn_does_not_stretch_it():
    records = [*paused_turn(), {"type": "turn_undone", "turn": 1, "time": T + 60}]
    assert turn_rows(records)[1] == 8.0
    assert draw_turn(records, 80, {1})[0].endswith(" · undone")


def write_trace(folder: Path, *groups: list[dict[str, Any]]) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "demo-session.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for group in groups for r in group), encoding="utf-8")
    return path


def two_turns(folder: Path) -> Path:
    """Turn 1 on gpt-4o-mini, undone (``/retry --model``); turn 2 the same question on model-b."""
    first = [*paused_turn(), {"type": "turn_undone", "turn": 1, "time": T + 20}]
    return write_trace(folder, first, paused_turn(2, "model-b", start=T + 30))


def test_glassloop_trace_draws_every_turns_timeline(home, tmp_path):
    path = two_turns(tmp_path / "sent")
    env = {**home, "COLUMNS": "90"}
    shown = glassloop_here("trace", str(path), env=env)
    assert shown.returncode == 0, shown.stderr
    titles = [line for line in shown.stdout.splitlines() if re.match(r"turn \d+:", line)]
    assert titles == ["turn 1: 'what is open today?' · gpt-4o-mini · undone", "turn 2: 'what is open today?' · model-b"]
    assert shown.stdout.count("paused in step mode") == 2
    assert all(len(line) <= 90 for line in shown.stdout.splitlines())
    one = glassloop_here("trace", str(path), "--turn", "2", env=env)
    assert [line for line in one.stdout.splitlines() if line.startswith("turn 2")] and "turn 1" not in one.stdout
    events = glassloop_here("trace", str(path), "--events", env=env)  # the event list, of the last turn
    assert "paused 3.0 s before model call 1 (step mode)" in events.stdout and "turn 1" not in events.stdout


class Continuing:
    """A person in step mode who lets every call go as it is."""

    def before_model_call(self, view: Any) -> Continue:
        return Continue()

    def after_model_answer(self, calls: list[Any]) -> list[Continue]:
        return [Continue()] * len(calls)


def test_a_session_traces_its_step_pauses_and_its_undone_turns(session, fake_server, monkeypatch):
    fake_server.script(tool_calls(call("list_todos", {})), text("Nothing is open."))
    monkeypatch.setattr(session, "interactive", True)  # step mode needs someone to pause for
    monkeypatch.setattr(session.ui, "stepper", Continuing)
    assert session.set_step(True)
    session.ask("what is open?")
    session.set_step(False)
    session.undo()
    records = [json.loads(line) for line in session.trace.path.read_text(encoding="utf-8").splitlines()]
    pauses = [r for r in records if r["type"] == "step_paused"]
    assert [(r["step"], r["before"]) for r in pauses] == [(1, "model_call"), (1, "tools"), (2, "model_call")]
    assert all(isinstance(r["paused_s"], float) and r["paused_s"] >= 0 for r in pauses)
    assert [r["turn"] for r in records if r["type"] == "turn_undone"] == [1]
    groups = turns(records)
    lines = draw_turn(groups[0], 80, undone_turns(groups))
    assert lines[0].endswith(" · undone") and len([line for line in lines if line.lstrip().startswith("paused")]) == 3


# ---- the HTML page --------------------------------------------------------------------


def page_of(home: dict[str, str], tmp_path: Path, path: Path) -> str:
    page = tmp_path / "page.html"
    made = glassloop_here("trace", str(path), "--html", str(page), env=home)
    assert made.returncode == 0, made.stderr
    return page.read_text(encoding="utf-8")


def test_the_page_tells_models_costs_step_mode_retries_and_undone_turns(home, tmp_path):
    text = page_of(home, tmp_path, two_turns(tmp_path / "sent"))
    turns = text.split('<section class="turn"')[1:]
    assert len(turns) == 2
    first, second = turns
    assert "<q>what is open today?</q>" in first and "typed <q>what is open?</q>" in first
    assert 'class="tag edited"' in first and 'class="tag undone"' in first and "retry of turn" not in first
    assert 'class="tag retry">retry of turn 1<' in second and 'class="tag undone"' not in second
    # model names, tokens and cost per call, without opening a JSON body
    assert re.search(r'class="info">gpt-4o-mini · in 900 \(0 cached\) out 20 · \$0\.0001<', first)
    assert re.search(r'class="info">model-b · in 900 \(0 cached\) out 20<', second)  # no price known
    assert "cost unknown" in second and "on model-b" in second
    # what step mode changed, the retry with its model, the pause and the wait as bars of their own
    assert "step mode: the question edited before model call 1: what is open today?" in first
    assert "model call 1 on gpt-4o-mini: attempt 2 of 3 after 0.5 s (429 rate limited)" in first
    for part in ("pause", "setup", "retry", "model", "approval", "tool"):
        assert f'<span class="seg {part}" title=' in first, part
    assert '<span class="seg pause" title="paused in step mode 3.00 s" style="left:0.00%;width:37.50%">' in first
    assert "<span>0 s</span>" in first


def test_each_legend_swatch_stands_before_its_own_label(home, tmp_path):
    text = page_of(home, tmp_path, two_turns(tmp_path / "sent"))
    legend = re.search(r'<p class="legend">(.*?)</p>', text)
    assert legend is not None
    keys = re.findall(r'<span class="key"><span class="sw (\w+)"></span>([^<]+)</span>', legend.group(1))
    assert dict(keys) == {"model": "model call", "tool": "tool running", "approval": "waiting for approval",
                          "pause": "paused in step mode", "retry": "failed attempt and the wait to retry",
                          "setup": "before the request (client start-up)"}


# ---- the page in a real browser ------------------------------------------------------

CHROMIUM = shutil.which("chromium")
PWNED = "document.body.style.background='#ff0000'"  # a script that ran would paint the page red


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
         f"--user-data-dir={tmp_path / 'chromium'}", *args],
        capture_output=True, text=True, timeout=120)


def pixels(png: bytes) -> tuple[int, list[bytes]]:
    """The width and the RGB rows of an 8-bit RGB or RGBA PNG (as Chromium writes them)."""
    width, height, depth, colour = struct.unpack(">IIBB", png[16:26])
    assert depth == 8 and colour in (2, 6), (depth, colour)
    step = 3 if colour == 2 else 4
    data, at = b"", 8
    while at < len(png):
        size, kind = struct.unpack(">I4s", png[at:at + 8])
        data += png[at + 8:at + 8 + size] if kind == b"IDAT" else b""
        at += size + 12
    raw, stride, rows, previous = zlib.decompress(data), width * step, [], bytearray(width * step)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - step] if x >= step else 0
            b, c = previous[x], previous[x - step] if x >= step else 0
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line) if step == 3 else bytes(v for i, v in enumerate(line) if i % 4 != 3))
        previous = line
    return width, rows


def xs(row: bytes, colour: str) -> list[int]:
    rgb = bytes.fromhex(colour)
    return [x for x in range(len(row) // 3) if row[3 * x:3 * x + 3] == rgb]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")
@pytest.mark.timeout(300)
def test_the_page_in_a_browser_draws_the_timeline_and_runs_no_script(home, tmp_path):
    turn = paused_turn(typed=f"<script>{PWNED}</script>", sent=f"<img src=x onerror=\"{PWNED}\">")
    html_path = tmp_path / "page.html"
    html_path.write_text(page_of(home, tmp_path, write_trace(tmp_path / "sent", turn)), encoding="utf-8")
    shot = tmp_path / "shot.png"
    made = chromium(tmp_path, "--window-size=1000,700", f"--screenshot={shot}", html_path.as_uri())
    assert made.returncode == 0 and shot.is_file(), made.stderr[-2000:]
    _, rows = pixels(shot.read_bytes())
    assert not [y for y, row in enumerate(rows) if b"\xff\x00\x00" in row and xs(row, "ff0000")], "a script ran"
    # the model rows: a blue bar, wider than a legend swatch, with the track's grey before it
    bars = [(y, blue) for y, row in enumerate(rows) if len(blue := xs(row, "3b6fc9")) > 40]
    assert bars, "no model bar was drawn"
    y, first_bar = bars[0]
    track = xs(rows[y], "f3f3f3")
    left, end = min(track), max(first_bar) + 1  # the track begins at 0 s; the first call ends at 5.5 s of 8
    assert (min(first_bar) - left) / (end - left) == pytest.approx(4.5 / 5.5, abs=0.03)
    paused = [x for row in rows[max(0, y - 25):y] for x in xs(row, "8a8a8a")]  # the row above
    assert paused and min(paused) - left <= 2  # the pause starts at 0 s ...
    assert (max(paused) + 1 - left) / (end - left) == pytest.approx(3 / 5.5, abs=0.03)  # ... and lasts 3 s
    waited = [x for row in rows[y:y + 25] for x in xs(row, "e0b400")]  # the row below
    assert waited and (min(waited) - left) / (end - left) == pytest.approx(1.0, abs=0.03)  # asked at 5.5 s


BAD_VALUES: list[Any] = [None, {"k": [None]}, 10**400, float("nan"),
                         "<script>alert(1)</script>\ud800\x1b]0;pwned\x07\x1b[2J\x9b31mred\u202eevil\nline"]


# how the router chose the first call's tools (``Routed``), as the trace records it
ROUTED = {"type": "routed", "turn": 1, "time": T + 3.0, "step": 1, "mode": "required", "allowed": ["add_todo"],
          "top": [["add_todo", 0.7], ["none", 0.2], ["list_todos", 0.1]], "threshold": 0.3, "by": "meaning"}


def test_a_routing_is_drawn_in_words_beside_its_step():
    [group] = turns(paused_turn()[:3] + [ROUTED] + paused_turn()[3:])
    [line] = [line for line in draw_turn(group, 120) if "routed to" in line]
    assert line.startswith("  model step 1 routed to add_todo")
    assert line.endswith(" · add_todo 0.70 · none 0.20 · list_todos 0.10 (needs 0.30)")


def test_every_field_of_a_paused_turn_made_wrong_still_draws(tmp_path):
    """A trace from someone else: each field of each record (the new ones too) of the wrong type."""
    from repl.tracing.trace_html import trace_page

    good = paused_turn()[:3] + [ROUTED] + paused_turn()[3:] + [{"type": "turn_undone", "turn": 1, "time": T + 9},
                            {"type": "compared", "turn": 1, "model": "m", "tool_calls": ["add_todo"], "usage": USAGE,
                             "duration_s": 1.0, "stopped_by": "answer", "answer": "done", "error": "", "time": T + 9}]
    for n, bad in enumerate(BAD_VALUES):
        variants = []
        for i, record in enumerate(good):
            for key in record:
                copy = json.loads(json.dumps(good))
                copy[i][key] = bad
                variants += copy
        path = tmp_path / f"bad-{n}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in variants), encoding="utf-8")
        groups = turns(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
        page = trace_page(path, groups)
        assert "<script>alert" not in page and page.endswith("</html>\n")
        undone = undone_turns(groups)
        for group in groups:
            lines = draw_turn(group, 80, undone)
            assert all(len(line) <= 80 and not set(line) & set("\x1b\x07\x9b\u202e") for line in lines), (bad, lines)


def test_what_step_mode_changed_is_told_beside_its_pause(home, tmp_path):
    """Tools off for a call, a call skipped, a result made by hand: on the pause's row and in the page's notes."""
    turn = [
        {"type": "turn_started", "turn": 1, "user_text": "plan my day", "time": T},
        {"type": "step_paused", "step": 1, "before": "model_call", "paused_s": 0.5, "time": T + 0.5},
        {"type": "model_request", "step": 1, "model": "m", "tools": True, "time": T + 0.5},
        {"type": "model_usage", "step": 1, "usage": USAGE, "latency_s": 0.5, "time": T + 1.0},
        {"type": "step_paused", "step": 1, "before": "tools", "paused_s": 1.0, "time": T + 2.0},
        {"type": "user_step", "step": 1, "action": "skipped_by_user", "call_id": "a", "name": "add_todo", "time": T + 2.0},
        {"type": "user_step", "step": 1, "action": "result_by_user", "call_id": "b", "name": "get_weather",
         "detail": {"ok": True, "forecast": "sun"}, "time": T + 2.0},
        {"type": "step_paused", "step": 2, "before": "model_call", "paused_s": 0.5, "time": T + 2.5},
        {"type": "user_step", "step": 2, "action": "tools_disabled_by_user", "time": T + 2.5},
        {"type": "model_request", "step": 2, "model": "m", "tools": False, "time": T + 2.5},
        {"type": "model_usage", "step": 2, "usage": USAGE, "latency_s": 0.5, "time": T + 3.0},
        {"type": "turn_finished", "turn": 1, "stopped_by": "answer", "steps": 2, "tool_calls": 2, "time": T + 3.0},
    ]
    assert [row.info for row in turn_rows(turn)[0] if row.kind == "pause"] == [
        "step mode 500 ms", "step mode 1.0 s · skipped add_todo · result by hand get_weather",
        "step mode 500 ms · tools off"]
    assert [line.split()[0] for line in draw_turn(turn, 100)[2:7]] == ["paused", "model", "paused", "paused", "model"]
    text = html.unescape(page_of(home, tmp_path, write_trace(tmp_path / "sent", turn)))
    assert "step mode: add_todo skipped" in text and 'step mode: get_weather result by hand: {"ok": true' in text
    assert "step mode: model call 2 sent without tools" in text


def test_compare_runs_are_traced_beside_the_turn_and_shown_with_their_model(session, fake_server):
    from repl.session import commands
    from repl.tracing.trace_html import trace_page

    fake_server.script(text("Two are open."), tool_calls(call("list_todos", {})), text("Two, on model-a."),
                       text("Two, says model-b."))
    session.ask("what is open?")
    commands.dispatch(session, "/compare model-a model-b")
    path = session.trace.path
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    runs = [r for r in records if r["type"] == "compared"]
    assert [(r["turn"], r["model"], r["tool_calls"], r["answer"]) for r in runs] == [
        (1, "model-a", ["list_todos"], "Two, on model-a."), (1, "model-b", [], "Two, says model-b.")]
    assert [q.body["model"] for q in fake_server.chat_requests()][1:] == ["model-a", "model-a", "model-b"]
    shown = draw_turn(turns(records)[0], 120)
    assert any(line.startswith("/compare of turn 1's question: on model-a (side effects denied): list_todos")
               for line in shown), shown
    page = html.unescape(trace_page(path, turns(records)))
    assert "/compare: this question on other models" in page and "on model-b (side effects denied): no tool call" in page
    assert "Two, says model-b." in page
