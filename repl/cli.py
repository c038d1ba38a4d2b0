"""The ``glassloop`` command: Typer app, the one place that wires everything.

Exit codes: 0 success; 1 a turn failed (provider error) or a command found
nothing; 2 bad usage or bad configuration (one line naming file and key);
130 interrupted.
"""

from __future__ import annotations

import atexit
import difflib
import inspect
import io
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from repl import __version__
from repl.config.load import PROJECT_FILE, ConfigError, Settings, load_settings, with_overrides
from repl.config.project import ProjectTrust, ToolsTrust
from repl.config.schema import CLI_OPTIONS, Spec
from repl.loop.unicode import valid_text
from tools.compat import command_words, interpreter_shutdown, take_command_words

_PROGRAM = threading.Event()  # set by main(): this process is glassloop, a command may end it itself
FIRST_MESSAGE = "first_message"  # ctx.meta key: `glassloop "question"` starts the REPL with it
PIPED_MAX_CHARS = 200_000  # the most piped text `ask` sends with a question
# Click's usage error, of the click Typer runs on (its own copy since Typer 0.2x): the base of
# the one exception Typer exports.
UsageError: type[Exception] = typer.BadParameter.__mro__[1]
ClickError: type[Exception] = UsageError.__mro__[1]


class _Group(TyperGroup):
    """``glassloop "question"``: words that name no command are the REPL's first message, and
    the options stand anywhere among them (``glassloop "q" --base-url URL``); after ``--`` all
    is words."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        first = self._first_word(ctx, args)
        if first is None or first in self.commands:
            return super().parse_args(ctx, args)
        ctx.allow_interspersed_args = True  # a group stops at its first word: a command's options follow it
        try:
            super().parse_args(ctx, args)
        except UsageError as exc:
            typer.echo(f"error: {exc} (a question with words that begin with '-' "
                       "goes after --: glassloop [OPTIONS] -- \"QUESTION\")", err=True)
            raise typer.Exit(2) from None
        words = command_words(ctx)
        close = difflib.get_close_matches(words[0], list(self.commands), n=1, cutoff=0.75)
        if len(words) == 1 and close:  # `glassloop trce`: a typo, not a question
            typer.echo(f"error: no command {words[0]!r}; did you mean {close[0]!r}? "
                       "(to start with a question, write a sentence)", err=True)
            raise typer.Exit(2)
        ctx.meta[FIRST_MESSAGE] = valid_text(" ".join(words))
        take_command_words(ctx)
        return []

    def _first_word(self, ctx: Any, args: list[str]) -> str | None:
        """The first word that is not an option or its value (None: none, or an option the
        group does not know, for the ordinary parse to refuse)."""
        try:
            _, words, _ = self.make_parser(ctx).parse_args(args=list(args))
        except UsageError:
            return None
        return words[0] if words else None


app = typer.Typer(
    cls=_Group,
    add_completion=False,
    no_args_is_help=False,
    invoke_without_command=True,
    help="glassloop: a terminal agent REPL whose loop you can see through.",
    context_settings={"help_option_names": ["-h", "--help"]},
)

ConfigOpt = Annotated[Path | None, typer.Option("--config", help="Extra config file (TOML), above the user and project files.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Allow side effects without asking (approval mode auto).")]
ResumeOpt = Annotated[str | None, typer.Option("--resume", help="Continue a saved session: an id (ID@k: a "
                                                "branch /rewind kept, as a new session), or 'last'; "
                                                "without a value, pick one from a list.")]
ContinueOpt = Annotated[bool, typer.Option("--continue", "-c", help="Continue the most recent session that has a turn.")]
StepOpt = Annotated[bool, typer.Option("--step", help="Step mode: pause before each model call and before tools run (/step).")]
ToolsOpt = Annotated[list[Path] | None, typer.Option("--tools", help="A Python file of your own tools (@tool functions); repeatable.")]
CallOpt = Annotated[list[str] | None, typer.Option("--call", help="Run this tool for real in the dry run (an MCP "
                                                   "server's or your own: otherwise not run); repeatable.")]


def _option(name: str, spec: Spec) -> inspect.Parameter:
    numeric = spec.kind in ("int", "float")
    flag = "--" + name.replace("_", "-")
    if spec.kind == "bool":  # --otel / --no-otel
        flag += "/--no-" + name.replace("_", "-")
    option = typer.Option(flag, help=spec.meta.cli, min=spec.minimum if numeric and spec.minimum else None)
    kind = {"int": int, "float": float, "bool": bool}.get(spec.kind, str)
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                             annotation=Annotated[kind | None, option])


def setting_options(command: Callable[..., Any], skip: tuple[str, ...] = ()) -> Callable[..., Any]:
    """Gives ``command`` an option, after ``--config``, for each setting declared with ``cli``
    help in ``repl.config.settings`` (but those in ``skip``, which it declares its own way);
    their values arrive in its ``**flags``."""
    signature = inspect.signature(command, eval_str=True)
    params = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    at = next(i for i, p in enumerate(params) if p.name == "config") + 1
    options = [_option(name, spec) for name, spec in CLI_OPTIONS.items() if name not in skip]
    command.__signature__ = signature.replace(parameters=[*params[:at], *options, *params[at:]])  # type: ignore[attr-defined]
    return command


def _settings(config: Path | None, flags: dict[str, Any], yes: bool = False, untrusted: str = "quiet",
              tool_files: list[Path] | None = None) -> Settings:
    """``flags``: the setting options given; ``untrusted``: what to do when the project file
    sets keys that need trust, or the project's tool folder is not trusted: "ask" (a terminal
    at the REPL's start), "tell" (one line on stderr) or "quiet"."""
    given = {k: v for k, v in {**flags, "yes": yes or None}.items() if v is not None}
    try:
        settings = _project_tools(_project_file(given, config, untrusted), untrusted)
        return replace(settings, tool_files=_tool_files(tool_files or []))
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None


