"""The private APIs behind ``tools/compat.py``, pinned: each test fails when an upgrade moves
what a function there relies on (read ``tools/compat.py`` again then)."""

from __future__ import annotations

import sys
import threading
from importlib import metadata

import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

from tools import compat


def test_the_interpreter_is_the_one_the_frame_and_shutdown_helpers_were_written_for() -> None:
    assert sys.implementation.name == "cpython" and sys.version_info[:2] >= (3, 11)
    assert compat.interpreter_shutdown() is threading._shutdown  # type: ignore[attr-defined]

    def factory() -> dict[str, object]:
        alias = int  # noqa: F841 - read back through the frame
        return (lambda: compat.caller_locals())()

    assert factory()["alias"] is int


def test_the_click_context_keeps_a_groups_words_where_the_helpers_read_them() -> None:
    """Typer < 0.29 (pyproject.toml) runs its own copy of click; the words a group's parse leaves
    for its command are in ``_protected_args`` and ``args`` (``repl/cli.py``'s group reads them)."""
    major, minor = (int(part) for part in metadata.version("typer").split(".")[:2])
    assert (major, minor) < (0, 29)
    seen: list[list[str]] = []

    class Group(TyperGroup):
        def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
            rest = super().parse_args(ctx, args)
            seen.append(compat.command_words(ctx))
            return rest

    app = typer.Typer(cls=Group)

    @app.callback()
    def main() -> None:
        pass

    @app.command()
    def other(word: str) -> None:
        seen.append([word])

    assert CliRunner().invoke(app, ["other", "x"]).exit_code == 0
    assert seen == [["other", "x"], ["x"]]
