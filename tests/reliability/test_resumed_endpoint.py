"""A resumed session goes on where it ran: its provider, base URL, API and model, from its journal.

``-c``, ``--resume ID`` and ``/resume`` restore them unless a flag chose one, and say so in
one line when that changes where the next turn goes; the key is never the journal's (it holds
none) but the restored provider's own, from the configuration and the environment. Two scripted
servers: the session's, and the one the configuration points at now.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from repl.config.load import load_settings
from repl.session import commands
from repl.session.chat import ChatSession
from tests.fakeserver import FakeServer, text
from tests.support import SECRET, StubUI, chat_here, glassloop_here

pytestmark = pytest.mark.timeout(60)

WORK_KEY = "work-key-0123456789abcdef"


@pytest.fixture
def elsewhere(home: dict[str, str]) -> Iterator[FakeServer]:
    """The server the user's configuration points at after the session was made."""
    with FakeServer() as server:
        user = Path(home["XDG_CONFIG_HOME"]) / "glassloop" / "config.toml"
        user.parent.mkdir(parents=True, exist_ok=True)
        user.write_text(f'model = "model-b"\nbase_url = "{server.base_url}"\n'
                        f'[providers.work]\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = "WORK_KEY"\n',
                        encoding="utf-8")
        yield server


def models_sent(server: FakeServer) -> list[str]:
    return [r.body["model"] for r in server.chat_requests()]


def resumed_lines(output: str) -> list[str]:
    """The lines saying where a resume went, as one line each (the terminal wraps them at 80 columns)."""
    return ["resumed on " + rest.split(")")[0] + ")" for rest in " ".join(output.split()).split("resumed on ")[1:]]


def test_continue_goes_back_to_the_sessions_server_and_model(fake_server, home, elsewhere):
    fake_server.script(text("made"), text("continued"), text("by flag"), text("moved"))
    made = chat_here(home, fake_server.base_url, ["first question"], "--model", "model-a")
    assert made.returncode == 0, made.stderr
    assert models_sent(fake_server) == ["model-a"]

    resumed = glassloop_here("-c", env=home, stdin="next question\n")
    assert resumed.returncode == 0, resumed.stderr
    assert "continued" in resumed.stdout
    assert models_sent(fake_server) == ["model-a", "model-a"] and elsewhere.requests == []
    assert resumed_lines(resumed.stdout) == [
        f"resumed on provider openai at {fake_server.base_url}, model model-a (the session's)"]
    assert "model-a" in resumed.stdout.splitlines()[0]  # the header names where it goes

    flagged = glassloop_here("-c", "--model", "other-model", env=home, stdin="and by flag?\n")
    assert flagged.returncode == 0, flagged.stderr
    assert models_sent(fake_server)[-1] == "other-model" and elsewhere.requests == []
    assert resumed_lines(flagged.stdout) == [f"resumed on provider openai at {fake_server.base_url}, "
                                             "model other-model (the session's; --model from the command line)"]

    elsewhere.script(text("moved"))
    moved = glassloop_here("-c", "--base-url", elsewhere.base_url, env=home, stdin="over there?\n")
    assert moved.returncode == 0, moved.stderr
    assert models_sent(elsewhere) == ["other-model"]  # the flag's server, the model of the session's last turn


def test_the_sessions_provider_comes_back_with_its_own_key(fake_server, home, elsewhere):
    """A session made on another profile resumes on it, and that profile's key goes with it."""
    env = {**home, "WORK_KEY": WORK_KEY}
    fake_server.script(text("made at work"), text("still at work"))
    made = chat_here(env, fake_server.base_url, ["first question"], "--provider", "work", "--model", "model-w")
    assert made.returncode == 0, made.stderr
    journal = next((Path(home["XDG_DATA_HOME"]) / "glassloop" / "sessions").glob("*.jsonl")).read_text("utf-8")
    assert WORK_KEY not in journal and SECRET not in journal
    assert json.loads(journal.splitlines()[-1])["provider"] == "work"

    resumed = glassloop_here("-c", env=env, stdin="next question\n")
    assert resumed.returncode == 0, resumed.stderr
    assert models_sent(fake_server) == ["model-w", "model-w"] and elsewhere.requests == []
    assert fake_server.chat_requests()[-1].headers["authorization"] == f"Bearer {WORK_KEY}"
    assert resumed_lines(resumed.stdout) == [
        f"resumed on provider work at {fake_server.base_url}, model model-w (the session's)"]

    other = glassloop_here("-c", "--provider", "openai", env=env, stdin="and here?\n")
    elsewhere_sent = [r.headers["authorization"] for r in elsewhere.chat_requests()]
    assert other.returncode == 0 and elsewhere_sent == [f"Bearer {SECRET}"]  # the flag's provider, its key
    assert models_sent(elsewhere) == ["model-b"] and resumed_lines(other.stdout) == []


