"""The user's own hooks: programs from the configuration, run at points of the loop.

``[[hooks.EVENT]]`` (``HookSettings`` in ``repl/config/settings.py``; docs/HOOKS.md) names a
program as an argv list. At its event it gets one JSON object on standard input (the event,
the session, the turn, the working folder; the tool call and its result, the message or the
answer where there is one) and answers by its exit status and, optionally, one JSON object on
standard output:

- exit 0 goes on; exit 2 blocks: a ``pre_tool_use`` call is refused with a ``blocked_by_hook``
  result carrying the hook's reason (its JSON ``reason``, else its stderr), a
  ``user_prompt_submit`` message is not sent; any other status is a failure: one line, and the
  turn goes on, as for a hook that cannot start, prints what is not an answer, or overruns;
- ``{"decision": "allow" | "deny", "reason": ..., "arguments": {...}}``: ``deny`` blocks as exit 2
  does; ``arguments`` (``pre_tool_use``) replace the model's, checked against the tool's schema
  (arguments that do not fit refuse the call) and shown at the approval; ``allow`` approves a
  side effect the approval rules would ask about only with ``[hooks] may_approve``.

A hook runs in its own process group, in the working folder, with the environment minus every
API key and every value the redactor knows as secret, and is killed with its group at its
``timeout_s``; what it reads is redacted too. It plugs into the loop's hook points
(``before_tool_call``, ``after_tool_call``) and the session core (a message, a turn's end, a
session's first turn), so every door runs it alike; a dry run runs none. Each run is a
``HookRan`` event: a dim line, a trace record.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import IO, Any

from repl.config.redact import Redactor, redactor_for
from repl.config.settings import HookCommand, HookEvent, HookSettings, Settings, ToolHookCommand
from repl.loop.events import Emit, HookDecision, HookRan, TurnFinished
from repl.loop.hooks import Amend, Hooks, Instead, TurnView, display_args
from repl.loop.unicode import json_dumps, valid_text
from repl.providers.base import ToolCall
from tools.results import ToolResult, error_of, error_result

BLOCKED = "blocked_by_hook"  # the error type of a call a hook refused
BLOCKING: frozenset[HookEvent] = frozenset({"user_prompt_submit", "pre_tool_use"})
OUT_LIMIT, ERR_LIMIT = (
    64 * 1024,
    8 * 1024,
)  # bytes of a hook's output kept; the rest is read and dropped
REASON_CHARS = 300
# Variables whose name says they hold a secret (OPENAI_API_KEY, GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY)
SECRET_VARIABLE = re.compile(
    r"(?i)(?:^|_)(?:API_?KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIALS?)(?:_|$)"
)


# ---- one run of a command -----------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    """How one run ended: its exit status (None: it did not start, or was killed), what it wrote
    (bounded), and why it did not finish (``failed``; ``timed_out``: killed at its time)."""

    exit: int | None
    out: bytes = b""
    err: bytes = b""
    failed: str = ""
    timed_out: bool = False


class _Drain(threading.Thread):
    """Reads a pipe to its end, keeping the first ``limit`` bytes: a hook never blocks on a
    full pipe."""

    def __init__(self, pipe: IO[bytes], limit: int) -> None:
        super().__init__(daemon=True, name="glassloop-hook-output")
        self.pipe, self.limit, self.kept = pipe, limit, bytearray()
        self.start()

    def run(self) -> None:
        try:
            while chunk := os.read(self.pipe.fileno(), 65536):
                if len(self.kept) < self.limit:
                    self.kept += chunk[: self.limit - len(self.kept)]
        except OSError:
            pass
        finally:
            self.pipe.close()

    def read(self, timeout: float) -> bytes:
        self.join(timeout)
        return bytes(self.kept)


def _feed(pipe: IO[bytes], data: bytes) -> None:
    """The input, written on a thread of its own: a hook that reads none does not hold us up."""
    try:
        pipe.write(data)
        pipe.close()
    except OSError:  # it exited without reading all of it
        pass


def _kill(process: subprocess.Popen[bytes]) -> None:
    """The hook and every process it started in its group, at once."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def run_command(
    argv: list[str], stdin: bytes, env: dict[str, str], cwd: str, timeout_s: float
) -> Ran:
    """``argv`` run with ``stdin`` in a process group of its own, killed with the group at
    ``timeout_s`` (or on Ctrl-C, which is raised again)."""
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return Ran(None, failed=f"could not start: {why}")
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    out, err = _Drain(process.stdout, OUT_LIMIT), _Drain(process.stderr, ERR_LIMIT)
    threading.Thread(
        target=_feed, args=(process.stdin, stdin), daemon=True, name="glassloop-hook-input"
    ).start()
    until = time.monotonic() + timeout_s
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill(process)
        return Ran(
            None,
            out.read(1.0),
            err.read(1.0),
            f"did not finish within {timeout_s:g} s: killed with its process group",
            timed_out=True,
        )
    except BaseException:
        _kill(process)
        raise
    for drain in (out, err):  # a process it left behind may hold its output open
        drain.join(max(until - time.monotonic(), 0.0))
    if out.is_alive() or err.is_alive():
        _kill(process)
    return Ran(process.returncode, out.read(1.0), err.read(1.0))


