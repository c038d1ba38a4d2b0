"""Commands on the conversation and the session: help, exit, reset, undo, edit, compact,
save, saved sessions, copy, the system prompt."""

from __future__ import annotations

import json
import time
from pathlib import Path

from repl.archive.journal import recent_sessions
from repl.archive.typed_numbers import NotANumber, typed_number
from repl.config.redact import redactor_for
from repl.providers.base import Message, ProviderError
from repl.session.commands.context import CommandContext, command, save_text
from repl.session.mentions import typed_part
from repl.ui.escape import clean, one_line
from tools.safe_io import StoreError
from tools.undo import Reverted


@command("exit", help="Leave glassloop.", aliases=("quit",), means=("bye", "q", "logout", "close"),
         brief="leave glassloop")
def exit_(ctx: CommandContext, args: list[str]) -> str:
    return "exit"


@command("reset", help="Start a new conversation (todos and notes stay).", aliases=("clear",),
         means=("new", "restart", "fresh", "cls"), brief="a new conversation (todos and notes stay)")
def reset(ctx: CommandContext, args: list[str]) -> None:
    old = ctx.new_session()
    ctx.ui.info(f"new conversation (session {ctx.session_id}); todos and notes are kept; "
                f"{clear_rules(ctx)}")
    ctx.ui.info(f"the previous session is kept: /resume {old}" if old else "the previous session had no turn")


def clear_rules(ctx: CommandContext) -> str:
    """Forget the session's approval rules ("always", "rest of step"); says which."""
    cleared = ctx.approver.clear_rules()
    return f"approval rules cleared (always: {', '.join(cleared)})" if cleared else "no approval rules to clear"


@command("undo", help="Revert the last turn's store changes (todos, notes, your tools' stores) and remove the turn (or undo /compact).",
         means=("revert", "rewind", "back", "rollback"), brief="take back the last turn and its changes")
def undo(ctx: CommandContext, args: list[str]) -> None:
    if not ctx.turns:
        ctx.ui.info("nothing to undo")
        return
    if ctx.turns[-1].restore is not None:
        ctx.undo()
        ctx.ui.info(f"undid /compact: the conversation has its {len(ctx.history.turn_starts())} turns back")
        return
    try:
        reverted = ctx.undo()
    except StoreError as exc:
        ctx.ui.error(exc.message)
        return
    ctx.ui.info(f"removed the last turn from the conversation; {undone_text(reverted)}")


@command("edit", help="Put your last message back in the prompt to change and resend; its turn is "
         "undone first, as by /undo (also Esc Esc at an empty prompt).", means=("retry", "amend", "redo", "again"))
def edit(ctx: CommandContext, args: list[str]) -> None:
    if not ctx.turns:
        ctx.ui.info("nothing to edit: no turn yet")
        return
    if ctx.turns[-1].restore is not None:
        ctx.ui.error("the last change was /compact: /undo it first, then /edit")
        return
    if not ctx.interactive:
        ctx.ui.error("/edit needs a terminal to edit in")
        return
    starts = ctx.history.turn_starts()
    text = typed_part(ctx.history.messages[starts[-1]]["content"]) if starts else ""
    try:
        reverted = ctx.undo()
    except StoreError as exc:
        ctx.ui.error(exc.message)
        return
    ctx.ui.prefill(text)
    ctx.ui.info(f"removed the last turn from the conversation; {undone_text(reverted)}; "
                "edit your message and press Enter to send it again")


@command("rewind", args="[N]", help="Take the conversation back to before turn N (a list to pick from without N): "
         "the todo and note changes of turns N and later are undone, as by /undo, and those turns are "
         "kept as a branch (--resume ID@k reopens it).", means=("branch", "goto", "travel"),
         complete=lambda ctx: [str(n) for n in range(1, len(ctx.history.turn_starts()) + 1)],
         brief="back to before turn N, its changes undone")
