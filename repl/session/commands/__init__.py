"""Slash commands: one table that ``/help``, completion and dispatch all read.

Each command is made by ``@command(...)`` in the module of what it acts on:
``conversation`` (the conversation and saved sessions), ``tools`` (tools, todos,
MCP servers), ``trace`` (what the loop did and cost, what is shown of it) and
``model`` (which model runs the loop and how). :func:`table` lists them all, in the
order ``/help`` shows them. A handler gets a :class:`CommandContext`, the part of the
session a command may use, and the words after the command's name.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from repl.config.load import Settings
    from repl.loop.approval import Approver
    from repl.loop.compaction import Compacted
    from repl.loop.cost import Cost
    from repl.loop.events import Usage
    from repl.loop.history import History
    from repl.loop.stepping import Stepping
    from repl.providers.base import Provider
    from repl.session.seams import UI, TurnRecord
    from repl.session.user_tools import UserTools
    from repl.tracing.trace import Trace
    from tools.mcp_client import McpManager
    from tools.registry import Registry
    from tools.undo import Reverted


class CommandContext(Protocol):
    """What a command may use of the session (``ChatSession`` is one); nothing else of it."""

    ui: UI
    settings: Settings
    session_id: str
    interactive: bool
    history: History
    turns: list[TurnRecord]  # this run's turns: what /undo can take back
    ledger: list[TurnRecord]  # every turn of the session, resumed and undone too
    usage: Usage
    cost: Cost
    last_prompt_tokens: int
    approver: Approver
    registry: Registry
    user_tools: UserTools
    mcp: McpManager | None
    stepping: Stepping
    trace: Trace | None
    shell_context: list[str]  # !command output the user added to the next message

    def new_session(self) -> str | None: ...
    def undo(self) -> list[Reverted]: ...
    def compact(self, instructions: str = "") -> Compacted | None: ...
    def ask(self, text: str) -> None: ...
    def switch(self, **changes: Any) -> bool: ...
    def pick(self) -> str | None: ...
    def resume(self, key: str, *, show: bool = True) -> bool: ...
    def set_step(self, on: bool) -> bool: ...
    def provider(self) -> Provider: ...
    def provider_if_ready(self) -> Provider | None: ...


Handler = Callable[[CommandContext, list[str]], "str | None"]  # "exit" ends the session
Completer = Callable[[CommandContext], list[str]]


@dataclass(frozen=True)
class Command:
    name: str
    args: str
    help: str
    handler: Handler
    complete: Completer | None = None
    aliases: tuple[str, ...] = ()  # other names that run it
    means: tuple[str, ...] = ()  # words an unknown command is matched against: /new suggests /reset


def command(name: str, args: str = "", help: str = "", complete: Completer | None = None,
            aliases: tuple[str, ...] = (), means: tuple[str, ...] = ()) -> Callable[[Handler], Command]:
    """Make a handler a :class:`Command`; :func:`table` is where it is listed."""
    def make(handler: Handler) -> Command:
        return Command(name, args, help, handler, complete, aliases, means)
    return make


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
    from repl.session.commands import conversation, model, tools, trace

    return CommandTable([
        conversation.help_, conversation.exit_, conversation.reset, conversation.undo, conversation.edit,
        trace.trace, trace.usage, conversation.compact, tools.tools, tools.todos,
        model.model, model.provider, model.approve, model.step, model.retry, model.compare,
        conversation.save, conversation.sessions, conversation.resume, trace.verbose, trace.reasoning,
        conversation.copy, conversation.system, tools.mcp,
    ])


def dispatch(ctx: CommandContext, line: str) -> str | None:
    """Run a slash command line with :func:`table`; returns "exit" when the session should end."""
    return table().dispatch(ctx, line)


def save_text(ctx: CommandContext, path: Path, text: str) -> Path | None:
    """Write ``text`` to a file the user named (``~`` expanded); the path written, or None
    after one error line: a missing folder, a folder, a name too long, an unknown ``~user``."""
    try:
        path = path.expanduser()
        path.write_text(text, encoding="utf-8")
    except (OSError, ValueError, RuntimeError) as exc:
        ctx.ui.error(f"could not save to {path}: {getattr(exc, 'strerror', None) or exc}")
        return None
    return path
