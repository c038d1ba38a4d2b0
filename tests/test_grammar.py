"""The grammar of valid replies, run by llama.cpp's own grammar sampler (no inference).

The model's vocabulary is loaded without its weights (``vocab_only``); a reply is
tokenized as the model would emit it and fed token by token to the sampler that
the server puts in front of sampling, then the end-of-turn token must be allowed.
So these tests check the grammar as llama.cpp parses and applies it.
"""

from __future__ import annotations

import ctypes
import json
import math
from importlib import util
from pathlib import Path
from typing import Any

import pytest

from bench.tool_use import REFERENCES, cases, fixture, schema_valid
from repl.embedded.textcalls import parse_text_calls

pytestmark = pytest.mark.skipif(util.find_spec("llama_cpp") is None,
                                reason="needs the 'local' extra: pip install 'glassloop[local]'")
CORPUS = Path(__file__).parent / "data" / "textcall_corpus.json"


class Grammar:
    """A grammar as llama.cpp's sampler applies it: ``accepts(text)``."""

    def __init__(self, llama: Any, text: str) -> None:
        import llama_cpp

        self._c, self._llama = llama_cpp, llama
        self._vocab = llama._model.vocab
        self._sampler = llama_cpp.llama_sampler_init_grammar(self._vocab, text.encode(), b"root")
        assert self._sampler, "llama.cpp could not parse the grammar"
        self._end = llama_cpp.llama_vocab_eos(self._vocab)

    def _allowed(self, token: int) -> bool:
        c = self._c
        data = (c.llama_token_data * 1)(c.llama_token_data(token, 0.0, 0.0))
        array = c.llama_token_data_array(data=data, size=1, selected=-1, sorted=False)
        c.llama_sampler_apply(self._sampler, ctypes.byref(array))
        return not math.isinf(data[0].logit)

    def accepts(self, text: str) -> bool:
        self._c.llama_sampler_reset(self._sampler)
        for token in self._llama.tokenize(text.encode(), add_bos=False, special=True):
            if not self._allowed(token):
                return False
            self._c.llama_sampler_accept(self._sampler, token)
        return self._allowed(self._end)

    def close(self) -> None:
        self._c.llama_sampler_free(self._sampler)


@pytest.fixture(scope="module")
def llama(embedded_model):
    from llama_cpp import Llama

    model = Llama(str(embedded_model), vocab_only=True, verbose=False)
    yield model
    model.close()


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    return fixture(tmp_path_factory.mktemp("tools"))


@pytest.fixture(scope="module")
def grammar(llama, registry):
    from repl.embedded.grammar import tool_grammar

    built = Grammar(llama, tool_grammar(registry.schemas()))
    yield built
    built.close()


def call(name: str, **arguments: Any) -> str:
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


@pytest.mark.parametrize("reply", [
    call("list_todos"),
    call("list_todos", status="todo", priority=None),
    '```json\n{\n  "name": "get_todo",\n  "arguments": {\n    "todo_id": "todo-002"\n  }\n}\n```',
    "<tool_call>\n" + call("complete_todo", todo_id=3) + "\n</tool_call>",
    call("add_todo", title="买牛奶") + "\n" + call("add_todo", title="Pay the rent", due="2025-06-01"),
    call("add_note", text='a "quoted" word\\nand a new line', tags=["home"]),
    "Hello! I am glassloop, a terminal assistant.",
    "你好！我是 glassloop，有什么可以帮你？",
    "In Python, use a dict: d = {1: 'a'} or an f-string like f'{name}'.",
    "Here is code:\n```python\ndef rev(s):\n    return s[::-1]\n```",
    "```python\ndef rev(s):\n    return s[::-1]\n```",
])
def test_accepts_calls_in_the_forms_the_model_writes_and_plain_text(grammar: Grammar, reply: str) -> None:
    assert grammar.accepts(reply)


