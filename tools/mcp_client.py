"""MCP servers as tools: connect in the background, register ``SERVER__tool``.

One daemon thread runs an asyncio loop holding every server connection: stdio
through ``tools/mcp_stdio.py`` (no SDK: its import would cost ~0.4 s of the
start), streamable HTTP through the official ``mcp`` SDK, imported only in that
thread and only for such a server. Both give the protocol's JSON, which
``mcp_convert`` reads. A call from the agent's worker thread is bridged onto the loop with
``run_coroutine_threadsafe`` and a timeout, and cancelled on the loop when the
call's cancel signal is set (the turn was interrupted or ran out of time), so
the worker thread is free at once. Nothing here raises into the
session: a server that fails to start, or is not ready ``connect_timeout_s`` after
the start, is named by ``wait_started()`` (the first turn's wait, the REPL's and
``ask``'s), and a server that dies mid-session is one ``on_notice`` line and turns
its calls into ``mcp_unavailable`` tool errors until ``restart()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tools.cancel import Cancel
from tools.cancel import current as current_cancel
from tools.mcp_convert import (
    NAME_OK,
    one_line,
    parameters_from,
    result_to_data,
    tool_name,
)
from tools.mcp_offers import (
    Prompt,
    Resource,
    prompt_message,
    prompts_from,
    resource_text,
    resources_from,
)
from tools.mcp_stdio import CONNECTION_CLOSED, ConnectionClosed, RpcError, StdioConnection
from tools.registry import Tool
from tools.results import ToolError

Status = Literal["connecting", "ready", "failed", "lost", "stopped"]
OFFERS_TIMEOUT_S = 5.0  # listing a server's prompts or resources; its tools do not wait longer
STOP_GRACE_S = 0.2  # a stdio server's time to exit after its stdin closes, after SIGTERM, after SIGKILL


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
    prompts: list[Prompt] = field(default_factory=list)
    resources: list[Resource] = field(default_factory=list)
    client: Any = None  # a StdioConnection or _SdkConnection while connected
    task: asyncio.Task | None = None  # holds the connection open; cancelled to stop it
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
        self._settle = threading.Condition()  # notified when a server stops connecting
        self.started_at = 0.0  # time.monotonic() of start()
        self._detach = False  # close(): leave a stdio server's stop to a reaper

    # ---- lifecycle (any thread) ----------------------------------------------------
    def start(self) -> McpManager:
        """Start connecting to every server; returns at once."""
        self.started_at = time.monotonic()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="glassloop-mcp")
        self._thread.start()
        for state in self.servers.values():
            self._submit(self._connect(state))
        return self

    def restart(self, name: str) -> Future:
        """Reconnect one server; the future resolves to its new status."""
        return self._submit(self._restart(self.servers[name]))

    def wait_ready(self, timeout: float) -> bool:
        """Wait until no server is still connecting (the tools of those that connected are
        registered by then); False when some still is after ``timeout``."""
        with self._settle:
            return self._settle.wait_for(
                lambda: all(s.status != "connecting" for s in self.servers.values()), max(0.0, timeout))

    def wait_started(self, tick: Callable[[list[str], float], None] | None = None,
                     every: float = 0.5) -> dict[str, str]:
        """Wait for the servers still starting, at most ``connect_timeout_s`` after ``start()``
        (``_connect`` gives up on a server then); a server that fails (a bad command) ends its
        wait at once. ``tick`` gets the names still starting and the seconds since the start,
        at once and every ``every`` s while any is. Returns why each server is not ready."""
        deadline = self.started_at + self.connect_timeout_s + 1.0  # 1 s: the loop thread's lag
        while True:
            starting = [name for name, s in self.servers.items() if s.status == "connecting"]
            left = deadline - time.monotonic()
            if not starting or left <= 0:
                break
            if tick is not None:
                tick(starting, time.monotonic() - self.started_at)
            self.wait_ready(min(every, left))
        return {name: ("still starting" if s.status == "connecting" else s.error or s.status)
                for name, s in self.servers.items() if s.status != "ready"}

    def ping(self, timeout: float = 2.0) -> None:
        """Check the servers marked ready; a dead one becomes ``lost``."""
        with contextlib.suppress(FutureTimeout):
            self._submit(self._ping_all(timeout)).result(timeout + 1)

    def close(self, timeout: float = 3.0, detach: bool = False) -> None:
        """Stop every server, bounded: each gets its stdin closed, ``STOP_GRACE_S`` to exit,
        then SIGTERM, and SIGKILL ``STOP_GRACE_S`` later, so a server that ignores the close
        never holds up the exit. ``detach`` (the process is about to exit): a stdio server's
        stdin is closed and the rest left to a reaper process, so nothing here waits on it."""
        if self._thread is None or not self._thread.is_alive():
            return
        self._detach = detach
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

    def get_prompt(self, prompt: Prompt, arguments: dict[str, str]) -> str:
        """The message ``prompt`` makes with ``arguments`` (``prompts/get``); ToolError (one line)
        when its server is not ready, refuses, or takes longer than a tool call may."""
        return prompt_message(self._ask(prompt.server, f"{prompt.server} prompt {prompt.name}",
                                        lambda c: c.get_prompt(prompt.name, arguments)))

    def read_resource(self, server: str, uri: str) -> tuple[str, int]:
        """A resource's text (capped) and its whole length (``resources/read``); ToolError (one
        line) when the server is not ready, has no such resource, or it is not text."""
        return resource_text(self._ask(server, f"{server}:{uri}", lambda c: c.read_resource(uri)), uri)

    def _ask(self, server: str, what: str, request: Callable[[Any], Any]) -> dict[str, Any]:
        """One request to ``server`` from a thread of the session, bounded like a tool call."""
        state = self.servers[server]
        if state.status != "ready":
            raise _unavailable(state)
        timeout = state.config.timeout_s or self.call_timeout_s
        future = self._submit(self._request(state, what, request, timeout))
        try:
            return future.result(timeout + 2.0)  # the coroutine times out first
        except FutureTimeout:
            raise ToolError("timeout", f"{what} did not finish within {timeout:g} s") from None
        finally:
            future.cancel()  # done: no effect; Ctrl-C or a timeout: the request stops on the loop

    def _submit(self, coro: Any) -> Future:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    # ---- on the loop ---------------------------------------------------------------
    async def _connect(self, state: ServerState) -> Status:
        state.status, state.error, state.finished = "connecting", "", asyncio.Event()
        ready = asyncio.Event()
        serving = state.task = asyncio.ensure_future(self._serve(state, ready))
        waiter = asyncio.ensure_future(ready.wait())
        await asyncio.wait({serving, waiter}, timeout=self.connect_timeout_s,
                           return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if state.status == "connecting" and serving.done():  # stopped (close, restart) before it answered
            state.status = "stopped"
        elif state.status == "connecting":
            state.status, state.error = "failed", f"no answer within {self.connect_timeout_s:g} s"
            serving.cancel()
        with self._settle:  # a failure is reported by whoever waits: wait_started, /mcp restart
            self._settle.notify_all()
        return state.status

    async def _serve(self, state: ServerState, ready: asyncio.Event) -> None:
        """Hold one connection open until cancelled (restart or close)."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await self._client(state.config, stack)
                state.tools = self._make_tools(state.config, await _list_all(client.list_tools, "tools"))
                state.prompts, state.resources = await _offers(state.config.name, client)
                state.client = client
                self.on_tools(state.config.name, state.tools)
                state.status = "ready"  # after the tools are registered: ``wait_ready`` returns on it
                ready.set()
                await asyncio.Event().wait()  # until cancelled
        except asyncio.CancelledError:
            pass  # stopped: the exit stack has closed the connection
        except Exception as exc:  # noqa: BLE001 - a failing server is reported, never raised
            if state.status == "connecting":
                state.status, state.error = "failed", one_line(exc)
        finally:
            state.client = None
            if state.finished is not None:
                state.finished.set()

    async def _client(self, cfg: ServerConfig, stack: contextlib.AsyncExitStack) -> Any:
        """A connection to ``cfg``'s server, initialized; the stack closes it."""
        if cfg.url:
            return await _SdkConnection.open(cfg, stack)
        connection = await StdioConnection.open(cfg.command, cfg.args, cfg.env, cfg.cwd,
                                                stack.enter_context(self._errlog(cfg.name)))
        stack.push_async_callback(lambda: connection.close(STOP_GRACE_S, detach=self._detach))
        await connection.initialize()
        return connection

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
        name = tool_name(state.config.name, tool)
        return result_to_data(await self._request(state, name, lambda c: c.call_tool(tool, arguments), timeout))

    async def _request(self, state: ServerState, what: str, request: Callable[[Any], Any],
                       timeout: float) -> dict[str, Any]:
        """One request on ``state``'s connection; failures raise ``ToolError`` naming ``what``."""
        client = state.client
        if client is None:
            raise _unavailable(state)
        try:
            return await asyncio.wait_for(request(client), timeout)
        except TimeoutError:
            raise ToolError("timeout", f"{what} did not finish within {timeout:g} s") from None
        except RpcError as exc:
            raise ToolError("mcp_error", f"{state.config.name}: {exc.message}") from None
        except ConnectionClosed as exc:
            self._lost(state, str(exc) or "the connection closed")
            raise _unavailable(state) from None

    def _lost(self, state: ServerState, why: str) -> None:
        if state.status == "ready":
            state.status, state.error = "lost", why
            self.on_notice(f"MCP server {state.config.name!r} stopped ({why}); "
                           f"/mcp restart {state.config.name} reconnects")

    async def _restart(self, state: ServerState) -> Status:
        await self._stop(state)
        return await self._connect(state)

    async def _stop(self, state: ServerState) -> None:
        if state.task is not None:
            state.task.cancel()
        if state.finished is not None:
            await state.finished.wait()
        state.task, state.client = None, None

    async def _stop_all(self) -> None:
        await asyncio.gather(*(self._stop(s) for s in self.servers.values()))
        for state in self.servers.values():
            state.status = "stopped"

    async def _ping_all(self, timeout: float) -> None:
        async def ping(state: ServerState) -> None:
            # ``ping`` left the protocol in 2026-07-28; an uncached tools/list proves life as well.
            try:
                await asyncio.wait_for(state.client.list_tools(), timeout)
            except RpcError:
                pass  # it answered
            except ConnectionClosed:
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
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                made = self._make_tool(cfg, item)
                tools.setdefault(made.name, made)
        return list(tools.values())

    def _make_tool(self, cfg: ServerConfig, listed: dict[str, Any]) -> Tool:
        name = listed["name"]
        hints = listed.get("annotations")
        hints = hints if isinstance(hints, dict) else {}
        read_only = hints.get("readOnlyHint") is True or name in cfg.read_only_tools
        additive = hints.get("destructiveHint") is False  # MCP's default: destructive

        def run(**arguments: Any) -> dict[str, Any]:  # the keywords are the server's: the signal comes apart
            return self.call(cfg.name, name, arguments, current_cancel())

        described = next((str(listed[k]) for k in ("description", "title") if listed.get(k)), None)
        return Tool(name=tool_name(cfg.name, name), description=described or name,
                    parameters=parameters_from(listed.get("inputSchema")), fn=run,
                    side_effects=not read_only, destructive=not read_only and not additive,
                    timeout_s=cfg.timeout_s, source=f"MCP server {cfg.name}")


