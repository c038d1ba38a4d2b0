"""``glassloop eval``: does the model pick your tool? A case file run on one or more models.

A case file (TOML) lists ``[[case]]`` tables, each a message and what must happen: the first
tool the model calls (``""``: it answers without one), its arguments (equal, containing,
matching), what that call's result and the answer must contain. Each case runs as a
session's turn runs, through the session core: the tools of a session (built in, the user's
own, a trusted project's, MCP servers'), as a dry run (``/compare``'s: side effects denied, a
tool not glassloop's own runs only when named with ``--call``), no journal, no trace, a fresh
history per case. Per model the registry, the MCP servers and the provider are built once and
shared by the cases, so an embedded model's one server process (and its saved prompt state)
serves them all; ``-j N`` runs N cases at once against a server, each its own session core.
A case file is read by the rules of a folder's files (``tools.folder_files``: a regular file,
at most ``CASES_CAP_BYTES``) and nests at most ``MAX_DEPTH`` levels.

The built-in evaluation (``python -m bench tool_use``) is a case file run by this module.
"""

from __future__ import annotations

import json
import queue
import re
import statistics
import sys
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from repl.config.load import Settings
from repl.config.redact import Redactor, redactor_for
from repl.loop.events import (
    ErrorEvent,
    Event,
    EventLog,
    ModelUsage,
    Notice,
    Routed,
    ToolCallFinished,
    TurnFinished,
    WireRecord,
)
from repl.providers.base import Provider, ProviderError
from repl.session.core import Door, SessionCore
from repl.session.runtime import wait_for_mcp
from repl.trials.compare import Quiet
from repl.ui.escape import clean, json_display, one_line
from repl.ui.plain import Unattended
from tools.folder_files import Refused, read_folder_file

if TYPE_CHECKING:
    from tools.registry import Registry

# The model's parts (registry, MCP servers, provider) are built once per model: this core
# waits for the user's tools and the servers, the cases' cores share what it built.
EVAL = Door("eval", journal=False, trace=False, warm=True, dry_run=True, user_tools_wait_s=0)
USER_TOOLS_WAIT_S = 30.0
CASES_CAP_BYTES = 4 * 1024 * 1024  # a case file larger than this is refused
MAX_DEPTH = 32  # arrays and tables nested deeper: refused before tomllib (which recurses) reads it
KEYS = ("id", "message", "tool", "args", "args_contain", "args_match", "result_contains", "answer_contains", "lang")


class CaseFileError(Exception):
    """A case file that cannot be read or holds a mistake: one line naming the file and the case."""


@dataclass(frozen=True)
class Case:
    number: int  # its place in the file, from 1
    message: str
    tools: tuple[str, ...]  # the first call must be to one of these; (): answered without a tool
    args: dict[str, Any] = field(default_factory=dict)  # each argument equals this value
    args_contain: dict[str, tuple[str, ...]] = field(default_factory=dict)  # ... holds one of these texts
    args_match: dict[str, str] = field(default_factory=dict)  # ... matches this regular expression
    result_contains: tuple[str, ...] = ()  # the first call's result holds one of these texts
    answer_contains: tuple[str, ...] = ()  # the answer holds one of these texts
    lang: str = ""
    id: str = ""

    @property
    def name(self) -> str:
        return self.id or f"#{self.number}"

    @property
    def checks_args(self) -> bool:
        return bool(self.args or self.args_contain or self.args_match or self.result_contains)


