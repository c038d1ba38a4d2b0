"""A cancel signal a tool can check (pi's ``AbortSignal``).

The agent loop gives each tool call its own ``Cancel``; it is set when the call
times out, when the turn ends (interrupted, out of time, or done while the call
still runs) and when the loop's runner closes. Python threads cannot be killed,
so a long tool cooperates: it waits on ``cancel.wait(seconds)`` instead of
sleeping, checks ``cancel.cancelled`` between steps, or registers
``on_cancel(stop)`` to abort what it is waiting for (an MCP request, say).

A tool function receives it by declaring a ``cancel`` parameter (never part of
its JSON schema); code that runs inside a tool call without such a parameter
(a wrapper whose keyword arguments belong to a server's schema) reads
``current()``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar

PARAMETER = "cancel"  # the parameter through which a tool function receives its signal


class Cancel:
    """Set once, never cleared; safe to use from any thread."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], object]] = []

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until cancelled (True) or ``timeout`` seconds passed (False)."""
        return self._event.wait(timeout)

    def cancel(self) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Run ``callback`` once when cancelled (at once if already); returns what unregisters it."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        callback()
        return lambda: None

    def child(self) -> Cancel:
        """A signal of its own that is also set when this one is (a call's, under its turn's)."""
        child = Cancel()
        forget = self.on_cancel(child.cancel)
        child.on_cancel(forget)  # a child cancelled first leaves no callback behind
        return child

    def _forget(self, callback: Callable[[], object]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)


_current: ContextVar[Cancel | None] = ContextVar("glassloop_cancel", default=None)


def current() -> Cancel:
    """The signal of the tool call running in this thread (one never set outside a call)."""
    return _current.get() or Cancel()


def running(signal: Cancel) -> Callable[[], None]:
    """Make ``signal`` this thread's ``current()``; returns what restores the one before."""
    token = _current.set(signal)
    return lambda: _current.reset(token)
