"""The embedded model's echo guard (issue #22, "answers that answer"): an answer that only
repeats the user's message is held back (never shown) and asked for once more with a note; an
answer that merely starts like the question is shown whole, in order. Hosted models are
unchanged. Driven through the session core against the scripted server."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from repl.embedded.dialect import AFTER_RESULTS, IN_CHINESE, Dialect
from repl.loop.events import ModelRequest, ModelUsage, Notice, Routed, TextDelta
from repl.loop.history import check
from repl.providers.base import ToolChoice
from tests.fakeserver import FakeServer, text
from tests.support import TableRouter, route_with

EMBEDDED = Dialect(text_calls=True, grammar=True, route=True, unmatched_text=True,
                   after_results=AFTER_RESULTS, language_note=IN_CHINESE)
# what the router chooses for this file's questions that call a tool; any other: none
TOOL_QUESTIONS = {"深圳今天出门要带伞吗？": ToolChoice("required", ("get_weather",)),
                  "猫粮快见底了，回头给我记进待办，周五前买好。": ToolChoice("required", ("add_todo",))}


@pytest.fixture
def core_on(fake_server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Any]]:
    """``core_on(provider)``: a session core (the REPL's door) on the embedded profile
    ("local", its server stood in for by ``fake_server``) or on a hosted one (``fake_server``'s
    URL), approvals auto; the router chooses by ``TOOL_QUESTIONS``."""
    from repl.config.load import load_settings
    from repl.session import runtime
    from repl.session.core import SessionCore
    from tests.support import StubUI

    for name in ("DATA", "STATE", "CONFIG"):
        monkeypatch.setenv(f"XDG_{name}_HOME", str(tmp_path / name.lower()))
    server = SimpleNamespace(base_url=fake_server.base_url, api_key="", notice=None, stop=lambda: None)
    monkeypatch.setattr(runtime, "_start_local", lambda *args: server)
    route_with(monkeypatch, TableRouter(TOOL_QUESTIONS))
    cores: list[Any] = []

    def make(provider: str = "local") -> Any:
        where = {"provider": "local"} if provider == "local" else {"base_url": fake_server.base_url}
        settings = load_settings({**where, "approval": "auto", "weather": "sample",
                                  "todos_file": str(tmp_path / "todos.json")}, cwd=tmp_path, env={})
        cores.append(SessionCore(settings, StubUI(), interactive=False))
        return cores[-1]

    yield make
    for core in cores:
        core.close()


def shown(core: Any) -> list[str]:
    return [event.text for event in core.ui.events if isinstance(event, TextDelta)]


def answers(core: Any) -> list[str]:
    return [m["content"] for m in core.history.messages if m["role"] == "assistant" and not m.get("tool_calls")]


def echo_note(after_results: bool = True) -> str:
    from repl.loop.hooks import ECHO_NOTE, ECHO_NOTE_TALK

    return ECHO_NOTE if after_results else ECHO_NOTE_TALK


def last_user_text(body: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def test_an_echoed_small_talk_answer_is_asked_for_again(core_on, fake_server) -> None:
    core = core_on()
    fake_server.script(text("好的，没问题。", chunk_size=2), text("好的！还有什么需要帮忙的吗？", chunk_size=3))
    done = core.run_turn("好的，没问题。")
    assert done.stopped_by == "answer" and done.answer == "好的！还有什么需要帮忙的吗？"
    assert "".join(shown(core)) == "好的！还有什么需要帮忙的吗？"  # the echo never reached the screen
    assert answers(core) == ["好的！还有什么需要帮忙的吗？"] and check(core.history.messages) == []
    assert [m["role"] for m in core.history.messages] == ["user", "assistant"]
    first, second = (request.body for request in fake_server.chat_requests())
    assert len(fake_server.chat_requests()) == 2 and fake_server.unscripted == 0
    note = echo_note(after_results=False)
    assert note not in last_user_text(first) and last_user_text(second).endswith(note)
    # the retry is still the first step of a turn the router sent to no tool: the same prose
    # grammar, which may not begin like the echo (the 0.5B model, near-greedy, wrote the same
    # words again); the router is not asked again
    from repl.embedded.grammar import PROSE_ZH_GRAMMAR, not_beginning_with

    assert first["grammar"] == PROSE_ZH_GRAMMAR
    assert second["grammar"] == not_beginning_with(PROSE_ZH_GRAMMAR, "好") != PROSE_ZH_GRAMMAR
    assert [(e.step, e.mode) for e in core.ui.events if isinstance(e, Routed)] == [(1, "none"), (2, "none")]
    assert [r.question for r in core_router(core).asked] == ["好的，没问题。"]
    # both calls are model calls as any two are (the trace and /usage show the retry)
    assert [e.step for e in core.ui.events if isinstance(e, ModelRequest)] == [1, 2]
    assert [e.message for e in core.ui.events if isinstance(e, Notice)] == [
        "step 1: the answer only repeated your message and was not shown; asked once more"]
    assert len([e for e in core.ui.events if isinstance(e, ModelUsage)]) == 2
    assert done.steps == 2


def test_the_retry_after_an_echo_behind_a_preamble_may_begin_like_neither(core_on, fake_server) -> None:
    """"今天上班好累啊，随便陪我聊两句吧。" got "好的，" and the question; asked again, with only "好"
    refused as its first character, the 0.5B model wrote the question alone, and it was shown."""
    from repl.embedded.grammar import PROSE_ZH_GRAMMAR, not_beginning_with

    core = core_on()
    question = "今天上班好累啊，随便陪我聊两句吧。"
    fake_server.script(text("好的，" + question, chunk_size=3), text("辛苦啦，喝杯茶歇一歇。"))
    done = core.run_turn(question)
    assert done.answer == "辛苦啦，喝杯茶歇一歇。"
    first, retry = (request.body for request in fake_server.chat_requests())
    banned = not_beginning_with(not_beginning_with(first["grammar"], "好"), "今")
    assert retry["grammar"] == banned != first["grammar"]
    assert first["grammar"] == PROSE_ZH_GRAMMAR
    zh = not_beginning_with(not_beginning_with(PROSE_ZH_GRAMMAR, "好"), "今")  # both, within one range
    assert retry["grammar"] == zh
    assert zh.startswith("root ::= [\\u3001-\\u303f\\u3400-\\u4ec9\\u4ecb-\\u597c\\u597e-\\u9fff\\uff01-\\uff5e] ")


def test_an_echo_after_a_tool_result_is_asked_for_again(core_on, fake_server) -> None:
    core = core_on()
    question = "深圳今天出门要带伞吗？"
    weather = json.dumps({"name": "get_weather", "arguments": {"city": "深圳"}}, ensure_ascii=False)
    # after results the answer begins with the lead (the request writes it: Dialect.reply_start)
    fake_server.script(text(f"<tool_call>\n{weather}\n</tool_call>"), text("根据工具结果，" + question, chunk_size=4),
                       text("根据工具结果，深圳今天有小雨，出门记得带伞。"))
    done = core.run_turn(question)
    assert done.answer == "根据工具结果，深圳今天有小雨，出门记得带伞。" and "".join(shown(core)) == done.answer
    assert [m["role"] for m in core.history.messages] == ["user", "assistant", "tool", "assistant"]
    assert answers(core) == [done.answer] and check(core.history.messages) == []
    _, echoed, retry = (request.body for request in fake_server.chat_requests())
    note = echo_note()
    after, again = last_user_text(echoed), last_user_text(retry)
    assert after.startswith("<tool_response>") and "请用中文回答。" in after and note not in after
    assert again.startswith(after) and again.endswith(note)  # the results, the nudge, then the note
    # after results the step is text, in the question's language, for the retry too, whose rest
    # after the lead the request writes may not begin like the echo's
    assert echoed["grammar"].startswith("root ::= answer-piece answer-piece*\n")
    assert retry["grammar"].startswith('root ::= answer-after answer-piece*\nanswer-after ::= [^\\u6df1{<] | "深" ')
    assert retry["messages"][-1] == echoed["messages"][-1] == {"role": "assistant", "content": "根据工具结果，"}
    assert len(fake_server.chat_requests()) == 3


def test_an_answer_that_starts_like_the_question_is_shown_whole_in_order(core_on, fake_server) -> None:
    core = core_on()
    answer = "北京今天有不少好去处，比如颐和园。"  # to a question no tool is routed to: text
    fake_server.script(text(answer, chunk_size=2), text("北京今天", chunk_size=2))
    done = core.run_turn("北京今天有什么好玩的？")
    assert done.answer == answer and "".join(shown(core)) == answer
    assert shown(core)[:2] == ["北京今天有不", "少好"]  # the held start let out, then as it streams
    assert len(fake_server.chat_requests()) == 1
    core.ui.events.clear()
    again = core.run_turn("北京今天有什么好玩的？")  # only the start of the question: no echo
    assert again.answer == "北京今天" and "".join(shown(core)) == "北京今天"
    assert len(fake_server.chat_requests()) == 2


def test_a_hosted_model_is_never_held_nor_asked_again(core_on, fake_server) -> None:
    core = core_on("hosted")
    fake_server.script(text("谢谢，再见！", chunk_size=2))
    done = core.run_turn("谢谢，再见！")
    assert done.answer == "谢谢，再见！" and shown(core)[0] == "谢谢"  # streamed as it came
    assert len(fake_server.chat_requests()) == 1 and fake_server.unscripted == 0


def test_a_second_echo_is_shown_as_it_is(core_on, fake_server) -> None:
    core = core_on()
    fake_server.script(text("谢谢，再见！"), text("谢谢，再见！"))
    done = core.run_turn("谢谢，再见！")
    assert done.answer == "谢谢，再见！" and "".join(shown(core)) == "谢谢，再见！"
    assert answers(core) == ["谢谢，再见！"] and check(core.history.messages) == []
    assert len(fake_server.chat_requests()) == 2 and fake_server.unscripted == 0


def test_the_echo_held_back_shapes_only_the_request_that_asks_its_question_again(fake_server) -> None:
    """The adapter remembers the answer it held back as an echo (no field of the message says
    it): the next request, carrying the loop's note for the same question, may not begin like it;
    a request for another question, or any after that one, is as it would be anyway."""
    from repl.embedded.textchat import TextChatProvider
    from repl.providers.base import Completed

    note, question = echo_note(after_results=False), "好的，没问题。"
    asked: list[Any] = [{"role": "user", "content": question}]
    again: list[Any] = [{"role": "user", "content": f"{question}\n\n{note}", "note": note}]
    other: list[Any] = [{"role": "user", "content": f"谢谢！\n\n{note}", "note": note}]
    provider = TextChatProvider(name="test", model="m", base_url=fake_server.base_url, api_key="k",
                                max_retries=0, timeout_s=10, tool_call_format="text", dialect=EMBEDDED)
    fake_server.script(text(question), text("好呀！"))
    chat = ToolChoice("none")

    def grammar(messages: list[Any]) -> Any:
        return provider.request_body(messages, [], chat)["grammar"]

    try:
        [done] = [p for p in provider.stream(asked, [], choice=chat) if isinstance(p, Completed)]
        assert done.echoed and done.text == question
        banned, plain = (EMBEDDED.grammar_for(again, [], chat, echoed=question),
                         EMBEDDED.grammar_for(again, [], chat))
        assert grammar(again) == banned != plain
        assert grammar(other) == EMBEDDED.grammar_for(other, [], chat)
        list(provider.stream(again, [], choice=chat))  # asked again: shown as it comes, not held
        assert fake_server.chat_requests()[-1].body["grammar"] == banned
        assert grammar(again) == plain
    finally:
        provider.close()


def test_a_note_does_not_change_what_the_grammar_is_chosen_from() -> None:
    """The note the loop adds for one request (``Message.note``) is neither the question (its
    language, the optional arguments it mentions) nor a step after results."""
    from repl.embedded.grammar import PROSE_ZH_GRAMMAR

    note = echo_note(after_results=False)
    schemas: Any = [{"name": "get_weather", "description": "The weather.", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"},
                                         "date": {"type": ["string", "null"], "description": "the day"}},
        "required": ["city"]}}]
    noted: list[Any] = [{"role": "user", "content": f"谢谢，再见！\n\n{note}", "note": note}]
    assert EMBEDDED.grammar_for(noted, schemas, ToolChoice("none")) == PROSE_ZH_GRAMMAR
    weather = ToolChoice("required", ("get_weather",))
    asked: list[Any] = [{"role": "user", "content": "深圳出门要带伞吗？"}]
    said = f"深圳出门要带伞吗？\n\n{ECHO_DAY}"  # a note that says a day: not the question's
    again: list[Any] = [{"role": "user", "content": said, "note": ECHO_DAY}]
    assert EMBEDDED.grammar_for(again, schemas, weather) == EMBEDDED.grammar_for(asked, schemas, weather)
    assert "date" not in str(EMBEDDED.grammar_for(asked, schemas, weather))
    call = {"id": "c1", "name": "get_weather", "arguments": "{}"}
    after: list[Any] = [{"role": "user", "content": "深圳今天出门要带伞吗？"},
                        {"role": "assistant", "content": "", "tool_calls": [call]},
                        {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "{}"}]
    plain = EMBEDDED.grammar_for(after, schemas)
    with_note = [*after, {"role": "user", "content": note, "note": note}]
    assert EMBEDDED.grammar_for(with_note, schemas) == plain
    assert EMBEDDED.nudge(with_note) == EMBEDDED.nudge(after) != ""


ECHO_DAY = "Answer about tomorrow's date."


def core_router(core: Any) -> TableRouter:
    """The router a session core asks (its routing hook's)."""
    [routing] = core._routing()
    assert isinstance(routing.router, TableRouter)
    return routing.router


@pytest.mark.parametrize("size", [1, 2, 3, 50])
def test_the_hold_releases_in_order_whatever_the_chunks(size: int) -> None:
    from repl.embedded.textcalls import EchoHold

    def run(answer: str, question: str) -> tuple[str, str]:
        hold, out = EchoHold(question), []
        for start in range(0, len(answer), size):
            out.append(hold.feed(answer[start:start + size]))
        rest, echo = hold.finish()
        return "".join(out) + rest, echo

    assert run("北京今天天气晴朗", "北京今天天气怎么样？") == ("北京今天天气晴朗", "")
    assert run("“北京今天天气怎么样？”", "北京今天天气怎么样？")[1] == "“北京今天天气怎么样？”"
    assert run("Thanks! Anything else?", "Thanks")[1] == ""  # a short question said again, and more
    long = "今天还有哪些没完成？把优先级最高的一项展开说明。"
    assert run(long + "好的。", long)[1] == long + "好的。"  # 8+ characters repeated whole, then more
    # after a few words ("好的，"): the 0.5B model's answer to a chat it was not gated on
    chat = "今天上班好累啊，随便陪我聊两句吧。"
    assert run("好的，" + chat, chat)[1] == "好的，" + chat
    assert run("Sure! " + "What is still open on my list?", "What is still open on my list?")[1] != ""
    assert run("好的，我们聊聊天吧。", chat) == ("好的，我们聊聊天吧。", "")
    assert run("Well, let me see what is open.", "What is still open on my list?") == (
        "Well, let me see what is open.", "")
    assert run("ok hi", "hi") == ("ok hi", "")  # a short question: only the answer that is it


@pytest.mark.parametrize("size", [1, 3, 50])
def test_the_words_an_answer_is_led_in_with_are_no_part_of_an_echo(size: int) -> None:
    """After results the 0.5B model's answer began "根据工具结果，" (the grammar's lead) and went
    on with the question: it was shown, and then judged an echo."""
    from repl.embedded.textcalls import EchoHold

    question, lead = "猫粮快见底了，回头买三袋，给我加到采购单上。", "根据工具结果，"

    def run(answer: str, *given: str) -> tuple[str, str]:
        hold, out = EchoHold(question, *given), []
        for start in range(0, len(answer), size):
            out.append(hold.feed(answer[start:start + size]))
        rest, echo = hold.finish()
        return "".join(out) + rest, echo

    assert run(lead + question, lead) == ("", lead + question)
    assert run(lead + "已把猫粮三袋加到采购单。", lead) == (lead + "已把猫粮三袋加到采购单。", "")
    assert run(lead + question) == (lead + question, "")  # without the lead known: let out


def test_an_echo_behind_the_lead_is_held_and_asked_for_again(core_on, fake_server) -> None:
    core = core_on()
    question = "猫粮快见底了，回头给我记进待办，周五前买好。"
    call = json.dumps({"name": "add_todo", "arguments": {"title": "买猫粮", "due": "周五"}}, ensure_ascii=False)
    fake_server.script(text(f"<tool_call>\n{call}\n</tool_call>"), text("根据工具结果，" + question, chunk_size=3),
                       text("根据工具结果，已添加待办：买猫粮，周五前。"))
    done = core.run_turn(question)
    assert done.answer == "根据工具结果，已添加待办：买猫粮，周五前。" and "".join(shown(core)) == done.answer
    assert len(fake_server.chat_requests()) == 3


def test_one_definition_of_an_echo() -> None:
    """The benchmark's judge (bench/local_eval.py) is the product's predicate."""
    from bench import local_eval
    from repl.embedded.dialect import flat, repeats

    assert local_eval.flat is flat
    assert flat("Ok, 好的_！ ß") == "ok好的ss"
    assert repeats("好的，没问题！", "好的，没问题。") and not repeats("好的", "好的，没问题。")
    assert local_eval.echoed("好的，没问题！", ["hi", "好的，没问题。"])


def test_asked_again_after_an_echo_led_in_by_the_results_the_answer_may_not_begin_with_it() -> None:
    """After results, the 0.5B model answered "根据工具结果，" and the question; asked again, it
    wrote the same: the ban on the echo's first character fell on the lead, which the grammar
    forces. Now what follows the lead may not begin with the echo's first words (an answer may
    still begin with its first word: llama.cpp's sampler on it, tests/test_grammar.py)."""
    note = echo_note(after_results=True)
    question = "顺丰 SF2210093381 今天能送到吗"
    call = {"id": "c1", "name": "track", "arguments": "{}"}
    after: list[Any] = [{"role": "user", "content": question},
                        {"role": "assistant", "content": "", "tool_calls": [call]},
                        {"role": "tool", "tool_call_id": "c1", "name": "track", "content": '{"ok": true, "eta": "today"}'},
                        {"role": "user", "content": note, "note": note}]
    echo = f"根据工具结果，{question}？"
    whole = EMBEDDED.grammar_for(after, [], None, echoed=echo) or ""
    assert whole.splitlines()[:2] == [
        'root ::= "根据工具结果，" answer-after answer-piece*',
        'answer-after ::= [^\\u987a{<] | "顺" [^\\u4e30{<] | "顺丰" [^\\u0020{<] | "顺丰 " [^\\u0053{<]']
    prefilled = replace(EMBEDDED, prefill=True)  # the embedded profile's: the request writes the lead
    start, grammar = prefilled.reply_start(after, [], None, echoed=echo)[:2]
    assert start == "根据工具结果，" and (grammar or "").startswith("root ::= answer-after answer-piece*\n")
    plain_start, plain = prefilled.reply_start(after, [], None)[:2]  # not asked again: as before
    assert plain_start == start and (plain or "").startswith("root ::= answer-piece answer-piece*\n")
