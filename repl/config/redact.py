"""Keeping secrets out of files, outputs and messages: the one home for redaction.

A ``Redactor`` blanks the known secrets by value (configured API keys, the
password and secret query values of configured URLs, secret-named MCP env
and header values: ``known_secrets()``) and masks by shape anything that
looks like a bearer token or an ``sk-`` key, the ``user:password@`` of a URL
and secret-named query parameters (``?api-key=``, ``&token=``...).

Redaction only works on whole text: a key streamed in 8-character pieces is
not recognisable in any one piece, so whoever writes streamed text joins it
first (the trace writes one text record per model call).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

if TYPE_CHECKING:
    from repl.config.settings import Settings

REDACTED = "[redacted]"
MIN_SECRET = 4  # shorter configured keys would blank ordinary words
MIN_DERIVED = 8  # values taken from URLs and MCP tables: these are less surely secrets

_SECRET_NAME = re.compile(r"(?i)key|token|secret|passw|pwd|auth|sig|credential")
_SHAPES = re.compile(
    r"""(?ix)
      (?P<bearer>bearer\s+)[A-Za-z0-9._\-]{8,}
    | \bsk-[A-Za-z0-9_\-]{8,}
    | (?P<scheme>\b[a-z][a-z0-9+.\-]*://)[^/?\#\s@"'<>\\]+@          # user:password@ of a URL
    | (?P<param>[?&;][\w.\-]*(?:key|token|secret|passw|pwd|auth|sig|credential)[\w.\-]*=)
      [^&\#\s"'<>\\]+                                              # ?api-key=... &token=...
    """
)


class Redactor:
    """``redactor(text)``: ``text`` with every known secret and secret-shaped string blanked."""

    def __init__(self, secrets: Iterable[str | None] = (), mark: str = REDACTED) -> None:
        self.secrets = sorted({s for s in secrets if s and len(s) >= MIN_SECRET}, key=len, reverse=True)
        self.mark = mark

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, self.mark)
        return _SHAPES.sub(self._mask, text) if _may_hold_shapes(text) else text

    def value(self, value: Any) -> Any:
        """``value`` made JSON-ready (anything else becomes its ``str``), every string redacted."""
        if value is None or isinstance(value, (bool, int, float)):
            return value
        if isinstance(value, dict):
            return {self(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(item) for item in value]
        return self(str(value))

    def _mask(self, match: re.Match[str]) -> str:
        keep = match.group("bearer") or match.group("scheme") or match.group("param") or ""
        return keep + self.mark + ("@" if match.group("scheme") else "")


def _may_hold_shapes(text: str) -> bool:
    """A cheap test that skips the regex for most text (it costs ~0.1 ms per KiB)."""
    if "://" in text or "=" in text:
        return True
    lower = text.lower()
    return "sk-" in lower or "bearer" in lower


def mask_url(url: str) -> str:
    """``url`` for display: no ``user:password@``, no secret query values."""
    return Redactor(mark="***")(url)


def masked_key(secret: str) -> str:
    """``sk-…abcd`` (never more than the last 4 characters), or (set) / (not set)."""
    if not secret:
        return "(not set)"
    if len(secret) < 12:
        return "(set)"
    return ("sk-" if secret.startswith("sk-") else "") + "…" + secret[-4:]


def url_secrets(url: str) -> list[str]:
    """The password and the secret-named query values of ``url``."""
    try:
        parts = urlsplit(url or "")
        found = [parts.password or ""]
    except ValueError:
        return []
    found += [value for name, value in parse_qsl(parts.query) if _SECRET_NAME.search(name)]
    return [s for s in found if len(s) >= MIN_DERIVED]


def known_secrets(settings: Settings) -> list[str]:
    """Every secret value the configuration holds: API keys, URL passwords and tokens,
    MCP env and header values whose names say they are secret."""
    found = [p.api_key for p in settings.providers.values()] + url_secrets(settings.base_url)
    for profile in settings.providers.values():
        found += url_secrets(profile.base_url)
    for server in settings.mcp_servers.values():
        found += url_secrets(str(server.get("url") or ""))
        for table in ("env", "headers"):
            found += _secret_values(server.get(table))
    return found


def _secret_values(table: Any) -> list[str]:
    if not isinstance(table, dict):
        return []
    values = [str(v) for name, v in table.items() if _SECRET_NAME.search(str(name))]
    values += [v.split()[-1] for v in values if " " in v.strip()]  # "Bearer TOKEN" -> TOKEN
    return [v for v in values if len(v) >= MIN_DERIVED]


def redactor_for(settings: Settings) -> Redactor:
    return Redactor(known_secrets(settings))
