"""An MCP stdio server without the SDK: newline-delimited JSON-RPC with a child process.

The ``mcp`` SDK costs ~0.4 s of import (its pydantic models and its server stack)
on the same GIL the provider's import needs at that moment; a stdio server needs
only the ``initialize`` handshake, ``tools/list``, ``tools/call`` and
``notifications/cancelled``. Results stay JSON (``mcp_convert`` reads them), so
nothing here validates more than the envelope. The child runs in its own process
group with a minimal environment (as the SDK does: no API keys leak to it) and
stops bounded: stdin closed, ``grace`` to exit, SIGTERM, ``grace``, SIGKILL. A
detached stop (``ask``, once its answer is out) closes stdin and leaves that
escalation to a ``sh`` that outlives us, so the exit never waits on a server.
The process is a ``subprocess.Popen`` we own, not asyncio's: its transport kills
a child still running when it is closed or collected.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from typing import Any

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
INHERITED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")  # the SDK's safe set
LINE_LIMIT = 64 * 1024 * 1024  # one message; tool results can be large
METHOD_NOT_FOUND = -32601
CONNECTION_CLOSED = -32000  # the code the SDK uses for a closed transport


class RpcError(Exception):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class ConnectionClosed(Exception):
    """The server's stdout ended (it exited or closed it) or its stdin broke."""


def child_env(extra: dict[str, str]) -> dict[str, str]:
    """The SDK's rule: only the safe variables are inherited (no shell functions), then ``extra``.
    ``PYTHONSAFEPATH`` keeps the working directory (an untrusted folder) off the path of a
    Python server started as ``python -m NAME`` or ``python -c``, unless the server's own
    ``env`` says otherwise."""
    env = {k: v for k in INHERITED_ENV if (v := os.environ.get(k)) is not None and not v.startswith("()")}
    return env | {"PYTHONSAFEPATH": "1"} | extra


