"""Slash commands: one table that ``/help``, completion and dispatch all read.

The table itself is in ``command_table``; importing this module registers every
command (the rarer ones live in ``commands_more``), in the order ``/help`` lists them.
"""

from __future__ import annotations

import json
from pathlib import Path

from repl.approval import MODES
from repl.command_table import (
    REGISTRY,
    Command,
    aliases_of,
    command,
    dispatch,
    save_text,
    specs,
    suggest,
)
from repl.cost import context_window_for
from repl.providers.base import ProviderError
from repl.timeline import (
    draw_turn,
    format_turn,
    missing_raw,
    pick_turns,
    raw_calls,
    raw_sections,
    usage_bars,
)
from repl.trace import read_records, read_wire, turns, wire_path
from repl.ui.escape import cut_words, one_line
from tools.store import Reverted, StoreError

__all__ = ["REGISTRY", "Command", "command", "dispatch", "specs", "suggest"]


# ---- the commands ------------------------------------------------------------


@command("help", help="List the commands and key bindings.", means=("commands", "?", "h", "man"))
def _help(session, args):
    rows = [(", ".join(f"/{n}" for n in [c.name, *aliases_of(c.name)]) + f" {c.args}".rstrip(), c.help)
            for c in REGISTRY.values() if c.alias_of is None]
    rows.append(("!COMMAND", "Run a shell command yourself (never the model), see its output, and "
                 "choose to add it to your next message."))
    session.ui.table("commands", ["command", "what it does"], rows)
    session.ui.info("keys: Enter sends · Alt-Enter or Esc Enter inserts a newline · Esc Esc edits the last "
                    "message (/edit) · Tab completes commands and models · Ctrl-C or Esc stops a turn "
                    "or clears the line · Ctrl-C twice or Ctrl-D exits")


@command("exit", help="Leave glassloop.", aliases=("quit",), means=("bye", "q", "logout", "close"))
def _exit(session, args):
    return "exit"


@command("reset", help="Start a new conversation (todos and notes stay).", aliases=("clear",),
         means=("new", "restart", "fresh", "cls"))
def _reset(session, args):
    old = session.new_session()
    session.ui.info(f"new conversation (session {session.session_id}); todos and notes are kept; "
                    f"{_clear_rules(session)}")
    session.ui.info(f"the previous session is kept: /resume {old}" if old else "the previous session had no turn")


def _clear_rules(session) -> str:
    """Forget the session's approval rules ("always", "rest of step"); says which."""
    cleared = session.approver.clear_rules()
    return f"approval rules cleared (always: {', '.join(cleared)})" if cleared else "no approval rules to clear"


@command("undo", help="Revert the last turn's todo and note changes and remove the turn (or undo /compact).",
         means=("revert", "rewind", "back", "rollback"))
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
    session.ui.info(f"removed the last turn from the conversation; {undone_text(reverted)}")


@command("edit", help="Put your last message back in the prompt to change and resend; its turn is "
         "undone first, as by /undo (also Esc Esc at an empty prompt).", means=("retry", "amend", "redo", "again"))
def _edit(session, args):
    if not session.turns:
        session.ui.info("nothing to edit: no turn yet")
        return
    if session.turns[-1].restore is not None:
        session.ui.error("the last change was /compact: /undo it first, then /edit")
        return
    if not session.interactive:
        session.ui.error("/edit needs a terminal to edit in")
        return
    starts = session.history.turn_starts()
    text = session.history.messages[starts[-1]]["content"] if starts else ""
    try:
        reverted = session.undo()
    except StoreError as exc:
        session.ui.error(exc.message)
        return
    session.ui.prefill(text)
    session.ui.info(f"removed the last turn from the conversation; {undone_text(reverted)}; "
                    "edit your message and press Enter to send it again")


def undone_text(reverted: list[Reverted]) -> str:
    """What an undo did, item by item: "removed todo-007 'call mom'; restored note-003 'x'"."""
    done = []
    for r in reverted:
        if not r.items:
            done.append(f"restored {r.path.name}")
        for item in r.items:
            verb = "removed" if item.before is None else "restored" if item.after is None else "put back"
            shown = item.before or item.after or {}
            label = next((shown[k] for k in ("title", "text", "name") if isinstance(shown.get(k), str)), "")
            fields = ""
            if item.before is not None and item.after is not None:
                keys = [k for k in {**item.before, **item.after} if item.before.get(k) != item.after.get(k)]
                fields = f" ({', '.join(keys)})"
            done.append(f"{verb} {item.id}" + (f" '{one_line(label, 40)}'" if label else "") + fields)
        if r.merged:
            done.append(f"{r.path}: only this turn's items (another process changed it too)")
    return "; ".join(done) if done else "it changed no todos or notes"


