"""``glassloop replay SESSION``: a saved session's questions sent again, in order, to another model.

The replay is one conversation of its own: each of the session's questions, in order, is the
next turn of one session core on the replay's settings (its model and provider), with the
saved system prompt and the tools a session has now (built-in, user tools, trusted project
tools, MCP servers) as ``/compare``'s dry run (a side-effecting call gets a ``denied`` result
and the model carries on; a tool not glassloop's own runs only when named with ``--call``), no
journal, no trace.
Each turn comes back as ``/compare``'s ``Attempt`` beside one made from the journal (the
original's calls, answer, tokens and time), drawn side by side with ``/compare``'s rows, then
a summary: the turns that called the same tools, the answers that differ, tokens and time of each.
"""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from dataclasses import dataclass, replace
from typing import Any

from repl.archive.journal import Loaded, find_session, load_checked, saved_prompt
from repl.archive.recap import TurnNote, session_endpoint
from repl.config.load import Settings
from repl.loop.cost import Cost
from repl.loop.events import TurnFinished, Usage
from repl.loop.history import History
from repl.loop.unicode import json_dumps
from repl.session.core import Door
from repl.trials.compare import Attempt, compare_rows, dry_core, run_attempt
from repl.ui.escape import clean, one_line
from tools.results import error_of
from tools.safe_io import StoreError

REPLAY = Door("replay", journal=False, trace=False, dry_run=True)


@dataclass
class ReplayedTurn:
    number: int
    question: str
    original: Attempt
    replay: Attempt
    known: bool  # the original's tokens and time are in the journal

    @property
    def same_tools(self) -> bool:
        return [c[0] for c in self.original.calls] == [c[0] for c in self.replay.calls]

    @property
    def answers_differ(self) -> bool:
        def answer(a: Attempt) -> str:
            return a.finished.answer.strip() if a.finished else ""
        return answer(self.original) != answer(self.replay)


def original_turns(loaded: Loaded) -> tuple[list[tuple[str, Attempt]], bool]:
    """Each question of a saved session with what the original did as an ``Attempt`` (its calls
    with their error types, answer, steps; tokens, time and cost from the journal's turn
    records when there is one for each turn), and whether those numbers are known."""
    messages = loaded.messages
    starts = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    notes = [n for n in map(TurnNote.parse, loaded.turns) if n is not None and not n.compact and not n.undone]
    known = len(notes) == len(starts)
    model = str(session_endpoint(loaded.meta, loaded.turns).get("model") or "original")
    turns = []
    for n, (start, end) in enumerate(zip(starts, [*starts[1:], len(messages)], strict=True)):
        part = messages[start:end]
        failed = {m.get("tool_call_id"): _error_type(m.get("content")) for m in part if m.get("role") == "tool"}
        calls = [(str(c.get("name")), _parsed(c.get("arguments")), failed.get(c.get("id")) or "")
                 for m in part if m.get("role") == "assistant" for c in m.get("tool_calls") or []
                 if isinstance(c, dict)]
        answers = [m.get("content") for m in part if m.get("role") == "assistant" and m.get("content")]
        answer = str(answers[-1]) if answers else ""
        steps = sum(1 for m in part if m.get("role") == "assistant")
        note = notes[n] if known else None
        finished = (TurnFinished(n + 1, note.finished.stopped_by, note.finished.steps, note.finished.tool_calls,
                                 note.finished.usage, note.finished.duration_s, answer) if note is not None
                    else TurnFinished(n + 1, "answer", steps, len(calls), Usage(), 0.0, answer))
        turns.append((str(part[0].get("content") or ""),
                      Attempt(model, finished, calls, note.cost if note is not None else Cost())))
    return turns, known


def _parsed(arguments: Any) -> Any:
    try:
        return json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return arguments


def _error_type(content: Any) -> str:
    result = _parsed(content)
    error = error_of(result) if isinstance(result, dict) else None
    return (error[0] or "error") if error is not None else ""


