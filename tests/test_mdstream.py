"""Streaming Markdown: chunked output equals a one-shot render; only the tail is live."""

from __future__ import annotations

import io
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.markdown import Markdown

from repl.loop.events import ModelRequest, TextDelta, TurnFinished, TurnStarted, Usage
from repl.ui import mdstream
from repl.ui.mdstream import MarkdownStream, top_level_blocks
from repl.ui.render import Renderer
from tests.terminal import replay

BLOCKS = [
    "# Heading {n}\n", "## Sub heading {n}\n", "### Third {n}\n",
    "Paragraph {n} with *em*, **strong**, `code` and a [link](http://a.example).\nSecond line.\n",
    "- bullet {n}\n- two\n  - nested\n- three\n", "* star\n+ plus\n",
    "1. one {n}\n2. two\n\n3. three, loose\n", "- \n",
    "```python\ndef f(x):\n    return x * {n}\n```\n", "~~~\nraw {n}\n~~~\n", "    indented code {n}\n",
    "| name | value |\n|------|------:|\n| a{n} | 1 |\n| bb | 22 |\n",
    "> quote {n}\n> - list in quote\n", ">\n", "---\n", "***\n", "Setext {n}\n======\n",
    "<div>\nhtml {n}\n</div>\n", "![image](x.png) after an image\n", "text ![i](y.png) inline\n",
    "Hard  \nbreak ~~struck~~\n", "\n",
]
SAMPLE = "".join(BLOCKS).format(n=1).replace("{n}", "1") + "\nLast line without a newline"


def console(height: int = 25, terminal: bool = False) -> Console:
    return Console(file=io.StringIO(), width=80, height=height, force_terminal=terminal,
                   color_system=None, record=not terminal, legacy_windows=False)


def one_shot(text: str) -> str:
    out = console()
    out.print(Markdown(text))
    return out.export_text()


def streamed(text: str, sizes: list[int]) -> str:
    out = console()
    stream = MarkdownStream(out)
    position, index = 0, 0
    while position < len(text):
        size = sizes[index % len(sizes)]
        stream.feed(text[position : position + size])
        position, index = position + size, index + 1
    stream.finish()
    return out.export_text()


def make_text(rng: random.Random) -> str:
    parts = []
    for n in range(rng.randint(1, 14)):
        parts.append(rng.choice(BLOCKS).format(n=n))
        parts.append(rng.choice(["", "\n", "\n\n"]))
    return "".join(parts)


def test_seeded_random_texts_and_chunkings_match_one_shot() -> None:
    for seed in range(120):
        rng = random.Random(seed)
        text = make_text(rng)
        largest = rng.choice([1, 3, 8, 40])
        sizes = [rng.randint(1, largest) for _ in range(50)]
        assert streamed(text, sizes) == one_shot(text), f"seed {seed}"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(BLOCKS), min_size=1, max_size=10),
    st.lists(st.sampled_from(["", "\n", "\n\n"]), min_size=1, max_size=10),
    st.lists(st.integers(1, 30), min_size=1, max_size=20),
)
def test_any_block_sequence_and_chunking_matches_one_shot(
    blocks: list[str], gaps: list[str], sizes: list[int]
) -> None:
    text = "".join(block.format(n=i) + gaps[i % len(gaps)] for i, block in enumerate(blocks))
    assert streamed(text, sizes) == one_shot(text)


def test_whole_sample_in_one_delta_and_in_single_characters() -> None:
    assert streamed(SAMPLE, [len(SAMPLE)]) == one_shot(SAMPLE)
    assert streamed(SAMPLE, [1]) == one_shot(SAMPLE)


def test_empty_and_blank_streams_print_nothing() -> None:
    assert streamed("", [1]) == ""
    assert streamed("\n \n\n", [2]) == ""


def test_escape_sequences_split_across_deltas_are_removed() -> None:
    text = "Say \x1b[31mred\x1b[0m and [red]markup[/]\n\nnext \x1b]0;title\x07para\n"
    out = streamed(text, [5, 1, 2])
    assert out == one_shot("Say red and [red]markup[/]\n\nnext para\n")


def test_finished_blocks_are_printed_once_and_the_open_block_stays_live() -> None:
    out = console()
    stream = MarkdownStream(out)
    stream.feed("First paragraph.\n\n- item\n\nSecond paragraph.\n\n```python\nx = 1\n")
    printed = out.export_text(clear=False)
    assert printed.count("First paragraph.") == 1 and "item" in printed
    assert "Second paragraph." in printed and "x = 1" not in printed
    view = console()
    view.print(stream.live_view())
    assert "x = 1" in view.export_text() and "paragraph" not in view.export_text()
    stream.feed("y = 2\n```\n")  # the fence is closed but nothing follows yet: still open
    assert "y = 2" not in out.export_text(clear=False)
    stream.finish()
    assert out.export_text().count("x = 1") == 1


def test_a_partial_last_line_is_not_trusted() -> None:
    out = console()
    stream = MarkdownStream(out)
    stream.feed("Paragraph\n-")  # may become a setext heading or a list
    assert out.export_text(clear=False) == ""
    stream.feed(" item\n\nafter\n")
    stream.finish()
    assert out.export_text() == one_shot("Paragraph\n- item\n\nafter\n")


def test_live_view_is_capped_to_the_bottom_of_the_screen() -> None:
    stream = MarkdownStream(console())
    stream.feed("```\n" + "".join(f"line {i}\n" for i in range(200)))
    screen = console(height=12)
    screen.print(stream.live_view())
    lines = screen.export_text().splitlines()
    assert len(lines) <= 12 - stream.reserve_lines
    assert "line 199" in lines[-1] and "line 150" not in "\n".join(lines)


def test_block_bounds() -> None:
    text = "# H\n\npara\n- a\n- b\n\n```\ncode\n"
    assert top_level_blocks(text) == [(0, "heading_open"), (2, "paragraph_open"),
                                      (3, "bullet_list_open"), (6, "fence")]


def test_an_answer_taller_than_the_terminal_neither_duplicates_nor_loses_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mdstream, "LIVE_MIN_INTERVAL", 0.0)  # re-render the tail on every redraw
    monkeypatch.setattr(mdstream, "LIVE_COST_FACTOR", 0.0)
    width, height = 80, 12
    text = SAMPLE.replace("Last line without a newline", "") * 3 + "```\n" + "".join(
        f"code line {i}\n" for i in range(40)) + "```\n\nThe end.\n"
    out = console(height=height, terminal=True)
    renderer = Renderer(out, refresh_per_second=0)
    renderer(TurnStarted(1, "q"))
    renderer(ModelRequest(1, "model", True))
    rng = random.Random(5)
    position, middle = 0, text.index("code line 31\n") + len("code line 31\n")
    while position < len(text):
        size = rng.randint(1, 9) if position + 9 < middle or position >= middle else middle - position
        renderer(TextDelta(1, text[position : position + size]))
        renderer.refresh()
        position += size
        if position == middle:  # mid code block: the screen shows the newest lines
            screen = replay(out.file.getvalue(), width, height)[-height:]
            assert "code line 31" in screen[-1] and "code line 21" not in "\n".join(screen)
    renderer(TurnFinished(1, "answer", 1, 0, Usage(), 1.0))
    seen = replay(out.file.getvalue(), width, height)
    expected = [line.rstrip() for line in one_shot(text).splitlines()]
    assert seen[: len(expected)] == expected
    assert len(seen) == len(expected) + 1 and seen[-1].startswith("turn 1 · 1 step")
