"""The slash-command table: name, arguments, help, completer, handler."""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Command:
    name: str
    args: str
    help: str
    handler: Callable[[Any, list[str]], str | None]
    complete: Callable[[Any], list[str]] | None = None
    alias_of: str | None = None


REGISTRY: dict[str, Command] = {}
MEANINGS: dict[str, str] = {}  # a word people type for what a command does → the command


def command(name: str, args: str = "", help: str = "",
            complete: Callable[[Any], list[str]] | None = None, aliases: tuple[str, ...] = (),
            means: tuple[str, ...] = ()):
    """``aliases`` run the command too; ``means``: words an unknown command is matched
    against, so ``/new`` suggests ``/reset``."""
    def register(handler):
        REGISTRY[name] = Command(name, args, help, handler, complete)
        for alias in aliases:
            REGISTRY[alias] = Command(alias, args, help, handler, complete, alias_of=name)
        MEANINGS.update(dict.fromkeys(means, name))
        return handler
    return register


def aliases_of(name: str) -> list[str]:
    return [c.name for c in REGISTRY.values() if c.alias_of == name]


def specs(get_session: Callable[[], Any]) -> list[tuple[str, str, Callable[[str], list[str]] | None]]:
    """(name, help, argument completer) for the prompt's completion."""
    out = []
    for cmd in REGISTRY.values():
        complete = None
        if cmd.complete is not None:
            def complete(prefix: str, _fn=cmd.complete) -> list[str]:
                return [c for c in _fn(get_session()) if c.startswith(prefix)]
        out.append((cmd.name, cmd.help, complete))
    return out


def save_text(session: Any, path: Path, text: str) -> Path | None:
    """Write ``text`` to a file the user named (``~`` expanded); the path written, or None
    after one error line: a missing folder, a folder, a name too long, an unknown ``~user``."""
    try:
        path = path.expanduser()
        path.write_text(text, encoding="utf-8")
    except (OSError, ValueError, RuntimeError) as exc:
        session.ui.error(f"could not save to {path}: {getattr(exc, 'strerror', None) or exc}")
        return None
    return path


def suggest(name: str) -> str | None:
    """The command meant by an unknown ``name``: by meaning (``/new`` → ``reset``), else by spelling."""
    name = name.lower()
    if name in MEANINGS:
        return MEANINGS[name]
    if name.endswith("s") and name[:-1] in REGISTRY:  # /models → /model
        return name[:-1]
    close = difflib.get_close_matches(name, REGISTRY, n=1, cutoff=0.5)
    if close:
        return close[0]
    close = difflib.get_close_matches(name, MEANINGS, n=1, cutoff=0.75)  # a meaning, misspelt
    return MEANINGS[close[0]] if close else None


def dispatch(session: Any, line: str) -> str | None:
    """Run a slash command line; returns "exit" when the session should end."""
    try:
        words = shlex.split(line[1:])
    except ValueError as exc:
        session.ui.error(f"cannot parse the command: {exc}")
        return None
    if not words:
        return REGISTRY["help"].handler(session, [])
    name, args = words[0], words[1:]
    cmd = REGISTRY.get(name)
    if cmd is None:
        hint = suggest(name)
        session.ui.error(f"unknown command /{name}" + (f"; did you mean /{hint}?" if hint else "; see /help"))
        return None
    return cmd.handler(session, args)
