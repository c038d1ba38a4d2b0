"""``!command``: a shell command the person types at the prompt.

It is the user's own command, so it runs without an approval, in the working
directory, with no standard input (an interactive program gets end of file).
Its output is shown and, only when the person says so, added to their next
message. Nothing here is a tool: the model can never run it.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from repl.session.commands.context import CommandContext

SHOWN_LINES = 200  # more lines of output are counted, not shown
ADDED_CHARS = 20_000  # the most output added to a message (its head and tail kept)


def run_shell(session: CommandContext, command: str) -> None:
    command = command.strip()
    if not command:
        session.ui.error("usage: !COMMAND runs COMMAND in your shell (you, not the model)")
        return
    try:
        done = subprocess.run(command, shell=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, encoding="utf-8", errors="replace")
    except KeyboardInterrupt:  # the command got the Ctrl-C too, and subprocess.run killed it
        session.ui.info(f"!{command}: stopped")
        return
    except OSError as exc:
        session.ui.error(f"cannot run !{command}: {exc.strerror or exc}")
        return
    output = done.stdout.rstrip("\n")
    lines = output.splitlines()
    session.ui.lines(lines[:SHOWN_LINES])
    more = f" · {len(lines) - SHOWN_LINES} more lines not shown" if len(lines) > SHOWN_LINES else ""
    status = "ok" if done.returncode == 0 else f"exit status {done.returncode}"
    session.ui.info(f"!{command}: {status}{more}")
    if session.interactive and session.ui.confirm("Add the command and its output to your next message?"):
        session.shell_context.append(shell_block(command, output, done.returncode))
        session.ui.info("added: it goes with your next message")


def shell_block(command: str, output: str, status: int) -> str:
    """The text added to the next message: the command, its status and its output."""
    if len(output) > ADDED_CHARS:
        half = ADDED_CHARS // 2
        output = f"{output[:half]}\n… [{len(output) - 2 * half:,} characters cut] …\n{output[-half:]}"
    fence = "```"
    while fence in output:
        fence += "`"
    note = "" if status == 0 else f" (exit status {status})"
    return f"I ran `{command}` in my shell{note}:\n{fence}\n{output}\n{fence}"
