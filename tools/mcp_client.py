"""MCP servers as tools: connect in the background, register ``SERVER__tool``.

One daemon thread runs an asyncio loop holding every server connection (stdio
or streamable HTTP, through the official ``mcp`` SDK, imported only in that
thread). A call from the agent's worker thread is bridged onto the loop with
``run_coroutine_threadsafe`` and a timeout, and cancelled on the loop when the
call's cancel signal is set (the turn was interrupted or ran out of time), so
the worker thread is free at once. Nothing here raises into the
session: a server that fails to start is one ``on_notice`` line, and a server
that dies mid-session turns its calls into ``mcp_unavailable`` tool errors
until ``restart()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tools.cancel import Cancel
from tools.cancel import current as current_cancel
from tools.mcp_convert import NAME_OK, one_line, parameters_from, result_to_data, tool_name
from tools.registry import Tool, ToolError

Status = Literal["connecting", "ready", "failed", "lost", "stopped"]
_CONNECTION_CLOSED = -32000  # JSON-RPC code the SDK uses when the transport closed
STOP_GRACE_S = 0.5  # a stdio server's time to exit after its stdin closes, and after SIGTERM


@dataclass(frozen=True)
class ServerConfig:
    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    read_only_tools: tuple[str, ...] = ()
    timeout_s: float | None = None  # per call; None: the manager's default

    @classmethod
    def from_table(cls, name: str, table: dict[str, Any]) -> ServerConfig:
        """From one ``[mcp.servers.NAME]`` table of the settings."""
        return cls(
            name=name, command=table.get("command", ""), args=tuple(table.get("args", ())),
            env=dict(table.get("env", {})), cwd=table.get("cwd", ""), url=table.get("url", ""),
            headers=dict(table.get("headers", {})),
            read_only_tools=tuple(table.get("read_only_tools", ())),
            timeout_s=table.get("timeout_s") or None,
        )


class _RedactedLog:
    """The write end of a pipe (a server's stderr); a thread copies each line into ``log``
    redacted. Closing it (the exit stack) drops our copy; EOF comes once the server exits."""

    def __init__(self, log: Any, redact: Callable[[str], str]) -> None:
        read_fd, self._write_fd = os.pipe()
        self._log, self._redact = log, redact
        threading.Thread(target=self._copy, args=(read_fd,), daemon=True, name="glassloop-mcp-log").start()

    def fileno(self) -> int:
        return self._write_fd

    def __enter__(self) -> _RedactedLog:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._write_fd)

    def _copy(self, read_fd: int) -> None:
        with open(read_fd, encoding="utf-8", errors="replace") as source, self._log:
            for line in source:
                self._log.write(self._redact(line))
                self._log.flush()


@dataclass
class ServerState:
    config: ServerConfig
    status: Status = "connecting"
    error: str = ""
    tools: list[Tool] = field(default_factory=list)
    client: Any = None  # mcp.Client while connected
    scope: Any = None  # anyio.CancelScope around the connection's lifetime
    finished: asyncio.Event | None = None  # set when the serving task has unwound


class McpManager:
    """Every configured MCP server, connected from one background event loop."""

    def __init__(self, configs: Iterable[ServerConfig], *,
                 on_notice: Callable[[str], None] | None = None,
                 on_tools: Callable[[str, list[Tool]], None] | None = None,
                 call_timeout_s: float = 30.0, connect_timeout_s: float = 10.0,
                 log_dir: Path | None = None, redact: Callable[[str], str] | None = None) -> None:
        self.servers = {c.name: ServerState(c) for c in configs}
        self.on_notice = on_notice or (lambda text: None)
        self.on_tools = on_tools or (lambda server, tools: None)
        self.call_timeout_s, self.connect_timeout_s = call_timeout_s, connect_timeout_s
        self.log_dir = log_dir
        self.redact = redact  # applied to every line of a server's log (it may echo a key)
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None

    # ---- lifecycle (any thread) ----------------------------------------------------
    def start(self) -> McpManager:
        """Start connecting to every server; returns at once."""
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="glassloop-mcp")
        self._thread.start()
        for state in self.servers.values():
            self._submit(self._connect(state))
        return self

    def restart(self, name: str) -> Future:
        """Reconnect one server; the future resolves to its new status."""
        return self._submit(self._restart(self.servers[name]))

    def wait_ready(self, timeout: float) -> bool:
        """Wait until no server is still connecting; False when some still is after ``timeout``."""
        future = self._submit(self._settled())
        try:
            return future.result(timeout)
        except FutureTimeout:
            future.cancel()
            return False

    def ping(self, timeout: float = 2.0) -> None:
        """Check the servers marked ready; a dead one becomes ``lost``."""
        with contextlib.suppress(FutureTimeout):
            self._submit(self._ping_all(timeout)).result(timeout + 1)

    def close(self, timeout: float = 3.0) -> None:
        """Stop every server, bounded: each gets its stdin closed, ``STOP_GRACE_S`` to exit,
        then SIGTERM and SIGKILL ``STOP_GRACE_S`` later, so a server that ignores the close
        never holds up the exit."""
        if self._thread is None or not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            self._submit(self._stop_all()).result(timeout)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._loop.close()

    def call(self, server: str, tool: str, arguments: dict[str, Any],
             cancel: Cancel | None = None) -> dict[str, Any]:
        """Call a tool (from a worker thread); failures raise ``ToolError``. When ``cancel``
        is set (the turn was interrupted or ran out of time) the request is cancelled on the
        loop and this returns at once."""
        state = self.servers[server]
        if state.status != "ready":
            raise _unavailable(state)
        timeout = state.config.timeout_s or self.call_timeout_s
        future = self._submit(self._call(state, tool, arguments, timeout))
        forget = (cancel or Cancel()).on_cancel(future.cancel)
        try:
            return future.result(timeout + 2.0)  # the coroutine times out first
        except FutureTimeout:
            future.cancel()
            raise ToolError("timeout", f"{tool_name(server, tool)} did not finish within {timeout:g} s") from None
        except FutureCancelled:
            raise ToolError("cancelled", f"{tool_name(server, tool)} was cancelled: the turn ended "
                                         "before it finished") from None
        finally:
            forget()

    def _submit(self, coro: Any) -> Future:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    # ---- on the loop ---------------------------------------------------------------
    async def _connect(self, state: ServerState) -> Status:
        state.status, state.error, state.finished = "connecting", "", asyncio.Event()
        ready = asyncio.Event()
        serving = asyncio.ensure_future(self._serve(state, ready))
        waiter = asyncio.ensure_future(ready.wait())
        await asyncio.wait({serving, waiter}, timeout=self.connect_timeout_s,
                           return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if state.status == "connecting" and serving.done():  # stopped (close, restart) before it answered
            state.status = "stopped"
        elif state.status == "connecting":
            state.status, state.error = "failed", f"no answer within {self.connect_timeout_s:g} s"
            if state.scope is not None:
                state.scope.cancel()
        if state.status == "failed":
            self.on_notice(f"MCP server {state.config.name!r} failed to start: {state.error}")
        return state.status

    async def _serve(self, state: ServerState, ready: asyncio.Event) -> None:
        """Hold one connection open until cancelled (restart or close)."""
        import anyio

        with anyio.CancelScope() as scope:
            state.scope = scope
            try:
                async with contextlib.AsyncExitStack() as stack:
                    client = await stack.enter_async_context(await self._client(state.config, stack))
                    state.tools = self._make_tools(state.config, await _list_tools(client))
                    state.client, state.status = client, "ready"
                    self.on_tools(state.config.name, state.tools)
                    ready.set()
                    await anyio.sleep_forever()
            except Exception as exc:  # noqa: BLE001 - a failing server is reported, never raised
                if state.status == "connecting":
                    state.status, state.error = "failed", one_line(exc)
            finally:
                state.client = None
                if state.finished is not None:
                    state.finished.set()

    async def _client(self, cfg: ServerConfig, stack: contextlib.AsyncExitStack) -> Any:
        from mcp import Client, StdioServerParameters
        from mcp.client import stdio
        from mcp.client.stdio import stdio_client

        # The SDK waits 2 s after closing stdin and 2 s more after SIGTERM: too long for an exit.
        stdio.PROCESS_TERMINATION_TIMEOUT = stdio.FORCE_KILL_TIMEOUT = STOP_GRACE_S

        if cfg.url:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=cfg.headers, timeout=httpx2.Timeout(30.0, read=300.0)))
            return Client(streamable_http_client(cfg.url, http_client=http))
        params = StdioServerParameters(command=cfg.command, args=list(cfg.args), env=cfg.env or None,
                                       cwd=cfg.cwd or None)
        return Client(stdio_client(params, errlog=stack.enter_context(self._errlog(cfg.name))))

    def _errlog(self, name: str) -> Any:
        """Where a stdio server's stderr goes (never the terminal)."""
        if self.log_dir is None:
            return open(os.devnull, "w")  # noqa: SIM115 - closed by the exit stack
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log = (self.log_dir / f"mcp-{NAME_OK.sub('_', name)}.log").open("a", encoding="utf-8")
        except OSError:  # the log cannot be written: the server still runs, its stderr is dropped
            return open(os.devnull, "w")  # noqa: SIM115 - closed by the exit stack
        return log if self.redact is None else _RedactedLog(log, self.redact)

    async def _call(self, state: ServerState, tool: str, arguments: dict[str, Any], timeout: float) -> dict:
        import anyio
        from mcp import MCPError

        client = state.client
        if client is None:
            raise _unavailable(state)
        try:
            with anyio.fail_after(timeout):
                result = await client.call_tool(tool, arguments)
        except TimeoutError:
            raise ToolError("timeout", f"{tool_name(state.config.name, tool)} did not finish "
                                       f"within {timeout:g} s") from None
        except MCPError as exc:
            if exc.error.code != _CONNECTION_CLOSED:
                raise ToolError("mcp_error", f"{state.config.name}: {exc.error.message}") from None
            self._lost(state, "the connection closed")
            raise _unavailable(state) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            self._lost(state, one_line(exc))
            raise _unavailable(state) from None
        return result_to_data(result)

    def _lost(self, state: ServerState, why: str) -> None:
        if state.status == "ready":
            state.status, state.error = "lost", why
            self.on_notice(f"MCP server {state.config.name!r} stopped ({why}); "
                           f"/mcp restart {state.config.name} reconnects")

    async def _restart(self, state: ServerState) -> Status:
        await self._stop(state)
        return await self._connect(state)

    async def _stop(self, state: ServerState) -> None:
        if state.scope is not None:
            state.scope.cancel()
        if state.finished is not None:
            await state.finished.wait()
        state.scope, state.client = None, None

    async def _stop_all(self) -> None:
        await asyncio.gather(*(self._stop(s) for s in self.servers.values()))
        for state in self.servers.values():
            state.status = "stopped"

    async def _settled(self) -> bool:
        while any(s.status == "connecting" for s in self.servers.values()):
            await asyncio.sleep(0.02)
        return True

    async def _ping_all(self, timeout: float) -> None:
        from mcp import MCPError

        async def ping(state: ServerState) -> None:
            # ``ping`` left the protocol in 2026-07-28; an uncached tools/list proves life as well.
            try:
                await asyncio.wait_for(state.client.list_tools(cache_mode="refresh"), timeout)
            except MCPError as exc:
                if exc.error.code == _CONNECTION_CLOSED:
                    self._lost(state, "the connection closed")
            except TimeoutError:
                self._lost(state, f"no answer within {timeout:g} s")
            except Exception as exc:  # noqa: BLE001 - a broken transport means the server is gone
                self._lost(state, one_line(exc))

        await asyncio.gather(*(ping(s) for s in self.servers.values() if s.status == "ready" and s.client))

    # ---- tools ---------------------------------------------------------------------
    def _make_tools(self, cfg: ServerConfig, listed: list[Any]) -> list[Tool]:
        tools: dict[str, Tool] = {}
        for item in listed:  # names that collide once sanitised: the first one wins
            made = self._make_tool(cfg, item)
            tools.setdefault(made.name, made)
        return list(tools.values())

    def _make_tool(self, cfg: ServerConfig, listed: Any) -> Tool:
        hints = listed.annotations
        read_only = bool(hints and hints.read_only_hint) or listed.name in cfg.read_only_tools
        additive = bool(hints and hints.destructive_hint is False)  # MCP's default: destructive

        def run(**arguments: Any) -> dict[str, Any]:  # the keywords are the server's: the signal comes apart
            return self.call(cfg.name, listed.name, arguments, current_cancel())

        return Tool(name=tool_name(cfg.name, listed.name),
                    description=listed.description or listed.title or listed.name,
                    parameters=parameters_from(listed.input_schema), fn=run,
                    side_effects=not read_only, destructive=not read_only and not additive,
                    timeout_s=cfg.timeout_s, source=f"MCP server {cfg.name}")


async def _list_tools(client: Any) -> list[Any]:
    """Every page of ``tools/list`` (bounded)."""
    tools, cursor = [], None
    for _page in range(100):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _unavailable(state: ServerState) -> ToolError:
    why = state.error or state.status
    return ToolError("mcp_unavailable", f"MCP server {state.config.name!r} is not available ({why}); "
                                        f"the user can reconnect it with /mcp restart {state.config.name}")
