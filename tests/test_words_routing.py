"""Routing by the tools' words (``repl/embedded/words.py``), the first router of the embedded
model's chain: a question's first call goes to the tools it names, else to those whose cues it
says (the built-in tools' side table, ``repl/embedded/cues.py``; any other tool: its description's
first sentence, widened by ``embedded/gloss.py``), else, for a short follow-up, to the tools the turn before called (small
talk is the router before it's: tests/test_small_talk.py). Where no word of any tool is found it decides nothing, and the router by
meaning decides (tests/test_router.py; the chain through the session core: tests/test_routing.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from repl.embedded.cues import BUILT_IN_CUES, NUMBER_CUE, cues_of
from repl.embedded.words import WordsRouter, _cued, followed, routed
from repl.loop.routing import RouteRequest, route_request
from repl.providers.base import ToolChoice
from tests.support import turn_after_weather
from tools.calculator import make_calculator_tool
from tools.files import make_file_tools
from tools.notes import make_note_tools
from tools.registry import Registry, ToolSchema
from tools.todos import make_todo_tools
from tools.weather import make_weather_tool


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Registry:
    folder = tmp_path_factory.mktemp("words")
    return Registry([*make_todo_tools(folder / "todos.json"), *make_note_tools(folder / "notes.json"),
                     *make_file_tools(folder), make_calculator_tool(), make_weather_tool("sample")])


def names(tools: list[ToolSchema]) -> list[str]:
    return [tool["name"] for tool in tools]


# ---------------------------------------------------------------- the tools a question's words point to


@pytest.mark.parametrize(("question", "expected"), [
    ("Is it going to snow in Oslo tomorrow?", ["get_weather"]),
    ("出门要不要带伞？我在杭州", ["get_weather"]),
    ("Remind me to call the plumber", ["add_todo"]),
    ("别忘了周五交房租", ["add_todo"]),
    ("What is 15 percent of 86?", ["calculator"]),
    ("帮我看一下 notes.txt 的内容", ["read_file"]),
    ("Who painted the Mona Lisa?", []),
    ("用一句话介绍一下长城。", []),
    # said the way people talk (the second development set, bench/cases/local_dev2.toml)
    ("Cycling home in Leeds later, will I get soaked?", ["get_weather"]),
    ("晚上出去吃饭会不会碰上大雨？", ["get_weather"]),
    ("Lunch was 64.80 for three of us, what's each person's share?", ["calculator"]),
    ("Keep this for later: the bike lock code is 0417.", ["add_note"]),
    ("What am I putting off this month?", ["list_todos"]),
    ("Which document in here talks about the lease?", ["search_files"]),
    # a priority is how todos are listed as well as set: the meaning ranks the two
    ("Get the bike serviced before spring, low priority.", ["list_todos", "add_todo"]),
    ("优先级高的那几条是什么", ["list_todos", "add_todo"]),
    # an operator between numbers is arithmetic ("What is 2+3?" had no cue: a text answer)
    ("What is 2+3?", ["calculator"]),
    ("1.5 × 4 是几？", ["calculator"]),
    ("what's 37 * 12", ["calculator"]),
    ("Is C++ hard to learn?", []),
    ("How many todos are still open?", ["list_todos"]),
    # everyday words of each tool's meaning
    ("Gonna be chilly in Oslo? Should I pack a scarf?", ["get_weather"]),
    ("去哈尔滨要不要带厚衣服？", ["get_weather"]),
    ("手头还有哪些事没办完？", ["list_todos"]),
    ("I scribbled the gate code down, what was it?", ["search_notes"]),
    # words of a topic that are everyday words too are no cues: praise, money, saving
    ("That answer was outstanding!", []),
    ("这个月手头有点紧。", []),
    ("帮我记着：钥匙放在鞋柜里。", ["add_note"]),
    ("ls", ["list_files"]),
    ("What's lying around in this folder?", ["list_files"]),
    # a cue written as a plural is found as that word, a singular one in both forms
    ("Keep your answer short, please.", []),
    ("That's the second time today the printer jammed.", []),
    ("Can I wear shorts in Rome tomorrow?", ["get_weather"]),
    ("What is 6 times 7?", ["calculator"]),
    ("Any task I should look at first?", ["list_todos"]),
    ("List my todos.", ["list_todos"]),
    # the weather's words: storms, fog, what to wear
    ("Will there be a blizzard in Denver on Sunday?", ["get_weather"]),
    ("今天下午会有雷阵雨吗？", ["get_weather"]),
    ("Is it foggy over in London this morning?", ["get_weather"]),
])
def test_a_question_is_routed_to_the_tools_its_words_point_to(registry, question, expected) -> None:
    assert names(routed(question, registry.schemas(), cues_of(registry))) == expected


@pytest.mark.parametrize(("question", "expected"), [
    # a cue inside a word or phrase of another sense is not found: "冷笑话" is a corny joke
    ("给我讲个冷笑话吧。", []),
    ("最近有什么热门电影？", []),
    ("我想减肥，有什么建议？", []),
    ("I have a cold, any tips?", []),
    ("外面冷吗？", ["get_weather"]),
    ("今天好热啊，晚上会凉快点吗？", ["get_weather"]),
    ("Is it cold in Oslo tonight?", ["get_weather"]),
    ("100减37是多少？", ["calculator"]),
    # a sum needs numbers: without one, "how many" and "多少" ask a fact
    ("How many bones are in the human body?", []),
    ("光速大概是多少？", []),
    ("How many boxes are 24 and 17 together?", ["calculator"]),
    ("三千二打个八五折是多少？", ["calculator"]),
    ("Split a hundred between four people, how much each?", ["calculator"]),
    ("你们一共有几个人？", []),
    # a two-character word split as a verb and its object are: 带把伞, 下了雪
    ("去杭州要不要带把伞？", ["get_weather"]),
    ("北京昨晚下了雪吗？", ["get_weather"]),
    ("我今天很生气。", []),
])
def test_a_cue_of_another_sense_or_a_sum_without_numbers_points_nowhere(registry, question, expected) -> None:
    assert names(routed(question, registry.schemas(), cues_of(registry))) == expected


def test_a_description_word_of_another_sense_points_nowhere() -> None:
    """"time" is a clock's word, not in "the third time this week" (nor "3 times 4")."""
    assert routed("Ugh, my train is late again. Third time this week.", [CLOCK], {}) == []
    assert routed("What is 3 times 4?", [CLOCK], {}) == []
    assert names(routed("What time is it in Lima this time of year?", [CLOCK], {})) == [CLOCK["name"]]


