"""The REPL's door: read → slash command or turn → render, until exit.

``ChatSession`` is the session core (``core.SessionCore``: the conversation, the journal,
the trace, the approvals, the undo ledger) with a terminal: the read loop, slash commands,
``!command``, resuming and picking sessions, step mode. The provider is built in a
background thread once the prompt is up, so start-up never waits for the openai SDK
import or a local model.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from repl.archive.journal import (
    recent_sessions,
)
from repl.archive.recap import recap
from repl.loop.stepping import TimedStepper
from repl.session import commands
from repl.session.core import SessionCore
from repl.session.seams import UI
from repl.session.templates import Templates, load_templates
from repl.ui.event_views import plural

EXIT_WINDOW_S = 2.0


@dataclass
class ChatSession(SessionCore):
    ui: UI  # the REPL's surface is a whole terminal
    shell_context: list[str] = field(default_factory=list)  # !command output the user added to the next message
    templates: Templates = field(default_factory=Templates)  # your own commands (/NAME)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.templates = load_templates(self.settings, commands.table().by_name)
        for line in self.templates.problems:
            self.ui.error(line)
        for line in self.templates.notices:
            self.ui.info(line)

    # ---- sessions ----------------------------------------------------------
    def pick(self) -> str | None:
        """A saved session's id chosen in the picker (newest first); None when there is
        none, no terminal, or the user cancelled (each says so)."""
        found = [s for s in recent_sessions(self.settings.data_dir / "sessions") if s.id != self.session_id]
        if not found:
            self.ui.info("no saved session with a turn yet")
            return None
        if not self.interactive:
            self.ui.error("no terminal to pick a session in: give its id, or 'last' (see /sessions)")
            return None
        chosen = self.ui.pick_session(found)
        if chosen is None:
            self.ui.info("no session picked")
        return chosen

    def resume(self, key: str, *, show: bool = True) -> bool:
        """Continue the saved session ``key`` (the core's ``resume``); ``show``: its recap too."""
        if not super().resume(key):
            return False
        if show:
            self.show_resumed()
        return True

    def show_resumed(self) -> None:
        """The last few turns, compactly, and where the session stands."""
        earlier, recent = recap(self.history.messages)
        self.ui.recap(earlier, recent)
        for line in self.resumed_lines():
            self.ui.info(line)

    def set_step(self, on: bool) -> bool:
        """Step mode on or off; False (and one line) when there is no terminal to pause in."""
        stepper = self.ui.stepper() if on and self.interactive else None
        if on and stepper is None:
            self.ui.error("step mode needs a terminal: it pauses the loop for your keys")
            return False
        self.stepping.stepper = TimedStepper(stepper, self.emit) if stepper is not None else None
        return True

    # ---- the read loop -----------------------------------------------------
    def loop(self, first: str = "", typed: Callable[[], str] | None = None) -> int:
        """Read and run lines until exit; ``first`` runs as if typed (``glassloop "question"``).
        ``typed``: the first read, made already (the first prompt is drawn before the session is
        built): it gives the line or raises what the read raised."""
        last_interrupt = 0.0
        while True:
            try:
                if first:
                    line, first = first, ""
                    self.ui.echo(line)
                else:
                    read, typed = typed or self.ui.read, None
                    line = read()
            except KeyboardInterrupt:
                now = time.monotonic()
                if now - last_interrupt < EXIT_WINDOW_S:
                    return 0
                last_interrupt = now
                self.ui.info("(Ctrl-C again or Ctrl-D to exit)")
                continue
            except EOFError:
                return 0
            if not line.strip():
                continue
            try:
                if line.lstrip().startswith("!"):
                    from repl.session.user_shell import run_shell  # rare: off the start path

                    run_shell(self, line.lstrip()[1:])
                    continue
                if line.lstrip().startswith("/"):
                    if commands.dispatch(self, line.strip()) == "exit":
                        return 0
                    continue
                self.send(line)
            except KeyboardInterrupt:  # landed after the turn or command had ended (while drawing)
                self.ui.info("(interrupted)")

    def send(self, text: str) -> None:
        """A message typed (or made by one of your commands): the files it mentions go with it;
        when one cannot, nothing is sent and the line comes back to the prompt to edit."""
        message = self.with_mentions(text)
        if message is None:
            self.ui.prefill(text)
            return
        self.ask(message)

    def ask(self, text: str) -> None:
        if self.shell_context:  # the !command output the user chose to send along
            text = "\n\n".join([*self.shell_context, text])
            self.shell_context.clear()
        finished = self.run_turn(text)
        while (finished is not None and finished.stopped_by == "max_steps" and self.interactive
               and self.ui.confirm(f"stopped after {plural(finished.steps, 'step')}; continue for "
                                   f"{plural(self.settings.guards.max_steps, 'more step')}?")):
            finished = self.run_turn("Continue where you stopped.")