def rewind(ctx: CommandContext, args: list[str]) -> None:
    from repl.session.rewind import RewindRefused

    starts = ctx.history.turn_starts()
    if not starts:
        ctx.ui.info("nothing to rewind: no turn yet")
        return
    try:
        number = typed_number(args[0], "/rewind takes a turn number") if args else _pick_turn(ctx, starts)
    except NotANumber as exc:
        ctx.ui.error(str(exc))
        return
    if number is None:
        return
    try:
        reverted, branch = ctx.rewind(number)
    except (RewindRefused, StoreError) as exc:
        ctx.ui.error(exc.message if isinstance(exc, StoreError) else str(exc))
        return
    cut = f"turn {number}" if number == len(starts) else f"turns {number} to {len(starts)}"
    ref = f"{ctx.session_id}@{branch}"
    kept = f"; {cut} kept as branch {ref} (glassloop --resume {ref})" if branch else ""
    ctx.ui.info(f"rewound to before turn {number}; {undone_text(reverted)}{kept}")


def _pick_turn(ctx: CommandContext, starts: list[int]) -> int | None:
    if not ctx.interactive:
        ctx.ui.error(f"no terminal to pick a turn in: give its number, /rewind 1 to {len(starts)}")
        return None
    rows = []
    for n, start in enumerate(starts, 1):
        end = starts[n] if n < len(starts) else len(ctx.history.messages)
        calls = [c["name"] for m in ctx.history.messages[start:end] for c in m.get("tool_calls") or []]
        rows.append(f"turn {n:>3}  {one_line(typed_part(ctx.history.messages[start]['content']), 60)}"
                    + (f"  [{one_line(', '.join(calls), 40)}]" if calls else ""))
    chosen = ctx.ui.pick("rewind to before which turn? (↑ ↓, Enter; Esc cancels)", rows, len(rows) - 1)
    if chosen is None:
        ctx.ui.info("nothing rewound")
        return None
    return chosen + 1


def undone_text(reverted: list[Reverted]) -> str:
    """What an undo did, store by store and item by item: "todos: removed todo-007 'call mom';
    notes: restored note-003 'x'" (a store is named by its file: your tools' too)."""
    done = []
    for r in reverted:
        if not r.items:
            done.append(f"restored {r.path.name}")
        first = len(done)
        for item in r.items:
            verb = "removed" if item.before is None else "restored" if item.after is None else "put back"
            shown = item.before or item.after or {}
            label = next((shown[k] for k in ("title", "text", "name") if isinstance(shown.get(k), str)), "")
            fields = ""
            if item.before is not None and item.after is not None:
                keys = [k for k in {**item.before, **item.after} if item.before.get(k) != item.after.get(k)]
                fields = f" ({', '.join(keys)})"
            done.append(f"{verb} {item.id}" + (f" '{one_line(label, 40)}'" if label else "") + fields)
        if r.items:
            done[first] = f"{one_line(r.path.stem, 40)}: {done[first]}"
        if r.merged:
            done.append(f"{r.path}: only this turn's items (another process changed it too)")
    return "; ".join(done) if done else "it changed nothing in any store"


@command("compact", args="[instructions]",
         help="Summarise the older turns into one message to free context (/undo restores them).",
         means=("summarize", "summarise", "shrink", "condense"))
def compact(ctx: CommandContext, args: list[str]) -> None:
    instructions = " ".join(args)
    ctx.ui.info("summarising the older turns…")
    try:
        done = ctx.compact(instructions)
    except ProviderError as exc:
        ctx.ui.error(f"/compact failed, nothing changed: {exc.message}")
        return
    except KeyboardInterrupt:
        ctx.ui.info("/compact cancelled, nothing changed")
        return
    finally:
        ctx.ui.stop_live()
    if done is None:
        ctx.ui.info("nothing to compact: the conversation has fewer than two turns")
        return
    turns = f"{done.turns} turn" + ("" if done.turns == 1 else "s")
    ctx.ui.info(f"compacted {turns} into a summary: ~{done.before:,} → ~{done.after:,} "
                "tokens of context (estimated); /undo restores them")


@command("save", args="[PATH]", help="Save the transcript as Markdown (.md) or JSON (.json).",
         means=("export", "write", "transcript"))
def save(ctx: CommandContext, args: list[str]) -> None:
    path = Path(args[0]) if args else Path(f"glassloop-{ctx.session_id}.md")
    if path.suffix == ".json":
        text = json.dumps(ctx.history.to_json(), ensure_ascii=False, indent=2)
    else:
        text = transcript_markdown(ctx.history.messages)
    if saved := save_text(ctx, path, redactor_for(ctx.settings)(text)):
        ctx.ui.info(f"saved the transcript to {saved}")