@pytest.mark.parametrize("reply", [
    call("add_todo", title="x", todo_id="todo-001"),   # an extra key (the model's old habit)
    call("add_todo", title="x", detail="invented"),    # an optional property with a default
    call("add_todo", detail="no title"),               # a required key missing
    call("list_todos", status="open"),                 # not in the enum (type list + enum in the schema)
    call("calculate", expression="1 + 1"),             # not a tool
    call("get_todo", todo_id=True),                    # wrong type
    '{"name": "calculator", "arguments": "{\\"expression\\": \\"1+1\\"}"}',  # arguments as a string
    '{"name": "add_note", "arguments": {"text": "raw\nnewline"}}',           # a control character in a string
    call("list_notes") + "\nThe notes are: ...",         # text after a call (echo and invented result)
    "```json\n" + call("list_notes"),                  # an unclosed fence
    "```\n" + call("list_notes") + "\n```",           # a fence without a language is JSON to the filter
    "```jsonc\n" + call("list_notes") + "\n```",
    "Let me check. " + call("list_todos"),             # a call inside prose
    'Sure: {"name": "list_todos"}',                    # call-shaped JSON in text
    "<tool_call>\n{}\n</tool_call>",
    "OK <tool_call>",
    "{}",
    "",
])
def test_refuses_invalid_calls_and_text_that_would_parse_as_a_call(grammar: Grammar, reply: str) -> None:
    assert not grammar.accepts(reply)


def test_what_it_accepts_from_the_real_corpus_parses_to_schema_valid_calls_only(grammar, registry) -> None:
    """Every real reply of the model the grammar accepts yields only valid calls; the
    malformed ones (comments, missing braces, extra keys, wrong names) are all refused."""
    corpus = json.loads(CORPUS.read_text(encoding="utf-8"))
    schemas = {s["name"]: s["parameters"] for s in registry.schemas()}
    accepted = refused_malformed = 0
    for record in corpus["records"]:
        if not record["tools"]:
            continue
        text = record["output"].strip()
        if grammar.accepts(text):
            accepted += 1
            _, calls = parse_text_calls(text, registry.names())
            assert all(schema_valid(c.name, c.arguments, schemas) for c in calls), record["id"]
        elif record.get("malformed"):
            refused_malformed += 1
    assert accepted >= 5 and refused_malformed >= 5
    assert all(not grammar.accepts(r["output"].strip()) for r in corpus["records"] if r.get("malformed"))


def test_the_reference_call_of_every_evaluation_question_is_accepted(grammar, registry) -> None:
    schemas = {s["name"]: s["parameters"] for s in registry.schemas()}
    assert set(REFERENCES) == {c.message for c in cases() if c.tools}  # one for each request of the case file
    references = [json.dumps(r, ensure_ascii=False) for r in REFERENCES.values()]
    for reference in references:
        assert grammar.accepts(reference) and grammar.accepts(f"```json\n{reference}\n```"), reference
        name, arguments = json.loads(reference)["name"], json.dumps(json.loads(reference)["arguments"])
        assert schema_valid(name, arguments, schemas), reference


def test_without_optional_properties_only_the_required_ones_remain(llama, registry) -> None:
    from repl.embedded.grammar import tool_grammar

    required_only = Grammar(llama, tool_grammar(registry.schemas(), optional="none"))
    try:
        assert required_only.accepts(call("add_todo", title="Buy milk"))
        assert not required_only.accepts(call("add_todo", title="Buy milk", detail="invented"))
        assert required_only.accepts(call("list_todos"))
    finally:
        required_only.close()


def test_built_once_per_tool_list(registry) -> None:
    from repl.embedded.grammar import tool_grammar

    tools = registry.schemas()
    first = tool_grammar(tools)
    assert tool_grammar([dict(t) for t in tools]) is first  # an equal list: the cached text
    assert tool_grammar(tools[:3]) is not first


