"""The small-talk gate: greetings, thanks and goodbyes get the text-only grammar on their
turn's first step (``small_talk_gate`` of the local profiles); anything else may call."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from repl.config.load import load_settings
from repl.config.settings import EMBEDDED_PROFILES
from repl.loop.agent import Limits, run_turn
from repl.loop.approval import Approver
from repl.loop.events import EventLog
from repl.loop.history import History
from repl.providers import smalltalk
from repl.providers.chat import ChatProvider
from repl.providers.grammar import (
    SMALL_TALK_GRAMMAR,
    SMALL_TALK_ZH_GRAMMAR,
    not_beginning_with,
    tool_grammar,
    without_han,
)
from repl.providers.smalltalk import is_confirmation, is_small_talk
from tests.fakeserver import FakeServer, text
from tools.registry import Registry

SMALL_TALK = [
    "hi", "Hello!", "Hey there 👋", "hiya", "Howdy, friend!", "Good afternoon.", "Morning!",
    "What's up?", "How are you doing?", "How's it going, buddy?", "How have you been?",
    "I'm fine, thanks. And you?", "Pleased to meet you.", "Great to see you again!", "Long time no see!",
    "Thank you!", "Thanks a lot!!", "THANK YOU VERY MUCH", "Many thanks, that was helpful.",
    "Much appreciated 🙏", "I really appreciate it.", "ok, thanks", "Perfect, thank you so much!",
    "That's all I need.", "That will be all for today.", "Nothing else, thanks.", "I'm all set.",
    "Bye!", "Bye bye", "good bye", "See you later!", "See ya soon", "Talk to you tomorrow.",
    "Take care!", "Have a nice evening!", "Good night, sleep well.", "Catch you later, mate.",
    "Thanks, bye", "  hello  ", "Ｈｅｌｌｏ！", "You’re welcome!",
    "你好", "您好！", "嗨～", "哈喽，大家好", "早上好！", "早安", "下午好呀", "晚上好！",
    "你好吗？", "最近怎么样？", "您今天过得怎么样？", "很高兴见到你！", "认识你很高兴。", "好久不见！",
    "谢谢！", "多谢多谢", "非常感谢您！", "谢啦", "辛苦了！", "麻烦你了，谢谢。", "好的，谢谢。",
    "没事了。", "没有其他问题了，谢谢！", "就这些吧。", "收到，谢谢", "再见！", "拜拜",
    "回头见～", "下次见！", "晚安", "先这样吧，再见。", "保重！", "祝你有美好的一天！", "改天再聊",
    "Thanks! 谢谢！", "hi 你好", "Cheers, that's just what I was looking for!", "Thanks, it's exactly what I wanted.",
]
NOT_SMALL_TALK = [
    "", "   ", "!!!", "🙂", "you", "today", "了", "thanks for",
    "Thanks! Now add milk to my todos", "Hi, what's the weather in Paris?", "Hello, list my todos.",
    "Thanks, and what is 3 times 7?", "Good morning! Remind me to call Bob.", "Bye, but first delete todo 2.",
    "Hi! Who are you?", "Tell me a joke.", "What can you do?", "How are you computing that?",
    "Say hello to Anna in my notes", "Remind me to say goodbye to Tom.", "hike", "Hello world program in Python?",
    "See you at the 3pm meeting: add it", "Thank you for the weather, now Tokyo's", "OK, show todo-003.",
    "Good luck with the report", "Is it a good day for a picnic in Rome?", "how are my todos doing",
    "你好，北京天气怎么样？", "谢谢！再帮我加一个待办：买菜。", "早上好，帮我列出今天的待办。", "你是谁？",
    "给我讲个笑话。", "提醒我明天说再见", "再见之前，把第2项删掉。", "好的，把它标记为已完成。", "晚安前提醒我吃药",
    "hi " * 50,
    # a confirmation alone may answer the model's own question ("Shall I add it?"): its call must stay possible
    "ok", "OK!", "okay", "sounds good", "yes", "Sure.", "Great!", "perfect", "好的", "好的。", "可以", "行", "嗯",
    "明白了", "是的", "太好了",
]


@pytest.mark.parametrize("message", SMALL_TALK)
def test_small_talk_is_recognised(message: str) -> None:
    assert is_small_talk(message)


@pytest.mark.parametrize("message", NOT_SMALL_TALK)
def test_a_request_or_question_is_not_small_talk(message: str) -> None:
    assert not is_small_talk(message)


def test_a_message_that_splits_many_ways_is_decided_at_once() -> None:
    def all_four() -> float:
        started = time.perf_counter()
        for message in ("bye " * 29 + "x", "thank you " * 11 + "x", "谢谢你" * 35 + "x", "bye " * 29 + "bye"):
            is_small_talk(message)
        return time.perf_counter() - started

    # ~15 ms; regex backtracking took seconds on the first. The fastest of three rounds: a loaded
    # machine's pause slows one round, backtracking every one
    assert min(all_four() for _ in range(3)) < 0.5


def test_a_huge_paste_is_refused_before_it_is_normalised(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 5-million-character paste cost 9 s and 1.9 GB when normalised whole: its length decides first."""
    normalised: list[int] = []
    real = smalltalk.normalise
    monkeypatch.setattr(smalltalk, "normalise", lambda text: normalised.append(len(text)) or real(text))
    assert not is_small_talk("hi! " * 1_250_000)
    assert not is_small_talk("thanks" + " " * 1000)
    assert normalised == []
    assert is_small_talk("  Thank you!!  ") and normalised == [15]  # a greeting still goes through


