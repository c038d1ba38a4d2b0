"""``glassloop ask --stream-json``: each event a JSON line on stdout while the turn runs, the
``--json`` object last. The process is the subject here (what a reader of its stdout sees, and
when), so it runs as a real subprocess against the scripted server, whose stream is held
until the test has read what came first."""

from __future__ import annotations

import dataclasses
import json
import queue
import re
import subprocess
import sys
import threading
import typing
from pathlib import Path
from typing import Any

import pytest

from repl.config.redact import Redactor
from repl.loop.events import Event, ModelUsage, Notice, TextDelta, TurnFinished, WireRecord
from repl.providers.base import Usage
from repl.ui.plain import EventLines, stream_cut
from tests.fakeserver import FakeServer, call, held_stream, text, tool_calls
from tests.support import ROOT, SECRET, glassloop_here

ANSWER = "First words, then the rest of the answer."
ENVELOPE = ("v", "type", "t")
EXPORTING = ROOT / "docs" / "EXPORTING.md"


def _documented(heading: str) -> dict[str, str]:
    """The rows of the first table under ``heading`` in docs/EXPORTING.md: first cell -> the rest."""
    section = EXPORTING.read_text(encoding="utf-8").split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    body = section.split("|---|---|\n", 1)[1]  # below the table's head
    rows = [line.split(" | ", 1) for line in body.splitlines() if line.startswith("| `")]
    return {first.strip("| `"): rest for first, rest in rows}


def _lines_of(proc: subprocess.Popen[str]) -> queue.Queue[str | None]:
    """Each line of ``proc``'s stdout as it comes; None at its end."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _ask(home: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "repl.cli", "ask", *args], env=home, cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, encoding="utf-8")


def _script(server: FakeServer, release: threading.Event | None = None) -> None:
    """A call to list_todos, then the answer in pieces of 4 characters; with ``release``, the
    answer's stream stops after "First words," until it is set."""
    answer = text(ANSWER, chunk_size=4)
    server.script(tool_calls(call("list_todos", {}, id="call_a")),
                  held_stream(4, release, answer) if release is not None else answer)


