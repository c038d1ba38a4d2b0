"""Text that can always be written as UTF-8.

Lone UTF-16 surrogates reach us from JSON (a model that splits an emoji into
its two ``\\udXXX`` halves, in one chunk or across two) and from bytes that are
not UTF-8 (argv and typed input decoded with ``surrogateescape``, file names).
Writing one to a UTF-8 file or terminal raises. ``valid_text`` is the one fix:
adjacent halves become the character they stand for, any other half U+FFFD.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """``text`` with surrogate pairs joined and lone surrogates replaced by U+FFFD."""
    if text.isascii() or not _SURROGATE.search(text):  # isascii() is a flag check
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def valid_data(value: Any) -> Any:
    """A JSON-like ``value`` with ``valid_text`` applied to every string, keys included."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_data(k): valid_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [valid_data(item) for item in value]
    return value


def split_high_surrogate(text: str) -> tuple[str, str]:
    """``text`` cut before a trailing high surrogate, whose other half may be in the next chunk."""
    if text and "\ud800" <= text[-1] <= "\udbff":
        return text[:-1], text[-1]
    return text, ""
