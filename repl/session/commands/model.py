"""Commands on which model runs the loop and how: model, provider, approval mode,
step mode, retry, compare."""

from __future__ import annotations

import threading

from repl.config.load import ConfigError
from repl.loop.approval import MODES
from repl.loop.events import Compared, Usage
from repl.loop.stepping import STEP_ON
from repl.providers.base import ProviderError
from repl.session.commands.context import CommandContext, command
from repl.session.commands.conversation import clear_rules, undone_text
from repl.trials.compare import compare as compare_models
from repl.trials.compare import compare_rows, last_question
from tools.safe_io import StoreError

_MODELS: dict[tuple[str, str], list[str]] = {}  # (profile, base URL) → the models it offers
_LOADING: set[tuple[str, str]] = set()  # endpoints whose list a completion is waiting for


def model_names(ctx: CommandContext, wait: bool) -> list[str]:
    """The models the active endpoint offers (``GET /models``), asked once per endpoint.
    ``wait``: wait for the provider and raise ProviderError; else [] until it is ready."""
    active = ctx.settings.active
    key = (active.name, active.base_url)
    if key in _MODELS and (_MODELS[key] or not wait):
        return _MODELS[key]
    provider = ctx.provider() if wait else ctx.provider_if_ready()
    if provider is None or not hasattr(provider, "list_models"):
        return []
    try:
        _MODELS[key] = provider.list_models(timeout_s=10.0 if wait else 3.0)
    except ProviderError:
        _MODELS[key] = []  # Tab stays quiet; /model asks again and says why
        if wait:
            raise
    return _MODELS[key]


def _model_completions(ctx: CommandContext) -> list[str]:
    """The endpoint's models once listed; until then none (so no menu opens), the list asked
    for on a thread of its own: typing never waits for ``GET /models``."""
    active = ctx.settings.active
    key = (active.name, active.base_url)
    if key in _MODELS:
        return _MODELS[key]
    if key not in _LOADING and ctx.provider_if_ready() is not None:
        _LOADING.add(key)

        def load() -> None:
            try:
                model_names(ctx, wait=False)
            except Exception:  # noqa: BLE001 - completion never breaks typing
                pass
            finally:
                _LOADING.discard(key)

        threading.Thread(target=load, daemon=True, name="glassloop-models").start()
    return []


def _offered(ctx: CommandContext) -> list[str]:
    """The models the endpoint lists, for a warning; [] when it lists none or cannot say."""
    try:
        if not ctx.settings.active.embedded:
            ctx.provider()  # an HTTP endpoint's: built behind the first prompt, ready at once or nearly
        return model_names(ctx, wait=False)
    except (Exception, KeyboardInterrupt):  # noqa: BLE001 - no list, no warning; the turn says what is wrong
        return []


@command("model", args="[NAME]", help="Show or switch the model for the next turn; without NAME, "
         "list the models the endpoint offers (Tab completes them).", complete=_model_completions,
         means=("models", "llm", "switch"), brief="show, list or switch the model")
def model(ctx: CommandContext, args: list[str]) -> None:
    if not args:
        current = ctx.settings.active.model
        ctx.ui.info(f"model: {current} (provider {ctx.settings.active.name})")
        try:
            names = model_names(ctx, wait=True)
        except ProviderError as exc:
            ctx.ui.error(f"the endpoint did not list its models: {exc.message}")
            return
        except KeyboardInterrupt:
            ctx.ui.info("(stopped)")
            return
        if not names:
            ctx.ui.info("the endpoint lists no models; /model NAME still switches")
            return
        ctx.ui.lines([f"{'*' if name == current else ' '} {name}" for name in names])
        ctx.ui.info(f"{len(names)} models offered · /model NAME switches (Tab completes)")
        return
    offered = _offered(ctx)
    if ctx.switch(model=args[0]):
        ctx.ui.info(f"model is now {args[0]} for the next turn")
        if offered and args[0] not in offered:
            ctx.ui.info(f"the endpoint does not list {args[0]} ({len(offered)} models; /model lists them)")


@command("provider", args="[NAME]", help="Show or switch the provider profile.",
         complete=lambda ctx: sorted(ctx.settings.providers),
         means=("providers", "endpoint", "backend"))
def provider(ctx: CommandContext, args: list[str]) -> None:
    if not args:
        names = ", ".join(sorted(ctx.settings.providers))
        ctx.ui.info(f"provider: {ctx.settings.active.name} (profiles: {names})")
        return
    if args[0] not in ctx.settings.providers:
        ctx.ui.error(f"no provider profile {args[0]!r}; known: {', '.join(sorted(ctx.settings.providers))}")
        return
    if ctx.switch(provider=args[0]):
        ctx.ui.info(f"provider is now {args[0]} ({ctx.settings.active.model}) for the next turn")


@command("approve", args="[ask|auto|read-only]", help="Show or set the approval mode.",
         complete=lambda ctx: list(MODES),
         means=("approval", "permissions", "allow", "yolo", "mode"))