def test_the_verb_a_description_begins_with_is_no_cue() -> None:
    """A description begins with what the tool does; that verb says no topic: "tell" of "Tell
    today's tide times for a harbour" is not in "tell me a joke", its topic's words are."""
    tides: ToolSchema = {"name": "tide_times", "description": "Tell today's high and low tide times for a harbour.",
                         "parameters": {"type": "object"}}
    assert routed("tell me a short joke about cats", [tides], {}) == []
    assert names(routed("when is high tide in Whitby?", [tides], {})) == ["tide_times"]


def test_a_tool_without_cues_is_routed_by_its_description() -> None:
    """An MCP tool (or a user's tool without cues): its description's first sentence."""
    clock: ToolSchema = {"name": "clock__get_current_time", "description": "Get current time in a specific "
                         "timezone. Use the IANA name.", "parameters": {"type": "object"}}
    assert names(routed("What time is it in Lima?", [clock], {})) == ["clock__get_current_time"]
    assert routed("Use the name of the river", [clock], {}) == []  # the second sentence does not count



@pytest.mark.parametrize("end", ["\n\n", ".\n", "。"])
def test_a_description_s_first_sentence_ends_at_a_line_break_too(end: str) -> None:
    """A docstring's summary line ends without ". ": its later paragraphs are no cues."""
    books: ToolSchema = {"name": "find_book", "description": f"Look up books in the library catalogue{end}"
                         "Returns how many copies are on the shelf now.", "parameters": {"type": "object"}}
    assert routed("How many times have you been wrong today?", [books], {}) == []
    assert names(routed("which books are in the catalogue", [books], {})) == ["find_book"]


