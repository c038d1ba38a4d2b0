"""The judges of the embedded model's evaluation (bench/local_eval.py) and of the scripted first
conversation (bench/first_conversation.py), on answers and calls written here: they decide what
the figures in docs/BENCHMARKS.md count."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from bench.first_conversation import SCRIPT, Turn, judge
from bench.local_eval import CASE_FILES, echoed, invented, unsaid, written_apart

ADD_TODO = {"type": "object", "required": ["title"], "properties": {
    "title": {"type": "string"}, "priority": {"type": "string", "enum": ["low", "medium", "high"], "default": "medium"},
    "due": {"type": ["string", "null"]}, "tag": {"type": ["string", "null"]}}}


def test_the_case_files_hold_the_split() -> None:
    """The development and held-out halves (split once), and the development sets written
    later: no request in two files, each with user tools, the MCP tool and controls."""
    split = {name: path for name, path in CASE_FILES.items() if written_apart(path) is None}
    sets = {name: tomllib.loads(path.read_text("utf-8"))["case"] for name, path in split.items()}
    later = [name for name in split if name not in ("dev", "heldout")]
    assert later == [f"dev{n}" for n in range(2, 15)]
    for names, requests, controls in ((("dev", "heldout"), 48, 16), *(((name,), 24, 8) for name in later)):
        cases = [case for name in names for case in sets[name]]
        tools = [c for c in cases if c["tool"]]
        assert len(tools) == requests and len(cases) - len(tools) == controls
        assert sum(c["lang"] == "zh" for c in tools) == requests // 2
    every = [case["message"] for half in sets.values() for case in half]
    assert len(set(every)) == len(every) == 480  # no request in two files
    for half in sets.values():
        names = {c["tool"] for c in half}
        assert {"", "clock__get_current_time"} <= names and names & {"add_item", "convert_currency"}


def test_an_answer_that_repeats_the_question_is_an_echo() -> None:
    question = "今天还有哪些没完成？把优先级最高的一项展开说明。"
    assert echoed("今天还有哪些没完成？", [question]) is False  # part of it, not the whole
    assert echoed(question, ["add a todo: buy oat milk", question])
    assert echoed("“今天还有哪些没完成？把优先级最高的一项展开说明。”", [question])
    assert not echoed("你目前没有待办事项。", [question])


def test_an_optional_argument_the_message_does_not_give_is_invented() -> None:
    message = "add a todo: buy oat milk, high priority"
    call = {"title": "buy oat milk", "priority": "high", "due": "2026-12-05", "tag": "work"}
    assert invented(call, ADD_TODO, message, {}) == ["due", "tag"]
    assert invented({"title": "x", "priority": "medium"}, ADD_TODO, "add x", {}) == []  # the default
    assert invented({"title": "x", "due": "tomorrow"}, ADD_TODO, "add x for tomorrow", {}) == []


def test_a_required_text_with_no_word_of_the_message_is_unsaid() -> None:
    """The 0.5B model titled "提醒我周五前把季度报表交上去。" "Write the weekly report": the
    schema's example, not the request."""
    message = "提醒我周五前把季度报表交上去。"
    assert unsaid({"title": "Write the weekly report"}, ADD_TODO, message, {}) == ["title"]
    assert unsaid({"title": "交季度报表"}, ADD_TODO, message, {}) == []
    assert unsaid({"title": "Move appointment to dentist"}, ADD_TODO,
                  "I need to call the dentist to move my appointment", {}) == []
    assert unsaid({"title": "x"}, ADD_TODO, message, {"title": "x"}) == []  # checked by the case
    assert unsaid({"title": "7 * 24 * 60"}, ADD_TODO, message, {}) == []  # no words to judge
    assert unsaid({"title": "Europe/London"}, ADD_TODO, "伦敦现在几点？", {}) == []  # a code, not prose


