"""Context window: request sizing, cache-friendly cuts, prefix stability, a 200-turn conversation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repl.loop.agent import Limits, request_tools, run_turn
from repl.loop.approval import Approver
from repl.loop.context import ContextWindow, messages_tokens, tools_tokens
from repl.loop.events import EventLog, ModelUsage, Notice, Usage
from repl.loop.history import History, check
from repl.loop.prompts import system_prompt
from repl.providers.chat import ChatProvider
from repl.providers.responses import ResponsesProvider
from tests.fakeserver import FakeServer, call, prompt_bytes, text, tool_calls
from tests.scripted_provider import ScriptedProvider
from tools import build_tools
from tools.registry import Registry, tool

SYSTEM = {"role": "system", "content": "You are a test assistant."}
TOOLS = [{"name": "fetch", "description": "Fetch a page.",
          "parameters": {"type": "object", "properties": {"page": {"type": "integer"}}}}]


def turn_messages(i: int, result_chars: int = 2000) -> list[dict]:
    return [{"role": "user", "content": f"question {i}"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{i}", "name": "fetch",
                                                                 "arguments": json.dumps({"page": i})}]},
            {"role": "tool", "tool_call_id": f"c{i}", "name": "fetch", "content": "r" * result_chars},
            {"role": "assistant", "content": f"answer {i}"}]


# ---- cutting ---------------------------------------------------------------------

def test_a_cut_shortens_old_results_then_drops_old_turns() -> None:
    messages = [{"role": "system", "content": "sys"}]
    for i in range(5):
        messages += [{"role": "user", "content": f"question {i}"},
                     {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{i}", "name": "list_todos", "arguments": "{}"}]},
                     {"role": "tool", "tool_call_id": f"c{i}", "name": "x", "content": "r" * 4000},
                     {"role": "assistant", "content": f"answer {i}"}]
    fitted, actions = ContextWindow(refill=1.0).fit(messages, None, 2000)
    assert "shortened" in actions[0]
    assert fitted[-4]["content"] == "question 4" and fitted[-2]["content"] == "r" * 4000  # current turn intact
    assert check(fitted[1:]) == []
    fitted, actions = ContextWindow(refill=1.0).fit(messages, None, 1200)
    assert any("dropped" in a for a in actions)
    assert fitted[0]["content"] == "sys" and fitted[1]["role"] == "user"
    assert check(fitted[1:]) == []


# ---- sizing ---------------------------------------------------------------------


def test_size_is_the_last_report_plus_an_estimate_of_what_was_added():
    window = ContextWindow()
    first = [SYSTEM, {"role": "user", "content": "question 0"}]
    window.fit(first, TOOLS, 10**6)
    assert window.last_size == messages_tokens(first) + tools_tokens(TOOLS)  # nothing reported yet
    window.reported(Usage(5000, 0, 10))
    grown = [SYSTEM, *turn_messages(0)]
    window.fit(grown, TOOLS, 10**6)
    assert window.last_size == 5000 + messages_tokens(grown[2:])
    window.reported(Usage(6000, 0, 10))
    without_tools = [*grown, {"role": "user", "content": "question 1"}]
    window.fit(without_tools, None, 10**6)  # a guard's final call sends no tools
    assert window.last_size == 6000 + messages_tokens(without_tools[-1:]) - tools_tokens(TOOLS)
    window.reported(Usage(99_999, 0, 10, estimated=True))  # an estimate anchors nothing
    window.fit(without_tools, None, 10**6)
    assert window.last_size == messages_tokens(without_tools)


def test_a_reported_size_over_the_budget_cuts_even_when_the_estimate_fits():
    window = ContextWindow()
    messages = [SYSTEM, *turn_messages(0, 400), *turn_messages(1, 400)]
    sent, actions = window.fit(messages, TOOLS, 1000)
    assert sent is messages and actions == []  # ~300 tokens by estimate
    window.reported(Usage(1200, 0, 5))  # the server counts far more (another tokenizer)
    grown = [*messages, {"role": "user", "content": "question 2"}]
    sent, actions = window.fit(grown, TOOLS, 1000)
    assert actions and len(sent) < len(grown)
    assert sent[0] == SYSTEM and sent[-1]["content"] == "question 2" and check(sent[1:]) == []


def replans(refill: float, turns: int = 60, budget: int = 8000) -> tuple[int, int]:
    """(requests whose prefix changed, notices) over a growing conversation."""
    window, messages, previous = ContextWindow(refill=refill), [SYSTEM], None
    changed = notices = 0
    for i in range(turns):
        messages = [*messages, *turn_messages(i)]
        sent, actions = window.fit(messages, None, budget)
        assert check(sent[1:]) == [] and sent[0] == SYSTEM and window.last_size <= budget
        assert sent[-4:] == messages[-4:]  # the current turn is never cut
        if previous is not None and sent[: len(previous)] != previous:
            changed += 1
        notices += bool(actions)
        previous = sent
    return changed, notices


def test_a_cut_is_kept_while_the_conversation_only_grows():
    changed, notices = replans(refill=0.75)
    assert 0 < changed == notices <= 60 // 4  # a new cut every few turns, each one announced
    every_request, _ = replans(refill=1.0)  # cutting just enough: a new prefix almost every time
    assert every_request > 3 * changed


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["turn", "turn", "turn", "undo"]), st.integers(0, 3000),
                          st.floats(0.5, 2.0)), max_size=30),
       st.integers(300, 3000))
def test_every_request_is_valid_and_fits_unless_its_current_turn_alone_does_not(ops, budget):
    history, window = History("sys"), ContextWindow()
    for n, (op, result_chars, tokenizer) in enumerate(ops):
        if op == "undo":
            history.drop_last_turn()
            continue
        history.begin_turn(f"question {n}")
        requests = [history.for_request()]
        history.add_assistant("", [{"id": f"c{n}", "name": "fetch", "arguments": "{}"}])
        history.add_tool_result(f"c{n}", "fetch", "r" * result_chars)
        requests.append(history.for_request())
        history.add_assistant(f"answer {n}")
        for request in requests:
            sent, _ = window.fit(request, TOOLS, budget)
            current = request[max(i for i, m in enumerate(request) if m["role"] == "user"):]
            assert check(sent[1:]) == [] and sent[0]["role"] == "system"
            assert sent[-len(current):] == current
            assert window.last_size <= budget or sent[1:] == current
            window.reported(Usage(int(window.last_size * tokenizer), 0, 5))  # another tokenizer


def test_tools_go_out_in_a_fixed_order():
    schemas = [{"name": n} for n in ("list_todos", "zeta__search", "calculator", "alpha__read")]
    assert [s["name"] for s in request_tools(schemas)] == [
        "list_todos", "calculator", "alpha__read", "zeta__search"]
    assert request_tools(list(reversed(schemas)))[2:] == request_tools(schemas)[2:]


# ---- against the scripted server -----------------------------------------------------


def raw_value(raw: bytes, key: str) -> bytes:
    """The bytes of one top-level value of a request body, as the client sent them."""
    body = raw.decode()
    start = body.index(f'"{key}":') + len(key) + 3
    while body[start] == " ":
        start += 1
    _, end = json.JSONDecoder().raw_decode(body, start)
    return body[start:end].encode()


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    return Registry(build_tools(todos_path=tmp_path / "todos.json", notes_path=tmp_path / "notes.json",
                                files_root=tmp_path, weather="sample"))


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_request_prefix_is_stable_across_turns(tmp_path, registry, api):
    adapter, conversation = (ChatProvider, "messages") if api == "chat" else (ResponsesProvider, "input")
    with FakeServer(prefix_cache=True) as server:
        provider = adapter(name="t", model="m", base_url=server.base_url, api_key="k", max_retries=0)
        history, context = History(system_prompt()), ContextWindow()
        for i in range(4):
            server.script(tool_calls(call("calculator", {"expression": f"{i}+1"}),
                                     call("get_weather", {"city": "北京"})),
                          text(f"{i} + 1 = {i + 1}; sunny."))
            run_turn(history, f"what is {i}+1, and the weather?", provider=provider, registry=registry,
                     approver=Approver("auto"), limits=Limits(), emit=EventLog(), context=context)
        provider.close()
    requests = [r for r in server.requests if r.path.endswith(("/chat/completions", "/responses"))]
    assert len(requests) == 8 and server.history_errors == []
    assert len({raw_value(r.raw, "tools") for r in requests}) == 1  # byte-identical tool list
    system = {r.body["messages"][0]["content"] if api == "chat" else r.body["instructions"] for r in requests}
    assert len(system) == 1
    for before, after in zip(requests, requests[1:], strict=False):
        earlier = raw_value(before.raw, conversation)
        assert raw_value(after.raw, conversation).startswith(earlier[:-1])  # ends with "]"
    prompts = [server.prefix_usage(prompt_bytes(r.body)) for r in requests]  # replayed: all cached now
    assert all(cached == prompt - prompt % 64 for prompt, cached in prompts)


def test_prefix_cache_accounting_counts_whole_blocks_of_the_shared_prefix():
    with FakeServer(prefix_cache=True) as server:
        first = b"a" * 1000
        assert server.prefix_usage(first) == (250, 0)
        assert server.prefix_usage(first + b"b" * 100) == (275, 192)  # 3 whole blocks of 256 bytes
        assert server.prefix_usage(b"b" + first) == (250, 0)


def fetch(page: int) -> dict:
    """Fetch a page of a long document.

    Args:
        page: the page number.
    """
    return {"page": page, "text": f"page {page}: " + "lorem ipsum dolor sit amet " * 120}


def test_200_turns_stay_inside_a_small_window_with_a_valid_history():
    window, turns = 2000, 200
    # the loop's windowing is the subject: the in-process scripted provider (prefix cache as the server's)
    server = ScriptedProvider(context_window=window, max_tokens=256, prefix_cache=True)
    for i in range(turns):
        server.script(tool_calls(call("fetch", {"page": i})), text(f"Page {i} is about lorem ipsum. " * 4))
    history, context, log = History("You are a test assistant."), ContextWindow(), EventLog()
    for i in range(turns):
        finished = run_turn(history, f"What does page {i} say?", provider=server,
                            registry=Registry([tool(fetch)]), approver=Approver("auto"),
                            limits=Limits(max_tool_result_chars=1500), emit=log, turn=i + 1,
                            context=context)
        assert finished.stopped_by == "answer", finished
    requests = server.chat_requests()
    assert len(requests) == 2 * turns and server.unscripted == 0
    assert server.history_errors == []  # the server checked every request's history
    sizes = [len(prompt_bytes(r.body)) // 4 for r in requests]
    assert max(sizes) <= window
    assert check(history.messages) == [] and len(history.turn_starts()) == turns  # the store is whole
    assert messages_tokens(history.for_request()) > 30 * window  # unmanaged, it would never fit
    assert 0 < len(log.of(Notice)) < turns  # a turn adds ~450 tokens: about one cut every other turn
    usages = [e.usage for e in log.of(ModelUsage)]
    cached = sum(u.cached_tokens for u in usages) / sum(u.input_tokens for u in usages)
    assert cached > 0.6  # the cut is kept between cuts: mostly the prefix is served from cache