def described(name: str, description: str) -> ToolSchema:
    """A user's or an MCP tool: routed by its description's words."""
    return {"name": name, "description": description, "parameters": {"type": "object"}}


def test_a_plural_of_a_description_is_found_as_its_singular_in_any_english_form() -> None:
    """A description's "branches" is "branch" said, "boxes" "box", "categories" "category"; it
    was found only as its letters less the last ("branche", "boxe", "categorie")."""
    branches = described("vcs__branches", "List the branches of a repository.")
    boxes = described("storage", "Show the boxes kept in the storage unit.")
    kinds = described("budget_kinds", "Sum spending by categories.")
    tools = [branches, boxes, kinds]
    assert names(routed("which branch am I on?", tools, {})) == ["vcs__branches"]
    assert names(routed("what did I put in box 4?", tools, {})) == ["storage"]
    assert names(routed("spending for the food category", tools, {})) == ["budget_kinds"]
    assert routed("I went to the branchy woods", tools, {}) == []  # not inside another word


def test_a_long_cue_is_found_as_typed_with_a_letter_missing_added_or_swapped(registry) -> None:
    """A cue of six letters or more, typed with one slip, is still that cue ("wether" is
    "weather", "umbrela" "umbrella"); one letter for another is not ("ruining" is no "raining"),
    nor is a shorter word ("short" is no "shorts"). A description's word alike."""
    tools = registry.schemas()
    for typed in ("hows the wether in Oslo", "need an umbrela in Leeds?", "whats the weahter in Rome"):
        assert names(routed(typed, tools, cues_of(registry))) == ["get_weather"], typed
    for other in ("I keep ruining my shoes", "write a short poem"):
        assert "get_weather" not in names(routed(other, tools, cues_of(registry))), other
    branches = described("vcs__branches", "List the branches of a repository.")
    assert names(routed("list all the brnaches", [branches], {})) == ["vcs__branches"]
    assert routed("list all the bunches", [branches], {}) == []


CLOCK = described("clock__get_current_time", "Get current time in a specific timezone.")
FX = described("fx", "Convert an amount between currencies at today's rate.")
GROCERIES = described("groceries", "Add a product to the shopping list.")


@pytest.mark.parametrize(("question", "expected"), [
    ("东京这会儿几点了？", "clock__get_current_time"),
    ("Is it five o'clock in Sydney yet?", "clock__get_current_time"),
    ("What's 20 pounds in yen?", "fx"),
    ("一百美元能换多少人民币？", "fx"),
    ("周末去超市采购，把牛奶记上", "groceries"),
    ("Is it too late to phone my brother in Perth?", "clock__get_current_time"),
    ("温哥华那边现在是白天吗？", "clock__get_current_time"),
])
def test_a_tool_without_cues_is_found_by_everyday_words_of_its_descriptions_meaning(registry, question, expected) -> None:
    """Its description's words are English and formal; the gloss adds what people say, in both
    languages: a Chinese question found none of them, and "pounds in yen" went to the calculator."""
    tools = [*registry.schemas(), CLOCK, FX, GROCERIES]
    assert names(routed(question, tools, cues_of(registry))) == [expected]


