"""Your own tools: Python files and installed packages become approved, traced, undoable tools.

The documented example (docs/TOOLS.md) is the file under test (both its English and its Chinese
docstring). Files are loaded in-process for the schema, store and error cases;
the real program (``ask``, the REPL in a pseudo-terminal) runs them against the
scripted server for approval, preview, undo, reload, trust and entry points.
"""

from __future__ import annotations

import json
import py_compile
import re
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pexpect
import pytest

from repl.loop.agent import Limits, run_turn
from repl.loop.approval import ApprovalRequest, Approver, UserChoice
from repl.loop.events import EventLog, ToolCallFinished
from repl.loop.history import History
from tests.fakeserver import call, text, tool_calls
from tests.support import glassloop, glassloop_here
from tests.terminal import ANSI, READY, Repl
from tools import store as store_module
from tools import undo
from tools.registry import Registry
from tools.user_api import MARK, set_store_folder, store_folder
from tools.user_api import tool as user_tool
from tools.user_loader import load_sources, read_sources, tool_files

ROOT = Path(__file__).resolve().parent.parent
BUILT_IN = {"add_todo": "built-in", "list_todos": "built-in"}


def readme_blocks() -> list[str]:
    """The Python blocks of the "Write your own tool" section (docs/TOOLS.md, linked from the README)."""
    readme = (ROOT / "docs" / "TOOLS.md").read_text(encoding="utf-8")
    section = readme.split("## Write your own tool", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


EXAMPLE = readme_blocks()[0]
CHINESE = EXAMPLE[: EXAMPLE.index("@tool(side_effects=True")] + readme_blocks()[1]
ADD_ITEM_LINE = EXAMPLE.splitlines().index("@tool(side_effects=True, preview=preview_add)") + 1


@pytest.fixture
def stores(tmp_path: Path):
    """Named stores in a temp folder for in-process tests."""
    before = store_folder()
    set_store_folder(tmp_path / "stores")
    yield tmp_path / "stores"
    set_store_folder(before)


def load(folder: Path, taken: dict[str, str] | None = None):
    return load_sources(read_sources(tool_files(folder)), BUILT_IN if taken is None else taken)


def write(folder: Path, name: str, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(source, encoding="utf-8")
    return path


@pytest.fixture
def user_env(home, tmp_path):
    """``home`` plus the user's tool folder holding the documented example; glassloop_tools importable."""
    env = {**home, "PYTHONPATH": str(ROOT)}
    write(tmp_path / "config" / "glassloop" / "tools", "shopping.py", EXAMPLE)
    return env


def shopping_items(env: dict[str, str]) -> list[dict]:
    path = Path(env["XDG_DATA_HOME"]) / "glassloop" / "stores" / "shopping.json"
    return json.loads(path.read_text(encoding="utf-8"))["items"]


# ---- in-process: schema, calls, store, errors -----------------------------------------


def test_readme_example_schema_call_preview_and_errors(tmp_path, stores):
    write(tmp_path, "shopping.py", EXAMPLE)
    loaded = load(tmp_path)
    assert loaded.problems == []
    registry = Registry(loaded.tools)
    add = registry.get("add_item")
    assert add.side_effects and add.description == "Add an item to the shopping list."
    assert add.parameters == {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "what to buy"},
                       "quantity": {"type": "integer", "description": "how many", "default": 1}},
        "required": ["name"], "additionalProperties": False}
    assert add.source == f"{tmp_path / 'shopping.py'}:{ADD_ITEM_LINE}"
    assert registry.get("add_item").preview({"name": "milk"}) == {"before": None, "after": {"name": "milk", "quantity": 1}}
    assert registry.call("add_item", {"name": "milk", "quantity": 2}) == {"ok": True, "id": "1", "name": "milk", "quantity": 2}
    assert registry.call("list_items", {})["items"] == [{"id": "1", "name": "milk", "quantity": 2}]
    bad = registry.call("add_item", {"name": "milk", "quantity": 0})
    assert bad["error"] == {"type": "tool_error", "message": "ValueError: quantity must be at least 1"}
    wrong = registry.call("add_item", {"name": 3})
    assert wrong["error"]["type"] == "invalid_arguments"
    assert not registry.get("list_items").side_effects


