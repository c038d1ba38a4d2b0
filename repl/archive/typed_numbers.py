"""Numbers a person types (``/rewind 3``, ``/trace 2``, ``--resume ID@1``): ASCII digits within
bounds, or refused in one line that names the value.

``str.isdigit`` accepts "²", which ``int`` refuses, and ``int`` takes "٣", "+3", " 3" and "1_0",
which nobody types as a turn number; a few thousand digits make ``int`` raise. So digits 0-9 only,
and no more of them than the bound has.
"""

from __future__ import annotations

MOST = 1_000_000  # no conversation or branch list comes near it
SHOWN = 16  # characters of a refused value shown


class NotANumber(ValueError):
    """A typed value that is no whole number in range; its text is the one line to show."""


def typed_number(text: str, what: str, least: int = 1, most: int = MOST) -> int:
    """``text`` as a whole number from ``least`` to ``most``; NotANumber otherwise, its line
    beginning with ``what`` (the thing that takes the number: "/rewind takes a turn number")."""
    shown = repr(text if len(text) <= SHOWN else text[:SHOWN - 1] + "…")  # repr: controls escaped
    if not (text.isascii() and text.isdigit()):
        raise NotANumber(f"{what} in digits 0-9, not {shown}")
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(most)) or not least <= int(digits) <= most:
        raise NotANumber(f"{what} from {least} to {most}, not {shown}")
    return int(digits)
