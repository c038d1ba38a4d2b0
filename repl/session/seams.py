"""The session's typed seams: what the session needs of a terminal (``UI``) and the record
of a turn (``TurnRecord``), shared by the session core, its doors and the slash commands
(which see the session through ``commands.CommandContext``)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from repl.archive.journal import SessionInfo
from repl.archive.recap import TurnNote
from repl.loop.approval import Asker
from repl.loop.cost import Cost
from repl.loop.events import Event, ModelUsage, TurnFinished
from repl.loop.stepping import Stepper
from repl.providers.base import Message
from tools import store


class Surface(Protocol):
    """What the session core needs of the place its door shows things: a terminal, or plain
    lines for scripts. Text goes through it already escaped by it, never raw."""

    def render(self, event: Event) -> None: ...
    def info(self, text: str) -> None: ...
    def error(self, text: str) -> None: ...

    def waiting(self, status: str | None) -> None:
        """Progress while the provider or MCP servers start (from any thread); None when ready."""
        ...

    def stop_live(self) -> None:
        """End the live area (spinner, streaming text) of a turn or command."""
        ...

    def confirm(self, question: str) -> bool: ...

    def asker(self) -> Asker | None:
        """Who approves tool calls; None: no one to ask."""
        ...


class UI(Surface, Protocol):
    """What the REPL and its commands need of a terminal (``repl.ui.terminal.Terminal`` is one;
    tests use stubs)."""

    # ---- input
    def read(self) -> str:
        """The next line typed; EOFError at the end of input, KeyboardInterrupt on Ctrl-C."""
        ...

    def echo(self, line: str) -> None:
        """A message the user did not type at the prompt, shown as if typed."""
        ...

    def prefill(self, text: str) -> bool:
        """``text`` in the next prompt's input line to edit; False without a prompt."""
        ...

    def pick_session(self, sessions: list[SessionInfo]) -> str | None:
        """The id of the session chosen; None when cancelled or without a terminal."""
        ...

    def pick(self, title: str, rows: list[str], at: int = 0) -> int | None:
        """The index of the row chosen (``at``: the one chosen at first); None when cancelled
        or without a terminal."""
        ...

    def stepper(self) -> Stepper | None:
        """Step mode's pauses; None without a terminal to pause in."""
        ...

    # ---- output
    def lines(self, lines: list[str]) -> None: ...

    def marked(self, pieces: list[tuple[str, bool]]) -> None:
        """One line of untrusted pieces, escaped; those marked True highlighted (a search's words)."""
        ...

    def table(self, title: str, columns: list[str], rows: Sequence[tuple[str, ...]],
              keep: tuple[str, ...] = ()) -> None: ...
    def paged(self) -> AbstractContextManager[None]:
        """What is shown inside goes through the pager when taller than the screen."""
        ...

    def page(self, blocks: list[tuple[str, Any]]) -> None:
        """``heading`` and ``note`` lines and ``json`` values, paged when taller than the screen."""
        ...

    def recap(self, earlier: int, turns: list[dict[str, Any]]) -> None: ...

    def copy(self, text: str) -> bool:
        """``text`` to the clipboard through the terminal; False without one."""
        ...

    def set_verbose(self, on: bool | None) -> bool: ...
    def set_reasoning(self, on: bool | None) -> bool: ...

    @property
    def width(self) -> int: ...


@dataclass
class TurnRecord:
    number: int
    finished: TurnFinished
    model_calls: list[ModelUsage]
    writes: list[store.StoreWrite]  # each store write of the turn (bytes before and after), in order
    cost: Cost = Cost()
    restore: list[Message] | None = None  # /compact: the messages it replaced (undo puts them back)
    prompt_tokens: int = 0  # the context in use after it (the last request's input tokens)
    undone: bool = False  # taken back by /undo: its tokens stay spent, it is out of the context
    call_count: int | None = None  # a resumed turn's model calls (its events are not kept)
    question: str = ""  # the message the turn was run with (/retry runs it again)
    in_history: bool = True  # False: it failed before any answer and left no message behind

    @property
    def calls(self) -> int:
        return len(self.model_calls) if self.call_count is None else self.call_count

    def note(self) -> dict[str, Any]:
        """The journal's ``turn`` record: what a resumed session needs to continue the numbers."""
        f = self.finished
        return {"turn": self.number, "compact": self.restore is not None, "stopped_by": f.stopped_by,
                "steps": f.steps, "tool_calls": f.tool_calls, "calls": self.calls, "usage": asdict(f.usage),
                "duration_s": f.duration_s, "cost": asdict(self.cost), "prompt_tokens": self.prompt_tokens}

    @classmethod
    def from_note(cls, n: TurnNote) -> TurnRecord:
        """A turn of a resumed session from its journal record."""
        return cls(n.finished.turn, n.finished, [], [], n.cost, restore=[] if n.compact else None,
                   prompt_tokens=n.prompt_tokens, undone=n.undone, call_count=n.calls)