@pytest.mark.parametrize(("question", "expected"), [
    # what must not be forgotten is a thing to do
    ("Don't let me forget to water the plants when I'm back.", ["add_todo"]),
    ("Please stop the gym renewal from slipping through again.", ["add_todo"]),
    ("到时候给我提个醒，要去银行办卡。", ["add_todo"]),
    ("Don't let the vet appointment slip past me.", ["add_todo"]),
    ("Stick 'call the bank' on my list.", ["add_todo"]),
    ("帮我存一下：车位号 B2-117。", ["add_note"]),
    # what is not done yet, said without the words "todo" or "task"
    ("Anything due this week that I haven't finished?", ["list_todos"]),
    ("I need a list of what I still have to get done.", ["list_todos"]),
    ("这周还有什么没搞定？", ["list_todos"]),
    # a question about something the user saved before
    ("Didn't I save the boiler's model number somewhere?", ["search_notes"]),
    ("上次记下的那个快递单号是多少？", ["search_notes"]),
    ("Did I save the alarm code anywhere?", ["search_notes"]),
    ("I jotted the locker number down last week, what was it?", ["search_notes"]),
    ("Did I write anything about the boiler service?", ["search_notes"]),
    # files said as documents or lines, or the project
    ("What do I have in my workspace?", ["list_files"]),
    ("电脑里这个目录下都有什么文档？我记不清了", ["list_files"]),
    ("Is there a line about the deposit in these documents?", ["search_files"]),
    ("合同的文档里提没提违约金？", ["search_files"]),
    # the weather, said as how cold it gets or what to carry
    ("明天去长白山，会冻成什么样？", ["get_weather"]),
    ("Will I freeze in Helsinki with just a hoodie?", ["get_weather"]),
    ("周末去厦门，用不用打伞？", ["get_weather"]),
    ("下午去海边，会不会晒黑啊？", ["get_weather"]),
    ("Will I need to de-ice the car in Calgary tomorrow?", ["get_weather"]),
    # ... not in another sense: a forecast of sales, a count of a day's food
    ("Our sales forecast for Q3 looks grim.", []),
    ("猫一天要睡多少个小时？", []),
    # a title or quoted words are named, not said; a quoted file name is said
    ("周杰伦的《晴天》是哪年出的？", []),
    ("“下雨天”这首歌谁唱的？", []),
    ("What does 'weather the storm' mean?", []),
    ("What's in 'plan.md'?", ["read_file"]),
    # ... and something to find: beside a topic they tip it to a search tool
    ("Which docs in this folder mention 'escrow'?", ["search_files"]),
    ("Search for “报销” in these documents.", ["search_files"]),
    # a word of a phrase found is no other tool's cue, in any of its forms
    ("Is there anything that says refund?", ["search_files"]),
    ("What have I got left that's marked urgent?", ["list_todos"]),
    # a rate between numbers
    ("We used 18 kWh over 6 days, how much per day?", ["calculator"]),
    ("At 19 an hour for 25 hours, what do I make before tax?", ["calculator"]),
    # words of those meanings in another sense point nowhere
    ("Did you remember to be nice today? Just kidding.", []),
    ("I loved reading comics as a kid.", []),
    ("Is there a word for when you forget a name you just heard?", []),
    ("My cat has a habit of knocking things off the desk.", []),
])
def test_everyday_words_of_each_tools_purpose_point_to_it(registry, question, expected) -> None:
    """Asked the way people talk, not in the tool's own words."""
    assert names(routed(question, registry.schemas(), cues_of(registry))) == expected


@pytest.mark.parametrize(("question", "expected"), [
    ("周三之前得把报销单交上去，你帮我记上。", ["add_todo"]),
    ("By Friday I have to send the invoice. Write that down.", ["add_todo"]),
    ("帮我记一下：门禁密码 4471。", ["add_note"]),
    ("Will it rain before Friday in Oslo?", ["get_weather"]),
    ("I need to renew the lease sometime next month.", ["add_todo"]),
    ("What do I have to get done by Friday?", ["list_todos"]),
])
def test_something_to_be_done_by_a_day_is_a_todo_not_a_note(registry, question, expected) -> None:
    """add_note's own description: a thing with a due date is a todo (DUE_CUE): "帮我记上" with a
    deadline had gone to add_note; a deadline without anything to be done points nowhere."""
    assert names(routed(question, registry.schemas(), cues_of(registry))) == expected


def test_a_quotation_is_at_most_200_characters(registry) -> None:
    """Unbounded, a paste of 50,000 unclosed “ took 6.7 s to route (each one searched to the
    end); bounded, a longer "quotation" is read as said, which keeps the search linear."""
    assert routed("“明天下雨吗”这首歌好听吗？", registry.schemas(), cues_of(registry)) == []
    long_quote = "“明天下雨吗？" + "真的" * 100 + "”"
    assert names(routed(long_quote, registry.schemas(), cues_of(registry))) == ["get_weather"]