def test_the_conversation_judge() -> None:
    empty = SCRIPT[0]
    first = {"step": 1, "name": "list_todos", "arguments": {}, "valid": True}
    said = [empty.message]
    echo = judge(empty, {"calls": [first], "results": [], "answer": empty.message, "seconds": 1.0}, {}, said)
    assert echo["echo"] and echo["tool_ok"] and not echo["checks"]["says_empty"]
    listed = [{"name": "list_todos", "ok": True, "result": {"count": 0, "todos": []}}]
    good = judge(empty, {"calls": [first], "results": listed, "answer": "目前没有未完成的待办。", "seconds": 1.0}, {}, said)
    assert not good["echo"] and good["in_language"] and good["checks"]["says_empty"] and not good["invented_answer"]
    paris = Turn("And in Paris?", "en", "get_weather", no_weather=True)
    weather = {"step": 1, "name": "get_weather", "arguments": {"city": "Paris"}, "valid": True}
    made_up = judge(paris, {"calls": [weather], "results": [], "answer": "Paris is sunny, 21°C.", "seconds": 1.0},
                    {}, [paris.message])
    assert made_up["invented_answer"]
    add = Turn("add a todo: buy oat milk, high priority", "en", "add_todo",
               values={"title": "oat milk", "priority": "high"}, absent=("due", "tag"))
    call = {"step": 1, "name": "add_todo", "valid": True,
            "arguments": {"title": "buy oat milk", "priority": "medium", "due": "2026-12-05"}}
    unfaithful = judge(add, {"calls": [call], "results": [], "answer": "Added.", "seconds": 1.0},
                       {"add_todo": ADD_TODO}, [add.message])
    assert unfaithful["faithful"] == {"ok": False, "kept": False, "invented": ["due"]}


def test_the_script_is_ten_turns_in_both_languages() -> None:
    assert len(SCRIPT) == 10 and {t.lang for t in SCRIPT} == {"en", "zh"}
    assert Path(__file__).parent.parent.joinpath("bench", "first_conversation.py").exists()


def test_a_list_answer_names_every_item() -> None:
    from bench.local_eval import listed, names_items

    results = [{"name": "list_todos", "ok": True, "result": {"count": 2, "todos": [
        {"title": "Renew the car insurance"}, {"title": "Book a table for Friday"}]}}]
    names = listed(results)
    assert names == ["Renew the car insurance", "Book a table for Friday"]
    assert names_items("Two are open: Renew the car insurance and Book a table for Friday.", names)
    assert not names_items("You have two open todos.", names)
    assert listed([{"name": "calculator", "ok": True, "result": {"value": 3}}]) is None
    assert names_items("你没有待办事项。", []) and not names_items("好的。", [])


def test_a_list_argument_is_judged_too() -> None:
    note = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"},
                                                                  "tags": {"type": ["array", "null"]}}}
    assert invented({"text": "code 7731", "tags": ["recipe"]}, note, "Save the code 7731", {}) == ["tags"]
    assert invented({"text": "x", "tags": ["home"]}, note, "note x, tag it home", {}) == []


def test_an_answer_without_the_tool_is_not_grounded() -> None:
    """"抱歉，我无法协助" is no empty list (无 of 无法), and weather no tool returned is invented."""
    empty, weather = SCRIPT[0], SCRIPT[4]
    refusal = judge(empty, {"calls": [], "results": [], "answer": "抱歉，我无法协助完成这个请求。", "seconds": 1.0}, {},
                    [empty.message])
    assert refusal["checks"] == {"says_empty": False}
    sunny = judge(weather, {"calls": [], "results": [], "answer": "北京今天天气晴朗，温度约为20°C。", "seconds": 1.0}, {},
                  [weather.message])
    assert sunny["checks"] == {"grounded": False} and sunny["invented_answer"]


def test_a_case_whose_tool_is_not_offered_fails_the_run() -> None:
    """A run that could not offer a case's tool (an MCP server not started) is a failed run, not
    a lower and faster figure."""
    import pytest

    from bench.local_eval import require_offered

    require_offered(["clock__get_current_time"], ["get_weather", "clock__get_current_time"], "几点了？")
    require_offered([], [], "hello")  # a control needs no tool
    with pytest.raises(RuntimeError, match="clock__get_current_time not offered"):
        require_offered(["clock__get_current_time"], ["get_weather"], "几点了？")


