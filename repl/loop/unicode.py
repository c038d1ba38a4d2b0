"""Text that can always be written as UTF-8, and JSON that every parser reads.

Lone UTF-16 surrogates reach us from JSON (a model that splits an emoji into
its two ``\\udXXX`` halves, in one chunk or across two) and from bytes that are
not UTF-8 (argv and typed input decoded with ``surrogateescape``, file names).
Writing one to a UTF-8 file or terminal raises. ``valid_text`` is the one fix:
adjacent halves become the character they stand for, any other half U+FFFD.

NaN and the infinities reach us as floats (Python's json reads ``NaN`` and
``Infinity`` in a model's tool-call arguments; a tool may return one); a line
written with them is not JSON. ``json_dumps`` writes each as a string instead.
"""

from __future__ import annotations

import json
import math
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


def json_dumps(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` made valid text (``valid_text``) that a strict JSON
    parser reads: a float JSON cannot hold is written as the string ``"NaN"``,
    ``"Infinity"`` or ``"-Infinity"``."""
    try:
        text = json.dumps(value, allow_nan=False, **options)
    except ValueError:  # the rare case: walk the value only then
        text = json.dumps(_finite(value), allow_nan=False, **options)
    return valid_text(text)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value
