"""Numbers that do not lie: cost and context share only for known models, one usage line
for a one-call turn, interrupted turns counted, tool time apart from the person's time.

The real program in a pseudo-terminal against the scripted server.
"""

from __future__ import annotations

import re
import time

from tests.fakeserver import call, slow_chunks, text, tool_calls
from tests.reliability.helpers import trace_records


def test_an_unpriced_model_shows_no_cost_and_no_context_share(sized_repl, fake_server):
    fake_server.script(text("hello from llama"), text("hello from mini"))
    repl = sized_repl("--model", "llama-3.1-8b-instruct")
    repl.say("hi")
    repl.expect("hello from llama")
    repl.expect(r"turn 1[^\r\n]*")
    summary = repl.child.after
    repl.ready()
    assert "$" not in summary and "cost unknown" in summary
    toolbar = repl.screen().rsplit("llama-3.1-8b-instruct", 1)[1]
    assert "$" not in toolbar and "context" not in toolbar  # the profile's 128k window is gpt-4o-mini's
    repl.say("/model gpt-4o-mini")  # a model with a [pricing] table gets its price back
    repl.ready()
    repl.say("hi")
    repl.expect("hello from mini")
    repl.expect(r"turn 2[^\r\n]*")
    assert re.search(r"\$\d", repl.child.after)
    repl.ready()
    repl.close()


def _line(screen: str, start: str) -> str:
    return next(line for line in screen.splitlines() if line.startswith(start))


def test_one_call_turn_gets_one_line_that_fits_80_columns(sized_repl, fake_server):
    fake_server.script(text("short answer", usage=(123456, 4567, 100000)),
                       tool_calls(call("list_todos", {})), text("two steps"),
                       text("verbose answer"))
    repl = sized_repl(cols=80)
    repl.say("hi")
    repl.expect("short answer")
    repl.expect(r"turn 1[^\r\n]*")
    repl.ready()
    screen = repl.screen()
    assert "step 1 · in" not in screen  # one model call: the turn's line says it all
    summary = _line(screen, "turn 1")
    assert summary.rstrip().endswith("answer") and len(summary.rstrip()) <= 80, summary
    assert "1 step ·" in summary and "128,023 tokens" in summary and "tool call" not in summary
    repl.say("list")
    repl.expect("two steps")
    repl.expect(r"turn 2[^\r\n]*")
    assert "1 tool call ·" in repl.child.after
    repl.ready()
    assert "step 1 · in" in repl.screen() and "step 2 · in" in repl.screen()  # per-step lines
    repl.say("/verbose on")
    repl.ready()
    repl.say("again")
    repl.expect("verbose answer")
    repl.expect(r"turn 3[^\r\n]*")
    repl.ready()
    assert "step 1 · in" in repl.screen().split("verbose answer")[1]
    repl.close()


def test_an_interrupted_turn_counts_the_input_it_sent(sized_repl, fake_server, home):
    fake_server.script(slow_chunks(0.1, text("word " * 200, chunk_size=5)))
    repl = sized_repl()
    repl.say("a question long enough to count " * 20)
    repl.expect("word")
    repl.child.sendintr()
    repl.expect(r"turn 1[^\r\n]*interrupted")
    summary = repl.child.after
    repl.ready()
    assert "stopped: interrupted" in summary and "~" in summary
    estimated = int(re.search(r"~([\d,]+) tokens", summary).group(1).replace(",", ""))
    assert estimated > 100  # the question alone is ~150 tokens
    finished = [r for r in trace_records(home) if r["type"] == "turn_finished"][-1]
    assert finished["usage"]["input_tokens"] > 100 and finished["usage"]["estimated"]
    repl.say("/usage")
    repl.expect("all")
    repl.ready()
    repl.close()


def test_tool_time_and_decision_time_are_apart(sized_repl, fake_server, home):
    fake_server.script(tool_calls(call("delete_todo", {"todo_id": "todo-002"})), text("Kept it."))
    repl = sized_repl()
    repl.say("delete the weekly report")
    repl.expect("Allow")
    time.sleep(1.2)  # the person thinks it over
    repl.key("n")
    repl.expect("Reason")
    repl.say("")
    repl.expect(r"denied · \d+ ms[^\r\n]*")
    status = repl.child.after
    repl.expect("Kept it")
    repl.ready()
    ms = int(re.search(r"denied · (\d+) ms", status).group(1))
    decided = float(re.search(r"decided in ([\d.]+) s", status).group(1))
    # the person's 1.2 s are the decision's, and the call's time starts once they decided: counted
    # from the call instead, it would hold the whole decision and be the longer of the two
    assert decided >= 1.2 and ms / 1000 < decided - 0.05, status  # the decision is shown to a tenth
    records = trace_records(home)
    finished = next(r for r in records if r["type"] == "tool_call_finished")
    decision = next(r for r in records if r["type"] == "approval_decided")
    assert decision["decided_s"] >= 1.2 and finished["duration_s"] < decision["decided_s"], (finished, decision)
    repl.say("/trace")
    repl.expect(r"denied delete_todo by user in \d")
    repl.ready()
    repl.close()
