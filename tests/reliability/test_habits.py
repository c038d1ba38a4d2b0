"""Habits people bring from other terminal agents: aliases, /copy, !cmd, /model, /edit,
piped text with a question, ``glassloop "question"``.

The real program in a pseudo-terminal against the scripted server.
"""

from __future__ import annotations

import base64
import re
import shlex
import sys
from pathlib import Path

import pexpect

from tests.fakeserver import call, text, tool_calls
from tests.terminal import ANSI


def user_messages(fake_server) -> list[str]:
    return [m["content"] for m in fake_server.chat_requests()[-1].body["messages"] if m["role"] == "user"]


def test_aliases_and_suggestions_by_meaning(sized_repl, fake_server):
    fake_server.script(text("first answer"), text("fresh start"))
    repl = sized_repl()
    assert "/help for commands" in repl.screen() and "approvals ask" in repl.screen()
    repl.say("hello")
    repl.expect("first answer")
    repl.ready()
    repl.say("/cost")
    repl.expect("stopped by")  # the /usage table's last column
    repl.ready()
    for typed, meant in [("/new", "/reset"), ("/tokens", "/usage"), ("/models", "/model")]:
        repl.say(typed)
        repl.expect(f"did you mean {meant}")
        repl.ready()
    repl.say("/clear")
    repl.expect("new conversation")
    repl.ready()
    repl.say("again")
    repl.expect("fresh start")
    repl.ready()
    assert user_messages(fake_server) == ["again"]
    repl.say("/help")
    repl.expect("/exit, /quit")
    repl.ready()
    assert "/reset, /clear" in repl.screen() and "/usage, /cost" in repl.screen()
    repl.close()


def test_copy_sends_the_last_answer_as_osc_52(sized_repl, fake_server):
    fake_server.script(text("copy **me**, please"))
    repl = sized_repl()
    repl.say("/copy")
    repl.expect("nothing to copy")
    repl.ready()
    repl.say("say it")
    repl.expect("please")
    repl.ready()
    repl.say("/copy")
    repl.expect("copied the last answer")
    repl.ready()
    raw = "".join(repl.transcript)
    sequence = "\x1b]52;c;" + base64.b64encode(b"copy **me**, please").decode() + "\x07"
    assert sequence in raw
    repl.close()


def test_copy_puts_on_the_clipboard_what_the_screen_shows(sized_repl, fake_server):
    """Pasted into a shell, a bracketed-paste end, carriage returns, backspaces or bidi controls
    in the copied text could run commands: the clipboard gets the answer cleaned as it was drawn."""
    answer = ("run this:\n\tls\x1b[201~\rrm -rf ~\x08\x08\u202eevil\u202c\x1b]0;title\x07 end\x9b31m!"
              "\n\u2066second\u2069 line\x00\x7f")
    fake_server.script(text(answer))
    repl = sized_repl()
    repl.say("say it")
    repl.expect("second line")
    repl.ready()
    repl.say("/copy")
    repl.expect("copied the last answer")
    repl.ready()
    assert "(42 characters)" in repl.screen()
    copied = [base64.b64decode(data).decode("utf-8")
              for data in re.findall(r"\x1b\]52;c;([A-Za-z0-9+/=]*)\x07", "".join(repl.transcript))]
    assert copied == ["run this:\n\tlsrm -rf ~evil end!\nsecond line"]
    repl.close()


def test_bang_runs_the_users_command_and_adds_it_only_when_asked(sized_repl, fake_server):
    fake_server.script(text("seen it"))
    repl = sized_repl()
    repl.say("!echo kept-out")
    repl.expect("kept-out")
    repl.expect("Add the command")
    repl.key("n")
    repl.ready()
    repl.say("!echo shell-said-$((6*7)) && exit 3")
    repl.expect("shell-said-42")
    repl.expect("exit status 3")
    repl.expect("Add the command")
    repl.key("y")
    repl.expect("goes with your next message")
    repl.ready()
    repl.say("what did it say?")
    repl.expect("seen it")
    repl.ready()
    [sent] = user_messages(fake_server)
    assert "shell-said-42" in sent and "exit status 3" in sent and sent.endswith("what did it say?")
    assert "kept-out" not in sent
    tools = [t["function"]["name"] for t in fake_server.chat_requests()[-1].body["tools"]]
    assert not any("shell" in name or "bash" in name for name in tools)  # the model cannot run it
    repl.close()


