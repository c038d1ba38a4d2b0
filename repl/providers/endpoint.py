"""What both openai-SDK adapters share: settings, the lazily built client, error context."""

from __future__ import annotations

import contextlib
import math
import socket
import threading
import time
from typing import Any

from repl.providers.errors import ErrorContext

NO_KEY = "no-key"  # sent when no key is configured, so the SDK never reads OPENAI_API_KEY


class SdkEndpoint:
    """One OpenAI-compatible endpoint; ``openai`` is imported when the client is first needed."""

    def __init__(
        self, *, name: str, model: str, base_url: str | None, api_key: str | None,
        api_key_env: str | None = None, temperature: float | None = None,
        max_tokens: int | None = None, timeout_s: float = 60, max_retries: int = 2,
        context_window: int = 32768,
    ) -> None:
        self.name = name
        self.model = model
        self.context_window = context_window
        self.max_tokens = max_tokens
        self._base_url = base_url
        self._api_key = api_key
        self._api_key_env = api_key_env
        self._temperature = temperature
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._client: Any = None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _get_client(self) -> Any:
        if self._client is None:
            import openai

            self._client = openai.OpenAI(
                base_url=self._base_url, api_key=self._api_key or NO_KEY,
                max_retries=self._max_retries, timeout=self._timeout_s,
            )
        return self._client

    def _client_until(self, deadline: float | None) -> Any:
        """The client for a request that must end by ``deadline``: when the time left is
        shorter than the configured timeout, a copy with that timeout and no retries (a
        retry after a timeout would start past the deadline)."""
        client = self._get_client()
        left = math.inf if deadline is None else deadline - time.monotonic()
        if left >= self._timeout_s:
            return client
        return client.with_options(timeout=max(0.01, left), max_retries=0)

    def _context(self) -> ErrorContext:
        base_url = self._base_url or (str(self._client.base_url) if self._client else "")
        return ErrorContext(
            provider=self.name, model=self.model, base_url=base_url, api_key_env=self._api_key_env,
            timeout_s=self._timeout_s, secrets=(self._api_key or "",),
        )


class StreamDeadline:
    """Drops an open HTTP answer stream when ``deadline`` (``time.monotonic()``) passes.

    A server that sends SSE keep-alive comments, or text without end, never lets the
    read time out, and a comment yields no event that would give the reading thread
    control back. So a timer shuts the socket down from outside (``shutdown`` wakes a
    blocked read; ``close`` would not); the read then fails as a dropped connection
    and the caller, seeing its deadline passed, reports the timeout.
    """

    def __init__(self, response: Any, deadline: float | None) -> None:
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        delay = math.inf if deadline is None else max(0.0, deadline - time.monotonic())
        if delay < threading.TIMEOUT_MAX:
            self._timer = threading.Timer(delay, self._fire, args=(response,))
            self._timer.daemon = True
            self._timer.start()

    def _fire(self, response: Any) -> None:
        with self._lock:
            if self._timer is None:  # disarmed: the stream ended in time
                return
            network = (getattr(response, "extensions", None) or {}).get("network_stream")
            sock = network.get_extra_info("socket") if network is not None else None
            with contextlib.suppress(Exception):  # already closed: nothing left to stop
                if isinstance(sock, socket.socket):
                    sock.shutdown(socket.SHUT_RDWR)
                else:
                    response.close()

    def disarm(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
