"""Slash commands: one table that ``/help``, completion and dispatch all read.

The table itself is in ``command_table``; importing this module registers every
command (the rarer ones live in ``commands_more``), in the order ``/help`` lists them.
"""

from __future__ import annotations

import json
from pathlib import Path

from repl.approval import MODES
from repl.command_table import REGISTRY, Command, command, dispatch, save_text, specs, suggest
from repl.cost import context_window_for
from repl.providers.base import ProviderError
from repl.timeline import format_turn
from repl.trace import read_records, turns
from tools.store import StoreError

__all__ = ["REGISTRY", "Command", "command", "dispatch", "specs", "suggest"]


# ---- the commands ------------------------------------------------------------


@command("help", help="List the commands and key bindings.")
def _help(session, args):
    rows = [(f"/{c.name} {c.args}".strip(), c.help) for c in REGISTRY.values() if c.alias_of is None]
    session.ui.table("commands", ["command", "what it does"], rows)
    session.ui.info("keys: Enter sends · Alt-Enter or Esc Enter inserts a newline · Ctrl-C stops a turn "
                    "or clears the line · Ctrl-C twice or Ctrl-D exits")


@command("exit", help="Leave glassloop.", aliases=("quit",))
def _exit(session, args):
    return "exit"


@command("reset", help="Start a new conversation (todos and notes stay).")
def _reset(session, args):
    session.history.reset()
    session.turns.clear()
    if session.journal:
        session.journal.sync(session.history)
    session.ui.info(f"new conversation; todos and notes are kept; {_clear_rules(session)}")


def _clear_rules(session) -> str:
    """Forget the session's approval rules ("always", "rest of step"); says which."""
    cleared = session.approver.clear_rules()
    return f"approval rules cleared (always: {', '.join(cleared)})" if cleared else "no approval rules to clear"


@command("undo", help="Revert the last turn's todo and note changes and remove the turn (or undo /compact).")
def _undo(session, args):
    if not session.turns:
        session.ui.info("nothing to undo")
        return
    if session.turns[-1].restore is not None:
        session.undo()
        session.ui.info(f"undid /compact: the conversation has its {len(session.history.turn_starts())} turns back")
        return
    try:
        reverted = session.undo()
    except StoreError as exc:
        session.ui.error(exc.message)
        return
    changed = ", ".join(f"{r.path} (only this turn's items: another process changed it too)" if r.merged
                        else str(r.path) for r in reverted)
    session.ui.info(f"removed the last turn from the conversation; restored: {changed or 'no files changed'}")


@command("trace", args="[N|all] [--json] [--save PATH]", help="Timeline of a turn: model calls, tool calls, approvals.")
def _trace(session, args):
    if session.trace is None:
        session.ui.error("no trace in this session ([trace] enabled = false, or its folder cannot be written)")
        return
    as_json, save, which = "--json" in args, None, "last"
    rest = [a for a in args if a != "--json"]
    if "--save" in rest:
        i = rest.index("--save")
        if i + 1 >= len(rest):
            session.ui.error("--save needs a path")
            return
        save = Path(rest[i + 1])
        del rest[i : i + 2]
    if rest:
        which = rest[0]
    grouped = turns(read_records(session.trace.writer.path))
    chosen = _pick_turns(grouped, which)
    if chosen is None:
        session.ui.error(f"no turn {which!r}; there are {len(grouped)}")
        return
    records = [r for g in chosen for r in g]
    lines = [json.dumps(r, ensure_ascii=False) for r in records] if as_json else [
        line for g in chosen for line in format_turn(g)]
    if save:
        if saved := save_text(session, save, "\n".join(lines) + "\n"):
            session.ui.info(f"saved {len(records)} records to {saved}")
    else:
        session.ui.lines(lines)


def _pick_turns(grouped, which):
    if not grouped:
        return []
    if which == "all":
        return grouped
    if which == "last":
        return grouped[-1:]
    try:
        number = int(which)
    except ValueError:
        return None
    chosen = [g for g in grouped if g[0].get("turn") == number]
    return chosen or None


@command("usage", help="Tokens and cost per turn and for the session, and the context in use.")
def _usage(session, args):
    rows = []
    for t in session.turns:
        u = t.finished.usage
        mark = "~" if u.estimated else ""
        compacted = t.restore is not None
        rows.append(("compact" if compacted else str(t.number), str(len(t.model_calls)),
                     f"{mark}{u.input_tokens}", str(u.cached_tokens), f"{mark}{u.output_tokens}",
                     t.cost.text(), "" if compacted else t.finished.stopped_by))
    u = session.usage
    rows.append(("all", str(sum(len(t.model_calls) for t in session.turns)), str(u.input_tokens),
                 str(u.cached_tokens), str(u.output_tokens), session.cost.text(), ""))
    session.ui.table("usage", ["turn", "calls", "in", "cached", "out", "cost", "stopped by"], rows)
    window = context_window_for(session.settings)
    if window and session.last_prompt_tokens:
        session.ui.info(f"context: {session.last_prompt_tokens:,} of {window:,} tokens "
                        f"({100 * session.last_prompt_tokens / window:.0f}%)")


