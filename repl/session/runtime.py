"""Building the parts of a session from ``Settings``.

The CLI calls these; the chat session and the one-shot mode share them.
Providers are built lazily: importing the openai SDK (and starting a local
model) happens on the first turn or in a background thread, never before the
prompt is shown.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repl.config.load import ProviderSettings, Settings
from repl.config.redact import redactor_for
from repl.providers.base import Message, SystemPrompt

if TYPE_CHECKING:
    from tools.registry import ToolSchema

if TYPE_CHECKING:  # the REPL imports this module before its prompt: the rest is imported where used
    import datetime as dt

    from repl.providers.base import Provider
    from repl.tracing.trace import Trace
    from tools.mcp_client import McpManager
    from tools.registry import Registry, Tool
    from tools.store import StoreWrite


def new_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def build_registry(settings: Settings, on_write: Callable[[StoreWrite], None] | None = None) -> Registry:
    """The built-in tools; ``on_write`` is told of each store write a call makes (for ``/undo``)."""
    from tools import build_tools
    from tools.registry import Registry

    return Registry(build_tools(
        todos_path=settings.todos_file,
        notes_path=settings.notes_file,
        files_root=settings.files_root,
        weather=settings.weather,
    ), on_write)


def offered_tools(registry: Registry) -> list[Tool]:
    """The registry's tools in the order a request offers them (``request_tools``)."""
    from repl.loop.agent import request_tools

    return [tool for schema in request_tools(registry.schemas()) if (tool := registry.get(schema["name"]))]


def system_prompt_for(profile: ProviderSettings, registry: Registry, extra: str = "",
                      today: dt.date | None = None) -> SystemPrompt:
    """The system prompt a session on ``profile`` starts with: its dialect's instructions (the
    embedded model's, with advice made from the tools offered) or the full ones, then the date
    and the user's own ``extra``."""
    from repl.embedded.dialect import Dialect
    from repl.loop.prompts import system_prompt

    own = Dialect.of(profile).instructions(offered_tools(registry))
    if own is None:
        return system_prompt(today, extra)
    instructions, advice = own
    return system_prompt(today, extra, instructions, advice)


def with_current_advice(profile: ProviderSettings, registry: Registry, system: SystemPrompt) -> SystemPrompt:
    """``system`` with the advice of ``profile``'s dialect made for the tools offered now (user
    tools and MCP servers arrive after the session's start); a prompt without advice stays as it is."""
    from repl.embedded.dialect import Dialect

    dialect = Dialect.of(profile)
    return dialect.with_advice(system, offered_tools(registry)) if dialect.compact_prompt else system


def not_saved(what: str, folder: Path, exc: OSError) -> str:
    """The one line shown when ``folder`` cannot be written: the session goes on without ``what``."""
    return f"{what} will not be saved: cannot write {folder} ({exc.strerror or exc})"


def open_trace(settings: Settings, session_id: str, path: Path | None = None, *,
               say: Callable[[str], None]) -> Trace | None:
    """The session's trace; None when tracing is off. OSError when the file cannot be opened.

    The session's own file (no ``path``) is made by its first turn; a ``path`` asked for
    by name is opened now. A record that cannot be written (the folder takes no new file,
    the disk is full) ends the trace with one line to ``say``; the session goes on."""
    from repl.tracing.trace import JsonlWriter, Trace, WireLog, wire_path

    if path is None and not settings.trace_enabled:
        return None
    target = path or settings.trace_dir / f"{session_id}.jsonl"
    writer = JsonlWriter(target, redactor_for(settings), lazy=path is None,
                         on_error=lambda exc: say(not_saved("the trace", target.parent, exc)))
    wire = WireLog(wire_path(writer.path), writer.redact, settings.trace_raw_max_kb * 1024) if settings.trace_raw else None
    return Trace(writer, session_id, new_id(), wire)


