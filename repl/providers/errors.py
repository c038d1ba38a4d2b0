"""Map openai SDK exceptions to ProviderError: one clear line, never a key.

``openai`` is imported inside the functions: by the time an SDK error exists
the SDK is loaded anyway, and importing this module stays free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from repl.providers.base import ErrorKind, ProviderError
from repl.redact import Redactor, mask_url, url_secrets

RETRY_COUNT_HEADER = "x-stainless-retry-count"  # sent by the SDK on every attempt


@dataclass(frozen=True)
class ErrorContext:
    """What an error message may name: provider, model, URL, key variable (never the key)."""

    provider: str
    model: str
    base_url: str
    api_key_env: str | None = None
    timeout_s: float = 60
    secrets: tuple[str, ...] = ()  # strings to blank out of every message (and the URL's own)


def one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def retries_taken(request: Any) -> int:
    """How many retries the SDK made before ``request`` (an httpx request), from its header."""
    headers = getattr(request, "headers", None) or {}
    try:
        return int(headers.get(RETRY_COUNT_HEADER, 0))
    except (TypeError, ValueError):
        return 0


def make_error(kind: ErrorKind, message: str, ctx: ErrorContext, partial_text: str = "") -> ProviderError:
    redact = Redactor((*ctx.secrets, *url_secrets(ctx.base_url)), mark="***")
    return ProviderError(kind, redact(one_line(message, 400)), partial_text)


def from_sdk_error(
    err: Exception, ctx: ErrorContext, *, streaming: bool = False, partial_text: str = ""
) -> ProviderError:
    """``streaming``: the answer had started, so a dropped connection is a cut stream."""
    import openai

    where = mask_url(ctx.base_url)
    if isinstance(err, openai.APITimeoutError):
        phase = "the answer stalled" if streaming else f"no answer from {where}"
        msg = f"{ctx.provider}: {phase} for {ctx.timeout_s:g} s (timeout)"
        return make_error("timeout", msg, ctx, partial_text)
    if isinstance(err, openai.APIConnectionError):
        if streaming:
            msg = f"{ctx.provider}: the connection to {where} dropped mid-answer"
            return make_error("stream_cut", msg, ctx, partial_text)
        msg = f"cannot reach provider '{ctx.provider}' at {where}: {_cause(err)}"
        return make_error("unreachable", msg, ctx)
    if isinstance(err, openai.APIStatusError):
        return _from_status(err, ctx, where, partial_text)
    if isinstance(err, openai.APIError):
        msg = f"{ctx.provider}: error reported during the answer: {err.message}"
        return make_error("server", msg, ctx, partial_text)
    return make_error("other", f"{ctx.provider}: {type(err).__name__}: {err}", ctx, partial_text)


def _from_status(err: Any, ctx: ErrorContext, where: str, partial_text: str) -> ProviderError:
    code = err.status_code
    detail = server_detail(err)
    retries = retries_taken(err.response.request)
    after = f" after {retries} {'retry' if retries == 1 else 'retries'}" if retries else ""
    if code == 401:
        hint = f"the {ctx.api_key_env} environment variable" if ctx.api_key_env else "the API key setting"
        return make_error("auth", f"{ctx.provider}: API key rejected (HTTP 401); check {hint}", ctx)
    if code == 403:
        return make_error("auth", f"{ctx.provider}: access denied (HTTP 403): {detail}", ctx)
    if code == 404:
        msg = f"model '{ctx.model}' not found at {where} (HTTP 404: {detail})"
        return make_error("not_found", msg, ctx)
    if code == 429:
        msg = f"{ctx.provider}: rate limited (HTTP 429){after}; wait and try again"
        return make_error("rate_limit", msg, ctx)
    if code >= 500:
        return make_error("server", f"{ctx.provider}: server error (HTTP {code}){after}: {detail}", ctx)
    kind: ErrorKind = "bad_request" if code in (400, 413, 422) else "other"
    return make_error(kind, f"{ctx.provider}: request rejected (HTTP {code}): {detail}", ctx)


def server_detail(err: Any) -> str:
    """The server's own error message (body.message), else the raw body, shortened."""
    body = getattr(err, "body", None)
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return one_line(body["message"])
    if body:
        return one_line(str(body))
    return "no details"


def _cause(err: BaseException) -> str:
    """The innermost reason of a connection error ("Connection refused", DNS failure…)."""
    reason = err.__cause__ or err.__context__
    while reason is not None and (reason.__cause__ or reason.__context__) is not None:
        reason = reason.__cause__ or reason.__context__
    text = re.sub(r"^\[Errno -?\d+\]\s*", "", str(reason)) if reason is not None else ""
    return one_line(text) or "connection failed"
