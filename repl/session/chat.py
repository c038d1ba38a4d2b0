"""The interactive session: read → slash command or turn → render, until exit.

Owns the conversation, the journal (crash-safe, flushed per event), the
trace, the approval policy and the undo stack of store writes. The provider
is built in a background thread once the prompt is up, so start-up never
waits for the openai SDK import or a local model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from repl.config.load import ConfigError, Settings, with_overrides
from repl.config.redact import redactor_for
from repl.loop.agent import Runner, SessionBudget
from repl.loop.approval import Approver, Asker
from repl.loop.compaction import Compacted, compact
from repl.loop.context import ContextWindow, messages_tokens
from repl.loop.cost import Cost, price_for, session_budget
from repl.loop.events import Emit, Event, ModelUsage, Notice, TurnFinished, Usage
from repl.loop.history import History
from repl.loop.prompts import system_prompt
from repl.loop.stepping import Stepper, Stepping
from repl.providers.base import Provider, ProviderError
from repl.session import commands
from repl.session.journal import (
    Journal,
    SessionInfo,
    find_session,
    load_checked,
    recent_sessions,
)
from repl.session.recap import (
    TurnNote,
    endpoint_of,
    recap,
    resumed_line,
    resumed_on,
    session_endpoint,
    totals,
)
from repl.session.runtime import (
    LazyProvider,
    McpStart,
    build_registry,
    make_provider,
    new_id,
    not_saved,
    open_trace,
    start_mcp,
    wait_for_mcp,
)
from repl.session.user_tools import UserTools
from tools import store
from tools.safe_io import StoreError
from tools.undo import Reverted, revert

if TYPE_CHECKING:
    from repl.tracing.trace import Trace
    from tools.mcp_client import McpManager

EXIT_WINDOW_S = 2.0
USER_TOOLS_WAIT_S = 30.0  # how long the first turn waits for the user's tool files to load
UNSAVED = "this session (no journal, no --resume)"  # what goes when the journal cannot be written


class UI(Protocol):
    """What the session and its commands need of a terminal (``repl.ui.terminal.Terminal``
    is one; tests use stubs). Text goes through it already escaped by the UI, never raw."""

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

    def confirm(self, question: str) -> bool: ...

    def pick_session(self, sessions: list[SessionInfo]) -> str | None:
        """The id of the session chosen; None when cancelled or without a terminal."""
        ...

    def asker(self) -> Asker | None:
        """Who approves tool calls; None: no one to ask."""
        ...

    def stepper(self) -> Stepper | None:
        """Step mode's pauses; None without a terminal to pause in."""
        ...

    # ---- output
    def render(self, event: Event) -> None: ...
    def info(self, text: str) -> None: ...
    def error(self, text: str) -> None: ...
    def lines(self, lines: list[str]) -> None: ...
    def table(self, title: str, columns: list[str], rows: Sequence[tuple[str, ...]],
              keep: tuple[str, ...] = ()) -> None: ...
    def json(self, value: Any) -> None: ...
    def recap(self, earlier: int, turns: list[dict[str, Any]]) -> None: ...

    def waiting(self, status: str | None) -> None:
        """Progress while the provider starts (from a background thread); None when ready."""
        ...

    def stop_live(self) -> None:
        """End the live area (spinner, streaming text) of a turn or command."""
        ...

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
    restore: list[dict[str, Any]] | None = None  # /compact: the messages it replaced (undo puts them back)
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


