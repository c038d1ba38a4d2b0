"""The pictures in docs/: a demo session's HTML trace page as Chromium draws it.

``python -m bench.screenshots`` runs a short session in this process against the scripted
server (``tests/fakeserver.py``), through the REPL's own session with a person stood in:
step mode pauses before the first model call and the question is edited, the server
refuses the first attempt (429) and the call is retried, two lookups run together, a todo
waits for approval; then ``/retry --model gpt-4o`` sends the question again on another
model. The session's trace is written as a page by ``glassloop trace ID --html`` and
``chromium --headless --screenshot`` draws it into ``docs/img/trace.png``; the first turn's
text timeline (``glassloop trace ID --turn 1``, 80 columns) is printed for docs/SEE_THROUGH.md.
Needs Chromium (Debian: ``apt-get install chromium``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import ROOT, isolated_env

PICTURE = ROOT / "docs" / "img" / "trace.png"
WINDOW = "1100,760"  # the first turn whole, and the head of the second
QUESTION = "look up Paris and Berlin"
EDITED = "look up Paris and Berlin, add a todo to pack"


class Person:
    """Stands in for the person at the keyboard: thinks before the first model call and edits
    the question, lets the rest go (Enter), takes a second to approve a todo."""

    def __init__(self) -> None:
        self.paused = False

    def before_model_call(self, view: Any) -> Any:
        from repl.loop.stepping import Continue, Edit

        if self.paused:
            time.sleep(0.3)
            return Continue()
        self.paused = True
        time.sleep(1.5)
        return Edit(EDITED)

    def after_model_answer(self, calls: list[Any]) -> list[Any]:
        from repl.loop.stepping import Continue

        time.sleep(0.3)
        return [Continue()] * len(calls)

    def ask(self, request: Any, validate: Any) -> Any:
        from repl.loop.approval import UserChoice

        time.sleep(1.0)
        return UserChoice("yes")


def demo_session(folder: Path, server: Any) -> str:
    """Run the demo session; its id."""
    from repl.config.load import load_settings
    from repl.session import commands
    from repl.session.chat import ChatSession
    from tests.fakeserver import call, fault_status, text, tool_calls
    from tests.support import StubUI
    from tools.registry import tool

    @tool(name="slow_lookup")
    def slow_lookup(city: str) -> dict:
        """Look a city up, slowly.

        Args:
            city: the city.
        """
        time.sleep(0.5)
        return {"city": city, "found": True}

    import openai  # noqa: F401 - imported already, as in a session that has run a while: no start-up in the picture

    person = Person()
    ui = StubUI()
    ui.stepper = lambda: person  # type: ignore[method-assign]
    ui.asker = lambda: person  # type: ignore[method-assign]
    settings = load_settings({"base_url": server.base_url, "model": "gpt-4o-mini", "approval": "ask",
                              "todos_file": str(folder / "todos.json")}, cwd=folder, env={})
    session = ChatSession(settings, ui, interactive=True)
    session.open_journal()
    session.registry.add([slow_lookup])
    slow = {"first_byte_delay": 0.3, "chunk_delay": 0.02}
    server.script(fault_status(429, retry_after=0.5),
                  tool_calls(call("slow_lookup", {"city": "Paris"}), call("slow_lookup", {"city": "Berlin"}),
                             call("add_todo", {"title": "pack the bags"}), **slow),
                  text("Both are found, and the todo to pack the bags is added.", **slow))
    session.set_step(True)
    session.ask(QUESTION)
    session.set_step(False)
    server.script(tool_calls(call("slow_lookup", {"city": "Paris"}), call("slow_lookup", {"city": "Berlin"}),
                             call("add_todo", {"title": "pack the bags"}), **slow),
                  text("Paris and Berlin are both found; I added a todo to pack the bags.", **slow))
    commands.dispatch(session, "/retry --model gpt-4o")
    session_id = session.session_id
    session.close()
    return session_id


def glassloop(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "repl.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    if done.returncode != 0:
        raise SystemExit(f"glassloop {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def screenshot(page: Path, picture: Path, folder: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("chromium is not installed (Debian: apt-get install chromium)")
    picture.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--force-device-scale-factor=1", "--disable-background-networking", "--no-first-run",
                    f"--user-data-dir={folder / 'chromium'}", f"--window-size={WINDOW}",
                    f"--screenshot={picture}", page.as_uri()],
                   capture_output=True, timeout=120, check=True)


def main() -> None:
    from tests.fakeserver import FakeServer

    with tempfile.TemporaryDirectory() as tmp, FakeServer() as server:
        folder = Path(tmp)
        env = isolated_env(folder)
        os.environ.update({k: v for k, v in env.items() if k.startswith("XDG_")})
        session_id = demo_session(folder, server)
        page = folder / "trace.html"
        print(glassloop(env, "trace", session_id, "--html", str(page)).strip())
        screenshot(page, PICTURE, folder)
        print(glassloop({**env, "COLUMNS": "80"}, "trace", session_id, "--turn", "1"))
    print(f"{PICTURE.relative_to(ROOT)}: {PICTURE.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
