"""What both openai-SDK adapters share: settings, the lazily built client, error context."""

from __future__ import annotations

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

    def _context(self) -> ErrorContext:
        base_url = self._base_url or (str(self._client.base_url) if self._client else "")
        return ErrorContext(
            provider=self.name, model=self.model, base_url=base_url, api_key_env=self._api_key_env,
            timeout_s=self._timeout_s, secrets=(self._api_key or "",),
        )
