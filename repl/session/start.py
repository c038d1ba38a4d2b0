"""Starting the REPL: the header and the prompt first, the session built behind them.

Drawing the prompt needs the settings and the terminal only. The session (the
loop, the tools, the trace, the journal, the commands: most of our modules) is
imported and built on a thread once the prompt is drawn, and the first line
typed waits for it. A resume draws its recap and the toolbar's totals from a look
at the journal (``recap.peek``) and reads the journal whole behind the prompt too.
A first message from the command line, step mode, the session picker, a journal
the look declines, and a session without a terminal need the session before the
prompt: it is built first there.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from repl.archive.recap import Peek, peek_session, resumed_on
from repl.config.load import Settings
from repl.session.runtime import new_id

if TYPE_CHECKING:
    from repl.loop.events import Notice
    from repl.session.chat import ChatSession
    from repl.session.instructions import Instructions
    from repl.ui.terminal import Terminal
    from tools.mcp_offers import Resource

PICK = ""  # --resume without a value: pick a session


def run_chat(settings: Settings, *, resume: str | None = None, first: str = "", step: bool = False) -> int:
    from repl.ui.terminal import Terminal

    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    peeked = moved = None
    if interactive and not first and not step and resume not in (None, PICK):
        if (peeked := peek_session(settings.data_dir / "sessions", resume)) is not None:
            settings, moved = resumed_on(settings, peeked.endpoint)  # the header names where it goes
    ui = Terminal.create(settings, interactive=interactive)
    if interactive and not first and not step:
        if resume is None:
            return _prompt_first(settings, ui)
        if peeked is not None:
            return _prompt_first(settings, ui, peeked, moved)
    session = _open(settings, ui, interactive, None if resume else _instructions(settings))
    try:
        if resume == PICK:
            resume = session.pick()
            if resume is None and not interactive:
                return 1
        if resume:
            if not session.resume(resume, show=False):
                return 1
        else:
            session.open_journal()
        settings = session.settings  # a resume's: where the session ran
        ui.header(settings.active.name, settings.active.model, settings.approval, session.session_id)
        if resume:
            session.show_resumed()
        if step and session.set_step(True):
            from repl.loop.stepping import STEP_ON

            ui.info(STEP_ON)
        _trace(session, _announce(settings, ui, None if resume else session.instructions))
        # The SDK import and the tool loading hold the GIL for a while: drawing the prompt
        # first keeps them from slowing it; a first message from the command line cannot wait.
        if first:
            session.start_background()
        else:
            ui.when_prompt_shown(session.start_background)
        return _run(session, ui, first)
    finally:
        session.close()


def _prompt_first(settings: Settings, ui: Terminal, resumed: Peek | None = None, moved: str | None = None) -> int:
    """The header (and a resume's recap) and the prompt; the session built once it is drawn.
    ``moved``: the line saying the resume moved to the session's provider or model.
    Returns 1 when the journal to resume could not be read after all (its error said so)."""
    session_id = resumed.path.stem if resumed else new_id()
    ui.header(settings.active.name, settings.active.model, settings.approval, session_id)
    if resumed:
        ui.continue_totals(resumed.usage, resumed.prompt_tokens, resumed.cost)
        ui.recap(resumed.earlier, resumed.shown)
        ui.info(resumed.line)
        if moved:
            ui.info(moved)
    instructions = None if resumed else _instructions(settings)
    notices = _announce(settings, ui, instructions)
    built: Future[ChatSession | None] = Future()

    def build() -> None:
        try:
            session = _session(settings, ui, True, session_id, instructions)
            if resumed and not session.resume(session_id, show=False):  # read whole, checked: any notice
                session.close()
                ui.set_commands([])
                built.set_result(None)
                return
            if not resumed:
                session.open_journal()
            _attach(session, ui)
            _trace(session, notices)
            session.start_background()
        except BaseException as exc:  # handed to the main thread
            ui.set_commands([])  # a completion waiting for them stops waiting
            built.set_exception(exc)
        else:
            built.set_result(session)

    started: list[threading.Thread] = []

    def start() -> None:
        if not started:
            started.append(threading.Thread(target=build, daemon=True, name="glassloop-session"))
            started[0].start()

    # What start-up made (modules, settings, the terminal, a resume's look at its journal) lives
    # as long as the process: out of the collector's sight, a full collection that falls on the
    # first keystroke has little to scan (with a 1,000-turn resume it delayed the echo ~10 ms).
    gc.freeze()
    ui.when_prompt_shown(start)
    line, caught = "", None
    try:
        line = ui.read()
    except (EOFError, KeyboardInterrupt) as exc:  # the session's loop decides what they mean
        caught = exc
    start()  # in case the read ended before the prompt was drawn

    def typed() -> str:
        if caught is not None:
            raise caught
        return line

    session = built.result()
    if session is None:
        return 1
    try:
        return _run(session, ui, typed=typed)
    finally:
        session.close()


def _open(settings: Settings, ui: Terminal, interactive: bool, instructions: Instructions | None) -> ChatSession:
    return _attach(_session(settings, ui, interactive, None, instructions), ui)


def _session(settings: Settings, ui: Terminal, interactive: bool, session_id: str | None = None,
             instructions: Instructions | None = None) -> ChatSession:
    from repl.session.chat import ChatSession

    return ChatSession(settings, ui, interactive, session_id or new_id(), instructions=instructions)


def _instructions(settings: Settings) -> Instructions:
    """AGENTS.md as a new session's system prompt gets it, read before the prompt to say so."""
    from repl.session.instructions import load_instructions

    return load_instructions(settings)


def _attach(session: ChatSession, ui: Terminal) -> ChatSession:
    """``session`` attached to ``ui`` (the toolbar reads it from now on), its slash commands
    completed at the prompt."""
    from repl.session import commands
    from repl.session.commands.mcp_prompts import specs
    from repl.session.mentions import complete_mention

    def resources() -> list[Resource]:
        servers = list(session.mcp.servers.values()) if session.mcp else []
        return [r for s in servers if s.status == "ready" for r in s.resources]

    ui.attach(session)
    ui.set_commands(commands.table().specs(lambda: session) + session.templates.specs(), lambda: specs(session))
    ui.set_mentions(lambda prefix: complete_mention(session.settings.files_root, resources(), prefix))
    return session


def _announce(settings: Settings, ui: Terminal, instructions: Instructions | None = None) -> list[Notice]:
    """Before the first prompt: the AGENTS.md files read, the embedded model chosen for want of
    a key, or what an embedded profile lacks. Returns the notices shown, for the session's trace."""
    notices = []
    if instructions is not None and instructions.lines():
        from repl.loop.events import Notice

        for line in instructions.lines():
            notices.append(Notice(line))
            ui.render(notices[-1])
    if settings.provider_auto and settings.active.name == "local":
        from repl.loop.events import Notice

        notices.append(Notice("no API key or base URL configured: using the embedded local model "
                              "(set OPENAI_API_KEY or pass --provider/--base-url for a hosted one)"))
        ui.render(notices[-1])
    if settings.active.embedded:
        from repl.session.runtime import local_problem

        if problem := local_problem(settings.active):
            ui.error(problem)  # now, not after the first question
    return notices


def _trace(session: ChatSession, events: list[Notice]) -> None:
    for event in events:
        if session.trace:
            session.trace(event)


def _run(session: ChatSession, ui: Terminal, first: str = "", typed: Callable[[], str] | None = None) -> int:
    code = session.loop(first, typed)
    ui.goodbye(session)
    return code
