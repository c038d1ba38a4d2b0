"""Memory and resume: a scripted 1,000-turn session through ``repl.session.chat.ChatSession``.

Every turn is answered with ~700 characters of Markdown; every 4th turn first
calls ``list_todos``. The session runs as the REPL runs it (journal, trace,
approval, windowing) with a UI stub whose methods do nothing, against the
scripted server in its own process (so the server's memory is not counted).
Reported: resident memory growth from after the warm-up turns to the end,
journal and trace sizes, and the time to resume the journal.

The profile's context window is set to 16k tokens (a config file): the stored
history keeps all 1,000 turns, each request carries only the newest ones.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import Any

from bench import ServerProcess, isolated_env, median, patched_environ, row, rss_mb, scratch, target

ANSWER = ("## Summary\n\nHere is what I found, step by step:\n\n"
          "1. **First**, the list of open items was checked.\n"
          "2. **Second**, the highest priority one was expanded.\n\n"
          "```python\ndef example(n: int) -> int:\n    return n * 2\n```\n\n"
          "| item | state |\n|---|---|\n| report | open |\n| email | done |\n\n") * 2
TOOL_EVERY = 4
WARMUP = 10


class StubUI:
    """The session's ``UI`` (``repl.session.seams.UI``) with every method a no-op (events are counted)."""

    width = 80

    def __init__(self) -> None:
        self.events = 0
        self.errors: list[str] = []

    def render(self, event: Any) -> None:
        self.events += 1

    def error(self, text: str) -> None:
        self.errors.append(text)

    def read(self) -> str:
        raise EOFError

    def _nothing(self, *args: Any, **kwargs: Any) -> None:
        return None

    def _no(self, *args: Any, **kwargs: Any) -> bool:
        return False

    echo = info = lines = table = json = recap = waiting = stop_live = _nothing
    asker = stepper = pick_session = _nothing
    prefill = confirm = copy = set_verbose = set_reasoning = _no


def script(turns: int) -> list[dict[str, Any]]:
    replies: list[dict[str, Any]] = []
    for number in range(turns):
        if number % TOOL_EVERY == 0:
            replies.append({"tool_calls": [{"name": "list_todos", "arguments": "{}"}], "usage": [900, 20, 0]})
        replies.append({"text": ANSWER, "usage": [1000, 180, 0], "chunk_size": 12})
    return replies


def _settings(folder: Path, base_url: str) -> Any:
    from repl.config.load import load_settings

    config = folder / "bench.toml"
    config.write_text("[providers.openai]\ncontext_window = 16000\n", encoding="utf-8")
    return load_settings({"base_url": base_url, "approval": "auto"}, cwd=folder, config_file=config)


def _run_session(session: Any, first: int, count: int, curve: list[tuple[int, float]]) -> None:
    every = max(1, count // 10)
    for number in range(first, first + count):
        finished = session.run_turn(f"question {number}: what is still open?")
        if finished is None or finished.stopped_by != "answer":
            raise RuntimeError(f"turn {number} failed: {session.ui.errors[-1:] or finished}")
        if (number + 1 - first) % every == 0:
            curve.append((number + 1, round(rss_mb(), 1)))


def _resume_times(settings: Any, journal: Path, repeats: int) -> tuple[list[float], list[float]]:
    from repl.archive.journal import load
    from repl.loop.history import History
    from repl.session.chat import ChatSession

    load_times, session_times = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        meta, messages = load(journal)
        History.from_json({"system_prompt": meta.get("system_prompt", ""), "messages": messages})
        load_times.append(time.perf_counter() - started)
        session = ChatSession(settings, StubUI(), False)
        started = time.perf_counter()
        if not session.resume(journal.stem):
            raise RuntimeError(f"could not resume {journal}")
        session_times.append(time.perf_counter() - started)
        session.close()
    return load_times, session_times


def run(quick: bool) -> dict[str, Any]:
    from repl.session.chat import ChatSession

    turns = 20 if quick else 1000
    curve: list[tuple[int, float]] = []
    with scratch("memory") as folder, patched_environ(isolated_env(folder)):
        with ServerProcess(script(WARMUP + turns), folder) as server:
            settings = _settings(folder, server.base_url)
            session = ChatSession(settings, StubUI(), False)
            session.open_journal()
            session.start_provider()
            _run_session(session, 0, WARMUP, [])
            gc.collect()
            before = rss_mb()
            started = time.perf_counter()
            _run_session(session, WARMUP, turns, curve)
            elapsed = time.perf_counter() - started
            gc.collect()
            after = rss_mb()
            events, messages = session.ui.events, len(session.history.messages)
            journal, trace_file = session.journal.path, session.trace.path
            session.close()
        load_times, session_times = _resume_times(settings, journal, 2 if quick else 5)
        journal_mb, trace_mb = journal.stat().st_size / 2**20, trace_file.stat().st_size / 2**20
    growth, resume = after - before, median(load_times)
    return {
        "name": "memory_resume",
        "rows": [
            row(f"{turns} turns through ChatSession", elapsed, "s", f"{events} events, {messages} messages"),
            row("RSS after warm-up", before, "MB"),
            row("RSS at the end", after, "MB"),
            row("RSS growth", growth, "MB"),
            row("journal size", journal_mb, "MB"),
            row("trace size", trace_mb, "MB"),
            row("resume: journal load + History.from_json", resume, "s"),
            row("resume: ChatSession.resume (all of it)", median(session_times), "s"),
        ],
        "targets": {"growth": target(growth, 50, "RSS growth <= 50 MB"),
                    "resume": target(resume, 0.5, "resume <= 0.5 s")},
        "params": {"turns": turns, "warmup": WARMUP, "tool_every": TOOL_EVERY, "context_window": 16000},
        "rss_curve": curve,
        "samples": {"load": load_times, "session_resume": session_times},
    }
