"""Streaming Markdown in linear time.

Text arrives in small deltas. Finished top-level blocks (as markdown-it sees
them) are printed to the scrollback once; only the open tail block is drawn
live. A block counts as finished when a later block has started on a complete
line: CommonMark never reopens a closed block, and a partial last line is never
trusted (``foo\\n-`` may still become a list). The printed blocks plus the
final tail render exactly like a one-shot ``Markdown(whole_text)``, because
each chunk is rendered by the same ``Markdown`` class and the blank line Rich
would put at a seam is re-inserted there (``seam_flags``).

Cost stays linear: the open tail is re-parsed only after it has grown by a
fraction of its size, and the live view renders at most the last screenful of
the tail's source lines, at most 15 times a second. The live view is drawn in
the renderer's ``live.LiveArea``.

Known limit: a reference-style link whose definition is in a different chunk
is not resolved (model output rarely uses them).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING, Any

from repl.ui.escape import clean

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType

REPARSE_RATIO = 4  # re-parse the tail once it has grown by 1/REPARSE_RATIO
LIVE_HEAD_LINES = 2  # keep a block's first lines (fence opener, table header) in the live view
LIVE_MIN_INTERVAL = 1 / 15  # re-render a changed tail at most this often (seconds) ...
LIVE_COST_FACTOR = 5  # ... or at most every 5x its last render time, if that is longer


@cache
def _block_parser() -> Any:
    from markdown_it import MarkdownIt

    # Same rules as rich.markdown.Markdown; inline parsing is not needed for block bounds.
    return MarkdownIt().enable("strikethrough").enable("table").disable("inline")


def make_markdown(text: str, code_theme: str = "monokai") -> RenderableType:
    """The Markdown renderable used for both finished chunks and one-shot renders."""
    from rich.markdown import Markdown

    return Markdown(text, code_theme=code_theme)


def top_level_blocks(text: str) -> list[tuple[int, str]]:
    """(first line, opening token type) of each top-level block of ``text``."""
    return [
        (token.map[0], token.type)
        for token in _block_parser().parse(text)
        if token.level == 0 and token.nesting >= 0 and token.map is not None
    ]


_HANDLED_INLINE = {"text", "hardbreak", "softbreak", "link_open", "link_close", "html_inline"}


def _flatten(tokens: list[Any]) -> Iterator[Any]:
    for token in tokens:  # as rich.markdown.Markdown walks them
        if token.children and not (token.type == "fence" or token.tag == "img"):
            yield from _flatten(token.children)
        else:
            yield token


def seam_flags(markdown: Any) -> tuple[bool, bool | None]:
    """How a chunk's render joins the one before it, mirroring Rich's Markdown walk.

    Rich emits a blank line before a rendered element when the element closed
    just before it asked for one. Returns (whether the chunk's first rendered
    element reads that state from the previous chunk, the state it leaves
    behind, or None when it closes nothing).
    """
    from rich.markdown import Markdown, MarkdownElement, UnknownElement

    stack: list[type[MarkdownElement]] = []
    reads_incoming: bool | None = None
    outgoing: bool | None = None
    for token in _flatten(markdown.parsed):
        if token.type in _HANDLED_INLINE or (
            token.tag in Markdown.inlines and token.type not in ("fence", "code_block")
        ):
            continue
        element = Markdown.elements.get(token.type) or UnknownElement
        if token.nesting == 1:
            stack.append(element)
            continue
        if token.nesting == -1:
            element = stack.pop()
        parent = stack[-1] if stack else None
        collected = parent is not None and parent.on_child_close is not MarkdownElement.on_child_close
        if not collected and reads_incoming is None:
            reads_incoming = outgoing is None
        outgoing = element.new_line
    return bool(reads_incoming), outgoing


class MarkdownStream:
    """Feed deltas with ``feed()``; call ``finish()`` when the text is complete.

    Finished blocks go straight to ``console.print``. ``live_view()`` is the
    renderable of the open tail, for the caller's ``LiveArea``.
    """

    def __init__(self, console: Console, *, code_theme: str = "monokai") -> None:
        self.console = console
        self.code_theme = code_theme
        self.reserve_lines = 2  # screen lines the live view leaves to other content
        self._lines: list[str] = []  # complete, cleaned lines of the open tail
        self._partial: list[str] = []  # raw pieces of the unfinished last line
        self._new_lines = 0  # complete lines added since the last parse
        self.generation = 0  # counts flushes: the live view must forget what was printed
        self._blank_owed = False  # Rich's blank line between blocks, owed at the next seam
        self._view = _TailView(self)

    @property
    def has_tail(self) -> bool:
        return bool(self._lines or self._partial)

    def feed(self, delta: str) -> None:
        """Add streamed text; print every block that can no longer change."""
        if "\n" not in delta:
            if delta:
                self._partial.append(delta)
            return
        self._partial.append(delta)
        joined = "".join(self._partial)
        cut = joined.rfind("\n")
        self._partial = [joined[cut + 1 :]] if cut + 1 < len(joined) else []
        new_lines = [line + "\n" for line in clean(joined[:cut]).split("\n")]
        self._lines.extend(new_lines)
        self._new_lines += len(new_lines)
        if self._new_lines * REPARSE_RATIO >= len(self._lines):
            self._flush_finished()

    def finish(self) -> None:
        """Print the open tail (the text is complete) and start over."""
        text = "".join(self._lines) + clean("".join(self._partial))
        self._lines, self._partial, self._new_lines = [], [], 0
        self.generation += 1
        if text.strip():
            self._print(text)
        self._blank_owed = False

    def live_view(self) -> _TailView:
        """A renderable showing the bottom of the open tail (empty when there is none)."""
        return self._view

    def tail_source(self, max_lines: int, max_chars: int) -> str:
        """The tail's source for the live view: its first lines and its last ``max_lines``,
        at most its last ``max_chars`` characters (one very long line)."""
        lines = self._lines[:]  # a copy: the live thread reads while the main thread feeds
        partial = clean("".join(self._partial[:]))
        if len(lines) > LIVE_HEAD_LINES + max_lines:
            lines = lines[:LIVE_HEAD_LINES] + lines[-max_lines:]
        text = "".join(lines) + partial
        return text if len(text) <= max_chars else text[-max_chars:]

    def _flush_finished(self) -> None:
        self._new_lines = 0
        blocks = top_level_blocks("".join(self._lines))
        if len(blocks) < 2:
            return
        cut = blocks[-1][0]
        finished = "".join(self._lines[:cut])
        del self._lines[:cut]  # first, so the live view drawn with the print shows the rest
        self.generation += 1
        self._print(finished)

    def _print(self, text: str) -> None:
        markdown = make_markdown(text, self.code_theme)
        reads_incoming, outgoing = seam_flags(markdown)
        if reads_incoming and self._blank_owed:
            self.console.print()
        self.console.print(markdown)
        if outgoing is not None:
            self._blank_owed = outgoing


class _TailView:
    """Renders the open tail, cropped to its last lines that fit on the screen.

    Redraws can come faster than is worth rendering Markdown for (a redraw per
    token); the tail is re-rendered at most every ``LIVE_MIN_INTERVAL`` seconds
    (or ``LIVE_COST_FACTOR`` x its last render time, if slower) and otherwise
    shown as last rendered.
    A flushed block or a new screen size always re-renders at once, so a
    printed block never also shows in the live area.
    """

    def __init__(self, stream: MarkdownStream) -> None:
        self._stream = stream
        self._source = ""
        self._shape: tuple[int, int, int] | None = None  # width, height, stream generation
        self._lines: list[Any] = []
        self._due = 0.0  # monotonic time when a changed tail may be rendered again

    def stale(self, console: Console) -> bool:
        """Whether drawing now would show something new (else a redraw can be skipped)."""
        height = max(3, console.size.height - self._stream.reserve_lines)
        if (console.width, height, self._stream.generation) != self._shape:
            return True
        return time.monotonic() >= self._due and self._source_for(console.width, height) != self._source

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Any]:
        from rich.segment import Segment

        height = max(3, options.size.height - self._stream.reserve_lines)
        shape = (options.max_width, height, self._stream.generation)
        now = time.monotonic()
        if shape != self._shape or now >= self._due:
            source = self._source_for(options.max_width, height)
            if source != self._source or shape != self._shape:
                self._lines = self._render(console, options, source, height)
                spent = time.monotonic() - now
                self._due = now + max(LIVE_MIN_INTERVAL, LIVE_COST_FACTOR * spent)
            self._source, self._shape = source, shape
        newline = Segment.line()
        for line in self._lines:
            yield from line
            yield newline

    def _source_for(self, width: int, height: int) -> str:
        return self._stream.tail_source(2 * height, 2 * height * width)

    def _render(self, console: Console, options: ConsoleOptions, source: str, height: int) -> list[Any]:
        if not source.strip():
            return []
        markdown = make_markdown(source, self._stream.code_theme)
        rendered = console.render_lines(markdown, options.update(height=None), pad=False)
        while rendered and not "".join(s.text for s in rendered[-1]).strip():
            rendered.pop()  # trailing blank lines would only push the text up
        return rendered[-height:]