def _project_file(given: dict, config: Path | None, untrusted: str) -> Settings:
    settings = load_settings(given, config_file=config)
    project = settings.project
    if project is None or not project.ignored or untrusted == "quiet":
        return settings
    if untrusted == "ask" and _confirm_trust(project):
        from repl.config.trust import record

        record(project)
        settings = load_settings(given, config_file=config)  # the file may have changed since
        project = settings.project
    if project is not None and project.ignored:
        from repl.config.trust import notice

        typer.echo(notice(project), err=True)
    return settings


def _tool_files(paths: list[Path]) -> tuple[Path, ...]:
    missing = [p for p in paths if not p.expanduser().is_file()]
    if missing:
        raise ConfigError(f"error: --tools {missing[0]}: no such file")
    return tuple(p.expanduser().absolute() for p in paths)


def _project_tools(settings: Settings, untrusted: str) -> Settings:
    """Ask (once per content) or tell about an untrusted ./.glassloop/tools."""
    tools = settings.project_tools
    if tools is None or tools.trusted or untrusted == "quiet":
        return settings
    from repl.config.trust import record, tools_notice

    if untrusted == "ask" and _confirm_tools(tools):
        record(tools)
        return replace(settings, project_tools=replace(tools, trusted=True))
    typer.echo(tools_notice(tools), err=True)
    return settings


def _confirm_tools(tools: ToolsTrust) -> bool:
    from repl.config.schema import printable

    typer.echo(f"{printable(str(tools.path))} holds tool files that run as Python code in glassloop: "
               f"{printable(', '.join(tools.files))}", err=True)
    return _ask_yes("Trust these tool files? (this exact content; `glassloop trust --revoke` undoes it)")


def _ask_yes(question: str) -> bool:
    """A yes/no at the REPL's start; keys typed before the question are dropped, not taken."""
    _drop_typeahead()
    try:
        return typer.confirm(question, default=False, err=True)
    except typer.Abort:  # Ctrl-C or Ctrl-D: no
        typer.echo("", err=True)
        return False


