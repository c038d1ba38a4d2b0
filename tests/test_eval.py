"""``glassloop eval``: a case file's messages on a model, scored, through the session core.

Against the scripted server: the table, the JSON and the exit status of a six-case file (a
user tool, an MCP tool, a case without a tool, one in Chinese), side effects dry-run and
nothing stored; ``-j 4`` against a slow server. Against the embedded model: four cases (small
talk in both languages, a call in each), one server process.
"""

from __future__ import annotations

import json
import shutil
from importlib import util
from pathlib import Path
from typing import Any

import pytest

from repl.config.load import load_settings
from repl.providers.base import ToolChoice
from repl.trials.evaluate import CaseFileError, load_cases, report_json, run_model, table
from tests.fakeserver import FakeServer, Reply, call, slow_first_byte, text, tool_calls
from tests.support import TableRouter, alive, glassloop_here, mcp_config_file, route_with

TOOL_FILE = '''
from pathlib import Path

from glassloop_tools import tool


@tool(side_effects=True)
def add_item(name: str, quantity: int = 1) -> dict:
    """Put something on the shopping list."""
    Path({written!r}).write_text(name, encoding="utf-8")
    return {{"name": name, "quantity": quantity}}
'''

SIX_CASES = '''
[[case]]
message = "Add milk to my shopping list"
tool = "add_item"
args = { name = "milk" }
lang = "en"

[[case]]
message = "What is the capital of France?"
tool = "t__lookup"
args_contain = { country = "france" }
answer_contains = "Paris"
lang = "en"

[[case]]
id = "hello"
message = "Hello!"
tool = ""
lang = "en"

[[case]]
message = "北京今天天气怎么样？"
tool = "get_weather"
args_match = { city = "北京|Beijing" }
lang = "zh"

[[case]]
id = "open"
message = "Which todos are open?"
tool = "list_todos"
lang = "en"

[[case]]
id = "sum"
message = "What is 2+2?"
tool = "calculator"
result_contains = "4"
answer_contains = ["four", "vier"]
'''

# what the scripted model does with each message: its first step, then its answer after the results
FIRST_STEP = {
    "Add milk to my shopping list": tool_calls(call("add_item", {"name": "milk"})),
    "What is the capital of France?": tool_calls(call("t__lookup", {"country": "France"})),
    "Hello!": text("Hi there!"),
    "北京今天天气怎么样？": tool_calls(call("get_weather", {"city": "北京"})),
    "Which todos are open?": tool_calls(call("list_notes", {})),  # the wrong tool
    "What is 2+2?": tool_calls(call("calculator", {"expression": "2+2"})),
}
ANSWER = {"What is the capital of France?": "Paris.", "What is 2+2?": "4."}


def _model(body: dict[str, Any]) -> Reply:
    question = next(m["content"] for m in body["messages"] if m["role"] == "user")
    if body["messages"][-1]["role"] == "tool":
        return text(ANSWER.get(question, "Done."))
    return FIRST_STEP[question]


def _six(tmp_path: Path, fake_server: FakeServer) -> tuple[list[str], Path]:
    cases = tmp_path / "cases.toml"
    cases.write_text(SIX_CASES, encoding="utf-8")
    tools = tmp_path / "shopping.py"
    tools.write_text(TOOL_FILE.format(written=str(tmp_path / "written.txt")), encoding="utf-8")
    fake_server.script(*[_model] * 22)
    return ["eval", str(cases), "--config", str(mcp_config_file(tmp_path)), "--tools", str(tools),
            "--base-url", fake_server.base_url, "--model", "m-eval"], cases


