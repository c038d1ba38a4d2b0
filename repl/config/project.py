"""What a project folder brings, as read: its config file (``./glassloop.toml``) and its tools
folder (``./.glassloop/tools``), each with the SHA-256 of its content and whether that exact
content is trusted.

``Settings`` carries both (``project``, ``project_tools``); ``repl.config.trust`` makes them
(what needs trust, the trust record). Standard library only: on the start-up path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ProjectTrust:
    """The project file as read: its hash, whether that exact content is trusted, and
    the keys that need trust (dotted key -> value as written)."""

    path: Path
    sha256: str
    trusted: bool
    risky: dict[str, Any] = field(default_factory=dict)

    @property
    def ignored(self) -> dict[str, Any]:
        """The keys kept out because the file is not trusted."""
        return {} if self.trusted else self.risky


@dataclass(frozen=True)
class ToolsTrust:
    """A project's tool folder: its tool files, the SHA-256 over their names and bytes and those
    of every other file there Python could import (``tools.user_loader.digest``), and whether
    that content is trusted (recorded, or ``trust_project_tools = true``)."""

    path: Path
    sha256: str
    trusted: bool
    files: tuple[str, ...]
    listing: tuple[str, ...] = ()  # each file: where it is read from and its hash, or why not