TRACE_FLAGS = ("--raw", "--events", "--json")


@command("trace", args="[N|all] [--raw] [--events] [--json] [--save PATH]",
         help="A turn as a timeline: one bar per model call and tool call on one time axis; --raw: the "
         "exact requests and responses; --events: every event; --json: the records; --save: to a file.",
         complete=lambda session: ["all", *TRACE_FLAGS, "--save"], means=("log", "timeline", "debug", "events"))
def _trace(session, args):
    if session.trace is None:
        session.ui.error("no trace in this session ([trace] enabled = false, or its folder cannot be written)")
        return
    flags, save, which = {a for a in args if a in TRACE_FLAGS}, None, "last"
    rest = [a for a in args if a not in TRACE_FLAGS]
    if "--save" in rest:
        i = rest.index("--save")
        if i + 1 >= len(rest):
            session.ui.error("--save needs a path")
            return
        save = Path(rest[i + 1])
        del rest[i : i + 2]
    if [a for a in rest if a.startswith("--")] or len(rest) > 1:
        session.ui.error(f"usage: /trace {REGISTRY['trace'].args}")
        return
    if rest:
        which = rest[0]
    path = session.trace.writer.path
    grouped = turns(read_records(path)) if path.exists() else []  # made by the session's first turn
    try:
        chosen = pick_turns(grouped, which)
    except ValueError:
        chosen = None
    if chosen is None:
        session.ui.error(f"no turn {which!r}; there are {len(grouped)}")
        return
    if "--raw" in flags:
        _trace_raw(session, chosen, save)
        return
    records = [r for g in chosen for r in g]
    if "--json" in flags:
        lines = [json.dumps(r, ensure_ascii=False) for r in records]
    elif "--events" in flags:
        lines = [line for g in chosen for line in format_turn(g)]
    else:
        width = min(session.ui.width, 120)
        lines = [line for n, g in enumerate(chosen) for line in ([""] if n else []) + draw_turn(g, width)]
    if save:
        if saved := save_text(session, save, "\n".join(lines) + "\n"):
            session.ui.info(f"saved {len(records)} records to {saved}")
    else:
        session.ui.lines(lines)


def _trace_raw(session, chosen, save: Path | None) -> None:
    """The chosen turns' model calls as sent and as answered (``--save``: as JSON)."""
    wire, dropped = read_wire(wire_path(session.trace.writer.path))
    calls, missing = raw_calls(chosen, wire)
    if save:
        text = json.dumps(calls, ensure_ascii=False, indent=2) + "\n"
        if saved := save_text(session, save, text):
            session.ui.info(f"saved {len(calls)} model call{'' if len(calls) == 1 else 's'} to {saved}")
    else:
        for heading, value in raw_sections(calls):
            session.ui.info(heading)
            if value is None:
                session.ui.info("(none: the call failed or was stopped before it was answered)")
            else:
                session.ui.json(value)
    if missing:
        off = session.trace.wire_error or ("" if session.trace.wire else "[trace] raw = false")
        session.ui.info(missing_raw(missing, dropped, off))
    elif not calls:
        session.ui.info("no model call in this turn")


@command("usage", help="Tokens and cost per turn and for the session, and the context in use.",
         aliases=("cost",), means=("tokens", "stats", "price", "spend", "billing", "context", "status"))
def _usage(session, args):
    rows = []
    for t in session.ledger:  # undone turns stay: their tokens were spent
        u = t.finished.usage
        mark = "~" if u.estimated else ""
        compacted = t.restore is not None
        stopped = "" if compacted else t.finished.stopped_by
        rows.append(("compact" if compacted else str(t.number), str(t.calls),
                     f"{mark}{u.input_tokens}", str(u.cached_tokens), f"{mark}{u.output_tokens}",
                     t.cost.text(), f"undone ({stopped})" if t.undone and stopped else "undone" if t.undone else stopped))
    u = session.usage
    rows.append(("all", str(sum(t.calls for t in session.ledger)), str(u.input_tokens),
                 str(u.cached_tokens), str(u.output_tokens), session.cost.text(), ""))
    session.ui.table("usage", ["turn", "calls", "in", "cached", "out", "cost", "stopped by"], rows)
    bars = [("c" if t.restore is not None else str(t.number), t.finished.usage.input_tokens,
             t.finished.usage.cached_tokens, t.finished.usage.output_tokens, "undone" if t.undone else "")
            for t in session.ledger]
    if bars:
        session.ui.lines(usage_bars(bars))
        session.ui.info(f"session: {u.total:,} tokens ({u.input_tokens:,} in, {u.cached_tokens:,} of them cached; "
                        f"{u.output_tokens:,} out) · {session.cost.text()}")
    window = context_window_for(session.settings)
    if window and session.last_prompt_tokens:
        session.ui.info(f"context: {session.last_prompt_tokens:,} of {window:,} tokens "
                        f"({100 * session.last_prompt_tokens / window:.0f}%)")


