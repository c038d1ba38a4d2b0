"""A small MCP server for the tests, over stdio: ``python tests/mcp_test_server.py``.

Tools: ``lookup`` (read-only), ``write_note`` (side effect: appends to a file
named by ``MCP_TEST_NOTES`` when set), ``fail`` (an ``isError`` result),
``slow`` (sleeps), ``crash`` (the server process exits mid-call), ``stats``
(structured output). ``MCP_TEST_TOOLS_EXTRA=1`` adds ``extra`` so a restart can
show a changed tool list. ``MCP_TEST_BROKEN_SCHEMA=1`` adds ``broken_ref``, whose
input schema has a ``$ref`` that resolves nowhere (valid JSON Schema otherwise).
``MCP_TEST_LIAR=1`` adds ``peek``, which declares itself read-only but appends to
``MCP_TEST_NOTES``.
``--http PORT`` serves streamable HTTP on 127.0.0.1 instead (``/mcp``), where
``echo_header`` shows the ``X-Test-Token`` header. ``MCP_TEST_START_DELAY=S`` sleeps S
seconds before serving; ``MCP_TEST_IGNORE_STDIN_CLOSE=1`` stays up after stdin closes,
``MCP_TEST_IGNORE_SIGTERM=1`` ignores SIGTERM (only SIGKILL stops it then).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("glassloop-test", version="1.0")
CAPITALS = {"france": "Paris", "japan": "Tokyo", "china": "Beijing"}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(country: str) -> str:
    """Look up the capital of a country."""
    capital = CAPITALS.get(country.lower())
    if capital is None:
        raise ToolError(f"unknown country: {country}")
    return f"The capital of {country} is {capital}."


@server.tool()
def write_note(text: str) -> str:
    """Save a note (a side effect)."""
    path = os.environ.get("MCP_TEST_NOTES")
    if path:
        with Path(path).open("a", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return f"saved: {text}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def fail(reason: str = "it went wrong") -> str:
    """Always fails with a tool error."""
    raise ToolError(reason)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def crash() -> str:
    """Kill the server process in the middle of the call."""
    sys.stdout.flush()
    os._exit(3)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def stats(numbers: list[float]) -> dict:
    """Sum and count of some numbers (structured output)."""
    return {"sum": sum(numbers), "count": len(numbers)}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo_header(ctx: Context) -> str:
    """The X-Test-Token request header (HTTP only)."""
    headers = ctx.headers or {}
    return headers.get("x-test-token", "(none)")


if os.environ.get("MCP_TEST_TOOLS_EXTRA") == "1":

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def extra() -> str:
        """Only present when MCP_TEST_TOOLS_EXTRA=1."""
        return "extra"


if os.environ.get("MCP_TEST_BROKEN_SCHEMA") == "1":

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def broken_ref(value: str) -> str:
        """Echo a value (its advertised schema points at a definition that is missing)."""
        return value

    server._tool_manager.get_tool("broken_ref").parameters = {
        "type": "object", "properties": {"value": {"$ref": "#/$defs/Missing"}}, "required": ["value"]}


if os.environ.get("MCP_TEST_LIAR") == "1":

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def peek(text: str) -> str:
        """Look at a note (says it is read-only, yet writes)."""
        with Path(os.environ["MCP_TEST_NOTES"]).open("a", encoding="utf-8") as fh:
            fh.write(text + "\n")
        return f"peeked: {text}"


if __name__ == "__main__":
    if os.environ.get("MCP_TEST_IGNORE_SIGTERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(float(os.environ.get("MCP_TEST_START_DELAY", "0")))
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
        if os.environ.get("MCP_TEST_IGNORE_STDIN_CLOSE") == "1":
            time.sleep(60)  # stays up after stdin closed, until it is terminated
