"""Slash commands: one table that ``/help``, completion and dispatch all read.

Each command is made by ``@command(...)`` (``context.py``, with ``CommandContext``, the part
of the session a command may use) in the module of what it acts on: ``conversation`` (the
conversation and saved sessions), ``tools`` (tools, todos, MCP servers), ``trace`` (what the
loop did and cost, what is shown of it), ``model`` (which model runs the loop and how) and
``yours`` (what you bring: your own commands, the AGENTS.md read).
:func:`table` lists them all, in the order ``/help`` shows them; ``/help`` itself lives here,
beside the table it reads. A handler gets the context and the words after the command's name.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

from repl.session.commands import conversation, mcp_prompts, model, tools, trace, yours
from repl.session.commands.context import Command, CommandContext, Completer, command

# /help's one screen: the commands people use most, grouped; /help all lists every one.
EVERYDAY = (("conversation", ("undo", "retry", "reset", "resume")),
            ("see the loop", ("trace", "step", "usage", "tools")),
            ("", ("model", "exit")))
KEYS = ("keys: Enter sends · Alt-Enter or Esc Enter inserts a newline · Esc Esc edits the last message "
        "(/edit) · Tab completes commands and models · Ctrl-C or Esc stops a turn or clears the line · "
        "Ctrl-C twice or Ctrl-D exits")


@command("help", args="[all]", help="The commands people use most and the keys; all: every command.",
         complete=lambda ctx: ["all"], means=("commands", "?", "h", "man"))
def help_(ctx: CommandContext, args: list[str]) -> None:
    every = table().commands
    if args[:1] == ["all"]:
        rows = [(_names(c) + f" {c.args}".rstrip(), c.help) for c in every]
        rows.append(("!COMMAND", "Run a shell command yourself (never the model), see its output, and "
                     "choose to add it to your next message."))
        rows += [(name, text) for _, name, text in yours.help_rows(ctx) + mcp_prompts.help_rows(ctx)]
        with ctx.ui.paged():  # taller than most screens
            ctx.ui.table("commands", ["command", "what it does"], rows)
            ctx.ui.info(KEYS)
        return
    by_name = table().by_name
    grouped: list[tuple[str, str, str]] = [("" if n else group, _names(by_name[name]), by_name[name].short)
            for group, names in EVERYDAY for n, name in enumerate(names)]
    grouped.append(("", "!COMMAND", "run your own shell command (never the model)"))
    grouped += yours.help_rows(ctx) + mcp_prompts.help_rows(ctx)
    ctx.ui.table("commands", ["", "command", "what it does"], grouped)
    shown = sum(len(names) for _, names in EVERYDAY)
    ctx.ui.info(f"/help all: every command ({len(every) - shown} more) and key · Enter sends · "
                "Esc Enter new line · Ctrl-C stops a turn · Ctrl-D exits")


def _names(cmd: Command) -> str:
    return ", ".join(f"/{n}" for n in [cmd.name, *cmd.aliases])


@dataclass
class CommandTable:
    """Commands by name (aliases too), in ``/help`` order."""

    commands: list[Command]
    by_name: dict[str, Command] = field(init=False)
    meanings: dict[str, str] = field(init=False)  # a word people type for what a command does → the command

    def __post_init__(self) -> None:
        self.by_name, self.meanings = {}, {}
        for cmd in self.commands:
            for name in (cmd.name, *cmd.aliases):
                if name in self.by_name:
                    raise ValueError(f"two commands are called /{name}")
                self.by_name[name] = cmd
            self.meanings.update(dict.fromkeys(cmd.means, cmd.name))

    def suggest(self, name: str) -> str | None:
        """The command meant by an unknown ``name``: by meaning (``/new`` → ``reset``), else by spelling."""
        name = name.lower()
        if name in self.meanings:
            return self.meanings[name]
        if name.endswith("s") and name[:-1] in self.by_name:  # /models → /model
            return name[:-1]
        close = difflib.get_close_matches(name, self.by_name, n=1, cutoff=0.5)
        if close:
            return close[0]
        close = difflib.get_close_matches(name, self.meanings, n=1, cutoff=0.75)  # a meaning, misspelt
        return self.meanings[close[0]] if close else None

    def dispatch(self, ctx: CommandContext, line: str) -> str | None:
        """Run a slash command line; returns "exit" when the session should end."""
        try:
            words = shlex.split(line[1:])
        except ValueError as exc:
            ctx.ui.error(f"cannot parse the command: {exc}")
            return None
        if not words:
            return self.by_name["help"].handler(ctx, [])
        name, args = words[0], words[1:]
        cmd = self.by_name.get(name)
        if cmd is None:
            hint = self.suggest(name)
            ctx.ui.error(f"unknown command /{name}" + (f"; did you mean /{hint}?" if hint else "; see /help"))
            return None
        return cmd.handler(ctx, args)

    def specs(self, get_ctx: Callable[[], CommandContext]) -> list[tuple[str, str, Callable[[str], list[str]] | None]]:
        """(name, help, argument completer) for the prompt's completion, aliases too."""
        out: list[tuple[str, str, Callable[[str], list[str]] | None]] = []
        for name, cmd in self.by_name.items():
            complete = None
            if cmd.complete is not None:
                def complete(prefix: str, _fn: Completer = cmd.complete) -> list[str]:
                    return [c for c in _fn(get_ctx()) if c.startswith(prefix)]
            out.append((name, cmd.help, complete))
        return out


@cache
def table() -> CommandTable:
    """Every command, in the order ``/help`` lists them."""
    return CommandTable([
        help_, conversation.exit_, conversation.reset, conversation.undo, conversation.rewind, conversation.edit,
        trace.trace, trace.usage, conversation.compact, tools.tools, tools.todos,
        model.model, model.provider, model.approve, model.step, model.retry, model.compare,
        conversation.save, conversation.sessions, conversation.resume, trace.verbose, trace.reasoning,
        conversation.copy, conversation.system, yours.instructions, tools.mcp,
    ])


def dispatch(ctx: CommandContext, line: str) -> str | None:
    """Run a slash command line with :func:`table` (or one of your own commands, or an MCP
    server's prompt); returns "exit" when the session should end."""
    if yours.run_template(ctx, line) or mcp_prompts.run_prompt(ctx, line):
        return None
    return table().dispatch(ctx, line)