def test_chinese_docstring_reaches_the_schema(tmp_path, stores):
    write(tmp_path, "shopping.py", CHINESE)
    loaded = load(tmp_path)
    assert loaded.problems == []
    add = loaded.tools[0]
    assert add.description == "把一样东西加到购物清单上。"
    assert add.parameters["properties"]["name"]["description"] == "要买的东西"
    assert add.parameters["properties"]["quantity"]["description"] == "买几个"
    assert Registry(loaded.tools).call("add_item", {"name": "牛奶"})["name"] == "牛奶"


BROKEN = {
    "a_syntax.py": ("def broken(:\n    pass\n", r"a_syntax\.py:1: syntax error"),
    "b_import.py": ("import json\nimport no_such_module_for_glassloop\n",
                    r"b_import\.py:2: cannot load it: ModuleNotFoundError: No module named 'no_such_module_for_glassloop'"),
    "c_types.py": ("import datetime\nfrom glassloop_tools import tool\n\n\n@tool\n"
                   "def when(at: datetime.datetime) -> str:\n    '''When.'''\n    return ''\n",
                   r"c_types\.py:5: tool when: parameter 'at': unsupported type datetime"),
    "d_builtin.py": ("from glassloop_tools import tool\n\n@tool\ndef add_todo(title: str) -> str:\n"
                     "    '''Mine.'''\n    return title\n",
                     r"d_builtin\.py:3: tool add_todo: a built-in tool has this name"),
    "e_dup.py": ("from glassloop_tools import tool\n\n@tool\ndef ping() -> str:\n    '''Again.'''\n"
                 "    return 'e'\n",
                 r"e_dup\.py:3: tool ping: the name is taken by .*0ok\.py:3"),
    "f_name.py": ("from glassloop_tools import tool\n\n@tool(name='two words')\ndef f() -> str:\n"
                  "    '''Bad name.'''\n    return ''\n",
                  r"f_name\.py:3: tool two words: the name may only hold"),
    "g_async.py": ("from glassloop_tools import tool\n\n\n@tool\nasync def fetch(url: str) -> str:\n"
                   "    '''Fetch.'''\n    return url\n",
                   r"g_async\.py:4: tool fetch: an async function cannot be a tool"),
    "h_examples.py": ("from glassloop_tools import tool\n\n@tool(examples=['rates', 3])\ndef rate() -> str:\n"
                      "    '''Rate.'''\n    return ''\n",
                      r"h_examples\.py:3: tool rate: examples must be a tuple of strings"),
}
GOOD = ("from glassloop_tools import tool\n\n@tool\ndef ping() -> str:\n    '''Answer pong.'''\n"
        "    return 'pong'\n\n\n@tool\ndef when(at: str) -> str:\n    '''Echo.'''\n    return at\n")


def test_each_broken_file_is_one_line_and_the_rest_loads(tmp_path):
    for name, (source, _) in BROKEN.items():
        write(tmp_path, name, source)
    write(tmp_path, "0ok.py", GOOD)  # loads first (files go by name)
    loaded = load(tmp_path)
    assert sorted(t.name for t in loaded.tools) == ["ping", "when"]
    assert all(t.source.startswith(str(tmp_path / "0ok.py")) for t in loaded.tools)
    assert len(loaded.problems) == len(BROKEN)
    for line, (name, (_, pattern)) in zip(loaded.problems, sorted(BROKEN.items()), strict=True):
        assert "\n" not in line and line.startswith(str(tmp_path / name)), line
        assert re.search(pattern, line), line
    assert Registry(loaded.tools).call("ping", {}) == {"ok": True, "result": "pong"}