def test_a_schema_the_converter_cannot_express_still_gives_a_grammar(llama) -> None:
    """A remote $ref is not fetched: that tool's arguments may be any object, the others keep theirs."""
    from repl.embedded.grammar import tool_grammar

    tools = [{"name": "remote", "parameters": {"type": "object", "properties": {
                 "x": {"$ref": "https://example.invalid/schema.json"}}}},
             {"name": "echo", "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                                             "required": ["text"]}}]
    loose = Grammar(llama, tool_grammar(tools))
    try:
        assert loose.accepts(call("remote", anything=[1, 2]))
        assert loose.accepts(call("echo", text="hi"))
        assert not loose.accepts(call("other"))
    finally:
        loose.close()


def test_without_tools_only_text_is_accepted(llama) -> None:
    """The loop's final answer (no tools offered): the model cannot echo a call as its answer."""
    from repl.embedded.grammar import ANSWER_GRAMMAR

    text_only = Grammar(llama, ANSWER_GRAMMAR)
    try:
        assert text_only.accepts("There are two open todos: the report and the email.")
        assert text_only.accepts("还有两项没完成。")
        assert not text_only.accepts(call("list_files", path="."))
        assert not text_only.accepts("```json\n" + call("list_files") + "\n```")
    finally:
        text_only.close()


def test_the_answer_after_results_is_prose_from_its_first_character(llama) -> None:
    """Asked which todos are open, the 0.5B model answered with one of them as an object
    ("{\\n  id: todo-002, ..."); the answer after results begins as prose, braces later stay."""
    from repl.embedded.grammar import PROSE_GRAMMAR, not_beginning_with, without_han

    for text in (PROSE_GRAMMAR, without_han(PROSE_GRAMMAR)):
        prose = Grammar(llama, text)
        try:
            assert prose.accepts("There are three open todos: the report, the email and the dentist.")
            assert prose.accepts("The file holds {a: 1}.")
            for start in ('{\n  id: todo-002,\n  title: "Write the weekly report"\n}', "[todo-002, todo-003]",
                          "```\nid: todo-002\n```", "<b>todo-002</b>", " leading space"):
                assert not prose.accepts(start), start
        finally:
            prose.close()
    prose = Grammar(llama, not_beginning_with(PROSE_GRAMMAR, "T"))  # asked again after an echo
    try:
        assert not prose.accepts("There are three.") and prose.accepts("3 are open.")
    finally:
        prose.close()
    chinese = Grammar(llama, PROSE_GRAMMAR)
    try:
        assert chinese.accepts("还有三项没完成：周报、回邮件和看牙医。")
    finally:
        chinese.close()


def test_an_answer_in_text_is_prose_without_a_calls_shape(llama) -> None:
    """A question the router sends to no tool (``ToolChoice`` "none"): prose from its first
    character, neither a call-shaped object in a fence nor a call's tag anywhere (from the
    answer grammar the 0.5B model wrote the call it wanted as ```xml {name: "list_todos"})."""
    from repl.embedded.grammar import PROSE_GRAMMAR

    prose = Grammar(llama, PROSE_GRAMMAR)
    try:
        assert prose.accepts("You're welcome! See you tomorrow.")
        assert prose.accepts("再见，明天见！\n祝你愉快。")
        assert not prose.accepts('```xml\n{\n  name: "list_todos"\n}\n```')
        assert not prose.accepts('Bye! {"name": "get_weather"}')
        assert not prose.accepts("<tool_call>") and not prose.accepts("Sure. <tool_call>")
        assert not prose.accepts(" leading space")
    finally:
        prose.close()


def test_chat_in_chinese_begins_in_chinese(llama) -> None:
    """A question in Chinese that no tool answers: under the chat prompt in English the 0.5B model
    answered "周末终于能睡个懒觉了，美滋滋。" in English."""
    from repl.embedded.grammar import PROSE_ZH_GRAMMAR

    prose = Grammar(llama, PROSE_ZH_GRAMMAR)
    try:
        assert prose.accepts("周末能睡懒觉，真不错！") and prose.accepts("《红楼梦》的作者是曹雪芹。")
        assert prose.accepts("长城很长，总长度超过两万公里（包括各代的长城）。")
        assert not prose.accepts("It sounds like a great weekend!")
        assert not prose.accepts('{"name": "list_todos"}') and not prose.accepts("<tool_call>")
    finally:
        prose.close()


def test_no_default_keeps_the_optional_properties_that_have_no_default(llama, registry) -> None:
    from repl.embedded.grammar import tool_grammar

    grammar = Grammar(llama, tool_grammar(registry.schemas(), optional="no-default"))
    try:
        assert grammar.accepts(call("list_todos", status="todo"))        # a filter, no default
        assert not grammar.accepts(call("list_todos", limit=50))         # paging, default 50
        assert grammar.accepts(call("update_todo", todo_id=2, priority="high"))
        assert not grammar.accepts(call("add_todo", title="x", detail=""))  # default ""
    finally:
        grammar.close()


def test_mentioned_keeps_what_the_question_gives_and_nothing_else(llama, registry) -> None:
    """"add a todo: buy oat milk, high priority" got an invented due date and tag and kept the
    default priority: with ``mentioned`` the grammar offers priority (the question says "high")
    and neither due nor tag (it names no day and no label)."""
    from repl.embedded.grammar import tool_grammar

    asked = Grammar(llama, tool_grammar(registry.schemas(), optional="mentioned",
                                        question="add a todo: buy oat milk, high priority"))
    try:
        assert asked.accepts(call("add_todo", title="buy oat milk", priority="high"))
        assert not asked.accepts(call("add_todo", title="buy oat milk", priority="high", due="2026-12-05"))
        assert not asked.accepts(call("add_todo", title="buy oat milk", tag="work"))
    finally:
        asked.close()


def test_a_day_is_given_in_the_words_the_question_says_it(llama, registry) -> None:
    """"提醒我周五前把季度报表交上去。" got due "2026-12-05", a Saturday: a property for a day
    (its description names days) holds the day as the question says it, or nothing."""
    from repl.embedded.grammar import tool_grammar

    def grammar(question: str) -> Grammar:
        return Grammar(llama, tool_grammar(registry.schemas(), optional="mentioned", question=question))

    friday = grammar("提醒我周五前把季度报表交上去。")
    english = grammar("Remind me to renew the parking permit by next Monday")
    undated = grammar("Remind me to water the plants, the due date is up to you")
    try:
        assert friday.accepts(call("add_todo", title="交季度报表", due="周五"))
        assert not friday.accepts(call("add_todo", title="交季度报表"))  # said, so given
        for wrong in ("2026-12-05", "周六", "明天"):
            assert not friday.accepts(call("add_todo", title="交季度报表", due=wrong)), wrong
        assert english.accepts(call("add_todo", title="Renew the parking permit", due="next Monday"))
        assert not english.accepts(call("add_todo", title="Renew the parking permit", due="2026-12-07"))
        assert undated.accepts(call("add_todo", title="Water the plants"))
        assert not undated.accepts(call("add_todo", title="Water the plants", due="2026-12-05"))
    finally:
        for each in (friday, english, undated):
            each.close()


def test_a_value_the_question_says_is_given(llama, registry) -> None:
    """"add a todo: renew the passport by next Friday, high priority" became one title holding
    the whole sentence, priority left at medium and no due date, though both were offered: a
    day the question says and a choice it names are required, as it says them."""
    from repl.embedded.grammar import tool_grammar

    asked = Grammar(llama, tool_grammar(registry.schemas(), optional="mentioned",
                                        question="add a todo: renew the passport by next Friday, high priority"))
    try:
        assert asked.accepts(call("add_todo", title="Renew the passport", priority="high", due="next Friday"))
        assert not asked.accepts(call("add_todo", title="Renew the passport by next Friday, high priority"))
        assert not asked.accepts(call("add_todo", title="Renew the passport", due="next Friday"))
        assert not asked.accepts(call("add_todo", title="Renew the passport", priority="medium", due="next Friday"))
    finally:
        asked.close()


@pytest.mark.parametrize(("question", "value"), [
    ("add a todo: buy oat milk, high priority", "high"),
    ("Gotta get the bike serviced before the brakes give out, mark it urgent.", "high"),
    ("别忘了给妈妈买生日礼物，这件事很重要，优先级设成高。", "high"),
    ("周四之前得把合同寄给客户，这事不着急，优先级放低点就行。", "low"),
    ("I need to call the dentist at some point, low priority.", "low"),
    ("add a todo: buy a high chair", None),        # "high", but no priority named
    ("这事不重要，记一下：买电池", None),            # negated
    ("add a todo: file the taxes, it is not urgent", None),
    ("Add 'fix the bike'", None),
])
def test_a_choice_is_said_by_the_words_its_description_gives_it(question: str, value: str | None) -> None:
    from repl.embedded.grammar import said_value
    from tools import build_tools

    add_todo = next(t for t in build_tools(todos_path=Path("t.json"), notes_path=Path("n.json"),
                                           files_root=Path("."), weather="sample") if t.name == "add_todo")
    assert said_value("priority", add_todo.parameters["properties"]["priority"], question) == value


def test_a_new_priority_is_said_as_to_a_new_todo() -> None:
    """update_todo's priority is described with the words add_todo's is: "高优先级" and "优先级低"
    say it there too ("New priority." alone left the 0.5B model to pass a status instead)."""
    from repl.embedded.grammar import said_value
    from tools import build_tools

    tool = next(t for t in build_tools(todos_path=Path("t.json"), notes_path=Path("n.json"),
                                       files_root=Path("."), weather="sample") if t.name == "update_todo")
    priority = tool.parameters["properties"]["priority"]
    assert said_value("priority", priority, "高优先级的还剩哪几条") == "high"
    assert said_value("priority", priority, "优先级低的那些先放着") == "low"
    assert said_value("priority", priority, "买个高脚凳") is None


def test_a_filter_the_question_says_is_given() -> None:
    """"What's still open on my todo list?" lists the open items only: list_todos' status is
    described "todo" = still open, 还有."""
    from repl.embedded.grammar import said_value
    from tools import build_tools

    list_todos = next(t for t in build_tools(todos_path=Path("t.json"), notes_path=Path("n.json"),
                                             files_root=Path("."), weather="sample") if t.name == "list_todos")
    status = list_todos.parameters["properties"]["status"]
    assert said_value("status", status, "What's still open on my todo list?") == "todo"
    assert said_value("status", status, "今天还有哪些没完成？") == "todo"
    assert said_value("status", status, "What have I finished this week?") == "done"
    assert said_value("status", status, "What haven't I finished?") is None


@pytest.mark.parametrize(("question", "priority"), [
    ("Of the things I still have to do, which is the most urgent?", None),
    ("List what's open and tell me about the most important item.", None),
    ("What are my lowest-priority chores? I might drop them.", None),
    ("待办里哪件事最紧急？", None),
    ("还没做的事里，优先级最低的是哪个？", None),
    ("Show me only the high priority items", ["high"]),  # a choice said, no ranking
    ("最近有哪些紧急的事？", ["high"]),                 # 最近 is "lately", not a superlative
])
def test_a_superlative_ranks_the_items_and_chooses_no_value(question: str, priority: list[str] | None) -> None:
    """"The most urgent" asks which item comes first among those listed: a filter on the
    "urgent" priority would list the urgent ones only, and none at all when there are none."""
    from repl.embedded.grammar import _mentioned_only
    from tools import build_tools
    from tools.days import days_said

    list_todos = next(t for t in build_tools(todos_path=Path("t.json"), notes_path=Path("n.json"),
                                             files_root=Path("."), weather="sample") if t.name == "list_todos")
    schema: Any = {"name": "list_todos", "parameters": list_todos.parameters}
    offered = _mentioned_only(schema, question, days_said(question))["parameters"]["properties"]
    assert (offered["priority"]["enum"] if "priority" in offered else None) == priority, offered.get("priority")


@pytest.mark.parametrize(("question", "numbers"), [
    ("Which of my chores is the oldest one?", False),     # "one" stands for a chore
    ("Tell me which one is due first", False),
    ("帮我看一下还剩什么没做", False),                     # 一下: "a bit"
    ("把最急的那一项讲讲", False),
    ("Show me the first 5 items on my list", True),
    ("列出前三条待办", True),
])
def test_a_numeric_property_is_offered_by_a_number_not_by_one_or_yi_of_another_sense(question: str,
                                                                                   numbers: bool) -> None:
    """Offered offset and limit because "the highest-priority one" held "one", the 0.5B model
    passed limit 50. A number in a question is one definition (grammar.NUMBER)."""
    from repl.embedded.grammar import _mentioned_only
    from tools import build_tools
    from tools.days import days_said

    list_todos = next(t for t in build_tools(todos_path=Path("t.json"), notes_path=Path("n.json"),
                                             files_root=Path("."), weather="sample") if t.name == "list_todos")
    schema: Any = {"name": "list_todos", "parameters": list_todos.parameters}
    offered = _mentioned_only(schema, question, days_said(question))["parameters"]["properties"]
    assert {"offset", "limit"} <= set(offered) if numbers else not {"offset", "limit"} & set(offered), list(offered)


def test_a_property_is_for_a_day_when_it_says_so_not_when_an_example_names_one() -> None:
    """A user tool's search text described "what to find, e.g. meetings today" is no day: a
    question's words for it are not held to the days it says."""
    from repl.embedded.grammar import _mentioned_only
    from tools.days import days_said

    tool: Any = {"name": "find", "parameters": {"type": "object", "properties": {
        "query": {"type": "string", "description": "what to find, e.g. meetings today"},
        "when": {"type": ["string", "null"], "description": "the day: today, tomorrow, Friday"}}}}
    question = "find my meetings about the budget tomorrow"
    offered = _mentioned_only(tool, question, days_said(question))["parameters"]["properties"]
    assert offered["when"] == {"description": "the day: today, tomorrow, Friday", "enum": ["tomorrow"]}
    assert offered["query"] == tool["parameters"]["properties"]["query"]


@pytest.mark.parametrize(("question", "given"), [
    ("Remind me to call the bank tomorrow", {"due"}),
    ("提醒我周五交房租", {"due"}),
    ("add a todo: buy oat milk, high priority", {"priority"}),
    ("别忘了买礼物，优先级高", {"priority"}),
    ("Add 'fix the bike' with the tag home", {"tag"}),
    ("Add 'fix the bike'", set()),
])
def test_a_property_is_mentioned_by_a_word_of_its_name_or_description(question: str, given: set[str]) -> None:
    from repl.embedded.grammar import mentioned
    from tools import build_tools

    add_todo = next(t for t in build_tools(todos_path=Path("t.json"), notes_path=Path("n.json"),
                                           files_root=Path("."), weather="sample") if t.name == "add_todo")
    optional = {"detail", "priority", "due", "tag"}
    properties = add_todo.parameters["properties"]
    assert {name for name in optional if mentioned(name, properties[name], question)} == given


def test_a_number_mentions_a_numeric_property() -> None:
    from repl.embedded.grammar import mentioned

    quantity = {"type": "integer", "description": "how many"}
    assert mentioned("quantity", quantity, "put 2 cartons of milk on the list")
    assert mentioned("quantity", quantity, "加两盒牛奶")
    assert mentioned("quantity", quantity, "a dozen eggs")
    assert not mentioned("quantity", quantity, "put milk on the list")


def test_the_answer_to_a_question_without_chinese_has_none(llama, registry) -> None:
    """With Chinese lines in the advice the 0.5B model answered "Good night!" in Chinese: the
    prose of a reply to a question without Chinese leaves Chinese characters out; a call's
    arguments may still hold them."""
    from repl.embedded.grammar import (
        ANSWER_GRAMMAR,
        PROSE_GRAMMAR,
        PROSE_ZH_GRAMMAR,
        tool_grammar,
        without_han,
    )

    answer, talk = Grammar(llama, without_han(ANSWER_GRAMMAR)), Grammar(llama, without_han(PROSE_GRAMMAR))
    tools = Grammar(llama, without_han(tool_grammar(registry.schemas(), optional="mentioned", question="weather?")))
    chinese = Grammar(llama, PROSE_ZH_GRAMMAR)
    try:
        assert answer.accepts("There are two open todos: the report and the email.")
        assert not answer.accepts("还有两项没完成。") and not answer.accepts("Done！")
        assert talk.accepts("Good night!") and not talk.accepts("晚安！")
        assert tools.accepts("Sunny today.") and not tools.accepts("今天晴。")
        assert tools.accepts(call("get_weather", city="北京"))
        assert chinese.accepts("不客气！") and not chinese.accepts("You're welcome!")
    finally:
        for grammar in (answer, talk, tools, chinese):
            grammar.close()


def test_a_grammar_not_beginning_with_a_character_refuses_it_first_and_only_first() -> None:
    """Asked again after an echo, the reply may not begin like it: in either case, in the
    answer's start, a prose reply's or a Chinese one's (a range split around it)."""
    from repl.embedded.grammar import (
        ANSWER_GRAMMAR,
        PROSE_GRAMMAR,
        PROSE_ZH_GRAMMAR,
        not_beginning_with,
        tool_grammar,
    )

    answer = not_beginning_with(ANSWER_GRAMMAR, "G")
    assert "answer-start ::= [^{<`\\x00-\\x20\\u0047\\u0067] | answer-brace" in answer
    assert answer.replace("\\u0047\\u0067", "") == ANSWER_GRAMMAR  # nothing else changed
    prose = not_beginning_with(PROSE_GRAMMAR, "好")
    assert prose.startswith("root ::= [^{[<`\\x00-\\x20\\u597d] answer-piece*\n")
    assert prose.replace("\\u597d", "") == PROSE_GRAMMAR  # nothing else changed
    zh = not_beginning_with(PROSE_ZH_GRAMMAR, "好")
    assert zh.startswith("root ::= [\\u3001-\\u303f\\u3400-\\u597c\\u597e-\\u9fff\\uff01-\\uff5e] answer-piece*")
    calls = tool_grammar([{"name": "t", "parameters": {"type": "object", "properties": {}}}])
    assert "\\u0047\\u0067]" in not_beginning_with(calls, "g")  # the text a call step may write
    root = PROSE_ZH_GRAMMAR.partition("\n")[0]
    assert not_beginning_with(PROSE_ZH_GRAMMAR, "G").partition("\n")[0] == root  # not in its ranges


def test_building_a_grammar_leaves_the_llama_cpp_package_unloaded(tmp_path: Path) -> None:
    """The client builds grammars without importing ``llama_cpp`` (its ``__init__`` loads the
    llama.cpp library, numpy and jinja2: 0.2 to 0.4 s of every ``ask``), and the converter it
    loads from its file alone imports the standard library only (at its top: ``requests`` is
    imported only to fetch a remote ``$ref``, which glassloop turns off)."""
    import ast
    import subprocess
    import sys

    code = ("import json, sys\n"
            "from repl.embedded.grammar import tool_grammar\n"
            "from pathlib import Path\n"
            "from bench.tool_use import fixture\n"
            f"text = tool_grammar(fixture(Path({str(tmp_path)!r})).schemas(), optional='mentioned', question='add a todo')\n"
            "print(json.dumps([len(text), sorted(m for m in ('llama_cpp', 'numpy', 'jinja2') if m in sys.modules)]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr
    size, loaded = json.loads(done.stdout.splitlines()[-1])
    assert size > 1000 and loaded == []
    source = Path(util.find_spec("llama_cpp").submodule_search_locations[0]) / "llama_grammar.py"
    imported = {alias.name.split(".")[0] for node in ast.parse(source.read_text(encoding="utf-8")).body
                if isinstance(node, ast.Import | ast.ImportFrom) for alias in
                (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


# ---------------------------------------------------------------- what a description says a value is

FX: dict[str, Any] = {"name": "fx", "description": "Convert money between currencies.", "parameters": {
    "type": "object", "required": ["amount", "source", "target"], "properties": {
        "amount": {"type": "number", "description": "how much money"},
        "source": {"type": "string", "description": 'the currency it is in, a code like "USD"'},
        "target": {"type": "string", "description": 'the currency wanted, a code like "EUR"'}}}}
BRANCHES: dict[str, Any] = {"name": "git_branch", "description": "List Git branches.", "parameters": {
    "type": "object", "required": ["branch_type"], "properties": {"branch_type": {
        "type": "string", "description": "Whether to list local branches ('local'), remote branches ('remote') "
                                         "or all branches('all')."}}}}


@pytest.mark.parametrize(("description", "expected"), [
    ("Whether to list local branches ('local'), remote branches ('remote') or all branches('all').",
     {"enum": ["local", "remote", "all"]}),
    ('the currency it is in, a code like "USD"', {"pattern": "^[A-Z]{3}$"}),
    ("ISO 4217 currency codes, e.g. 'EUR' or 'JPY'", {"pattern": "^[A-Z]{3}$"}),
    # examples of an open set: no choice
    ('"today" (default), "tomorrow" or a date like "2025-05-01"', {}),
    ("IANA timezone name (e.g., 'America/New_York', 'Europe/London').", {}),
    ('City name in any language, e.g. "Beijing" or "北京".', {}),
    # a name or a code: no shape
    ('country name or two-letter code, e.g. "Japan" or "JP"', {}),
    ('a code like "USD", or "usd"', {}),
    ("only one quoted 'value' is no list of choices", {}),
])
def test_a_string_property_takes_what_its_description_says(description: str, expected: dict[str, Any]) -> None:
    from repl.embedded.grammar import described_choices

    assert described_choices({"type": "string", "description": description}) == expected


def test_a_schema_that_says_its_values_keeps_them() -> None:
    from repl.embedded.grammar import described_choices

    for schema in ({"type": "string", "enum": ["a", "b"], "description": "'x' or 'y'"},
                   {"type": "integer", "description": "'1' or '2'"},
                   {"type": "string", "pattern": "^[a-z]+$", "description": "a code like 'USD'"}):
        assert described_choices(schema) == {}


def test_a_call_passes_a_code_or_a_choice_as_the_description_says(llama) -> None:
    """The 0.5B model passed "美元" and "dollars" to a tool whose description asks for a code like
    "USD": the grammar holds a described code to its shape, and described choices to their list."""
    from repl.embedded.grammar import tool_grammar

    built = Grammar(llama, tool_grammar([FX, BRANCHES], optional="mentioned", question="50 dollars in euros"))
    try:
        assert built.accepts(call("fx", amount=50, source="USD", target="EUR"))
        for wrong in ("美元", "dollars", "usd", "USDT"):
            assert not built.accepts(call("fx", amount=50, source=wrong, target="EUR")), wrong
        assert built.accepts(call("git_branch", branch_type="remote"))
        assert not built.accepts(call("git_branch", branch_type="remotes"))
    finally:
        built.close()


def test_an_answer_asked_again_after_an_echo_may_begin_with_its_first_word_but_not_its_words(llama) -> None:
    """After its lead, the answer asked again may not begin with the echo's first four
    characters: "深圳今天出门要带伞吗？" again is refused, "深圳今天有小雨" (its first word) too only
    from the fourth character on, and any other answer passes."""
    from repl.embedded.grammar import led_answer

    built = Grammar(llama, led_answer("根据工具结果，", "深圳今天出门要带伞吗？"))
    try:
        assert not built.accepts("根据工具结果，深圳今天出门要带伞吗？")
        assert not built.accepts("根据工具结果，深圳今天有小雨。")
        assert built.accepts("根据工具结果，深圳有小雨，记得带伞。")
        assert built.accepts("根据工具结果，明天深圳有小雨。")
        assert not built.accepts("深圳有小雨。")  # the lead stays forced
    finally:
        built.close()
    plain = Grammar(llama, led_answer("根据工具结果，"))
    try:
        assert plain.accepts("根据工具结果，深圳今天有小雨。")
    finally:
        plain.close()


def test_the_two_ends_of_a_conversion_hold_the_two_places_said_each_once(llama) -> None:
    """Given both cities said for both of a conversion's zones, the 0.5B model passed Singapore
    as source and target: the grammar takes either way round, never one place twice."""
    from repl.embedded.grammar import tool_grammar

    zone = {"type": "string", "description": "IANA timezone name (e.g., 'America/New_York', 'Europe/London')."}
    convert = {"name": "convert_time", "parameters": {"type": "object", "properties": {
        "source_timezone": zone, "time": {"type": "string", "description": "Time (HH:MM)"}, "target_timezone": zone},
        "required": ["source_timezone", "time", "target_timezone"]}}
    built = Grammar(llama, tool_grammar([convert], optional="mentioned", question="3pm in Paris is when in Singapore?"))
    try:
        def ends(source: str, target: str) -> str:
            return call("convert_time", source_timezone=source, time="15:00", target_timezone=target)

        assert built.accepts(ends("Europe/Paris", "Asia/Singapore"))
        assert built.accepts(ends("Asia/Singapore", "Europe/Paris"))
        assert not built.accepts(ends("Asia/Singapore", "Asia/Singapore"))
        assert not built.accepts(ends("Europe/Paris", "Europe/Paris"))
        assert not built.accepts(ends("Europe/Paris", "UTC"))
    finally:
        built.close()
