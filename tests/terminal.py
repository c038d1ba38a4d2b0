"""The real REPL in a pseudo-terminal (pexpect), and a tiny terminal to replay rendered output."""

from __future__ import annotations

import re
import sys

import pexpect

READY = "\x1b[?2004h"  # prompt_toolkit turns bracketed paste on when the prompt takes input
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class Repl:
    """The REPL in a ``cols`` x ``rows`` pseudo-terminal, against ``base_url`` when one is given."""

    def __init__(self, env: dict[str, str], base_url: str | None, *args: str, cols: int = 100,
                 rows: int = 40, wait: bool = True, program: tuple[str, ...] = ("-m", "repl.cli")) -> None:
        """``program``: the interpreter's arguments before glassloop's own."""
        env = {**env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "COLUMNS": str(cols), "LINES": str(rows)}
        url = ["--base-url", base_url] if base_url else []
        # what the screen must show comes within a minute: at 20 s a step-mode test timed out on
        # a machine running two model evaluations beside it (the test waits, it asserts no speed)
        self.child = pexpect.spawn(sys.executable, [*program, *url, *args], env=env,
                                   encoding="utf-8", dimensions=(rows, cols), timeout=60)
        self.transcript: list[str] = []
        if wait:
            self.ready()

    def ready(self) -> None:
        self.child.expect_exact(READY)
        self._keep()

    def expect(self, pattern: str) -> str:
        self.child.expect(pattern)
        self._keep()
        return self.child.before + self.child.after

    def editor(self, marker: str) -> None:
        """Wait for ``marker`` (the text printed before an editor), then for the editor to take
        input. Keys sent sooner reach a terminal still in line mode: Enter arrives as a newline,
        so Esc-Enter inserts a line instead of submitting."""
        self.expect(marker)
        self.ready()

    def say(self, line: str) -> None:
        self.child.send(line + "\r")

    def key(self, key: str) -> None:
        """A key for the question just seen: prompt_toolkit reads the terminal before it draws
        a question (and the approval dialog drops keys typed before that), so no pause is needed."""
        self.child.send(key)

    def screen(self) -> str:
        return ANSI.sub("", "".join(self.transcript))

    def _keep(self) -> None:
        self.transcript.append(self.child.before + (self.child.after if isinstance(self.child.after, str) else ""))

    def close(self) -> None:
        if self.child.isalive():
            self.child.sendcontrol("d")
            # a Ctrl-D that came while a turn was still ending was typed ahead of the prompt and
            # dropped (never an answer to it): once the prompt takes input, it is typed again
            if self.child.expect([pexpect.EOF, re.escape(READY)]) == 1:
                self.child.sendcontrol("d")
                self.child.expect(pexpect.EOF)
        self.transcript.append(self.child.before or "")


class SizedRepl(Repl):
    def __init__(self, env: dict[str, str], args: list[str], cols: int = 100, rows: int = 40,
                 base_url: str | None = None, wait: bool = True) -> None:
        super().__init__(env, base_url, *args, cols=cols, rows=rows, wait=wait)


# keys for the approval dialog's JSON editor
ESC_ENTER = "\x1b\r"
BACKSPACES = "\x7f" * 300  # clears the prefilled JSON (the cursor starts at its end)


# ----- a tiny terminal: what a person would see after the live area is gone -----

_CONTROL = re.compile(r"\x1b\[(\??)(\d*)([A-Za-z])|\r|\n")


def replay(raw: str, width: int, height: int) -> list[str]:
    """Scrollback + screen after ``raw``: text, CR, LF (as CR LF), cursor up, erase line."""
    lines: list[list[str]] = [[]]
    row = col = 0

    def write(text: str) -> None:
        nonlocal col
        for char in text:
            line = lines[row]
            line.extend(" " * (col - len(line) + 1))
            line[col] = char
            col += 1

    position = 0
    for match in _CONTROL.finditer(raw):
        write(raw[position : match.start()])
        position = match.end()
        token = match.group(0)
        if token == "\r":
            col = 0
        elif token == "\n":
            row, col = row + 1, 0
            if row == len(lines):
                lines.append([])
        elif match.group(3) == "A":
            top = max(0, len(lines) - height)
            row = max(top, row - int(match.group(2) or 1))
        elif match.group(3) == "K":
            lines[row] = []
        elif match.group(1) == "?" or match.group(3) == "m":
            pass  # cursor visibility, styles
        else:
            raise AssertionError(f"unexpected control sequence {token!r}")
    write(raw[position:])
    texts = ["".join(line).rstrip() for line in lines]
    while texts and not texts[-1]:
        texts.pop()
    return texts
