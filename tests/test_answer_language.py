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


def test_the_embedded_models_advice_follows_the_tool_block_and_is_shared_across_days() -> None:
    """The advice on when to call a tool (and to answer in the question's language) is the
    last thing the model reads before the date, and part of the prefix every day shares."""
    import datetime as dt

    from repl.loop.prompts import system_prompt
    from repl.providers.base import ADVICE_MARK

    def wire_system(day: dt.date, extra: str = "") -> str:
        history = [{"role": "system", "content": system_prompt(day, extra, compact=True)},
                   {"role": "user", "content": "hi"}]
        return to_text_messages(history, TOOLS)[0]["content"]

    first, later = wire_system(dt.date(2025, 5, 1)), wire_system(dt.date(2026, 1, 31), "Be brief.")
    advice = first.index(ADVICE_MARK)
    assert first.index("</tool_call>") < advice < first.index("Today is 2025-05-01.")
    assert "Answer in the language of the user's question." in first[advice:]
    date = first.index("\n\nToday is ")
    assert later[:date] == first[:date]
    assert ADVICE_MARK not in system_prompt(dt.date(2025, 5, 1))  # hosted models: the full prompt only
