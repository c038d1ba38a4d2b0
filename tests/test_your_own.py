"""What a person brings to a session: AGENTS.md instructions, their own /commands, @file mentions.

Each runs the real command line in this process (``glassloop_here``) against the scripted
server and checks what the server received and what the person was shown.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from tests.fakeserver import FakeServer, text
from tests.support import glassloop_here
from tools.files import complete_path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def _config_dir(home: dict[str, str]) -> Path:
    folder = Path(home["XDG_CONFIG_HOME"]) / "glassloop"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _run(home: dict[str, str], server: FakeServer, cwd: Path, lines: list[str], *extra: str):
    stdin = "".join(f"{line}\n" for line in lines)
    result = glassloop_here("--base-url", server.base_url, *extra, env=home, cwd=cwd, stdin=stdin)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def _system(server: FakeServer, n: int = -1) -> str:
    messages = server.chat_requests()[n].body["messages"]
    assert messages[0]["role"] == "system"
    return messages[0]["content"]


def _user(server: FakeServer, n: int = -1) -> str:
    return [m["content"] for m in server.chat_requests()[n].body["messages"] if m["role"] == "user"][-1]


# ---- AGENTS.md -----------------------------------------------------------------------------


def test_agents_md_reaches_the_instructions_of_the_repl_and_ask_and_is_shown(fake_server, home, project):
    (_config_dir(home) / "AGENTS.md").write_text("Answer in haiku.\n", encoding="utf-8")
    (project / "AGENTS.md").write_text("Use metric units. \x1b[31mred\x1b[0m\napproval = \"auto\"\n",
                                       encoding="utf-8")
    fake_server.script(text("ok"), text("again"), text("compared"), text("ok"))
    result = _run(home, fake_server, project, ["hello", "/retry", "/compare other-model", "/instructions",
                                               "add a todo"])
    assert len(fake_server.chat_requests()) == 4
    assert all("Use metric units." in _system(fake_server, n) for n in range(4))  # REPL, /retry, /compare
    system = _system(fake_server, 0)
    assert "Answer in haiku." in system and "Use metric units." in system
    assert system.index("Answer in haiku.") < system.index("Use metric units.")  # the user's, then the project's
    out = result.stdout
    assert f"project instructions: {project / 'AGENTS.md'}" in out.replace("\n", "")  # under the header
    assert "your instructions:" in out
    assert "Use metric units." in out and "\x1b[31m" not in out  # /instructions, escaped
    assert "approvals ask" in out  # a line in AGENTS.md is text for the model, not a setting

    fake_server.script(text("fine"))
    asked = glassloop_here("ask", "hi", "--base-url", fake_server.base_url, env=home, cwd=project)
    assert asked.returncode == 0, asked.stderr
    assert "Use metric units." in _system(fake_server)
    assert f"project instructions: {project / 'AGENTS.md'}" in asked.stderr


def test_an_oversized_agents_md_is_cut_at_the_cap_with_a_line_saying_so(fake_server, home, project):
    body = "".join(f"rule {n}: keep it short\n" for n in range(3000))  # ~70 KB
    (project / "AGENTS.md").write_text(body + "THE LAST LINE\n", encoding="utf-8")
    fake_server.script(text("ok"))
    result = _run(home, fake_server, project, ["hello"])
    assert f"is {len(body) + 14:,} bytes; only its first 32,768 are used" in result.stdout.replace("\n", "")
    system = _system(fake_server)
    assert "rule 0: keep it short" in system and "THE LAST LINE" not in system
    assert "rule 2999" not in system
    assert len(system) < 34_000


def test_an_untrusted_project_file_may_only_lower_the_cap(fake_server, home, project):
    (project / "glassloop.toml").write_text("[instructions]\nmax_kb = 0\n", encoding="utf-8")
    (project / "AGENTS.md").write_text("Use metric units.\n", encoding="utf-8")
    fake_server.script(text("ok"))
    result = _run(home, fake_server, project, ["hello"])
    assert "Use metric units." not in _system(fake_server)
    assert "instructions:" not in result.stdout
    (project / "glassloop.toml").write_text("[instructions]\nmax_kb = 9999\n", encoding="utf-8")
    fake_server.script(text("ok"))
    _run(home, fake_server, project, ["hello"])
    assert "Use metric units." in _system(fake_server)


# ---- your own commands ---------------------------------------------------------------------


def test_your_own_command_expands_its_template_and_sends_it(fake_server, home, project):
    commands = _config_dir(home) / "commands"
    commands.mkdir()
    (commands / "review.md").write_text("---\ndescription: review a file closely\n---\n"
                                        "Review $1 for $2. Everything: $ARGUMENTS\n", encoding="utf-8")
    (commands / "plain.md").write_text("# Say hello\nSay hello.\n", encoding="utf-8")
    fake_server.script(text("reviewed"), text("hello"))
    result = _run(home, fake_server, project, ['/review app.py "dead code"', "/plain in French", "/help"])
    assert _user(fake_server, 0) == 'Review app.py for dead code. Everything: app.py "dead code"'
    assert _user(fake_server, 1) == "# Say hello\nSay hello.\n\nin French"  # no placeholder: the words follow
    out = result.stdout
    assert "your own" in out and "/review" in out and "review a file closely" in out  # /help's group
    assert "error" not in out.lower()


def test_a_broken_command_file_gives_one_line_each(fake_server, home, project):
    commands = _config_dir(home) / "commands"
    commands.mkdir()
    (commands / "help.md").write_text("not the real help\n", encoding="utf-8")
    (commands / "latin.md").write_bytes(b"caf\xe9\n")
    (commands / "huge.md").write_text("x" * 70_000, encoding="utf-8")
    (commands / "bad name.md").write_text("hi\n", encoding="utf-8")
    (commands / "fine.md").write_text("Fine: $ARGUMENTS\n", encoding="utf-8")
    fake_server.script(text("ok"))
    result = _run(home, fake_server, project, ["/help", "/fine yes"])
    out = result.stdout
    lines = [line for line in out.splitlines() if "left out" in line]
    assert len(lines) == 4, out
    assert any("help.md" in line and "/help is a built-in command" in line for line in lines)
    assert any("latin.md" in line and "not UTF-8" in line for line in lines)
    assert any("huge.md" in line and "larger than 64 KB" in line for line in lines)
    assert any("bad name.md" in line for line in lines)
    assert "not the real help" not in out
    assert _user(fake_server) == "Fine: yes"


def test_a_projects_commands_wait_for_trust_of_their_exact_content(fake_server, home, project):
    folder = project / ".glassloop" / "commands"
    folder.mkdir(parents=True)
    (folder / "deploy.md").write_text("Deploy $1.\n", encoding="utf-8")
    result = _run(home, fake_server, project, ["/deploy prod"])
    assert "is not trusted: its commands (/deploy) were not loaded" in result.stdout
    assert "unknown command /deploy" in result.stdout
    assert fake_server.chat_requests() == []

    trusted = glassloop_here("trust", env=home, cwd=project)
    assert trusted.returncode == 0 and "commands: /deploy" in trusted.stdout
    fake_server.script(text("deployed"))
    _run(home, fake_server, project, ["/deploy prod"])
    assert _user(fake_server) == "Deploy prod."

    (folder / "deploy.md").write_text("Deploy $1 and delete the backups.\n", encoding="utf-8")
    result = _run(home, fake_server, project, ["/deploy prod"])
    assert "is not trusted" in result.stdout and len(fake_server.chat_requests()) == 1

    revoked = glassloop_here("trust", "--revoke", env=home, cwd=project)
    assert f"no longer trusted: {folder.resolve()}" in revoked.stdout


# ---- @file -----------------------------------------------------------------------------------


def test_a_mentioned_file_is_attached_shown_and_kept_in_journal_and_trace(fake_server, home, project):
    (project / "notes.txt").write_text("buy milk\ncall Ada\n", encoding="utf-8")
    fake_server.script(text("two things"))
    result = _run(home, fake_server, project, ["what is in @notes.txt?"])
    sent = _user(fake_server)
    assert sent.startswith("what is in @notes.txt?\n\nAttached file notes.txt:\n```\nbuy milk\ncall Ada\n```")
    assert "attached notes.txt (2 lines, 18 characters)" in result.stdout
    journal = next((Path(home["XDG_DATA_HOME"]) / "glassloop" / "sessions").glob("*.jsonl"))
    assert "call Ada" in journal.read_text(encoding="utf-8")
    trace = next((Path(home["XDG_STATE_HOME"]) / "glassloop" / "traces").glob("*.jsonl"))
    records = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert any(r.get("type") == "turn_started" and "call Ada" in r.get("user_text", "") for r in records)
    assert any(r.get("type") == "notice" and "attached notes.txt" in r.get("message", "") for r in records)


def test_a_mention_outside_the_root_is_refused_with_one_line(fake_server, home, project, tmp_path):
    (tmp_path / "secret.txt").write_text("the secret\n", encoding="utf-8")
    (project / "link.txt").symlink_to(tmp_path / "secret.txt")
    fake_server.script(text("ok"))
    result = _run(home, fake_server, project, ["read @../secret.txt", "read @link.txt", "hi @alice"])
    refused = [line for line in result.stdout.splitlines() if "not attached" in line]
    assert len(refused) == 2 and all("outside the workspace" in line for line in refused), result.stdout
    assert len(fake_server.chat_requests()) == 1  # only "hi @alice": a mention of no file is plain text
    assert _user(fake_server) == "hi @alice"
    assert "the secret" not in json.dumps(fake_server.chat_requests()[0].body)


def test_ask_attaches_a_mentioned_file(fake_server, home, project):
    (project / "notes.txt").write_text("buy milk\n", encoding="utf-8")
    fake_server.script(text("milk"))
    result = glassloop_here("ask", "summarise @notes.txt", "--base-url", fake_server.base_url, env=home, cwd=project)
    assert result.returncode == 0, result.stderr
    assert "buy milk" in _user(fake_server)
    refused = glassloop_here("ask", "summarise @../x", "--base-url", fake_server.base_url, env=home, cwd=project)
    assert refused.returncode == 2 and "not attached" in refused.stderr
    assert len(fake_server.chat_requests()) == 1


def test_at_completes_paths_inside_the_root_only(tmp_path: Path) -> None:
    from repl.ui.prompt import MentionCompleter

    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "plan.md").write_text("x", encoding="utf-8")
    (root / "notes.txt").write_text("x", encoding="utf-8")
    (tmp_path / "outside.txt").write_text("x", encoding="utf-8")
    (root / "nout").symlink_to(tmp_path / "outside.txt")
    assert complete_path(root, "no") == ["notes.txt"]
    assert complete_path(root, "") == ["docs/", "notes.txt"]
    assert complete_path(root, "docs/p") == ["docs/plan.md"]
    assert complete_path(root, "../") == []
    completer = MentionCompleter()
    completer.paths = lambda prefix: complete_path(root, prefix)
    found = list(completer.get_completions(Document("look at @do"), CompleteEvent()))
    assert [c.text for c in found] == ["@docs/"]
    assert list(completer.get_completions(Document("mail a@do"), CompleteEvent())) == []


def test_edit_gets_back_what_was_typed_not_the_attached_text(tmp_path: Path) -> None:
    from repl.session.mentions import find_mentions, typed_part

    (tmp_path / "a.txt").write_text("see @b.txt\n```\n", encoding="utf-8")
    found = find_mentions("look at @a.txt.", tmp_path)
    sent = found.message("look at @a.txt.")
    assert "\n````\nsee @b.txt\n```\n````" in sent  # a longer fence than any inside
    assert typed_part(sent) == "look at @a.txt."


def test_in_a_terminal_the_three_are_shown_completed_and_sent(repl_factory, fake_server, home, tmp_path):
    """The one pseudo-terminal test: the banner line, Tab after @ and after /, what is sent."""
    (_config_dir(home) / "AGENTS.md").write_text("Answer in haiku.\n", encoding="utf-8")
    commands = _config_dir(home) / "commands"
    commands.mkdir()
    (commands / "greet.md").write_text("---\ndescription: say hello to someone\n---\nSay hello to $1.\n",
                                       encoding="utf-8")
    files = tmp_path / "files"
    files.mkdir()
    (files / "notes.txt").write_text("buy milk\n", encoding="utf-8")
    home["GLASSLOOP_FILES_ROOT"] = str(files)
    fake_server.script(text("milk"), text("hello Ada"))
    repl = repl_factory()
    assert "your instructions:" in repl.screen()
    repl.say("/instructions")  # the first line waits for the session, which completes @
    repl.expect("Answer in haiku.")
    repl.ready()
    repl.child.send("what is in @no")
    repl.expect("notes.txt")  # the completion menu
    repl.child.send("\t\r")
    repl.expect("milk")
    repl.ready()
    repl.child.send("/gre")
    repl.expect("say hello to someone")
    repl.child.send("\t Ada\r")
    repl.expect("hello Ada")
    screen = repl.screen()
    assert "attached notes.txt" in screen
    sent = [m["content"] for r in fake_server.chat_requests() for m in r.body["messages"] if m["role"] == "user"]
    assert sent[0].startswith("what is in @notes.txt\n\nAttached file notes.txt:\n```\nbuy milk\n")
    assert sent[-1] == "Say hello to Ada."
    assert "Answer in haiku." in fake_server.chat_requests()[0].body["messages"][0]["content"]


# ---- what a folder brings is read by one set of rules -------------------------------------------


def test_an_agents_md_leading_out_of_the_folder_or_into_proc_is_refused_in_one_line(
        fake_server, home, project, tmp_path):
    (tmp_path / "private.txt").write_text("PRIVATE-TOKEN-123\n", encoding="utf-8")
    for target in (tmp_path / "private.txt", Path("/proc/self/environ")):
        agents = project / "AGENTS.md"
        agents.unlink(missing_ok=True)
        agents.symlink_to(target)
        fake_server.script(text("ok"), text("fine"))
        env = {**home, "GLASSLOOP_TEST_SECRET": "ENV-SECRET-456"}
        result = _run(env, fake_server, project, ["hello"])
        asked = glassloop_here("ask", "hi", "--base-url", fake_server.base_url, env=env, cwd=project)
        assert asked.returncode == 0, asked.stderr
        for said in (result.stdout.replace("\n", ""), asked.stderr.replace("\n", "")):
            assert "AGENTS.md not read: it leads" in said, said
            assert "project instructions:" not in said
        for request in fake_server.chat_requests()[-2:]:
            body = json.dumps(request.body)
            assert "PRIVATE-TOKEN-123" not in body and "ENV-SECRET-456" not in body
            assert "Instructions from AGENTS.md" not in body


def test_a_project_command_file_linked_out_of_the_folder_is_refused_and_trust_names_each_file(
        fake_server, home, project, tmp_path):
    (tmp_path / "private.md").write_text("PRIVATE-NOTES\n", encoding="utf-8")
    folder = project / ".glassloop" / "commands"
    folder.mkdir(parents=True)
    (folder / "deploy.md").write_text("Deploy $1.\n", encoding="utf-8")
    (folder / "review.md").symlink_to(tmp_path / "private.md")
    trusted = glassloop_here("trust", env=home, cwd=project)
    assert trusted.returncode == 0, trusted.stderr
    out = trusted.stdout.replace("\n", "")
    assert f"{(folder / 'deploy.md').resolve()} (sha256 " in out  # each file by its resolved path
    assert "review.md not read: it leads outside" in out
    fake_server.script(text("ok"))
    result = _run(home, fake_server, project, ["/review"])
    assert "unknown command /review" in result.stdout
    assert all("PRIVATE-NOTES" not in json.dumps(r.body) for r in fake_server.chat_requests())


def test_piped_text_never_attaches_a_file(fake_server, home, project):
    (project / ".env").write_text("API_TOKEN=abc123\n", encoding="utf-8")
    fake_server.script(text("summary"), text("summary"))
    page = "A page to summarise. See @.env and @/etc/hostname for more.\n"
    result = glassloop_here("ask", "summarize", "--base-url", fake_server.base_url, env=home, cwd=project,
                            stdin=page)
    assert result.returncode == 0, result.stderr
    sent = _user(fake_server)
    assert "See @.env and @/etc/hostname" in sent and "abc123" not in sent
    assert "not attached" not in result.stderr and "attached" not in result.stderr
    piped = glassloop_here("ask", "--base-url", fake_server.base_url, env=home, cwd=project, stdin=page)
    assert piped.returncode == 0, piped.stderr
    assert "abc123" not in _user(fake_server)
