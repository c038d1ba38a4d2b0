"""Part 2: the history invariant under random event sequences, on both wire APIs.

Hypothesis drives the real ``run_turn`` against the scripted server with random
replies (text, tool calls to real, unknown and side-effecting tools, invalid
JSON arguments, duplicate call ids, HTTP faults, cut streams, streams without
an end) and random interrupts (Ctrl-C at any event, at an approval, a crash
that kills the turn), interleaved with undo, context-window changes that force
trimming, and resumes from the journal. Whatever happens, every request the
server receives passes its history check, and the history kept between turns
passes ``repl.loop.history.check``.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from repl.archive.journal import Journal, load
from repl.config.redact import Redactor
from repl.loop.agent import Limits, run_turn
from repl.loop.approval import ApprovalRequest, Approver
from repl.loop.events import Event, TurnFinished, TurnStarted
from repl.loop.history import History, check
from tests.fake_responses import check_input
from tests.fakeserver import (
    FakeServer,
    Reply,
    call,
    cut_stream_after,
    fault_status,
    text,
    tool_calls,
)
from tests.reliability.helpers import record, scaled
from tests.support import ADAPTERS, SEED_TODOS
from tools import build_tools
from tools.registry import Registry

EXAMPLES = scaled(300, 30)
counts: dict[str, int] = {}

# ---- random replies --------------------------------------------------------------------

words = st.text(alphabet="ab 中\n*[]`", max_size=120)
good_calls = st.sampled_from([
    call("list_todos", {}), call("list_todos", {"status": "todo"}), call("get_todo", {"todo_id": 2}),
    call("calculator", {"expression": "6*7"}), call("get_weather", {"city": "北京"}),
    call("search_notes", {"query": "x"}), call("read_file", {"path": "../../etc/passwd"}),
])
bad_calls = st.sampled_from([
    call("no_such_tool", {}), call("get_todo", '{"todo_id": "todo-0'), call("get_todo", "[1, 2]"),
    call("list_todos", {"priority": "urgent"}), call("", {}), call("get_todo", {"todo_id": 1}, id=None),
])
effect_calls = st.sampled_from([
    call("add_todo", {"title": "fuzz"}), call("delete_todo", {"todo_id": "todo-003"}),
    call("add_note", {"text": "fuzz note"}), call("complete_todo", {"todo_id": 1}),
])
calls = st.lists(st.one_of(good_calls, bad_calls, effect_calls), min_size=1, max_size=4)


@st.composite
def replies(draw: st.DrawFn) -> Reply:
    kind = draw(st.sampled_from(["text", "calls", "calls", "dup_ids", "fault", "cut", "unfinished"]))
    chunk = draw(st.integers(1, 40))
    if kind == "text":
        return text(draw(words), chunk_size=chunk)
    if kind == "calls":
        return tool_calls(*draw(calls), text=draw(words), chunk_size=chunk)
    if kind == "dup_ids":
        return tool_calls(call("list_todos", {}, id="dup"), call("get_todo", {"todo_id": 2}, id="dup"))
    if kind == "fault":
        return fault_status(draw(st.sampled_from([400, 401, 404, 429, 500, 503])))
    inner = draw(st.one_of(st.builds(lambda t: text(t, chunk_size=2), words),
                           st.builds(lambda c: tool_calls(*c, chunk_size=3), calls)))
    if kind == "cut":
        return cut_stream_after(draw(st.integers(0, 12)), inner)
    return Reply(text=inner.text, calls=inner.calls, chunk_size=3, finish_reason=None, usage=None)


# ---- random actions ----------------------------------------------------------------

turns = st.fixed_dictionaries({
    "kind": st.just("turn"),
    "replies": st.lists(replies(), min_size=1, max_size=4),
    "mode": st.sampled_from(["auto", "read-only", "ask", "ask-ctrl-c"]),
    "interrupt_at": st.one_of(st.none(), st.integers(1, 12)),
    "crash_at": st.one_of(st.none(), st.integers(1, 12)),
    "question": st.text(alphabet="qx 问?", min_size=1, max_size=20),
})
# each step: a turn, then maybe one of undo / resume / a new context window
afters = st.one_of(st.none(), st.fixed_dictionaries({"kind": st.just("undo")}),
                   st.fixed_dictionaries({"kind": st.just("resume")}),
                   st.fixed_dictionaries({"kind": st.just("window"),
                                          "tokens": st.sampled_from([1200, 2500, 4000, 128_000])}))
actions = st.lists(st.tuples(turns, afters), min_size=1, max_size=8).map(
    lambda steps: [a for turn, after in steps for a in (turn, after) if a is not None])


class Crash(BaseException):
    """The process dies here: nothing after this point reaches the journal."""


class CtrlCAtApproval:
    def ask(self, request: ApprovalRequest, validate: Any) -> Any:
        raise KeyboardInterrupt


@dataclass
class World:
    api: str
    folder: Path
    server: FakeServer
    provider: Any
    registry: Registry
    history: History = field(default_factory=lambda: History("You are a fuzz assistant."))
    journal: Journal | None = None
    events: dict[str, int] = field(default_factory=dict)

    def open(self) -> World:
        path = self.folder / "session.jsonl"
        self.journal = Journal(path, Redactor(), {"system_prompt": self.history.system_prompt.text})
        return self

    def resume(self) -> None:
        assert self.journal is not None
        self.journal.close()
        meta, messages = load(self.journal.path)
        self.history = History.from_json({"system_prompt": meta["system_prompt"], "messages": messages})
        self.journal = Journal(self.journal.path, Redactor())
        self.journal.adopt(self.history)
        self.journal.sync(self.history)  # records the repair, as the session does


def make_world(api: str, folder: Path, server: FakeServer) -> World:
    todos = folder / "todos.json"
    todos.write_text(json.dumps(SEED_TODOS, ensure_ascii=False), encoding="utf-8")
    registry = Registry(build_tools(todos_path=todos, notes_path=folder / "notes.json",
                                    files_root=folder, weather="sample"))
    provider = ADAPTERS[api](name="fuzz", model="m", base_url=server.base_url, api_key="sk-fuzz-0000000000",
                             max_retries=0, timeout_s=5, context_window=128_000)
    return World(api, folder, server, provider, registry).open()


def play_turn(world: World, action: dict[str, Any]) -> str:
    world.server.script(*action["replies"])
    mode = action["mode"]
    approver = Approver("ask", CtrlCAtApproval()) if mode == "ask-ctrl-c" else Approver(mode)
    seen = 0
    last: list[str] = [""]

    def emit(event: Event) -> None:
        nonlocal seen
        world.events[event.type] = world.events.get(event.type, 0) + 1
        last[0] = event.type
        if isinstance(event, TurnStarted | TurnFinished):
            return
        seen += 1
        if seen == action["crash_at"]:
            raise Crash
        world.journal.sync(world.history)
        if seen == action["interrupt_at"]:
            raise KeyboardInterrupt

    try:
        finished = run_turn(world.history, action["question"], provider=world.provider, registry=world.registry,
                            approver=approver, limits=Limits(max_steps=4, tool_timeout_s=5), emit=emit)
    except Crash:
        world.resume()
        return "crash"
    except KeyboardInterrupt:  # Ctrl-C while the turn's end was drawn: the session loop catches it too
        world.journal.sync(world.history)
        return f"escaped at {last[0]}"
    world.journal.sync(world.history)
    return finished.stopped_by


def apply(world: World, action: dict[str, Any]) -> str:
    kind = action["kind"]
    if kind == "turn":
        return play_turn(world, action)
    if kind == "undo":
        world.history.drop_last_turn()
        world.journal.sync(world.history)
    elif kind == "resume":
        world.resume()
    elif kind == "window":
        world.provider.context_window = action["tokens"]
    return kind


def sent_violations(world: World) -> list[str]:
    """Our own check of every request body the server received (besides the server's)."""
    errors = []
    for request in world.server.requests:
        body = request.body
        if "messages" in body:
            errors += check(body["messages"][1:])
        elif "input" in body:
            errors += check_input(body["input"])
    return errors


@pytest.mark.timeout(900)
@pytest.mark.parametrize("api", ["chat", "responses"])
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequence=actions)
def test_history_sent_is_always_valid(api: str, sequence: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp, FakeServer() as server:
        world = make_world(api, Path(tmp), server)
        try:
            for action in sequence:
                outcome = apply(world, action)
                counts[f"{api}:{outcome}"] = counts.get(f"{api}:{outcome}", 0) + 1
                assert check(world.history.messages) == [], (action, world.history.messages)
            assert server.history_errors == []
            assert sent_violations(world) == []
            reloaded = History.from_json({"messages": load(world.journal.path)[1]})
            assert reloaded.messages == world.history.messages  # the journal replays the same history
        finally:
            world.provider.close()
            world.journal.close()
        counts[f"{api}:requests"] = counts.get(f"{api}:requests", 0) + len(server.requests)
        for kind, n in world.events.items():
            counts[f"{api}:event {kind}"] = counts.get(f"{api}:event {kind}", 0) + n


def test_record_fuzz_figures() -> None:
    """Runs after the fuzz test in file order: writes what it tried to the report."""
    for api in ADAPTERS:
        mine = {k.split(":", 1)[1]: v for k, v in counts.items() if k.startswith(api + ":")}
        record("history_fuzz", api=api, examples=EXAMPLES, outcomes=mine)
        # ran in this worker before this test (random order, xdist): each example asked the model
        assert not mine or mine["requests"] >= EXAMPLES, mine
