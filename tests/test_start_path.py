"""What loads before the prompt is drawn: an allowlist, checked without timing.

The REPL runs in a pseudo-terminal with an audit hook that records every
module the main thread imports until the prompt first reads a line. Modules
the background threads import (the session and everything a turn uses, built
once the prompt is drawn; the openai SDK) are off the critical path and not
counted. A new third-party package or a new module of ours on that path fails
here: time to prompt is a benchmark figure, this is its guard.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pexpect

from tests.fakeserver import text

ROOT = Path(__file__).resolve().parent.parent

# Third-party top-level packages the prompt needs: the UI, the CLI and paths.
THIRD_PARTY = {"prompt_toolkit", "rich", "typer", "click", "shellingham", "annotated_doc",
               "wcwidth", "platformdirs"}

# Our own modules on the start path: the settings, the terminal (renderer and prompt) and the
# start that draws the prompt before the session exists. The session, its commands, the loop,
# the tools, the trace and the journal are imported on the thread that builds the session.
OURS = {
    "repl", "repl.cli", "repl.config", "repl.config.load", "repl.config.redact",
    "repl.config.schema", "repl.config.settings", "repl.config.trust", "repl.loop",
    "repl.loop.cost", "repl.loop.events", "repl.loop.unicode", "repl.session",
    "repl.session.runtime", "repl.session.start", "repl.ui", "repl.ui.escape",
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
            json.dump(sorted(name for name in seen if name in sys.modules), out)
        return read(self)
    prompt.PromptInput.read = first_read
    sys.argv = ["glassloop", *sys.argv[2:]]
    from repl.cli import main as glassloop
    glassloop()
""")


def _loaded_before_prompt(env: dict[str, str], tmp_path: Path) -> set[str]:
    out = tmp_path / "imports.json"
    env = {**env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm", "PYTHONPATH": str(ROOT)}
    child = pexpect.spawn(sys.executable, ["-c", PROBE, str(out), "--base-url", "http://127.0.0.1:9/v1"],
                          env=env, cwd=str(tmp_path), encoding="utf-8", timeout=30)
    try:
        child.expect_exact("\x1b[?2004h")
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    return set(json.loads(out.read_text(encoding="utf-8")))


def test_only_allowed_modules_load_before_the_prompt(home: dict[str, str], tmp_path: Path) -> None:
    loaded = _loaded_before_prompt(home, tmp_path)
    assert "prompt_toolkit" in loaded and "repl.ui.terminal" in loaded  # the probe saw the start path
    stdlib = set(sys.stdlib_module_names)
    foreign = {name for name in loaded if name.split(".")[0] not in stdlib | THIRD_PARTY | {"repl", "tools"}}
    ours = {name for name in loaded if name.split(".")[0] in {"repl", "tools"}}
    assert foreign == set(), f"third-party modules on the start path: {sorted(foreign)}"
    assert ours - OURS == set(), f"new modules of ours on the start path: {sorted(ours - OURS)}"


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
