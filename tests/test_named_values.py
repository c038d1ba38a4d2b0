"""A value the question names for a string property, from the values the property's own text
gives (``repl/embedded/named.py``), is the value the grammar lets a call pass."""

from __future__ import annotations

from typing import Any

import pytest

from repl.embedded.grammar import _described, _mentioned_only, _said_values
from repl.embedded.named import named, one_slip, says, shared_named

# a user's tool as a tool's author writes one: the values are examples of an open set
BIKE: dict[str, Any] = {"name": "tyre_pressure", "parameters": {"type": "object", "properties": {
    "kind": {"type": "string", "description": 'Kind of bicycle, e.g. "road", "gravel", "mountain" '
             '(or "mtb"), "kids"; Chinese names such as "公路车", "山地车", "童车" also work.'},
    "load": {"type": "string", "default": "normal",
             "description": 'Rider and luggage: "light", "normal" or "heavy" (also "轻", "重").'}},
    "required": ["kind"]}}
ZONE = {"type": "string", "description": "IANA timezone name (e.g., 'America/New_York', "
        "'Europe/London'). Use 'UTC' as local timezone if no timezone provided by the user."}
NOW: dict[str, Any] = {"name": "now", "parameters": {"type": "object", "properties": {"timezone": ZONE},
                                                     "required": ["timezone"]}}
CONVERT: dict[str, Any] = {"name": "convert", "parameters": {"type": "object", "properties": {
    "source_timezone": ZONE, "time": {"type": "string", "description": "Time (HH:MM)"}, "target_timezone": ZONE},
    "required": ["source_timezone", "time", "target_timezone"]}}


def _given(tool: dict[str, Any], question: str) -> dict[str, Any]:
    parameters = _mentioned_only(_described(tool), question, [], _said_values(tool, question))["parameters"]
    return {name: (sub.get("enum"), name in parameters["required"]) for name, sub in parameters["properties"].items()}


@pytest.mark.parametrize(("question", "kind"), [
    ("山地车要打几个气压", "山地车"),  # the longer value said, not a shorter one inside it
    ("tyre pressure for a gravle bike please", "gravel"),  # one slip
    ("pressure for my kid's one", "kids"),  # the other number
    ("MTB tyres: what psi?", "mtb"),
])
def test_a_value_the_question_says_from_those_a_description_gives_is_the_one_a_call_passes(
        question: str, kind: str) -> None:
    """The 0.5B model passed "roadcar" for "山地车…" and "road" for a gravel bike: the values a
    description lists as examples are an open set, but the one the question says is the value."""
    assert _given(BIKE, question)["kind"] == ([kind], True)


def test_an_optional_property_whose_value_is_said_must_be_given() -> None:
    """Also one whose description quotes its values without examples, which the grammar makes its
    choices: "进阶" of '"gentle", "standard" or "deep" (also "advanced", "进阶")' is given as said,
    where the 0.5B model passed "advanced"."""
    level = {"name": "stretch", "parameters": {"type": "object", "properties": {"level": {
        "type": "string", "description": 'How hard: "gentle", "standard" or "deep" (also "advanced", "进阶").'}}}}
    assert _given(level, "来一套进阶的肩部拉伸") == {"level": (["进阶"], True)}
    assert _given(BIKE, "heavy rider on a road bike") == {"kind": (["road"], True), "load": (["heavy"], True)}
    assert _given(BIKE, "路上骑公路车，我比较重") == {"kind": (["公路车"], True), "load": (["重"], True)}


def test_a_question_that_says_no_value_or_several_leaves_the_property_free() -> None:
    assert _given(BIKE, "psi for my bicycle?")["kind"] == (None, True)
    assert _given(BIKE, "road or gravel, which needs more air?")["kind"] == (None, True)


@pytest.mark.parametrize(("question", "zone"), [
    ("current time over in Tokyo?", "Asia/Tokyo"),
    ("can I still call Vancover at this hour?", "America/Vancouver"),
    ("time in new york please", "America/New_York"),
])
def test_a_time_zone_is_named_by_its_city(question: str, zone: str) -> None:
    """The 0.5B model passed "UTC" (the local zone of the description) for the time in another
    city: an IANA zone property takes the zone of the city the question names."""
    assert _given(NOW, question) == {"timezone": ([zone], True)}


