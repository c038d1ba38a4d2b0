"""A call that passes its tool's docstring example, a value nobody said, is refused with a result
saying so (``repl/loop/unsaid.py``); values the conversation holds, translations and choices pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repl.config.settings import Limits
from repl.loop.agent import run_turn
from repl.loop.approval import Approver
from repl.loop.events import EventLog, ToolCallFinished
from repl.loop.history import History, check
from repl.loop.unsaid import examples_of, said
from tests.fakeserver import call, text, tool_calls
from tools import build_tools
from tools.registry import Registry, tool

PRICES = {"AAPL": 231.5, "TSLA": 402.1}


@tool(source="prices.py:1")
def share_price(symbol: str) -> dict:
    """The last price of a share.

    Args:
        symbol: The ticker, e.g. AAPL.
    """
    return {"symbol": symbol, "price": PRICES.get(symbol.upper())}


@tool(source="clock.py:1")
def local_time(timezone: str, since: str = "") -> dict:
    """The time in a timezone, as an MCP clock server describes it.

    Args:
        timezone: IANA timezone name (e.g., 'America/New_York', 'Europe/London').
        since: A relative date (e.g., '2 weeks ago', 'yesterday').
    """
    return {"timezone": timezone, "since": since}


@tool(source="alerts.py:1")
def set_level(level: str) -> dict:
    """Set how loud alerts are.

    Args:
        level: One of quiet, normal or loud.
    """
    return {"level": level}


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    return Registry([*build_tools(todos_path=tmp_path / "todos.json", notes_path=tmp_path / "notes.json",
                                  files_root=tmp_path, weather="sample"), share_price, local_time, set_level])


def _run(scripted, registry, question: str):
    log = EventLog()
    history = History("system")
    finished = run_turn(history, question, provider=scripted, registry=registry, approver=Approver("auto"),
                        limits=Limits(), emit=log)
    assert check(history.messages) == []
    results = [json.loads(m["content"]) for m in history.messages if m["role"] == "tool"]
    return finished, log, results


def test_the_docstrings_example_for_another_value_is_refused_and_the_model_may_call_again(scripted, registry):
    scripted.script(tool_calls(call("share_price", {"symbol": "AAPL"})),
                    tool_calls(call("share_price", {"symbol": "TSLA"})), text("Tesla is at 402.1."))
    finished, log, results = _run(scripted, registry, "what is Tesla (TSLA) trading at?")
    assert results[0]["ok"] is False and results[0]["error"]["type"] == "unsaid_value"
    assert "symbol='AAPL' is the example in share_price's description" in results[0]["error"]["message"]
    assert results[1] == {"ok": True, "symbol": "TSLA", "price": 402.1}
    assert [e.ok for e in log.of(ToolCallFinished)] == [False, True]
    assert finished.answer == "Tesla is at 402.1."


@pytest.mark.parametrize("question, name, arguments", [
    ("what is Apple's AAPL at?", "share_price", {"symbol": "AAPL"}),  # the user named the example
    ("what is Tesla's TSLA at?", "share_price", {"symbol": "TSLA"}),  # no example at all
    ("what time is it in London?", "local_time", {"timezone": "Europe/London"}),  # a part said
    ("and over the last two weeks?", "local_time", {"timezone": "UTC", "since": "2 weeks ago"}),
    ("北京现在几点", "local_time", {"timezone": "America/New_York"}),  # another script: not judged
    ("make alerts quieter", "set_level", {"level": "quiet"}),  # a choice, no example
])
def test_a_value_the_conversation_holds_or_translates_or_chooses_passes(scripted, registry, question, name,
                                                                        arguments):
    scripted.script(tool_calls(call(name, arguments)), text("done"))
    _, log, results = _run(scripted, registry, question)
    assert results[0].get("error", {}).get("type") != "unsaid_value", results[0]


def test_glassloops_own_tools_are_judged_but_not_for_an_identifier(scripted, registry):
    """An id ("todo-002") comes from glassloop's own results; the weather's example city does not."""
    scripted.script(tool_calls(call("get_todo", {"todo_id": "todo-002"})), text("ok"))
    _, _, results = _run(scripted, registry, "the one about the table")
    assert results[0].get("error", {}).get("type") != "unsaid_value", results[0]
    scripted.script(tool_calls(call("get_weather", {"city": "Beijing"})),
                    tool_calls(call("get_weather", {"city": "Oslo"})), text("Cold."))
    _, _, results = _run(scripted, registry, "will it snow in oslo on sunday?")
    assert results[0]["error"]["type"] == "unsaid_value" and "city='Beijing'" in results[0]["error"]["message"]
    assert results[1].get("error", {}).get("type") != "unsaid_value"  # the city asked is called


def test_examples_are_read_after_their_cue_to_the_end_of_the_sentence() -> None:
    assert examples_of('Short title, e.g. "Write the weekly report". Keep it short.') == [
        ' "write the weekly report".']
    assert examples_of("城市名，例如 北京。其他") == [" 北京"]
    assert examples_of("One of low, medium or high.") == []
    assert said("todo-002", "finish todo 2", "finish todo 2")
    assert not said("aapl", "what is tesla at?", "what is tesla at?")
    assert said("beijing", "北京天气", "北京天气")
    assert said("ny", "the weather in new york", "the weather in new york")  # too short to tell
    assert said("北京市", "北京天气", "北京天气") and not said("上海", "北京天气", "北京天气")
    assert not said("write the weekly report", "remind me to call the plumber", "remind me to call the plumber")
