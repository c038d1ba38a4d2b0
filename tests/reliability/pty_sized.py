"""The real REPL in a pseudo-terminal of a chosen size (the shared ``Repl`` is 100x40)."""

from __future__ import annotations

import signal
import sys

import pexpect
import pytest

from tests.test_cli import home  # noqa: F401 - fixture
from tests.test_repl_pty import Repl


class SizedRepl(Repl):
    def __init__(self, env: dict[str, str], args: list[str], cols: int = 100, rows: int = 40,
                 base_url: str | None = None, wait: bool = True) -> None:
        env = {**env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "COLUMNS": str(cols), "LINES": str(rows)}
        url = ["--base-url", base_url] if base_url else []
        self.child = pexpect.spawn(sys.executable, ["-m", "repl.cli", *url, *args], env=env,
                                   encoding="utf-8", dimensions=(rows, cols), timeout=20)
        self.transcript = []
        if wait:
            self.ready()


@pytest.fixture
def sized_repl(home, fake_server):  # noqa: F811
    """``start(*args, cols=100, rows=40)``: the REPL against the scripted server."""
    started: list[SizedRepl] = []

    def start(*args: str, cols: int = 100, rows: int = 40, url: bool = True, wait: bool = True) -> SizedRepl:
        started.append(SizedRepl(home, list(args), cols, rows, fake_server.base_url if url else None, wait))
        return started[-1]

    yield start
    for repl in started:
        if repl.child.isalive():
            repl.child.kill(signal.SIGKILL)
