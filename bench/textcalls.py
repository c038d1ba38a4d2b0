"""Text tool-call parser: time against reply size on adversarial replies.

Each family of hostile model output (long blank runs after broken arguments,
unclosed braces, repeated ``<tool_call>`` openings, escaped quotes, many bare
calls, prose braces) is parsed whole and streamed in 4-character chunks, at
sizes doubling from 25 kB to 400 kB. Linear means the cost per kB stays flat.
The baseline beside it is the argument regex the parser used before
(``(.*?)\\s*}?\\s*$``), timed on a few thousand characters: it grows with the
cube of the size.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from typing import Any

from bench import row, target

NAMES = ["list_todos", "get_todo"]
CHUNK = 4
OLD_ARGS_RE = re.compile(r'"(?:arguments|parameters|args)"\s*:\s*(.*?)\s*}?\s*$', re.DOTALL)


def _fill(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


FAMILIES: dict[str, Callable[[int], str]] = {
    "blank run after broken arguments":
        lambda n: '<tool_call>{"name": "list_todos", "arguments": x' + " " * n + "y",
    "unclosed braces": lambda n: _fill("{", n),
    "repeated <tool_call> openings": lambda n: _fill("<tool_call>", n),
    "escaped quotes in a string": lambda n: '{"name": "list_todos", "arguments": "' + _fill('\\"', n),
    "many bare calls": lambda n: _fill('{"name": "list_todos", "arguments": {}}, ', n),
    "prose braces": lambda n: _fill("a {b} ", n),
}


def _whole(reply: str) -> None:
    from repl.embedded.textcalls import parse_text_calls

    parse_text_calls(reply, NAMES)


def _streamed(reply: str) -> None:
    from repl.embedded.textcalls import TextCallFilter

    text_filter = TextCallFilter(NAMES)
    for start in range(0, len(reply), CHUNK):
        text_filter.feed(reply[start : start + CHUNK])
    text_filter.finish()


def _best(fn: Callable[[str], None], reply: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn(reply)
        times.append(time.perf_counter() - started)
    return min(times)


def _old_regex(size: int) -> float:
    text = '"arguments": x' + " " * size + "y"
    started = time.perf_counter()
    OLD_ARGS_RE.search(text)
    return time.perf_counter() - started


def _exponent(curve: list[tuple[int, float]]) -> float:
    """k in time ~ size^k, least squares over the log-log points."""
    xs = [math.log(size) for size, _ in curve]
    ys = [math.log(max(seconds, 1e-9)) for _, seconds in curve]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def run(quick: bool) -> dict[str, Any]:
    sizes = [2_000, 4_000, 8_000] if quick else [25_000, 50_000, 100_000, 200_000, 400_000]
    old_sizes = [100, 200] if quick else [250, 500, 1_000]
    repeat = 1 if quick else 5
    _streamed(FAMILIES["many bare calls"](1000))  # warm-up: imports, regex caches
    rows, curves, exponents = [], {}, []
    for family, make in FAMILIES.items():
        for mode, fn in (("whole", _whole), ("streamed", _streamed)):
            curve = [(size, _best(fn, make(size), repeat)) for size in sizes]
            per_kb = [1e6 * seconds / (size / 1000) for size, seconds in curve]
            curves[f"{family}, {mode}"] = curve
            exponents.append(_exponent(curve))
            rows.append(row(f"{family}, {mode}, {sizes[-1] // 1000} kB", curve[-1][1], "s",
                            f"time ~ size^{exponents[-1]:.2f}; µs per kB: "
                            + " / ".join(f"{v:.0f}" for v in per_kb)))
    old = [(size, _old_regex(size)) for size in old_sizes]
    for size, seconds in old:
        rows.append(row(f"baseline: the old argument regex, {size} blanks", seconds, "s"))
    growth = old[-1][1] / max(old[0][1], 1e-9)
    rows.append(row("baseline growth per doubling", growth ** (1 / (len(old) - 1)), "x", "8x = cubic"))
    at = 100_000 if 100_000 in sizes else sizes[-1]
    slowest = max(dict(curve)[at] for curve in curves.values())
    return {
        "name": "textcalls",
        "rows": rows,
        "targets": {
            "linear": target(max(exponents), 1.5, "time grows as size^k, k <= 1.5 (linear 1, quadratic 2)"),
            "100kB": target(slowest, 1.0, f"every {at // 1000} kB adversarial reply parses in < 1 s"),
        },
        "params": {"sizes": sizes, "chunk": CHUNK, "repeat": repeat, "old_regex_sizes": old_sizes},
        "curves": curves,
    }