# ---- what a run said --------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """What one run of a hook decided: ``detail`` is its reason, or why it failed."""

    decision: HookDecision
    detail: str = ""
    arguments: dict[str, Any] | None = None


def _text(raw: bytes) -> str:
    """Output as one line of text, clipped."""
    text = " ".join(valid_text(raw.decode("utf-8", errors="replace")).split())
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def _reply(out: bytes) -> tuple[dict[str, Any], str]:
    """The JSON answer on stdout (``{}`` when it printed nothing), or why it is not one."""
    if not out.strip():
        return {}, ""
    try:
        reply = json.loads(out.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        reply = None
    if not isinstance(reply, dict):
        return {}, f"its output is not a JSON object ({_text(out)[:60]}): ignored"
    if reply.get("decision") not in (None, "allow", "deny"):
        return (
            {},
            f'"decision" is {json.dumps(reply["decision"])[:40]}, not "allow" or "deny": ignored',
        )
    if not isinstance(reply.get("arguments", {}), dict):
        return {}, '"arguments" is not a JSON object: ignored'
    return reply, ""


def answer_of(ran: Ran) -> Answer:
    """Exit 0 goes on (its JSON may decide), exit 2 blocks, anything else failed (the turn goes
    on)."""
    if ran.failed or ran.exit is None:
        return Answer("timeout" if ran.timed_out else "failed", ran.failed)
    said = _text(ran.err)
    if ran.exit not in (0, 2):
        why = f"killed by signal {-ran.exit}" if ran.exit < 0 else f"exit status {ran.exit}"
        return Answer("failed", f"{why}: {said}" if said else why)
    reply, problem = _reply(ran.out)
    reason = _text(str(reply.get("reason", "")).encode())
    if ran.exit == 2 or reply.get("decision") == "deny":
        return Answer("deny", reason or said or "no reason given")
    if problem:
        return Answer("failed", problem)
    return Answer(
        "allow" if reply.get("decision") == "allow" else "continue", reason, reply.get("arguments")
    )


@dataclass(frozen=True)
class Verdict:
    """The hooks of one event, all run: the reason the first that blocked gave (None: none
    did), the arguments the last replacing hook gave, whether one allowed, and ``by``: the
    command that blocked or last replaced."""

    blocked: str | None = None
    arguments: dict[str, Any] | None = None
    allowed: bool = False
    by: str = ""


# ---- the hooks of a session --------------------------------------------------------------


def hook_environment(settings: Settings) -> dict[str, str]:
    """This process's environment without the configured key variables, any variable named as a
    secret, and any value the redactor would blank."""
    redact = redactor_for(settings)
    keys = {p.api_key_env for p in settings.providers.values() if p.api_key_env}
    return {
        name: value
        for name, value in os.environ.items()
        if name not in keys and not SECRET_VARIABLE.search(name) and redact(value) == value
    }


def user_hooks(settings: Settings, session_id: str, emit: Emit) -> UserHooks | None:
    """The session's hooks, None when the configuration has none."""
    config = settings.hooks
    if not config.configured():
        return None
    try:
        cwd = os.getcwd()
    except OSError:  # the folder was removed under us
        cwd = str(settings.files_root)
    return UserHooks(
        config, session_id, emit, hook_environment(settings), redactor_for(settings), cwd
    )


@dataclass
class UserHooks(Hooks):
    """The user's hooks of one session: at the loop's points (``pre_tool_use``, ``post_tool_use``)
    and the session core's (``prompt_submitted``, ``turn_stopped``, ``session_started``)."""

    config: HookSettings
    session_id: str
    emit: Emit
    env: dict[str, str]
    redact: Redactor
    cwd: str

    def commands(self, event: HookEvent, tool: str = "") -> list[HookCommand]:
        return [
            c
            for c in self.config.of(event)
            if not (isinstance(c, ToolHookCommand) and c.matcher) or fnmatchcase(tool, c.matcher)
        ]

    def run(
        self,
        event: HookEvent,
        turn: int,
        fields: dict[str, Any],
        tool: str = "",
        check: Callable[[dict[str, Any]], str | None] | None = None,
    ) -> Verdict:
        """Each command of ``event`` (for ``tool``) in order, until one blocks; a later one reads
        the arguments an earlier one put in (``check`` says why new arguments do not fit)."""
        verdict = Verdict()
        for command in self.commands(event, tool):
            payload = {
                "event": event,
                "session_id": self.session_id,
                "turn": turn,
                "cwd": self.cwd,
                **fields,
            }
            if verdict.arguments is not None:
                payload["arguments"] = verdict.arguments
            started = time.monotonic()
            ran = run_command(
                command.command,
                json_dumps(self.redact.value(payload), ensure_ascii=False).encode(),
                self.env,
                self.cwd,
                command.timeout_s,
            )
            answer = _checked(answer_of(ran), check)
            self.emit(
                HookRan(
                    event,
                    command.said(),
                    ran.exit,
                    answer.decision,
                    round(time.monotonic() - started, 3),
                    self.redact(self._detail(event, answer, fields)),
                    tool,
                )
            )
            verdict = _then(verdict, event, answer, command.said())
            if verdict.blocked is not None:
                break
        return verdict

    def _detail(self, event: HookEvent, answer: Answer, fields: dict[str, Any]) -> str:
        """What a hook's answer came to at ``event``, in words for its line."""
        notes = [answer.detail] if answer.detail else []
        if answer.decision == "deny" and event not in BLOCKING:
            notes.append(f"a {event} hook cannot block: recorded only")
        elif answer.decision == "deny" and event == "user_prompt_submit":
            notes.append("the message was not sent")
        if answer.arguments is not None:
            replaced = json_dumps(answer.arguments, ensure_ascii=False)
            notes.append(f"arguments replaced: {_text(replaced.encode())}")
        if (
            answer.decision == "allow"
            and fields.get("side_effects")
            and not self.config.may_approve
        ):
            notes.append("approval rules still apply ([hooks] may_approve = false)")
        return " · ".join(notes)

    # ---- the loop's points ----------------------------------------------------------------
    def before_tool_call(
        self, turn: TurnView, call: ToolCall, side_effects: bool
    ) -> Instead | Amend | None:
        if not self.commands("pre_tool_use", call.name):
            return None

        def check(arguments: dict[str, Any]) -> str | None:
            failure = turn.registry.parse_arguments(call.name, arguments)[1]
            return None if failure is None else (error_of(failure) or ("", "invalid"))[1]

        fields = {
            "tool_name": call.name,
            "call_id": call.id,
            "arguments": display_args(call.arguments),
            "side_effects": side_effects,
        }
        verdict = self.run("pre_tool_use", turn.number, fields, call.name, check)
        if verdict.blocked is not None:
            return Instead(
                error_result(
                    BLOCKED, f"{call.name} was refused by the user's hook: {verdict.blocked}"
                )
            )
        if verdict.arguments is None and not verdict.allowed:
            return None
        return Amend(verdict.by, verdict.arguments, verdict.allowed and self.config.may_approve)

    def after_tool_call(
        self,
        turn: TurnView,
        call: ToolCall,
        result: ToolResult,
        *,
        side_effects: bool,
        ran_with: str,
    ) -> None:
        if self.commands("post_tool_use", call.name):
            self.run(
                "post_tool_use",
                turn.number,
                {
                    "tool_name": call.name,
                    "call_id": call.id,
                    "arguments": display_args(ran_with),
                    "side_effects": side_effects,
                    "ok": result.get("ok") is True,
                    "result": result,
                },
                call.name,
            )

    # ---- the session's points ---------------------------------------------------------------
    def session_started(self, turn: int) -> None:
        self.run("session_start", turn, {})

    def prompt_submitted(self, turn: int, text: str) -> str | None:
        """The reason a hook gave for not sending ``text``, or None: it goes."""
        return self.run("user_prompt_submit", turn, {"prompt": text}).blocked

    def turn_stopped(self, finished: TurnFinished) -> None:
        self.run(
            "stop",
            finished.turn,
            {
                "stopped_by": finished.stopped_by,
                "answer": finished.answer,
                "steps": finished.steps,
                "tool_calls": finished.tool_calls,
            },
        )


def _checked(answer: Answer, check: Callable[[dict[str, Any]], str | None] | None) -> Answer:
    """Arguments a hook put in, checked against the tool (``check``): ones that do not fit refuse
    the call; at an event without arguments to replace (no ``check``) they are dropped."""
    if answer.arguments is None or answer.decision == "deny" or check is None:
        return replace(answer, arguments=None)
    problem = check(answer.arguments)
    return Answer("deny", f"its arguments do not fit the tool: {problem}") if problem else answer


def _then(verdict: Verdict, event: HookEvent, answer: Answer, by: str) -> Verdict:
    """The verdict so far, with one more hook's answer."""
    if answer.decision == "deny" and event in BLOCKING:
        return replace(verdict, blocked=answer.detail, by=by)
    if answer.arguments is not None:
        verdict = replace(verdict, arguments=answer.arguments, by=by)
    return replace(verdict, allowed=True) if answer.decision == "allow" else verdict