@command("compact", args="[instructions]",
         help="Summarise the older turns into one message to free context (/undo restores them).")
def _compact(session, args):
    instructions = " ".join(args)
    session.ui.info("summarising the older turns…")
    try:
        done = session.compact(instructions)
    except ProviderError as exc:
        session.ui.error(f"/compact failed, nothing changed: {exc.message}")
        return
    except KeyboardInterrupt:
        session.ui.info("/compact cancelled, nothing changed")
        return
    finally:
        session.ui.stop_live()
    if done is None:
        session.ui.info("nothing to compact: the conversation has fewer than two turns")
        return
    turns = f"{done.turns} turn" + ("" if done.turns == 1 else "s")
    session.ui.info(f"compacted {turns} into a summary: ~{done.before:,} → ~{done.after:,} "
                    "tokens of context (estimated); /undo restores them")


@command("tools", args="[reload]", help="Each tool, where it comes from, its side effects and approval rule; "
         "reload runs your tool files again.", complete=lambda session: ["reload"])
def _tools(session, args):
    if args[:1] == ["reload"]:
        _reload_tools(session)
        return
    if args:
        session.ui.error("usage: /tools [reload]")
        return
    session.user_tools.wait(5.0)  # loading in the background since the start
    rows = []
    for name in session.registry.names():
        tool = session.registry.get(name)
        if tool is None:  # removed meanwhile (an MCP server went away)
            continue
        rule = "—"
        if tool.side_effects:
            rule = "always (this session)" if name in session.approver.always else session.approver.mode
            rule += " · every call" if tool.destructive and session.approver.mode == "ask" else ""
        rows.append((name, "yes" if tool.side_effects else "no", rule, _short_source(tool.source, session.user_tools.project_folder),
                     tool.description.split("\n")[0][:60]))
    session.ui.table("tools", ["tool", "side effects", "approval", "from", "description"], rows)


def _short_source(source: str, project: Path) -> str:
    """A user file's source as its name and line (``project`` when it is the project's)."""
    if not source.startswith("/"):
        return source  # built-in, package NAME, MCP server NAME
    path = Path(source.rsplit(":", 1)[0])
    return ("project " if path.parent == project else "") + Path(source).name


def _reload_tools(session):
    report = session.user_tools.reload()
    for line in report.problems:
        session.ui.error(line)
    files = f"{report.files} file" + ("" if report.files == 1 else "s")
    problems = f"{len(report.problems)} problem" + ("" if len(report.problems) == 1 else "s")
    session.ui.info(f"user tools reloaded: {report.tools} tools from {files} and installed packages, "
                    f"{problems}; the conversation is kept")


@command("todos", help="Show the todo list straight from the store (no model call).")
def _todos(session, args):
    result = session.registry.call("list_todos", {})
    if not result.get("ok"):
        session.ui.error(result["error"]["message"])
        return
    rows = [(t["id"], t["title"], t["status"], t["priority"], t.get("due") or "")
            for t in result.get("todos", [])]
    session.ui.table(f"todos · {session.settings.todos_file}", ["id", "title", "status", "priority", "due"], rows)


@command("model", args="[NAME]", help="Show or switch the model for the next turn.")
def _model(session, args):
    if not args:
        session.ui.info(f"model: {session.settings.active.model} (provider {session.settings.active.name})")
        return
    if session.switch(model=args[0]):
        session.ui.info(f"model is now {args[0]} for the next turn")


@command("provider", args="[NAME]", help="Show or switch the provider profile.",
         complete=lambda session: sorted(session.settings.providers))
def _provider(session, args):
    if not args:
        names = ", ".join(sorted(session.settings.providers))
        session.ui.info(f"provider: {session.settings.active.name} (profiles: {names})")
        return
    if args[0] not in session.settings.providers:
        session.ui.error(f"no provider profile {args[0]!r}; known: {', '.join(sorted(session.settings.providers))}")
        return
    if session.switch(provider=args[0]):
        session.ui.info(f"provider is now {args[0]} ({session.settings.active.model}) for the next turn")


@command("approve", args="[ask|auto|read-only]", help="Show or set the approval mode.",
         complete=lambda session: list(MODES))
def _approve(session, args):
    if not args:
        always = ", ".join(sorted(session.approver.always))
        session.ui.info(f"approval mode: {session.approver.mode}" + (f"; always: {always}" if always else ""))
        return
    if args[0] not in MODES:
        session.ui.error(f"approval mode must be one of {', '.join(MODES)}")
        return
    if session.switch(approval=args[0]):
        session.ui.info(f"approval mode is now {args[0]}; {_clear_rules(session)}")


# Registered after the commands above: the table keeps (and /help shows) this order.
from repl import commands_more  # noqa: E402, F401