@dataclass
class ChatSession:
    settings: Settings
    ui: UI
    interactive: bool
    session_id: str = field(default_factory=new_id)
    history: History = field(default_factory=History)
    turns: list[TurnRecord] = field(default_factory=list)  # this run's turns: what /undo can take back
    ledger: list[TurnRecord] = field(default_factory=list)  # every turn of the session, resumed and undone too
    turn_number: int = 0  # the last turn's number: numbers continue across a resume, never repeat
    usage: Usage = field(default_factory=Usage)
    cost: Cost = field(default_factory=Cost)
    context: ContextWindow = field(default_factory=ContextWindow)  # request sizes across turns
    last_prompt_tokens: int = 0
    shell_context: list[str] = field(default_factory=list)  # !command output the user added to the next message
    stepping: Stepping = field(default_factory=Stepping)  # step mode (/step, --step) and the last request sent
    _provider: LazyProvider | None = None
    _writes: list[store.StoreWrite] = field(default_factory=list)
    _model_calls: list[ModelUsage] = field(default_factory=list)
    _turn_cost: Cost = field(default_factory=Cost)
    _resumed_on: str | None = None  # the line saying a resume moved to the session's provider or model

    def __post_init__(self) -> None:
        self.registry = build_registry(self.settings, on_write=self._on_write)  # what /undo takes back
        self.approver = Approver(self.settings.approval, self.ui.asker() if self.interactive else None)
        if not self.history.system_prompt:
            self.history.system_prompt = self._system_prompt()
        self.trace: Trace | None = None
        self._open_trace()
        self.journal: Journal | None = None
        self.mcp: McpManager | None = None  # once started, with servers configured
        self.mcp_start: McpStart | None = None  # the servers as the first turn found them
        self.user_tools = UserTools(self.settings, self.registry, self._background_notice,
                                    self.ui.confirm if self.interactive else None)

    # ---- lifecycle ---------------------------------------------------------
    def _open_trace(self) -> None:
        """The trace of ``session_id`` (one file per session; a resumed one appends)."""
        if self.trace is not None:
            self.trace.close()
        try:
            self.trace = open_trace(self.settings, self.session_id, say=self._trace_failed)
        except OSError as exc:
            self.trace = None
            self.ui.info(not_saved("the trace", self.settings.trace_dir, exc))

    def _trace_failed(self, line: str) -> None:
        """A trace record could not be written: the session goes on without a trace (``/trace`` says so)."""
        trace, self.trace = self.trace, None
        if trace is not None:
            trace.close()
        self.ui.info(line)

    @property
    def saved(self) -> bool:
        """Whether this session is on disk with a turn to resume."""
        return self.journal is not None and bool(self.history.turn_starts()) and self.journal.path.exists()

    def turn_count(self) -> int:
        return sum(1 for t in self.ledger if t.restore is None and not t.undone)

    def new_session(self) -> str | None:
        """Start a new session (``/reset``): new id, journal and trace; the old one stays
        whole on disk. Returns the old id when it was saved with a turn."""
        old = self.session_id if self.saved else None
        if self.journal:
            self.journal.close()
        self.session_id = new_id()
        self.history = History(self._system_prompt())
        self.turns.clear()
        self.ledger.clear()
        self.turn_number, self.usage, self.cost, self.last_prompt_tokens = 0, Usage(), Cost(), 0
        self.context = ContextWindow()
        self._open_trace()
        self.open_journal()
        return old

    def open_journal(self, path: Path | None = None, stored: list[Any] | None = None) -> None:
        """A new session's journal, or a resumed one's at ``path`` (``stored``: its messages as
        written, when they were read already)."""
        folder = self.settings.data_dir / "sessions"
        try:
            if path is None:
                meta = {"session": self.session_id, **endpoint_of(self.settings.active),
                        "system_prompt": self.history.system_prompt}
                self.journal = Journal(folder / f"{self.session_id}.jsonl", redactor_for(self.settings), meta,
                                       lazy=True, on_error=self._journal_failed)
            else:
                self.journal = Journal(path, redactor_for(self.settings), lazy=True, on_error=self._journal_failed)
                self.journal.adopt(self.history, stored)
        except OSError as exc:
            self.journal = None
            self.ui.info(not_saved(UNSAVED, path.parent if path else folder, exc))

    def _journal_failed(self, exc: OSError) -> None:
        """A journal record could not be written (the folder takes no new file, the disk is full):
        the session goes on, unsaved."""
        journal, self.journal = self.journal, None
        self.ui.info(not_saved(UNSAVED, journal.path.parent if journal else self.settings.data_dir / "sessions", exc))

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
        path = find_session(self.settings.data_dir / "sessions", key)
        if path is None:
            self.ui.error("no saved session with a turn yet" if key == "last"
                          else f"no saved session matches {key!r} (see /sessions)")
            return False
        try:
            loaded = load_checked(path)
        except StoreError as exc:
            self.ui.error(f"cannot resume: {exc.message}")
            return False
        if self.journal:
            self.journal.close()
        self._go_where_it_ran(session_endpoint(loaded.meta, loaded.turns))
        self.session_id = path.stem
        self.history = History.from_json({"system_prompt": loaded.meta.get("system_prompt") or self._system_prompt(),
                                          "messages": loaded.messages})
        self.turns.clear()
        self._continue_numbers(loaded.turns)
        self.context = ContextWindow()
        self._open_trace()
        self.open_journal(path, loaded.stored)
        if self.journal:
            self.journal.sync(self.history)  # records the repair of a turn cut off mid-way
        if loaded.notes:
            self.emit(Notice(f"the journal {path.name} was damaged; resumed what was valid: "
                             + "; ".join(loaded.notes)))
        if show:
            self.show_resumed()
        return True

    def show_resumed(self) -> None:
        """The last few turns, compactly, and where the session stands."""
        earlier, recent = recap(self.history.messages)
        self.ui.recap(earlier, recent)
        self.ui.info(resumed_line(self.session_id, len(self.history.turn_starts()), len(self.history.messages)))
        if self._resumed_on:
            self.ui.info(self._resumed_on)

    def _go_where_it_ran(self, endpoint: dict[str, Any]) -> None:
        """A resumed session's provider, base URL, API and model, unless a flag chose them
        (``recap.resumed_on``); the line that says so is shown with the recap."""
        settings, self._resumed_on = resumed_on(self.settings, endpoint)
        if settings is not self.settings:
            self.settings = settings
            if self._provider is not None:
                self._close_provider()
                self.start_provider()

    def _continue_numbers(self, notes: list[dict[str, Any]]) -> None:
        """Usage, cost, context share and turn numbers go on from the journal's turn records."""
        checked = [n for n in map(TurnNote.parse, notes) if n is not None]
        self.ledger = [TurnRecord.from_note(n) for n in checked]
        self.usage, self.cost, self.last_prompt_tokens = totals(checked)
        self.turn_number = max([t.number for t in self.ledger] + [len(self.history.turn_starts())])

    def provider_if_ready(self) -> Provider | None:
        """The provider when it is built already (never waits, e.g. for Tab completion)."""
        return self._provider.ready() if self._provider is not None else None

    def provider(self) -> Provider:
        if self._provider is None:
            self.start_provider()
        assert self._provider is not None
        return self._provider.get()

    def start_provider(self) -> None:
        profile, settings = self.settings.active, self.settings

        def build() -> Provider:
            try:
                provider = make_provider(profile, settings, self.ui.waiting)
            finally:
                self.ui.waiting(None)
            if notice := getattr(provider, "notice", None):  # the local server's start
                self._background_notice(notice)
            return provider

        self._provider = LazyProvider(build).start()

    def switch(self, **changes: Any) -> bool:
        """Change provider/model/approval for the next turn."""
        try:
            self.settings = with_overrides(self.settings, **changes)
        except ConfigError as exc:
            self.ui.error(str(exc))
            return False
        self.approver.mode = self.settings.approval
        if "provider" in changes or "model" in changes:
            self._close_provider()
            self.start_provider()
            self.context = ContextWindow()  # another model counts tokens its own way
        return True

    def close(self) -> None:
        self._close_provider()
        if self.mcp is not None:
            self.mcp.close()
        if self.journal:
            self.journal.close()
        if self.trace:
            self.trace.close()

    def _close_provider(self) -> None:
        if self._provider is not None:
            self._provider.close()
        self._provider = None

    def start_background(self) -> None:
        """The provider (unless a turn already started it), MCP servers and user tools."""
        if self._provider is None:
            self.start_provider()
        self.start_mcp()
        self.start_user_tools()

    def start_mcp(self) -> None:
        """Connect the configured MCP servers in the background (no-op without any)."""
        self.mcp = start_mcp(self.settings, self.registry, self._background_notice)

    def start_user_tools(self) -> None:
        """Load the user's own tools (packages, files) in the background."""
        self.user_tools.start()

    def _background_notice(self, text: str) -> None:
        """A notice from another thread: shown and traced, the journal is left alone."""
        event = Notice(text)
        self.ui.render(event)
        if trace := self.trace:  # read once: a failed write on the main thread may drop it
            trace(event)

    def _system_prompt(self) -> str:
        return system_prompt(extra=self.settings.system_prompt,
                             compact=self.settings.active.embedded)

    # ---- turns -------------------------------------------------------------
    def emit(self, event: Event) -> None:
        self.ui.render(event)
        if self.trace:
            self.trace(event)
        if isinstance(event, ModelUsage):
            self._model_calls.append(event)
            self._turn_cost += Cost.of(event.usage, price_for(self.settings))
            self.last_prompt_tokens = event.usage.input_tokens
        if self.journal:
            self.journal.sync(self.history)

    def run_turn(self, text: str) -> TurnFinished | None:
        try:
            provider = self.provider()
        except ProviderError as exc:
            self.ui.error(exc.message)
            self._provider = None
            return None
        except KeyboardInterrupt:
            self.ui.info("cancelled while the model was starting")
            return None
        if self.mcp is not None and self.mcp_start is None:  # the first turn sees every server's tools
            self.mcp_start = wait_for_mcp(self.mcp, self.ui.waiting)
            if line := self.mcp_start.line():
                self.emit(Notice(line))
        if not self.turns:
            self.user_tools.wait(USER_TOOLS_WAIT_S)
        self._writes, self._model_calls, self._turn_cost = [], [], Cost()
        budget = session_budget(self.settings, self.usage, self.cost)
        if budget is not None and budget.max_usd and budget.price is None and not self.turns:
            self.emit(Notice(f"session_budget_usd is set but {self.settings.active.model} has no price: "
                             "only the token budget applies"))
        number = self.turn_number = self.turn_number + 1
        before = len(self.history.messages)
        try:
            with self._runner(provider, self.emit, budget) as runner:
                finished = runner.run_turn(self.history, text, number)
        finally:
            self.ui.stop_live()
            if self.journal:
                self.journal.sync(self.history)
        self.usage += finished.usage
        self.cost += self._turn_cost
        self._record(TurnRecord(finished.turn, finished, self._model_calls, self._writes, self._turn_cost,
                                question=text, in_history=len(self.history.messages) > before))
        return finished

    def _runner(self, provider: Provider, emit: Emit, budget: SessionBudget | None = None) -> Runner:
        """The loop's collaborators from this session's parts; the caller closes it (its tool pool)."""
        return Runner(provider, self.registry, self.approver, self.settings.guards, emit, self.context,
                      budget, self.stepping)

    def _record(self, record: TurnRecord) -> None:
        record.prompt_tokens = self.last_prompt_tokens
        self.turns.append(record)
        self.ledger.append(record)
        if self.journal:
            self.journal.note_turn({**record.note(), **endpoint_of(self.settings.active)})

    def set_step(self, on: bool) -> bool:
        """Step mode on or off; False (and one line) when there is no terminal to pause in."""
        stepper = self.ui.stepper() if on and self.interactive else None
        if on and stepper is None:
            self.ui.error("step mode needs a terminal: it pauses the loop for your keys")
            return False
        self.stepping.stepper = stepper
        return True

    def compact(self, instructions: str = "") -> Compacted | None:
        """Replace all but the last turn with the model's summary (``/compact``); ``undo()`` reverts it.

        None when there is too little to compact. Raises ProviderError and
        KeyboardInterrupt with the conversation unchanged.
        """
        with self._runner(self.provider(), lambda event: None) as runner:  # the summary is not streamed
            done = compact(self.history.system_prompt, self.history.messages, runner, instructions)
        if done is None:
            return None
        before = list(self.history.messages)
        self.history.messages[:] = done.messages
        if self.journal:
            self.journal.sync(self.history)
        call = ModelUsage(1, done.usage, done.latency_s, "stop")
        self.ui.render(call)
        if self.trace:
            self.trace(call)
        cost = Cost.of(done.usage, price_for(self.settings))
        self.usage += done.usage
        self.cost += cost
        finished = TurnFinished(self.turn_number, "answer", 1, 0, done.usage, round(done.latency_s, 3))
        self.last_prompt_tokens = done.after
        self._record(TurnRecord(self.turn_number, finished, [call], [], cost, restore=before))
        return done

    def _on_write(self, write: store.StoreWrite) -> None:
        self._writes.append(write)

    def undo(self) -> list[Reverted]:
        """Revert the last turn's store writes and remove it from the conversation
        (after ``/compact``: put the summarised turns back instead).

        Another process's changes to the same files are kept (``tools.undo.revert``); when
        they touched the same items, StoreError is raised and nothing changes.
        """
        if not self.turns:
            return []
        record = self.turns[-1]
        if record.restore is not None:  # a /compact: the summarised turns come back
            self.turns.pop()
            self.history.messages[:] = record.restore
            self._undone(record)
            self.last_prompt_tokens = messages_tokens(self.history.for_request())
            return []
        reverted = revert(record.writes)
        self.turns.pop()
        if record.in_history:  # a turn that left nothing must not take the one before with it
            self.history.drop_last_turn()
        self._undone(record)
        return reverted

    def _undone(self, record: TurnRecord) -> None:
        """The turn stays in /usage and the session's spent tokens, marked undone; the
        context share goes back to what it was before it."""
        record.undone = True
        before = [t for t in self.ledger if not t.undone]
        self.last_prompt_tokens = before[-1].prompt_tokens if before else 0
        if self.journal:
            self.journal.sync(self.history)
            self.journal.note_undo()

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
                self.ask(line)
            except KeyboardInterrupt:  # landed after the turn or command had ended (while drawing)
                self.ui.info("(interrupted)")

    def ask(self, text: str) -> None:
        if self.shell_context:  # the !command output the user chose to send along
            text = "\n\n".join([*self.shell_context, text])
            self.shell_context.clear()
        finished = self.run_turn(text)
        while (finished is not None and finished.stopped_by == "max_steps" and self.interactive
               and self.ui.confirm(f"stopped after {finished.steps} steps; continue for "
                                   f"{self.settings.guards.max_steps} more steps?")):
            finished = self.run_turn("Continue where you stopped.")