def test_a_phrase_cue_is_found_as_words_not_inside_them(registry) -> None:
    """"at work" is not in "that works"; "each person" is in "each person's"."""
    office: ToolSchema = {"name": "office_hours", "description": "Office hours.", "parameters": {"type": "object"}}
    assert routed("Cool, that works for me.", [office], {"office_hours": ("at work",)}) == []
    assert names(routed("Who is at work today?", [office], {"office_hours": ("at work",)})) == ["office_hours"]
    assert names(routed("64 for three, what's each person's share?", registry.schemas(),
                        cues_of(registry))) == ["calculator"]


def test_a_tool_without_cues_is_found_by_what_its_topic_is_for_and_not_by_a_word_of_any_topic(registry) -> None:
    """The gloss's everyday words: running out is shopping, "a decent hour" asks a clock; but
    "list" of a shopping tool's description is no topic ("a list of reasons"), nor "in dollars"
    a time conversion's, nor 时间 in 时间过得 or 半夜 in 追到半夜."""
    tools = [*registry.schemas(), GROCERIES]
    assert routed("Give me a list of reasons to learn Latin.", tools, cues_of(registry)) == []
    assert names(routed("牙膏用完了，买东西的时候记得加上。", tools, cues_of(registry))) == ["groceries"]
    assert names(routed("Is it a decent hour to call Tokyo?", [*tools, CLOCK], cues_of(registry))) == [CLOCK["name"]]
    # money said in a currency is no conversion of times
    assert names(routed("How much is 40 dollars in euros?", [FX, CLOCK, CONVERT], {})) == ["fx"]
    assert routed("时间过得真快，又到年底了。", [*tools, CLOCK], cues_of(registry)) == []
    assert routed("他昨晚追剧追到半夜。", [*tools, CLOCK], cues_of(registry)) == []
    assert names(routed("Grab more coffee, we're running out.", tools, cues_of(registry))) == ["groceries"]


CONVERT: ToolSchema = {"name": "clock__convert_time", "description": "Convert time between timezones.",
                       "parameters": {"type": "object"}}


@pytest.mark.parametrize(("question", "expected"), [
    ("Would my sister in Lisbon be asleep by now?", ["clock__get_current_time"]),
    ("What time is it in Denver right now?", ["clock__get_current_time"]),
    ("这个点给悉尼的客户打电话合适吗？", ["clock__get_current_time"]),
    ("Convert 9am Tokyo time to London time.", ["clock__convert_time"]),
    ("北京时间下午三点换成纽约时间是几点？", ["clock__convert_time"]),
    # "now" alone names no topic: chat that says it is no question about the time
    ("I'm so tired right now, tell me something nice.", []),
    ("我现在有点无聊。", []),
])
def test_now_points_to_the_current_time_rather_than_a_conversion(registry, question, expected) -> None:
    """Both clock tools are about time; "current" in one's description is found as what people
    say for it (now, 现在, 这个点): a question about now had both, and the 0.5B model converted."""
    tools = [*registry.schemas(), CLOCK, CONVERT]
    assert names(routed(question, tools, cues_of(registry))) == expected


@pytest.mark.parametrize(("question", "expected"), [
    ("Is it snowing in Oslo?", ["get_weather"]),
    ("Any files mentioning the invoice?", ["search_files"]),
    ("We're buying bread this weekend, put two loaves down.", ["to_buy"]),
    ("Went shopping yesterday, forgot the eggs; add them.", ["groceries"]),
    ("My cousin stopped by and we talked for hours.", []),
])
def test_a_word_is_found_in_its_other_forms(registry, question, expected) -> None:
    """A one-word cue is found as the words people inflect it to: "snowing" for "snow",
    "buying" for "buy" (the other cases were routed before and must stay so)."""
    to_buy: ToolSchema = {"name": "to_buy", "description": "Put something on the list of things to buy.",
                          "parameters": {"type": "object"}}
    tools = [*registry.schemas(), GROCERIES, to_buy]
    assert names(routed(question, tools, cues_of(registry))) == expected