class StdioConnection:
    """One running server. ``open()`` spawns it, ``initialize()`` does the handshake;
    requests may run concurrently (each waits on its own id)."""

    def __init__(self, process: subprocess.Popen, stdout: asyncio.StreamReader, stdout_pipe: asyncio.BaseTransport,
                 stdin: asyncio.StreamWriter, client_name: str, client_version: str) -> None:
        self.process, self._stdout, self._stdout_pipe, self._stdin = process, stdout, stdout_pipe, stdin
        self.client_info = {"name": client_name, "version": client_version}
        self.protocol_version = ""
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._closed: str | None = None  # why the connection ended
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def open(cls, command: str, args: tuple[str, ...], env: dict[str, str], cwd: str,
                   errlog: Any, client_name: str = "glassloop", client_version: str = "1") -> StdioConnection:
        process = subprocess.Popen([command, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog,
                                   env=child_env(env), cwd=cwd or None, start_new_session=True)
        assert process.stdin is not None and process.stdout is not None
        loop = asyncio.get_running_loop()
        try:
            stdout = asyncio.StreamReader(limit=LINE_LIMIT)
            stdout_pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdout), process.stdout)
            transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, process.stdin)
        except BaseException:
            process.kill()
            raise
        stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        return cls(process, stdout, stdout_pipe, stdin, client_name, client_version)

    async def initialize(self) -> None:
        result = await self.request("initialize", {
            "protocolVersion": HANDSHAKE_VERSIONS[-1], "capabilities": {}, "clientInfo": self.client_info})
        version = result.get("protocolVersion")
        if version not in HANDSHAKE_VERSIONS:
            raise RpcError(0, f"the server speaks MCP {version!r}, this client {', '.join(HANDSHAKE_VERSIONS)}")
        self.protocol_version = version
        await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def list_tools(self, cursor: str | None = None) -> dict[str, Any]:
        return await self.request("tools/list", {"cursor": cursor} if cursor else {})

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.request("tools/call", {"name": name, "arguments": arguments})

    async def list_prompts(self, cursor: str | None = None) -> dict[str, Any]:
        return await self.request("prompts/list", {"cursor": cursor} if cursor else {})

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> dict[str, Any]:
        return await self.request("prompts/get", {"name": name, "arguments": arguments})

    async def list_resources(self, cursor: str | None = None) -> dict[str, Any]:
        return await self.request("resources/list", {"cursor": cursor} if cursor else {})

    async def read_resource(self, uri: str) -> dict[str, Any]:
        return await self.request("resources/read", {"uri": uri})

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The result of one request; a cancelled request is cancelled on the server too."""
        self._next_id += 1
        request_id = self._next_id
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = answer
        try:
            await self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            return await answer
        except asyncio.CancelledError:
            if self._closed is None:
                with contextlib.suppress(ConnectionClosed):
                    await self._send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                      "params": {"requestId": request_id, "reason": "cancelled by the client"}})
            raise
        finally:
            self._pending.pop(request_id, None)

    async def close(self, grace: float, detach: bool = False) -> None:
        """Stop the server, bounded by about ``3 * grace``: stdin closed, then SIGTERM, then SIGKILL
        (each to its process group), each after ``grace`` without an exit. ``detach``: only close
        stdin and hand the rest to a reaper that outlives this process."""
        if not self._stdin.is_closing():
            self._stdin.close()
        if detach:
            if self.process.poll() is None:
                _reaper(self.process.pid, grace)
        else:
            for sig in (signal.SIGTERM, signal.SIGKILL, None):
                if await self._exited(grace) or sig is None:
                    break
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.process.pid, sig)
        self._reader.cancel()
        self._stdout_pipe.close()
        self._end("the connection was closed")

    async def _exited(self, timeout: float) -> bool:
        deadline = asyncio.get_running_loop().time() + timeout
        while self.process.poll() is None:
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    async def _send(self, message: dict[str, Any]) -> None:
        if self._closed is not None:
            raise ConnectionClosed(self._closed)
        try:
            self._stdin.write(json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n")
            await self._stdin.drain()
        except (OSError, RuntimeError) as exc:  # broken pipe, or the transport already closed
            self._end(f"cannot write to the server ({type(exc).__name__})")
            raise ConnectionClosed(self._closed) from None

    async def _read(self) -> None:
        why = "the server closed its output"
        try:
            while line := await self._stdout.readline():
                await self._dispatch(line)
        except (ValueError, asyncio.LimitOverrunError):  # a line over LINE_LIMIT: the stream is lost
            why = "a message was larger than 64 MiB"
        except (OSError, ConnectionClosed) as exc:
            why = str(exc) or type(exc).__name__
        finally:
            self._end(why)

    async def _dispatch(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return  # not a message (a server printing to stdout): the SDK skips it too
        if not isinstance(message, dict):
            return
        ident, method = message.get("id"), message.get("method")
        if isinstance(method, str):
            if ident is not None:  # a request from the server: ping answered, the rest is not offered
                reply = ({"result": {}} if method == "ping" else
                         {"error": {"code": METHOD_NOT_FOUND, "message": f"{method} is not supported"}})
                await self._send({"jsonrpc": "2.0", "id": ident, **reply})
            return  # notifications (log lines, list changes) are not used
        answer = self._pending.get(ident) if isinstance(ident, int) else None
        if answer is None or answer.done():
            return
        error = message.get("error")
        if isinstance(error, dict):
            answer.set_exception(RpcError(_int(error.get("code")), str(error.get("message") or "error")))
        elif isinstance(message.get("result"), dict):
            answer.set_result(message["result"])
        else:
            answer.set_exception(RpcError(0, "the server's answer had no result"))

    def _end(self, why: str) -> None:
        if self._closed is None:
            self._closed = why
        for answer in self._pending.values():
            if not answer.done():
                answer.set_exception(ConnectionClosed(self._closed))


def _reaper(pgid: int, grace: float) -> None:
    """A ``sh`` in its own session that sends SIGTERM to the group after ``grace`` and SIGKILL
    after another (quiet when the group is gone by then)."""
    script = f"sleep {grace:g}; kill -TERM -{pgid} 2>/dev/null || exit 0; sleep {grace:g}; kill -KILL -{pgid} 2>/dev/null"
    with contextlib.suppress(OSError):
        subprocess.Popen(["/bin/sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
