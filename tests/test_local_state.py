"""The embedded model's saved prompt state: the fixed prefix is evaluated once, ever.

The first test needs nothing but the code; the others run the real llama.cpp
server (the 'local' extra) on short prompts and compare its answers at
temperature 0, so they are about what the model is given, never its wording.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from repl.prompts import system_prompt
from repl.providers.textcalls import to_text_messages
from tools import build_tools
from tools.registry import Registry


def _wire_system(tmp_path: Path, today: dt.date, extra: str, mcp: bool) -> str:
    registry = Registry(build_tools(todos_path=tmp_path / "t.json", notes_path=tmp_path / "n.json",
                                    files_root=tmp_path, weather="sample"))
    tools = registry.schemas()
    if mcp:  # MCP tools are registered after the built-in ones
        tools.append({"name": "docs__search", "description": "Search the docs.",
                      "parameters": {"type": "object", "properties": {}}})
    history = [{"role": "system", "content": system_prompt(today, extra, compact=True)},
               {"role": "user", "content": "hi"}]
    return to_text_messages(history, tools)[0]["content"]


def test_sessions_on_other_days_share_the_instructions_and_the_built_in_tool_block(tmp_path):
    first = _wire_system(tmp_path, dt.date(2025, 5, 1), "", mcp=False)
    later = _wire_system(tmp_path, dt.date(2026, 1, 31), "Answer in French.", mcp=True)
    last_builtin = first.index("\n</tools>")  # the end of the last built-in tool's line
    assert later[:last_builtin] == first[:last_builtin]
    assert "Today is 2026-01-31." in later and "Answer in French." in later
    assert later.index("Today is") > later.index("</tool_call>")  # per-session text comes last