def make_provider(profile: ProviderSettings, settings: Settings,
                  status: Callable[[str | None], None] | None = None) -> Provider:
    """A provider for ``profile``; for an embedded one (``local``, ``local-large``) this starts the model server.

    ``status`` receives progress text while a local model is prepared and
    started (None when done).
    """
    from repl.providers.base import ProviderError

    if profile.api == "responses" and profile.tool_call_format != "native":
        raise ProviderError("other", f"provider '{profile.name}': tool_call_format = "
                            f"\"{profile.tool_call_format}\" works only with api = \"chat\"")
    server = (_start_local(profile, settings, status or (lambda text: None))
              if profile.embedded else None)
    served = replace(profile, base_url=server.base_url, api_key=server.api_key or profile.api_key) if server else profile
    provider = _adapter(served)
    return _WithServer(provider, server) if server else provider


def _adapter(profile: ProviderSettings) -> Provider:
    """The wire adapter for ``profile`` (each imports openai: kept off start-up). Tool calls as
    text are the embedded package's adapter, worded by the profile's dialect; the hosted
    adapters never import that package."""
    if profile.api == "responses":
        from repl.providers.responses import ResponsesProvider

        return ResponsesProvider(profile)
    if profile.tool_call_format == "text":
        from repl.embedded.textchat import TextChatProvider

        return TextChatProvider(profile)
    from repl.providers.chat import ChatProvider

    return ChatProvider(profile)


class _WithServer:
    """A provider that owns the local model server it talks to: closing stops both."""

    def __init__(self, provider: Provider, server: Any) -> None:
        self._provider = provider
        self._server = server

    def __getattr__(self, name: str) -> Any:  # name, model, context_window, stream, ...
        return getattr(self._provider, name)

    @property
    def notice(self) -> str | None:
        """One line for the user about the server's start (its saved prompt state), or None."""
        return self._server.notice

    @property
    def prompt_state_missing(self) -> bool:
        """The server has no usable saved prompt state: its first completion builds it."""
        return bool(self._server.state_missing)

    def build_prompt_state(self, messages: list[Message], tools: list[ToolSchema]) -> bool:
        """Have the server evaluate ``messages`` (a session's first request: its system text and a
        placeholder question) as this provider words them with ``tools``, and save the prompt
        state. False when it did not finish (the server stopped)."""
        wire = getattr(self._provider, "wire_messages", None)
        return bool(self._server.build_state(wire(messages, tools) if wire else messages))

    def close(self) -> None:
        try:
            self._provider.close()
        finally:
            self._server.stop()


def local_problem(profile: ProviderSettings) -> str | None:
    """What an embedded profile lacks (its extra, or its weights when no model_path is
    given), one line; None when it can start. Imports the local server module."""
    from repl.embedded.server import missing_extra_message
    from repl.embedded.weights import BUNDLED

    problem = missing_extra_message(BUNDLED[profile.name])
    return None if problem and profile.model_path and "weights" in problem else problem


def _start_local(profile: ProviderSettings, settings: Settings, status: Callable[[str | None], None]) -> Any:
    from repl.embedded.dialect import Dialect
    from repl.embedded.server import LocalServer, LocalServerError
    from repl.embedded.weights import BUNDLED, MissingExtra, ModelIntegrityError, ensure_model
    from repl.providers.base import ProviderError

    if problem := local_problem(profile):
        raise ProviderError("missing_extra", problem)

    def assembling(done: int, total: int) -> None:
        status(f"preparing the model weights (first run)… {100 * done // max(total, 1)}%")

    try:
        model_path = (Path(profile.model_path).expanduser() if profile.model_path
                      else ensure_model(settings.data_dir, assembling, spec=BUNDLED[profile.name]))
        server = LocalServer(model_path, n_ctx=profile.n_ctx, threads=profile.threads,
                             call_temperature=Dialect.of(profile).call_temperature,
                             log_path=settings.state_dir / "local-server.log", keep_warm_s=profile.keep_warm_s,
                             on_wait=lambda s: status(f"starting the local model… {s:.0f} s"))
        server.start()
    except (MissingExtra, ModelIntegrityError, LocalServerError, OSError) as exc:
        raise ProviderError("missing_extra" if isinstance(exc, MissingExtra) else "other",
                            str(exc).splitlines()[0]) from None
    return server


