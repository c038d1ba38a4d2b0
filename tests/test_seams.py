"""The session's typed seams: the UI protocol, the commands' context, the command table."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from repl.config.load import load_settings
from repl.session import commands
from repl.session.chat import ChatSession
from repl.session.commands.context import Command, CommandContext
from repl.session.seams import UI
from repl.ui.terminal import Terminal
from tests.support import StubUI, parse_source
from tools import store

ROOT = Path(__file__).resolve().parent.parent
COMMAND_MODULES = sorted((ROOT / "repl" / "session" / "commands").glob("*.py"))


def _members(protocol: type) -> set[str]:
    """A protocol's members, its bases' too (``UI`` extends the core's ``Surface``)."""
    names: set[str] = set()
    for part in protocol.__mro__:
        if part is not object and part.__name__ not in ("Protocol", "Generic"):
            names |= {n for n in vars(part) if not n.startswith("_")} | set(getattr(part, "__annotations__", {}))
    return names


def _parameters(fn: object) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p != "self"]  # type: ignore[arg-type]


def test_the_terminal_and_the_stub_implement_the_ui_protocol() -> None:
    members = _members(UI)
    assert {"read", "render", "info", "error", "table", "width"} <= members
    for ui in (Terminal, StubUI):
        missing = sorted(m for m in members if not hasattr(ui, m))
        assert missing == [], f"{ui.__name__} lacks {missing}"
        for name in members:
            expected = getattr(UI, name)
            if callable(expected):
                assert _parameters(getattr(ui, name)) == _parameters(expected), f"{ui.__name__}.{name}"


def _session(folder: Path) -> ChatSession:
    settings = load_settings({"base_url": "http://127.0.0.1:9/v1", "weather": "sample",
                              "todos_file": str(folder / "todos.json")}, cwd=folder, env={})
    return ChatSession(settings, StubUI(), interactive=False)


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for name in ("DATA", "STATE", "CONFIG"):
        monkeypatch.setenv(f"XDG_{name}_HOME", str(tmp_path / name.lower()))
    chat = _session(tmp_path)
    yield chat
    chat.close()


def test_the_session_is_a_command_context(session: ChatSession) -> None:
    for name in _members(CommandContext):
        assert hasattr(session, name), name
        expected = getattr(CommandContext, name, None)
        if callable(expected):
            assert _parameters(getattr(session, name)) == _parameters(expected), name


def _context_uses(path: Path) -> set[str]:
    """Every ``ctx.NAME`` read in a command module; handlers and helpers name their context ``ctx``."""
    tree = parse_source(path)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.Lambda)) and node.args.args:
            first = node.args.args[0].arg
            assert first != "session", f"{path.name}: a command takes the context (ctx), not the session"
    return {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id == "ctx"}


def test_commands_use_only_what_the_context_offers() -> None:
    allowed = _members(CommandContext)
    for path in COMMAND_MODULES:
        outside = _context_uses(path) - allowed
        assert outside == set(), f"{path.name} reaches past the command context: {sorted(outside)}"


def test_the_table_lists_every_command_once_and_nothing_registers_itself() -> None:
    table = commands.table()
    names = [c.name for c in table.commands]
    assert len(names) == len(set(names))
    defined = set()
    for path in COMMAND_MODULES:  # /help is made beside the table it reads
        name = "repl.session.commands" + ("" if path.stem == "__init__" else f".{path.stem}")
        module = __import__(name, fromlist=["_"])
        defined |= {value.name for value in vars(module).values() if isinstance(value, Command)}
    assert defined == set(names)
    assert commands.table() is table  # built once, by the call
    assert table.by_name["quit"] is table.by_name["exit"] and table.suggest("new") == "reset"


def test_each_session_is_told_only_of_the_store_writes_of_its_own_tool_calls(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The write observer is what a session passes its registry, not a global the last one set."""
    for name in ("DATA", "STATE", "CONFIG"):
        monkeypatch.setenv(f"XDG_{name}_HOME", str(tmp_path / name.lower()))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = _session(tmp_path / "a"), _session(tmp_path / "b")
    try:
        assert first.registry.call("add_todo", {"title": "first's"})["ok"] is True
        assert second.registry.call("add_todo", {"title": "second's"})["ok"] is True
        store.update_json(tmp_path / "a" / "todos.json", lambda data: (data, None), {})  # no tool call
        assert [w.path for w in first._writes] == [tmp_path / "a" / "todos.json"]
        assert [w.path for w in second._writes] == [tmp_path / "b" / "todos.json"]
        assert not hasattr(store, "set_write_observer")
    finally:
        first.close()
        second.close()
