"""The user's own tools in a session: where they come from, loading off the start path, reload.

Sources, in load order: installed packages (``glassloop.tools`` entry points, loaded
once), ``<user config dir>/tools/*.py``, the project's ``./.glassloop/tools/*.py``
when trusted (checked again over the very bytes that run), and ``--tools FILE``.
A session loads them in a background thread (:meth:`UserTools.start`) and its first
turn waits for it; ``/tools reload`` runs the files again. The loader itself
(``tools.user_loader``) is imported on that thread: none of this is on the start path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repl.config.load import Settings
from repl.config.project import ToolsTrust
from repl.config.schema import ConfigError, printable
from repl.config.trust import PROJECT_TOOLS, record, tools_notice, tools_trusted
from tools.registry import Registry

LOCK_WAIT_S = 30.0  # /tools reload waits this long for a load still running


@dataclass(frozen=True)
class Report:
    tools: int  # user tools now registered (files and packages)
    files: int  # tool files run
    problems: list[str]


class UserTools:
    def __init__(self, settings: Settings, registry: Registry, notify: Callable[[str], None],
                 confirm: Callable[[str], bool] | None = None, cwd: Path | None = None) -> None:
        self.settings, self.registry, self.notify = settings, registry, notify
        self.confirm = confirm  # asks to trust a changed project folder on reload; None: never asks
        folder = settings.project_tools.path if settings.project_tools else (cwd or Path.cwd()) / PROJECT_TOOLS
        self.project_folder = folder
        self._files: list[str] = []  # names of the registered tools from files
        self._packages: list[str] = []
        self._modules: list[str] = []
        self._packages_loaded = False
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._done.set()

    def start(self) -> UserTools:
        """Load in a background thread; problems go to ``notify``."""
        self._done.clear()
        threading.Thread(target=self._background, daemon=True, name="glassloop-user-tools").start()
        return self

    def _background(self) -> None:
        try:
            for line in self.load(ask=False).problems:
                self.notify(line)
        except Exception as exc:  # noqa: BLE001 - a bug here must not kill the session
            self.notify(f"user tools not loaded: {type(exc).__name__}: {exc}")
        finally:
            self._done.set()

    def wait(self, timeout_s: float) -> None:
        self._done.wait(timeout_s)

    def load(self, ask: bool = False) -> Report:
        """(Re)load: packages the first time, the files every time. ``ask``: a changed or
        new project folder may be trusted through ``confirm``."""
        from tools.user_api import set_store_folder
        from tools.user_loader import forget, load_entry_points, load_sources

        if not self._lock.acquire(timeout=LOCK_WAIT_S):
            return Report(len(self.names()), 0, ["your tools are still loading (a tool file may hang "
                                                 "while it is imported); nothing was reloaded"])
        try:
            set_store_folder(self.settings.data_dir / "stores")
            problems: list[str] = []
            if not self._packages_loaded:
                self._packages_loaded = True
                self._packages = self._register(load_entry_points(self._taken()), problems)
            self.registry.remove_names(self._files)
            forget(self._modules)
            sources = self._sources(problems, ask)
            loaded = load_sources(sources, self._taken())
            self._modules = loaded.modules
            self._files = self._register(loaded, problems)
            return Report(len(self._files) + len(self._packages), len(sources), problems)
        finally:
            self._lock.release()

    def reload(self) -> Report:
        return self.load(ask=True)

    def names(self) -> list[str]:
        return [*self._packages, *self._files]

    def _taken(self) -> dict[str, str]:
        return {name: tool.source for name in self.registry.names()
                if (tool := self.registry.get(name)) is not None}

    def _register(self, loaded: Any, problems: list[str]) -> list[str]:
        problems += loaded.problems
        names = []
        for tool in loaded.tools:  # one by one: an MCP server may have taken a name meanwhile
            try:
                refused = self.registry.add([tool])
            except ValueError:
                other = self.registry.get(tool.name)
                problems.append(f"{tool.source}: tool {tool.name}: the name is taken by "
                                f"{other.source if other else 'another tool'}; skipped")
                continue
            problems += [f"{tool.source}: {line}" for line in refused]
            names += [] if refused else [tool.name]
        return names

    def _sources(self, problems: list[str], ask: bool) -> list[Any]:
        from tools.user_loader import read_sources, tool_files

        sources = read_sources(tool_files(self.settings.config_dir / "tools"))
        project = read_sources(tool_files(self.project_folder), root=self.project_folder.parents[1])
        if project and self._project_trusted(project, ask, problems):
            sources += project
        return sources + read_sources(self.settings.tool_files)

    def _project_trusted(self, sources: list[Any], ask: bool, problems: list[str]) -> bool:
        """Whether these exact bytes may run: ``trust_project_tools``, a trust record, or a yes."""
        from tools.user_loader import digest

        if self.settings.trust_project_tools:
            return True
        folder = self.project_folder
        sha = digest(sources, folder)  # the files they may import too
        if tools_trusted(folder, sha):
            return True
        tools = ToolsTrust(folder, sha, False, tuple(s.path.name for s in sources))
        if ask and self.confirm is not None:
            names = printable(", ".join(tools.files))
            if self.confirm(f"{printable(str(folder))} holds tool files not trusted in this content "
                            f"({names}); they run as Python code. Trust them?"):
                try:
                    record(tools)
                except ConfigError as exc:  # trusted for this session only
                    problems.append(str(exc))
                return True
        if ask:  # at the start the command line already said so (or asked)
            problems.append(tools_notice(tools))
        return False