def _confirm_trust(project: ProjectTrust) -> bool:
    from repl.config.schema import printable
    from repl.config.trust import details

    lines = details(project)
    typer.echo(f"{printable(str(project.path))} sets what can run programs, send your keys "
               "elsewhere or loosen approvals:", err=True)
    for line in lines[:20] + ([f"… and {len(lines) - 20} more"] if len(lines) > 20 else []):
        typer.echo("  " + line, err=True)
    return _ask_yes("Trust this file? (this exact content; `glassloop trust --revoke` undoes it)")


def _drop_typeahead() -> None:
    try:
        import termios
    except ImportError:
        return
    try:
        termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)
    except (termios.error, OSError, ValueError):
        pass


def _version(value: bool) -> None:
    if value:
        typer.echo(f"glassloop {__version__}")
        raise typer.Exit()


@app.callback()
@setting_options
def main_callback(
    ctx: typer.Context,
    resume: ResumeOpt = None, cont: ContinueOpt = False, config: ConfigOpt = None,
    yes: YesOpt = False, tools: ToolsOpt = None, step: StepOpt = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
    **flags: Any,
) -> None:
    """Chat with a model that uses local tools; every step shown, every side effect approved."""
    if ctx.invoked_subcommand is None:
        settings = _settings(config, flags, yes, _chat_trust(), tools)
        _run_chat(settings, "last" if cont and resume is None else resume, ctx.meta.get(FIRST_MESSAGE, ""), step)


@app.command()
@setting_options
def chat(
    resume: ResumeOpt = None, cont: ContinueOpt = False, config: ConfigOpt = None,
    yes: YesOpt = False, tools: ToolsOpt = None, step: StepOpt = False, **flags: Any,
) -> None:
    """Open the interactive REPL (the default command)."""
    _run_chat(_settings(config, flags, yes, _chat_trust(), tools), "last" if cont and resume is None else resume,
              step=step)


def _chat_trust() -> str:
    return "ask" if sys.stdin.isatty() and sys.stdout.isatty() else "tell"


def _run_chat(settings: Settings, resume: str | None, first: str = "", step: bool = False) -> None:
    from repl.session.start import run_chat

    raise typer.Exit(run_chat(settings, resume=resume, first=first, step=step))


@app.command()
@setting_options
def ask(
    question: Annotated[str | None, typer.Argument(help="The question; '-' or omitted reads standard input.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object: answer, stopped_by, steps, usage, trace.")] = False,
    stream_json: Annotated[bool, typer.Option("--stream-json", help="Print each event as a JSON line while the "
                                              "turn runs, --json's object last (docs/EXPORTING.md).")] = False,
    trace_file: Annotated[Path | None, typer.Option("--trace-file", help="Write this turn's trace (JSONL) here.")] = None,
    cont: ContinueOpt = False,
    session: Annotated[str | None, typer.Option("--session", help="Continue this saved session (an id, ID@k, "
                                                "or 'last').")] = None,
    no_save: Annotated[bool, typer.Option("--no-save", help="Keep no journal: the turn cannot be continued "
                                          "or searched.")] = False,
    config: ConfigOpt = None, yes: YesOpt = False, tools: ToolsOpt = None,
    step: Annotated[bool, typer.Option("--step", hidden=True)] = False, **flags: Any,
) -> None:
    """Run one turn without the REPL: progress on stderr, the answer on stdout.

    Side-effecting tool calls are denied unless --yes is given.
    Exit codes: 0 answered, 1 the turn failed or gave no answer text, 2 bad usage or config,
    130 interrupted.
    """
    if step:
        typer.echo("error: step mode needs a terminal: it pauses the loop for your keys, and ask runs "
                   "without one; use the REPL: glassloop --step (or /step on)", err=True)
        raise typer.Exit(2)
    if as_json and stream_json:
        typer.echo("error: --json and --stream-json: choose one (--stream-json ends with --json's object)", err=True)
        raise typer.Exit(2)
    # What was typed (the argument) may mention files; piped text is data and never does.
    typed, piped = "", ""
    if question in (None, "-"):
        if sys.stdin.isatty() and question is None:
            typer.echo("error: give a question, or pipe one on standard input", err=True)
            raise typer.Exit(2)
        piped = _read_piped()
    else:
        typed = question
        if not sys.stdin.isatty():  # `cat log.txt | glassloop ask "summarize"`: the text goes along
            piped = _read_piped()
    typed, piped = valid_text(typed), valid_text(piped)  # argv bytes not UTF-8 arrive as lone surrogates
    if not (typed.strip() or piped.strip()):
        typer.echo("error: the question is empty", err=True)
        raise typer.Exit(2)
    settings = _settings(config, flags, yes, "tell", tools)
    from repl.session.oneshot import run_ask

    code = run_ask(settings, typed.strip(), piped=piped, as_json=as_json, assume_yes=yes,
                   trace_file=trace_file, stream_json=stream_json, save=not no_save,
                   session=session if session is not None else "last" if cont else None)
    if _PROGRAM.is_set():
        _leave(code)
    raise typer.Exit(code)


