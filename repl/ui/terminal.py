"""The session's terminal: renderer, input and approval dialog behind one object.

The session talks to this facade only, so it never imports rich or
prompt_toolkit. Without a terminal (pipes) input is read line by line and no
one is asked for approval.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from repl.approval import ApprovalRequest, UserChoice
from repl.config import Settings
from repl.events import Event, Usage

CommandSpec = tuple[str, str, Callable[[str], list[str]] | None]  # name, help, argument completer


def price_of(usage: Usage, profile: Any) -> float | None:
    """USD for ``usage`` at the profile's prices (per million tokens); None when unpriced."""
    if not (profile.price_input or profile.price_output):
        return None
    fresh = usage.input_tokens - usage.cached_tokens
    cached_price = profile.price_cached_input or profile.price_input
    return (fresh * profile.price_input + usage.cached_tokens * cached_price
            + usage.output_tokens * profile.price_output) / 1_000_000


class _Asker:
    def __init__(self, terminal: Terminal) -> None:
        self.terminal = terminal

    def ask(self, request: ApprovalRequest, validate: Callable[[dict[str, Any]], str | None]) -> UserChoice:
        with self.terminal.renderer.suspended():
            return self.terminal.dialog.ask(request, validate)


class Terminal:
    def __init__(self, settings: Settings, renderer: Any, prompt: Any | None, dialog: Any | None) -> None:
        self.settings = settings
        self.renderer = renderer
        self.prompt = prompt
        self.dialog = dialog
        self.session: Any = None

    @classmethod
    def create(cls, settings: Settings, *, interactive: bool, commands: list[CommandSpec]) -> Terminal:
        from rich.console import Console

        from repl.ui.render import Renderer

        console = Console(highlight=False)
        terminal = cls(settings, None, None, None)
        terminal.renderer = Renderer(console, price=terminal.cost)
        if interactive:
            from repl.ui.approval_dialog import ApprovalDialog
            from repl.ui.prompt import PromptInput

            terminal.dialog = ApprovalDialog(console)
            terminal.prompt = PromptInput(
                history_path=settings.data_dir / "input_history",
                commands=commands,
                toolbar=terminal.toolbar,
            )
        return terminal

    def attach(self, session: Any) -> None:
        self.session = session

    # ---- input ---------------------------------------------------------------
    def read(self) -> str:
        if self.prompt is not None:
            return self.prompt.read()
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")

    def asker(self) -> _Asker | None:
        return _Asker(self) if self.dialog is not None else None

    def confirm(self, question: str) -> bool:
        with self.renderer.suspended():
            return self.dialog.confirm(question) if self.dialog else False

    # ---- output --------------------------------------------------------------
    def render(self, event: Event) -> None:
        self.renderer(event)

    def stop_live(self) -> None:
        self.renderer.close()

    def waiting(self, elapsed: float) -> None:
        """Called while a local model server starts (from a background thread)."""
        self.renderer.waiting(f"starting the local model… {elapsed:.0f} s")

    def header(self, provider: str, model: str, approval: str, session_id: str) -> None:
        self.renderer.header(provider, model, approval, session_id)

    def info(self, text: str) -> None:
        self.renderer.notice(text)

    def error(self, text: str) -> None:
        self.renderer.error(text)

    def lines(self, lines: list[str]) -> None:
        for line in lines:
            self.renderer.info(line)

    def table(self, title: str, columns: list[str], rows: list[tuple[str, ...]]) -> None:
        self.renderer.table(title, columns, rows)

    def cost(self, usage: Usage) -> float | None:
        return price_of(usage, self.session.settings.active if self.session else self.settings.active)

    def cost_text(self, usage: Usage) -> str:
        value = self.cost(usage)
        return "" if value is None else f"${value:.4f}"

    def toolbar(self) -> str:
        s = self.session
        if s is None:
            return ""
        active = s.settings.active
        parts = [f"{active.name}:{active.model}", f"approvals {s.approver.mode}",
                 f"session {s.usage.total} tokens"]
        if active.context_window:
            parts.append(f"context {100 * s.last_prompt_tokens / active.context_window:.0f}%")
        cost = self.cost_text(s.usage)
        if cost:
            parts.append(cost)
        return " · ".join(parts)

    def goodbye(self, session: Any) -> None:
        u = session.usage
        self.renderer.notice(f"session {session.session_id}: {len(session.turns)} turns · "
                             f"{u.total} tokens {self.cost_text(u)} · resume with glassloop --resume "
                             f"{session.session_id}")