def test_only_the_local_profiles_gate_small_talk() -> None:
    settings = load_settings(env={})
    assert all(settings.providers[name].small_talk_gate for name in EMBEDDED_PROFILES)
    assert not any(p.small_talk_gate for n, p in settings.providers.items() if n not in EMBEDDED_PROFILES)


@pytest.fixture
def grammar_provider(fake_server: FakeServer) -> Iterator[ChatProvider]:
    p = ChatProvider(name="test", model="m", base_url=fake_server.base_url, api_key="sk-test", max_retries=0,
                     timeout_s=10, tool_call_format="text", small_talk_gate=True)
    p.dialect = replace(p.dialect, grammar=True)
    yield p
    p.close()


def _grammars(fake_server: FakeServer, provider: ChatProvider, registry: Registry, message: str,
              *replies: str) -> list[str]:
    fake_server.script(*(text(r) for r in replies))
    finished = run_turn(History("You are a test assistant."), message, provider=provider, registry=registry,
                        approver=Approver("auto"), limits=Limits(), emit=EventLog())
    assert finished.stopped_by == "answer"
    return [r.body["grammar"] for r in fake_server.chat_requests()]


def test_small_talk_goes_with_the_text_only_grammar(
        fake_server: FakeServer, grammar_provider: ChatProvider, registry: Registry) -> None:
    assert _grammars(fake_server, grammar_provider, registry, "Thanks, see you tomorrow!",
                     "You're welcome, see you!") == [without_han(SMALL_TALK_GRAMMAR)]


def test_a_request_after_a_greeting_goes_with_the_tool_grammar(
        fake_server: FakeServer, grammar_provider: ChatProvider, registry: Registry) -> None:
    call = '{"name": "list_todos", "arguments": {}}'
    grammars = _grammars(fake_server, grammar_provider, registry, "你好，帮我列出待办。", call, "有三项待办。")
    # the step after the results may call again: the gate looks at the question only
    assert grammars == [_tools(registry, "你好，帮我列出待办。")] * 2


def _tools(registry: Registry, question: str) -> str:
    grammar = tool_grammar(registry.schemas(), optional="mentioned", question=question)
    return grammar if any("\u4e00" <= ch <= "\u9fff" for ch in question) else without_han(grammar)


CONFIRMATIONS = ["ok, sounds good", "yes, go ahead", "Sure, do it.", "好的，没问题。", "嗯嗯", "行，就这样吧",
                 "Yeah, that works for me.", "Fine by me.", "好，就这么定了。"]