def test_options_preview_by_name_timeout_and_tool_error(tmp_path, stores):
    write(tmp_path, "opts.py", '''
from glassloop_tools import ToolError, store, tool

jars = store("jars")


@tool(side_effects=True, destructive=True, timeout_s=2.5, preview="what_changes", name="empty_jar",
      description="Empty a jar for good.")
def empty(jar_id: str, note: str | None = None) -> dict:
    """Ignored docstring."""
    if jar_id == "missing":
        raise ToolError("not_found", "no such jar")
    return jars.remove(jar_id)


def what_changes(jar_id, note):
    return ({"id": jar_id}, None)
''')
    loaded = load(tmp_path)
    assert loaded.problems == []
    tool = loaded.tools[0]
    assert (tool.name, tool.description, tool.timeout_s, tool.destructive, tool.side_effects) == \
        ("empty_jar", "Empty a jar for good.", 2.5, True, True)
    registry = Registry(loaded.tools)
    assert registry.get("empty_jar").preview({"jar_id": "3"}) == {"before": {"id": "3"}, "after": None}
    assert registry.call("empty_jar", {"jar_id": "missing"})["error"] == {"type": "not_found", "message": "no such jar"}
    assert registry.call("empty_jar", {"jar_id": "9"})["error"]["type"] == "not_found"


def test_store_writes_are_reported_and_revert_byte_for_byte(stores):
    from glassloop_tools import store

    shop = store("shop")
    shop.add({"name": "tea"})
    before = shop.path.read_bytes()
    writes: list[store_module.StoreWrite] = []
    with store_module.reporting(writes.append):
        shop.add({"name": "milk", "note": "低脂"})
        shop.update(lambda items: [{**i, "done": True} for i in items])
        assert shop.remove("1")["name"] == "tea"
        shop.update(lambda items: None)  # no change: nothing written
    assert len(writes) == 3 and shop.items() == [{"id": "2", "name": "milk", "note": "低脂", "done": True}]
    undo.revert(writes)
    assert shop.path.read_bytes() == before
    with pytest.raises(ValueError):
        store("../escape")


# ---- a preview: bounded, and made only for a person who sees it -------------------------------


class Asked:
    """The person at the approval dialog: says yes, after asking for the edited arguments' preview."""

    def __init__(self) -> None:
        self.previews: list[Any] = []

    def ask(self, request: ApprovalRequest, validate: Any) -> UserChoice:
        assert request.preview_for is not None
        self.previews += [request.preview, request.preview_for({"name": "tea"})]
        return UserChoice("yes")


def slow_preview_tool(previewed: list[str], release: threading.Event, timeout_s: float | None = None) -> Registry:
    """A user tool whose preview records each call and then waits for ``release``."""

    def preview_add(name: str) -> dict:
        previewed.append(name)
        release.wait(60)
        return {"before": None, "after": {"name": name}}

    @user_tool(side_effects=True, preview=preview_add, timeout_s=timeout_s)
    def add_thing(name: str) -> dict:
        """Add a thing.

        Args:
            name: the thing
        """
        return {"added": name}

    declared = getattr(add_thing, MARK)
    assert declared.tool is not None, declared.problem
    return Registry([declared.tool])


@pytest.mark.parametrize("mode", ["read-only", "auto", "ask"])
def test_a_preview_nobody_sees_is_not_made(fake_server, quiet_provider, mode):
    """read-only and ask without a terminal deny, auto allows, all without asking: no preview."""
    previewed: list[str] = []
    release = threading.Event()
    release.set()
    fake_server.script(tool_calls(call("add_thing", {"name": "milk"})), text("done"))
    log = EventLog()
    finished = run_turn(History("test"), "add milk", provider=quiet_provider,
                        registry=slow_preview_tool(previewed, release), approver=Approver(mode),
                        limits=Limits(), emit=log)
    assert finished.stopped_by == "answer" and previewed == []
    [result] = log.of(ToolCallFinished)
    assert result.ok is (mode == "auto")


def test_a_slow_preview_times_out_with_the_tool_and_the_person_is_still_asked(fake_server, quiet_provider):
    previewed: list[str] = []
    release = threading.Event()
    person = Asked()
    fake_server.script(tool_calls(call("add_thing", {"name": "milk"})), text("done"))
    log = EventLog()
    try:
        finished = run_turn(History("test"), "add milk", provider=quiet_provider,
                            registry=slow_preview_tool(previewed, release, timeout_s=0.2),
                            approver=Approver("ask", person), limits=Limits(), emit=log)
    finally:
        release.set()
    assert person.previews == [{"unavailable": "timed out"}] * 2
    assert finished.stopped_by == "answer" and log.of(ToolCallFinished)[0].result == {"ok": True, "added": "milk"}