@pytest.mark.parametrize(("question", "expected"), [
    # an action on the thing a tool's name says: more than the thing alone (each was list_todos,
    # list_notes or no tool: a todo added as a listing, a note never saved)
    ("添加一个待办：买牛奶。", ["add_todo"]),
    ("Mark todo 3 as done.", ["complete_todo"]),
    ("把第3项待办标记为已完成。", ["complete_todo"]),
    ("Search my notes for invoice.", ["search_notes"]),
    ("Save a note: the wifi password is on the fridge.", ["add_note"]),
    ("Please delete the dentist task.", ["delete_todo"]),
    ("Put milk on my todo list", ["add_todo"]),
    ("把去牙医那个任务改成低优先级", ["update_todo"]),
    ("帮我找一下关于发票的笔记", ["search_notes"]),
    ("Find the file about taxes", ["search_files"]),
    # a state or a question is no action: these stay as they were
    ("Which todos are done?", ["list_todos"]),
    ("哪些任务没完成？", ["list_todos"]),
    ("我的笔记里都有什么？", ["list_notes", "search_notes"]),
    ("Which file mentions the budget?", ["search_files"]),
    ("Show me the details of todo-002.", ["get_todo", "read_file"]),
    ("Can you make it shorter?", []),
    ("Make a list of my todos.", ["list_todos"]),
])
def test_an_action_said_on_the_thing_a_tool_name_says_points_to_it(registry, question, expected) -> None:
    assert names(routed(question, registry.schemas(), cues_of(registry))) == expected


def test_a_cue_inside_another_found_counts_once(registry) -> None:
    """"which file" inside "which files" is one cue, not two: it no longer outweighs the folder's "in here"."""
    assert "list_files" in names(routed("Which files do I have in here at the moment?", registry.schemas(),
                                        cues_of(registry)))
    assert names(routed("Is it raining in Oslo?", registry.schemas(), cues_of(registry))) == ["get_weather"]


def test_an_action_of_a_tool_name_needs_its_thing_and_skips_a_server_prefix() -> None:
    """An MCP tool's name, "server__verb_thing", is read without the server."""
    find: ToolSchema = {"name": "docs__search_pages", "description": "Query the wiki.",
                        "parameters": {"type": "object"}}
    assert names(routed("Find the page on onboarding.", [find], {})) == ["docs__search_pages"]
    assert routed("Find me a good recipe.", [find], {}) == []


def test_the_gloss_widens_only_tools_without_cues_of_their_own(registry) -> None:
    """A built-in tool's own cues are its whole list; a topic the gloss does not know keeps its words."""
    from repl.embedded.gloss import widened

    assert names(routed("一百美元能换多少人民币？", [FX], {})) == ["fx"]  # by its description, widened
    assert routed("一百美元能换多少人民币？", [FX], {"fx": ("exchange rate",)}) == []  # its own cues, as given
    assert widened(["timezones", "sprocket"])[:2] == ["timezones", "time zone"]
    assert widened(["sprocket"]) == ["sprocket"]


def test_every_chinese_word_of_the_gloss_means_its_topic_on_its_own() -> None:
    """Found anywhere in a question, a single character would match inside other words ("灯" in "灯笼")."""
    import re

    from repl.embedded.gloss import ACTIONS, GLOSS

    chinese = [word for words in (*GLOSS.values(), *ACTIONS.values()) for word in words
               if re.search(r"[\u4e00-\u9fff]", word)]
    assert chinese and all(len(word) >= 2 for word in chinese)


def test_a_user_tool_is_routed_by_its_description_and_its_cues_are_not_read(tmp_path) -> None:
    """``cues=`` in a tool file is left out (one line says so): the words router finds a user's
    tool by its description's first sentence, as an MCP tool."""
    from tools.user_loader import load_sources, read_sources, tool_files

    (tmp_path / "fx.py").write_text(
        "from glassloop_tools import tool\n\n"
        "@tool(cues=('bananas',))\n"
        "def fx_rate(base: str, quote: str) -> dict:\n"
        '    """The exchange rate between two currencies."""\n'
        "    return {'rate': 0.9}\n", "utf-8")
    loaded = load_sources(read_sources(tool_files(tmp_path)), {})
    [fx] = loaded.tools
    registry = Registry([fx])
    assert cues_of(registry) == {}
    assert names(routed("What is the exchange rate of the yen?", [fx.schema()], cues_of(registry))) == ["fx_rate"]
    assert routed("How many bananas are left?", [fx.schema()], cues_of(registry)) == []


