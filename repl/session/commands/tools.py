"""Commands on the tools and what they keep: the tool list, the todos, the MCP servers."""

from __future__ import annotations

from pathlib import Path

from repl.session.commands.context import CommandContext, command
from repl.ui.escape import cut_words, one_line
from repl.ui.event_views import plural
from tools.results import error_of


@command("tools", args="[reload]", help="Each tool, where it comes from, its side effects and approval rule; "
         "reload runs your tool files again.", complete=lambda ctx: ["reload"],
         brief="the tools, where they come from, what they may change")
def tools(ctx: CommandContext, args: list[str]) -> None:
    if args[:1] == ["reload"]:
        _reload_tools(ctx)
        return
    if args:
        ctx.ui.error("usage: /tools [reload]")
        return
    ctx.user_tools.wait(5.0)  # loading in the background since the start
    rows = []
    for name in ctx.registry.names():
        tool = ctx.registry.get(name)
        if tool is None:  # removed meanwhile (an MCP server went away)
            continue
        rule = "—"
        if tool.side_effects:
            rule = "always (this session)" if name in ctx.approver.always else ctx.approver.mode
            rule += " · every call" if tool.destructive and ctx.approver.mode == "ask" else ""
        rows.append((name, "yes" if tool.side_effects else "no", rule,
                     _short_source(tool.source, ctx.user_tools.project_folder),
                     cut_words(one_line(tool.description, 200), 90)))
    ctx.ui.table("tools", ["tool", "side effects", "approval", "from", "description"], rows)


def _short_source(source: str, project: Path) -> str:
    """A user file's source as its name and line (``project`` when it is the project's)."""
    if not source.startswith("/"):
        return source  # built-in, package NAME, MCP server NAME
    path = Path(source.rsplit(":", 1)[0])
    return ("project " if path.parent == project else "") + Path(source).name


def _reload_tools(ctx: CommandContext) -> None:
    report = ctx.user_tools.reload()
    for line in report.problems:
        ctx.ui.error(line)
    ctx.ui.info(f"user tools reloaded: {plural(report.tools, 'tool')} from {plural(report.files, 'file')} and "
                f"installed packages, {plural(len(report.problems), 'problem')}; the conversation is kept")


TABLE_ROWS = 200


def _aligned(rows: list[tuple[str, ...]]) -> list[str]:
    """id, status, priority and due in columns, then the title (on one line)."""
    widths = [max(len(row[i]) for row in rows) for i in (0, 2, 3, 4)]
    return [f"{row[0]:<{widths[0]}}  {row[2]:<{widths[1]}}  {row[3]:<{widths[2]}}  {row[4]:<{widths[3]}}  "
            + " ".join(row[1].split()) for row in rows]


@command("todos", args="[all]", help="Show the todo list straight from the store (no model call).",
         complete=lambda ctx: ["all"],
         means=("tasks", "todo", "list"))
def todos(ctx: CommandContext, args: list[str]) -> None:
    everything = bool(args) and args[0] == "all"
    result = ctx.registry.call("list_todos", {"limit": 0} if everything else {})
    error = error_of(result)
    if error is not None:
        ctx.ui.error(error[1])
        return
    rows = [tuple(str(cell or "") for cell in (t["id"], t["title"], t["status"], t["priority"], t.get("due")))
            for t in result.get("todos", [])]
    title = f"todos · {ctx.settings.todos_file}"
    if not rows:
        ctx.ui.info(f"no todos in {ctx.settings.todos_file}")
    elif len(rows) <= TABLE_ROWS:
        ctx.ui.table(title, ["id", "title", "status", "priority", "due"], rows)
    else:  # a table costs ~1 ms a row to lay out: thousands go as aligned lines, 500 a print
        lines = [title, *_aligned(rows)]
        ctx.ui.lines(["\n".join(lines[i : i + 500]) for i in range(0, len(lines), 500)])
    if result.get("more"):
        ctx.ui.info(f"… {result['more']:,} more ({result['count']:,} in all); "
                    "ask the model or use /todos all")


def _mcp_completions(ctx: CommandContext) -> list[str]:
    return ["restart"] + [f"restart {name}" for name in (ctx.mcp.servers if ctx.mcp else {})]


@command("mcp", args="[restart NAME]", help="MCP servers: status and tools; restart one.", complete=_mcp_completions)
def mcp(ctx: CommandContext, args: list[str]) -> None:
    manager = ctx.mcp
    if manager is None:
        ctx.ui.info("no MCP servers configured (add [mcp.servers.NAME] to the config)")
        return
    if args and args[0] == "restart":
        if len(args) != 2 or args[1] not in manager.servers:
            ctx.ui.error(f"usage: /mcp restart NAME (servers: {', '.join(manager.servers)})")
            return
        ctx.ui.info(f"restarting MCP server {args[1]!r}…")
        try:
            manager.restart(args[1]).result(manager.connect_timeout_s + 10)
        except Exception as exc:  # noqa: BLE001 - report, never crash the REPL
            ctx.ui.error(f"restart of {args[1]!r} did not finish: {type(exc).__name__}")
            return
        state = manager.servers[args[1]]
        ctx.ui.info(f"MCP server {args[1]!r}: {state.status}, {plural(len(state.tools), 'tool')}"
                    + (f" ({state.error})" if state.error else ""))
        return
    if args:
        ctx.ui.error("usage: /mcp [restart NAME]")
        return
    manager.ping()
    rows = []
    for name, state in manager.servers.items():
        tools = ", ".join(t.name.split("__", 1)[-1] + ("" if t.side_effects else " (ro)") for t in state.tools)
        where = state.config.url or " ".join([state.config.command, *state.config.args])
        where = where if len(where) <= 48 else "…" + where[-47:]
        offers = [plural(len(found), kind) for found, kind in ((state.prompts, "prompt"),
                                                               (state.resources, "resource")) if found]
        tools = "; ".join([tools or "—", *([", ".join(offers)] if offers else [])])
        rows.append((name, state.status, where, tools, state.error or ""))
    ctx.ui.table("MCP servers", ["server", "status", "command / url", "tools (ro = read-only)", "problem"], rows)