def test_six_cases_give_the_table_the_json_and_the_exit_status(
        fake_server: FakeServer, home: dict[str, str], tmp_path: Path) -> None:
    args, _ = _six(tmp_path, fake_server)
    shown = glassloop_here(*args, "--min", "0.6", env=home)
    assert shown.returncode == 0, shown.stderr
    assert "Traceback" not in shown.stderr
    lines = [line.split() for line in shown.stdout.splitlines()]
    assert lines[0] == ["m-eval", "(openai):", "6", "cases"]
    figures = {" ".join(line[:-2]): line[-2:] for line in lines[1:] if line and line[-1].endswith("%")}
    assert figures == {"right tool": ["5/6", "83%"], "valid arguments": ["5/5", "100%"],
                       "argument checks": ["4/4", "100%"], "answer checks": ["1/2", "50%"],
                       "passed": ["4/6", "67%"], "passed, en": ["3/4", "75%"], "passed, zh": ["1/1", "100%"]}
    failing = shown.stdout.split("failing:")[1].strip().splitlines()
    assert failing[0].strip() == "open [en] 'Which todos are open?': expected list_todos, called list_notes {}"
    assert failing[1].strip() == "sum 'What is 2+2?': the answer holds none of 'four', 'vier': '4.'"
    assert len(failing) == 2

    bodies = [r.body for r in fake_server.chat_requests()]
    firsts = [b for b in bodies if b["messages"][-1]["role"] == "user"]
    assert [len(b["messages"]) for b in firsts] == [2] * 6  # every case from a fresh history: system, message
    assert {"add_item", "t__lookup", "get_weather"} <= {t["function"]["name"] for t in firsts[0]["tools"]}
    denied = [json.loads(b["messages"][-1]["content"]) for b in bodies
              if b["messages"][-1]["role"] == "tool" and b["messages"][-2]["tool_calls"][0]["function"]["name"] == "add_item"]
    assert "dry run" in denied[0]["error"]["message"]  # the side effect was not carried out
    assert not (tmp_path / "written.txt").exists()
    state, data = Path(home["XDG_STATE_HOME"]) / "glassloop", Path(home["XDG_DATA_HOME"]) / "glassloop"
    assert not (state / "traces").exists() and not (data / "sessions").exists()  # no trace, no journal

    machine = glassloop_here(*args, "--json", "--min", "0.7", env=home)
    assert machine.returncode == 1  # 4 of 6 is under 0.7
    assert "passed 67% of the cases, under --min 0.7" in machine.stderr
    report = json.loads(machine.stdout)
    model = report["models"][0]
    assert (model["model"], model["cases"], model["passed"]) == ("m-eval", 6, 4)
    assert model["right_tool_rate"] == pytest.approx(5 / 6, abs=1e-3)
    assert model["languages"]["zh"] == {"cases": 1, "right_tool_rate": 1.0, "pass_rate": 1.0}
    assert [(c["message"], c["called"], c["ok"]) for c in report["cases"]] == [
        ("Add milk to my shopping list", ["add_item"], True),
        ("What is the capital of France?", ["t__lookup"], True),
        ("Hello!", [], True),
        ("北京今天天气怎么样？", ["get_weather"], True),
        ("Which todos are open?", ["list_notes"], False),
        ("What is 2+2?", ["calculator"], False)]
    assert all(c["model"] == "m-eval" and c["input_tokens"] > 0 for c in report["cases"])


