"""What loads before the prompt is drawn: an allowlist, checked without timing.

The REPL runs in a pseudo-terminal with an audit hook that records every
module the main thread imports until the prompt first reads a line. Modules
the background threads import (the session and everything a turn uses, built
once the prompt is drawn; the openai SDK) are off the critical path and not
counted. A new third-party package or a new module of ours on that path fails
here: time to prompt is a benchmark figure, this is its guard. ``--resume`` of a
saved session is held to the same list: its recap comes from a look at the
journal's lines (``repl.archive.recap``), the journal is read whole behind the prompt.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import pexpect

from repl.archive.journal import Journal
from repl.config.redact import Redactor
from repl.loop.history import History
from tests.fakeserver import text

ROOT = Path(__file__).resolve().parent.parent

# Third-party top-level packages the prompt needs: the UI, the CLI and paths.
THIRD_PARTY = {"prompt_toolkit", "rich", "typer", "click", "shellingham", "annotated_doc",
               "wcwidth", "platformdirs"}

# Our own modules on the start path: the settings, the terminal (renderer and prompt) and the
# start that draws the prompt before the session exists. The session, its commands, the loop,
# the tools, the trace and the journal are imported on the thread that builds the session.
OURS = {
    "repl", "repl.cli", "repl.config", "repl.config.load", "repl.config.project", "repl.config.redact",
    "repl.config.schema", "repl.config.settings", "repl.config.trust", "repl.loop",
    "repl.loop.cost", "repl.loop.events", "repl.loop.unicode", "repl.session",
    "repl.providers", "repl.providers.base",  # Usage, which the events carry: standard library only
    "tools", "tools.compat",  # the CLI's private-API helpers: standard library only, the package lazy
    "repl.session.instructions",  # AGENTS.md, read to say so under the header: standard library only
    "tools.folder_files", "tools.results",  # the one reader of a folder's files: standard library only
    "repl.archive", "repl.archive.recap", "repl.session.runtime", "repl.session.start", "repl.ui", "repl.ui.escape",
    "repl.ui.event_views", "repl.ui.live", "repl.ui.mdstream", "repl.ui.prompt", "repl.ui.render",
    "repl.ui.terminal",
}

PROBE = textwrap.dedent("""
    import json, sys, threading
    main, seen, out_path = threading.main_thread(), set(), sys.argv[1]
    def hook(event, args):
        if event == "import" and threading.current_thread() is main:
            seen.add(args[0])
    sys.addaudithook(hook)
    import repl.ui.prompt as prompt
    read = prompt.PromptInput.read
    def first_read(self):
        prompt.PromptInput.read = read
        with open(out_path, "w") as out:
            json.dump({"modules": sorted(name for name in seen if name in sys.modules),
                       "toolbar": self._toolbar(200)}, out)
        return read(self)
    prompt.PromptInput.read = first_read
    sys.argv = ["glassloop", *sys.argv[2:]]
    from repl.cli import main as glassloop
    glassloop()
""")


def _before_prompt(env: dict[str, str], tmp_path: Path, *args: str) -> dict[str, Any]:
    """The modules the main thread loaded before the first read, and the toolbar's text then."""
    out = tmp_path / "imports.json"
    env = {**env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "PYTHONPATH": str(ROOT)}
    child = pexpect.spawn(sys.executable, ["-c", PROBE, str(out), "--base-url", "http://127.0.0.1:9/v1", *args],
                          env=env, cwd=str(tmp_path), encoding="utf-8", timeout=30)
    try:
        child.expect_exact("\x1b[?2004h")
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    found: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return found


def _check_allowed(loaded: set[str]) -> None:
    assert "prompt_toolkit" in loaded and "repl.ui.terminal" in loaded  # the probe saw the start path
    stdlib = set(sys.stdlib_module_names)
    foreign = {name for name in loaded if name.split(".")[0] not in stdlib | THIRD_PARTY | {"repl", "tools"}}
    ours = {name for name in loaded if name.split(".")[0] in {"repl", "tools"}}
    assert foreign == set(), f"third-party modules on the start path: {sorted(foreign)}"
    assert ours - OURS == set(), f"new modules of ours on the start path: {sorted(ours - OURS)}"


def test_only_allowed_modules_load_before_the_prompt(home: dict[str, str], tmp_path: Path) -> None:
    _check_allowed(set(_before_prompt(home, tmp_path)["modules"]))


