"""The user's own hooks (``[[hooks.EVENT]]``, repl/session/user_hooks.py): small Python programs
run with this interpreter, against the scripted server, through ``ask``, the piped REPL, ``/retry``
and the REPL in a pseudo-terminal (its approval card)."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from repl.config.load import ConfigError, load_settings
from repl.config.settings import Limits
from repl.loop.agent import run_turn
from repl.loop.approval import ApprovalRequest, Approver, UserChoice
from repl.loop.events import ApprovalDecided, EventLog
from repl.loop.history import History, check
from repl.loop.hooks import Amend, Hooks, TurnView
from repl.providers.base import ToolCall
from tests.fakeserver import FakeServer, call, text, tool_calls
from tests.support import SECRET, alive, chat_here, glassloop, glassloop_here, todos_of

GATE = """
import json, sys
event = json.load(sys.stdin)
if event["tool_name"] == "delete_todo":
    print("todos are never deleted here; complete them instead", file=sys.stderr)
    sys.exit(2)
"""
REPLACE = """
import json, sys
event = json.load(sys.stdin)
print(json.dumps({"arguments": {"todo_id": "todo-003"}}))
"""


def _script(tmp_path: Path, name: str, source: str) -> list[str]:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return [sys.executable, str(path)]


def _hooks(where: Path, *tables: tuple[str, dict[str, Any]], head: str = "") -> Path:
    """A config file (the user's, or a project's) holding ``[[hooks.EVENT]]`` tables."""
    lines = [head] if head else []
    for event, table in tables:
        lines.append(f"[[hooks.{event}]]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in table.items()]
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return where


def _user_config(home: dict[str, str]) -> Path:
    return Path(home["XDG_CONFIG_HOME"]) / "glassloop" / "config.toml"


def _tool_results(server: FakeServer) -> list[dict[str, Any]]:
    """The tool results the model was sent, in order (each request's new ones)."""
    seen: dict[str, dict[str, Any]] = {}
    for request in server.chat_requests():
        for message in request.body["messages"]:
            if message["role"] == "tool":
                seen.setdefault(message["tool_call_id"], json.loads(message["content"]))
    return list(seen.values())


def _delete_then_answer(fake_server: FakeServer, times: int = 1) -> None:
    fake_server.script(
        *[
            reply
            for _ in range(times)
            for reply in (
                tool_calls(call("delete_todo", {"todo_id": "todo-002"})),
                text("It was not deleted."),
            )
        ]
    )


def test_a_pre_tool_use_hook_that_exits_2_refuses_the_call_in_ask(fake_server, home, tmp_path):
    _hooks(
        _user_config(home),
        ("pre_tool_use", {"command": _script(tmp_path, "gate", GATE), "matcher": "delete_*"}),
    )
    _delete_then_answer(fake_server)
    done = glassloop(
        "ask", "delete todo 2", "--yes", "--json", "--base-url", fake_server.base_url, env=home
    )
    assert done.returncode == 0, done.stderr
    assert "todo-002" in [t["id"] for t in todos_of(home)]  # --yes would have let it run
    [result] = _tool_results(fake_server)
    assert result["ok"] is False and result["error"]["type"] == "blocked_by_hook"
    assert "never deleted here; complete them instead" in result["error"]["message"]
    ran = [e for e in json.loads(done.stdout)["trace"] if e["type"] == "hook_ran"]
    assert [(e["event"], e["tool"], e["exit"], e["decision"]) for e in ran] == [
        ("pre_tool_use", "delete_todo", 2, "deny")
    ]
    assert "Traceback" not in done.stderr


def test_the_same_hook_refuses_the_call_in_the_repl_and_on_retry(fake_server, home, tmp_path):
    _hooks(_user_config(home), ("pre_tool_use", {"command": _script(tmp_path, "gate", GATE)}))
    _delete_then_answer(fake_server, times=2)
    done = chat_here(home, fake_server.base_url, ["delete todo 2", "/retry"], "--yes")
    assert done.returncode == 0, done.stderr
    assert "todo-002" in [t["id"] for t in todos_of(home)]
    results = _tool_results(fake_server)
    assert [r["error"]["type"] for r in results] == [
        "blocked_by_hook",
        "blocked_by_hook",
    ]  # the turn, /retry
    shown = " ".join(done.stdout.split())  # the console wraps at 80 columns
    assert shown.count("hook pre_tool_use delete_todo · ") == 2
    reason = "todos are never deleted here; complete them instead"
    assert shown.count(f"exit 2 · blocked: {reason}") == 2
    assert fake_server.history_errors == []


def test_a_message_a_hook_blocks_is_not_sent(fake_server, home, tmp_path):
    refuse = _script(
        tmp_path,
        "refuse",
        """
        import json, sys
        print(json.dumps({"decision": "deny", "reason": "no work after midnight"}))
    """,
    )
    _hooks(_user_config(home), ("user_prompt_submit", {"command": refuse}))
    done = glassloop("ask", "what is open?", "--json", "--base-url", fake_server.base_url, env=home)
    assert done.returncode == 1 and fake_server.chat_requests() == []
    assert json.loads(done.stdout)["error"] == {
        "type": "blocked_by_hook",
        "message": "no work after midnight",
    }
    [line] = [line for line in done.stderr.splitlines() if line.startswith("hook ")]
    assert "blocked: no work after midnight · the message was not sent" in line


def test_arguments_a_hook_replaces_are_shown_in_the_approval_card(
    fake_server, home, tmp_path, repl_factory
):
    """The REPL in a pseudo-terminal: the card shows the hook's todo (todo-003), says whose they
    are, and the person still decides; the result tells the model which arguments were used."""
    _hooks(_user_config(home), ("pre_tool_use", {"command": _script(tmp_path, "swap", REPLACE)}))
    _delete_then_answer(fake_server)
    repl = repl_factory()
    repl.say("delete todo 2")
    card = repl.expect(r"\[n\]o")
    assert "arguments (replaced by your hook" in card and "todo-003" in card
    assert "回复邮件" in card  # todo-003's title: the preview of the replaced arguments
    repl.key("n")
    repl.expect("Reason")
    repl.say("")
    repl.expect("It was not deleted.")
    repl.close()
    [result] = _tool_results(fake_server)
    assert result["error"]["type"] == "denied" and result["arguments_replaced_by_hook"] == {
        "todo_id": "todo-003"
    }
    assert {"todo-002", "todo-003"} <= {t["id"] for t in todos_of(home)}


def test_replaced_arguments_that_do_not_fit_the_tool_refuse_the_call(fake_server, home, tmp_path):
    bad = _script(
        tmp_path, "bad", 'import json; print(json.dumps({"arguments": {"id": "todo-003"}}))'
    )
    _hooks(_user_config(home), ("pre_tool_use", {"command": bad}))
    _delete_then_answer(fake_server)
    done = glassloop("ask", "delete todo 2", "--yes", "--base-url", fake_server.base_url, env=home)
    assert done.returncode == 0, done.stderr
    [result] = _tool_results(fake_server)
    assert (
        result["error"]["type"] == "blocked_by_hook"
        and "do not fit the tool" in result["error"]["message"]
    )
    assert "todo-002" in [t["id"] for t in todos_of(home)]


def test_a_hooks_allow_approves_only_where_the_user_lets_it(fake_server, home, tmp_path):
    allow = _script(tmp_path, "allow", 'import json; print(json.dumps({"decision": "allow"}))')
    _hooks(_user_config(home), ("pre_tool_use", {"command": allow}))
    _delete_then_answer(fake_server, times=2)
    asked = glassloop(
        "ask", "delete todo 2", "--json", "--base-url", fake_server.base_url, env=home
    )
    assert "todo-002" in [
        t["id"] for t in todos_of(home)
    ]  # nobody to ask, and the hook may not approve
    assert "approval rules still apply" in asked.stderr
    _hooks(
        _user_config(home), ("pre_tool_use", {"command": allow}), head="[hooks]\nmay_approve = true"
    )
    done = glassloop("ask", "delete todo 2", "--json", "--base-url", fake_server.base_url, env=home)
    assert done.returncode == 0, done.stderr
    assert "todo-002" not in [t["id"] for t in todos_of(home)]
    decided = [e for e in json.loads(done.stdout)["trace"] if e["type"] == "approval_decided"]
    assert [(e["allowed"], e["by"]) for e in decided] == [(True, "hook")]


def test_a_hook_past_its_timeout_is_killed_with_what_it_started_and_the_turn_goes_on(
    fake_server, home, tmp_path
):
    pids = tmp_path / "pids"
    slow = _script(
        tmp_path,
        "slow",
        f"""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pids)!r}, "w").write(f"{{os.getpid()}} {{child.pid}}")
        time.sleep(60)
    """,
    )
    _hooks(_user_config(home), ("pre_tool_use", {"command": slow, "timeout_s": 1}))
    fake_server.script(tool_calls(call("list_todos", {})), text("Three are open."))
    done = glassloop("ask", "what is open?", "--json", "--base-url", fake_server.base_url, env=home)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["answer"] == "Three are open."
    [result] = _tool_results(fake_server)
    assert result["ok"] is True  # the call ran: a hook that hangs does not hold the turn
    [ran] = [e for e in seen["trace"] if e["type"] == "hook_ran"]
    assert (ran["decision"], ran["exit"]) == ("timeout", None)
    [line] = [line for line in done.stderr.splitlines() if line.startswith("hook pre_tool_use")]
    assert "did not finish within 1 s: killed with its process group (the turn goes on)" in line
    hook_pid, child_pid = map(int, pids.read_text().split())
    deadline = time.monotonic() + 5
    while (alive(hook_pid) or alive(child_pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(hook_pid) and not alive(child_pid)


def test_a_hook_that_fails_or_prints_garbage_is_one_line_each(fake_server, home, tmp_path):
    _hooks(
        _user_config(home),
        ("pre_tool_use", {"command": _script(tmp_path, "garbage", 'print("<<not json>>")')}),
        (
            "pre_tool_use",
            {"command": _script(tmp_path, "crash", "raise SystemExit('broken hook')")},
        ),
        ("post_tool_use", {"command": [str(tmp_path / "no-such-program")]}),
    )
    fake_server.script(tool_calls(call("list_todos", {})), text("Three are open."))
    done = glassloop("ask", "what is open?", "--base-url", fake_server.base_url, env=home)
    assert done.returncode == 0 and done.stdout.strip() == "Three are open.", done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("hook ")]
    assert len(lines) == 3
    assert "failed: its output is not a JSON object (<<not json>>): ignored" in lines[0]
    assert "failed: exit status 1: broken hook" in lines[1]
    assert "failed: could not start: No such file or directory" in lines[2]
    assert all(line.endswith("ms") and "(the turn goes on)" in line for line in lines)
    assert _tool_results(fake_server)[0]["ok"] is True
    assert "Traceback" not in done.stderr


def test_a_hook_reads_the_event_and_gets_no_api_key(fake_server, home, tmp_path):
    seen = tmp_path / "seen.jsonl"
    record = _script(
        tmp_path,
        "record",
        f"""
        import json, os, sys
        with open({str(seen)!r}, "a") as out:
            run = {{"input": json.load(sys.stdin), "env": dict(os.environ)}}
            out.write(json.dumps(run) + "\\n")
    """,
    )
    _hooks(
        _user_config(home),
        *(
            (event, {"command": record})
            for event in (
                "session_start",
                "user_prompt_submit",
                "pre_tool_use",
                "post_tool_use",
                "stop",
            )
        ),
    )
    fake_server.script(
        tool_calls(call("get_todo", {"todo_id": "todo-002"})), text("It is the report.")
    )
    env = {**home, "MY_SERVICE_TOKEN": "tok-123456789", "PLAIN_SETTING": "kept"}
    done = glassloop(
        "ask", "what is todo 2?", "--base-url", fake_server.base_url, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    runs = [json.loads(line) for line in seen.read_text(encoding="utf-8").splitlines()]
    events = [run["input"] for run in runs]
    assert [e["event"] for e in events] == [
        "session_start",
        "user_prompt_submit",
        "pre_tool_use",
        "post_tool_use",
        "stop",
    ]
    assert len({e["session_id"] for e in events}) == 1 and {e["turn"] for e in events} == {1}
    assert {e["cwd"] for e in events} == {str(tmp_path)}
    assert events[1]["prompt"] == "what is todo 2?"
    assert (events[2]["tool_name"], events[2]["arguments"]) == ("get_todo", {"todo_id": "todo-002"})
    assert events[3]["result"]["ok"] is True and events[3]["result"]["todo"]["id"] == "todo-002"
    assert (events[4]["stopped_by"], events[4]["answer"]) == ("answer", "It is the report.")
    for run in runs:
        assert "OPENAI_API_KEY" not in run["env"] and "MY_SERVICE_TOKEN" not in run["env"]
        assert not any(SECRET in value for value in run["env"].values())
        assert run["env"]["PLAIN_SETTING"] == "kept"


def test_a_project_hook_runs_only_once_its_file_is_trusted(fake_server, home, tmp_path):
    project = tmp_path / "project"
    marker = tmp_path / "ran"
    touch = _script(tmp_path, "touch", f"open({str(marker)!r}, 'a').write('ran\\n')")
    _hooks(project / "glassloop.toml", ("session_start", {"command": touch}))
    fake_server.script(text("hello"), text("hello"))
    first = glassloop("ask", "hi", "--base-url", fake_server.base_url, env=home, cwd=project)
    assert first.returncode == 0, first.stderr
    assert not marker.exists()
    assert "is not trusted: ignoring hooks.session_start" in first.stderr
    trusted = glassloop("trust", env=home, cwd=project)
    assert trusted.returncode == 0 and "hooks.session_start: runs" in trusted.stdout, trusted.stderr
    second = glassloop("ask", "hi", "--base-url", fake_server.base_url, env=home, cwd=project)
    assert second.returncode == 0, second.stderr
    assert marker.read_text() == "ran\n"


def test_a_hook_is_declared_as_an_argv_list_within_bounds(tmp_path):
    def load(body: str) -> str:
        (tmp_path / "glassloop.toml").write_text(body, encoding="utf-8")
        with pytest.raises(ConfigError) as refused:
            load_settings(cwd=tmp_path, env={}, config_file=tmp_path / "glassloop.toml")
        return str(refused.value)

    assert load('[[hooks.stop]]\ncommand = "rm -rf ~"\n').endswith(
        'hooks.stop[0].command: expected a list of strings, got "rm -rf ~"'
    )
    assert load("[[hooks.stop]]\ncommand = []\n").endswith(
        "hooks.stop[0].command: expected a list of strings, got an empty one"
    )
    assert "hooks.stop[0].matcher: unknown key (expected one of command, timeout_s)" in load(
        '[[hooks.stop]]\ncommand = ["x"]\nmatcher = "*"\n'
    )
    assert load('[[hooks.pre_tool_use]]\ncommand = ["x"]\ntimeout_s = 3600\n').endswith(
        "hooks.pre_tool_use[0].timeout_s: expected a number <= 600, got 3600"
    )


def test_hooks_of_several_files_add_up(tmp_path, home):
    user = _hooks(_user_config(home), ("stop", {"command": ["a"]}))
    extra = _hooks(
        tmp_path / "extra.toml", ("stop", {"command": ["b"]}), ("stop", {"command": ["a"]})
    )
    shown = glassloop_here("config", "--config", str(extra), env={**home, "COLUMNS": "300"})
    assert shown.returncode == 0, shown.stderr
    row = next(line for line in shown.stdout.splitlines() if line.startswith("hooks.stop"))
    assert "a (10 s); b (10 s)" in row  # the user's first, then --config's; the same command once
    assert row.rstrip().endswith(f"{user} + {extra}")


class _Swap(Hooks):
    """A loop hook as the user's hooks are one: todo-003 instead of the model's todo."""

    def __init__(self, approved: bool) -> None:
        self.approved = approved

    def before_tool_call(self, turn: TurnView, call: ToolCall, side_effects: bool) -> Amend | None:
        return Amend("swap.py", {"todo_id": "todo-003"}, self.approved) if side_effects else None


class _Asker:
    def __init__(self) -> None:
        self.asked: list[ApprovalRequest] = []

    def ask(self, request: ApprovalRequest, validate: Any) -> UserChoice:
        self.asked.append(request)
        return UserChoice("yes")


@pytest.mark.parametrize("approved", [False, True])
def test_the_loop_runs_the_arguments_a_hook_put_in_and_asks_unless_it_may_approve(
    scripted, registry, todos_file, approved
):
    scripted.script(tool_calls(call("delete_todo", {"todo_id": "todo-002"})), text("Done."))
    asker, log, history = _Asker(), EventLog(), History("system")
    run_turn(
        history,
        "delete todo 2",
        provider=scripted,
        registry=registry,
        approver=Approver("ask", asker),
        limits=Limits(),
        emit=log,
        hooks=(_Swap(approved),),
    )
    assert check(history.messages) == []
    left = [t["id"] for t in json.loads(todos_file.read_text(encoding="utf-8"))["todos"]]
    assert "todo-002" in left and "todo-003" not in left
    result = json.loads(history.messages[2]["content"])
    assert result["ok"] is True and result["arguments_replaced_by_hook"] == {"todo_id": "todo-003"}
    [decided] = log.of(ApprovalDecided)
    if approved:  # the person is not asked: the hook approved (the user's config let it)
        assert asker.asked == [] and decided.by == "hook"
    else:
        [request] = asker.asked
        assert (request.arguments, request.amended_by, decided.by) == (
            {"todo_id": "todo-003"},
            "swap.py",
            "user",
        )