def _leave(code: int) -> NoReturn:
    """End the process without the interpreter's teardown (freeing every module: ~0.1 s once the
    SDK is loaded), after what that exit does that matters, in its order: threads that are not
    daemons waited for (a tool still running), atexit handlers (a local model server's stop), the
    standard streams flushed (120 when that fails, as Python exits). ``ask`` has closed its files
    by now (trace, raw calls, MCP logs). Without CPython's ``threading._shutdown``: a plain exit."""
    shutdown = interpreter_shutdown()
    # The user's tool files may hold files open at module level that only the teardown flushes
    # and closes: with any loaded (their public module is imported then), exit the ordinary way.
    if shutdown is None or "glassloop_tools" in sys.modules:
        raise typer.Exit(code)
    shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # a closed pipe (stdout to `head`), a closed or absent stream
            code = 120
    os._exit(code)


def _read_piped() -> str:
    """Standard input, at most PIPED_MAX_CHARS characters (more: one line, exit 2)."""
    text = sys.stdin.read(PIPED_MAX_CHARS + 1)
    if len(text) > PIPED_MAX_CHARS:
        typer.echo(f"error: the piped input is over {PIPED_MAX_CHARS:,} characters; send a part of it "
                   f"(e.g. tail -c {PIPED_MAX_CHARS} FILE | glassloop ask ...)", err=True)
        raise typer.Exit(2)
    return text


@app.command("eval")
@partial(setting_options, skip=("model", "provider", "approval"))  # side effects: always a dry run
def eval_cases(
    cases: Annotated[Path, typer.Argument(help="The case file (TOML): a case table per message, with message, tool, args, lang.")],
    model: Annotated[list[str] | None, typer.Option("--model", help="A model to evaluate; repeatable.")] = None,
    provider: Annotated[list[str] | None, typer.Option("--provider", help="A provider to evaluate (each with each "
                                                       "--model); repeatable.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object: models and cases.")] = False,
    minimum: Annotated[float | None, typer.Option("--min", min=0, max=1, help="Exit 1 when a model passes "
                                                  "fewer than this share of the cases (0..1).")] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Cases run at once against a server.")] = 1,
    call: CallOpt = None, config: ConfigOpt = None, tools: ToolsOpt = None, **flags: Any,
) -> None:
    """Does the model pick your tool? Run a case file's messages (side effects dry-run) and score the calls.

    Exit codes: 0 done, 1 a model under --min, or a case that met an error (an unreachable server),
    2 bad usage, config or case file, 130 interrupted.
    """
    from repl.trials.evaluate import run_eval

    settings = _settings(config, flags, False, "tell", tools)
    try:
        runs = [with_overrides(settings, **({"provider": p} if p else {}), **({"model": m} if m else {}))
                for p in provider or [""] for m in model or [""]]  # "": the configured one
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None
    raise typer.Exit(run_eval(cases, runs, jobs=jobs, as_json=as_json, minimum=minimum, calls=frozenset(call or ())))


