"""The session's terminal: renderer, input and approval dialog behind one object.

It implements the session's ``UI`` protocol (``repl.session.seams.UI``): the session
talks to it through that only, so it never imports rich or prompt_toolkit;
``toolbar`` and ``goodbye`` read the session back. Without a terminal (pipes) input is read line by line and no
one is asked for approval.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from repl.config.load import Settings
from repl.config.redact import redactor_for
from repl.loop.cost import Cost, context_window_for, price_for, usd
from repl.loop.events import Event, Usage
from repl.loop.unicode import valid_text

if TYPE_CHECKING:
    from repl.loop.approval import ApprovalRequest, UserChoice
    from repl.ui.approval_dialog import ApprovalDialog

CommandSpec = tuple[str, str, Callable[[str], list[str]] | None]  # name, help, argument completer


class _Mode(Protocol):
    @property
    def mode(self) -> str: ...


class _Stepping(Protocol):
    @property
    def stepper(self) -> object: ...


class SessionView(Protocol):
    """What the toolbar and the goodbye line read back from the session (the UI never imports it)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def approver(self) -> _Mode: ...
    @property
    def stepping(self) -> _Stepping: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def cost(self) -> Cost: ...
    @property
    def last_prompt_tokens(self) -> int: ...
    @property
    def session_id(self) -> str: ...
    @property
    def saved(self) -> bool: ...
    @property
    def kept_branch(self) -> str | None: ...
    def turn_count(self) -> int: ...


class _Asker:
    def __init__(self, terminal: Terminal, dialog: ApprovalDialog) -> None:
        self.terminal = terminal
        self.dialog = dialog

    def ask(self, request: ApprovalRequest, validate: Callable[[dict[str, Any]], str | None]) -> UserChoice:
        with self.terminal.renderer.suspended():
            return self.dialog.ask(request, validate)


class _Stepper:
    """Step mode's pauses (``repl.loop.stepping.Stepper``), drawn with the live area stopped."""

    def __init__(self, terminal: Terminal, dialog: ApprovalDialog) -> None:
        from repl.ui.step_dialog import StepDialog

        self.terminal = terminal
        self.dialog = StepDialog(terminal.renderer.console, dialog)

    def before_model_call(self, view: Any) -> Any:
        with self.terminal.renderer.suspended():
            return self.dialog.before_model_call(view)

    def after_model_answer(self, calls: list[Any]) -> list[Any]:
        self.terminal.renderer.close()  # the answer's text is printed before its calls are listed
        with self.terminal.renderer.suspended():
            return self.dialog.after_model_answer(calls)


def fit_fields(fields: list[tuple[str, int]], width: int, sep: str = " · ") -> str:
    """``fields`` (text, importance) joined by ``sep``, the least important dropped until the
    line fits ``width`` columns (0: no limit); a field is dropped whole, never cut."""
    kept = list(fields)
    while width and len(kept) > 1 and len(sep.join(t for t, _ in kept)) > width:
        kept.remove(min(kept, key=lambda field: field[1]))
    return sep.join(t for t, _ in kept)


