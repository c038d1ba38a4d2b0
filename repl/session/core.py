"""The session core: one builder behind every door (the REPL, ``ask``, ``/compare``, ``/retry``).

A ``SessionCore`` holds a session's state (history, turns, the undo ledger, totals) and
its services (provider, registry with MCP servers and user tools, trace, journal,
approver), and sends every event through one bus: the door's surface (a terminal, or
plain lines for scripts), the trace, the journal and the turn's accounting all
subscribe to it. A door differs from another only by a ``Door`` and by what it
subscribes, never by a copy of the core: a fix or a speed-up made here reaches them all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repl.archive.journal import (
    Journal,
    find_session,
    load_checked,
    prompt_meta,
    saved_prompt,
    split_branch,
)
from repl.archive.recap import (
    TurnNote,
    endpoint_of,
    resumed_line,
    resumed_on,
    session_endpoint,
    totals,
)
from repl.archive.typed_numbers import NotANumber
from repl.config.load import ConfigError, Settings, with_overrides
from repl.config.redact import redactor_for
from repl.config.settings import ApprovalMode
from repl.loop.agent import Runner, SessionBudget, request_tools
from repl.loop.approval import Allow, ApprovalRequest, Approver, Decision, Deny
from repl.loop.compaction import Compacted, compact
from repl.loop.context import ContextWindow, messages_tokens
from repl.loop.cost import Cost, price_for, session_budget
from repl.loop.events import Emit, Event, ModelUsage, Notice, TurnFinished, TurnUndone, Usage
from repl.loop.history import History
from repl.loop.hooks import Hooks, Instead, TurnView
from repl.loop.routing import Routing
from repl.loop.stepping import Stepping
from repl.providers.base import Provider, ProviderError, SystemPrompt, ToolCall
from repl.session.instructions import Instructions, load_instructions
from repl.session.mentions import find_mentions
from repl.session.runtime import (
    LazyProvider,
    McpStart,
    build_registry,
    make_provider,
    new_id,
    not_saved,
    open_trace,
    start_mcp,
    system_prompt_for,
    wait_for_mcp,
    with_current_advice,
)
from repl.session.seams import Surface, TurnRecord
from repl.session.user_tools import UserTools
from tools import store
from tools.results import error_result
from tools.safe_io import StoreError
from tools.undo import Reverted, revert

if TYPE_CHECKING:
    from repl.session.user_hooks import UserHooks
    from repl.tracing.otel import OtelExport
    from repl.tracing.trace import Trace
    from tools.mcp_client import McpManager
    from tools.registry import Registry

DRY_RUN = "a dry run: side effects are not carried out"  # /compare, replay, eval
NOT_RUN = ("{name} was not run: a dry run runs glassloop's own read-only tools only ({name} comes "
           "from {source}); `glassloop eval` and `glassloop replay` run it when given --call {name}")
UNSAVED = "this session (no journal, no --resume)"  # what goes when the journal cannot be written


@dataclass(frozen=True)
class Door:
    """What a door changes of the core: parameters, never a copy of it."""

    name: str
    journal: bool = True  # a resumable journal (the REPL's); ask and /compare leave none
    trace: bool = True  # a trace of the turns (/compare's dry runs are not traced)
    trace_file: Path | None = None  # the trace asked for by name (ask --trace-file): no turn without it
    warm: bool = False  # import the provider's SDK while the rest starts (ask: its turn comes at once)
    user_tools_wait_s: float = 30.0  # how long the first turn waits for the user's tool files
    approval: ApprovalMode | None = None  # the mode, when not the settings' (ask: only --yes allows)
    dry_run: bool = False  # side effects denied without asking (/compare): see DryRun, NotOurs
    calls: frozenset[str] = frozenset()  # a dry run's tools run for real all the same (--call NAME)
    # with no saved prompt state, the embedded model evaluates the session's prompt at once, in the
    # background (the REPL: a question typed within seconds meets a warm model; ask's turn builds it)
    build_state: bool = False


REPL = Door("repl", build_state=True)


@dataclass
class DryRun(Approver):
    """The approver of a dry run (``/compare``): every side effect denied but those of the tools
    the person named (``calls``: ``--call NAME``), nobody asked."""

    mode: ApprovalMode = "read-only"
    calls: frozenset[str] = frozenset()

    def will_ask(self, request: ApprovalRequest) -> bool:
        return False

    def needs_person(self, request: ApprovalRequest) -> bool:
        return False

    def decide(self, request: ApprovalRequest, validate: Callable[[dict[str, Any]], str | None]) -> Decision:
        return Allow("mode") if request.name in self.calls else Deny("mode", DRY_RUN)


@dataclass(frozen=True)
class NotOurs(Hooks):
    """A dry run's read-only calls: glassloop's own tools run; another's (an MCP server's, a tool
    file's or package's) says it is read-only in its own word only, so it runs when named
    (``calls``) and is otherwise answered with a ``not_run`` result saying how to allow it."""

    calls: frozenset[str] = frozenset()

    def before_tool_call(self, turn: TurnView, call: ToolCall, side_effects: bool) -> Instead | None:
        tool = turn.registry.get(call.name)
        if side_effects or tool is None or tool.source == "built-in" or call.name in self.calls:
            return None
        return Instead(error_result("not_run", NOT_RUN.format(name=call.name, source=tool.source)))


class Bus:
    """One event stream, many subscribers, called in the order they subscribed."""

    def __init__(self) -> None:
        self._subscribers: list[Emit] = []

    def subscribe(self, subscriber: Emit) -> None:
        self._subscribers.append(subscriber)

    def __call__(self, event: Event) -> None:
        for subscriber in self._subscribers:
            subscriber(event)


@dataclass
class SessionCore:
    settings: Settings
    ui: Surface
    interactive: bool  # a person at a terminal answers questions (approvals, trust, step mode)
    session_id: str = field(default_factory=new_id)
    history: History = field(default_factory=History)
    door: Door = REPL
    shared_registry: Registry | None = field(default=None, repr=False)  # /compare runs on the REPL's tools
    shared_provider: LazyProvider | None = field(default=None, repr=False)  # eval's cases: one model (server) for all
    turns: list[TurnRecord] = field(default_factory=list)  # this run's turns: what /undo can take back
    ledger: list[TurnRecord] = field(default_factory=list)  # every turn of the session, resumed and undone too
    turn_number: int = 0  # the last turn's number: numbers continue across a resume, never repeat
    usage: Usage = field(default_factory=Usage)
    cost: Cost = field(default_factory=Cost)
    context: ContextWindow = field(default_factory=ContextWindow)  # request sizes across turns
    last_prompt_tokens: int = 0
    stepping: Stepping = field(default_factory=Stepping)  # step mode (/step, --step) and the last request sent
    provider_failure: ProviderError | None = None  # why the last turn could not reach a model
    prompt_blocked: str | None = None  # why a hook of the user's kept the last message back
    instructions: Instructions | None = None  # AGENTS.md as read for the system prompt (None: read when it is made)
    _resumed_on: str | None = None  # the line saying a resume moved to the session's provider or model
    _branch_line: str | None = None  # the line saying a branch was opened as a new session
    _provider: LazyProvider | None = None
    _router: Routing | None = None  # the router's hook, made for the first turn of a routing profile
    _hooks_started: str | None = None  # the session whose session_start hooks ran
    _writes: list[store.StoreWrite] = field(default_factory=list)
    _model_calls: list[ModelUsage] = field(default_factory=list)
    _turn_cost: Cost = field(default_factory=Cost)

    def __post_init__(self) -> None:
        self.registry: Registry = (self.shared_registry if self.shared_registry is not None
                                   else build_registry(self.settings, on_write=self._on_write))
        self._provider = self.shared_provider
        self.approver = DryRun(calls=self.door.calls) if self.door.dry_run else Approver(
            self.door.approval or self.settings.approval, self.ui.asker() if self.interactive else None)
        if not self.history.system_prompt.text:
            self.history.system_prompt = self._system_prompt()
        self.bus = Bus()
        self.bus.subscribe(self.ui.render)
        self.bus.subscribe(self._to_trace)
        self.bus.subscribe(self._account)
        self.bus.subscribe(self._to_journal)
        self.trace: Trace | None = None
        self._open_trace()
        self.otel: OtelExport | None = None
        if self.settings.otel_export and self.door.trace:  # the SDK is imported only then
            from repl.tracing.otel import open_otel

            self.otel = open_otel(self.settings, lambda: self.session_id, redactor_for(self.settings),
                                  self._background_notice)
            if self.otel is not None:
                self.bus.subscribe(self.otel)
        self.journal: Journal | None = None
        self.mcp: McpManager | None = None  # once started, with servers configured
        self.mcp_start: McpStart | None = None  # the servers as the first turn found them
        self.state_build: threading.Thread | None = None  # building the embedded model's prompt state
        self.user_tools = UserTools(self.settings, self.registry, self._background_notice,
                                    self.ui.confirm if self.interactive else None)

    # ---- the bus's own subscribers -------------------------------------------
    def emit(self, event: Event) -> None:
        self.bus(event)

    def _to_trace(self, event: Event) -> None:
        if trace := self.trace:  # read once: a failed write drops it
            trace(event)

    def _account(self, event: Event) -> None:
        if isinstance(event, ModelUsage):
            self._model_calls.append(event)
            self._turn_cost += Cost.of(event.usage, price_for(self.settings))
            self.last_prompt_tokens = event.usage.input_tokens

    def _to_journal(self, event: Event) -> None:
        if self.journal:
            self.journal.sync(self.history)

    def _background_notice(self, text: str) -> None:
        """A notice from another thread: shown and traced, the journal is left alone."""
        event = Notice(text)
        self.ui.render(event)
        self._to_trace(event)

    # ---- trace and journal ---------------------------------------------------
    def _open_trace(self) -> None:
        """The trace of ``session_id`` (one file per session; a resumed one appends). A trace
        asked for by name that cannot be written raises OSError: the door decides."""
        if self.trace is not None:
            self.trace.close()
        self.trace = None
        if not self.door.trace:
            return
        try:
            self.trace = open_trace(self.settings, self.session_id, self.door.trace_file, say=self._trace_failed)
        except OSError as exc:
            if self.door.trace_file is not None:
                raise
            self.ui.info(not_saved("the trace", self.settings.trace_dir, exc))

    def _trace_failed(self, line: str) -> None:
        """A trace record could not be written: the session goes on without a trace (``/trace`` says so)."""
        trace, self.trace = self.trace, None
        if trace is not None:
            trace.close()
        self.ui.info(line)

    def open_journal(self, path: Path | None = None, stored: list[Any] | None = None,
                     branch_of: str | None = None) -> None:
        """A new session's journal, or a resumed one's at ``path`` (``stored``: its messages as
        written, when they were read already); ``branch_of``: the new session opens that branch
        (``ID@k``), its meta record says so."""
        if not self.door.journal:
            return
        folder = self.settings.data_dir / "sessions"
        try:
            if path is None:
                meta = {"session": self.session_id, **endpoint_of(self.settings.active),
                        **prompt_meta(self.history.system_prompt), **({"branch_of": branch_of} if branch_of else {})}
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

    @property
    def saved(self) -> bool:
        """Whether this session is on disk with a turn to resume."""
        return self.journal is not None and bool(self.history.turn_starts()) and self.journal.path.exists()

    @property
    def kept_branch(self) -> str | None:
        """``ID@k``, the branch the last ``/rewind`` kept of this session's turns, while it has none
        of its own left to resume (None otherwise)."""
        if self.saved or not self.journal or not self.journal.branch or not self.journal.path.exists():
            return None
        return f"{self.session_id}@{self.journal.branch}"

    def turn_count(self) -> int:
        return sum(1 for t in self.ledger if t.restore is None and not t.undone)

    def new_session(self) -> str | None:
        """Start a new session (``/reset``): new id, journal and trace; the old one stays
        whole on disk. Returns the old id when it was saved with a turn."""
        old = self.session_id if self.saved else None
        if self.journal:
            self.journal.close()
        self.session_id = new_id()
        self.instructions = None  # a new session reads AGENTS.md again
        self.history = History(self._system_prompt())
        self.turns.clear()
        self.ledger.clear()
        self.turn_number, self.usage, self.cost, self.last_prompt_tokens = 0, Usage(), Cost(), 0
        self.context = ContextWindow()
        self._open_trace()
        self.open_journal()
        return old

    def resume(self, key: str) -> bool:
        """Continue the saved session ``key`` (an id, its start, ``last``) where it ran, with its
        history, numbers, trace and journal; ``ID@k``: its k-th branch (``/rewind``), opened as a
        new session so the journal it came from stays as it is. False after one line."""
        try:
            session, branch = split_branch(key)
        except NotANumber as exc:
            self.ui.error(f"cannot resume: {exc}")
            return False
        path = find_session(self.settings.data_dir / "sessions", session)
        if path is None:
            self.ui.error("no saved session with a turn yet" if key == "last"
                          else f"no saved session matches {key!r} (see /sessions)")
            return False
        try:
            loaded = load_checked(path, branch)
        except StoreError as exc:
            self.ui.error(f"cannot resume: {exc.message}")
            return False
        if self.journal:
            self.journal.close()
        self._go_where_it_ran(session_endpoint(loaded.meta, loaded.turns))
        self.session_id = path.stem if branch is None else new_id()
        self._branch_line = None if branch is None else (
            f"branch {path.stem}@{branch} opened as a new session {self.session_id}; {path.stem} is unchanged "
            "(/rewind undid the branch's changes to todos and notes: they are not made again)")
        self.instructions = None  # the journal's system prompt holds the instructions it started with
        self.history = History.from_json({"system_prompt": saved_prompt(loaded.meta) or self._system_prompt(),
                                          "messages": loaded.messages})
        self.turns.clear()
        self.continue_numbers(loaded.turns if branch is None else [])
        self.context = ContextWindow()
        self._open_trace()
        if branch is not None:
            self.open_journal(branch_of=f"{path.stem}@{branch}")  # written by its first turn
        else:
            self.open_journal(path, loaded.stored)
        if self.journal and branch is None:
            self.journal.sync(self.history)  # records the repair of a turn cut off mid-way
        if loaded.notes:
            self.emit(Notice(f"the journal {path.name} was damaged; resumed what was valid: "
                             + "; ".join(loaded.notes)))
        return True

    def resumed_lines(self) -> list[str]:
        """What a resume says after its recap: the branch opened, the session's size, where it
        went when that is not what the configuration chooses."""
        size = resumed_line(self.session_id, len(self.history.turn_starts()), len(self.history.messages))
        return [line for line in (self._branch_line, size, self._resumed_on) if line]

    def _go_where_it_ran(self, endpoint: dict[str, Any]) -> None:
        """A resumed session's provider, base URL, API and model, unless a flag chose them
        (``recap.resumed_on``); the line that says so is one of ``resumed_lines``."""
        settings, self._resumed_on = resumed_on(self.settings, endpoint)
        if settings is not self.settings:
            self.settings = settings
            if self._provider is not None:
                self.restart_provider()

    def continue_numbers(self, notes: list[dict[str, Any]]) -> None:
        """Usage, cost, context share and turn numbers go on from the journal's turn records."""
        checked = [n for n in map(TurnNote.parse, notes) if n is not None]
        self.ledger = [TurnRecord.from_note(n) for n in checked]
        self.usage, self.cost, self.last_prompt_tokens = totals(checked)
        self.turn_number = max([t.number for t in self.ledger] + [len(self.history.turn_starts())])

    # ---- services ------------------------------------------------------------
    def provider_if_ready(self) -> Provider | None:
        """The provider when it is built already (never waits, e.g. for Tab completion)."""
        return self._provider.ready() if self._provider is not None else None

    def provider(self) -> Provider:
        if self._provider is None:
            self.start_provider()
        assert self._provider is not None
        return self._provider.get()

    def provider_to_share(self) -> LazyProvider:
        """The provider being built (started now if it is not), for cores that share it (``shared_provider``)."""
        if self._provider is None:
            self.start_provider()
        assert self._provider is not None
        return self._provider

    def start_provider(self) -> None:
        profile, settings, warm = self.settings.active, self.settings, self.door.warm

        def build() -> Provider:
            try:
                provider = make_provider(profile, settings, self.ui.waiting)
            finally:
                self.ui.waiting(None)
            if notice := getattr(provider, "notice", None):  # the local server's start
                self._background_notice(notice)
            if warm:  # the SDK's import, while MCP servers start and user tools load
                try:
                    getattr(provider, "warm", lambda: None)()
                except Exception:  # noqa: BLE001 - the first model call meets it again and says why
                    pass
            build_state = getattr(provider, "build_prompt_state", None)  # the embedded model's
            if self.door.build_state and build_state and getattr(provider, "prompt_state_missing", False):
                self._build_prompt_state(build_state)
            return provider

        self._provider = LazyProvider(build).start()

    def _build_prompt_state(self, build: Callable[[list[dict[str, Any]], list[dict[str, Any]]], Any]) -> None:
        """The embedded server evaluates this session's first request (its system text, the tools
        offered, a placeholder question) on a thread of its own and saves the prompt state: the
        first question then waits only for what is left of it. Exit meanwhile stops the server;
        the state file is written whole or not at all."""
        system = with_current_advice(self.settings.active, self.registry, self.history.system_prompt)
        messages = [*system.messages(), {"role": "user", "content": "Hello"}]
        self.state_build = threading.Thread(
            target=build, args=(messages, request_tools(self.registry.schemas())), daemon=True,
            name="glassloop-prompt-state")
        self.state_build.start()

    def switch(self, **changes: Any) -> bool:
        """Change provider/model/approval for the next turn."""
        try:
            self.settings = with_overrides(self.settings, **changes)
        except ConfigError as exc:
            self.ui.error(str(exc))
            return False
        self.approver.mode = self.settings.approval
        if "provider" in changes or "model" in changes:
            self.restart_provider()
            self.context = ContextWindow()  # another model counts tokens its own way
        return True

    def restart_provider(self) -> None:
        self._close_provider()
        self.start_provider()

    def start_background(self) -> None:
        """The provider (unless a turn already started it), MCP servers and user tools."""
        self.start_mcp()  # first: a server's start overlaps the SDK's import
        if self._provider is None:
            self.start_provider()
        self.start_user_tools()
        self.warm_router()  # while a person types, or while ask's provider starts

    def start_mcp(self) -> None:
        """Connect the configured MCP servers in the background (no-op without any)."""
        self.mcp = start_mcp(self.settings, self.registry, self._background_notice)

    def start_user_tools(self) -> None:
        """Load the user's own tools (packages, files) in the background."""
        self.user_tools.start()

    def close(self, *, detach: bool = False) -> None:
        """Everything the session holds; ``detach``: MCP servers still running stop on their own
        (ask's exit does not wait for them)."""
        if self.otel is not None:  # first: a collector that is down is told while the trace is open
            self.otel.close()
            self.otel = None
        self._close_provider()
        if self.mcp is not None:
            self.mcp.close(detach=detach)
        if self.journal:
            self.journal.close()
        if self.trace:
            self.trace.close()

    def _close_provider(self) -> None:
        if self._provider is not None and self._provider is not self.shared_provider:  # its owner closes a shared one
            self._provider.close()
        self._provider = None

    def _system_prompt(self) -> SystemPrompt:
        """The system prompt of a new session: the dialect's, the project's instructions, the user's own."""
        if self.instructions is None:
            self.instructions = load_instructions(self.settings)
        extra = "\n\n".join(p for p in (self.instructions.prompt(), self.settings.system_prompt.strip()) if p)
        return system_prompt_for(self.settings.active, self.registry, extra)

    # ---- turns ---------------------------------------------------------------
    def run_turn(self, text: str) -> TurnFinished | None:
        """One turn through the loop; None when no model could be reached (``provider_failure``
        says why), a hook of the user's kept the message back (``prompt_blocked``) or the user
        cancelled while it started."""
        self.provider_failure = self.prompt_blocked = None
        hooks = self.user_hooks()
        if hooks is not None and not self._hooks_let_through(hooks, text):
            return None
        try:
            provider = self.provider()
        except ProviderError as exc:
            self.provider_failure = exc
            self.ui.error(exc.message)
            self._provider = None
            return None
        except KeyboardInterrupt:
            self.ui.info("cancelled while the model was starting")
            return None
        self.mcp_ready()  # the first turn sees every server's tools
        if not self.turns:
            self.user_tools.wait(self.door.user_tools_wait_s)
        self.history.system_prompt = with_current_advice(self.settings.active, self.registry,
                                                         self.history.system_prompt)
        self._writes, self._model_calls, self._turn_cost = [], [], Cost()
        budget = session_budget(self.settings, self.usage, self.cost)
        if budget is not None and budget.max_usd and budget.price is None and not self.turns:
            self.emit(Notice(f"session_budget_usd is set but {self.settings.active.model} has no price: "
                             "only the token budget applies"))
        number = self.turn_number = self.turn_number + 1
        before = len(self.history.messages)
        try:
            with self.runner(provider, self.emit, budget) as runner:
                finished = runner.run_turn(self.history, text, number)
        finally:
            self.ui.stop_live()
            if self.journal:
                self.journal.sync(self.history)
        self.usage += finished.usage
        self.cost += self._turn_cost
        self._record(TurnRecord(finished.turn, finished, self._model_calls, self._writes, self._turn_cost,
                                question=text, in_history=len(self.history.messages) > before))
        if self.turns[-1].in_history:
            self._index_turn()
        if hooks is not None:
            try:
                hooks.turn_stopped(finished)
            except KeyboardInterrupt:
                self.ui.info("a stop hook was cancelled")
        return finished

    def user_hooks(self) -> UserHooks | None:
        """The user's own hooks (``[[hooks.EVENT]]``) for this session; None without any, and in a
        dry run, where nothing is real."""
        if self.door.dry_run or not self.settings.hooks.configured():
            return None
        from repl.session.user_hooks import user_hooks  # with hooks only

        return user_hooks(self.settings, self.session_id, self.emit)

    def _hooks_let_through(self, hooks: UserHooks, text: str) -> bool:
        """The session's first turn runs its session_start hooks; every message passes the
        user_prompt_submit hooks, which may keep it back (``prompt_blocked``: their reason)."""
        try:
            if self._hooks_started != self.session_id:
                self._hooks_started = self.session_id
                hooks.session_started(self.turn_number + 1)
            self.prompt_blocked = hooks.prompt_submitted(self.turn_number + 1, text)
        except KeyboardInterrupt:
            self.ui.info("cancelled while a hook ran: the message was not sent")
            return False
        return self.prompt_blocked is None

    def mcp_ready(self) -> None:
        """Wait, once, for the MCP servers still starting (at most ``[mcp] startup_timeout_s``
        after their start): the first turn, an MCP prompt or an ``@SERVER:URI`` does."""
        if self.mcp is not None and self.mcp_start is None:
            self.mcp_start = wait_for_mcp(self.mcp, self.ui.waiting)
            if line := self.mcp_start.line():
                self.emit(Notice(line))

    def _read_resource(self, server: str, uri: str) -> tuple[str, int]:
        """An MCP server's resource named in a message (``@SERVER:URI``), once the servers started."""
        assert self.mcp is not None  # only configured servers' names are read as resources
        self.mcp_ready()
        return self.mcp.read_resource(server, uri)

    def with_mentions(self, text: str) -> str | None:
        """``text`` with the files it mentions (``@path``) attached, each said in a notice (shown,
        traced); None, after one line each, when one cannot be attached (outside the root, a
        folder, too large...): the person meant that file, so nothing is sent."""
        if "@" not in text:
            return text
        found = find_mentions(text, self.settings.files_root, list(self.mcp.servers if self.mcp else ()),
                              self._read_resource)
        for line in found.refused:
            self.ui.error(line)
        if found.refused:
            return None
        for name in found.plain:
            if "/" in name or "." in name:  # looks like a path: a typo, most likely
                self.emit(Notice(f"no file {name} in {self.settings.files_root}: @{name} is sent as typed"))
        for attachment in found.attachments:
            self.emit(Notice(attachment.line()))
        return found.message(text)

    def runner(self, provider: Provider, emit: Emit, budget: SessionBudget | None = None) -> Runner:
        """The loop's collaborators from this session's parts; the caller closes it (its tool pool).
        The router's hook comes first, so step mode shows the call with the tools it chose."""
        dry: tuple[Hooks, ...] = (NotOurs(self.door.calls),) if self.door.dry_run else ()
        own = () if (hooks := self.user_hooks()) is None else (replace(hooks, emit=emit),)
        return Runner(provider, self.registry, self.approver, self.settings.guards, emit,
                      self.context, budget, (*self._routing(), self.stepping, *dry, *own))

    def _routing(self) -> tuple[Routing, ...]:
        """The router's hook, when the active profile routes (``router``); one per session."""
        profile = self.settings.active
        # a choice is carried by a grammar (the embedded model) or the API's tool_choice (native
        # calls); text calls on another server could not keep to it
        if not profile.router or not (profile.embedded or profile.tool_call_format == "native"):
            return ()
        if self._router is None:
            from repl.embedded.chain import chain

            self._router = Routing(chain(self.registry))
        return (self._router,)

    def warm_router(self) -> None:
        """Load the router's model on a thread while the rest starts (its first question waits)."""
        for routing in self._routing():
            threading.Thread(target=routing.warm, daemon=True, name="glassloop-router").start()

    def _record(self, record: TurnRecord) -> None:
        record.prompt_tokens = self.last_prompt_tokens
        self.turns.append(record)
        self.ledger.append(record)
        if self.journal:
            self.journal.note_turn({**record.note(), **endpoint_of(self.settings.active)})

    def compact(self, instructions: str = "") -> Compacted | None:
        """Replace all but the last turn with the model's summary (``/compact``); ``undo()`` reverts it.

        None when there is too little to compact. Raises ProviderError and
        KeyboardInterrupt with the conversation unchanged.
        """
        with self.runner(self.provider(), lambda event: None) as runner:  # the summary is not streamed
            done = compact(self.history.system_prompt, self.history.messages, runner, instructions)
        if done is None:
            return None
        before = list(self.history.messages)
        self.history.messages[:] = done.messages
        self._model_calls, self._turn_cost = [], Cost()
        self.emit(ModelUsage(1, done.usage, done.latency_s, "stop", model=done.model))  # shown, traced, counted, journaled
        self.usage += done.usage
        self.cost += self._turn_cost
        finished = TurnFinished(self.turn_number, "answer", 1, 0, done.usage, round(done.latency_s, 3))
        self.last_prompt_tokens = done.after
        self._record(TurnRecord(self.turn_number, finished, self._model_calls, [], self._turn_cost, restore=before))
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

    def _index_turn(self) -> None:
        """The turn just ended, into the search index beside the journal (``search.Index``)."""
        if self.journal is None or not self.journal.path.exists():
            return
        from repl.archive.search import Index, turn_text

        starts = self.history.turn_starts()
        messages = redactor_for(self.settings).value(self.history.messages[starts[-1]:])
        Index(self.journal.path.parent).add_turn(
            turn_text(self.session_id, 0, len(starts), messages, time.time()), self.journal.path)

    def rewind(self, number: int) -> tuple[list[Reverted], int | None]:
        """Take the conversation back to before its turn ``number`` (``/rewind``): the store writes
        of the turns cut are undone together, by the rules of ``undo``, and the turns stay in the
        journal as a branch. Returns what was undone and the branch's number (None: no journal).
        Raises ``rewind.RewindRefused`` and StoreError (another writer changed the same items, a
        store cannot be written) with nothing changed."""
        from repl.session.rewind import plan

        cut = plan(self.history, self.turns, self.registry, number)
        reverted = revert([w for record in reversed(cut.records) for w in record.writes])
        branch = None
        if self.journal:
            self.journal.sync(self.history)
            branch = self.journal.note_branch(cut.at, number)
        del self.history.messages[cut.at:]
        del self.turns[len(self.turns) - len(cut.records):]
        for record in cut.records:
            self._undone(record)
        live = [t for t in self.ledger if not t.undone]
        for record in reversed(live[len(live) - cut.earlier:]):  # resumed turns: the journal marks the same
            self._undone(record)
        return reverted, branch

    def _undone(self, record: TurnRecord) -> None:
        """The turn stays in /usage and the session's spent tokens, marked undone; the
        context share goes back to what it was before it."""
        record.undone = True
        if record.restore is None:  # a turn, not a /compact: the trace's read-back marks it
            self._to_trace(TurnUndone(record.number))
        before = [t for t in self.ledger if not t.undone]
        self.last_prompt_tokens = before[-1].prompt_tokens if before else 0
        if self.journal:
            self.journal.sync(self.history)
            self.journal.note_undo()
