"""The answer comes back in the question's language: the text-mode nudge after tool results.

Measured with the embedded 0.5B model (docs/LOCAL_MODEL.md, "Answer in the user's
language"): after the English nudge it answered most Chinese questions in English.
"""

from __future__ import annotations

from repl.providers.textcalls import AFTER_RESULTS, to_text_messages

TOOLS = [{"name": "list_todos", "description": "List todos.", "parameters": {"type": "object", "properties": {}}}]


def _after_results(question: str) -> str:
    history = [{"role": "user", "content": question},
               {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "list_todos",
                                                                     "arguments": "{}"}]},
               {"role": "tool", "tool_call_id": "c1", "name": "list_todos", "content": '{"ok": true}'}]
    return to_text_messages(history, TOOLS)[-1]["content"]


def test_a_chinese_question_gets_the_nudge_asking_for_a_chinese_answer() -> None:
    last = _after_results("今天还有哪些没完成？")
    assert last.endswith(AFTER_RESULTS + " 请用中文回答。")


def test_other_questions_get_the_nudge_unchanged() -> None:
    for question in ("Which todos are open?", "今日のタスクは何ですか？", "Quels todos restent ?"):
        assert _after_results(question).endswith(AFTER_RESULTS), question


def test_the_language_follows_the_latest_question_not_the_first() -> None:
    history = [{"role": "user", "content": "你好"}, {"role": "assistant", "content": "你好！"},
               {"role": "user", "content": "Which todos are open?"},
               {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "list_todos",
                                                                     "arguments": "{}"}]},
               {"role": "tool", "tool_call_id": "c1", "name": "list_todos", "content": "{}"}]
    assert to_text_messages(history, TOOLS)[-1]["content"].endswith(AFTER_RESULTS)