@command("compact", args="[instructions]",
         help="Summarise the older turns into one message to free context (/undo restores them).",
         means=("summarize", "summarise", "shrink", "condense"))
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
                     cut_words(one_line(tool.description, 200), 90)))
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


TABLE_ROWS = 200


def _aligned(rows: list[tuple[str, ...]]) -> list[str]:
    """id, status, priority and due in columns, then the title (on one line)."""
    widths = [max(len(row[i]) for row in rows) for i in (0, 2, 3, 4)]
    return [f"{row[0]:<{widths[0]}}  {row[2]:<{widths[1]}}  {row[3]:<{widths[2]}}  {row[4]:<{widths[3]}}  "
            + " ".join(row[1].split()) for row in rows]


@command("todos", args="[all]", help="Show the todo list straight from the store (no model call).",
         complete=lambda session: ["all"],
         means=("tasks", "todo", "list"))
def _todos(session, args):
    everything = bool(args) and args[0] == "all"
    result = session.registry.call("list_todos", {"limit": 0} if everything else {})
    if not result.get("ok"):
        session.ui.error(result["error"]["message"])
        return
    rows = [tuple(str(cell or "") for cell in (t["id"], t["title"], t["status"], t["priority"], t.get("due")))
            for t in result.get("todos", [])]
    title = f"todos · {session.settings.todos_file}"
    if len(rows) <= TABLE_ROWS:
        session.ui.table(title, ["id", "title", "status", "priority", "due"], rows)
    else:  # a table costs ~1 ms a row to lay out: thousands go as aligned lines, 500 a print
        lines = [title, *_aligned(rows)]
        session.ui.lines(["\n".join(lines[i : i + 500]) for i in range(0, len(lines), 500)])
    if result.get("more"):
        session.ui.info(f"… {result['more']:,} more ({result['count']:,} in all); "
                        "ask the model or use /todos all")


_MODELS: dict[tuple[str, str], list[str]] = {}  # (profile, base URL) → the models it offers


def model_names(session, wait: bool) -> list[str]:
    """The models the active endpoint offers (``GET /models``), asked once per endpoint.
    ``wait``: wait for the provider and raise ProviderError; else [] until it is ready."""
    active = session.settings.active
    key = (active.name, active.base_url)
    if key in _MODELS and (_MODELS[key] or not wait):
        return _MODELS[key]
    provider = session.provider() if wait else session.provider_if_ready()
    if provider is None or not hasattr(provider, "list_models"):
        return []
    try:
        _MODELS[key] = provider.list_models(timeout_s=10.0 if wait else 3.0)
    except ProviderError:
        _MODELS[key] = []  # Tab stays quiet; /model asks again and says why
        if wait:
            raise
    return _MODELS[key]


def _model_completions(session) -> list[str]:
    try:
        return model_names(session, wait=False)
    except Exception:  # noqa: BLE001 - completion never breaks typing
        return []


@command("model", args="[NAME]", help="Show or switch the model for the next turn; without NAME, "
         "list the models the endpoint offers (Tab completes them).", complete=_model_completions,
         means=("models", "llm", "switch"))
def _model(session, args):
    if not args:
        current = session.settings.active.model
        session.ui.info(f"model: {current} (provider {session.settings.active.name})")
        try:
            names = model_names(session, wait=True)
        except ProviderError as exc:
            session.ui.error(f"the endpoint did not list its models: {exc.message}")
            return
        except KeyboardInterrupt:
            session.ui.info("(stopped)")
            return
        if not names:
            session.ui.info("the endpoint lists no models; /model NAME still switches")
            return
        session.ui.lines([f"{'*' if name == current else ' '} {name}" for name in names])
        session.ui.info(f"{len(names)} models offered · /model NAME switches (Tab completes)")
        return
    if session.switch(model=args[0]):
        session.ui.info(f"model is now {args[0]} for the next turn")


@command("provider", args="[NAME]", help="Show or switch the provider profile.",
         complete=lambda session: sorted(session.settings.providers),
         means=("providers", "endpoint", "backend"))
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
         complete=lambda session: list(MODES),
         means=("approval", "permissions", "allow", "yolo", "mode"))
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
from repl import commands_loop, commands_more  # noqa: E402, F401
