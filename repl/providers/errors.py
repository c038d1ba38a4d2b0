"""Map openai SDK exceptions to ProviderError: one clear line, never a key.

``openai`` is imported inside the functions: by the time an SDK error exists
the SDK is loaded anyway, and importing this module stays free.
"""

from __future__ import annotations

import email.utils
import math
import random
import re
import time
from dataclasses import dataclass
from typing import Any

from repl.config.redact import Redactor, mask_url, url_secrets
from repl.providers.base import ErrorKind, ProviderError

RETRY_COUNT_HEADER = "x-stainless-retry-count"  # the retries before this attempt, on every request
# The SDK's own retry policy, applied by the adapters so that each wait is an event.
FIRST_RETRY_DELAY_S, MAX_RETRY_DELAY_S, MAX_RETRY_AFTER_S = 0.5, 8.0, 120.0
_STATUS_WORDS = {408: "request timeout", 409: "conflict", 429: "rate limited"}


@dataclass(frozen=True)
class ErrorContext:
    """What an error message may name: provider, model, URL, key variable (never the key)."""

    provider: str
    model: str
    base_url: str
    api_key_env: str | None = None
    timeout_s: float = 60
    secrets: tuple[str, ...] = ()  # strings to blank out of every message (and the URL's own)
    attempts: int = 1  # requests made, retries included
    elapsed_s: float = 0.0  # from the first attempt to the failure


# what a terminal would act on (ANSI escapes, bidi overrides): written as escapes, never sent raw
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def one_line(text: str, limit: int = 200) -> str:
    """``text`` on one line, control characters escaped (``\\x1b``), cut to ``limit``."""
    flat = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), " ".join(str(text).split()))
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def retries_taken(request: Any) -> int:
    """How many retries the SDK made before ``request`` (an httpx request), from its header."""
    headers = getattr(request, "headers", None) or {}
    try:
        return int(headers.get(RETRY_COUNT_HEADER, 0))
    except (TypeError, ValueError):
        return 0


def make_error(kind: ErrorKind, message: str, ctx: ErrorContext, partial_text: str = "") -> ProviderError:
    return ProviderError(kind, one_line(_redactor(ctx)(message), 400), partial_text)


def _redactor(ctx: ErrorContext) -> Redactor:
    return Redactor((*ctx.secrets, *url_secrets(ctx.base_url)), mark="***")


def from_sdk_error(
    err: Exception, ctx: ErrorContext, *, streaming: bool = False, partial_text: str = ""
) -> ProviderError:
    """``streaming``: the answer had started, so a dropped connection is a cut stream."""
    import openai

    where = mask_url(ctx.base_url)
    if isinstance(err, openai.APITimeoutError):
        if streaming:
            msg = f"{ctx.provider}: the answer stalled for {ctx.timeout_s:g} s (timeout)"
        else:
            tries = f", {ctx.attempts} attempts, {ctx.elapsed_s:.0f} s in all" if ctx.attempts > 1 else ""
            msg = f"{ctx.provider} at {where}: no answer in {ctx.timeout_s:g} s{tries} (timeout)"
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
    detail = server_detail(err, _redactor(ctx))
    retries = max(ctx.attempts - 1, retries_taken(err.response.request))
    after = f" after {retries} {'retry' if retries == 1 else 'retries'}" if retries else ""
    if code == 401:
        hint = f"the {ctx.api_key_env} environment variable" if ctx.api_key_env else "the API key setting"
        return make_error("auth", f"{ctx.provider}: API key rejected (HTTP 401: {detail}); check {hint}", ctx)
    if code == 403:
        return make_error("auth", f"{ctx.provider}: access denied (HTTP 403): {detail}", ctx)
    if code == 404:
        msg = f"model '{ctx.model}' not found at {where} (HTTP 404: {detail})"
        return make_error("not_found", msg, ctx)
    if code == 429:
        said = f": {detail}" if detail != NO_DETAILS else "; wait and try again"
        return make_error("rate_limit", f"{ctx.provider}: rate limited (HTTP 429){after}{said}", ctx)
    if code >= 500:
        return make_error("server", f"{ctx.provider}: server error (HTTP {code}){after}: {detail}", ctx)
    kind: ErrorKind = "bad_request" if code in (400, 413, 422) else "other"
    return make_error(kind, f"{ctx.provider}: request rejected (HTTP {code}): {detail}", ctx)


def retry_delay(err: Exception, retries: int) -> float | None:
    """Seconds to wait before the next attempt after ``err`` (an SDK error), when
    ``retries`` were made already; None when it is not worth retrying. The SDK's rules:
    timeouts, connection errors, 408, 409, 429 and 5xx are retried (``x-should-retry``
    decides when sent); ``Retry-After`` up to two minutes is honoured, else the wait
    doubles from 0.5 s up to 8 s, less up to a quarter at random."""
    import openai

    after = None
    if isinstance(err, openai.APIStatusError):
        headers = err.response.headers
        after = _retry_after(headers)
        if after is not None and after > MAX_RETRY_AFTER_S:
            return None
        hint = headers.get("x-should-retry")
        if hint in ("true", "false"):
            if hint == "false":
                return None
        elif err.status_code not in (408, 409, 429) and err.status_code < 500:
            return None
    elif not isinstance(err, openai.APITimeoutError | openai.APIConnectionError):
        return None
    if after is not None and 0 < after <= MAX_RETRY_AFTER_S:
        return after
    return min(FIRST_RETRY_DELAY_S * 2.0 ** min(retries, 30), MAX_RETRY_DELAY_S) * (1 - 0.25 * random.random())


def retry_reason(err: Exception, ctx: ErrorContext) -> str:
    """Why an attempt failed, in a few words: "429 rate limited", "no answer in 60 s"."""
    import openai

    if isinstance(err, openai.APIStatusError):
        code = err.status_code
        return f"{code} {_STATUS_WORDS.get(code, 'server error' if code >= 500 else 'error')}"
    if isinstance(err, openai.APITimeoutError):
        return f"no answer in {ctx.timeout_s:g} s"
    return "connection failed"


def _retry_after(headers: Any) -> float | None:
    """``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date) in seconds."""
    for name, divisor in (("retry-after-ms", 1000), ("retry-after", 1)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue
        return seconds if math.isfinite(seconds) else MAX_RETRY_AFTER_S + 1
    try:
        when = email.utils.parsedate_tz(headers.get("retry-after"))
        return None if when is None else email.utils.mktime_tz(when) - time.time()
    except (TypeError, ValueError, OverflowError):
        return None


NO_DETAILS = "no details"


def server_detail(err: Any, redact: Redactor) -> str:
    """The server's own error message (body.message), else the raw body: redacted, then on one
    line, escaped and shortened (a secret is blanked before a cut could leave half of it)."""
    body = getattr(err, "body", None)
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return one_line(redact(body["message"])) or NO_DETAILS
    if body:
        return one_line(redact(str(body)))
    return NO_DETAILS


def _cause(err: BaseException) -> str:
    """The innermost reason of a connection error ("Connection refused", DNS failure…)."""
    reason = err.__cause__ or err.__context__
    while reason is not None and (reason.__cause__ or reason.__context__) is not None:
        reason = reason.__cause__ or reason.__context__
    text = re.sub(r"^\[Errno -?\d+\]\s*", "", str(reason)) if reason is not None else ""
    return one_line(text) or "connection failed"