def test_two_cities_are_the_two_ends_of_a_conversion_and_one_city_leaves_both_free() -> None:
    both = _given(CONVERT, "noon in Sydney is when in Berlin?")
    assert both["source_timezone"][0] == both["target_timezone"][0] == ["Australia/Sydney", "Europe/Berlin"]
    assert _given(NOW, "noon in Sydney is when in Berlin?") == {"timezone": (None, True)}
    one = _given(CONVERT, "3pm Tokyo time is when for me?")  # the other end may be the user's own zone
    assert one["source_timezone"] == one["target_timezone"] == (None, True)


def test_two_zone_properties_whose_descriptions_quote_other_examples_share_the_two_cities() -> None:
    """The published time server's source and target descriptions quote other example zones
    ('Europe/London' in one, 'Asia/Tokyo' in the other): the cities said fill both all the same."""
    source = {"type": "string", "description": "Source IANA timezone name (e.g., 'Europe/London')."}
    target = {"type": "string", "description": "Target IANA timezone name (e.g., 'Asia/Tokyo')."}
    both = shared_named([("source", source), ("target", target)], "4pm London time, and in Singapore?")
    assert both == {"source": ["Asia/Singapore", "Europe/London"], "target": ["Asia/Singapore", "Europe/London"]}


def test_a_word_that_is_also_a_zone_gives_way_to_the_cities_said_in_capitals() -> None:
    assert "Pacific/Wake" in named(ZONE, "I wake at 7 in Tokyo; when is that in London")
    both = shared_named([("a", ZONE), ("b", ZONE)], "I wake at 7 in Tokyo; when is that in London")
    assert sorted(both["a"]) == sorted(both["b"]) == ["Asia/Tokyo", "Europe/London"]


def test_a_city_said_in_chinese_names_its_zone_by_the_unicode_locale_data() -> None:
    """The zone database names cities in English only; CLDR's exemplar cities (``babel``) name
    them in Chinese. Before, "伦敦" was left to the model, which passed "America/Los Angeles"."""
    assert _given(NOW, "伦敦这会儿是几点") == {"timezone": (["Europe/London"], True)}
    both = _given(CONVERT, "柏林下午4点，相当于多伦多几点")
    assert both["source_timezone"][0] == both["target_timezone"][0] == ["America/Toronto", "Europe/Berlin"]
    mixed = _given(CONVERT, "9am 悉尼 is what time in Paris")
    assert mixed["source_timezone"][0] == ["Australia/Sydney", "Europe/Paris"]


@pytest.mark.parametrize(("question", "zone"), [
    ("what time is it in Germany right now", "Europe/Berlin"),  # Busingen keeps Berlin's time
    ("德国现在几点", "Europe/Berlin"),
    ("印度这会儿几点了", "Asia/Kolkata"),
])
def test_a_country_that_keeps_one_time_names_its_zone(question: str, zone: str) -> None:
    assert _given(NOW, question) == {"timezone": ([zone], True)}


@pytest.mark.parametrize("question", ["time in the US now?", "美国现在几点", "澳大利亚几点了"])
def test_a_country_of_several_times_is_left_to_the_model(question: str) -> None:
    assert _given(NOW, question) == {"timezone": (None, True)}


def test_without_the_locale_data_a_chinese_city_is_left_to_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from repl.embedded import named as module

    monkeypatch.setattr(module, "_locale_names", list)
    module._zones.cache_clear()
    try:
        assert _given(NOW, "伦敦这会儿是几点") == {"timezone": (None, True)}
        assert _given(NOW, "time in London please") == {"timezone": (["Europe/London"], True)}
    finally:
        module._zones.cache_clear()


def test_what_is_said_is_read_as_words() -> None:
    assert says("show me the lower back routine", "lower_back")
    assert not says("roadside cafe", "road")  # a whole word only
    assert not says("ruining my day", "raining")  # one letter for another is no slip
    assert one_slip("weather", "wether") and one_slip("commits", "comits") and one_slip("details", "detials")
    assert not one_slip("raining", "ruining") and not one_slip("shorts", "short ")


def test_an_apostrophe_is_no_quote_and_a_property_with_choices_is_left_to_them() -> None:
    assert named({"type": "string", "description": "The user's words, as they'd say them"},
                 "the user's words as they'd say them") == []
    assert named({"type": "string", "enum": ["a", "b"], "description": '"road" or "city"'}, "road") == []
