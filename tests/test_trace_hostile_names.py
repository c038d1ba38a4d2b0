"""A trace someone sends you, with terminal sequences in its field *names* as well as its values,
at every depth: a clipboard write (OSC 52), a window title (OSC 0), CSI, 8-bit C1 controls and
bidi overrides. ``glassloop trace FILE`` in each of its views, and the REPL's ``/trace`` views
of the same records, print them as text: no ESC, BEL or C1 character reaches the terminal.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fakeserver import text
from tests.support import chat, glassloop

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: set the clipboard to "rm -rf ~"
TITLE = "\x1b]0;pwned\x07"
C1 = "\x9b31m\x9d0;c1-title\x9c\x85"  # 8-bit CSI, OSC, ST, NEL
BIDI = "\u202eevil\u202c\u2066iso\u2069"


def name(tag: str) -> str:
    """A field name carrying every kind of sequence, told apart by ``tag``."""
    return f"{tag}{CLIPBOARD}{TITLE}\x1b[2J{C1}{BIDI}\x07\n"


VALUE = f"v{CLIPBOARD}{TITLE}\x1b[31m{C1}{BIDI}"
# what a terminal could act on: C0 but \t and \n, DEL, C1, the bidi embeddings, overrides and isolates
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def nested(tag: str) -> dict[str, Any]:
    return {name(tag): {name(tag + "-inner"): [VALUE, {name(tag + "-deep"): VALUE}]}}


def hostile_trace(folder: Path) -> Path:
    """One turn of two model calls and a tool call; names and values hostile in records and
    raw bodies, so the raw view's second request is shown as what changed, field by field."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "sent.jsonl"

    def at(seconds: float, record: dict[str, Any]) -> dict[str, Any]:
        return {"turn": 1, "time": 1_800_000_000.0 + seconds, name("record"): VALUE, **record}

    call = {"step": 1, "call_id": "c1", "name": VALUE}
    records = [
        at(0.0, {"type": "notice", "message": VALUE, "detail": nested("notice")}),
        at(0.0, {"type": "turn_started", "user_text": f"hi {VALUE}\n\nAttached file {name('path')}:\n```\n{VALUE}\n```"}),
        at(0.1, {"type": "model_request", "step": 1, "model": VALUE, "tools": True}),
        at(0.5, {"type": "model_usage", "step": 1, "latency_s": 0.4, "finish_reason": VALUE,
                 "usage": {"input_tokens": 9, "output_tokens": 2, **nested("usage")}}),
        at(0.5, {"type": "tool_call_started", **call, "arguments": nested("arguments")}),
        at(0.6, {"type": "approval_decided", **call, "allowed": False, "by": VALUE, "reason": VALUE}),
        at(0.6, {"type": "tool_call_finished", **call, "ok": False, "error_type": VALUE, "duration_s": 0.1,
                 "result": nested("result")}),
        at(0.7, {"type": "user_step", "step": 2, "action": "edited_by_user",
                 "detail": {"role": "user", "after": VALUE, **nested("detail")}}),
        at(0.7, {"type": "model_request", "step": 2, "model": VALUE, "tools": True}),
        at(0.9, {"type": "model_retry", "step": 2, "attempt": 2, "attempts": 3, "delay_s": 0.1, "reason": VALUE}),
        at(1.0, {"type": "error", "kind": VALUE, "message": VALUE, **nested("error")}),
        at(1.0, {"type": "turn_finished", "stopped_by": VALUE, "steps": 2, "tool_calls": 1,
                 "usage": nested("finished")}),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    tools = [{"type": "function", "function": {"name": VALUE, "parameters": nested("schema")}}]
    first = {"model": "m", "messages": [{"role": "user", "content": VALUE}], "tools": tools,
             name("same"): 1, name("changed"): VALUE, name("gone"): nested("gone"), name("grows"): [VALUE]}
    second = {"model": "m", "messages": [*first["messages"], {"role": "assistant", name("message"): VALUE}],
              "tools": [*tools, {"type": "function", "function": {"name": name("tool"), **nested("tool")}}],
              name("same"): 1, name("changed"): nested("changed"), name("grows"): [VALUE, VALUE],
              name("new"): nested("new")}
    wire = [{"kind": "request", "turn": 1, "step": 1, "body": first},
            {"kind": "response", "turn": 1, "step": 1, "body": {"content": VALUE, **nested("response"),
                                                                "http": {"method": VALUE, "url": VALUE, "status": 200,
                                                                         **nested("http")}}},
            {"kind": "request", "turn": 1, "step": 2, "body": second},
            {"kind": "error", "turn": 1, "step": 2, "body": {"attempt": 1, "status": 429, "reason": VALUE,
                                                             "retried_as": 2, **nested("attempt")}},
            {"kind": "response", "turn": 1, "step": 2, "body": nested("answer")}]
    path.with_suffix(".wire").write_text("".join(json.dumps(w) + "\n" for w in wire), encoding="utf-8")
    return path


VIEWS = {"timeline": [], "events": ["--events"], "json": ["--json"], "raw": ["--raw"],
         "raw full": ["--raw", "--full"], "raw json": ["--raw", "--json"]}


def terminal_text(out: str) -> str:
    assert "Traceback" not in out, out[-3000:]
    shown = sorted({f"U+{ord(c):04X}" for c in CONTROLS.findall(out)})
    assert shown == [], f"{shown} reached the terminal:\n{out[-3000:]}"
    return out


@pytest.mark.parametrize("view", VIEWS)
def test_no_terminal_control_of_a_hostile_trace_reaches_stdout(home, tmp_path, view):
    path = hostile_trace(tmp_path / "sent")
    result = glassloop("trace", str(path), "--turn", "all", *VIEWS[view], env={**home, "COLUMNS": "120"})
    assert result.returncode == 0, result.stderr[-3000:]
    shown = terminal_text(result.stdout + result.stderr)
    assert "c1-title" in shown and "evil" in shown  # shown, as text
    if view == "raw":  # the second request as what changed, each field named
        for what in ("changed, now:", "new:", "appended:", "no longer sent:", "unchanged:", "1 added"):
            assert what in shown, what
        notes = [line for line in shown.splitlines() if "changed, now:" in line or "new:" in line]
        assert all(line.startswith("changed") or line.startswith("new") for line in notes), notes


def test_the_repl_trace_views_of_a_hostile_trace_are_text(fake_server, home, tmp_path):
    fake_server.script(text("fine"))
    first = chat(home, fake_server.base_url, ["hello"])
    assert first.returncode == 0, first.stderr
    session_id = first.stdout.split("glassloop --resume ")[-1].split()[0]
    sent = hostile_trace(tmp_path / "sent")
    own = Path(home["XDG_STATE_HOME"]) / "glassloop" / "traces" / f"{session_id}.jsonl"
    for theirs, ours in ((sent, own), (sent.with_suffix(".wire"), own.with_suffix(".wire"))):
        with ours.open("a", encoding="utf-8") as file:
            file.write(theirs.read_text(encoding="utf-8").replace('"turn": 1', '"turn": 2'))
    views = ["/trace all", "/trace all --events", "/trace all --raw", "/trace all --raw --full", "/trace all --json"]
    result = chat(home, fake_server.base_url, views, "--resume", session_id)
    assert result.returncode == 0, result.stderr[-3000:]
    shown = terminal_text(result.stdout + result.stderr)
    assert shown.count("c1-title") >= 5 and "changed, now:" in shown
