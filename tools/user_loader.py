"""Loading the user's own tools: Python files and installed packages.

Files (every ``*.py`` of a folder, or one named file) are read once, compiled from
those bytes (so a trust check over the same bytes holds for what runs, and an edit
is picked up at once by a reload) and run as fresh modules. Packages declare tools
in the ``glassloop.tools`` entry-point group: the value is a module holding
``@tool`` functions, one such function or a list of them.

Nothing here raises for a bad file: a syntax error, a failing import, a tool whose
parameters cannot make a schema, a name that is not allowed or already taken, each
becomes one line naming the file, the line and the tool; every other tool loads.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import re
import stat
import sys
import threading
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tools.folder_files import Refused, read_folder_file
from tools.registry import Tool
from tools.user_api import MARK, Declared, collecting

ENTRY_POINT_GROUP = "glassloop.tools"
MAX_FILE_BYTES = 1_000_000
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what the model APIs accept
_load_lock = threading.Lock()  # @tool collection is per thread; sys.modules edits are not


@dataclass(frozen=True)
class Source:
    """A tool file as read: its bytes, or why it could not be read."""

    path: Path
    data: bytes | None
    problem: str = ""
    real: Path | None = None  # where it was read from, once links are resolved

    def listed(self) -> str:
        """One line for a trust listing: the file read and its hash, or why it was not."""
        if self.data is None:
            return self.problem
        return f"{self.path.name}: {self.real} (sha256 {hashlib.sha256(self.data).hexdigest()[:12]}…)"


@dataclass
class Loaded:
    tools: list[Tool] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line each: what was skipped or left out
    modules: list[str] = field(default_factory=list)  # names added to sys.modules

    def extend(self, other: Loaded) -> None:
        self.tools += other.tools
        self.problems += other.problems
        self.modules += other.modules


def tool_files(folder: Path) -> list[Path]:
    """The folder's ``*.py`` files (not ``_x.py`` or ``.x.py``), by name; [] when it has none."""
    try:
        names = sorted(p for p in Path(folder).glob("*.py") if not p.name.startswith(("_", ".")))
    except OSError:
        return []
    return [p for p in names if not p.is_dir()]


def read_sources(paths: Iterable[Path], root: Path | None = None) -> list[Source]:
    """The files at ``paths`` as read by the rules of a folder's files (``root``: the folder they
    must stay inside once links are resolved; None for the user's own)."""
    out = []
    for path in paths:
        try:
            read = read_folder_file(Path(path), MAX_FILE_BYTES, root=root)
        except Refused as exc:
            out.append(Source(path, None, exc.message.replace(" not read: ", ": ", 1)))
            continue
        if read is None:
            out.append(Source(path, None, f"{path}: no such file"))
        else:
            out.append(Source(path, read.data, real=read.real))
    return out


def digest(sources: Iterable[Source], folder: Path | None = None) -> str:
    """SHA-256 over the files' names and bytes, in name order (what a trust record binds to);
    with ``folder``, also over every other file in it that Python could import, at any depth:
    the ``_helper.py``, package or compiled extension a tool file may import (``__pycache__``,
    which Python writes itself, left out)."""
    h = hashlib.sha256()
    ran = sorted(sources, key=lambda s: s.path.name)
    entries = [(s.path.name, s.data or b"") for s in ran]
    if folder is not None:
        names = {s.path.name for s in ran}
        entries += [(name, _file_sha256(path)) for name, path in _importable(Path(folder)) if name not in names]
    for name, data in entries:
        h.update(name.encode("utf-8", "surrogateescape") + b"\0")
        h.update(len(data).to_bytes(8, "big") + data)
    return h.hexdigest()


_IMPORTABLE = tuple(importlib.machinery.all_suffixes())  # .py, .pyc, the extension modules' suffixes


def _importable(folder: Path) -> list[tuple[str, Path]]:
    """(path relative to ``folder``, path) of each file under it with a suffix Python imports,
    in order; a symlinked folder is followed once."""
    found, seen = [], set()
    for root, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:
            dirs.clear()
            continue
        seen.add(real)
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        paths = [Path(root, name) for name in files if name.endswith(_IMPORTABLE)]
        found += [(path.relative_to(folder).as_posix(), path) for path in paths]
    return sorted(found)


