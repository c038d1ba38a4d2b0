"""Item 12: ``tool_call_format = "text"`` against any server, and a linear text-call parser.

Text mode used to send tool results as ``role: "tool"`` messages answering no
native call: a server that checks its history (the scripted one does, like
real ones) rejected the request after the first tool call. Now calls and
results travel as text (the assistant keeps its ``<tool_call>`` text; results
go back as one user message of ``<tool_response>`` blocks), so every request
passes the scripted server's history check: across turns, with parallel
calls, and when a guard asks for a final answer.

The parser's argument regex backtracked cubically (2,000 spaces: 18.5 s).
Each adversarial input below is 100 kB and parses, whole and streamed in
small chunks, to the same result; how long that took is recorded (under a
second on a quiet machine), and only a parse that backtracks (minutes) fails.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import pytest

from repl.embedded.textcalls import TextCallFilter, parse_text_calls
from repl.embedded.textchat import TextChatProvider
from repl.loop.agent import Limits, run_turn
from repl.loop.approval import Approver
from repl.loop.events import EventLog, ToolCallFinished
from repl.loop.history import History, check
from tests.fakeserver import FakeServer, text
from tests.reliability.helpers import record

SIZE = 100_000
BACKTRACKING_S = 10.0  # the slowest input takes ~0.8 s beside other tests; backtracking, minutes
NAMES = ["list_todos", "get_todo"]


@pytest.fixture
def provider(fake_server: FakeServer) -> Iterator[TextChatProvider]:
    p = TextChatProvider(name="test", model="m", base_url=fake_server.base_url, api_key="sk-test",
                     max_retries=0, timeout_s=10, tool_call_format="text")
    yield p
    p.close()


def tagged(name: str, arguments: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


def turn(provider: TextChatProvider, registry: Any, history: History, question: str,
         limits: Limits | None = None) -> tuple[Any, EventLog]:
    log = EventLog()
    finished = run_turn(history, question, provider=provider, registry=registry,
                        approver=Approver("ask"), limits=limits or Limits(), emit=log)
    return finished, log


def assert_plain_chat(body: dict[str, Any]) -> None:
    """Only system/user/assistant text, alternating after the system message."""
    messages = body["messages"]
    assert all(set(m) == {"role", "content"} and isinstance(m["content"], str) for m in messages)
    roles = [m["role"] for m in messages if m["role"] != "system"]
    assert roles[0] == "user" and roles[-1] == "user"
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False)), roles


# ---- history valid for any server ------------------------------------------------

def test_text_mode_history_passes_a_checking_server_across_turns(fake_server, provider, registry):
    history = History("You are a test assistant.")
    fake_server.script(
        text("Let me look. " + tagged("list_todos", '{"status": "todo"}'), chunk_size=7),
        text("Two items are left."),
        text(tagged("get_todo", '{"todo_id": "todo-002"}') + tagged("get_todo", '{"todo_id": 3}')),
        text("写周报 is the most important."),
    )
    first, log = turn(provider, registry, history, "What is left?")
    assert first.stopped_by == "answer" and first.answer == "Two items are left."
    assert [e.result["ok"] for e in log.of(ToolCallFinished)] == [True]
    second, log = turn(provider, registry, history, "Which one first?")
    assert second.stopped_by == "answer", fake_server.history_errors
    assert [e.result["todo"]["id"] for e in log.of(ToolCallFinished)] == ["todo-002", "todo-003"]
    assert fake_server.history_errors == [] and check(history.messages) == []
    bodies = [r.body for r in fake_server.chat_requests()]
    assert len(bodies) == 4
    for body in bodies:
        assert_plain_chat(body)
    after_call = bodies[1]["messages"]
    assert "<tool_call>" in after_call[-2]["content"]  # the assistant keeps its call as text
    assert after_call[-1]["content"].startswith("<tool_response>\n")
    assert '"count": 2' in after_call[-1]["content"]
    parallel = bodies[3]["messages"][-1]["content"]
    assert parallel.count("<tool_response>") == 2 and parallel.index("todo-002") < parallel.index("todo-003")


def test_text_mode_final_answer_after_a_guard_is_still_valid(fake_server, provider, registry):
    history = History("You are a test assistant.")
    fake_server.script(text(tagged("list_todos", "{}")), text("Here is what I found."))
    finished, _ = turn(provider, registry, history, "What is left?", Limits(max_steps=1))
    assert finished.stopped_by == "max_steps" and finished.answer == "Here is what I found."
    assert fake_server.history_errors == [] and check(history.messages) == []
    for body in (r.body for r in fake_server.chat_requests()):
        assert_plain_chat(body)


# ---- a linear parser ---------------------------------------------------------------

def _fill(unit: str) -> str:
    return (unit * (SIZE // len(unit) + 1))[:SIZE]


ADVERSARIAL = {
    # the old argument regex: lazy group + \s*}?\s*$ over a long blank run, then text
    "spaces after broken arguments": '<tool_call>{"name": "list_todos", "arguments": x'
                                     + " " * SIZE + "y",
    "spaces everywhere": _fill(" "),
    "unclosed braces": _fill("{"),
    "unclosed objects": _fill('{"'),
    "nested arrays": '{"name": "list_todos", "arguments": ' + _fill("["),
    "repeated open tags": _fill("<tool_call>"),
    "open tags with broken calls": _fill('<tool_call>{"name": "get_todo", "arguments": {'),
    "nested quotes": '{"name": "list_todos", "arguments": "' + _fill('\\"'),
    "unterminated fence": "```json\n" + _fill('{"name": '),
    "prose braces": _fill("a {b} "),
    "many bare calls": _fill('{"name": "list_todos", "arguments": {}}, '),
    "backticks": _fill("``x"),
}


def _streamed(reply: str, seed: int) -> tuple[str, list]:
    rng = random.Random(seed)
    text_filter = TextCallFilter(NAMES, id_prefix="call_text_")
    shown, position = [], 0
    while position < len(reply):
        size = rng.randint(1, 12)
        shown.append(text_filter.feed(reply[position : position + size]))
        position += size
    rest, calls = text_filter.finish()
    return "".join(shown) + rest, calls


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_adversarial_text_parses_without_backtracking(name):
    reply = ADVERSARIAL[name]
    started = time.perf_counter()
    whole = parse_text_calls(reply, NAMES)
    whole_s = time.perf_counter() - started
    started = time.perf_counter()
    streamed = _streamed(reply, seed=len(name))
    streamed_s = time.perf_counter() - started
    record("textcalls_adversarial", input=name, chars=len(reply), whole_s=whole_s, streamed_s=streamed_s)
    assert whole_s < BACKTRACKING_S and streamed_s < BACKTRACKING_S, (whole_s, streamed_s)
    assert streamed == whole  # chunking never changes the result