def test_a_slow_preview_ends_with_the_turns_time(fake_server, quiet_provider):
    """The preview gets the turn's time left, and what it used counts against the turn."""
    previewed: list[str] = []
    release = threading.Event()
    person = Asked()
    fake_server.script(tool_calls(call("add_thing", {"name": "milk"})), text("out of time"))
    log = EventLog()
    try:
        finished = run_turn(History("test"), "add milk", provider=quiet_provider,
                            registry=slow_preview_tool(previewed, release),
                            approver=Approver("ask", person), limits=Limits(turn_timeout_s=1.0), emit=log)
    finally:
        release.set()
    assert person.previews[0] == {"unavailable": "timed out"}
    assert finished.stopped_by == "timeout"
    [result] = log.of(ToolCallFinished)
    assert result.error_type == "timeout" and "was not run" in result.result["error"]["message"]


# ---- the embedded model's advice --------------------------------------------------------

FX_TOOL = '''
from glassloop_tools import tool


@tool(examples=("exchange rates", "汇率", "how many euros is 100 dollars"))
def fx_rate(base: str, quote: str) -> dict:
    """The exchange rate between two currencies."""
    return {"rate": 0.9}
'''


def test_a_user_tools_examples_reach_the_embedded_models_advice(fake_server, tmp_path, monkeypatch):
    """The session on the embedded model (its server stood in for by the fake one) starts with
    the built-in tools' advice; its first request, once the user's tools are loaded, advises
    the user's tool too, right after the tool block, where the stored prompt has it as well."""
    from repl.config.load import load_settings
    from repl.session import runtime
    from repl.session.chat import ChatSession
    from tests.support import StubUI

    for name in ("DATA", "STATE", "CONFIG"):
        monkeypatch.setenv(f"XDG_{name}_HOME", str(tmp_path / name.lower()))
    write(tmp_path / "config" / "glassloop" / "tools", "fx.py", FX_TOOL)
    server = SimpleNamespace(base_url=fake_server.base_url, api_key="", notice=None, stop=lambda: None)
    monkeypatch.setattr(runtime, "_start_local", lambda *args: server)
    settings = load_settings({"provider": "local", "approval": "auto", "weather": "sample",
                              "todos_file": str(tmp_path / "todos.json")}, cwd=tmp_path, env={})
    fake_server.script(text("1 USD is 0.9 EUR."))
    session = ChatSession(settings, StubUI(), interactive=False)
    try:
        assert "fx_rate" not in session.history.system_prompt.text  # made before the user's tools load
        session.start_user_tools()
        assert session.run_turn("汇率是多少？").stopped_by == "answer"
    finally:
        session.close()
    body = fake_server.chat_requests()[0].body
    system = body["messages"][0]["content"]
    clause = "for exchange rates (汇率, how many euros is 100 dollars) call fx_rate"
    assert f"call get_weather; {clause}; for notes (笔记) the note tools;" in system
    assert system.index("</tool_call>\n\nWhen to call a tool: for todos") < system.index(clause)
    assert clause in session.history.system_prompt.text and "grammar" in body  # the embedded dialect


# ---- the real program: ask, trust, packages ----------------------------------------------


def test_ask_runs_read_only_and_side_effecting_user_tools(fake_server, user_env):
    fake_server.script(tool_calls(call("add_item", {"name": "milk", "quantity": 2})), text("Not allowed."),
                       tool_calls(call("add_item", {"name": "milk", "quantity": 2})),
                       tool_calls(call("list_items", {})), text("Milk is on the list."))
    denied = glassloop_here("ask", "add milk", "--json", "--base-url", fake_server.base_url, env=user_env)
    assert denied.returncode == 0, denied.stderr
    results = [e for e in json.loads(denied.stdout)["trace"] if e["type"] == "tool_call_finished"]
    assert results[0]["result"]["error"]["type"] == "denied"
    result = glassloop_here("ask", "add milk", "--yes", "--base-url", fake_server.base_url, env=user_env)
    assert result.returncode == 0, result.stderr
    assert "step 1 done add_item ok" in result.stderr and "step 2 done list_items ok" in result.stderr
    assert result.stdout.strip() == "Milk is on the list."
    assert shopping_items(user_env) == [{"id": "1", "name": "milk", "quantity": 2}]
    sent = {t["function"]["name"]: t["function"] for t in fake_server.chat_requests()[-1].body["tools"]}
    assert sent["add_item"]["parameters"]["properties"]["name"]["description"] == "what to buy"
    assert "Traceback" not in result.stderr + denied.stderr


