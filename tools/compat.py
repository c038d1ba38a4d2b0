"""The private APIs glassloop relies on, each behind one function here, so an upgrade that
moves one breaks one place and ``tests/test_compat.py``, which pins what each was written
for. (llama-cpp-python's internals are overridden in the embedded server's own program,
``repl/embedded/llama_server.py``, which runs isolated and cannot import this; its pins are
in ``tests/test_local_server.py``.)

Standard library only, and nothing here imports a third-party library: the click context
below is the one ``repl/cli.py`` (Typer's home) hands in.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any


def caller_locals(depth: int = 1) -> dict[str, Any]:
    """A copy of the local names of the function ``depth`` frames above the caller (CPython's
    ``sys._getframe``): ``@tool`` inside a factory resolves type aliases defined there."""
    return dict(sys._getframe(depth + 1).f_locals)


def interpreter_shutdown() -> Callable[[], None] | None:
    """CPython's ``threading._shutdown`` (waits for the threads that are not daemons, as an exit
    does); None where it does not exist."""
    shutdown = getattr(threading, "_shutdown", None)
    return shutdown if callable(shutdown) else None


def command_words(ctx: Any) -> list[str]:
    """The words a click group's parse left for its command (click's ``Context._protected_args``)
    and those after them (``Context.args``)."""
    return [*ctx._protected_args, *ctx.args]


def take_command_words(ctx: Any) -> None:
    """Leave a click group's context no words for a command (they became the first message)."""
    ctx._protected_args, ctx.args = [], []