@app.command("config")
@setting_options
def show_config(config: ConfigOpt = None, yes: YesOpt = False, **flags: Any) -> None:
    """Show the effective configuration and where each value came from (keys redacted)."""
    from repl.config.show import describe

    settings = _settings(config, flags, yes)
    rows = describe(settings)
    width = max(len(key) for key, _, _ in rows)
    value_width = min(max(len(value) for _, value, _ in rows), 48)
    for key, value, source in rows:
        typer.echo(f"{key:<{width}}  {value:<{value_width}}  {source}")


@app.command("trust")
def trust_project(
    folder: Annotated[Path | None, typer.Argument(help="The folder holding glassloop.toml, or the file (default: the current folder).")] = None,
    revoke: Annotated[bool, typer.Option("--revoke", help="Forget the trust: its risky keys are ignored again.")] = False,
) -> None:
    """Trust a project's glassloop.toml (MCP servers, base URLs, key variables, approval, paths),
    its .glassloop/tools (Python files of tools) and .glassloop/commands (prompt templates).

    The trust holds for the exact content: any change makes it untrusted again.
    """
    from repl.config.schema import printable
    from repl.config.trust import PROJECT_TOOLS, details, record, record_folder, trust_key
    from repl.config.trust import revoke as forget
    from repl.session.templates import PROJECT_COMMANDS, digest, read_folder

    folder = (folder or Path.cwd()).absolute()
    if folder.name == PROJECT_FILE and not folder.is_dir():
        folder = folder.parent
    path = folder / PROJECT_FILE
    try:
        if revoke:
            for target in [p for p in (path, folder / PROJECT_TOOLS, folder / PROJECT_COMMANDS)
                           if p.exists()] or [path]:
                done = forget(target)
                typer.echo(f"{'no longer trusted' if done else 'was not trusted'}: {printable(trust_key(target))}")
            return
        settings = load_settings(cwd=folder, env={})  # env={}: list every key it may set
        project, tools = settings.project, settings.project_tools
        commands = read_folder(folder / PROJECT_COMMANDS, root=folder)
        if project is None and tools is None and not commands:
            typer.echo(f"error: no {PROJECT_FILE}, {PROJECT_TOOLS}/*.py or {PROJECT_COMMANDS}/*.md in "
                       f"{printable(str(folder))}", err=True)
            raise typer.Exit(2)
        if project is not None:
            state = "already trusted" if project.trusted else "trusted"
            if not project.trusted:
                record(project)
            lines = details(project)
            what = "; it may set:" if lines else " (nothing in it needs trust)"
            typer.echo(f"{state}: {printable(trust_key(path))} (sha256 {project.sha256[:12]}…){what}")
            for line in lines:
                typer.echo("  " + line)
        if tools is not None:
            state = "trusted" if record(tools) else "already trusted"
            typer.echo(f"{state}: {printable(trust_key(tools.path))} (sha256 {tools.sha256[:12]}…); "
                       f"tool files: {printable(', '.join(tools.files))}")
            for line in tools.listing:
                typer.echo("  " + printable(line))
        if commands:
            sha = digest(commands)
            state = "trusted" if record_folder(folder / PROJECT_COMMANDS, sha) else "already trusted"
            typer.echo(f"{state}: {printable(trust_key(folder / PROJECT_COMMANDS))} (sha256 {sha[:12]}…); "
                       f"commands: {printable(', '.join('/' + c.path.stem for c in commands))}")
            for command in commands:  # each file by where it is read from, or why it is not
                typer.echo("  " + printable(command.listed()))
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None


@app.command("replay")
@setting_options
def replay_session(
    session: Annotated[str, typer.Argument(help="Session id (or the start of one), or 'last'.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object: each turn's original and "
                                          "replay, and the summary.")] = False,
    call: CallOpt = None, config: ConfigOpt = None, tools: ToolsOpt = None, **flags: Any,
) -> None:
    """Send every question of a saved session, in order, to another model (--model, --provider), side
    effects dry-run; show each turn's tool calls and answers beside the original's, then a summary.

    Exit codes: 0 done, 1 no such session or the model could not run, 2 bad usage or config,
    130 interrupted.
    """
    from repl.trials.replay import run_replay

    raise typer.Exit(run_replay(_settings(config, flags, False, "tell", tools), session, json_out=as_json,
                                calls=frozenset(call or ())))


