"""The rarer slash commands: saving the transcript, saved sessions, the system prompt, MCP."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from repl.command_table import command, save_text
from repl.journal import recent_sessions
from repl.redact import redactor_for


@command("save", args="[PATH]", help="Save the transcript as Markdown (.md) or JSON (.json).",
         means=("export", "write", "transcript"))
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


@command("sessions", help="Saved sessions, newest first: start, turns, model, first message.",
         means=("history", "conversations", "chats"))
def _sessions(session, args):
    found = recent_sessions(session.settings.data_dir / "sessions")
    if not found:
        session.ui.info("no saved session with a turn yet")
        return
    rows = []
    for info in found:
        first = " ".join(info.first.split())
        rows.append((info.id + (" (current)" if info.id == session.session_id else ""),
                     time.strftime("%m-%d %H:%M", time.localtime(info.started)), str(info.turns),
                     info.model, first if len(first) <= 60 else first[:59] + "…"))
    session.ui.table("sessions, newest first (/resume ID, or /resume to pick)",
                     ["id", "started", "turns", "model", "first message"], rows, keep=("id", "started"))


@command("resume", args="[ID|last]", help="Continue a saved session; without an argument, pick one from a list.",
         complete=lambda session: [s.id for s in recent_sessions(session.settings.data_dir / "sessions")],
         means=("continue", "load", "open"))
def _resume(session, args):
    key = args[0] if args else session.pick()
    if key is not None:
        session.resume(key)


@command("verbose", args="[on|off]", help="A usage line for every model call, not only in multi-step turns.",
         complete=lambda session: ["on", "off"])
def _verbose(session, args):
    if args and args[0] not in ("on", "off"):
        session.ui.error("usage: /verbose [on|off]")
        return
    on = session.ui.set_verbose(args[0] == "on" if args else None)
    session.ui.info("verbose: a usage line for every model call" if on
                    else "verbose off: one summary line for a one-call turn")


@command("reasoning", args="[on|off]", help="Show a reasoning model's thinking dimmed as it streams, or one line.",
         complete=lambda session: ["on", "off"], means=("thinking", "think"))
def _reasoning(session, args):
    if args and args[0] not in ("on", "off"):
        session.ui.error("usage: /reasoning [on|off]")
        return
    on = session.ui.set_reasoning(args[0] == "on" if args else None)
    session.ui.info("reasoning: shown dimmed as it streams" if on
                    else "reasoning hidden: one line per model call says how long it thought")


OSC52_MAX_CHARS = 100_000  # terminals refuse (or cut) longer clipboard requests


@command("copy", help="Copy the last answer to the clipboard (through the terminal: works over SSH).",
         means=("clipboard", "yank", "cp"))
def _copy(session, args):
    answer = next((m["content"] for m in reversed(session.history.messages)
                   if m["role"] == "assistant" and m.get("content")), "")
    if not answer:
        session.ui.info("nothing to copy: no answer yet")
        return
    if len(answer) > OSC52_MAX_CHARS:
        session.ui.error(f"the last answer has {len(answer):,} characters, too many for the terminal's "
                         "clipboard; /save PATH writes the transcript to a file")
        return
    if not session.ui.copy(answer):
        session.ui.error("cannot copy without a terminal; /save PATH writes the transcript to a file")
        return
    session.ui.info(f"copied the last answer ({len(answer):,} characters) through the terminal (OSC 52); "
                    "if the clipboard did not get it, the terminal does not allow OSC 52 (tmux: "
                    "set -g set-clipboard on): /save PATH writes it to a file")


@command("system", help="Show the system prompt.",
         means=("prompt", "instructions"))
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
