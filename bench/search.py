"""Searching every saved session: 10,000 sessions holding 1,000,000 turns (quick: 20 and 200).

Real journals are written in a scratch folder, fast: each line from a template, ``json.dumps``
only for its text; each turn a question, an answer, the ``turn`` record and, every fourth
turn, a tool call and its result. The index is then built from those files by the code a
search runs when it finds journals it has not indexed (``Index.refresh``: each journal parsed,
each turn inserted), so the build time is the one a person meets on a first search.

Measured: the build and the index's size; a warm search (median of several, no journal written
since the last search, so none is looked at) for a rare word, a word in half the turns, two words
and a Chinese word; a search right after a journal was written (that journal looked at) and right
after one was made (the names in the folder listed); the cost a turn's end pays (``add_turn`` after a new turn is appended to a
journal, with the turn's text made as the session makes it). Every search is checked against
the turns it must find, newest first; a run where one found anything else fails its target.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import row, scratch, target, timed

T0 = 1_700_000_000.0
RARE = "milk"  # in turn 5 of every 400th session
CHINESE = "开会"  # in turn 7 of every 500th session, inside a sentence
COMMON = "remind"  # in every even turn
VOCABULARY = [a + b + c for a in ("ka", "lo", "mi", "su", "te", "ro", "pa", "ne") for b in ("ri", "do", "va", "xu", "ze")
              for c in ("n", "s", "t", "l", "m", "k", "p", "r", "")]


def when(session: int, turn: int) -> float:
    return T0 + session * 1000 + turn


def question(session: int, turn: int) -> str:
    words = [VOCABULARY[(session * 31 + turn * 7 + k * 13) % len(VOCABULARY)] for k in range(6)]
    if turn % 2 == 0:
        words.insert(0, COMMON + " me to")
    if turn == 5 and session % 400 == 7:
        words.append(f"buy {RARE}")
    if turn == 7 and session % 500 == 3:
        words.append(f"明天下午三点{CHINESE}")
    return " ".join(words)


def write_journals(folder: Path, sessions: int, turns: int) -> int:
    """``sessions`` journals of ``turns`` turns each; returns their bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    total = 0
    answer = json.dumps("Done: " + " ".join(VOCABULARY[:12]))
    for s in range(sessions):
        lines = [f'{{"kind": "meta", "time": {when(s, 0)}, "session": "s{s:05d}", "provider": "openai", '
                 '"model": "gpt-4o-mini", "system_prompt": "You are glassloop."}']
        for t in range(1, turns + 1):
            lines.append(f'{{"kind": "message", "message": {{"role": "user", "content": {json.dumps(question(s, t), ensure_ascii=False)}}}}}')
            if t % 4 == 0:
                lines.append(f'{{"kind": "message", "message": {{"role": "assistant", "content": "", "tool_calls": '
                             f'[{{"id": "c{t}", "name": "add_todo", "arguments": "{{\\"title\\": \\"task {t}\\"}}"}}]}}}}')
                lines.append(f'{{"kind": "message", "message": {{"role": "tool", "tool_call_id": "c{t}", "name": "add_todo", '
                             f'"content": "{{\\"ok\\": true}}"}}}}')
            lines.append(f'{{"kind": "message", "message": {{"role": "assistant", "content": {answer}}}}}')
            lines.append(f'{{"kind": "turn", "time": {when(s, t)}, "turn": {t}, "stopped_by": "answer"}}')
        data = ("\n".join(lines) + "\n").encode()
        (folder / f"s{s:05d}.jsonl").write_bytes(data)
        total += len(data)
    return total


def expected(sessions: int, turns: int, limit: int) -> dict[str, list[tuple[str, int]]]:
    """The (session, turn) each query must find, newest first: the generated questions read again."""
    pair = VOCABULARY[40]  # never in an answer (those hold the first 12)
    tests = {RARE: lambda words, q: RARE in words, CHINESE: lambda words, q: CHINESE in q,
             COMMON: lambda words, q: COMMON in words, f"{COMMON} {pair}": lambda words, q: {COMMON, pair} <= words}
    found: dict[str, list[tuple[str, int]]] = {query: [] for query in tests}
    for s in reversed(range(sessions)):
        for t in reversed(range(1, turns + 1)):
            q = question(s, t)
            words = set(q.split())
            for query, test in tests.items():
                if len(found[query]) < limit and test(words, q):
                    found[query].append((f"s{s:05d}", t))
    return found


