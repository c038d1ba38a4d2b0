"""The text tool-call protocol: history conversion and the streaming parser.

The corpus holds real replies of the embedded model (collected with
``bench/local_model.py --collect``) with their reviewed parses.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repl.embedded.dialect import AFTER_RESULTS, Dialect
from repl.embedded.textcalls import (
    TextCallFilter,
    parse_text_calls,
    to_text_messages,
)

CORPUS = json.loads((Path(__file__).parent / "data" / "textcall_corpus.json").read_text("utf-8"))
RECORDS = CORPUS["records"]
NAMES = CORPUS["tool_names"]
TOOLS = [{"name": "list_todos", "description": "List todos.",
          "parameters": {"type": "object", "properties": {"status": {"type": "string"}}}},
         {"name": "get_todo", "description": "One todo.",
          "parameters": {"type": "object", "properties": {"todo_id": {"type": "string"}}}}]


def _names(record: dict[str, Any]) -> list[str]:
    return NAMES if record["tools"] else []


def _chunked(text: str, names: list[str], sizes: list[int]) -> tuple[str, list]:
    text_filter = TextCallFilter(names, id_prefix="call_text_")
    shown, position, index = [], 0, 0
    while position < len(text):
        size = sizes[index % len(sizes)]
        shown.append(text_filter.feed(text[position : position + size]))
        position, index = position + size, index + 1
    rest, calls = text_filter.finish()
    return "".join(shown) + rest, calls


def _plain(calls: list) -> list[dict[str, str]]:
    return [{"name": call.name, "arguments": call.arguments} for call in calls]


# ---------------------------------------------------------------- the corpus


def test_corpus_is_real_and_varied() -> None:
    assert 20 <= len(RECORDS) <= 60
    outputs = [r["output"] for r in RECORDS]
    # (this model never wrote <tool_call> tags in our samples; the unit tests below cover them)
    assert any("```json" in o for o in outputs)
    assert any(o.lstrip().startswith("{") for o in outputs)
    assert any(not r["expected"]["calls"] for r in RECORDS)  # plain answers too
    assert any(r.get("malformed") for r in RECORDS)


@pytest.mark.parametrize("record", RECORDS, ids=[r["id"] for r in RECORDS])
def test_corpus_parses_as_reviewed(record: dict[str, Any]) -> None:
    text, calls = parse_text_calls(record["output"], _names(record))
    assert text == record["expected"]["text"]
    assert _plain(calls) == record["expected"]["calls"]


@pytest.mark.parametrize("record", RECORDS, ids=[r["id"] for r in RECORDS])
def test_corpus_chunkings_give_the_same_result(record: dict[str, Any]) -> None:
    whole = parse_text_calls(record["output"], _names(record))
    for seed in range(25):
        rng = random.Random(seed)
        sizes = [rng.randint(1, 9) for _ in range(50)]
        assert _chunked(record["output"], _names(record), sizes) == whole, seed
    assert _chunked(record["output"], _names(record), [1]) == whole


# ---------------------------------------------------------------- streaming behaviour


def test_plain_text_streams_through_without_delay() -> None:
    text_filter = TextCallFilter(NAMES)
    assert text_filter.feed("The weekly report ") == "The weekly report "
    assert text_filter.feed("is due {soon}.\n") == "is due {soon}.\n"
    assert text_filter.finish() == ("", [])


def test_only_a_possible_call_is_held_back() -> None:
    text_filter = TextCallFilter(["list_todos"], id_prefix="c")
    assert text_filter.feed("Let me check. <tool") == "Let me check. "
    assert text_filter.feed('_call>\n{"name": "list_todos", "argu') == ""
    assert text_filter.feed('ments": {"status": "todo"}}\n</tool_call>\nDone') == "\nDone"
    text, calls = text_filter.finish()
    assert text == ""
    assert _plain(calls) == [{"name": "list_todos", "arguments": '{"status": "todo"}'}]
    assert calls[0].id == "c1"


def test_a_code_block_in_another_language_streams_as_it_comes() -> None:
    text_filter = TextCallFilter(["list_todos"])
    assert text_filter.feed("```python\nx = {") == "```python\nx = {"
    assert text_filter.feed('"name": "list_todos"}\n``') == '"name": "list_todos"}\n'
    assert text_filter.feed("`\nok") == "```\nok"
    assert text_filter.finish() == ("", [])


def test_several_calls_in_one_reply_get_distinct_ids() -> None:
    reply = ('<tool_call>\n{"name": "get_todo", "arguments": {"todo_id": "todo-002"}}\n'
             '</tool_call>\n<tool_call>\n{"name": "get_todo", "arguments": {"todo_id": 3}}\n'
             "</tool_call>")
    text, calls = parse_text_calls(reply, ["get_todo"])
    assert text.strip() == ""
    assert [c.arguments for c in calls] == ['{"todo_id": "todo-002"}', '{"todo_id": 3}']
    assert [c.id for c in calls] == ["call_text_1", "call_text_2"]


def test_ids_differ_between_replies() -> None:
    first = TextCallFilter(["list_todos"])
    second = TextCallFilter(["list_todos"])
    reply = '{"name": "list_todos", "arguments": {}}'
    first.feed(reply)
    second.feed(reply)
    assert first.finish()[1][0].id != second.finish()[1][0].id


@pytest.mark.parametrize(("reply", "name", "arguments"), [
    ('```json\n{"name": "list_todos", "arguments": {"status": "todo"}}\n```',
     "list_todos", '{"status": "todo"}'),
    ('{"name": "list_todos", "arguments": "{\\"status\\": \\"todo\\"}"}',
     "list_todos", '{"status": "todo"}'),  # double-encoded arguments are unwrapped
    ('{"function": {"name": "list_todos", "parameters": {}}}', "list_todos", "{}"),
    ('<tool_call>\n{"name": "list_todos"}\n', "list_todos", "{}"),  # no closing tag
    ('<tool_call>\n```json\n{"name": "list_todos", "arguments": {}}\n```\n</tool_call>',
     "list_todos", "{}"),
    ('<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>', "nope", "{}"),
    ('<tool_call>\n{"name": "list_todos", "arguments": {"status": todo}}\n</tool_call>',
     "list_todos", '{"status": todo}'),  # broken JSON: raw text, the registry reports it
])
def test_call_shapes_the_model_writes(reply: str, name: str, arguments: str) -> None:
    text, calls = parse_text_calls(reply, ["list_todos"])
    assert text.strip() == ""
    assert _plain(calls) == [{"name": name, "arguments": arguments}]


@pytest.mark.parametrize("reply", [
    '{"name": "calculate", "arguments": {"expression": "1+1"}}',  # unknown tool
    '```json\n{"title": "Pay rent", "priority": "high"}\n```',   # data, not a call
    'Use {"status": "todo"} as the filter.',
    "<tool_call>\nI cannot do that.\n</tool_call>",
])
def test_text_that_only_looks_like_a_call_is_shown(reply: str) -> None:
    text, calls = parse_text_calls(reply, ["list_todos"])
    assert calls == []
    assert text.strip() == reply.replace("<tool_call>\n", "").replace("\n</tool_call>", "")


_FRAGMENTS = st.sampled_from([
    "<tool_call>", "</tool_call>", "<tool", "```", "```json\n", "```python\n", "{", "}",
    '"name": "list_todos"', '"arguments": {}', '{"name": "get_todo", "arguments": {"todo_id": 2}}',
    ", ", "\n", "hello ", "你好", '"', "\\", "[", "]", "`",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(_FRAGMENTS, max_size=25), st.lists(st.integers(1, 7), min_size=1, max_size=10))
def test_any_chunking_gives_the_same_result(fragments: list[str], sizes: list[int]) -> None:
    text = "".join(fragments)
    assert _chunked(text, ["list_todos", "get_todo"], sizes) == parse_text_calls(
        text, ["list_todos", "get_todo"])


# ---------------------------------------------------------------- history → wire


def _history() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are glassloop."},
        {"role": "user", "content": "What is left?"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "c1", "name": "list_todos", "arguments": '{"status": "todo"}'}]},
        {"role": "tool", "tool_call_id": "c1", "name": "list_todos", "content": '{"ok": true}'},
        {"role": "assistant", "content": "One item is left."},
    ]


def test_tools_go_into_the_system_message_as_qwen_expects() -> None:
    system = to_text_messages(_history(), TOOLS)[0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are glassloop.\n\n# Tools")
    lines = system["content"].split("<tools>\n")[1].split("\n</tools>")[0].splitlines()
    assert [json.loads(line)["function"]["name"] for line in lines] == ["list_todos", "get_todo"]
    assert '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}' in system["content"]


def test_previous_calls_become_assistant_text_with_object_arguments() -> None:
    messages = to_text_messages(_history(), TOOLS)
    call_text = messages[2]["content"]
    assert messages[2] == {"role": "assistant", "content": call_text}
    body = call_text.removeprefix("<tool_call>\n").removesuffix("\n</tool_call>")
    assert json.loads(body) == {"name": "list_todos", "arguments": {"status": "todo"}}
    # the result goes back as user text, the bytes Qwen's template renders for a tool message
    assert messages[3] == {"role": "user", "content": '<tool_response>\n{"ok": true}\n</tool_response>'}


def test_no_message_has_null_content_and_no_tools_means_no_instructions() -> None:
    history = [*_history(), {"role": "assistant", "content": None}]
    messages = to_text_messages(history, None)
    assert all(isinstance(m["content"], str) for m in messages)
    assert messages[0] == {"role": "system", "content": "You are glassloop."}
    assert "<tools>" not in json.dumps(messages)


def test_a_default_system_message_carries_the_tools_when_there_is_none() -> None:
    messages = to_text_messages([{"role": "user", "content": "hi"}], TOOLS)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "<tools>" in messages[0]["content"]


def test_invalid_arguments_in_history_are_kept_verbatim_as_a_string() -> None:
    history = [{"role": "assistant", "content": "x",
                "tool_calls": [{"id": "c1", "name": "get_todo", "arguments": "{todo_id: 2"}]}]
    content = to_text_messages(history, None)[0]["content"]
    body = content.split("<tool_call>\n")[1].removesuffix("\n</tool_call>")
    assert json.loads(body)["arguments"] == "{todo_id: 2"


def test_after_tool_results_the_model_is_asked_for_the_answer() -> None:
    ends_with_results = _history()[:4]
    messages = to_text_messages(ends_with_results, TOOLS)
    results = '<tool_response>\n{"ok": true}\n</tool_response>'
    assert messages[-1] == {"role": "user", "content": f"{results}\n\n{AFTER_RESULTS}"}
    assert messages[-2]["role"] == "assistant"
    assert to_text_messages(ends_with_results, TOOLS, Dialect(text_calls=True))[-1]["content"] == results
    assert to_text_messages(_history(), TOOLS)[-1]["role"] == "assistant"  # not after text