def transcript_markdown(messages: list[Message]) -> str:
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


@command("sessions", args="[TEXT]", help="Saved sessions, newest first: start, turns, model, first message; "
         "with TEXT: the turns of every session that hold its words, newest first.",
         means=("history", "conversations", "chats", "search", "find", "grep"))
def sessions(ctx: CommandContext, args: list[str]) -> None:
    if args:
        search_sessions(ctx, " ".join(args))
        return
    found = recent_sessions(ctx.settings.data_dir / "sessions")
    if not found:
        ctx.ui.info("no saved session with a turn yet")
        return
    rows = []
    for info in found:
        first = " ".join(typed_part(info.first).split())  # what was typed, not the files it attached
        branches = f" +{len(info.branches)} branch{'es' if len(info.branches) > 1 else ''}" if info.branches else ""
        rows.append((info.id + (" (current)" if info.id == ctx.session_id else "") + branches,
                     time.strftime("%m-%d %H:%M", time.localtime(info.started)), str(info.turns),
                     info.model, first if len(first) <= 60 else first[:59] + "…"))
    ctx.ui.table("sessions, newest first (/resume ID, or /resume to pick)",
                 ["id", "started", "turns", "model", "first message"], rows, keep=("id", "started"))


def search_sessions(ctx: CommandContext, text: str) -> None:
    """``/sessions TEXT``: each turn found, its snippet with the words marked, how to resume it."""
    from repl.archive.search import Index, SearchError, query_words

    if not query_words(text):
        ctx.ui.error("nothing to search for: give words with letters or digits")
        return
    try:
        hits = Index(ctx.settings.data_dir / "sessions", ctx.ui.info).search(text)
    except SearchError as exc:
        ctx.ui.error(str(exc))
        return
    if not hits:
        ctx.ui.info(f"no saved turn holds {one_line(text, 60)!r}")
        return
    ctx.ui.info(f"{len(hits)} turn{'' if len(hits) == 1 else 's'} with {one_line(text, 60)!r}, newest first "
                "(/resume ID to continue one):")
    for hit in hits:
        t = hit.turn
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(t.time))
        ctx.ui.marked([(f"{t.ref}  turn {t.turn}  {when}  ", False), *hit.snippet])


@command("resume", args="[ID|ID@k|last]", help="Continue a saved session (ID@k: a branch /rewind kept, as a "
         "new session); without an argument, pick one from a list.",
         complete=lambda ctx: [s.id for s in recent_sessions(ctx.settings.data_dir / "sessions")],
         means=("continue", "load", "open"), brief="continue a saved session")
def resume(ctx: CommandContext, args: list[str]) -> None:
    key = args[0] if args else ctx.pick()
    if key is not None:
        ctx.resume(key)


OSC52_MAX_CHARS = 100_000  # terminals refuse (or cut) longer clipboard requests


@command("copy", help="Copy the last answer to the clipboard (through the terminal: works over SSH).",
         means=("clipboard", "yank", "cp"))
def copy(ctx: CommandContext, args: list[str]) -> None:
    # as the screen shows it: a paste end (ESC[201~), CR, BS or bidi control could run commands in a shell
    answer = clean(next((m["content"] for m in reversed(ctx.history.messages)
                         if m["role"] == "assistant" and m.get("content")), ""))
    if not answer:
        ctx.ui.info("nothing to copy: no answer yet")
        return
    if len(answer) > OSC52_MAX_CHARS:
        ctx.ui.error(f"the last answer has {len(answer):,} characters, too many for the terminal's "
                     "clipboard; /save PATH writes the transcript to a file")
        return
    if not ctx.ui.copy(answer):
        ctx.ui.error("cannot copy without a terminal; /save PATH writes the transcript to a file")
        return
    ctx.ui.info(f"copied the last answer ({len(answer):,} characters) through the terminal (OSC 52); "
                "if the clipboard did not get it, the terminal does not allow OSC 52 (tmux: "
                "set -g set-clipboard on): /save PATH writes it to a file")


@command("system", help="Show the system prompt.",
         means=("prompt",))
def system(ctx: CommandContext, args: list[str]) -> None:
    ctx.ui.lines(ctx.history.system_prompt.text.splitlines())
