"""What loads before the prompt is drawn: an allowlist, checked without timing.

The REPL runs in a pseudo-terminal with an audit hook that records every
module the main thread imports until the prompt first reads a line. Modules
the background provider thread imports (the openai SDK) are off the critical
path and not counted. A new third-party package or a new module of ours on
that path fails here: time to prompt is a benchmark figure, this is its guard.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pexpect

ROOT = Path(__file__).resolve().parent.parent

# Third-party top-level packages the prompt needs: the UI, the CLI and paths.
THIRD_PARTY = {"prompt_toolkit", "rich", "typer", "click", "shellingham", "annotated_doc",
               "wcwidth", "platformdirs"}

# Our own modules on the start path. Anything else (providers over the SDK, MCP,
# the embedded model, compaction's prompt...) must be imported where it is used.
# repl.user_tools is the wiring only: the loader and the user's files load on a background thread.
OURS = {
    "repl", "repl.agent", "repl.approval", "repl.cli", "repl.commands", "repl.commands.conversation",
    "repl.commands.model", "repl.commands.tools", "repl.commands.trace", "repl.compaction", "repl.compare",
    "repl.config", "repl.config_schema", "repl.config_show", "repl.context", "repl.cost",
    "repl.events", "repl.history", "repl.journal", "repl.prompts", "repl.providers",
    "repl.providers.base", "repl.redact", "repl.runtime", "repl.session", "repl.settings",
    "repl.stepping", "repl.timeline", "repl.trace", "repl.trust", "repl.ui",
    "repl.ui.approval_dialog", "repl.ui.escape", "repl.ui.live", "repl.ui.mdstream",
    "repl.ui.event_views", "repl.ui.prompt", "repl.ui.render", "repl.ui.terminal", "repl.unicode",
    "repl.user_tools", "tools", "tools.calculator", "tools.cancel", "tools.files",
    "tools.notes", "tools.registry", "tools.schema", "tools.store", "tools.todos",
    "tools.validation", "tools.weather",
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
    assert "prompt_toolkit" in loaded and "repl.session" in loaded  # the probe saw the start path
    stdlib = set(sys.stdlib_module_names)
    foreign = {name for name in loaded if name.split(".")[0] not in stdlib | THIRD_PARTY | {"repl", "tools"}}
    ours = {name for name in loaded if name.split(".")[0] in {"repl", "tools"}}
    assert foreign == set(), f"third-party modules on the start path: {sorted(foreign)}"
    assert ours - OURS == set(), f"new modules of ours on the start path: {sorted(ours - OURS)}"
