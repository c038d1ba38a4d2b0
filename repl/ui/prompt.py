"""The input line: prompt_toolkit with history, slash-command completion and a toolbar.

Enter submits; Alt-Enter or Esc-Enter inserts a newline; a bracketed paste
stays one message however many lines it has. ``read()`` raises EOFError on
Ctrl-D (empty line) and KeyboardInterrupt on Ctrl-C; the session decides
what they mean.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import CancelledError
from pathlib import Path
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.application.current import set_app
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, merge_completers
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.output import Output

from repl.ui.escape import clean

ArgCompleter = Callable[[str], list[str]]
EDIT_COMMAND = "/edit"  # what Esc Esc at an empty prompt sends
CommandSpec = tuple[str, str, "ArgCompleter | None"]  # name, help, argument completer
COMMANDS_WAIT_S = 10.0  # the most a completion waits for commands not known yet
ABOVE_WAIT_S = 2.0  # the most output from another thread waits to be drawn above the prompt


class SlashCompleter(Completer):
    """Completes ``/command`` names (with their help) and then the command's arguments.

    ``commands`` None: not known yet (the first prompt is drawn while the session that
    holds them is built); a completion asked for before ``set_commands`` waits for it."""

    def __init__(self, commands: Iterable[CommandSpec] | None = ()) -> None:
        self.commands: dict[str, tuple[str, ArgCompleter | None]] = {}
        self.more: Callable[[], Iterable[CommandSpec]] | None = None  # commands that come and go
        self._known = threading.Event()
        if commands is not None:
            self.set_commands(commands)

    def set_commands(self, commands: Iterable[CommandSpec],
                     more: Callable[[], Iterable[CommandSpec]] | None = None) -> None:
        """The commands completed; ``more`` gives those known only later (an MCP server's
        prompts), asked at each completion."""
        self.commands = {name.lstrip("/"): (help_text, args) for name, help_text, args in commands}
        self.more = more
        self._known.set()

    def _all(self) -> dict[str, tuple[str, ArgCompleter | None]]:
        try:
            later = list(self.more()) if self.more is not None else []
        except Exception:  # a broken source must not break typing
            later = []
        return {**self.commands, **{name: (text, args) for name, text, args in later}}

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterator[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or "\n" in text:
            return
        self._known.wait(COMMANDS_WAIT_S)
        commands = self._all()
        name, space, rest = text[1:].partition(" ")
        if not space:
            for candidate in sorted(commands):
                if candidate.startswith(name):
                    yield Completion("/" + candidate, -len(text), display_meta=clean(commands[candidate][0]))
            return
        yield from self._arguments(commands.get(name), rest)

    def _arguments(self, spec: tuple[str, ArgCompleter | None] | None, rest: str) -> Iterator[Completion]:
        if spec is None or spec[1] is None:
            return
        word = rest.rpartition(" ")[2]
        try:
            candidates = spec[1](rest)
        except Exception:  # a broken completer must not break typing
            return
        for candidate in candidates:
            if candidate.startswith(word):
                yield Completion(candidate, -len(word))


class MentionCompleter(Completer):
    """Completes ``@path`` (a word that starts with ``@``) with the paths ``paths`` gives for
    what follows the ``@``: the session's, inside the file tools' root. Nothing until it is set."""

    def __init__(self) -> None:
        self.paths: ArgCompleter | None = None

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterator[Completion]:
        word = document.get_word_before_cursor(WORD=True)
        if not word.startswith("@") or self.paths is None:
            return
        try:
            candidates = self.paths(word[1:])
        except Exception:  # a broken completer must not break typing
            return
        for candidate in candidates:
            yield Completion("@" + candidate, -len(word), display=clean(candidate))


def key_bindings() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("enter")
    @bindings.add("c-j")  # a bare line feed (pexpect's sendline, some terminals) submits too
    def _submit(event: Any) -> None:
        event.current_buffer.validate_and_handle()

    @bindings.add("escape", "enter")  # also Alt-Enter, which terminals send as Esc Enter
    def _newline(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    @bindings.add("escape", "escape")  # as in Codex: edit the last message again
    def _edit_last(event: Any) -> None:
        if not event.current_buffer.text:
            event.app.exit(result=EDIT_COMMAND)

    return bindings


class PromptInput:
    def __init__(
        self,
        history_path: Path | str | None = None,
        commands: Sequence[CommandSpec] | None = (),  # None: set later (``set_commands``)
        toolbar: Callable[[int], str] | None = None,  # the text for a width in columns
        *,
        message: str = "> ",
        input: Input | None = None,
        output: Output | None = None,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self.completer = SlashCompleter(commands)
        self.mentions = MentionCompleter()
        self._toolbar = toolbar
        self._default = ""
        self.session: PromptSession[str] = PromptSession(
            message,
            history=_history(history_path, redact),
            completer=merge_completers([self.completer, self.mentions]),
            complete_while_typing=True,
            auto_suggest=AutoSuggestFromHistory(),
            multiline=True,  # Enter is re-bound to submit; the buffer may hold newlines
            prompt_continuation=lambda width, line_number, wrap_count: "." * (width - 1) + " ",
            key_bindings=key_bindings(),
            bottom_toolbar=self._toolbar_text if toolbar else None,
            enable_open_in_editor=False,
            input=input,
            output=output,
        )

    def set_commands(self, commands: Iterable[CommandSpec],
                     more: Callable[[], Iterable[CommandSpec]] | None = None) -> None:
        self.completer.set_commands(commands, more)

    def prefill(self, text: str) -> None:
        """The next ``read()`` starts with ``text`` in the line, to edit (``/edit``)."""
        self._default = text

    def when_shown(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once, right after the prompt is next drawn."""
        app = self.session.app

        def once(_: object) -> None:
            app.after_render -= once
            callback()

        app.after_render += once

    def above(self, draw: Callable[[], None]) -> bool:
        """From another thread while a read waits: ``draw`` (output) above the input line, which
        is erased first and drawn again below. False, nothing drawn, when no read is running or
        this is the read's own thread: the caller draws as it is."""
        app, loop = self.session.app, self.session.app.loop
        if not app.is_running or loop is None or _running_loop() is loop:
            return False
        drawn = threading.Event()

        def run() -> None:
            draw()
            drawn.set()

        async def in_terminal() -> None:
            with set_app(app):
                await run_in_terminal(run)

        try:
            asyncio.run_coroutine_threadsafe(in_terminal(), loop).result(ABOVE_WAIT_S)
        except (RuntimeError, TimeoutError, CancelledError):  # the read ended meanwhile
            pass
        return drawn.is_set()

    def read(self) -> str:
        """The next message (may span lines). EOFError on Ctrl-D, KeyboardInterrupt on Ctrl-C;
        Esc Esc on an empty line returns ``/edit``."""
        default, self._default = self._default, ""
        return self.session.prompt(default=default)

    def _toolbar_text(self) -> str:
        try:
            width = self.session.app.output.get_size().columns - 1  # the last column wraps in some terminals
            return clean(self._toolbar(width)) if self._toolbar else ""
        except Exception:  # the toolbar is decoration; never let it break input
            return ""


class RedactedFileHistory(FileHistory):
    """The history file gets each entry with secrets blanked (``redact``); this
    session's own up-arrow history keeps what was typed, also when the file cannot take it."""

    def __init__(self, filename: str, redact: Callable[[str], str] | None = None) -> None:
        super().__init__(filename)
        self.redact = redact or (lambda text: text)

    def store_string(self, string: str) -> None:
        try:
            super().store_string(self.redact(string))
        except OSError:  # a full disk: the line is kept for this session only, never lost
            pass


def _history(path: Path | str | None, redact: Callable[[str], str] | None = None) -> History:
    if path is None:
        return InMemoryHistory()
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600))  # private, as a shell's history
    except OSError:  # no writable data dir (the session says so): keep this session's lines in memory
        return InMemoryHistory()
    return RedactedFileHistory(str(path), redact)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
