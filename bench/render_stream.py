"""Benchmark: streaming Markdown through the real Renderer vs. the naive re-render.

Feeds answers of ~1k, 5k and 20k tokens (1 token ~ 4 characters; headings,
paragraphs, lists, code blocks, tables) in token-sized chunks of 4 characters
to ``repl.ui.render.Renderer`` on a 100x40 terminal Console writing into a
StringIO, asking for a redraw of the live area after every chunk (the real
ticker asks at 12 Hz; the renderer skips redraws that would show nothing new
and re-renders the open tail at most 15 times a second). Side by side it runs
the naive approach, ``Live(Markdown(whole_text))`` updated and redrawn per
chunk. CPU is ``time.process_time``; a frame is the CPU time
(``time.thread_time``) of handling one chunk plus its redraw. The StringIO is
emptied every 500 chunks, as a terminal does not keep what it was sent.

The naive run is quadratic, so above ``--naive-full`` tokens it is not run to
the end: its frame cost is measured at ``--samples`` evenly spaced prefix
lengths and the total is estimated as mean sampled frame cost x chunk count
(marked "~" in the table). At 1k tokens both the full run and the estimate are
printed, so the estimate can be checked against a measurement. One untimed
warm-up run first pays the one-time lazy imports (rich.markdown, pygments).

    .venv/bin/python bench/render_stream.py [--sizes 1000 5000 20000]
"""

from __future__ import annotations

import argparse
import io
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.live import Live  # noqa: E402
from rich.markdown import Markdown  # noqa: E402

from repl.loop.events import ModelRequest, ModelUsage, TextDelta, TurnFinished, TurnStarted, Usage  # noqa: E402
from repl.ui import mdstream  # noqa: E402
from repl.ui.render import Renderer  # noqa: E402

CHARS_PER_TOKEN = 4
WIDTH, HEIGHT = 100, 40
WORDS = ("the model calls a tool and the loop shows every step with its tokens cost "
         "approval result stream render block table list code latency cache answer").split()


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(6, 14))]
    words[rng.randrange(len(words))] = f"**{rng.choice(WORDS)}**"
    words[rng.randrange(len(words))] = f"`{rng.choice(WORDS)}()`"
    return " ".join(words).capitalize() + "."


def _section(rng: random.Random, number: int) -> str:
    paragraph = " ".join(_sentence(rng) for _ in range(rng.randint(3, 5)))
    items = "\n".join(f"- {_sentence(rng)}" + (f"\n  - {_sentence(rng)}" if rng.random() < 0.3 else "")
                      for _ in range(rng.randint(3, 6)))
    code = "\n".join(f"    value_{i} = compute({i}, {rng.choice(WORDS)!r})  # {rng.choice(WORDS)}"
                     for i in range(rng.randint(6, 12)))
    rows = "\n".join(f"| {rng.choice(WORDS)} | {rng.randint(1, 9999)} | {rng.choice(WORDS)} |"
                     for _ in range(rng.randint(3, 6)))
    return (f"## Section {number}\n\n{paragraph}\n\n{items}\n\n"
            f"```python\ndef step_{number}():\n{code}\n    return value_0\n```\n\n"
            f"| name | count | note |\n|------|------:|------|\n{rows}\n\n"
            f"1. {_sentence(rng)}\n2. {_sentence(rng)}\n\n")


