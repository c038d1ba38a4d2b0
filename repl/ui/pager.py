"""Long output through the user's pager when it goes to a terminal.

``$PAGER`` when set (set and empty: no pager), else ``less -R``; ``LESS`` defaults to
``FRX`` as git's does (colours kept, quit at once when it fits, the screen left as it
was). The caller pages only what goes to a terminal; output that fits the screen and a pager
that cannot be started are printed as they are.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Callable

from rich.cells import cell_len
from rich.console import Console, RenderableType

_STYLES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")  # colours, links


def pager_command() -> list[str]:
    """The pager to run ([] for none)."""
    if "PAGER" in os.environ:
        try:
            return shlex.split(os.environ["PAGER"])
        except ValueError:  # unbalanced quotes
            return []
    return ["less", "-R"]


def page(text: str, *, height: int, width: int | None = None) -> bool:
    """``text`` (for a terminal) through the pager when it is taller than ``height`` lines (each
    line as many as it wraps to on a screen ``width`` columns wide, when given); False when it
    was not (it fits, no pager, the pager cannot start): the caller prints it."""
    command = pager_command() if _rows(text, width) >= height - 1 else []
    if not command:
        return False
    try:
        process = subprocess.Popen(command, stdin=subprocess.PIPE,
                                   env={**os.environ, "LESS": os.environ.get("LESS", "FRX")})
    except OSError:  # no such program
        return False
    try:
        process.communicate(text.encode("utf-8", "replace"))
    except KeyboardInterrupt:  # the pager has the terminal (less takes Ctrl-C itself): wait for it to end
        while True:
            try:
                process.wait()
                break
            except KeyboardInterrupt:
                continue
    return True


def _rows(text: str, width: int | None) -> int:
    """The screen rows ``text`` takes past its first: its line breaks, and the rows a line
    wider than ``width`` wraps to."""
    if not width:
        return text.count("\n")
    return text.count("\n") + sum((cell_len(_STYLES.sub("", line)) - 1) // width
                                   for line in text.split("\n") if line)


def show(console: Console, renderable: RenderableType, out: Callable[[RenderableType], None] | None = None) -> None:
    """``renderable`` through the pager when ``console`` is a terminal and it is taller than the
    screen (its colours kept), else printed by ``out`` (by default ``console.print``)."""
    if console.is_terminal:
        with console.capture() as captured:
            console.print(renderable, soft_wrap=True)  # long lines whole: the pager wraps them, a copy is exact
        if page(captured.get(), height=console.height, width=console.width):
            return
    (out or console.print)(renderable)