@pytest.mark.parametrize("message", CONFIRMATIONS)
def test_a_confirmation_is_recognised(message: str) -> None:
    assert is_confirmation(message)


@pytest.mark.parametrize("message", ["yes, add milk", "ok, what about Paris?", "好的，把它标记为已完成。", "", "you",
                                     "works for me, now add milk", "就这么办：提醒我交房租"])
def test_a_confirmation_with_a_request_is_not_one(message: str) -> None:
    assert not is_confirmation(message)


def test_a_confirmation_nothing_asked_for_gets_text_only(
        fake_server: FakeServer, grammar_provider: ChatProvider, registry: Registry) -> None:
    """"ok, sounds good" as a first message called list_todos: with no question before it,
    it is answered like small talk."""
    assert _grammars(fake_server, grammar_provider, registry, "ok, sounds good", "Great!") == \
        [without_han(SMALL_TALK_GRAMMAR)]


def test_chinese_small_talk_is_answered_in_chinese(
        fake_server: FakeServer, grammar_provider: ChatProvider, registry: Registry) -> None:
    """... and not with the note its request carries (the 0.5B model answered 拜拜 with it)."""
    from repl.providers.dialect import SMALL_TALK_ZH_NOTE

    grammars = _grammars(fake_server, grammar_provider, registry, "谢谢，再见！", "不客气，再见！")
    assert grammars == [not_beginning_with(SMALL_TALK_ZH_GRAMMAR, SMALL_TALK_ZH_NOTE[1])] != [SMALL_TALK_ZH_GRAMMAR]


def test_chinese_small_talk_is_sent_with_a_note_the_history_never_keeps(
        fake_server: FakeServer, grammar_provider: ChatProvider, registry: Registry) -> None:
    """The 0.5B model answered "拜拜" and "晚安" with "抱歉，我无法协助完成这个请求。": the request
    (only it) adds a note that this is small talk, to be answered in a friendly line."""
    from repl.providers.dialect import SMALL_TALK_ZH_NOTE

    history = History("You are a test assistant.")
    fake_server.script(text("拜拜，明天见！"), text("Bye!"), text("有两项待办。"))
    for message in ("拜拜", "Bye!", "还有什么待办？"):
        run_turn(history, message, provider=grammar_provider, registry=registry,
                 approver=Approver("auto"), limits=Limits(), emit=EventLog())
    last_user = [r.body["messages"][-1]["content"] for r in fake_server.chat_requests()]
    assert last_user[0] == "拜拜\n\n" + SMALL_TALK_ZH_NOTE
    assert SMALL_TALK_ZH_NOTE not in last_user[1] and SMALL_TALK_ZH_NOTE not in last_user[2]
    assert all(SMALL_TALK_ZH_NOTE not in str(m.get("content")) for m in history.messages)


def test_a_confirmation_of_the_models_question_may_call(
        fake_server: FakeServer, grammar_provider: ChatProvider, registry: Registry) -> None:
    """"yes" after "Shall I add milk to your todos?" is consent: the call stays possible."""
    history = History("You are a test assistant.")
    history.begin_turn("I am out of milk.")
    history.add_assistant("Shall I add milk to your todos?")
    fake_server.script(text("Done."))
    run_turn(history, "yes, go ahead", provider=grammar_provider, registry=registry,
             approver=Approver("auto"), limits=Limits(), emit=EventLog())
    assert [r.body["grammar"] for r in fake_server.chat_requests()] == [_tools(registry, "yes, go ahead")]


def test_without_the_setting_small_talk_may_call(
        fake_server: FakeServer, registry: Registry) -> None:
    provider = ChatProvider(name="test", model="m", base_url=fake_server.base_url, api_key="sk-test",
                            max_retries=0, timeout_s=10, tool_call_format="text")
    provider.dialect = replace(provider.dialect, grammar=True)
    try:
        assert _grammars(fake_server, provider, registry, "Goodbye!", "Bye!") == [_tools(registry, "Goodbye!")]
    finally:
        provider.close()
