"""See through the loop: the exact wire traffic and the timelines (issue 15).

The raw request body of every model call is recorded exactly as the scripted
server received it (beside the trace, capped per session, oldest bodies dropped
first, events always kept); ``/trace --raw``, ``--save`` and ``glassloop trace
ID --raw`` show it; ``/trace`` draws a turn as a timeline on a shared time axis
(two concurrent read-only tools overlap, the approval wait is drawn apart) that
fits 80 columns; ``/usage`` draws per-turn bars; ``glassloop trace ID --html``
writes one self-contained page with every turn, call and result.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakeserver import call, text, tool_calls
from tests.reliability.helpers import record, trace_records
from tests.test_cli import glassloop, home  # noqa: F401 - fixture

pytestmark = pytest.mark.timeout(60)


def chat(env: dict[str, str], base_url: str, lines: list[str], *extra: str):
    return glassloop("--base-url", base_url, *extra, env=env, stdin="".join(f"{line}\n" for line in lines))


def trace_folder(env: dict[str, str]) -> Path:
    return Path(env["XDG_STATE_HOME"]) / "glassloop" / "traces"


def wire_lines(env: dict[str, str]) -> list[dict]:
    (path,) = trace_folder(env).glob("*.wire")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_raw_bodies_are_what_the_server_received(fake_server, home):  # noqa: F811
    fake_server.script(tool_calls(call("list_todos", {})), text("two open"))
    result = chat(home, fake_server.base_url, ["what is open?"])
    assert result.returncode == 0, result.stderr
    wire = wire_lines(home)
    requests = [r for r in wire if r["kind"] == "request"]
    responses = [r for r in wire if r["kind"] == "response"]
    assert [r["body"] for r in requests] == [r.body for r in fake_server.chat_requests()]
    assert [(r["turn"], r["step"]) for r in requests] == [(1, 1), (1, 2)]
    assert responses[0]["body"]["tool_calls"][0]["name"] == "list_todos"
    assert responses[0]["body"]["finish_reason"] == "tool_calls" and responses[1]["body"]["content"] == "two open"
    assert not [r for r in trace_records(home) if r.get("type") == "wire"]  # bodies stay out of the trace


def test_raw_bodies_are_capped_oldest_first_and_events_kept(fake_server, home, tmp_path):  # noqa: F811
    config = tmp_path / "cap.toml"
    config.write_text("[trace]\nraw_max_kb = 24\n", encoding="utf-8")
    questions = [f"question {n}" for n in range(1, 7)]
    fake_server.script(*[text(f"answer {n}") for n in range(1, 7)])
    result = chat(home, fake_server.base_url, questions, "--config", str(config))
    assert result.returncode == 0, result.stderr
    (path,) = trace_folder(home).glob("*.wire")
    size = path.stat().st_size
    wire = wire_lines(home)
    assert size <= 24 * 1024
    assert wire[0]["type"] == "wire_dropped" and wire[0]["records"] >= 2
    kept = [r for r in wire[1:] if r["kind"] == "request"]
    assert kept[-1]["body"] == fake_server.chat_requests()[-1].body  # the newest stay
    assert kept[0]["turn"] > 1  # the oldest went first
    started = [r["user_text"] for r in trace_records(home) if r["type"] == "turn_started"]
    assert started == questions  # every event is kept
    record("see_through", case="raw cap", cap_bytes=24 * 1024, file_bytes=size,
           dropped=wire[0]["records"], kept=len(wire) - 1)


def test_raw_bodies_can_be_turned_off(fake_server, home, tmp_path):  # noqa: F811
    config = tmp_path / "off.toml"
    config.write_text("[trace]\nraw = false\n", encoding="utf-8")
    fake_server.script(text("fine"))
    result = chat(home, fake_server.base_url, ["hello"], "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert list(trace_folder(home).glob("*.jsonl")) and not list(trace_folder(home).glob("*.wire"))