@dataclass
class LazyProvider:
    """Builds the real provider in the background; ``get()`` waits for it."""

    build: Callable[[], Provider]
    _result: Provider | BaseException | None = None
    _done: threading.Event = field(default_factory=threading.Event)

    def start(self) -> LazyProvider:
        threading.Thread(target=self._run, daemon=True, name="glassloop-provider").start()
        return self

    def _run(self) -> None:
        try:
            self._result = self.build()
        except BaseException as exc:  # handed to the caller of get()
            self._result = exc
        finally:
            self._done.set()

    def ready(self) -> Provider | None:
        """The provider if it is built already (never waits); None while building or after a failure."""
        if self._done.is_set() and not isinstance(self._result, BaseException):
            return self._result
        return None

    def close(self) -> None:
        """Close the provider if it was built; one still building is left to finish on its own."""
        provider = self.ready()
        if provider is not None:
            try:
                provider.close()
            except BaseException:  # noqa: BLE001 - closing at the end must not fail the session
                pass

    def get(self) -> Provider:
        while not self._done.wait(0.05):  # short waits keep Ctrl-C responsive
            pass
        if isinstance(self._result, BaseException):
            raise self._result
        assert self._result is not None
        return self._result


def start_mcp(settings: Settings, registry: Registry, notify: Callable[[str], None]) -> Any:
    """Connect to the configured MCP servers in the background and register their tools
    as ``SERVER__tool``; returns the ``McpManager`` (None when no server is configured).
    The mcp SDK is imported on the manager's own thread, never here."""
    if not settings.mcp_servers:
        return None
    from tools.mcp_client import McpManager, ServerConfig
    from tools.mcp_convert import tool_name

    def register(server: str, tools: list) -> None:
        registry.remove(tool_name(server, ""))
        clash = [t.name for t in tools if registry.get(t.name) is not None]
        if clash:
            notify(f"MCP server {server!r}: skipped tools whose names are taken: {', '.join(clash)}")
        for refused in registry.add(t for t in tools if t.name not in clash):
            notify(f"MCP server {server!r}: {refused}")

    configs = [ServerConfig.from_table(name, table) for name, table in settings.mcp_servers.items()]
    return McpManager(configs, on_notice=notify, on_tools=register,
                      call_timeout_s=settings.guards.tool_timeout_s,
                      connect_timeout_s=settings.mcp_startup_timeout_s,
                      log_dir=settings.state_dir / "mcp", redact=redactor_for(settings)).start()


@dataclass(frozen=True)
class McpStart:
    """The MCP servers as the first turn found them: those ready, and why each other is not."""

    ready: list[str]
    not_ready: dict[str, str]

    def line(self) -> str | None:
        """One line naming the servers not ready; None when every one is."""
        if not self.not_ready:
            return None
        one = len(self.not_ready) == 1
        names = ", ".join(f"{name} ({why})" for name, why in self.not_ready.items())
        return f"MCP server{'' if one else 's'} not ready, {'its' if one else 'their'} tools not offered: {names}"

    def as_json(self) -> dict[str, Any]:
        return {"ready": self.ready, "not_ready": self.not_ready}


def wait_for_mcp(mcp: McpManager, status: Callable[[str | None], None]) -> McpStart:
    """The first turn's wait for the MCP servers still starting, the REPL's and ``ask``'s: at most
    ``[mcp] startup_timeout_s`` after their start. ``status`` is told what it waits for while it
    does, and None after."""
    shown = False

    def tick(starting: list[str], elapsed: float) -> None:
        nonlocal shown
        shown = True
        status(f"waiting for MCP server{'s' if len(starting) > 1 else ''} {', '.join(starting)}… {elapsed:.0f} s")

    try:
        not_ready = mcp.wait_started(tick)
    finally:
        if shown:
            status(None)
    return McpStart([name for name in mcp.servers if name not in not_ready], not_ready)
