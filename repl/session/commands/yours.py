"""Commands on what you bring to a session: your own commands (prompt templates, ``/NAME``)
and the instructions read from AGENTS.md (``/instructions``)."""

from __future__ import annotations

from pathlib import Path

from repl.session.commands.context import CommandContext, command

GROUP = "your own"


@command("instructions", help="The AGENTS.md files this session's instructions hold: where from, "
         "how big, their text.", means=("agents", "agents.md", "rules"))
def instructions(ctx: CommandContext, args: list[str]) -> None:
    loaded = ctx.instructions
    if loaded is None:
        ctx.ui.info("a resumed session keeps the instructions it started with (/system shows them)")
        return
    for line in loaded.problems:
        ctx.ui.error(line)
    if not loaded.files:
        ctx.ui.info("no AGENTS.md read" if ctx.settings.instructions_max_kb <= 0 and not loaded.problems
                    else f"no AGENTS.md in {Path.cwd()} or {ctx.settings.config_dir}")
        return
    for file in loaded.files:
        ctx.ui.info(file.line())
        ctx.ui.lines(file.text.splitlines())


def run_template(ctx: CommandContext, line: str) -> bool:
    """Run ``/NAME args`` when NAME is one of your own commands: its text, filled in, is sent as
    your message. False when it is not (a built-in, or unknown)."""
    name, _, rest = line.strip()[1:].partition(" ")
    template = ctx.templates.by_name.get(name)
    if template is None:
        return False
    text = template.expand(rest)
    if not text:
        ctx.ui.error(f"/{name} is empty: nothing to send ({template.path})")
        return True
    ctx.ui.info(f"/{name}: {template.whose} command {template.path} ({len(text):,} characters)")
    ctx.send(text)
    return True


def help_rows(ctx: CommandContext) -> list[tuple[str, str, str]]:
    """(group, command, what it does) of your own commands, for ``/help``."""
    rows = [("", f"/{t.name}", t.description or "your prompt template") for t in ctx.templates.by_name.values()]
    return [(GROUP if n == 0 else "", cmd, text) for n, (_, cmd, text) in enumerate(rows)]