def approve(ctx: CommandContext, args: list[str]) -> None:
    if not args:
        always = ", ".join(sorted(ctx.approver.always))
        ctx.ui.info(f"approval mode: {ctx.approver.mode}" + (f"; always: {always}" if always else ""))
        return
    if args[0] not in MODES:
        ctx.ui.error(f"approval mode must be one of {', '.join(MODES)}")
        return
    if ctx.switch(approval=args[0]):
        ctx.ui.info(f"approval mode is now {args[0]}; {clear_rules(ctx)}")


@command("step", args="[on|off]", help="Step mode: pause before each model call (see what it adds, edit, "
         "send without tools) and before tools run (skip a call, give a result by hand).",
         complete=lambda ctx: ["on", "off"], means=("pause", "breakpoint", "stepper", "steps"),
         brief="pause before each model call and tool call")
def step(ctx: CommandContext, args: list[str]) -> None:
    if args and args[0] not in ("on", "off") or len(args) > 1:
        ctx.ui.error("usage: /step [on|off]")
        return
    on = (args[0] == "on") if args else ctx.stepping.stepper is None
    if ctx.set_step(on):
        ctx.ui.info(STEP_ON if on else "step mode off: the loop runs without pausing")


def _options(ctx: CommandContext, args: list[str], names: tuple[str, ...], usage: str) -> dict[str, str] | None:
    """``--name VALUE`` / ``--name=VALUE`` pairs; None after one error line."""
    found: dict[str, str] = {}
    rest = list(args)
    while rest:
        word = rest.pop(0)
        name, _, value = word.partition("=")
        if name not in names or (not value and not rest):
            ctx.ui.error(f"usage: {usage}")
            return None
        found[name[2:]] = value or rest.pop(0)
    return found


@command("retry", args="[--model NAME] [--provider NAME]",
         help="Undo the last turn (as /undo) and run its message again, optionally on another model "
              "(which stays the model); the earlier attempt stays in /trace.",
         complete=lambda ctx: ["--model", "--provider"], means=("rerun", "regenerate", "reroll"),
         brief="run the last message again, maybe on another model")
def retry(ctx: CommandContext, args: list[str]) -> None:
    options = _options(ctx, args, ("--model", "--provider"), "/retry [--model NAME] [--provider NAME]")
    if options is None:
        return
    if not ctx.turns:
        ctx.ui.info("nothing to retry: no turn yet")
        return
    record = ctx.turns[-1]
    if record.restore is not None:
        ctx.ui.error("the last change was /compact: /undo it first, then /retry")
        return
    if "provider" in options and options["provider"] not in ctx.settings.providers:
        ctx.ui.error(f"no provider profile {options['provider']!r}; "
                     f"known: {', '.join(sorted(ctx.settings.providers))}")
        return
    starts = ctx.history.turn_starts()
    text = ctx.history.messages[starts[-1]]["content"] if record.in_history and starts else record.question
    try:
        reverted = ctx.undo()
    except StoreError as exc:
        ctx.ui.error(f"nothing retried: {exc.message}")
        return
    if options and not ctx.switch(**options):
        ctx.ui.info("the last turn was undone; send its message again when the model is right")
        return
    ctx.ui.info(f"retrying turn {record.number} on {ctx.settings.active.model} "
                f"({ctx.settings.active.name}); undone: {undone_text(reverted)}")
    ctx.ask(text)


@command("compare", args="MODEL [MODEL…]",
         help="Run your last message on each model (side effects denied: a dry run) and show the runs "
              "side by side; nothing enters the conversation.", complete=_model_completions,
         means=("versus", "vs", "bench", "diff"))
def compare(ctx: CommandContext, args: list[str]) -> None:
    if not args:
        ctx.ui.error("usage: /compare MODEL [MODEL…] (the models of the active provider)")
        return
    if last_question(ctx.history) is None:
        ctx.ui.info("nothing to compare: send a message first")
        return

    def started(n: int, model: str) -> None:
        ctx.ui.info(f"compare {n}/{len(args)}: {model} (side effects denied) · Ctrl-C stops")

    try:
        attempts = compare_models(ctx.settings, ctx.registry, ctx.history, list(args), started)
    except ConfigError as exc:
        ctx.ui.error(str(exc))
        return
    except KeyboardInterrupt:
        ctx.ui.info("comparison stopped")
        return
    ctx.ui.table("compare · your last message · nothing kept", ["", *[a.model for a in attempts]],
                 compare_rows(attempts))
    if ctx.trace is not None:  # the runs stay out of the conversation; the trace notes them beside the turn
        turn = next((t.number for t in reversed(ctx.ledger) if not t.undone and t.restore is None), 0)
        for a in attempts:
            done = a.finished
            ctx.trace(Compared(turn, a.model, tuple(name for name, _, _ in a.calls), done.usage if done else Usage(),
                               done.duration_s if done else 0.0, done.stopped_by if done else "not run",
                               done.answer if done else "", a.error))
