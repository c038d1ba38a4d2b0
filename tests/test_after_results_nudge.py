"""The text-mode nudge after tool results quotes the question and asks for one item a line.

Measured with the embedded 0.5B model (docs/LOCAL_MODEL.md, "The nudge after tool
results"): after the old nudge ("Use the tool results above to answer my question in
plain words") no answer to "What's still open on my todo list?" named an open todo.
"""

from __future__ import annotations

from repl.providers.textcalls import (
    AFTER_RESULTS_ZH,
    QUESTION_CHARS,
    after_results_note,
    to_text_messages,
)

TOOLS = [{"name": "list_todos", "description": "List todos.", "parameters": {"type": "object", "properties": {}}}]
RESULT = '{"ok": true, "todos": [{"id": "todo-002", "title": "Write the weekly report"}]}'


def _turn(question: str) -> list[dict[str, object]]:
    return [{"role": "system", "content": "You are glassloop."},
            {"role": "user", "content": "hello"}, {"role": "assistant", "content": "Hi!"},
            {"role": "user", "content": question},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "list_todos",
                                                                  "arguments": '{"status": "todo"}'}]},
            {"role": "tool", "tool_call_id": "c1", "name": "list_todos", "content": RESULT}]


def test_the_nudge_quotes_the_latest_question_and_asks_for_one_item_a_line() -> None:
    last = to_text_messages(_turn("What's still open on my todo list?"), TOOLS, compact_results=1500)[-1]
    results, nudge = last["content"].split("\n\n")
    assert last["role"] == "user" and results.startswith("<tool_response>\n") and "Write the weekly report" in results
    assert nudge == ('Answer my question "What\'s still open on my todo list?" using the tool results above, '
                     "in plain words; give each item on its own line. Do not repeat the tool call.")


def test_a_chinese_question_gets_the_plain_nudge_and_the_answer_asked_in_chinese() -> None:
    # quoting it made the model call the tool again (docs/LOCAL_MODEL.md)
    nudge = after_results_note(_turn("今天还有哪些没完成？"))
    assert nudge == AFTER_RESULTS_ZH + " 请用中文回答。" and "今天" not in nudge


def test_a_long_or_multi_line_question_is_quoted_on_one_line_and_cut() -> None:
    question = "Please look at my todos\n\nand tell me " + "which ones are still open " * 20
    nudge = after_results_note(_turn(question))
    quoted = nudge.split('"')[1]
    assert "\n" not in nudge and quoted.startswith("Please look at my todos and tell me which")
    assert len(quoted) == QUESTION_CHARS and quoted.endswith("…")
    assert after_results_note(_turn("x" * QUESTION_CHARS)).count("x") == QUESTION_CHARS  # not cut


def test_the_nudge_is_only_sent_never_stored_and_not_after_text() -> None:
    history = _turn("Which todos are open?")
    wire = to_text_messages(history, TOOLS)
    assert "Which todos are open?" in wire[-1]["content"] and "Answer my question" not in str(history)
    answered = [*history, {"role": "assistant", "content": "- Write the weekly report"}]
    assert "Answer my question" not in to_text_messages(answered, TOOLS)[-1]["content"]
    assert to_text_messages(history, TOOLS, after_results=None)[-1]["content"].endswith("</tool_response>")