@app.command("trace")
def show_trace(
    session: Annotated[str, typer.Argument(help="Session id, a trace file, or 'last'.")] = "last",
    turn: Annotated[str | None, typer.Option("--turn", help="Turn number, or 'all' (default: every turn's "
                                             "timeline; with --events, --json or --raw the last turn).")] = None,
    events: Annotated[bool, typer.Option("--events", help="Every event as a line, not the timeline.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw records as JSON lines.")] = False,
    raw: Annotated[bool, typer.Option("--raw", help="Each model call's request as sent (what it adds to the "
                                      "previous one of its turn), failed attempts and response, as JSON "
                                      "(with --json: one JSON list, whole).")] = False,
    full: Annotated[bool, typer.Option("--full", help="With --raw: every request whole.")] = False,
    html: Annotated[Path | None, typer.Option("--html", help="Write the turns (default: all) as one "
                                              "self-contained HTML page: timelines, raw calls, tool results.")] = None,
    config: ConfigOpt = None,
) -> None:
    """Show the timeline of a saved session's turns."""
    from repl.archive.typed_numbers import typed_number
    from repl.tracing.timeline import chosen_turns, select_turns, trace_path

    settings = _settings(config, {})
    path = trace_path(settings.trace_dir, session)
    if path is None:
        typer.echo(f"error: no trace found for {session!r} in {settings.trace_dir}", err=True)
        raise typer.Exit(1)
    try:
        if turn not in (None, "last", "all"):
            turn = str(typed_number(turn, "--turn takes 'all', 'last' or a turn number"))
        if raw or html:
            groups = chosen_turns(path, turn or ("all" if html else "last"))
        else:
            import shutil

            width = min(120, max(40, shutil.get_terminal_size((100, 24)).columns))
            lines = select_turns(path, turn or ("last" if as_json or events else "all"),
                                 "json" if as_json else "events" if events else "timeline", width)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:
        _unreadable(path, exc)
    from repl.ui.escape import clean  # trace records hold model, tool and server text

    if html:
        _write_html(path, groups, html, settings)
    elif raw:
        _print_raw(path, groups, as_json, full)
    else:
        for line in lines:
            typer.echo(line if as_json else clean(line))


def _write_html(path: Path, groups: list, target: Path, settings: Settings) -> None:
    from repl.loop.cost import price_of_model
    from repl.tracing.trace_html import trace_page
    from repl.ui.escape import clean

    try:
        page = trace_page(path, groups, lambda model: price_of_model(settings, model))
        target.expanduser().write_text(page, encoding="utf-8")
    except (OSError, ValueError) as exc:
        typer.echo(f"error: could not write {clean(str(target))}: {getattr(exc, 'strerror', None) or exc}", err=True)
        raise typer.Exit(1) from None
    count = sum(any(r.get("type") == "turn_started" for r in group) for group in groups)  # not start-up notices
    typer.echo(f"wrote {count} turn{'' if count == 1 else 's'} to {clean(str(target))}")


def _print_raw(path: Path, groups: list, as_json: bool, full: bool) -> None:
    import shutil

    from repl.tracing.raw import raw_text, raw_view
    from repl.tracing.timeline import missing_raw, raw_calls
    from repl.tracing.trace import read_wire, wire_path
    from repl.ui.escape import json_display
    from repl.ui.pager import page

    try:
        wire, dropped = read_wire(wire_path(path))
    except OSError as exc:
        _unreadable(wire_path(path), exc)
    calls, missing = raw_calls(groups, wire)
    if as_json:
        typer.echo(json_display(calls, indent=2))
    elif calls:
        shown = raw_text(raw_view(calls, full=full))
        if not (sys.stdout.isatty() and page(shown, height=shutil.get_terminal_size().lines)):
            typer.echo(shown, nl=False)
    if missing:
        typer.echo(missing_raw(missing, dropped), err=True)