def test_model_lists_the_endpoints_models_and_tab_completes_them(sized_repl, fake_server):
    fake_server.models = ["gpt-4o-mini", "llama-3.1-8b-instruct", "qwen2.5-72b"]
    fake_server.script(text("from llama"))
    repl = sized_repl()
    repl.say("/model")
    repl.expect("3 models offered")
    repl.ready()
    assert "* gpt-4o-mini" in repl.screen() and "llama-3.1-8b-instruct" in repl.screen()
    repl.child.send("/model lla")
    repl.key("\t")
    repl.expect("8b-instruct")
    repl.child.send("\r")
    repl.expect("model is now llama-3.1-8b-instruct")
    repl.ready()
    repl.say("hi")
    repl.expect("from llama")
    repl.ready()
    assert fake_server.chat_requests()[-1].body["model"] == "llama-3.1-8b-instruct"
    assert sum(r.path == "/v1/models" for r in fake_server.requests) == 1  # asked once
    repl.close()


def test_edit_undoes_the_turn_and_resends_the_changed_message(sized_repl, fake_server, home):
    todos = Path(home["GLASSLOOP_TODOS_FILE"])
    before = todos.read_bytes()
    fake_server.script(tool_calls(call("add_todo", {"title": "call mum"})), text("Added."),
                       text("Added properly."), text("third"))
    repl = sized_repl("--yes")
    repl.say("remind me to call mum")
    repl.expect("Added")
    repl.ready()
    assert todos.read_bytes() != before
    repl.say("/edit")
    repl.expect("removed todo-004 'call mum'")
    repl.ready()
    assert todos.read_bytes() == before  # undone byte for byte before the edit
    repl.child.send(" tomorrow\r")
    repl.expect("Added properly")
    repl.ready()
    assert user_messages(fake_server) == ["remind me to call mum tomorrow"]
    repl.child.send("\x1b\x1b")  # Esc Esc at an empty prompt: the same
    repl.expect("edit your message")
    repl.ready()
    repl.child.send("!\r")
    repl.expect("third")
    repl.ready()
    assert user_messages(fake_server) == ["remind me to call mum tomorrow!"]
    repl.close()


def _spawn_shell(command: str, env: dict[str, str]) -> pexpect.spawn:
    env = {**env, "TERM": "xterm", "COLUMNS": "100", "LINES": "40"}
    return pexpect.spawn("/bin/sh", ["-c", command], env=env, encoding="utf-8", dimensions=(40, 100), timeout=20)


def test_piped_text_goes_with_the_question(fake_server, home, tmp_path):
    log = tmp_path / "log.txt"
    log.write_text("line one\n```\nERROR disk full\n", encoding="utf-8")
    fake_server.script(text("The disk is full."))
    cli = f"{shlex.quote(sys.executable)} -m repl.cli ask --base-url {fake_server.base_url}"
    child = _spawn_shell(f"cat {log} | {cli} summarize", home)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and "The disk is full." in child.before
    [sent] = user_messages(fake_server)
    assert sent.startswith("summarize\n\n````\n") and "ERROR disk full" in sent and sent.endswith("\n````")
    log.write_text("x" * 300_000, encoding="utf-8")
    child = _spawn_shell(f"cat {log} | {cli} summarize", home)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2 and "over 200,000 characters" in ANSI.sub("", child.before)
    assert len(fake_server.chat_requests()) == 1  # nothing sent


def test_a_question_on_the_command_line_starts_the_repl_with_it(sized_repl, fake_server):
    fake_server.script(text("three are open"), text("and later"))
    repl = sized_repl("what is open?", wait=False)
    repl.expect("three are open")
    repl.ready()
    assert user_messages(fake_server) == ["what is open?"]
    assert "> what is open?" in repl.screen()
    repl.say("and now?")
    repl.expect("and later")
    repl.ready()
    repl.close()
    typo = sized_repl("trce", url=False, wait=False)
    typo.child.expect(pexpect.EOF)
    assert "did you mean 'trace'" in typo.child.before
    assert fake_server.unscripted == 0


def test_help_fits_one_screen_at_60_and_100_columns_and_all_lists_every_command(sized_repl):
    """The commands people use most, grouped, on one 30-row screen; /help all for the rest."""
    from repl.session.commands import table

    for cols in (100, 60):
        repl = sized_repl(cols=cols, rows=30)
        repl.say("/help")
        repl.expect("/help all")
        repl.ready()
        screen = repl.screen()
        assert "commands" in screen and "/undo" in screen and "/retry" in screen  # the top of it is still there
        assert "/exit, /quit" in screen and "/compare" not in screen
        assert all(len(line) <= cols for line in screen.splitlines())
        repl.say("/help all")
        repl.expect("Ctrl-D exits")
        repl.ready()
        shown = repl.all_output() if hasattr(repl, "all_output") else repl.screen()
        repl.close()
    assert all(f"/{c.name}" in shown for c in table().commands[-3:])
