"""The rarer slash commands: saving the transcript, saved sessions, the system prompt, MCP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repl.command_table import command, save_text
from repl.journal import list_sessions
from repl.redact import redactor_for


@command("save", args="[PATH]", help="Save the transcript as Markdown (.md) or JSON (.json).")
def _save(session, args):
    path = Path(args[0]) if args else Path(f"glassloop-{session.session_id}.md")
    if path.suffix == ".json":
        text = json.dumps(session.history.to_json(), ensure_ascii=False, indent=2)
    else:
        text = transcript_markdown(session.history.messages)
    if saved := save_text(session, path, redactor_for(session.settings)(text)):
        session.ui.info(f"saved the transcript to {saved}")


def transcript_markdown(messages: list[dict[str, Any]]) -> str:
    parts = []
    for m in messages:
        if m["role"] == "user":
            parts.append(f"## You\n\n{m['content']}")
        elif m["role"] == "assistant":
            calls = "".join(f"\n\n- call `{c['name']}` `{c['arguments']}`" for c in m.get("tool_calls", []))
            parts.append(f"## glassloop\n\n{m['content']}{calls}".rstrip())
        elif m["role"] == "tool":
            parts.append(f"> `{m['name']}` → `{m['content'][:500]}`")
    return "\n\n".join(parts) + "\n"


@command("sessions", help="List saved sessions (resume one with /resume ID).")
def _sessions(session, args):
    rows = []
    for path in list_sessions(session.settings.data_dir / "sessions")[-20:]:
        rows.append((path.stem, f"{path.stat().st_size / 1024:.1f} KiB",
                     "current" if path.stem == session.session_id else ""))
    session.ui.table("sessions", ["id", "size", ""], rows)


@command("resume", args="ID|last", help="Continue a saved session.",
         complete=lambda session: [p.stem for p in list_sessions(session.settings.data_dir / "sessions")])
def _resume(session, args):
    if not args:
        session.ui.error("usage: /resume ID (see /sessions)")
        return
    session.resume(args[0])


@command("system", help="Show the system prompt.")
def _system(session, args):
    session.ui.lines(session.history.system_prompt.splitlines())


def _mcp_completions(session) -> list[str]:
    return ["restart"] + [f"restart {name}" for name in (session.mcp.servers if session.mcp else {})]


@command("mcp", args="[restart NAME]", help="MCP servers: status and tools; restart one.", complete=_mcp_completions)
def _mcp(session, args):
    manager = session.mcp
    if manager is None:
        session.ui.info("no MCP servers configured (add [mcp.servers.NAME] to the config)")
        return
    if args and args[0] == "restart":
        if len(args) != 2 or args[1] not in manager.servers:
            session.ui.error(f"usage: /mcp restart NAME (servers: {', '.join(manager.servers)})")
            return
        session.ui.info(f"restarting MCP server {args[1]!r}…")
        try:
            manager.restart(args[1]).result(manager.connect_timeout_s + 10)
        except Exception as exc:  # noqa: BLE001 - report, never crash the REPL
            session.ui.error(f"restart of {args[1]!r} did not finish: {type(exc).__name__}")
            return
        state = manager.servers[args[1]]
        session.ui.info(f"MCP server {args[1]!r}: {state.status}, {len(state.tools)} tools"
                        + (f" ({state.error})" if state.error else ""))
        return
    if args:
        session.ui.error("usage: /mcp [restart NAME]")
        return
    manager.ping()
    rows = []
    for name, state in manager.servers.items():
        tools = ", ".join(t.name.split("__", 1)[-1] + ("" if t.side_effects else " (ro)") for t in state.tools)
        where = state.config.url or " ".join([state.config.command, *state.config.args])
        where = where if len(where) <= 48 else "…" + where[-47:]
        rows.append((name, state.status, where, tools or "—", state.error or ""))
    session.ui.table("MCP servers", ["server", "status", "command / url", "tools (ro = read-only)", "problem"], rows)