def test_ask_with_tools_file_and_chinese_docstring(fake_server, home, tmp_path):
    env = {**home, "PYTHONPATH": str(ROOT)}
    path = write(tmp_path / "elsewhere", "购物.py", CHINESE)
    fake_server.script(tool_calls(call("add_item", {"name": "牛奶"})), text("好的。"))
    result = glassloop_here("ask", "买牛奶", "--yes", "--tools", str(path), "--base-url", fake_server.base_url,
                            env=env)
    assert result.returncode == 0, result.stderr
    assert shopping_items(env) == [{"id": "1", "name": "牛奶", "quantity": 1}]
    sent = {t["function"]["name"]: t["function"] for t in fake_server.chat_requests()[0].body["tools"]}
    assert sent["add_item"]["description"] == "把一样东西加到购物清单上。"
    assert sent["add_item"]["parameters"]["properties"]["quantity"]["description"] == "买几个"
    missing = glassloop_here("ask", "hi", "--tools", str(tmp_path / "nope.py"), "--base-url", fake_server.base_url,
                             env=env)
    assert missing.returncode == 2 and missing.stderr.strip() == f"error: --tools {tmp_path / 'nope.py'}: no such file"


def make_package(site: Path) -> None:
    """An installed distribution as pip leaves it: a module and a dist-info with entry points."""
    package = site / "glassloop_tool_demo"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "from glassloop_tools import tool\n\n\n@tool\ndef shout(word: str) -> str:\n"
        "    '''Say a word loudly.\n\n    Args:\n        word: the word\n    '''\n    return word.upper() + '!'\n",
        encoding="utf-8")
    (site / "glassloop_tool_broken.py").write_text("import json\nraise RuntimeError('half installed')\n",
                                                   encoding="utf-8")
    info = site / "glassloop_tool_demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: glassloop-tool-demo\nVersion: 1.0\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[glassloop.tools]\ndemo = glassloop_tool_demo\nbroken = glassloop_tool_broken\n", encoding="utf-8")


def test_entry_point_package_tools(fake_server, home, tmp_path):
    site = tmp_path / "site"
    make_package(site)
    env = {**home, "PYTHONPATH": f"{site}:{ROOT}"}
    fake_server.script(tool_calls(call("shout", {"word": "hello"})), text("HELLO!"))
    result = glassloop("ask", "shout hello", "--json", "--base-url", fake_server.base_url, env=env)
    assert result.returncode == 0, result.stderr
    finished = [e for e in json.loads(result.stdout)["trace"] if e["type"] == "tool_call_finished"]
    assert finished[0]["result"] == {"ok": True, "result": "HELLO!"}
    broken = [line for line in result.stderr.splitlines() if "broken" in line]
    assert len(broken) == 1 and "glassloop_tool_broken.py:2: package glassloop-tool-demo: entry point broken" in broken[0]
    assert "RuntimeError: half installed" in broken[0] and "Traceback" not in result.stderr


PROJECT_TOOL = ("from glassloop_tools import tool\n\n\n@tool\ndef project_answer() -> str:\n"
                "    '''The project's answer.'''\n    return '42'\n")


def ask_project(fake_server, env, cwd):
    fake_server.script(tool_calls(call("project_answer", {})), text("done"))
    result = glassloop_here("ask", "answer", "--json", "--base-url", fake_server.base_url, env=env, cwd=cwd)
    assert result.returncode == 0, result.stderr
    finished = [e for e in json.loads(result.stdout)["trace"] if e["type"] == "tool_call_finished"]
    return finished[0]["result"], result.stderr