def per_turn(index: Any, folder: Path, samples: int, turns: int) -> tuple[list[float], bool]:
    """The cost of a turn's end: a new turn appended to a journal, then indexed as the session does."""
    from repl.archive.search import turn_text

    costs, quick_path = [], True
    for n in range(samples):
        journal = folder / f"s{n:05d}.jsonl"
        number = turns + 1
        messages = [{"role": "user", "content": f"late question {n} about zucchini"},
                    {"role": "assistant", "content": "noted"}]
        with open(journal, "a", encoding="utf-8") as file:
            for m in messages:
                file.write(json.dumps({"kind": "message", "message": m}) + "\n")
            file.write(json.dumps({"kind": "turn", "time": time.time(), "turn": number}) + "\n")
        started = time.perf_counter()
        index.add_turn(turn_text(journal.stem, 0, number, messages, time.time()), journal)
        costs.append(time.perf_counter() - started)
    import sqlite3

    with sqlite3.connect(index.path) as con:  # each went in by the quick path: its journal is current
        for n in range(samples):
            journal = folder / f"s{n:05d}.jsonl"
            held = con.execute("SELECT size FROM journals WHERE session = ?", (journal.stem,)).fetchone()
            quick_path &= held is not None and held[0] == journal.stat().st_size
    return costs, quick_path


def run(quick: bool) -> dict[str, Any]:
    from repl.archive.journal import WRITTEN
    from repl.archive.search import Index

    sessions, turns, repeats, samples, limit = (20, 10, 3, 10, 20) if quick else (10_000, 100, 15, 200, 20)
    with scratch("search") as root:
        folder = root / "sessions"
        made = time.perf_counter()
        journal_bytes = write_journals(folder, sessions, turns)
        made = time.perf_counter() - made
        index = Index(folder)
        build = timed(index.refresh)
        size = index.path.stat().st_size
        want = expected(sessions, turns, limit)
        searches: dict[str, float] = {}
        right = 0
        for query, hits in want.items():
            found = [(h.turn.session, h.turn.turn) for h in index.search(query, limit)]
            right += found == hits and bool(hits)
            searches[query] = statistics.median(timed(lambda q=query: index.search(q, limit)) for _ in range(repeats))
        def after(change: Callable[[int], None]) -> float:
            times = []
            for n in range(repeats):
                change(n)
                times.append(timed(lambda: index.search(RARE, limit)))
            return statistics.median(times)

        def written(n: int) -> None:  # as a journal write does: the search looks at that journal
            with open(folder / WRITTEN, "a", encoding="utf-8") as log:
                log.write(f"s{n:05d}\n")

        def created(n: int) -> None:  # a new session's journal: the search looks at every journal
            (folder / f"new{n}.jsonl").write_text('{"kind": "meta", "time": 1.0}\n', encoding="utf-8")

        after_write, after_new = after(written), after(created)
        costs, quick_path = per_turn(index, folder, samples, turns)
        right += quick_path
        late = [(h.turn.session, h.turn.turn) for h in index.search("zucchini", samples)]
        right += sorted(late) == sorted((f"s{n:05d}", turns + 1) for n in range(samples))
    checks = len(want) + 2
    total = sessions * turns
    slowest = max([*searches.values(), after_write, after_new])
    cost = statistics.median(costs)
    p95 = sorted(costs)[int(0.95 * (len(costs) - 1))]
    rows = [row(f"{sessions:,} journals, {total:,} turns written", made, "s", f"{journal_bytes / 1e6:,.0f} MB"),
            row("index built from the journals", build, "s", f"{build / total * 1e6:.0f} µs a turn"),
            row("index size", size / 1e6, "MB", f"{size / journal_bytes:.2f}x the journals")]
    rows += [row(f"warm search {query!r}", seconds * 1000, "ms", f"newest {limit}; no journal written since the last")
             for query, seconds in searches.items()]
    rows.append(row(f"search {RARE!r} after a journal was written", after_write * 1000, "ms",
                    "the journal named in the write log looked at first"))
    rows.append(row(f"search {RARE!r} after a journal was made", after_new * 1000, "ms",
                    f"the {sessions:,} names in the folder listed first"))
    rows += [row("a turn's end: add_turn (median)", cost * 1000, "ms", f"{samples} turns, into the full index"),
             row("a turn's end: add_turn (95th percentile)", p95 * 1000, "ms")]
    return {"name": "search", "rows": rows, "targets": {
        "found": target(right / checks, 1.0, "every search found exactly its expected turns, newest first = 100%",
                        at_least=True),
        "search": target(slowest * 1000, 100, f"warm search at {total:,} turns <= 100 ms (the slowest: four "
                         "queries, after a journal was written, after one was made)"),
        "turn": target(cost * 1000, 5, "indexing adds <= 5 ms to a turn's end (median)"),
    }, "params": {"sessions": sessions, "turns": total, "repeats": repeats, "samples": samples,
                  "journals": "real journal files, lines from templates"}}


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(run(quick=bool(os.environ.get("QUICK"))), indent=1))