def test_a_number_cue_needs_a_number_in_the_question() -> None:
    tip: ToolSchema = {"name": "tip", "description": "The tip on a bill.", "parameters": {}}
    cues = {"tip": (NUMBER_CUE, "tip", "小费")}
    assert names(routed("What tip on 86 at 15%?", [tip], cues)) == ["tip"]
    assert routed("Any tips for a first date?", [tip], cues) == []


def test_the_cues_found_are_given_with_the_tools_and_none_for_a_named_tool(registry) -> None:
    """``_cued``: what ``routed`` found, said in the routing ("routed to get_weather by
    "umbrella""); a question that names its tool found no words."""
    tools, cues = registry.schemas(), cues_of(registry)
    found, words = _cued("Do I need an umbrella in Oslo?", tools, cues)
    assert (names(found), words) == (["get_weather"], ("umbrella",))
    found, words = _cued("call add_todo with milk", tools, cues)
    assert (names(found), words) == (["add_todo"], ())
    assert _cued("Who wrote Hamlet?", tools, cues) == ([], ())


def test_a_question_that_names_a_tool_is_routed_to_it(registry) -> None:
    """"todo" is a cue of list_todos; a question naming add_todo goes to add_todo all the same
    (the 0.5B model was made to call list_todos for "Call add_todo with ...")."""
    question = 'Call add_todo with exactly these arguments: {"title": "buy milk"}'
    assert names(routed(question, registry.schemas(), cues_of(registry))) == ["add_todo"]
    assert names(routed("what does get_todo return?", registry.schemas(), cues_of(registry))) == ["get_todo"]


def test_a_cue_of_signs_is_found_anywhere(registry) -> None:
    assert names(routed("What's 15% of 86?", registry.schemas(), cues_of(registry))) == ["calculator"]


def test_the_cues_are_a_side_table_of_the_built_in_tools(registry) -> None:
    """The words router's cues are its own, by tool name; a ``Tool`` carries none."""
    from tools.registry import Tool

    assert "cues" not in Tool.__dataclass_fields__
    assert set(BUILT_IN_CUES) == set(registry.names()) == set(cues_of(registry))
    assert all(cues and all(isinstance(cue, str) and cue.strip() == cue != "" for cue in cues)
               for cues in BUILT_IN_CUES.values())


def test_the_bench_user_tools_stay_without_cues() -> None:
    """The evaluation's user tools (bench/cases/local_tools.py) are routed by their docstrings,
    as a user's tool written without cues is: they must not grow cues of the evaluation's words."""
    source = (Path(__file__).parents[1] / "bench" / "cases" / "local_tools.py").read_text("utf-8")
    assert "cues" not in source


# ---------------------------------------------------------------- follow-ups


@pytest.mark.parametrize("question", ["And in Paris?", "What about tomorrow?", "那上海呢？"])
def test_a_follow_up_that_names_no_tool_goes_to_the_tools_the_turn_before_called(registry, question) -> None:
    """Left free, the 1.5B model answered "And in Paris?" after a weather question with an
    invented temperature and no call."""
    request = route_request(turn_after_weather(question), registry.schemas())
    assert followed(request) == ("get_weather",)
    assert WordsRouter.of(registry).choose(request) == ToolChoice("required", ("get_weather",), by="follow_up")


@pytest.mark.parametrize("question", ["And you?", "你呢？", "Who wrote Hamlet?",
                                      "And one more thing: how long is the Great Wall of China, roughly?"])
def test_a_question_about_the_assistant_or_a_new_topic_is_not_a_follow_up(registry, question) -> None:
    assert followed(route_request(turn_after_weather(question), registry.schemas())) == ()


def test_a_follow_up_of_a_turn_without_a_call_is_not_routed(registry) -> None:
    messages: list[Any] = [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello!"},
                           {"role": "user", "content": "And in Paris?"}]
    assert followed(route_request(messages, registry.schemas())) == ()
    assert WordsRouter.of(registry).choose(route_request(messages, registry.schemas())) is None
    assert followed(route_request(turn_after_weather("And in Paris?"), registry.schemas()))  # the same after a call