def load_cases(path: Path) -> list[Case]:
    """The cases of a TOML file; CaseFileError (one line) for anything wrong in it."""
    try:
        found = read_folder_file(path, CASES_CAP_BYTES)
    except Refused as exc:
        raise CaseFileError(exc.message) from None
    if found is None:
        raise CaseFileError(f"cannot read {path}: no such file")
    try:
        text = found.data.decode("utf-8")
        if bracket_depth(text, MAX_DEPTH) > MAX_DEPTH:  # tomllib recurses once per level
            raise CaseFileError(f"{path} not read: its arrays or inline tables nest deeper than "
                                f"{MAX_DEPTH} levels")
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CaseFileError(f"{path}: not valid TOML: {exc}") from None
    if _deeper_than(data, MAX_DEPTH):  # dotted keys nest without a bracket: a.b.c = 1
        raise CaseFileError(f"{path} not read: its tables nest deeper than {MAX_DEPTH} levels")
    tables = data.get("case")
    extra = sorted(set(data) - {"case"})
    if extra:
        raise CaseFileError(f"{path}: unknown key {extra[0]!r} (the cases are [[case]] tables)")
    if not isinstance(tables, list) or not tables:
        raise CaseFileError(f"{path}: no cases (write one [[case]] table per message)")
    return [_case(path, number, table) for number, table in enumerate(tables, 1)]


# what a bracket or brace does outside a string: the quotes that open one, or a comment
_TOKEN = re.compile(r"\"\"\"|'''|[\"'#\[\]{}]")
_STRING_END = {  # from just after the opening quotes to just after the closing ones
    '"': re.compile(r'(?:[^"\\\n]|\\.)*(?:"|\n|\Z)'),
    "'": re.compile(r"[^'\n]*(?:'|\n|\Z)"),
    '"""': re.compile(r'(?:[^"\\]|\\.|"(?!""))*(?:"""|\Z)', re.DOTALL),
    "'''": re.compile(r".*?(?:'''|\Z)", re.DOTALL),
}


def bracket_depth(text: str, limit: int) -> int:
    """How deep TOML ``text`` nests arrays and inline tables (brackets and braces outside strings
    and comments), counted up to ``limit + 1``: a table header counts as it opens and closes."""
    depth = deepest = at = 0
    while deepest <= limit and (found := _TOKEN.search(text, at)):
        token, at = found.group(), found.end()
        if token in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in ("]", "}"):
            depth = max(0, depth - 1)
        elif token == "#":
            line_end = text.find("\n", at)
            at = len(text) if line_end < 0 else line_end
        else:
            end = _STRING_END[token].match(text, at)
            at = end.end() if end else len(text)
    return deepest


def _deeper_than(value: Any, limit: int) -> bool:
    """``value`` (parsed TOML) nests tables and arrays more than ``limit`` levels."""
    if not isinstance(value, (dict, list)):
        return False
    if limit <= 0:
        return True
    items = value.values() if isinstance(value, dict) else value
    return any(_deeper_than(item, limit - 1) for item in items)


