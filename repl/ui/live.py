"""The live area: a transient region of the screen for what is still changing.

The open tail of a streamed answer, spinners and running tool panels are drawn
here; everything finished is printed above it, to the scrollback.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console, RenderableType


class LiveArea:
    """A transient ``rich.live.Live`` that is safe to print around.

    Every redraw and every print made under ``lock`` is serialised: Rich's own
    refresh thread races with ``console.print`` (the cursor reset is computed
    before the live part is re-rendered) and duplicates lines, so a ticker
    thread redraws under the same lock instead, and only when ``changed()``
    says there is something new to show. While the area is up the terminal
    does not echo keys, and Ctrl-C waits until a print is complete
    (``interrupts_deferred``): either would leave lines behind. With
    ``on_escape``, a lone Esc typed while the area is up calls it (the REPL
    stops the turn, as Ctrl-C does); other keys typed meanwhile go to the next
    prompt, as typed-ahead keys.
    """

    def __init__(self, console: Console, renderable: Callable[[], RenderableType], *,
                 refresh_per_second: float = 12.0, changed: Callable[[], bool] = lambda: True,
                 on_escape: Callable[[], None] | None = None) -> None:
        self.console = console
        self.lock = threading.RLock()
        self._renderable, self._changed = renderable, changed
        self._interval = 1 / refresh_per_second if refresh_per_second > 0 else 0.0
        self._live: Any = None
        self._ticker: _Ticker | None = None
        self._echo = _EchoOff(on_escape)

    @property
    def active(self) -> bool:
        return self._live is not None

    def start(self) -> None:
        from rich.live import Live

        with self.lock:
            if self._live is not None:
                return
            self._live = Live(console=self.console, get_renderable=self._renderable, transient=True,
                              auto_refresh=False, redirect_stdout=False, redirect_stderr=False)
            if self.console.is_terminal and self.console.file.isatty():
                self._echo.start()
            self._live.start(refresh=True)
            if self._interval:  # without a ticker the owner redraws with refresh()
                self._ticker = _Ticker(self, self._interval)
                self._ticker.start()

    def stop(self) -> None:
        with self.lock:
            live, ticker, self._live, self._ticker = self._live, self._ticker, None, None
            if ticker is not None:
                ticker.stopped.set()
            if live is not None:
                live.stop()
                self._echo.stop()

    def refresh(self, force: bool = False) -> None:
        with self.lock:
            if self._live is not None and (force or self._changed()):
                self._live.refresh()


class _Ticker(threading.Thread):
    def __init__(self, area: LiveArea, interval: float) -> None:
        super().__init__(name="glassloop-live", daemon=True)
        self.area, self.interval = area, interval
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            with self.area.lock:
                if self.stopped.is_set():
                    return
                self.area.refresh()


ESC_ALONE_S = 0.05  # an Esc with nothing after it this long is the Esc key, not a sequence


def ctrl_c_interrupts() -> None:
    """At a terminal Ctrl-C stops a turn, even when the program was started with SIGINT
    ignored (a job a script runs in the background inherits that, and Python then never
    raises KeyboardInterrupt)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def interrupt_main() -> None:
    """Stop the running turn exactly as Ctrl-C does (the main thread gets SIGINT)."""
    os.kill(os.getpid(), signal.SIGINT)


class _EchoOff:
    """Keeps the terminal from echoing keys (and "^C"): an echoed character moves
    the cursor and the next redraw erases the wrong lines. Typed-ahead keys stay
    queued for the next prompt.

    With ``on_escape``, the terminal also leaves line mode and a thread reads the
    keys: a lone Esc calls ``on_escape``; the others are handed to the next
    prompt_toolkit prompt as typed-ahead keys when the area stops."""

    def __init__(self, on_escape: Callable[[], None] | None = None) -> None:
        self._saved: tuple[int, list[Any]] | None = None
        self._on_escape = on_escape
        self._reader: threading.Thread | None = None
        self._wake = (-1, -1)
        self._typed = bytearray()

    def start(self) -> None:
        try:
            import termios

            fd = sys.stdin.fileno()
            saved = termios.tcgetattr(fd)
            lflag = saved[3] & ~(termios.ECHO | (termios.ICANON if self._on_escape else 0))
            cc = list(saved[6])
            cc[termios.VMIN], cc[termios.VTIME] = (1, 0) if self._on_escape else (cc[termios.VMIN], cc[termios.VTIME])
            termios.tcsetattr(fd, termios.TCSANOW, [*saved[:3], lflag, *saved[4:6], cc])
        except Exception:  # not a terminal: pipes, tests, Windows (no termios)
            return
        self._saved = (fd, saved)
        if self._on_escape is not None:
            self._wake = os.pipe()
            self._reader = threading.Thread(target=self._read_keys, args=(fd, self._wake[0]),
                                            name="glassloop-keys", daemon=True)
            self._reader.start()

    def stop(self) -> None:
        saved, self._saved = self._saved, None
        reader, self._reader = self._reader, None
        if reader is not None:
            os.write(self._wake[1], b"x")
            reader.join(1.0)
            for end in self._wake:
                os.close(end)
        if saved is not None:
            import termios

            try:
                termios.tcsetattr(saved[0], termios.TCSANOW, saved[1])
            except Exception:  # the terminal went away
                pass
            typed, self._typed = bytes(self._typed), bytearray()
            _hand_to_prompt(saved[0], typed)

    def _read_keys(self, fd: int, wake: int) -> None:
        try:
            while fd in select.select([fd, wake], [], [])[0]:
                data = os.read(fd, 1024)
                if not data:
                    return
                if data == b"\x1b" and fd not in select.select([fd, wake], [], [], ESC_ALONE_S)[0]:
                    if self._on_escape is not None:
                        self._on_escape()
                    continue
                self._typed += data
        except OSError:  # the terminal went away
            return


def _hand_to_prompt(fd: int, typed: bytes) -> None:
    """Keys read while the live area was up become the next prompt's typed-ahead keys."""
    if not typed:
        return
    from prompt_toolkit.input.typeahead import store_typeahead
    from prompt_toolkit.input.vt100_parser import Vt100Parser
    from prompt_toolkit.key_binding import KeyPress

    keys: list[KeyPress] = []
    parser = Vt100Parser(keys.append)
    parser.feed(typed.decode("utf-8", "replace"))
    parser.flush()
    store_typeahead(_TypeaheadKey(f"fd-{fd}"), keys)  # type: ignore[arg-type]  # only its hash is read


class _TypeaheadKey:
    """Stands for the prompt's input in prompt_toolkit's typed-ahead store (keyed by fd)."""

    def __init__(self, key: str) -> None:
        self.key = key

    def typeahead_hash(self) -> str:
        return self.key


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C until the block ends, then raise it as usual.

    A KeyboardInterrupt in the middle of printing a finished block would leave
    it half printed or the live area half drawn; the delay is one event's
    rendering. Only the main thread receives signals; elsewhere this is a no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received and callable(previous):
            previous(signal.SIGINT, None)
        elif received and previous != signal.SIG_IGN:
            raise KeyboardInterrupt