def replay(settings: Settings, loaded: Loaded, say: Any = lambda line: None,
           calls: frozenset[str] = frozenset()) -> list[ReplayedTurn]:
    """The session's questions, in order, as turns of one dry-run core on ``settings``
    (``say`` is told before each; ``calls``: the tools run for real, ``--call``). Ctrl-C ends
    the replay with the turns done so far, and so does a turn the model could not answer
    (unreachable, refused: its ``error``)."""
    originals, known = original_turns(loaded)
    core = dry_core(settings, History(saved_prompt(loaded.meta) or ""), replace(REPLAY, calls=calls))
    core.start_background()
    done: list[ReplayedTurn] = []
    try:
        for n, (question, original) in enumerate(originals, 1):
            say(f"replay {n}/{len(originals)} on {settings.active.model}: {one_line(question, 60)!r}")
            attempt = run_attempt(core, question)
            done.append(ReplayedTurn(n, question, original, attempt, known))
            if _failed(attempt) or (attempt.finished and attempt.finished.stopped_by == "interrupted"):
                break
    except KeyboardInterrupt:
        say("replay stopped")
    finally:
        if done and (unknown := sorted(name for name in calls if core.registry.get(name) is None)):
            say(f"--call names no tool offered: {', '.join(unknown)}")  # the MCP servers' are in by now
        core.close()
    return done


def _failed(attempt: Attempt) -> bool:
    return attempt.finished is None or attempt.finished.stopped_by == "error"


def summary(turns: list[ReplayedTurn], total: int) -> dict[str, Any]:
    def sums(attempts: list[Attempt]) -> dict[str, Any]:
        finished = [a.finished for a in attempts if a.finished is not None]
        usage = sum((f.usage for f in finished), Usage())
        return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                "duration_s": round(sum(f.duration_s for f in finished), 3),
                "usd": round(sum((a.cost for a in attempts), Cost()).usd, 6)}

    known = all(t.known for t in turns)
    return {"turns": total, "replayed": len(turns),
            "same_tools": [t.number for t in turns if t.same_tools],
            "answers_differ": [t.number for t in turns if t.answers_differ],
            "denied": sum(1 for t in turns for c in t.replay.calls if c[2] == "denied"),
            "not_run": sum(1 for t in turns for c in t.replay.calls if c[2] == "not_run"),
            "original": sums([t.original for t in turns]) if known else None,
            "replay": sums([t.replay for t in turns])}


def as_json(session: str, settings: Settings, turns: list[ReplayedTurn], total: int) -> dict[str, Any]:
    def side(a: Attempt, numbers: bool) -> dict[str, Any]:
        f = a.finished
        return {"model": a.model, "calls": [{"name": name, "arguments": args, "error": error or None}
                                            for name, args, error in a.calls],
                "answer": f.answer if f else None, "stopped_by": f.stopped_by if f else None,
                "steps": f.steps if f else None,
                "usage": ({"input_tokens": f.usage.input_tokens, "cached_tokens": f.usage.cached_tokens,
                           "output_tokens": f.usage.output_tokens} if f and numbers else None),
                "duration_s": f.duration_s if f and numbers else None, "error": a.error or None}

    return {"session": session, "provider": settings.active.name, "model": settings.active.model,
            "turns": [{"turn": t.number, "question": t.question, "original": side(t.original, t.known),
                       "replay": side(t.replay, True), "same_tools": t.same_tools,
                       "answers_differ": t.answers_differ} for t in turns],
            "summary": summary(turns, total)}