def test_project_tools_run_only_when_trusted(fake_server, home, tmp_path):
    env = {**home, "PYTHONPATH": str(ROOT)}
    project = tmp_path / "cloned"
    write(project / ".glassloop" / "tools", "answer.py", PROJECT_TOOL)
    result, stderr = ask_project(fake_server, env, project)
    assert result["error"]["type"] == "unknown_tool"
    assert ".glassloop/tools is not trusted: its 1 tool file (answer.py) was not loaded" in stderr
    trusted = glassloop_here("trust", env=env, cwd=project)
    assert trusted.returncode == 0 and "trusted: " in trusted.stdout and "tool files: answer.py" in trusted.stdout
    assert ask_project(fake_server, env, project)[0] == {"ok": True, "result": "42"}


def loaded_names(project: Path) -> list[str]:
    """The user tools a session in ``project`` registers (the real loading, in-process)."""
    from repl.config.load import load_settings
    from repl.session.runtime import build_registry
    from repl.session.user_tools import UserTools

    settings = load_settings({"provider": "openai"}, cwd=project)
    registry = build_registry(settings)
    UserTools(settings, registry, lambda line: None).load()
    return [n for n in registry.names() if registry.get(n).source != "built-in"]


def test_project_trust_binds_to_content_and_only_the_user_may_trust_all(home, tmp_path, monkeypatch):
    for key, value in home.items():
        monkeypatch.setenv(key, value)
    project, user_config = tmp_path / "cloned", tmp_path / "config" / "glassloop"
    tool_file = write(project / ".glassloop" / "tools", "answer.py", PROJECT_TOOL)
    assert loaded_names(project) == []
    assert glassloop_here("trust", env=home, cwd=project).returncode == 0
    assert loaded_names(project) == ["project_answer"]
    revoked = glassloop_here("trust", "--revoke", env=home, cwd=project)
    assert revoked.stdout.strip() == f"no longer trusted: {project / '.glassloop' / 'tools'}"
    assert loaded_names(project) == []
    assert glassloop_here("trust", env=home, cwd=project).returncode == 0
    tool_file.write_text(PROJECT_TOOL.replace("'42'", "'43'"), encoding="utf-8")  # changed: untrusted again
    assert loaded_names(project) == []
    write(project / ".glassloop" / "tools", "more.py", "")  # so is a new file next to a trusted one
    assert loaded_names(project) == []
    write(project, "glassloop.toml", "[tools]\ntrust_project_tools = true\n")  # the project cannot say so
    assert loaded_names(project) == []
    write(user_config, "config.toml", "[tools]\ntrust_project_tools = true\n")  # the user can
    assert loaded_names(project) == ["project_answer"]


HELPED_TOOL = ("import sys\nfrom pathlib import Path\n\nsys.path.insert(0, str(Path(__file__).parent))\n"
               "from _answer_helper import ANSWER  # noqa: E402\nfrom answer_lib.deep import DEEP  # noqa: E402\n"
               "from glassloop_tools import tool  # noqa: E402\n\n\n@tool\ndef helped_answer() -> str:\n"
               "    '''The project's answer, from its helper.'''\n    return ANSWER + DEEP\n")