def make_answer(tokens: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    parts, size, number = ["# Answer\n\n"], 0, 1
    while size < tokens * CHARS_PER_TOKEN:
        parts.append(_section(rng, number))
        size += len(parts[-1])
        number += 1
    return "".join(parts)[: tokens * CHARS_PER_TOKEN]


def chunks(text: str) -> list[str]:
    return [text[i : i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]


def _console() -> Console:
    return Console(file=io.StringIO(), width=WIDTH, height=HEIGHT, force_terminal=True,
                   color_system="truecolor", legacy_windows=False)


@dataclass
class Run:
    cpu_s: float
    slowest_frame_s: float
    estimated: bool = False


def _drain(console: Console) -> None:
    """A terminal does not keep what it was sent; keep the StringIO from growing."""
    console.file.seek(0)
    console.file.truncate()


def run_renderer(pieces: list[str]) -> Run:
    console = _console()
    renderer = Renderer(console, refresh_per_second=0)  # redraws are asked for below
    start, slowest = time.process_time(), 0.0
    renderer(TurnStarted(1, "question"))
    renderer(ModelRequest(1, "bench", False))
    for index, piece in enumerate(pieces):
        began = time.thread_time()
        renderer(TextDelta(1, piece))
        renderer.refresh()
        slowest = max(slowest, time.thread_time() - began)
        if index % 500 == 0:
            _drain(console)
    renderer(ModelUsage(1, Usage(100, 0, len(pieces)), 1.0, "stop"))
    renderer(TurnFinished(1, "answer", 1, 0, Usage(100, 0, len(pieces)), 1.0))
    return Run(time.process_time() - start, slowest)


def _naive_frame(live: Live, text: str) -> float:
    began = time.thread_time()
    live.update(Markdown(text), refresh=True)
    return time.thread_time() - began


def run_naive(pieces: list[str]) -> Run:
    start, slowest, text = time.process_time(), 0.0, ""
    with Live(Markdown(""), console=_console(), auto_refresh=False, transient=True) as live:
        for index, piece in enumerate(pieces):
            text += piece
            slowest = max(slowest, _naive_frame(live, text))
            if index % 500 == 0:
                _drain(live.console)
    return Run(time.process_time() - start, slowest)


def estimate_naive(pieces: list[str], samples: int) -> Run:
    """Mean frame cost at evenly spaced prefixes x number of chunks."""
    text = "".join(pieces)
    ends = [round(len(text) * (k + 0.5) / samples) for k in range(samples)]
    costs = []
    with Live(Markdown(""), console=_console(), auto_refresh=False, transient=True) as live:
        for end in ends:
            before = time.process_time()
            slowest = _naive_frame(live, text[:end])
            costs.append((time.process_time() - before, slowest))
    mean = sum(cpu for cpu, _ in costs) / samples
    return Run(mean * len(pieces), max(wall for _, wall in costs), estimated=True)


def _fmt(run: Run) -> tuple[str, str]:
    mark = "~" if run.estimated else ""
    return f"{mark}{run.cpu_s:.2f}", f"{run.slowest_frame_s * 1000:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    parser.add_argument("--naive-full", type=int, default=1000, help="run naive fully up to this size")
    parser.add_argument("--samples", type=int, default=24, help="naive frames sampled above that")
    parser.add_argument("--repeat", type=int, default=3, help="renderer runs per size (best CPU kept)")
    parser.add_argument("--no-throttle", action="store_true",
                        help="re-render the open tail on every redraw (shows the cost without the 15 Hz cap)")
    args = parser.parse_args()
    if args.no_throttle:
        mdstream.LIVE_MIN_INTERVAL = mdstream.LIVE_COST_FACTOR = 0

    header = (f"{'tokens':>7} {'chunks':>7} | {'ours CPU s':>10} {'ms/1k tok':>9} {'max frame ms':>12}"
              f" | {'naive CPU s':>11} {'ms/1k tok':>9} {'max frame ms':>12} | {'speedup':>8}")
    run_renderer(chunks(make_answer(300)))  # warm-up: lazy imports (rich.markdown, pygments lexers)
    print(header)
    print("-" * len(header))
    per_1k, ok = [], True
    for size in args.sizes:
        pieces = chunks(make_answer(size))
        runs = [run_renderer(pieces) for _ in range(args.repeat)]
        ours = Run(min(r.cpu_s for r in runs), max(r.slowest_frame_s for r in runs))
        naive_runs = [run_naive(pieces)] if size <= args.naive_full else []
        naive_runs.append(estimate_naive(pieces, args.samples))
        per_1k.append(ours.cpu_s * 1000 / size)
        for index, naive in enumerate(naive_runs):
            left = (f"{size:>7} {len(pieces):>7} | {_fmt(ours)[0]:>10} {per_1k[-1] * 1000:>9.1f} "
                    f"{_fmt(ours)[1]:>12}") if index == 0 else " " * 7 + " " * 8 + "|" + " " * 34
            print(f"{left} | {_fmt(naive)[0]:>11} {naive.cpu_s * 1e6 / size:>9.1f} "
                  f"{_fmt(naive)[1]:>12} | {naive.cpu_s / ours.cpu_s:>7.0f}x")
        ok &= ours.slowest_frame_s < 0.050
        if size == max(args.sizes):
            ok &= naive_runs[-1].cpu_s / ours.cpu_s >= 20
    flatness = max(per_1k) / min(per_1k)
    ok &= flatness <= 1.5
    print(f"\ncost per 1k tokens, largest / smallest: {flatness:.2f}x (target <= 1.5x)")
    print("targets met" if ok else "targets NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