def table(columns: list[str], rows: list[tuple[str, ...]], width: int) -> list[str]:
    """``rows`` as plain text columns (the first holds the labels), each cell's lines wrapped
    to its column; no line wider than ``width``."""
    label_w = max(len(r[0]) for r in rows)
    col_w = max(16, (width - label_w - 3 * (len(columns) - 1)) // max(1, len(columns) - 1))

    def lines_of(cell: str) -> list[str]:
        return [piece for line in clean(cell).splitlines() or [""]
                for piece in textwrap.wrap(line, col_w) or [""]]

    out = ["  ".join([" " * label_w, *(one_line(c, col_w).ljust(col_w) for c in columns[1:])]).rstrip()]
    for row in rows:
        cells = [lines_of(cell) for cell in row[1:]]
        for n in range(max(len(c) for c in cells)):
            label = row[0] if n == 0 else ""
            out.append("  ".join([label.ljust(label_w), *((c[n] if n < len(c) else "").ljust(col_w)
                                                            for c in cells)]).rstrip())
    return out


def report_lines(settings: Settings, turns: list[ReplayedTurn], total: int, width: int,
                 calls: frozenset[str] = frozenset()) -> list[str]:
    out: list[str] = []
    replay_name = f"replay · {settings.active.model}"
    for t in turns:
        rows = compare_rows([t.original, t.replay])
        if not t.known:  # the journal holds no numbers for the original's turns
            rows = [(r[0], "?", r[2]) if r[0] in ("tokens", "latency", "cost") else r for r in rows]
        out += ["", f"turn {t.number}: {one_line(t.question, max(20, width - 10))!r}"]
        out += table(["", f"original · {t.original.model}", replay_name], rows, width)
    s = summary(turns, total)
    n = len(turns)
    out += ["", f"{n} of {total} turns replayed on {settings.active.model} ({settings.active.name}); "
                f"side effects denied: {_calls(s['denied'])}" + _held(s["not_run"], calls),
            f"same tools called: {len(s['same_tools'])} of {n} turns" + _others(turns, s["same_tools"]),
            f"answers differ: {len(s['answers_differ'])} of {n} turns"]
    for side in ("original", "replay"):
        numbers = s[side]
        out.append(f"{side}: " + ("tokens and time not in the journal" if numbers is None else
                                   f"{numbers['input_tokens'] + numbers['output_tokens']:,} tokens "
                                   f"({numbers['input_tokens']:,} in, {numbers['output_tokens']:,} out) · "
                                   f"{numbers['duration_s']:.1f} s"))
    return out


def _calls(count: int) -> str:
    return f"{count} call{'' if count == 1 else 's'}"


def _held(not_run: int, calls: frozenset[str]) -> str:
    """What else the dry run held back, and what it let change (``--call``)."""
    held = f"; not run, not glassloop's own: {_calls(not_run)} (--call NAME runs one)" if not_run else ""
    return held + (f"; run for real: {', '.join(sorted(calls))}" if calls else ", nothing changed")


def _others(turns: list[ReplayedTurn], same: list[int]) -> str:
    other = [str(t.number) for t in turns if t.number not in same]
    if not other:
        return ""
    return f" (turn {other[0]} differs)" if len(other) == 1 else f" (turns {', '.join(other)} differ)"


def run_replay(settings: Settings, key: str, *, json_out: bool, calls: frozenset[str] = frozenset()) -> int:
    """``glassloop replay`` (``calls``: ``--call``): 0 done, 1 no such session or the model could
    not run, 130 interrupted."""
    def err(line: str) -> None:
        print(clean(line), file=sys.stderr, flush=True)

    path = find_session(settings.data_dir / "sessions", key)
    if path is None:
        err(f"error: no saved session {key!r} in {settings.data_dir / 'sessions'}")
        return 1
    try:
        loaded = load_checked(path)
    except (OSError, StoreError) as exc:
        err(f"error: cannot read {path}: {getattr(exc, 'strerror', None) or exc}")
        return 1
    for note in loaded.notes:
        err(f"{path.name}: {note}")
    total = sum(1 for m in loaded.messages if m.get("role") == "user")
    if not total:
        err(f"error: session {path.stem} has no question to replay")
        return 1
    turns = replay(settings, loaded, err, calls)
    if json_out:
        print(json_dumps(as_json(path.stem, settings, turns, total), ensure_ascii=False, indent=1))
    else:
        print("\n".join(report_lines(settings, turns, total, min(shutil.get_terminal_size().columns, 140),
                                     calls)))
    failed = next((t.replay.error or "the turn failed" for t in turns if _failed(t.replay)), None)
    if failed is not None:
        err(f"error: {failed}")
        return 1
    return 130 if len(turns) < total else 0