def test_project_trust_covers_the_files_its_tools_import(home, tmp_path, monkeypatch):
    """Trust binds to every file of the folder Python can import (``_helper.py``, packages at any
    depth, compiled extensions), not only the tool files: an edit to any of them asks again."""
    for key, value in home.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the tool file puts its folder on it
    for name in ("_answer_helper", "answer_lib", "answer_lib.deep"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    project = tmp_path / "cloned"
    folder = project / ".glassloop" / "tools"
    write(folder, "answer.py", HELPED_TOOL)
    helper = write(folder, "_answer_helper.py", "ANSWER = '4'\n")
    deep = write(folder / "answer_lib", "deep.py", "DEEP = '2'\n")
    write(folder / "answer_lib", "__init__.py", "")
    assert glassloop_here("trust", env=home, cwd=project).returncode == 0
    assert loaded_names(project) == ["helped_answer"]
    py_compile.compile(str(helper), doraise=True)  # the bytecode Python writes on import: still trusted
    assert loaded_names(project) == ["helped_answer"]
    for edit in (lambda: helper.write_text("ANSWER = 'rm -rf'\n", encoding="utf-8"),
                 lambda: deep.write_text("DEEP = 'curl evil'\n", encoding="utf-8"),
                 lambda: write(folder / "answer_lib", "fast.cpython-311-x86_64-linux-gnu.so", "\x7fELF")):
        edit()
        assert loaded_names(project) == [], "an edit beside the tool files kept the trust"
        assert glassloop_here("trust", env=home, cwd=project).returncode == 0
        assert loaded_names(project) == ["helped_answer"]


# ---- the REPL in a pseudo-terminal ---------------------------------------------------------


def test_repl_approval_preview_undo_tools_and_reload(fake_server, user_env, tmp_path):
    tools_dir = tmp_path / "config" / "glassloop" / "tools"
    store_file = Path(user_env["XDG_DATA_HOME"]) / "glassloop" / "stores" / "shopping.json"
    write(store_file.parent, store_file.name, '{"version": 1, "items": [{"id": "7", "name": "tea"}]}')
    before = store_file.read_bytes()
    fake_server.script(tool_calls(call("add_item", {"name": "oat milk", "quantity": 2})), text("Added it."),
                       tool_calls(call("count_items", {})), text("Counted."))
    repl = Repl(user_env, fake_server.base_url)
    repl.say("put oat milk on the list")
    repl.expect("Allow")
    repl.key("y")
    repl.expect("Added it")
    repl.ready()
    screen = repl.screen()
    assert "add_item — needs approval" in screen and "+ new item" in screen  # the tool's preview
    assert [i["name"] for i in json.loads(store_file.read_text(encoding="utf-8"))["items"]] == ["tea", "oat milk"]
    repl.say("/tools")
    repl.expect("calculator")
    repl.ready()
    screen = repl.screen()
    assert f"shopping.py:{ADD_ITEM_LINE}" in screen and "built-in" in screen
    write(tools_dir, "count.py", "from glassloop_tools import store, tool\n\n\n@tool\ndef count_items() -> int:\n"
          "    '''How many items are on the list.'''\n    return len(store('shopping').items())\n")
    repl.say("/tools reload")
    repl.expect("user tools reloaded: 3 tools from 2 files")
    repl.ready()
    repl.say("how many?")
    repl.expect("Counted")
    repl.ready()
    sent = fake_server.chat_requests()[-1].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["put oat milk on the list", "how many?"]
    assert json.loads(sent[-1]["content"]) == {"ok": True, "result": 2}
    for _ in range(2):  # the counting turn, then the adding one: its store write is taken back
        repl.say("/undo")
        repl.expect("removed the last turn")
        repl.ready()
    assert store_file.read_bytes() == before
    repl.close()
    assert "Traceback" not in repl.screen()


def test_project_tools_trust_question_at_start_is_remembered(fake_server, home, tmp_path):
    env = {**home, "PYTHONPATH": str(ROOT), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}
    project = tmp_path / "cloned"
    write(project / ".glassloop" / "tools", "answer.py", PROJECT_TOOL)

    def start() -> pexpect.spawn:
        return pexpect.spawn(sys.executable, ["-m", "repl.cli", "--base-url", fake_server.base_url],
                             env=env, cwd=str(project), encoding="utf-8", dimensions=(40, 120), timeout=20)

    child = start()
    child.expect_exact("Trust these tool files?")
    assert "answer.py" in child.before
    child.sendline("y")
    child.expect_exact(READY)
    child.send("/tools\r")
    child.expect("project_answer")
    child.expect_exact(READY)
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    child = start()  # the same content: no question
    index = child.expect_exact([READY, "Trust these tool files?"])
    shown = ANSI.sub("", child.before)
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    assert index == 0, shown


def test_a_user_tool_without_examples_is_advised_by_its_description(tmp_path: Path) -> None:
    """A user's tool written without ``examples``: its docstring's first sentence stands for
    them, as an MCP tool's description does, so the embedded model is advised to call it."""
    from repl.embedded.dialect import advice

    path = write(tmp_path, "shop.py", '''
from glassloop_tools import tool


@tool(side_effects=True)
def add_item(name: str, quantity: int = 1) -> dict:
    """Put something on the shopping list. Quantities are whole numbers."""
    return {"name": name}
''')
    loaded = load_sources(read_sources([path]), {})
    assert not loaded.problems
    assert "for put something on the shopping list call add_item. " in advice(loaded.tools)
