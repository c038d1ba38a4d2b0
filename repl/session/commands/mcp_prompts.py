"""MCP servers' prompts as slash commands: ``/mcp__SERVER__PROMPT args``.

A ready server's prompts are listed in ``/help`` and completed at the prompt, their arguments
too (``name=``). Running one asks the server for its text (``prompts/get``) and sends it as
your message, as one of your own commands does; the server's text is data, so ``@`` in it
attaches nothing. A server still starting is waited for as the first turn waits.
"""

from __future__ import annotations

from collections.abc import Callable

from repl.session.commands.context import CommandContext
from tools.mcp_offers import COMMAND_PREFIX, Prompt
from tools.results import ToolError

GROUP = "MCP prompts"


def offered(ctx: CommandContext) -> list[Prompt]:
    """The prompts of the servers that are ready, in the configuration's order."""
    if ctx.mcp is None:
        return []
    return [p for s in list(ctx.mcp.servers.values()) if s.status == "ready" for p in s.prompts]


def run_prompt(ctx: CommandContext, line: str) -> bool:
    """Run ``/mcp__SERVER__PROMPT args``; False when the line names no MCP prompt's command."""
    name, _, rest = line.strip()[1:].partition(" ")
    if not name.startswith(COMMAND_PREFIX) or ctx.mcp is None:
        return False
    ctx.mcp_ready()
    prompt = next((p for p in offered(ctx) if p.command == name), None)
    if prompt is None:
        servers = ", ".join(f"{n} ({s.status})" for n, s in ctx.mcp.servers.items())
        ctx.ui.error(f"no MCP prompt /{name}: /help lists the prompts of the servers ready ({servers})")
        return True
    try:
        text = ctx.mcp.get_prompt(prompt, prompt.arguments_from(rest))
    except ValueError as exc:
        ctx.ui.error(str(exc))
        return True
    except ToolError as exc:
        ctx.ui.error(f"/{name}: {exc.message}")
        return True
    ctx.ui.info(f"/{name}: MCP server {prompt.server}'s prompt {prompt.name} ({len(text):,} characters)")
    ctx.ask(text)
    return True


def help_rows(ctx: CommandContext) -> list[tuple[str, str, str]]:
    """(group, command, what it does) of the servers' prompts, for ``/help``."""
    rows = [(p.usage, p.description or f"MCP server {p.server}'s prompt") for p in offered(ctx)]
    if ctx.mcp is not None:
        rows += [(f"/{COMMAND_PREFIX}{name}__…", "still starting: its prompts are listed once it is ready")
                 for name, s in list(ctx.mcp.servers.items()) if s.status == "connecting"]
    return [(GROUP if n == 0 else "", usage, text) for n, (usage, text) in enumerate(rows)]


def specs(ctx: CommandContext) -> list[tuple[str, str, Callable[[str], list[str]] | None]]:
    """(name, help, argument completer) of each prompt's command, for the prompt's completion:
    asked at each completion, since servers become ready after the prompt is drawn."""
    def arguments(prompt: Prompt) -> Callable[[str], list[str]]:
        return lambda typed: [f"{a.name}=" for a in prompt.arguments if f"{a.name}=" not in typed]
    return [(p.command, p.description, arguments(p)) for p in offered(ctx)]