def _file_sha256(path: Path) -> bytes:
    """The SHA-256 of a regular file's bytes; a FIFO or device is never read (its kind stands in)."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                return b"not a regular file"
            return hashlib.file_digest(file, "sha256").digest()
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}".encode()


def forget(modules: Iterable[str]) -> None:
    """Drop modules of an earlier load, so a reload runs the files anew."""
    for name in modules:
        sys.modules.pop(name, None)


def _ensure_public_module() -> None:
    """Make ``glassloop_tools`` importable even from an editable install made before it existed."""
    if "glassloop_tools" in sys.modules or importlib.util.find_spec("glassloop_tools") is not None:
        return
    path = Path(__file__).resolve().parent.parent / "glassloop_tools.py"
    spec = importlib.util.spec_from_file_location("glassloop_tools", path)
    if spec is None or spec.loader is None or not path.is_file():
        return  # tool files then say: No module named 'glassloop_tools'
    module = importlib.util.module_from_spec(spec)
    sys.modules["glassloop_tools"] = module
    spec.loader.exec_module(module)


def load_sources(sources: Iterable[Source], taken: Mapping[str, str]) -> Loaded:
    """Run each file and collect its tools; ``taken``: names already in use -> their source."""
    loaded, names = Loaded(), dict(taken)
    with _load_lock:
        _ensure_public_module()
        for source in sources:
            if source.data is None:
                loaded.problems.append(f"{source.problem}; no tool from it loaded")
                continue
            declared = _run_file(source.path, source.data, loaded)
            _accept(declared, names, loaded, lambda d: f"{d.file}:{d.line}")
    return loaded


def load_entry_points(taken: Mapping[str, str], group: str = ENTRY_POINT_GROUP) -> Loaded:
    """Tools of the installed packages that declare ``group`` entry points."""
    from importlib.metadata import entry_points

    loaded, names = Loaded(), dict(taken)
    with _load_lock:
        _ensure_public_module()
        try:
            found = sorted(entry_points(group=group), key=lambda ep: (ep.name, ep.value))
        except Exception as exc:  # noqa: BLE001 - broken metadata of some package
            return Loaded(problems=[f"cannot list the {group} entry points: {_one_line(exc)}"])
        for ep in found:
            dist = getattr(getattr(ep, "dist", None), "name", None) or "?"
            label = f"package {dist}: entry point {ep.name} = {ep.value}"
            with collecting() as collected:
                try:
                    target = ep.load()
                except (Exception, SystemExit) as exc:
                    file, line = _where(exc, None)
                    at = f"{file}:{line}: " if line else ""
                    loaded.problems.append(f"{at}{label}: cannot import it: {_one_line(exc)}")
                    continue
            declared = list(collected) or _declared_in(target)
            if not declared:
                loaded.problems.append(f"{label}: holds no @tool function (give a module, a @tool "
                                       "function or a list of them)")
            _accept(declared, names, loaded, lambda d, dist=dist: f"package {dist}")
    return loaded


def _run_file(path: Path, data: bytes, loaded: Loaded) -> list[Declared]:
    """Compile and run one file as a new module; its ``@tool`` functions in order."""
    try:
        code = compile(data, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        loaded.problems.append(f"{path}:{exc.lineno or 1}: syntax error: {exc.msg}; no tool from this file loaded")
        return []
    except ValueError as exc:  # e.g. NUL bytes
        loaded.problems.append(f"{path}:1: cannot compile it: {exc}; no tool from this file loaded")
        return []
    name = f"_glassloop_user_{re.sub(r'[^0-9A-Za-z_]', '_', path.stem)}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses and typing look their module up there
    loaded.modules.append(name)
    with collecting() as collected:
        try:
            exec(code, module.__dict__)  # noqa: S102 - the user's own (or trusted) tool file
        except (Exception, SystemExit) as exc:
            _, line = _where(exc, str(path))
            loaded.problems.append(f"{path}:{line}: cannot load it: {_one_line(exc)}; no tool from this file loaded")
            return []
    return list(collected)


def _accept(declared: list[Declared], names: dict[str, str], loaded: Loaded, source_of: Any) -> None:
    for d in declared:
        where = f"{d.file}:{d.line}: tool {d.name}"
        if d.tool is None:
            loaded.problems.append(f"{where}: {d.problem}; skipped")
        elif not _TOOL_NAME.match(d.name):
            loaded.problems.append(f"{where}: the name may only hold letters, digits, _ and - "
                                   "(at most 64); rename it with @tool(name=...)")
        elif d.name in names:
            other = names[d.name]
            why = "a built-in tool has this name" if other == "built-in" else f"the name is taken by {other}"
            loaded.problems.append(f"{where}: {why}; skipped (rename it with @tool(name=...))")
        else:
            tool = replace(d.tool, source=source_of(d))
            names[d.name] = tool.source
            loaded.tools.append(tool)
            if d.note:
                loaded.problems.append(f"{where}: {d.note}")


def _declared_in(target: Any) -> list[Declared]:
    """The ``@tool`` functions an entry point's object stands for."""
    if isinstance(target, types.ModuleType):
        values = list(vars(target).values())
    elif isinstance(target, (list, tuple)):
        values = list(target)
    else:
        values = [target]
    return [getattr(v, MARK) for v in values if isinstance(getattr(v, MARK, None), Declared)]


_IMPORTLIB = os.path.dirname(importlib.__file__)


def _where(exc: BaseException, path: str | None) -> tuple[str, int]:
    """The file and line an exception came from: in ``path`` when given, else the deepest frame
    outside the import machinery (line 0: none)."""
    tb, best = exc.__traceback__, ("?", 0)
    while tb is not None:
        file = tb.tb_frame.f_code.co_filename
        if (file == path) if path else not file.startswith(("<frozen", _IMPORTLIB)):
            best = (file, tb.tb_lineno)
        tb = tb.tb_next
    if isinstance(exc, SyntaxError) and exc.filename and (path is None or exc.filename == path):
        best = (exc.filename, exc.lineno or 1)
    return best


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