def test_slash_resume_switches_to_the_sessions_endpoint(fake_server, home, tmp_path, monkeypatch):
    for name in ("DATA", "STATE", "CONFIG"):
        monkeypatch.setenv(f"XDG_{name}_HOME", str(tmp_path / name.lower()))
    here = {"approval": "auto", "weather": "sample", "todos_file": str(tmp_path / "todos.json")}
    made = ChatSession(load_settings({**here, "base_url": fake_server.base_url, "model": "model-a"},
                                     cwd=tmp_path, env={}), StubUI(), interactive=False)
    made.open_journal()
    fake_server.script(text("made"), text("after /resume"))
    made.run_turn("first question")
    made.close()
    with FakeServer() as elsewhere:
        ui = StubUI()
        now = load_settings(here, cwd=tmp_path, env={"OPENAI_BASE_URL": elsewhere.base_url})  # not a flag
        session = ChatSession(now, ui, interactive=False)
        session.open_journal()
        commands.dispatch(session, f"/resume {made.session_id}")
        assert (session.settings.active.base_url, session.settings.active.model) == (fake_server.base_url, "model-a")
        session.run_turn("next question")
        session.close()
        assert elsewhere.requests == [] and models_sent(fake_server) == ["model-a", "model-a"]
    assert [line for line in ui.infos if line.startswith("resumed on ")] == [
        f"resumed on provider openai at {fake_server.base_url}, model model-a (the session's)"]


def test_continue_in_a_terminal_names_the_sessions_model_in_the_header(sized_repl, fake_server, home, elsewhere):
    fake_server.script(text("made"), text("continued in the terminal"))
    chat_here(home, fake_server.base_url, ["first question"], "--model", "model-a")
    repl = sized_repl("-c", url=False)
    screen = repl.screen()
    assert re.search(r"openai · model-a · approvals", screen), screen
    assert f"resumed on provider openai at {fake_server.base_url}, model model-a (the session's)" in screen
    repl.say("next question")
    repl.expect("continued in the terminal")
    repl.ready()
    repl.close()
    assert models_sent(fake_server) == ["model-a", "model-a"] and elsewhere.requests == []


def test_what_a_journal_says_is_checked_before_it_is_used(home, tmp_path):
    """An older journal (provider and model only), a profile no longer configured, values that are
    not valid: each restores what it can, and nothing it should not."""
    from repl.archive.recap import resumed_on

    settings = load_settings({"base_url": "http://127.0.0.1:9/v1"}, cwd=tmp_path, env={})
    older, line = resumed_on(settings, {"provider": "ollama", "model": "llama3"})
    assert (older.provider, older.active.model, older.active.base_url) == ("ollama", "llama3", "http://127.0.0.1:9/v1")
    assert line == "resumed on provider ollama at http://127.0.0.1:9/v1, model llama3 (the session's; --base-url from the command line)"
    gone, line = resumed_on(settings, {"provider": "retired", "model": "m"})
    assert gone is settings and line == ("the session ran on provider retired, which is not configured: "
                                         "continuing on provider openai, model gpt-4o-mini")
    bad, _ = resumed_on(load_settings({"provider": "vllm"}, cwd=tmp_path, env={}),
                        {"provider": "vllm", "model": 7, "api": "smoke-signals",
                         "base_url": "http://[redacted]@127.0.0.1:5/v1"})
    assert (bad.active.model, bad.active.api, bad.active.base_url) == (
        "Qwen/Qwen2.5-7B-Instruct", "chat", "http://localhost:8000/v1")