def test_a_case_after_which_the_router_failed_fails_the_run() -> None:
    """A router that fails is not asked again that session (the model chooses alone): every case
    after it would be scored without routing, so the run is failed."""
    import pytest

    from bench.local_eval import require_routed
    from repl.loop.routing import Routing
    from tests.support import TableRouter

    class Core:
        def __init__(self) -> None:
            self.routing = Routing(TableRouter())

        def _routing(self) -> tuple[Routing, ...]:
            return (self.routing,)

    core = Core()
    require_routed(core, "hello")
    core.routing.failed = "KeyError: ('query', 'hello')"
    with pytest.raises(RuntimeError, match="the router failed"):
        require_routed(core, "hello")


@pytest.mark.parametrize(("answer", "off"), [
    ("抱歉，我无法协助完成这个请求。", True),
    ("To list todos, call list_todos.", True),
    ("Sorry, I can't help with that.", True),
    ("周末睡懒觉，真舒服！", False),
    ("Mount Kilimanjaro, about 5,895 m.", False),
    ("Sorry to hear that! Hope the coffee machine is fixed soon.", False),
])
def test_a_control_answered_with_a_refusal_or_talk_of_tools_is_off(answer: str, off: bool) -> None:
    from bench.local_eval import off_answer

    assert off_answer(answer, ["list_todos", "get_weather"]) is off


def test_the_first_conversation_saves_its_figures_where_no_folder_was_yet(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/results/ is not in a clone: the conversation's minutes of figures were lost to a
    missing folder after they were printed."""
    import json

    from bench import first_conversation

    monkeypatch.setattr(first_conversation, "converse", lambda profile: {"profile": profile, "echoes": 0})
    out = tmp_path / "results" / "first_conversation.json"
    assert first_conversation.main(["--out", str(out)]) == 0
    assert json.loads(out.read_text("utf-8")) == {"profile": "local", "echoes": 0}


def test_the_fixtures_mcp_tools_run_in_the_dry_run_by_the_names_the_registry_gives_them() -> None:
    """The fixture's read-only MCP tools are allowed by their registry names (``SERVER__tool``):
    named "mcp__clock__…", every clock and git call of a run was answered "not run", and the answer
    after it said so instead of the time."""
    from bench.local_eval import FIXTURE_CALLS
    from tools.mcp_convert import tool_name

    assert {tool_name("clock", "get_current_time"), tool_name("git", "git_log")} <= FIXTURE_CALLS
    assert not any(name.startswith("mcp__") for name in FIXTURE_CALLS)


def test_a_set_written_apart_runs_its_own_tools_in_the_dry_run() -> None:
    from bench.local_eval import CASES, apart_calls

    assert apart_calls(CASES / "fresh2") == {"find_book", "public_holidays"}


def test_the_figures_give_the_right_tool_by_kind_of_tool_and_the_requests_without_a_call() -> None:
    """A run's figures say how MCP and user tools fared apart from the built-in ones, and how many
    requests got no call at all (answered in text where a tool exists)."""
    from bench.local_eval import USER_TOOLS, kind_of, score, user_tools

    users = user_tools(USER_TOOLS)
    assert "convert_currency" in users and "list_todos" not in users
    assert [kind_of(name, users) for name in ("git__git_log", "convert_currency", "list_todos")] == [
        "mcp", "user", "built-in"]

    def request(kind: str, right: bool, called: list[str]) -> dict[str, object]:
        return {"tool": "t", "kind": kind, "right_tool": right, "called": called, "ok": right, "lang": "en",
                "invented": [], "answer_in_language": True, "echo": False, "asked_again": False,
                "names_items": None, "seconds": 1.0}

    figures = score([request("mcp", True, ["a"]), request("mcp", False, []), request("user", False, ["b"]),
                     request("built-in", True, ["c"])])
    assert figures["right_tool_by_kind"] == {"built-in": "1/1", "mcp": "1/2", "user": "0/1"}
    assert figures["no_call"] == 1