def _untimed(value: Any) -> Any:
    """``value`` without what differs from run to run: durations and the session's id."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if not k.endswith("_s") and k != "session"}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def test_stream_json_shows_the_first_text_while_the_answer_still_streams(fake_server, home):
    release = threading.Event()
    _script(fake_server, release)
    proc = _ask(home, "what is open?", "--stream-json", "--base-url", fake_server.base_url)
    lines = _lines_of(proc)
    try:
        seen: list[dict[str, Any]] = []
        while not seen or seen[-1]["type"] != "text_delta":
            line = lines.get(timeout=60)
            assert line is not None, proc.stderr.read() if proc.stderr else ""
            seen.append(json.loads(line))
        # the server holds the rest of the answer until now: what came is its beginning, live
        assert not release.is_set() and proc.poll() is None
        assert seen[-1]["text"] == "First " and seen[-1]["step"] == 2
        release.set()
        rest = iter(lambda: lines.get(timeout=60), None)
        seen += [json.loads(line) for line in rest]
    finally:
        release.set()
        proc.wait(timeout=60)
    assert proc.returncode == 0
    assert all(r["v"] == 1 and isinstance(r["type"], str) and isinstance(r["t"], float | int) for r in seen)
    assert [r["t"] for r in seen] == sorted(r["t"] for r in seen)
    kinds = [r["type"] for r in seen]
    assert kinds[0] == "turn_started" and kinds[-1] == "result" and "wire" not in kinds
    assert [r["name"] for r in seen if r["type"] == "tool_call_finished"] == ["list_todos"]
    texts = [r["text"] for r in seen if r["type"] == "text_delta"]
    assert "".join(texts) == ANSWER and len(texts) > 1
    assert all(r["step"] == 2 for r in seen if r["type"] == "text_delta")

    # the last line is --json's object for the same turn, with the envelope
    _script(fake_server)
    as_json = _ask(home, "what is open?", "--json", "--base-url", fake_server.base_url)
    out, err = as_json.communicate(timeout=60)
    assert as_json.returncode == 0, err
    payload = json.loads(out)
    result = {k: v for k, v in seen[-1].items() if k not in ENVELOPE}
    assert set(result) == set(payload)
    assert _untimed(result) == _untimed(payload)
    assert set(payload) <= set(_documented("The result"))
    assert isinstance(result["session"], str) and isinstance(payload["session"], str)


def test_stream_json_redacts_the_question_and_a_key_streamed_in_pieces(fake_server, home, tmp_path):
    fake_server.script(text(f"You sent {SECRET} to me; do not.", chunk_size=3, chunk_delay=0.02))
    trace_file = tmp_path / "t.jsonl"
    proc = _ask(home, f"is {SECRET} my key?", "--stream-json", "--base-url", fake_server.base_url,
                "--trace-file", str(trace_file))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert SECRET not in out + err
    records = [json.loads(line) for line in out.splitlines()]
    assert records[0]["user_text"] == "is [redacted] my key?"
    streamed = "".join(r["text"] for r in records if r["type"] == "text_delta")
    assert streamed == "You sent [redacted] to me; do not."
    traced = [json.loads(line) for line in trace_file.read_text(encoding="utf-8").splitlines()]
    assert [r["text"] for r in traced if r["type"] == "text_delta"] == [streamed]  # as the trace redacts it
    assert records[-1]["answer"] == streamed


def test_json_and_stream_json_together_is_one_line(fake_server, home):
    result = glassloop_here("ask", "hi", "--json", "--stream-json", "--base-url", fake_server.base_url, env=home)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "--stream-json" in result.stderr
    assert fake_server.requests == []


def test_stream_json_ends_with_the_error_object_when_no_model_answers(home):
    result = glassloop_here("ask", "hi", "--stream-json", "--base-url", "http://127.0.0.1:9/v1", env=home)
    assert result.returncode == 1
    last = json.loads(result.stdout.splitlines()[-1])
    assert last["type"] == "result" and last["v"] == 1 and last["error"]["type"]


def test_each_documented_type_is_an_event_with_every_field_named():
    events = {cls.__dataclass_fields__["type"].default: cls for cls in typing.get_args(Event)}
    documented = _documented("The types")
    assert documented.pop("result")
    for kind, fields in documented.items():
        named = set(re.findall(r"`(\w+)`", fields))
        assert kind in events, kind
        assert {f.name for f in dataclasses.fields(events[kind]) if f.name != "type"} <= named, kind


# ---- the batching, on a clock of the test's ------------------------------------------------

BATCH_S = 1000.0  # on the test's clock; a timer the stream starts would wait this long for real


class Out:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, line: str) -> None:
        self.lines.append(line)

    def flush(self) -> None:
        pass

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _stream(secrets: tuple[str, ...] = ()) -> tuple[EventLines, Out, Clock]:
    out, clock = Out(), Clock()
    return EventLines(out, Redactor(secrets), batch_s=BATCH_S, clock=clock), out, clock  # type: ignore[arg-type]


def test_text_goes_out_at_once_then_at_most_once_a_batch_time_and_whole_at_the_next_event():
    lines, out, clock = _stream()
    lines(TextDelta(1, "Hello "))  # held: its last character waits for the next
    lines(TextDelta(1, "there, "))  # the first text goes out at once, as far as it may be cut
    clock.now = 0.01
    lines(TextDelta(1, "frie"))  # within the batch time of the last text out: held
    assert [r["text"] for r in out.records()] == ["Hello "]
    clock.now = BATCH_S + 1
    lines(TextDelta(1, "nd and "))  # a batch time later: out, as far as it may be cut
    clock.now = BATCH_S + 2
    lines(WireRecord(1, "request", {}))  # raw bodies never go out
    lines(ModelUsage(1, Usage(1, 0, 1), 0.1, "stop"))  # the call's text is whole: out, all of it
    assert [(r["type"], r.get("text"), r["t"]) for r in out.records()] == [
        ("text_delta", "Hello ", 0.0), ("text_delta", "there, friend ", 0.0),
        ("text_delta", "and ", BATCH_S + 1), ("model_usage", None, BATCH_S + 2)]


def test_another_step_or_kind_of_delta_ends_the_text_held():
    lines, out, _ = _stream()
    lines(TextDelta(1, "a"))
    lines(TextDelta(2, "b"))
    lines(Notice("note"))
    lines(TurnFinished(1, "answer", 2, 0, Usage(), 1.0, "b"))
    assert [(r["type"], r.get("step"), r.get("text") or r.get("message")) for r in out.records()] == [
        ("text_delta", 1, "a"), ("text_delta", 2, "b"), ("notice", None, "note"), ("turn_finished", None, None)]


@pytest.mark.parametrize(("held", "out"), [
    ("First words, ", "First "),  # the last character waits for the next
    ("key: Bearer abcdefgh12", "key: "),  # never between Bearer and its token
    ("今天还有", "今天还"),  # Chinese has no spaces: a cut after a wide character
    ("你好?世界", ""),  # a word holding what a secret's shape begins with is not cut inside
    ("see https://用户:pass@host", "see "),  # nor a URL whose user name is wide
    ("ok 👍🏽 fine", "ok 👍🏽 "),  # not between an emoji and its skin tone
    ("ok 👍🏽", "ok "),
    ("\u0915\u093f", ""),  # a vowel sign belongs to the letter before it
    ("cafe\u0301!", "cafe\u0301"),
    ("🇫🇷🇩", ""),  # a flag's two letters stay together
])
def test_where_streamed_text_may_be_cut(held, out):
    assert held[: stream_cut(held)] == out


def test_a_configured_secret_with_a_space_is_never_cut_inside():
    secret = "open sesame now"
    assert stream_cut("say open sesame", (secret,)) == 0
    assert stream_cut("say open sesame now then", (secret,)) == len("say open sesame now ")
    lines, out, clock = _stream((secret,))
    for piece in ("say open ", "sesame ", "now, ok"):
        clock.now += BATCH_S + 1  # each piece a batch time after the last: let out what may be
        lines(TextDelta(1, piece))
    lines(ModelUsage(1, Usage(), 0.1, "stop"))
    texts = [r["text"] for r in out.records() if r["type"] == "text_delta"]
    assert texts == ["say ", "[redacted], ", "ok"]


def test_a_closed_stdout_stops_the_lines_not_the_turn(tmp_path: Path):
    out = open(tmp_path / "out", "w", encoding="utf-8")  # noqa: SIM115 - closed on purpose
    lines = EventLines(out, Redactor(), batch_s=3600)
    out.close()
    lines(Notice("nobody reads this"))
    lines.result({"answer": "x"})
    assert lines.broken