@app.command("search")
def search_sessions(
    text: Annotated[list[str], typer.Argument(help="The words to find: a turn must hold every one.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON list: session, branch, turn, date, "
                                          "snippet, highlights, resume command.")] = False,
    limit: Annotated[str, typer.Option("--limit", metavar="N", help="The most turns shown.")] = "20",
    config: ConfigOpt = None,
) -> None:
    """Search every saved session (questions, answers, tool names and arguments), newest first.

    Exit codes: 0 found, 1 nothing found, 2 bad usage.
    """
    import json
    import time

    from repl.archive.search import Index, SearchError, query_words
    from repl.archive.typed_numbers import NotANumber, typed_number
    from repl.ui.escape import clean

    try:
        most = typed_number(limit, "--limit takes a number of turns")
    except NotANumber as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    words = " ".join(valid_text(t) for t in text)
    if not query_words(words):
        typer.echo("error: nothing to search for: give words with letters or digits", err=True)
        raise typer.Exit(2)
    settings = _settings(config, {})
    try:
        hits = Index(settings.data_dir / "sessions", lambda line: typer.echo(clean(line), err=True)).search(words, most)
    except SearchError as exc:
        typer.echo(f"error: {clean(str(exc))}", err=True)
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps([hit.json() for hit in hits], ensure_ascii=False, indent=1))
    elif not hits:
        typer.echo(f"no saved turn holds {clean(words)!r}", err=True)
    mark = ("\x1b[1;7m", "\x1b[0m") if sys.stdout.isatty() else ("", "")
    for hit in [] if as_json else hits:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(hit.turn.time))
        snippet = "".join(mark[0] + clean(piece) + mark[1] if found else clean(piece) for piece, found in hit.snippet)
        typer.echo(f"{hit.turn.ref}  turn {hit.turn.turn}  {when}  {snippet}\n  glassloop --resume {hit.turn.ref}")
    raise typer.Exit(0 if hits else 1)


def _unreadable(path: Path, exc: OSError) -> NoReturn:
    from repl.ui.escape import clean

    typer.echo(f"error: cannot read {clean(str(path))}: {exc.strerror or exc}", err=True)
    raise typer.Exit(1) from None


def _command_named(args: list[str]) -> list[str]:
    """The command ``args`` start with, if they start with one."""
    names = {command.name or getattr(command.callback, "__name__", "") for command in app.registered_commands}
    return args[:1] if args[:1] and args[0] in names else []


def optional_values(argv: list[str]) -> list[str]:
    """``--resume`` with no value after it becomes ``--resume=`` (pick from a list): Click
    options cannot leave their value out."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--":
            break
        if arg == "--resume" and (i + 1 == len(out) or out[i + 1].startswith("-")):
            out[i] = "--resume="
    return out


def main() -> None:
    _PROGRAM.set()
    if isinstance(sys.stdin, io.TextIOWrapper):  # piped bytes that are not UTF-8 become U+FFFD
        sys.stdin.reconfigure(errors="replace")
    args = optional_values(sys.argv[1:])
    try:
        code = app(args=args, prog_name="glassloop", standalone_mode=False)
    except KeyboardInterrupt:
        sys.exit(130)
    except UsageError as exc:  # one line (not Typer's box), naming the help to read
        where = getattr(exc, "ctx", None)  # a parse error of the parser's own has none: name the command typed
        path = where.command_path if where is not None else " ".join(["glassloop", *_command_named(args)])
        print(f"error: {exc.format_message()} (see {path} -h)", file=sys.stderr)  # type: ignore[attr-defined]
        sys.exit(2)
    except ClickError as exc:  # click's other errors (a file it could not open): one line too
        print(f"error: {exc.format_message()}", file=sys.stderr)  # type: ignore[attr-defined]
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