class Terminal:
    def __init__(self, settings: Settings, renderer: Any, prompt: Any | None, dialog: Any | None) -> None:
        self.settings = settings
        self.renderer = renderer
        self.prompt = prompt
        self.dialog = dialog
        self.session: SessionView | None = None
        self._totals: tuple[Usage, int, Cost] = (Usage(), 0, Cost())  # the toolbar's, until a session is attached

    @classmethod
    def create(cls, settings: Settings, *, interactive: bool, commands: Sequence[CommandSpec] | None = None) -> Terminal:
        """The renderer, and on a terminal the prompt; ``commands``: completed at it (None: known
        later, see ``set_commands``). The approval dialog is made when first asked for."""
        from rich.console import Console

        from repl.ui.render import Renderer

        # On a terminal the size is asked of the terminal at each draw, so a resize re-renders
        # the live area at the new width; COLUMNS/LINES are a snapshot from the start.
        environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        console = Console(highlight=False, _environ=environ if interactive else None)
        terminal = cls(settings, None, None, None)
        terminal.renderer = Renderer(console, price=terminal.cost, escape_stops=interactive,
                                     show_reasoning=settings.show_reasoning)
        if interactive:
            from repl.ui.live import ctrl_c_interrupts
            from repl.ui.prompt import PromptInput

            ctrl_c_interrupts()

            terminal.prompt = PromptInput(
                history_path=settings.data_dir / "input_history",
                commands=commands,
                toolbar=terminal.toolbar,
                redact=redactor_for(settings),
            )
        return terminal

    def attach(self, session: SessionView) -> None:
        self.session = session

    def continue_totals(self, usage: Usage, prompt_tokens: int, cost: Cost) -> None:
        """The toolbar's usage, context and cost before the session is attached (a resume draws
        its prompt first: the figures come from its journal)."""
        self._totals = (usage, prompt_tokens, cost)

    def set_commands(self, commands: list[CommandSpec],
                     more: Callable[[], list[CommandSpec]] | None = None) -> None:
        """The slash commands completed at the prompt (no-op without one); ``more`` gives the
        ones that come later (an MCP server's prompts), asked at each completion."""
        if self.prompt is not None:
            self.prompt.set_commands(commands, more)

    def set_mentions(self, paths: Callable[[str], list[str]]) -> None:
        """The paths completed after ``@`` at the prompt (no-op without one)."""
        if self.prompt is not None:
            self.prompt.mentions.paths = paths

    def when_prompt_shown(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the prompt is on the screen; at once when there is no prompt."""
        if self.prompt is None:
            callback()
        else:
            self.prompt.when_shown(callback)

    def prefill(self, text: str) -> bool:
        """Put ``text`` in the input line of the next prompt, to edit (``/edit``); False without one."""
        if self.prompt is None:
            return False
        self.prompt.prefill(text)
        return True

    def echo(self, line: str) -> None:
        """A message the user did not type at the prompt (``glassloop "question"``), as if typed."""
        self.renderer.info("> " + line, "bold")

    def copy(self, text: str) -> bool:
        """Put ``text`` on the clipboard through the terminal (OSC 52, works over SSH);
        False when there is no terminal to ask."""
        if self.prompt is None:
            return False
        self.renderer.clipboard(text)
        return True

    # ---- input ---------------------------------------------------------------
    def read(self) -> str:
        """The next line, valid Unicode (typed bytes that are not UTF-8 become U+FFFD)."""
        if self.prompt is not None:
            with self.renderer.suspended():  # no spinner drawn over the input line
                return valid_text(self.prompt.read())
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return valid_text(line.rstrip("\n"))

    def _dialog(self) -> ApprovalDialog | None:
        """The approval dialog, made on first use; None without a terminal."""
        if self.dialog is None and self.prompt is not None:
            from repl.ui.approval_dialog import ApprovalDialog

            self.dialog = ApprovalDialog(self.renderer.console)
        return self.dialog

    def asker(self) -> _Asker | None:
        dialog = self._dialog()
        return _Asker(self, dialog) if dialog is not None else None

    def stepper(self) -> _Stepper | None:
        """Step mode's pauses; None without a terminal to pause in."""
        dialog = self._dialog()
        return _Stepper(self, dialog) if dialog is not None else None

    def confirm(self, question: str) -> bool:
        dialog = self._dialog()
        with self.renderer.suspended():
            return dialog.confirm(question) if dialog else False

    # ---- output --------------------------------------------------------------
    def render(self, event: Event) -> None:
        self._out(lambda: self.renderer(event))

    def _out(self, draw: Callable[[], None]) -> None:
        """``draw`` now; from another thread while the prompt reads (a notice of the session built
        behind the first prompt, of a tool or server loading), above the prompt's input line."""
        if self.prompt is None or not self.prompt.above(draw):
            draw()

    def set_verbose(self, on: bool | None) -> bool:
        """A usage line for every model call (also in one-call turns), or only in multi-step
        turns; None toggles. The new setting."""
        self.renderer.verbose = not self.renderer.verbose if on is None else on
        return self.renderer.verbose

    def set_reasoning(self, on: bool | None) -> bool:
        """Show the model's reasoning dimmed (True) or one line per call; None toggles."""
        self.renderer.show_reasoning = not self.renderer.show_reasoning if on is None else on
        return self.renderer.show_reasoning

    def stop_live(self) -> None:
        self.renderer.close()

    def waiting(self, status: str | None) -> None:
        """Progress while a local model is prepared (from a background thread); None when ready."""
        self.renderer.waiting(status)

    def recap(self, earlier: int, turns: list[dict[str, Any]]) -> None:
        """A resumed session's last turns, compactly (``journal.recap``)."""
        self.renderer.recap(earlier, turns)

    def pick_session(self, sessions: list[Any]) -> str | None:
        """The id of one of ``sessions`` (``journal.SessionInfo``, newest first) chosen with
        the arrow keys and Enter; None when cancelled or there is no terminal."""
        if self.prompt is None:
            return None
        from repl.ui.picker import pick, session_rows

        width = self.renderer.console.width
        with self.renderer.suspended():
            chosen = pick("resume which session? (↑ ↓, Enter; Esc cancels)", session_rows(sessions, width - 4))
        return None if chosen is None else sessions[chosen].id

    def pick(self, title: str, rows: list[str], at: int = 0) -> int | None:
        """The index of one of ``rows`` chosen with the arrow keys and Enter (``/rewind``); None
        when cancelled or there is no terminal."""
        if self.prompt is None:
            return None
        from repl.ui.picker import pick

        width = self.renderer.console.width - 4
        with self.renderer.suspended():
            return pick(title, [row[:width] for row in rows], at=at)

    def header(self, provider: str, model: str, approval: str, session_id: str) -> None:
        self.renderer.header(provider, model, approval, session_id)

    def info(self, text: str) -> None:
        self._out(lambda: self.renderer.notice(text))

    def error(self, text: str) -> None:
        self._out(lambda: self.renderer.error(text))

    def lines(self, lines: list[str]) -> None:
        for line in lines:
            self.renderer.info(line)

    def marked(self, pieces: list[tuple[str, bool]]) -> None:
        from rich.text import Text

        from repl.ui.escape import clean

        self.renderer.print(Text.assemble(*((clean(text), "bold reverse" if hit else "") for text, hit in pieces)))

    @property
    def width(self) -> int:
        """The output's columns (80 in a pipe)."""
        return self.renderer.console.width

    def page(self, blocks: list[tuple[str, Any]]) -> None:
        """``blocks`` (``/trace --raw``): ``heading`` and ``note`` lines, ``json`` values whole,
        indented and highlighted (None: "none"), every character a terminal could act on shown
        as a ``\\u`` escape; through the pager when taller than the screen (``repl.ui.pager``)."""
        from rich.console import Group
        from rich.highlighter import JSONHighlighter
        from rich.text import Text

        from repl.ui.escape import clean, json_display
        from repl.ui.pager import show

        shown = [JSONHighlighter()(Text(json_display(value, indent=2))) if kind == "json" and value is not None
                 else Text("(none: the call failed or was stopped before it was answered)" if kind == "json"
                           else clean(str(value)), "bold" if kind == "heading" else "dim")
                 for kind, value in blocks]
        show(self.renderer.console, Group(*shown), self.renderer.print)

    def table(self, title: str, columns: list[str], rows: Sequence[tuple[str, ...]], keep: tuple[str, ...] = ()) -> None:
        self.renderer.table(title, columns, rows, keep)

    def paged(self) -> AbstractContextManager[None]:
        """Output inside through the pager when taller than the screen (``repl.ui.pager``)."""
        return self.renderer.paged()

    def cost(self, usage: Usage) -> float | None:
        """USD of ``usage`` at the active model's price; None when unknown."""
        return usd(usage, price_for(self.session.settings if self.session else self.settings))

    def toolbar(self, width: int = 0) -> str:
        """'openai · gpt-4o-mini · approvals ask · 1,234 tokens · context 3% · $0.01' (the banner's
        words); narrower than ``width`` columns by dropping whole fields, least important first.
        Before the session is attached (the first prompt is drawn while it is built), the
        settings' and ``continue_totals``'."""
        s = self.session
        settings = s.settings if s is not None else self.settings
        mode, stepping = (s.approver.mode, s.stepping.stepper is not None) if s is not None else (settings.approval, False)
        usage, prompt_tokens, cost = (s.usage, s.last_prompt_tokens, s.cost) if s is not None else self._totals
        active = settings.active
        window = context_window_for(settings)
        fields = [(active.name, 3), (active.model, 5), (f"approvals {mode}", 4),
                  ("step mode" if stepping else "", 4),
                  (f"{usage.total:,} tokens", 0),
                  (f"context {100 * prompt_tokens / window:.0f}%" if window else "", 2),
                  (cost.text() if cost.usd or cost.unpriced or price_for(settings) else "cost unknown", 1)]
        return fit_fields([f for f in fields if f[0]], width)

    def goodbye(self, session: SessionView) -> None:
        self.renderer.notice(self._kept(session))
        active = session.settings.active
        if active.embedded and active.keep_warm_s > 0:  # the server outlives us (embedded/server.py)
            minutes = f"{active.keep_warm_s / 60:.0f} min" if active.keep_warm_s >= 60 else f"{active.keep_warm_s:.0f} s"
            self.renderer.notice(f"the local model stays loaded for the next glassloop: it exits after {minutes} "
                                 "unused (keep_warm_s = 0 unloads it at exit)")

    @staticmethod
    def _kept(session: SessionView) -> str:
        """What of the session is kept, one line."""
        if branch := session.kept_branch:  # /rewind cut every turn: they are the branch
            return f"no turns left; the turns rewound are kept as branch {branch} (glassloop --resume {branch})"
        if not session.saved:  # a session without a turn is not kept, nor one whose journal failed (it said so)
            return "nothing saved" if session.turn_count() else "no turns: nothing saved"
        from repl.ui.event_views import plural

        u = session.usage
        resume = f" · resume with glassloop --resume {session.session_id}"
        return (f"session {session.session_id}: {plural(session.turn_count(), 'turn')} · "
                f"{u.total:,} tokens · {session.cost.text()}{resume}")
