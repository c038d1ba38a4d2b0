"""The router bench's own data: the examples it gives each built-in tool and the none class
(at most five, none of them taken from a case file) and the text it embeds for a tool. Needs
none of the candidate models."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.router_candidates import (
    DEV_FILES,
    EXAMPLES,
    HELDOUT_FILES,
    MAX_EXAMPLES,
    NONE,
    Case,
    case_messages,
    check_setup,
    load_cases,
    overlaps,
    tool_text,
)
from tools import build_tools


def built_in(folder: Path) -> list:
    return build_tools(
        todos_path=folder / "todos.json",
        notes_path=folder / "notes.json",
        files_root=folder,
        weather="sample",
    )


def test_every_built_in_tool_and_none_has_at_most_five_examples(tmp_path: Path) -> None:
    names = {tool.name for tool in built_in(tmp_path)}
    assert set(EXAMPLES) == names | {NONE}
    assert all(1 <= len(examples) <= MAX_EXAMPLES for examples in EXAMPLES.values())
    said = [e for examples in EXAMPLES.values() for e in examples]
    assert any("\u4e00" <= ch <= "\u9fff" for e in said for ch in e), "Chinese examples too"


def test_no_example_shares_twelve_characters_with_a_case() -> None:
    messages = case_messages()
    assert len(messages) >= len(load_cases([*DEV_FILES, *HELDOUT_FILES]))
    assert overlaps(EXAMPLES, messages) == []
    copied = {"list_todos": (messages[0][:20].upper(),)}  # case and spacing do not hide a copy
    assert overlaps(copied, messages) == [messages[0][:20].upper()]


def test_a_tools_text_is_its_name_description_and_parameters(tmp_path: Path) -> None:
    weather = next(tool for tool in built_in(tmp_path) if tool.name == "get_weather")
    text = tool_text(weather)
    assert text.startswith("get weather\n")
    assert " ".join(weather.description.split()) in text
    assert all(spec["description"] in text for spec in weather.parameters["properties"].values())


def test_a_run_without_an_expected_tool_fails(tmp_path: Path) -> None:
    tools = built_in(tmp_path)
    check_setup(tools, [Case("x", "en", ("get_weather",), "t.toml"), Case("y", "en", (), "t.toml")])
    with pytest.raises(RuntimeError, match="clock__get_current_time"):
        check_setup(tools, load_cases(DEV_FILES))
