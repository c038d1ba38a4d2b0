"""Time to prompt: ``glassloop`` in a pseudo-terminal until the prompt takes input.

Each run starts ``glassloop --base-url URL`` (a scripted server in this
process, so no local model starts) with every XDG dir in a temp folder, in a
pseudo-terminal that answers cursor-position requests like a terminal does.
Measured from spawn: the prompt drawn (bracketed paste switched on, then the
``>``), a typed character echoed, and, as a check that loading the SDK off the
critical path does not delay the first turn, the first answer of a question
typed as soon as the prompt is up. The floor, in the same run, is the bare
import of the UI libraries; ``--help``, ``--version`` and ``--resume`` of a
1,000-turn session (prompt drawn and a character echoed: a target too) are timed
beside it, and so is a start with 20 of the user's own tool files (they load on a
background thread; the first turn waits for them). Runs are interleaved; medians shown. Our modules are compiled to bytecode
first, as an installed program's are: the floor's libraries load from bytecode, and
with ``PYTHONDONTWRITEBYTECODE`` set glassloop would otherwise compile its sources
on every start.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import ROOT, VENV_BIN, compile_ours, isolated_env, median, row, scratch, target

FLOOR = "import prompt_toolkit, rich.console, rich.live, rich.markdown, typer"
LIMIT = 1.15  # the prompt takes input within this many times the floor
CPR_REQUEST = re.compile(r"\x1b\[6n")


def _prompt_pattern() -> re.Pattern[str]:
    """Input mode switched on, then the prompt's glyph (read from ``PromptInput``'s default)."""
    import inspect

    from repl.ui.prompt import PromptInput

    glyph = str(inspect.signature(PromptInput).parameters["message"].default).strip() or ">"
    return re.compile(r"\x1b\[\?2004h.*?" + re.escape(glyph), re.DOTALL)


PROMPT = _prompt_pattern()
TYPED = "#"  # appears nowhere in the header, prompt or toolbar
ANSWER = "pong-7f3a"
RESUME_TURNS = 1000
USER_TOOL_FILES = 20
USER_TOOL = '''from typing import Literal

from glassloop_tools import store, tool

items = store("bench_{n}")


@tool(side_effects=True)
def add_{n}(name: str, count: int = 1, kind: Literal["a", "b"] = "a", note: str | None = None) -> dict:
    \"\"\"Add an entry.

    Args:
        name: what
        count: how many
        kind: which list
        note: anything else
    \"\"\"
    return items.add({{"name": name, "count": count, "kind": kind, "note": note}})


@tool
def list_{n}(limit: int = 20) -> dict:
    \"\"\"List the entries.

    Args:
        limit: at most this many
    \"\"\"
    return {{"items": items.items()[:limit]}}
'''


def user_tools_env(env: dict[str, str], folder: Path) -> dict[str, str]:
    """``env`` with a user config dir holding USER_TOOL_FILES tool files (two tools each, a store)."""
    tools = folder / "config-tools" / "glassloop" / "tools"
    tools.mkdir(parents=True, exist_ok=True)
    for n in range(USER_TOOL_FILES):
        (tools / f"tools_{n:02d}.py").write_text(USER_TOOL.format(n=f"{n:02d}"), encoding="utf-8")
    return {**env, "XDG_CONFIG_HOME": str(folder / "config-tools"), "PYTHONPATH": str(ROOT)}


def _wall(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def _expect_prompt(child: Any) -> None:
    """Wait for the prompt, answering cursor-position requests on the way."""
    while child.expect([CPR_REQUEST, PROMPT]) == 0:
        child.send("\x1b[1;1R")


def _quit(child: Any, at_prompt: bool) -> None:
    import pexpect

    try:
        if not at_prompt:
            _expect_prompt(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF, timeout=10)
    except pexpect.ExceptionPexpect:
        child.terminate(force=True)
    child.close()


def _interactive(args: list[str], env: dict[str, str], cwd: Path, ask: bool) -> dict[str, float]:
    """Seconds from spawn to: prompt drawn, typed character echoed, (first answer shown)."""
    import pexpect

    started = time.perf_counter()
    child = pexpect.spawn(str(VENV_BIN / "glassloop"), args, env=env, cwd=str(cwd),
                          dimensions=(40, 120), encoding="utf-8", timeout=30)
    child.delaybeforesend = None  # pexpect sleeps 50 ms before each send by default
    try:
        _expect_prompt(child)
        times = {"prompt": time.perf_counter() - started}
        child.send(TYPED)
        child.expect_exact(TYPED)
        times["echo"] = time.perf_counter() - started
        if ask:
            child.send("\r")
            child.expect_exact(ANSWER)
            times["answer"] = time.perf_counter() - started
    except pexpect.ExceptionPexpect as exc:
        tail = (child.before or "")[-400:] if isinstance(child.before, str) else ""
        child.terminate(force=True)
        raise RuntimeError(f"glassloop {' '.join(args)}: no prompt ({type(exc).__name__}); output: {tail!r}") from None
    if not ask:
        child.sendcontrol("u")  # clear the typed character: Ctrl-D quits on an empty line only
    _quit(child, at_prompt=not ask)
    return times


def write_long_session(env: dict[str, str], turns: int) -> str:
    """A journal of ``turns`` turns (with their ``turn`` records, as a session writes them) where
    ``glassloop --resume`` looks for it; returns its id."""
    from bench import patched_environ
    from bench.memory_resume import ANSWER as LONG_ANSWER
    from repl.archive.journal import Journal
    from repl.config.load import load_settings
    from repl.config.redact import Redactor
    from repl.loop.history import History

    with patched_environ(env):
        folder = load_settings({"provider": "openai"}).data_dir / "sessions"
    history, session = History("You are glassloop."), "20250101-000000-bench"
    journal = Journal(folder / f"{session}.jsonl", Redactor(),
                      {"session": session, "provider": "openai", "model": "fake-model",
                       "system_prompt": history.system_prompt.text})
    for number in range(turns):
        history.begin_turn(f"question {number}: what is still open?")
        if number % 4 == 0:
            history.add_assistant("", [{"id": f"call_{number}", "name": "list_todos", "arguments": "{}"}])
            history.add_tool_result(f"call_{number}", "list_todos", '{"ok": true, "todos": []}')
        history.add_assistant(LONG_ANSWER)
        history.end_turn()
        journal.sync(history)
        journal.note_turn({"turn": number + 1, "compact": False, "stopped_by": "answer", "steps": 1 + (number % 4 == 0),
                           "tool_calls": int(number % 4 == 0), "calls": 1 + (number % 4 == 0),
                           "usage": {"input_tokens": 1200 + 400 * number, "cached_tokens": 0, "output_tokens": 180,
                                     "estimated": False, "reasoning_tokens": 0},
                           "duration_s": 1.5, "cost": {"usd": 0.0, "unpriced": 0}, "prompt_tokens": 1200 + 400 * number})
    journal.close()
    return session


def _one_round(server: Any, url: str, env: dict[str, str], cwd: Path, session: str,
               samples: dict[str, list[float]]) -> None:
    from tests.fakeserver import text

    py, exe = str(VENV_BIN / "python"), str(VENV_BIN / "glassloop")
    samples["floor"].append(_wall([py, "-c", FLOOR], env, cwd))
    server.script(text(ANSWER))
    times = _interactive(["--base-url", url], env, cwd, ask=True)
    for key, value in times.items():
        samples[key].append(value)
    server.script(text(ANSWER))
    times = _interactive(["--base-url", url], user_tools_env(env, cwd), cwd, ask=True)
    for key, value in times.items():
        samples[f"{key}_tools"].append(value)
    times = _interactive(["--base-url", url, "--resume", session], env, cwd, ask=False)
    samples["resume"].append(times["prompt"])
    samples["resume_echo"].append(times["echo"])
    samples["help"].append(_wall([exe, "--help"], env, cwd))
    samples["version"].append(_wall([exe, "--version"], env, cwd))
    samples["floor_openai"].append(_wall([py, "-c", FLOOR + ", openai"], env, cwd))


def run(quick: bool) -> dict[str, Any]:
    from tests.fakeserver import FakeServer

    compile_ours()

    repeats = 1 if quick else 12
    keys = ("floor", "prompt", "echo", "answer", "resume", "resume_echo", "help", "version", "floor_openai",
            "prompt_tools", "echo_tools", "answer_tools")
    samples: dict[str, list[float]] = {key: [] for key in keys}
    with scratch("prompt") as folder, FakeServer() as server:
        env = isolated_env(folder)
        session = write_long_session(env, 20 if quick else RESUME_TURNS)
        if not quick:  # warm the disk cache
            _one_round(server, server.base_url, env, folder, session, {k: [] for k in keys})
        for _ in range(repeats):
            _one_round(server, server.base_url, env, folder, session, samples)
    m = {key: median(values) for key, values in samples.items()}
    floor, turns = m["floor"], 20 if quick else RESUME_TURNS
    rows = [
        row("floor: python -c 'import prompt_toolkit, rich…, typer'", floor),
        row("glassloop: prompt drawn", m["prompt"], "s", f"{m['prompt'] / floor:.2f}x floor"),
        row("glassloop: first typed character echoed", m["echo"], "s", f"{m['echo'] / floor:.2f}x floor"),
        row("glassloop: answer to a question typed at once", m["answer"], "s",
            "scripted server; includes the SDK load"),
        row("floor + import openai (an eager start)", m["floor_openai"]),
        row(f"glassloop, {USER_TOOL_FILES} user tool files: prompt drawn", m["prompt_tools"], "s",
            f"{m['prompt_tools'] / floor:.2f}x floor"),
        row(f"glassloop, {USER_TOOL_FILES} user tool files: first typed character echoed", m["echo_tools"], "s",
            f"{m['echo_tools'] / floor:.2f}x floor"),
        row(f"glassloop, {USER_TOOL_FILES} user tool files: answer to a question typed at once",
            m["answer_tools"], "s", "the first turn waits for the tools to load"),
        row(f"glassloop --resume ({turns} turns): prompt drawn", m["resume"], "s", f"{m['resume'] / floor:.2f}x floor"),
        row(f"glassloop --resume ({turns} turns): first typed character echoed", m["resume_echo"], "s",
            f"{m['resume_echo'] / floor:.2f}x floor"),
        row("glassloop --help", m["help"], "s", f"{m['help'] / floor:.2f}x floor"),
        row("glassloop --version", m["version"], "s", f"{m['version'] / floor:.2f}x floor"),
    ]
    return {
        "name": "time_to_prompt",
        "rows": rows,
        "targets": {"prompt": target(m["echo"] / floor, LIMIT, f"prompt takes input <= {LIMIT}x floor"),
                    "prompt_tools": target(m["echo_tools"] / floor, LIMIT,
                                           f"with {USER_TOOL_FILES} user tool files, prompt takes input <= {LIMIT}x floor"),
                    "resume": target(m["resume_echo"] / floor, LIMIT,
                                     f"--resume of {turns} turns, prompt takes input <= {LIMIT}x floor")},
        "params": {"repeats": repeats, "python": sys.version.split()[0]},
        "samples": samples,
    }
