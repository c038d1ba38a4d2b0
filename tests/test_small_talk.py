"""Small talk (``repl/embedded/smalltalk.py``): greetings, thanks and goodbyes, and a
confirmation when nothing was asked, need no tool. The words router (``repl/embedded/words.py``)
sends such a question to no tool (``ToolChoice("none", by="small talk")``), before any cue is
looked for; the embedded dialect answers it in text under the chat prompt
(tests/test_routing.py). Anything said besides ("Thanks! Now add milk to my todos") and it is
no small talk."""

from __future__ import annotations

import re
from typing import Any

import pytest

from repl.embedded import smalltalk
from repl.embedded.smalltalk import is_confirmation, is_small_talk
from repl.embedded.words import WordsRouter
from repl.loop.routing import route_request
from repl.providers.base import ToolChoice
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


class Counting:
    """A pattern whose ``fullmatch`` calls are counted."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern, self.calls = pattern, 0

    def fullmatch(self, text: str, start: int, end: int) -> re.Match[str] | None:
        self.calls += 1
        return self.pattern.fullmatch(text, start, end)


@pytest.mark.parametrize("message", ["bye " * 29 + "x", "thank you " * 11 + "x", "谢谢你" * 35 + "x",
                                     "bye " * 29 + "bye"])
def test_a_message_that_splits_many_ways_is_decided_trying_each_piece_once(monkeypatch, message: str) -> None:
    """"bye bye bye ... x" splits into phrases in exponentially many ways: regex backtracking took
    seconds on it. Each start is tried against each end at most once (a table), so the patterns
    are asked at most (starts x ends) times."""
    words = smalltalk.normalise(message)
    phrases, filler = Counting(smalltalk._PHRASE), Counting(smalltalk._FILLER)
    monkeypatch.setattr(smalltalk, "_FILLER", filler)
    assert smalltalk._covered(words, phrases) == is_small_talk(message) == message.endswith("bye")
    pieces = len(words) + 1
    assert 0 < phrases.calls + filler.calls <= 2 * pieces * pieces


def test_a_huge_paste_is_refused_before_it_is_normalised(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 5-million-character paste cost 9 s and 1.9 GB when normalised whole: its length decides first."""
    normalised: list[int] = []
    real = smalltalk.normalise
    monkeypatch.setattr(smalltalk, "normalise", lambda text: normalised.append(len(text)) or real(text))
    assert not is_small_talk("hi! " * 1_250_000)
    assert not is_small_talk("thanks" + " " * 1000)
    assert not is_confirmation("ok " * 1000)
    assert normalised == []
    assert is_small_talk("  Thank you!!  ") and normalised == [15]  # a greeting still goes through


CONFIRMATIONS = ["ok, sounds good", "yes, go ahead", "Sure, do it.", "好的，没问题。", "嗯嗯", "行，就这样吧",
                 "Yeah, that works for me.", "Fine by me.", "好，就这么定了。"]


@pytest.mark.parametrize("message", CONFIRMATIONS)
def test_a_confirmation_is_recognised(message: str) -> None:
    assert is_confirmation(message)


@pytest.mark.parametrize("message", ["yes, add milk", "ok, what about Paris?", "好的，把它标记为已完成。", "", "you",
                                     "works for me, now add milk", "就这么办：提醒我交房租"])
def test_a_confirmation_with_a_request_is_not_one(message: str) -> None:
    assert not is_confirmation(message)


# ---------------------------------------------------------------- the words router


def choose(registry: Registry, *messages: dict[str, Any]) -> ToolChoice | None:
    """The words router's choice for the last of ``messages`` (a question after a system prompt)."""
    history: list[Any] = [{"role": "system", "content": "s"}, *messages]
    return WordsRouter.of(registry).choose(route_request(history, registry.schemas()))


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


SMALL = ToolChoice("none", by="small talk")


@pytest.mark.parametrize("message", ["Thanks, see you tomorrow!", "Goodbye!", "谢谢，再见！", "晚安", "Hi there 👋"])
def test_small_talk_goes_to_no_tool(registry: Registry, message: str) -> None:
    assert choose(registry, user(message)) == SMALL
    assert choose(registry, user("Is it raining in Oslo?"), assistant("Yes, light rain."), user(message)) == SMALL


def test_a_request_after_a_greeting_goes_to_its_tool(registry: Registry) -> None:
    """Small talk is the whole message or nothing: a request said with a greeting is routed by
    its words."""
    assert choose(registry, user("你好，帮我列出待办。")) == ToolChoice("required", ("list_todos",), by='words "待办"')
    weather = choose(registry, user("Hi, what's the weather in Paris?"))
    assert weather is not None and (weather.mode, weather.allowed) == ("required", ("get_weather",))


def test_small_talk_is_decided_before_the_tools_words(registry: Registry) -> None:
    """Goodbyes that say a day ("Talk to you tomorrow.") or a tool's word in a phrase of
    thanks are still small talk."""
    assert choose(registry, user("Talk to you tomorrow.")) == SMALL
    assert choose(registry, user("Have a nice weekend!")) == SMALL


def test_a_confirmation_nothing_asked_for_goes_to_no_tool(registry: Registry) -> None:
    """"ok, sounds good" as a first message called list_todos; after an answer that asked
    nothing it answers nothing either: it is answered like small talk."""
    assert choose(registry, user("ok, sounds good")) == SMALL
    assert choose(registry, user("Remind me to buy milk"), assistant("Added: buy milk."), user("ok, sounds good")) == SMALL


def test_a_confirmation_of_the_models_question_is_left_to_the_next_router(registry: Registry) -> None:
    """"yes" after "Shall I add milk to your todos?" is consent: a call stays possible, and with
    no tool's words in it the router by meaning decides (and what the conversation was about)."""
    assert choose(registry, user("I am out of milk."), assistant("Shall I add milk to your todos?"),
                  user("yes, go ahead")) is None
    assert choose(registry, user("我牛奶喝完了。"), assistant("要我把买牛奶加到待办里吗？"), user("好，就这么定了。")) is None
