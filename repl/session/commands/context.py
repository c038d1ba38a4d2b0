"""What a slash command is and what it may use of the session: ``CommandContext`` (the part
of the session a command may use), ``Command`` and ``@command``, which each command module
uses to make its handlers, and ``save_text`` for the commands that write a file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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
    from repl.session.instructions import Instructions
    from repl.session.seams import UI, TurnRecord
    from repl.session.templates import Templates
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
    instructions: Instructions | None  # the AGENTS.md files read for the system prompt (None: resumed)
    templates: Templates  # your own commands

    def new_session(self) -> str | None: ...
    def undo(self) -> list[Reverted]: ...
    def rewind(self, number: int) -> tuple[list[Reverted], int | None]: ...
    def compact(self, instructions: str = "") -> Compacted | None: ...
    def ask(self, text: str) -> None: ...
    def send(self, text: str) -> None: ...
    def switch(self, **changes: Any) -> bool: ...
    def pick(self) -> str | None: ...
    def resume(self, key: str, *, show: bool = True) -> bool: ...
    def set_step(self, on: bool) -> bool: ...
    def provider(self) -> Provider: ...
    def provider_if_ready(self) -> Provider | None: ...
    def mcp_ready(self) -> None: ...


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
    brief: str = ""  # a few words for /help's one screen (else the help's first clause)

    @property
    def short(self) -> str:
        return self.brief or self.help.split("; ")[0].split(": ")[0].rstrip(".")


def command(name: str, args: str = "", help: str = "", complete: Completer | None = None,
            aliases: tuple[str, ...] = (), means: tuple[str, ...] = (), brief: str = "") -> Callable[[Handler], Command]:
    """Make a handler a :class:`Command`; :func:`table` is where it is listed."""
    def make(handler: Handler) -> Command:
        return Command(name, args, help, handler, complete, aliases, means, brief)
    return make


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
