"""Make untrusted text (model output, tool results, file contents) safe to show.

``clean()`` removes terminal escape sequences and control characters so a
string cannot move the cursor, recolour the terminal or set its title, and
makes it valid Unicode (``valid_text``) so writing it cannot raise.
Rich markup in it is a separate concern: render untrusted text through
``rich.text.Text`` objects (or ``rich.markup.escape``), never as markup;
``json_text()`` does that for tool arguments and results.

No pattern here spans a newline, so cleaning text line by line gives the same
result as cleaning it whole (the Markdown stream relies on that).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from repl.loop.unicode import json_dumps, valid_text

if TYPE_CHECKING:
    from rich.text import Text

_ANSI = re.compile(
    r"""
    \x1b\[[0-?]*[ -/]*[@-~]                     # CSI: colours, cursor moves
    | \x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)       # OSC: titles, hyperlinks
    | \x1b[PX^_][^\x1b\n]*\x1b\\                # DCS, SOS, PM, APC strings
    | \x1b[ -/]*[0-~]                           # two-character escapes
    | \x9b[0-?]*[ -/]*[@-~]                     # 8-bit CSI
    """,
    re.VERBOSE,
)
# C0 controls except \t and \n, DEL, C1 controls, lone ESC leftovers, and the
# bidirectional overrides that can make text display differently from what it is.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def clean(text: str) -> str:
    """``text`` without ANSI escape sequences and control characters (keeps \\n and \\t)."""
    if not text:
        return ""
    if text.isprintable():  # the common case: nothing to strip (a lone surrogate is not printable)
        return text
    return _CONTROL.sub("", _ANSI.sub("", valid_text(text)))


def one_line(text: str, limit: int = 80) -> str:
    """The first non-empty line of ``text``, cleaned and cut to ``limit`` characters."""
    for line in clean(text).splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def cut_words(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, ending in "…" when cut."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    if not text[limit - 1].isspace() and " " in head:
        head = head.rsplit(" ", 1)[0]
    return head.rstrip(" ,;:") + "…"


# Characters JSON leaves raw that a terminal may still act on (8-bit CSI/OSC, bidi overrides).
_JSON_RAW_CONTROLS = re.compile(r"[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def json_display(value: Any, indent: int | None = None) -> str:
    """``value`` as JSON that is safe to print whole: readable (not ASCII-escaped), but each
    character a terminal could act on written as a ``\\u`` escape (``json.dumps`` escapes
    the C0 controls itself), so the text still parses to the same value (NaN and the
    infinities, which JSON cannot hold, as strings: ``json_dumps``)."""
    text = json_dumps(value, ensure_ascii=False, indent=indent)
    return _JSON_RAW_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def json_text(value: Any, *, max_lines: int = 12, string_chars: int = 160, one_line_chars: int = 60) -> Text:
    """``value`` as highlighted JSON for display: one line when short, else indented;
    long strings and line counts cut; a ``str`` (invalid JSON from a model) shown as is."""
    from rich.highlighter import JSONHighlighter
    from rich.text import Text

    if isinstance(value, str):
        source = _shorten(value, 2000)
    else:
        shown = _shorten(value, string_chars)
        source = json.dumps(shown, ensure_ascii=False)
        if len(source) > one_line_chars:
            source = json.dumps(shown, ensure_ascii=False, indent=2)
    lines = clean(source).split("\n")
    if len(lines) > max_lines:
        lines = lines[: max_lines - 1] + [f"… {len(lines) - max_lines + 1} more lines"]
    return JSONHighlighter()(Text("\n".join(lines)))


def _shorten(value: Any, limit: int) -> Any:
    """``value`` with every string longer than ``limit`` cut (for display only)."""
    if isinstance(value, str):
        return value if len(value) <= limit else f"{value[:limit]}… ({len(value):,} characters)"
    if isinstance(value, dict):
        return {key: _shorten(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [_shorten(item, limit) for item in value]
    return value