def test_a_follow_up_goes_only_to_tools_still_offered(registry) -> None:
    """The tool the turn before called is gone (an MCP server stopped): no follow-up."""
    request = route_request(turn_after_weather("And in Paris?"), [t for t in registry.schemas()
                                                                   if t["name"] != "get_weather"])
    assert followed(request) == ()


# ---------------------------------------------------------------- the router


def asked(question: str, tools: list[ToolSchema]) -> RouteRequest:
    return route_request([{"role": "system", "content": "s"}, {"role": "user", "content": question}], tools)


def test_the_words_router_says_each_way_a_first_call_is_decided(registry) -> None:
    """A named tool, the cues found (said as the words), a follow-up; a question without any
    tool's words decides nothing (small talk neither: the router before it takes that): the next
    router (by meaning) decides."""
    router, tools = WordsRouter.of(registry), registry.schemas()
    assert router.choose(asked("call add_todo with milk", tools)) == ToolChoice("required", ("add_todo",), by="named")
    assert router.choose(asked("Do I need an umbrella in Oslo?", tools)) == ToolChoice(
        "required", ("get_weather",), by='words "umbrella"')
    assert router.choose(route_request(turn_after_weather("And in Paris?"), tools)) == ToolChoice(
        "required", ("get_weather",), by="follow_up")
    assert router.choose(asked("Thanks, see you!", tools)) is None
    assert router.choose(asked("Who wrote Hamlet?", tools)) is None
    assert router.choose(asked("Do I need an umbrella in Oslo?", [])) is None  # nothing offered: no decision


def test_the_words_of_every_tool_chosen_are_said(registry) -> None:
    """Tools with as many cues found are all allowed; the routing names each word once."""
    router = WordsRouter.of(registry)
    choice = router.choose(asked("我的笔记里都有什么？", registry.schemas()))
    assert choice is not None and (choice.mode, choice.allowed) == ("required", ("list_notes", "search_notes"))
    assert choice.by.startswith("words ") and choice.by.count('"笔记"') == 1


def test_the_words_router_reads_the_registrys_cues_at_each_question(registry) -> None:
    """A tool's cues as they are when the question is asked (user tools and MCP servers arrive
    after the session starts)."""
    tip: ToolSchema = {"name": "tip", "description": "The tip on a bill.", "parameters": {"type": "object"}}
    cues: dict[str, tuple[str, ...]] = {}
    router = WordsRouter(lambda: cues)
    assert router.choose(asked("小费给多少合适？", [tip])) is None
    cues["tip"] = ("小费",)
    assert router.choose(asked("小费给多少合适？", [tip])) == ToolChoice("required", ("tip",), by='words "小费"')


def test_one_built_in_tool_found_by_its_cues_is_decided_before_small_talk_and_read_for_knowledge(
        registry) -> None:
    """A plain question about a built-in tool is decided by its cues before small talk and the
    ranking, then read by the sentence encoder for a question of knowledge (``knowledge.Knowing``);
    a tool named needs no encoder. Several tools, a tool found by its description's words, or
    nothing found go on to small talk, the ranking and meaning."""
    from repl.embedded.chain import chain as embedded_chain
    from repl.embedded.router import Embeddings, MeaningRouter
    from repl.embedded.words import CuedFirst

    loads: list[int] = []

    def load() -> Any:
        loads.append(1)
        raise RuntimeError("the encoder was needed")

    words, tools = WordsRouter.of(registry), registry.schemas()
    meaning = MeaningRouter(lambda name: (), embed=Embeddings(load=load))
    chain = embedded_chain(registry, meaning)
    assert chain.choose(asked("call add_todo with milk", tools)) == ToolChoice("required", ("add_todo",), by="named")
    assert loads == []
    with pytest.raises(RuntimeError, match="the encoder was needed"):  # the reading, after the cues
        chain.choose(asked("Do I need an umbrella in Oslo?", tools))
    assert loads == [1]
    cued = CuedFirst(words)
    assert cued.choose(asked("我的笔记里都有什么？", tools)) is None  # two tools: ranked by meaning
    assert cued.choose(asked("Who wrote Hamlet?", tools)) is None  # no tool's words
    assert cued.choose(asked("What time is it in Lima?", [*tools, CLOCK])) is None  # a description's words