def test_a_case_file_with_a_mistake_is_one_line_and_exit_2(tmp_path: Path, home: dict[str, str]) -> None:
    cases = tmp_path / "cases.toml"
    for content, said in [
        ('[[case]]\nmessage = "hi"\n', "case 1: 'tool' is missing"),
        ('[[case]]\nmessage = "hi"\ntool = "x"\nargs_match = { a = "(" }\n', "case 1: 'args_match.a' is not a regular"),
        ('[[case]]\nmessage = "hi"\ntool = ""\n[[case]]\nmessage = "x"\ntool = "t"\ntols = 1\n',
         "case 2: unknown key 'tols'"),
        ("[[case]\n", "not valid TOML"),
        ('title = "no cases"\n', "unknown key 'title'"),
    ]:
        cases.write_text(content, encoding="utf-8")
        with pytest.raises(CaseFileError, match=said.replace("(", r"\(")):
            load_cases(cases)
    done = glassloop_here("eval", str(cases), env=home)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_jobs_run_cases_at_once_against_a_server(fake_server: FakeServer, home: dict[str, str],
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """8 cases on a server that answers each request after 0.5 s: ``-j 4`` has several requests open
    at once, ``-j 1`` one at a time (what the server saw, not the wall-clock time: a loaded machine
    made a ratio of times fail)."""
    for name in ("DATA", "STATE", "CONFIG"):
        monkeypatch.setenv(f"XDG_{name}_HOME", home[f"XDG_{name}_HOME"])
    cases = tmp_path / "cases.toml"
    cases.write_text("".join(f'[[case]]\nmessage = "Hello {n}"\ntool = ""\n\n' for n in range(8)), encoding="utf-8")
    found = load_cases(cases)
    settings = load_settings({"base_url": fake_server.base_url, "weather": "sample"}, cwd=tmp_path,
                             env={"OPENAI_API_KEY": "sk-test"})
    fake_server.script(*[slow_first_byte(0.5, text("Hi!"))] * 17)
    run_model(settings, found[:1])  # the SDK imported and connected: neither way pays for it
    at_once = {}
    for jobs in (1, 4):
        fake_server.peak_in_flight = 0
        run = run_model(settings, found, jobs=jobs)
        at_once[jobs] = fake_server.peak_in_flight
        assert [o.ok for o in run.outcomes] == [True] * 8 and not run.error
        assert [o.case.message for o in run.outcomes] == [c.message for c in found]  # in the file's order
    assert at_once[1] == 1 and 2 <= at_once[4] <= 4, at_once


ROUTED_CASES = """
[[case]]
id = "todos"
message = "Which todos are open?"
tool = "list_todos"

[[case]]
id = "weather"
message = "Will it rain in Oslo?"
tool = "get_weather"

[[case]]
id = "sum"
message = "What is 2+2?"
tool = "calculator"

[[case]]
id = "cued"
message = "Add milk to my todos"
tool = "add_todo"
"""
# the router's choices: a tool that scores above the expected one, the expected one, a tool
# without the expected among the scores, and the tools' words without scores
ROUTES = {
    "Which todos are open?": ToolChoice("required", ("list_notes",), (("list_notes", 0.62), ("list_todos", 0.41),
                                                                     ("none", 0.1)), 0.5, "meaning"),
    "Will it rain in Oslo?": ToolChoice("required", ("get_weather",), (("get_weather", 0.8), ("none", 0.2)),
                                        0.5, "meaning"),
    "What is 2+2?": ToolChoice("none", (), (("none", 0.7), ("get_weather", 0.1)), 0.5, "meaning"),
    "Add milk to my todos": ToolChoice("required", ("list_todos",), by='words "todos"'),
}
ROUTED_CALLS = {"Which todos are open?": tool_calls(call("list_notes", {})),
                "Will it rain in Oslo?": tool_calls(call("get_weather", {"city": "Oslo"})),
                "What is 2+2?": text("4."), "Add milk to my todos": tool_calls(call("list_todos", {}))}


def test_each_case_says_how_its_tool_was_chosen_and_a_wrong_ones_margin(
        fake_server: FakeServer, home: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DATA", "STATE", "CONFIG"):
        monkeypatch.setenv(f"XDG_{name}_HOME", home[f"XDG_{name}_HOME"])
    route_with(monkeypatch, TableRouter(ROUTES))
    cases = tmp_path / "cases.toml"
    cases.write_text(ROUTED_CASES, encoding="utf-8")
    config = tmp_path / "routed.toml"
    config.write_text("[providers.openai]\nrouter = true\n", encoding="utf-8")

    def model(body: dict[str, Any]) -> Reply:
        question = next(m["content"] for m in body["messages"] if m["role"] == "user")
        return text("Done.") if body["messages"][-1]["role"] == "tool" else ROUTED_CALLS[question]

    fake_server.script(*[model] * 16)
    where = {"base_url": fake_server.base_url, "weather": "sample", "todos_file": home["GLASSLOOP_TODOS_FILE"]}
    routed = run_model(load_settings(where, cwd=tmp_path, env={"OPENAI_API_KEY": "sk-test"}, config_file=config),
                       load_cases(cases))
    report = report_json([routed])
    routing = {c["id"]: c["routing"] for c in report["cases"]}
    assert routing["todos"] == {"by": "meaning", "top": [["list_notes", 0.62], ["list_todos", 0.41], ["none", 0.1]],
                                "threshold": 0.5, "margin": pytest.approx(0.21)}
    assert routing["weather"] == {"by": "meaning", "top": [["get_weather", 0.8], ["none", 0.2]],
                                  "threshold": 0.5, "margin": None}  # right: no margin
    assert routing["sum"]["margin"] == "not scored"  # calculator is not among the scores
    assert routing["cued"] == {"by": 'words "todos"', "top": [], "threshold": 0.0, "margin": "words"}
    failing = "\n".join(table(routed)).split("failing:")[1].strip().splitlines()
    assert [line.strip() for line in failing] == [
        "todos 'Which todos are open?': expected list_todos, called list_notes {}",
        "routed by meaning: list_notes 0.62, list_todos 0.41, none 0.10 (needs 0.50); margin +0.21",
        "sum 'What is 2+2?': expected calculator, called no tool",
        "routed by meaning: none 0.70, get_weather 0.10 (needs 0.50); margin not scored",
        "cued 'Add milk to my todos': expected add_todo, called list_todos {}",
        'routed by words "todos"; margin words']

    fake_server.script(*[model] * 16)  # a profile without a router: nothing routed, nothing said
    plain = run_model(load_settings(where, cwd=tmp_path, env={"OPENAI_API_KEY": "sk-test"}), load_cases(cases))
    assert [c["routing"] for c in report_json([plain])["cases"]] == [None] * 4
    assert not any(line.strip().startswith("routed") for line in table(plain))


REAL_CASES = "".join(f'[[case]]\nmessage = "{message}"\ntool = "{tool}"\nlang = "{lang}"\n\n' for message, tool, lang in [
    ("Hi!", "", "en"), ("谢谢！", "", "zh"), ("What is 12 times 34?", "calculator", "en"),
    ("北京今天天气怎么样？", "get_weather", "zh")])


@pytest.mark.skipif(util.find_spec("llama_cpp") is None,
                    reason="needs the 'local' extra: pip install 'glassloop[local]'")
@pytest.mark.xdist_group("llama")  # real inference uses every CPU: one test worker runs it all
@pytest.mark.timeout(1500)
def test_the_embedded_model_runs_every_case_in_one_server_process(
        tmp_path: Path, home: dict[str, str], monkeypatch: pytest.MonkeyPatch, embedded_model: Path,
        embedded_prompt_state: Path) -> None:
    from repl.embedded import server as local

    for name in ("DATA", "STATE", "CONFIG", "CACHE"):
        monkeypatch.setenv(f"XDG_{name}_HOME", home[f"XDG_{name}_HOME"])
    shutil.copytree(embedded_prompt_state, home["XDG_CACHE_HOME"], dirs_exist_ok=True)  # its build is not tested here
    started: list[int | None] = []
    start = local.LocalServer.start

    def counted(server: local.LocalServer) -> str:
        url = start(server)
        started.append(server.pid)
        return url

    monkeypatch.setattr(local.LocalServer, "start", counted)
    config = tmp_path / "local.toml"
    config.write_text(f'[providers.local]\nmodel_path = {json.dumps(str(embedded_model))}\nkeep_warm_s = 0\n'
                      "[guards]\nmax_steps = 2\nturn_timeout_s = 600\n", encoding="utf-8")
    cases = tmp_path / "cases.toml"
    cases.write_text(REAL_CASES, encoding="utf-8")
    settings = load_settings({"provider": "local", "weather": "sample", "todos_file": home["GLASSLOOP_TODOS_FILE"]},
                             cwd=tmp_path, env={}, config_file=config)
    run = run_model(settings, load_cases(cases), jobs=4)  # the embedded model: one case at a time

    assert not run.error and len(run.outcomes) == 4
    assert [o.error for o in run.outcomes] == [""] * 4
    assert all(o.input_tokens > 0 and o.stopped_by in ("answer", "max_steps") for o in run.outcomes)
    assert len(started) == 1, started  # one server process served every case
    assert started[0] is not None and not alive(started[0])  # stopped with the run


def test_a_case_that_cannot_reach_the_model_fails_the_run(tmp_path: Path, home: dict[str, str]) -> None:
    cases = tmp_path / "cases.toml"
    cases.write_text('[[case]]\nmessage = "Hello!"\ntool = ""\n', encoding="utf-8")
    done = glassloop_here("eval", str(cases), "--base-url", "http://127.0.0.1:9/v1", "--json", env=home)
    assert done.returncode == 1 and "1 of 1 cases ended in an error" in done.stderr
    assert json.loads(done.stdout)["cases"][0]["error"].startswith("cannot reach provider")


def test_the_documented_example_is_a_case_file(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parent.parent / "docs" / "TOOLS.md").read_text(encoding="utf-8")
    section = readme.split("### Test your tools on a model", 1)[1]
    cases = tmp_path / "cases.toml"
    cases.write_text(section.split("```toml\n", 1)[1].split("```", 1)[0], encoding="utf-8")
    found = load_cases(cases)
    assert [(c.tools, c.args, c.args_contain) for c in found][0] == (("add_item",), {"quantity": 2}, {"name": ("milk",)})
    assert found[1].result_contains == ('"value": 434',) and found[1].answer_contains == ("434",)


def test_the_readmes_example_is_a_case_file(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    block = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    cases = tmp_path / "cases.toml"
    cases.write_text("\n".join(line.strip() for line in block.splitlines()), encoding="utf-8")  # indented in a list
    (case,) = load_cases(cases)
    assert (case.tools, case.args, case.lang) == (("add_item",), {"quantity": 2}, "en")