def _case(path: Path, number: int, table: Any) -> Case:
    def wrong(what: str) -> CaseFileError:
        return CaseFileError(f"{path}: case {number}: {what}")

    if not isinstance(table, dict):
        raise wrong("expected a table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise wrong(f"unknown key {unknown[0]!r} (expected {', '.join(KEYS)})")
    message = table.get("message")
    if not isinstance(message, str) or not message.strip():
        raise wrong("'message' must be a text that is not empty")
    if "tool" not in table:
        raise wrong("'tool' is missing (the tool the model must call first; \"\" to answer without one)")
    tool = table["tool"]
    names = [tool] if isinstance(tool, str) else tool
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or not names:
        raise wrong("'tool' must be a tool's name, a list of names, or \"\"")
    tools = tuple(n for n in names if n)
    if len(tools) != len(names) and len(names) > 1:
        raise wrong("'tool' lists \"\" among names")

    def texts(key: str, value: Any) -> tuple[str, ...]:
        found = [value] if isinstance(value, str) else value
        if not isinstance(found, list) or not found or not all(isinstance(t, str) and t for t in found):
            raise wrong(f"{key!r} must be a text or a list of texts")
        return tuple(found)

    def table_of(key: str) -> dict[str, Any]:
        value = table.get(key, {})
        if not isinstance(value, dict):
            raise wrong(f"{key!r} must be a table: {{ argument = ... }}")
        if value and not tools:
            raise wrong(f"{key!r} checks a call's arguments, but 'tool' is \"\"")
        return value

    args = table_of("args")
    contain = {k: texts(f"args_contain.{k}", v) for k, v in table_of("args_contain").items()}
    match = table_of("args_match")
    for key, pattern in match.items():
        if not isinstance(pattern, str):
            raise wrong(f"'args_match.{key}' must be a regular expression (a text)")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise wrong(f"'args_match.{key}' is not a regular expression: {exc}") from None
    result = texts("result_contains", table["result_contains"]) if "result_contains" in table else ()
    if result and not tools:
        raise wrong("'result_contains' checks a call's result, but 'tool' is \"\"")
    answer = texts("answer_contains", table["answer_contains"]) if "answer_contains" in table else ()
    for key in ("lang", "id"):
        if not isinstance(table.get(key, ""), str):
            raise wrong(f"{key!r} must be a text")
    return Case(number, message, tools, args, contain, match, result, answer,
                table.get("lang", ""), table.get("id", ""))


# ------------------------------------------------------------------ one case


@dataclass
class Outcome:
    """What one model did with one case, and how it fared."""

    case: Case
    model: str
    calls: list[dict[str, Any]]  # every call of the turn as the model wrote it: step, name, arguments, valid
    answer: str = ""
    right_tool: bool = False
    valid_args: bool | None = None  # the first call's arguments, as written, valid for its schema; None: no call
    args_ok: bool | None = None  # the argument checks (and result_contains); None: the case has none
    answer_ok: bool | None = None  # answer_contains; None: the case has none
    error: str = ""  # the provider's error that ended the turn
    seconds: float = 0.0
    first_step_s: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    steps: int = 0
    stopped_by: str = ""
    routing: dict[str, Any] | None = None  # how the first call's tools were chosen; None: no router

    @property
    def ok(self) -> bool:
        return (self.right_tool and not self.error and self.valid_args is not False
                and self.args_ok is not False and self.answer_ok is not False)

    def as_json(self) -> dict[str, Any]:
        return {"id": self.case.name, "message": self.case.message, "lang": self.case.lang, "model": self.model,
                "expected": list(self.case.tools), "called": [c["name"] for c in self.calls], "ok": self.ok,
                "right_tool": self.right_tool, "valid_args": self.valid_args, "args_ok": self.args_ok,
                "answer_ok": self.answer_ok, "calls": self.calls, "answer": self.answer, "error": self.error,
                "seconds": round(self.seconds, 3), "first_step_s": self.first_step_s,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "steps": self.steps,
                "stopped_by": self.stopped_by, "routing": self.routing}


def judge(case: Case, model: str, log: EventLog, finished: TurnFinished | None, failure: str,
          schemas: dict[str, dict[str, Any]], seconds: float) -> Outcome:
    """The case's checks over what the turn did (its wire records and tool results)."""
    from tools.validation import validator_for

    def valid(name: str, raw: str) -> bool:
        args = _strict_json(raw)
        return name in schemas and isinstance(args, dict) and validator_for(schemas[name]).is_valid(args)

    written = [(e.step, c) for e in log.of(WireRecord) if e.kind == "response" and isinstance(e.body, dict)
               for c in e.body.get("tool_calls") or []]
    calls = [{"step": step, "name": c.get("name", ""), "arguments": c.get("arguments", ""),
              "valid": valid(c.get("name", ""), c.get("arguments", ""))} for step, c in written]
    usage = log.of(ModelUsage)
    out = Outcome(case, model, calls, seconds=seconds,
                  first_step_s=round(usage[0].latency_s, 3) if usage else None,
                  input_tokens=sum(u.usage.input_tokens for u in usage),
                  output_tokens=sum(u.usage.output_tokens for u in usage))
    errors = log.of(ErrorEvent)
    out.error = failure or (errors[-1].message if errors else "")
    if finished is not None:
        out.answer, out.steps, out.stopped_by = finished.answer, finished.steps, finished.stopped_by
    first = calls[0] if calls else None
    if first is None:
        out.right_tool = not case.tools and bool(out.answer.strip())
    else:
        out.right_tool = first["name"] in case.tools
        out.valid_args = first["valid"]
    if case.checks_args:
        results = {f.call_id: f.result for f in log.of(ToolCallFinished)}
        result = results.get(written[0][1].get("id", ""), "") if written else ""
        out.args_ok = first is not None and out.right_tool and _args_pass(case, first["arguments"]) and (
            not case.result_contains or _holds(_text(result), case.result_contains))
    if case.answer_contains:
        out.answer_ok = _holds(out.answer, case.answer_contains)
    if routed := log.of(Routed):
        out.routing = _routing(routed[0], case, first["name"] if first else "none", out.right_tool)
    return out


def _routing(routed: Routed, case: Case, chosen: str, right: bool) -> dict[str, Any]:
    """The router's decision for the first call; for a wrong first call the margin: the chosen's
    score minus the expected tool's ("none" for no call), "not scored" when either is not among
    the scores, "words" when the tools' words decided without scores."""
    top = [[name, round(score, 4)] for name, score in routed.top[:3]]
    margin: float | str | None = None
    if not right:
        scores = dict(routed.top)
        expected = [scores[t] for t in case.tools or ("none",) if t in scores]
        margin = ("words" if not scores else "not scored" if not expected or chosen not in scores
                  else round(scores[chosen] - max(expected), 4))
    return {"by": routed.by, "top": top, "threshold": round(routed.threshold, 4), "margin": margin}


def _strict_json(raw: Any) -> Any:
    """The arguments as written: strict JSON (no repair), None when they are not."""
    try:
        return json.loads(raw or "{}") if isinstance(raw, str) else None
    except ValueError:
        return None


def _args_pass(case: Case, raw: str) -> bool:
    args = _strict_json(raw)
    if not isinstance(args, dict):
        return False
    if any(key not in args or not _same(value, args[key]) for key, value in case.args.items()):
        return False
    if any(key not in args or not _holds(_text(args[key]), words) for key, words in case.args_contain.items()):
        return False
    return all(key in args and re.search(pattern, _text(args[key])) for key, pattern in case.args_match.items())


def _same(expected: Any, got: Any) -> bool:
    """Equal; numbers by value (3 equals 3.0), never a bool for a number."""
    numbers = (int, float)
    if isinstance(expected, numbers) and isinstance(got, numbers) and not isinstance(expected, bool) \
            and not isinstance(got, bool):
        return float(expected) == float(got)
    return bool(expected == got)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _holds(text: str, words: tuple[str, ...]) -> bool:
    """``text`` holds one of ``words``, ignoring case."""
    folded = text.casefold()
    return any(word.casefold() in folded for word in words)


# ------------------------------------------------------------------ a model's run


class _Lines(Unattended):
    """The model's own surface: its notices (an MCP server not ready, a user tool file that
    failed) and what it waits for, one line each on stderr."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self._phases: set[str] = set()

    def render(self, event: Event) -> None:
        if isinstance(event, Notice):
            self.say(event.message)

    def info(self, text: str) -> None:
        self.say(text)

    def error(self, text: str) -> None:
        self.say(f"error: {text}")

    def waiting(self, status: str | None) -> None:
        phase = (status or "").split("…")[0].strip()
        if phase and phase not in self._phases:
            self._phases.add(phase)
            self.say(phase + "…")


@dataclass
class ModelRun:
    """One model's run of the cases."""

    model: str
    provider: str
    outcomes: list[Outcome] = field(default_factory=list)
    error: str = ""  # why the model could not run at all

    def summary(self) -> dict[str, Any]:
        done = self.outcomes
        called = [o.valid_args for o in done if o.valid_args is not None]
        args = [o.args_ok for o in done if o.args_ok is not None]
        answers = [o.answer_ok for o in done if o.answer_ok is not None]
        langs = sorted({o.case.lang for o in done if o.case.lang})
        return {
            "model": self.model, "provider": self.provider, "cases": len(done),
            "passed": sum(o.ok for o in done), "pass_rate": _rate([o.ok for o in done]),
            "right_tool_rate": _rate([o.right_tool for o in done]),
            "valid_args_rate": _rate(called), "calls_checked": len(called),
            "arg_check_rate": _rate(args), "arg_checks": len(args),
            "answer_check_rate": _rate(answers), "answer_checks": len(answers),
            "languages": {lang: {"cases": len(part := [o for o in done if o.case.lang == lang]),
                                 "right_tool_rate": _rate([o.right_tool for o in part]),
                                 "pass_rate": _rate([o.ok for o in part])} for lang in langs},
            "median_latency_s": round(statistics.median(o.seconds for o in done), 3) if done else None,
            "input_tokens": sum(o.input_tokens for o in done), "output_tokens": sum(o.output_tokens for o in done),
            "errors": sum(bool(o.error) for o in done), "error": self.error,
        }


def _rate(part: list[bool]) -> float | None:
    return round(sum(part) / len(part), 4) if part else None


def run_model(settings: Settings, cases: list[Case], *, jobs: int = 1,
              say: Callable[[str], None] = lambda line: None,
              done: Callable[[Outcome], None] = lambda outcome: None,
              prepare: Callable[[Provider], None] | None = None, calls: frozenset[str] = frozenset()) -> ModelRun:
    """``cases`` on the model of ``settings``: its tools, MCP servers and provider built once,
    then each case its own session core on them (``jobs`` at a time; one with an embedded
    model, whose one server answers a request at a time). ``done`` hears of each case as it
    ends, ``prepare`` gets the provider before the first case (the bench turns its grammar off),
    ``calls`` names the tools the dry run runs for real (``--call``). KeyboardInterrupt ends the run."""
    profile = settings.active
    run = ModelRun(profile.model, settings.provider)
    door = replace(EVAL, calls=calls)
    base = SessionCore(settings, _Lines(say), interactive=False, door=door)
    try:
        base.start_background()
        try:
            provider = base.provider()
        except ProviderError as exc:
            run.error = exc.message
            return run
        if prepare is not None:
            prepare(provider)
        if base.mcp is not None and (line := wait_for_mcp(base.mcp, base.ui.waiting).line()):
            say(line)
        base.user_tools.wait(USER_TOOLS_WAIT_S)
        schemas = {s["name"]: s.get("parameters") or {} for s in base.registry.schemas()}
        if missing := sorted({t for c in cases for t in c.tools} - set(schemas)):
            say(f"not offered, so no case expecting it can pass: {', '.join(missing)}")
        _say_not_run(base.registry, cases, calls, say)
        shared = base.provider_to_share()

        def one(case: Case) -> Outcome:
            log = EventLog()
            core = SessionCore(settings, Quiet(log), interactive=False, door=door,
                               shared_registry=base.registry, shared_provider=shared)
            started = time.perf_counter()
            try:
                finished = core.run_turn(case.message)
            finally:
                core.close()
            if finished is not None and finished.stopped_by == "interrupted":
                raise KeyboardInterrupt
            failure = core.provider_failure.message if core.provider_failure else ""
            outcome = judge(case, run.model, log, finished, failure, schemas, time.perf_counter() - started)
            done(outcome)
            return outcome

        run.outcomes = list(_each(one, cases, 1 if profile.embedded else jobs))
    finally:
        base.close()
    return run


def _say_not_run(registry: Registry, cases: list[Case], calls: frozenset[str], say: Callable[[str], None]) -> None:
    """Names given to ``--call`` that no tool has, and the tools whose results cases check but
    that the dry run does not run (not glassloop's own, not named)."""
    if unknown := sorted(name for name in calls if registry.get(name) is None):
        say(f"--call names no tool offered: {', '.join(unknown)}")
    checked = {t for c in cases if c.result_contains for t in c.tools}
    if held := sorted(t for t in checked if (tool := registry.get(t)) and tool.source != "built-in"
                      and t not in calls):
        say(f"not run in a dry run unless named with --call, so their result checks fail: {', '.join(held)}")


def _each(one: Callable[[Case], Outcome], cases: list[Case], jobs: int) -> Iterator[Outcome]:
    """``one`` over ``cases``, ``jobs`` at a time, in the cases' order. The workers are daemon
    threads: after Ctrl-C (or a case that raised) they take no new case, and one still in its
    turn does not hold up the exit."""
    if jobs <= 1:
        yield from map(one, cases)
        return
    waiting: queue.SimpleQueue[tuple[int, Case]] = queue.SimpleQueue()
    for item in enumerate(cases):
        waiting.put(item)
    finished: queue.SimpleQueue[tuple[int, Outcome | BaseException]] = queue.SimpleQueue()
    stop = threading.Event()

    def work() -> None:
        while not stop.is_set():
            try:
                number, case = waiting.get_nowait()
            except queue.Empty:
                return
            try:
                finished.put((number, one(case)))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, in its thread
                finished.put((number, exc))

    for _ in range(min(jobs, len(cases))):
        threading.Thread(target=work, daemon=True, name="glassloop-eval").start()
    ready: dict[int, Outcome] = {}
    try:
        for following in range(len(cases)):
            while following not in ready:
                try:
                    number, got = finished.get(timeout=0.1)  # short waits keep Ctrl-C responsive
                except queue.Empty:
                    continue
                if isinstance(got, BaseException):
                    raise got
                ready[number] = got
            yield ready.pop(following)
    finally:
        stop.set()


# ------------------------------------------------------------------ the report


def report_json(runs: list[ModelRun]) -> dict[str, Any]:
    return {"models": [r.summary() for r in runs], "cases": [o.as_json() for r in runs for o in r.outcomes]}


def shortfalls(runs: list[ModelRun], minimum: float | None) -> list[str]:
    """Why the evaluation fails, one line each: a model that could not run, cases that met an
    error instead of an answer (an unreachable server is no verdict on the model), a pass rate
    under ``minimum``."""
    lines = []
    for run in runs:
        errors = sum(bool(o.error) for o in run.outcomes)
        rate = run.summary()["pass_rate"] or 0.0
        if run.error:
            lines.append(f"{run.model}: could not run")
        elif errors:
            lines.append(f"{run.model}: {errors} of {len(run.outcomes)} cases ended in an error")
        elif minimum is not None and rate < minimum:
            lines.append(f"{run.model}: passed {100 * rate:.0f}% of the cases, under --min {minimum:g}")
    return lines


def table(run: ModelRun) -> list[str]:
    """The model's figures, then each failing case with what was called instead."""
    done = run.outcomes
    lines = [f"{run.model} ({run.provider}): {len(done)} cases"]
    if run.error:
        return [*lines, f"  could not run: {run.error}"]

    def figure(what: str, part: list[bool | None]) -> str:
        checked = [x for x in part if x is not None]
        if not checked:
            return f"  {what:<17}{'-':>5}"
        return f"  {what:<17}{sum(checked):>5}/{len(checked):<5}{100 * sum(checked) / len(checked):4.0f}%"

    lines += [figure("right tool", [o.right_tool for o in done]),
              figure("valid arguments", [o.valid_args for o in done]),
              figure("argument checks", [o.args_ok for o in done]),
              figure("answer checks", [o.answer_ok for o in done]),
              figure("passed", [o.ok for o in done])]
    for lang in sorted({o.case.lang for o in done if o.case.lang}):
        lines.append(figure(f"passed, {lang}", [o.ok for o in done if o.case.lang == lang]))
    s = run.summary()
    lines.append(f"  {'median latency':<17}{s['median_latency_s'] or 0:>8.2f} s")
    lines.append(f"  {'tokens':<17}{s['input_tokens']:>8} in, {s['output_tokens']} out")
    failing = [o for o in done if not o.ok]
    if failing:
        lines.append("  failing:")
        for o in failing:
            lines.append(f"    {_failure(o)}")
            if o.routing is not None and not o.right_tool:
                lines.append(f"      {_routed(o.routing)}")
    return lines


def _routed(routing: dict[str, Any]) -> str:
    """A wrong case's routing in one line: "routed by meaning: list_notes 0.62, none 0.20
    (needs 0.50); margin +0.51"."""
    scores = ", ".join(f"{one_line(name, 40)} {score:.2f}" for name, score in routing["top"])
    margin = routing["margin"]
    said = f"{margin:+.2f}" if isinstance(margin, float) else margin
    head = f"routed by {one_line(routing['by'], 40) or '-'}"
    return f"{head}: {scores} (needs {routing['threshold']:.2f}); margin {said}" if scores else f"{head}; margin {said}"


def _failure(o: Outcome) -> str:
    case = o.case
    where = f"{case.name}{f' [{case.lang}]' if case.lang else ''} {one_line(case.message, 50)!r}"
    expected = " or ".join(case.tools) or "no tool"
    called = ", ".join(f"{c['name']} {one_line(str(c['arguments']), 60)}" for c in o.calls) or "no tool"
    if o.error:
        why = f"error: {one_line(o.error, 100)}"
    elif not o.right_tool:
        why = f"expected {expected}, called {called}" if o.calls or case.tools else "no answer"
    elif o.valid_args is False:
        why = f"arguments not valid for {o.calls[0]['name']}: {one_line(str(o.calls[0]['arguments']), 80)}"
    elif o.args_ok is False:
        why = f"arguments missed a check: {called}"
    else:
        why = f"the answer holds none of {', '.join(map(repr, case.answer_contains))}: {one_line(o.answer, 60)!r}"
    return f"{where}: {why}"


@dataclass
class Printer:
    """Progress on stderr, the tables or the JSON on stdout; all of it redacted, the terminal's cleaned."""

    settings: Settings
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    redact: Redactor = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.redact = redactor_for(self.settings)

    def say(self, line: str) -> None:
        with self._lock:
            print(clean(self.redact(line)), file=self.stderr, flush=True)

    def case_done(self, total: int) -> Callable[[Outcome], None]:
        count = 0

        def done(outcome: Outcome) -> None:
            nonlocal count
            count += 1
            called = " ".join(c["name"] for c in outcome.calls) or "-"
            self.say(f"  {count}/{total} {'ok  ' if outcome.ok else 'FAIL'} {outcome.case.name} "
                     f"{outcome.seconds:.1f} s  {called}")
        return done

    def tables(self, runs: list[ModelRun]) -> None:
        for number, run in enumerate(runs):
            lines = ([""] if number else []) + table(run)
            print("\n".join(clean(self.redact(line)) for line in lines), file=self.stdout, flush=True)

    def json(self, runs: list[ModelRun]) -> None:
        print(json_display(self.redact.value(report_json(runs)), indent=1), file=self.stdout, flush=True)


def run_eval(path: Path, runs_of: list[Settings], *, jobs: int, as_json: bool, minimum: float | None,
             calls: frozenset[str] = frozenset(), stdout: TextIO | None = None,
             stderr: TextIO | None = None) -> int:
    """``glassloop eval``: the case file's cases on each model in turn (``calls``: ``--call``);
    exit 0, or 1 for a ``shortfalls`` line, 2 a mistake in the case file, 130 interrupted."""
    printer = Printer(runs_of[0], stdout or sys.stdout, stderr or sys.stderr)
    try:
        cases = load_cases(path)
    except CaseFileError as exc:
        printer.say(f"error: {exc}")
        return 2
    runs: list[ModelRun] = []
    try:
        for settings in runs_of:
            printer.say(f"eval: {len(cases)} cases on {settings.active.model} ({settings.provider})"
                        + (", one at a time (the embedded model)" if settings.active.embedded and jobs > 1 else ""))
            runs.append(run_model(settings, cases, jobs=jobs, say=printer.say, done=printer.case_done(len(cases)),
                                  calls=calls))
    except KeyboardInterrupt:
        printer.say("interrupted")
        return 130
    if as_json:
        printer.json(runs)
    else:
        printer.tables(runs)
    failed = shortfalls(runs, minimum)
    for line in failed:
        printer.say(line)
    return 1 if failed else 0
