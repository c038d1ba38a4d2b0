"""Step mode in the real REPL (pseudo-terminal) against the scripted server.

Each test pauses the loop, does one thing (continue, edit the question, skip a
call, a hand-made result, stop mid-step), then runs a turn without step mode:
the scripted server checks the whole history it receives, so a history left
broken by step mode fails there.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

from tests.fakeserver import call, text, tool_calls
from tests.reliability.helpers import strict_json, trace_records, written_lines

SEND = r"stop turn ›"  # the end of both step prompts (also in a prompt redrawn with its answer)
BEFORE_CALL = "before the model call"  # panel titles: printed once, after the last prompt's redraw
BEFORE_TOOLS = "before they run"


def pause(repl, marker: str) -> str:
    """What is on screen up to the prompt that follows ``marker`` (a title, or a call's "2/2 name:").
    The prompt is drawn once keys typed earlier are dropped: a key sent now answers it."""
    screen = repl.expect(marker)
    return screen + repl.expect(SEND)


def submit(repl, text: str) -> None:
    """``text`` typed into the editor, then Esc Enter once it is drawn: sent at once, the Esc could
    end one read of the terminal and its Enter start the next, a newline rather than a submit."""
    repl.child.send(text)
    repl.expect(re.escape(text[-12:]))
    repl.child.send("\x1b\r")


def _then_a_plain_turn(repl, fake_server) -> list[dict]:
    """``/step off``, one more turn; the messages the server got for it (checked valid)."""
    repl.say("/step off")
    repl.expect("step mode off")
    repl.ready()
    repl.say("and now?")
    repl.expect("plain answer")
    repl.ready()
    assert fake_server.history_errors == []
    return fake_server.chat_requests()[-1].body["messages"]


def _user_steps(home_env) -> list[dict]:
    return [r for r in trace_records(home_env) if r.get("type") == "user_step"]


def test_continue_through_every_pause_and_an_approval(sized_repl, fake_server, home):
    fake_server.script(tool_calls(call("list_todos", {}), call("add_todo", {"title": "stepped"})),
                       text("Listed and added."), text("plain answer"))
    repl = sized_repl("--step")
    assert "step mode on" in repl.screen()
    repl.say("list and add")
    screen = pause(repl, BEFORE_CALL)
    assert "sends all 2 messages" in screen and "list_todos" in screen and "unchanged prefix" in screen
    repl.child.send("\r")  # Enter continues
    screen = pause(repl, BEFORE_TOOLS)
    assert "2 tool calls" in screen and "asks for approval" in screen
    repl.child.send("c")
    pause(repl, "2/2 add_todo:")
    repl.child.send("c")
    repl.expect(r"Allow\?")  # a side-effecting call still asks
    repl.child.send("y")
    screen = pause(repl, BEFORE_CALL)
    assert "step 2" in screen and "adds 3 of 5 messages" in screen and "tool_call_id" in screen
    repl.child.send("c")
    repl.expect("Listed and added")
    repl.ready()
    messages = _then_a_plain_turn(repl, fake_server)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "assistant", "user"]
    assert json.loads(messages[4]["content"])["ok"] is True  # the approved add_todo ran
    assert _user_steps(home) == []  # nothing changed by hand
    repl.close()


def test_edit_the_question_then_send_it_without_tools(sized_repl, fake_server, home):
    fake_server.script(text("Edited answer."), text("plain answer"))
    repl = sized_repl("--step")
    repl.say("a questoin with a typo")
    pause(repl, BEFORE_CALL)
    repl.child.send("e")
    repl.editor("Edit the question")
    repl.child.sendcontrol("a")
    repl.child.sendcontrol("k")
    repl.child.send("a question without a typo")
    repl.child.send("\x1b\r")  # Esc Enter accepts the edit
    screen = pause(repl, BEFORE_CALL)  # the panel again, with the edited question
    assert "a question without a typo" in screen
    repl.child.send("s")  # send it without tools
    repl.expect("Edited answer")
    repl.ready()
    first = fake_server.chat_requests()[0].body
    assert first["messages"][-1] == {"role": "user", "content": "a question without a typo"}
    assert "tools" not in first
    messages = _then_a_plain_turn(repl, fake_server)
    assert messages[1]["content"] == "a question without a typo"
    edit, no_tools = _user_steps(home)
    assert edit["action"] == "edited_by_user" and no_tools["action"] == "tools_disabled_by_user"
    assert edit["detail"]["before"] == "a questoin with a typo"
    repl.close()


def test_skip_a_call(sized_repl, fake_server, home):
    fake_server.script(tool_calls(call("list_todos", {}), call("get_todo", {"todo_id": "todo-002"})),
                       text("One skipped."), text("plain answer"))
    repl = sized_repl("--step")
    repl.say("two calls")
    pause(repl, BEFORE_CALL)
    repl.child.send("c")
    pause(repl, BEFORE_TOOLS)
    repl.child.send("x")  # skip list_todos
    pause(repl, "2/2 get_todo:")
    repl.child.send("c")  # run get_todo
    pause(repl, BEFORE_CALL)
    repl.child.send("c")
    repl.expect("One skipped")
    repl.ready()
    assert "step mode · list_todos skipped" in repl.screen()
    repl.say("/trace")
    repl.expect(r"skipped_by_user list_todos \(step mode\)")  # the timeline marks it
    repl.ready()
    results = [m for m in fake_server.chat_requests()[1].body["messages"] if m["role"] == "tool"]
    skipped, ran = (json.loads(m["content"]) for m in results)
    assert skipped["error"]["type"] == "skipped_by_user" and ran["ok"] is True
    _then_a_plain_turn(repl, fake_server)
    [skip] = _user_steps(home)
    assert skip["action"] == "skipped_by_user" and skip["name"] == "list_todos"
    repl.close()


def test_a_result_made_by_hand_is_checked_then_sent(sized_repl, fake_server, home):
    fake_server.script(tool_calls(call("get_weather", {"city": "Paris"})), text("Sunny, you say."),
                       text("plain answer"))
    repl = sized_repl("--step")
    repl.say("weather?")
    pause(repl, BEFORE_CALL)
    repl.child.send("c")
    pause(repl, BEFORE_TOOLS)
    repl.child.send("r")
    repl.editor("as JSON")
    for _ in range(6):  # clear the template, line by line from the end
        repl.child.sendcontrol("a")
        repl.child.sendcontrol("k")
        repl.child.sendcontrol("h")
    submit(repl, '{"ok": "sunny"}')  # not a result
    repl.editor("ok\": true or false")
    repl.child.sendcontrol("a")
    repl.child.sendcontrol("k")
    submit(repl, '{"ok": true, "degrees": NaN}')  # Python's json reads it; no strict parser does
    repl.editor("NaN and Infinity are not JSON")
    repl.child.sendcontrol("a")
    repl.child.sendcontrol("k")
    submit(repl, '{"ok": true, "forecast": "sunny, by hand"}')
    pause(repl, BEFORE_CALL)  # before the next model call
    repl.child.send("c")
    repl.expect("Sunny, you say")
    repl.ready()
    sent = fake_server.chat_requests()[1].body["messages"][-1]
    assert sent["role"] == "tool" and json.loads(sent["content"]) == {"ok": True, "forecast": "sunny, by hand"}
    _then_a_plain_turn(repl, fake_server)
    [made] = _user_steps(home)
    assert made["action"] == "result_by_user" and made["detail"]["forecast"] == "sunny, by hand"
    repl.close()
    written = written_lines(home)  # trace, raw bodies, journal
    assert len(written) > 10 and all(strict_json(line) for line in written)


def test_quit_mid_step_leaves_a_history_the_server_accepts(sized_repl, fake_server, home):
    fake_server.script(tool_calls(call("list_todos", {}), call("get_todo", {"todo_id": "todo-002"})),
                       text("plain answer"))
    repl = sized_repl("--step")
    repl.say("stop me")
    pause(repl, BEFORE_CALL)
    repl.child.send("c")
    pause(repl, BEFORE_TOOLS)
    repl.child.send("c")  # the first call would run ...
    pause(repl, "2/2 get_todo:")
    repl.child.send("q")  # ... but q stops the turn: no call runs
    repl.expect("stopped: user")
    repl.ready()
    messages = _then_a_plain_turn(repl, fake_server)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "assistant", "user"]
    assert all(json.loads(m["content"])["error"]["type"] == "skipped_by_user" for m in messages[3:5])
    assert "stopped by the user" in messages[5]["content"]
    assert [s["action"] for s in _user_steps(home)] == ["stopped_by_user"]
    assert len(fake_server.chat_requests()) == 2  # the stopped turn made one model call
    repl.close()


def test_quit_before_the_first_call_and_ctrl_c_at_a_pause(sized_repl, fake_server, home):
    fake_server.script(text("plain answer"))
    repl = sized_repl("--step")
    repl.say("never sent")
    pause(repl, BEFORE_CALL)
    repl.child.send("q")
    repl.expect("stopped: user")
    repl.ready()
    repl.say("interrupted at the pause")
    pause(repl, BEFORE_CALL)
    repl.child.sendintr()
    repl.expect("interrupted")
    repl.ready()
    assert fake_server.chat_requests() == []  # neither question reached the model
    messages = _then_a_plain_turn(repl, fake_server)
    assert messages[1] == {"role": "user", "content": "never sent"}
    assert messages[-1] == {"role": "user", "content": "and now?"}
    repl.close()


def test_step_mode_is_refused_without_a_terminal(home, fake_server):
    ask = subprocess.run([sys.executable, "-m", "repl.cli", "ask", "hi", "--step", "--base-url",
                          fake_server.base_url], env=home, capture_output=True, text=True, timeout=30)
    assert ask.returncode == 2 and "step mode needs a terminal" in ask.stderr
    piped = subprocess.run([sys.executable, "-m", "repl.cli", "--base-url", fake_server.base_url],
                           input="/step on\n", env=home, capture_output=True, text=True, timeout=30)
    assert "step mode needs a terminal" in piped.stdout + piped.stderr
    assert fake_server.chat_requests() == []


def test_view_the_whole_request_exactly_as_it_will_be_sent(sized_repl, fake_server, home, tmp_path):
    import re

    paged = tmp_path / "paged.txt"
    home["PAGER"] = f"sh -c 'cat > {paged}'"  # the request is taller than the screen: paged
    fake_server.script(text("Viewed and sent."))
    repl = sized_repl("--step", rows=24)
    repl.say("what is open?")
    screen = pause(repl, BEFORE_CALL)
    assert "[v]iew whole request" in " ".join(screen.split())
    repl.child.send("v")
    repl.expect(SEND)  # the prompt redrawn with its answer
    repl.expect(SEND)  # asked again once the pager ends
    repl.child.send("c")
    repl.expect("Viewed and sent")
    repl.ready()
    repl.close()
    title, body = re.sub(r"\x1b\[[0-9;]*m", "", paged.read_text(encoding="utf-8")).split("\n", 1)
    assert title == "step 1 · the whole request, as it will be sent"
    assert json.loads(body) == fake_server.chat_requests()[0].body  # nothing cut: the system prompt, every tool
