"""While waiting: what the user sees between pressing Enter and the answer.

The real program in a pseudo-terminal against the scripted server: the
spinner counts the seconds and says how to stop; Esc stops a turn as Ctrl-C
does and keys typed meanwhile reach the next prompt; a retry says when and
why; a timeout names its attempts and the time in all; reasoning streams
dimmed (``/reasoning off``: one line), is counted and traced, and is never sent
back; ``glassloop ask`` writes the answer as it comes, on a terminal and piped.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from repl.loop import events
from repl.loop.agent import Limits, run_turn
from repl.loop.approval import Approver
from repl.loop.history import History
from repl.providers.chat import ChatProvider
from repl.providers.responses import ResponsesProvider
from repl.tracing.trace import JsonlWriter, Trace, read_records
from tests.fakeserver import fault_status, raw_stream, slow_chunks, slow_first_byte, text
from tests.reliability.helpers import record
from tools.registry import Registry

pytestmark = pytest.mark.timeout(60)


def trace_records(env: dict[str, str]) -> list[dict]:
    files = sorted((Path(env["XDG_STATE_HOME"]) / "glassloop" / "traces").glob("*.jsonl"))
    return [r for f in files for r in read_records(f)]


def chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> dict:
    out = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
           "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return {**out, "usage": usage} if usage else out


def reasoning_reply(thought: list[str], answer: str, **opts) -> object:
    usage = {"prompt_tokens": 50, "completion_tokens": 40, "total_tokens": 90,
             "completion_tokens_details": {"reasoning_tokens": 30}}
    return raw_stream(chunk({"role": "assistant", "content": ""}),
                      *(chunk({"reasoning_content": piece}) for piece in thought),
                      chunk({"content": answer}), chunk({}, "stop"), chunk({}, usage=usage), "[DONE]", **opts)


def test_the_spinner_counts_seconds_and_says_how_to_stop(repl_factory, fake_server):
    fake_server.script(slow_first_byte(1.4, text("late answer")))
    repl = repl_factory()
    repl.say("take your time")
    repl.expect(r"step 1 · waiting for \S+ · 0 s · Ctrl-C to stop")
    repl.expect(r"step 1 · waiting for \S+ · 1 s · Ctrl-C to stop")
    repl.expect("late answer")
    repl.ready()
    repl.close()


def test_a_retry_says_when_and_why(repl_factory, fake_server, home):
    fake_server.script(fault_status(429, retry_after=1.0), text("after the retry"))
    repl = repl_factory()
    repl.say("hello")
    repl.expect(re.escape("retrying in 1 s (attempt 2 of 3: 429 rate limited)"))
    repl.expect("after the retry")
    repl.ready()
    repl.close()
    retries = [r for r in trace_records(home) if r["type"] == "model_retry"]
    assert [(r["attempt"], r["attempts"], r["reason"]) for r in retries] == [(2, 3, "429 rate limited")]
    assert [r["retries"] for r in trace_records(home) if r["type"] == "model_usage"] == [1]


def test_esc_stops_a_turn_and_typed_keys_reach_the_next_prompt(repl_factory, fake_server, home):
    fake_server.script(slow_chunks(0.1, text("word " * 200, chunk_size=5)), text("second answer"))
    repl = repl_factory()
    repl.say("talk a lot")
    repl.expect("word")
    repl.child.send("next one")  # typed while the answer streams
    time.sleep(0.2)
    started = time.monotonic()
    repl.child.send("\x1b")  # Esc alone
    repl.ready()  # the answer had ~20 s to go: the prompt is back because Esc stopped it
    stopped_s = time.monotonic() - started
    repl.child.send("\r")  # the typed words are in the prompt: Enter sends them
    repl.expect("second answer")
    repl.ready()
    sent = fake_server.chat_requests()[-1].body["messages"]
    assert sent[-1] == {"role": "user", "content": "next one"}
    assert "[interrupted]" in sent[-2]["content"]
    finished = [r["stopped_by"] for r in trace_records(home) if r["type"] == "turn_finished"]
    assert finished == ["interrupted", "answer"]
    record("waiting", case="Esc mid-answer", stopped_s=round(stopped_s, 2), typed_keys_kept=True)
    repl.close()


def test_a_timeout_names_its_attempts_and_the_time_in_all(fake_server):
    fake_server.script(*[slow_first_byte(1.0, text("too late"))] * 3)
    provider = ChatProvider(name="slow", model="m", base_url=fake_server.base_url, api_key="k",
                            timeout_s=0.3, max_retries=2)
    log = events.EventLog()
    started = time.monotonic()
    finished = run_turn(History("s"), "hello?", provider=provider, registry=Registry([]), approver=Approver("auto"),
                        limits=Limits(), emit=log)
    provider.close()
    assert finished.stopped_by == "error"
    [error] = log.of(events.ErrorEvent)
    assert re.search(r"no answer in 0\.3 s, 3 attempts, \d s in all \(timeout\)", error.message), error.message
    retries = log.of(events.ModelRetry)
    assert [(e.attempt, e.attempts, e.reason) for e in retries] == \
        [(2, 3, "no answer in 0.3 s"), (3, 3, "no answer in 0.3 s")]
    # the waits the adapter chose: 0.5 s, doubling, less up to a quarter at random (to 0.01 s)
    delays = [e.delay_s for e in retries]
    assert 0.37 <= delays[0] <= 0.5 and 0.75 <= delays[1] <= 1.0, delays
    seconds = time.monotonic() - started
    record("waiting", case="timeout x3", seconds=round(seconds, 2))
    assert seconds >= 0.9, seconds  # three 0.3 s attempts were waited for


def test_reasoning_is_streamed_counted_and_traced_never_sent_back(fake_server, tmp_path):
    fake_server.script(reasoning_reply(["The user ", "greets me."], "Hello!"), text("again"))
    provider = ChatProvider(name="r", model="m", base_url=fake_server.base_url, api_key="k", max_retries=0)
    log, history = events.EventLog(), History("s")
    trace = Trace(JsonlWriter(tmp_path / "t.jsonl"), "s", "r")

    def emit(event):
        log(event)
        trace(event)

    for question in ("hi", "and?"):
        run_turn(history, question, provider=provider, registry=Registry([]), approver=Approver("auto"),
                 limits=Limits(), emit=emit)
    trace.close()
    provider.close()
    assert [e.text for e in log.of(events.ReasoningDelta)] == ["The user ", "greets me."]
    assert log.of(events.ModelUsage)[0].usage.reasoning_tokens == 30
    joined = [r for r in read_records(tmp_path / "t.jsonl") if r["type"] == "reasoning_delta"]
    assert [r["text"] for r in joined] == ["The user greets me."]
    assert "greets me" not in json.dumps(fake_server.chat_requests()[-1].body["messages"])


def test_responses_reasoning_summaries_stream_as_reasoning(fake_server):
    done = {"type": "response.completed", "response": {
        "id": "r", "object": "response", "status": "completed", "model": "m",
        "output": [{"type": "message", "id": "msg", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "Hi.", "annotations": []}]}],
        "usage": {"input_tokens": 5, "output_tokens": 9, "total_tokens": 14,
                  "output_tokens_details": {"reasoning_tokens": 7}}}}
    fake_server.script(raw_stream(
        {"type": "response.reasoning_summary_text.delta", "item_id": "rs", "output_index": 0,
         "summary_index": 0, "delta": "Thinking about it."},
        {"type": "response.output_text.delta", "item_id": "msg", "output_index": 1, "content_index": 0,
         "delta": "Hi."}, done))
    provider = ResponsesProvider(name="r", model="m", base_url=fake_server.base_url, api_key="k", max_retries=0)
    log = events.EventLog()
    run_turn(History("s"), "hi", provider=provider, registry=Registry([]), approver=Approver("auto"),
             limits=Limits(), emit=log)
    provider.close()
    assert [e.text for e in log.of(events.ReasoningDelta)] == ["Thinking about it."]
    assert log.of(events.ModelUsage)[0].usage.reasoning_tokens == 7


def test_reasoning_is_dimmed_in_the_terminal_and_one_line_when_off(repl_factory, fake_server):
    fake_server.script(reasoning_reply(["Weighing ", "the options."], "Decided."),
                       reasoning_reply(["Hidden ", "thoughts."], "Done again."))
    repl = repl_factory()
    repl.say("decide")
    repl.expect("Decided")
    repl.ready()
    raw = "".join(repl.transcript)
    assert re.search(r"\x1b\[2;3m[^\x1b]*Weighing the options\.", raw), "the reasoning is not dim italic"
    repl.say("/reasoning off")
    repl.expect("reasoning hidden")
    repl.ready()
    repl.say("again")
    repl.expect("Done again")
    repl.ready()
    after = repl.screen().rsplit("reasoning hidden", 1)[-1]
    assert re.search(r"thought for \d+\.\d s \(16 characters; /reasoning on shows them\)", after)
    assert "Hidden thoughts." not in after
    repl.close()


def test_ask_on_a_terminal_streams_the_answer(fake_server, home):
    words = [f"w{n:02d} " for n in range(8)]
    fake_server.script(slow_chunks(0.15, text("".join(words), chunk_size=4)))
    child = pexpect.spawn(sys.executable, ["-m", "repl.cli", "ask", "stream it", "--base-url", fake_server.base_url],
                          env={**home, "TERM": "xterm"}, encoding="utf-8", dimensions=(40, 100), timeout=30)
    child.expect("w01")
    early = child.isalive() and "w07" not in child.buffer  # the last word has not been read yet
    child.expect(pexpect.EOF)
    child.close()
    assert early, "the answer came only at the end"
    assert child.exitstatus == 0


def test_ask_piped_writes_each_line_as_it_comes(fake_server, home):
    lines = [f"line {n}\n" for n in range(4)]
    fake_server.script(slow_chunks(0.25, text("".join(lines), chunk_size=len(lines[0]))))
    proc = subprocess.Popen([sys.executable, "-m", "repl.cli", "ask", "lines please", "--base-url",
                             fake_server.base_url], env=home, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    running = proc.poll() is None
    rest = proc.stdout.read()
    proc.wait(30)
    assert first == "line 0\n" and running, "the first line came only at the end"
    assert first + rest == "".join(lines)  # byte-exact, nothing added


def test_the_trace_keeps_the_first_token_time(tmp_path, monkeypatch):
    clock = iter([100.0, 101.0, 102.5, 103.0, 104.0])
    monkeypatch.setattr("repl.tracing.trace.time.time", lambda: next(clock))
    trace = Trace(JsonlWriter(tmp_path / "t.jsonl"), "s", "r")
    trace(events.TurnStarted(1, "q"))  # 100.0
    trace(events.TextDelta(1, "first "))  # 101.0: the first token
    trace(events.TextDelta(1, "second"))  # 102.5
    trace(events.ModelUsage(1, events.Usage(1, 0, 2), 1.0, "stop"))  # 103.0
    trace.close()
    records = list(read_records(tmp_path / "t.jsonl"))
    assert [(r["type"], r["time"]) for r in records] == \
        [("turn_started", 100.0), ("text_delta", 101.0), ("model_usage", 103.0)]
    assert records[1]["text"] == "first second"  # one event per model call