class _SdkConnection:
    """A streamable HTTP server through the ``mcp`` SDK, answering in the protocol's JSON
    like ``StdioConnection`` does."""

    def __init__(self, client: Any) -> None:
        self.client = client

    @classmethod
    async def open(cls, cfg: ServerConfig, stack: contextlib.AsyncExitStack) -> _SdkConnection:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=cfg.headers, timeout=httpx2.Timeout(30.0, read=300.0)))
        return cls(await stack.enter_async_context(Client(streamable_http_client(cfg.url, http_client=http))))

    async def list_tools(self, cursor: str | None = None) -> dict[str, Any]:
        return await self._json(self.client.list_tools(cursor=cursor, cache_mode="refresh"))

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self._json(self.client.call_tool(name, arguments))

    async def list_prompts(self, cursor: str | None = None) -> dict[str, Any]:
        return await self._json(self.client.list_prompts(cursor=cursor))

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> dict[str, Any]:
        return await self._json(self.client.get_prompt(name, arguments))

    async def list_resources(self, cursor: str | None = None) -> dict[str, Any]:
        return await self._json(self.client.list_resources(cursor=cursor))

    async def read_resource(self, uri: str) -> dict[str, Any]:
        return await self._json(self.client.read_resource(uri))

    @staticmethod
    async def _json(request: Any) -> dict[str, Any]:
        import anyio
        from mcp import MCPError

        try:
            result = await request
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                raise ConnectionClosed("the connection closed") from None
            raise RpcError(exc.error.code, exc.error.message) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            raise ConnectionClosed(one_line(exc)) from None
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)


async def _list_all(fetch: Callable[[str | None], Any], key: str) -> list[Any]:
    """Every page of a ``…/list`` request (bounded): the items under ``key``."""
    items: list[Any] = []
    cursor = None
    for _page in range(100):
        page = await fetch(cursor)
        items += page.get(key) if isinstance(page.get(key), list) else []
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            break
    return items


async def _offers(server: str, client: Any) -> tuple[list[Prompt], list[Resource]]:
    """A server's prompts and resources; a server without them (or failing to list them) has
    none, and its tools still serve."""
    async def listed(fetch: Callable[[str | None], Any], key: str) -> list[Any]:
        try:
            return await asyncio.wait_for(_list_all(fetch, key), OFFERS_TIMEOUT_S)
        except (RpcError, ConnectionClosed, TimeoutError):
            return []

    return (prompts_from(server, await listed(client.list_prompts, "prompts")),
            resources_from(server, await listed(client.list_resources, "resources")))


def _unavailable(state: ServerState) -> ToolError:
    why = state.error or state.status
    return ToolError("mcp_unavailable", f"MCP server {state.config.name!r} is not available ({why}); "
                                        f"the user can reconnect it with /mcp restart {state.config.name}")