def saved_session(home: dict[str, str], turns: int, *, damage_first_answer: bool = False) -> str:
    """A journal of ``turns`` turns (a tool call in the first) with their ``turn`` records, where
    ``--resume`` finds it; ``damage_first_answer``: the first answer's text is not text."""
    session = "20260101-120000-r5m1"
    folder = Path(home["XDG_DATA_HOME"]) / "glassloop" / "sessions"
    history = History("You are resumed.")
    journal = Journal(folder / f"{session}.jsonl", Redactor(), {"session": session, "provider": "default",
                                                                "model": "m", "system_prompt": "You are resumed."})
    for n in range(1, turns + 1):
        history.begin_turn(f"old question {n}")
        if n == 1:
            history.add_assistant("", [{"id": "call_1", "name": "list_todos", "arguments": "{}"}])
            history.add_tool_result("call_1", "list_todos", '{"ok": true, "todos": []}')
        history.add_assistant(f"old answer {n}")
        journal.sync(history)
        journal.note_turn({"turn": n, "compact": False, "stopped_by": "answer", "steps": 1, "tool_calls": 0,
                           "calls": 1, "usage": {"input_tokens": 1000 * n, "cached_tokens": 0, "output_tokens": 234,
                                                 "estimated": False, "reasoning_tokens": 0},
                           "duration_s": 0.5, "cost": {"usd": 0.0, "unpriced": 0}, "prompt_tokens": 1000 * n})
    journal.close()
    if damage_first_answer:
        path = folder / f"{session}.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines()
        lines = [line.replace('"content": "old answer 1"', '"content": null') for line in lines]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return session


def test_a_resume_loads_the_same_modules_and_shows_the_journals_totals(home: dict[str, str], tmp_path: Path) -> None:
    """``--resume`` draws its recap and prompt with the plain start's modules (no history, journal,
    tools or trace: those load behind the prompt), the toolbar already continuing the journal's totals."""
    session = saved_session(home, 5)
    found = _before_prompt(home, tmp_path, "--resume", session)
    loaded = set(found["modules"])
    _check_allowed(loaded)
    assert not loaded & {"repl.archive.journal", "repl.loop.history", "tools.registry", "rich.markdown"}
    assert "16,170 tokens" in found["toolbar"], found["toolbar"]  # 1,000 + ... + 5,000 in, 5 x 234 out


def test_a_line_typed_at_once_goes_to_the_session_the_header_named(repl_factory, fake_server, home) -> None:
    """The first prompt is drawn before the session is built: what is typed at it waits
    for that session, whose journal and trace carry the id the header showed."""
    fake_server.script(text("built behind the prompt"))
    repl = repl_factory()
    [shown] = re.findall(r"session (\d{8}-\d{6}-[0-9a-f]{4})", repl.screen())
    repl.say("hello")
    repl.expect("built behind the prompt")
    repl.ready()
    repl.close()
    saved = {p.stem for p in Path(home["XDG_DATA_HOME"]).rglob("*.jsonl")}
    assert saved == {shown}, saved  # the journal; the trace is beside it under the same name
    assert [m["content"] for m in fake_server.chat_requests()[-1].body["messages"] if m["role"] == "user"] == ["hello"]


def test_a_command_completed_at_once_waits_for_the_commands(repl_factory) -> None:
    """Tab at the first prompt, before the session (and its command table) exists, completes."""
    repl = repl_factory()
    repl.child.send("/hel\t")
    repl.expect("/help")
    repl.child.sendcontrol("u")
    repl.close()


def test_a_line_typed_at_once_goes_to_the_resumed_session(repl_factory, fake_server, home) -> None:
    """A resume's prompt comes before its session is built: a line typed at once waits for it and
    goes out with the whole resumed history (the recap showed the last 3 turns of 5)."""
    session = saved_session(home, 5)
    fake_server.script(text("answered after the resume"))
    repl = repl_factory("--resume", session)
    repl.say("new question")
    repl.expect("answered after the resume")
    repl.ready()
    screen = repl.screen()
    assert "› old question 3" in screen and "old answer 5" in screen and "› old question 2" not in screen
    assert "… 2 earlier turns" in screen and f"resumed session {session}: 5 turns, 12 messages" in screen
    assert "was damaged" not in screen
    repl.close()
    users = [m["content"] for m in fake_server.chat_requests()[-1].body["messages"] if m["role"] == "user"]
    assert users == [f"old question {n}" for n in range(1, 6)] + ["new question"]
    assert fake_server.history_errors == []


def test_damage_the_recap_does_not_read_gives_one_notice(repl_factory, fake_server, home) -> None:
    """Damage in a line the recap does not parse (an early answer that is not text) is found when
    the journal is read whole behind the prompt: one notice, above the prompt (not printed over
    it), and what was valid is resumed."""
    session = saved_session(home, 5, damage_first_answer=True)
    fake_server.script(text("answered despite the damage"))
    repl = repl_factory("--resume", session)
    repl.expect("was damaged")
    repl.ready()  # the notice is printed above the prompt, which is drawn again below it
    repl.say("new question")
    repl.expect("answered despite the damage")
    repl.ready()
    repl.close()
    assert repl.screen().count(f"the journal {session}.jsonl was damaged") == 1
    users = [m["content"] for m in fake_server.chat_requests()[-1].body["messages"] if m["role"] == "user"]
    assert users == [f"old question {n}" for n in range(1, 6)] + ["new question"]
    assert fake_server.history_errors == []
