"""The import graph holds the design's lines: one home per library, tools/ apart from repl/.

Modules are parsed with ``ast``, never imported, so an import inside a function,
under ``TYPE_CHECKING`` or through ``importlib`` counts as much as one at the top.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from tests.support import parse_source

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("repl", "tools")

# library -> the only places (a folder ending in "/" or a file) that may import it
HOMES: dict[str, tuple[str, ...]] = {
    "openai": ("repl/providers/",),
    "rich": ("repl/ui/",),
    "markdown_it": ("repl/ui/",),  # Rich's Markdown parser
    "prompt_toolkit": ("repl/ui/",),
    "typer": ("repl/cli.py",),
    "jsonschema": ("tools/registry.py", "tools/validation.py"),
    "mcp": ("tools/mcp_client.py", "tools/mcp_convert.py"),
    "dateparser": ("tools/days.py",),  # a day as people say it -> a date
    # the local model runs in its own server process (llama_server.py: its program, the one
    # place its internals are touched); glassloop itself uses only the pure-Python JSON-schema
    # converter, to build the grammar of valid tool calls
    "llama_cpp": ("repl/embedded/grammar.py", "repl/embedded/llama_server.py"),
}
# Loaded by none of the start-up path (`glassloop` must show its prompt fast).
HEAVY_AT_START = ("openai", "pydantic", "rich.markdown", "jsonschema", "httpx", "httpx2", "mcp", "llama_cpp",
                  "dateparser")


def source_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
                  if "__pycache__" not in p.parts)


def _relative_base(path: Path, level: int, root: Path) -> list[str]:
    """The package a ``from .`` (level 1), ``from ..`` (level 2) ... import starts from."""
    package = list(path.relative_to(root).parts[:-1])  # a module's (or __init__'s) package
    return package[: len(package) - (level - 1)]


def _dynamic_target(node: ast.Call) -> str | None:
    """``importlib.import_module("x")`` / ``import_module("x")`` / ``__import__("x")``."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def imports(path: Path, root: Path = ROOT, names: bool = False) -> Iterator[tuple[str, int]]:
    """(absolute dotted module name, line) of every import in ``path``; with ``names``, each name
    of ``from pkg import name`` too as ``pkg.name`` (it may be a module of the package)."""
    tree = parse_source(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _relative_base(path, node.level, root) if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            yield module, node.lineno
            if not node.module or names:  # "from . import x": x is a module of the package
                yield from ((f"{module}.{alias.name}", node.lineno) for alias in node.names)
        elif isinstance(node, ast.Call):
            target = _dynamic_target(node)
            if target is not None:
                yield target, node.lineno


@cache
def _imports_of(path: Path, stamp: tuple[int, int]) -> tuple[tuple[str, int], ...]:
    """``imports(path)``, parsed once per version of the file (``stamp``: mtime and size)."""
    return tuple(imports(path))


def import_table() -> list[tuple[str, str, int]]:
    """(file relative to the repo, imported module, line) for every module of repl/ and tools/."""
    return [(p.relative_to(ROOT).as_posix(), module, line) for p in source_files()
            for module, line in _imports_of(p, (p.stat().st_mtime_ns, p.stat().st_size))]


def _top(module: str) -> str:
    return module.split(".", 1)[0]


def test_every_module_is_parsed() -> None:
    files = {p.relative_to(ROOT).as_posix() for p in source_files()}
    assert {"repl/cli.py", "repl/ui/render.py", "tools/registry.py"} <= files
    assert len(files) > 20


@pytest.mark.parametrize("library", sorted(HOMES))
def test_each_library_is_imported_only_in_its_home(library: str) -> None:
    homes = HOMES[library]
    strays = [f"{path}:{line} imports {module}" for path, module, line in import_table()
              if _top(module) == library and not any(path.startswith(h) for h in homes)]
    assert strays == [], f"{library} may only be imported in {homes or 'no module'}"


@pytest.mark.parametrize("library", sorted(lib for lib, homes in HOMES.items() if homes))
def test_each_home_is_where_its_library_is_used(library: str) -> None:
    """Guards the scanner: a rule about a library nobody imports would hold vacuously."""
    users = {path for path, module, _ in import_table() if _top(module) == library}
    assert any(path.startswith(h) for path in users for h in HOMES[library])


def test_tools_never_import_repl() -> None:
    strays = [f"{path}:{line} imports {module}" for path, module, line in import_table()
              if path.startswith("tools/") and _top(module) == "repl"]
    assert strays == []


def test_the_scanner_sees_lazy_relative_and_dynamic_imports(tmp_path: Path) -> None:
    package = tmp_path / "tools" / "sub"
    package.mkdir(parents=True)
    module = package / "mod.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import rich.text\n"
        "def f():\n    from openai import OpenAI\n"
        "from ..registry import Tool\n"
        "from . import helpers\n"
        "import importlib\nimportlib.import_module('typer')\n__import__('mcp.client')\n",
        encoding="utf-8",
    )
    found = {name for name, _ in imports(module, tmp_path)}
    assert {"rich.text", "openai", "tools.registry", "tools.sub.helpers", "typer",
            "mcp.client"} <= found


def test_importing_the_cli_stays_light() -> None:
    code = ("import json, sys\nimport repl.cli\n"
            f"print(json.dumps([m for m in {list(HEAVY_AT_START)!r} if m in sys.modules]))\n"
            "print(json.dumps('repl.cli' in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded, cli_loaded = (json.loads(line) for line in done.stdout.splitlines()[-2:])
    assert cli_loaded is True
    assert loaded == [], f"importing repl.cli loads {loaded}; import them where they are used"


def test_no_test_module_imports_another() -> None:
    """Shared fixtures live in tests/conftest.py, shared helpers in plain modules (tests/support.py,
    tests/terminal.py): importing a test module runs its fixtures' and tests' definitions twice."""
    tests = ROOT / "tests"
    strays = [f"{path.relative_to(ROOT).as_posix()}:{line} imports {module}"
              for path in sorted(tests.rglob("*.py")) if "__pycache__" not in path.parts
              for module, line in imports(path)
              if module.startswith("tests.") and module.rsplit(".", 1)[-1].startswith("test_")]
    assert strays == []


def test_typer_keeps_pydantic_off_the_start_path(tmp_path: Path) -> None:
    """pyproject pins ``typer<0.29``: Typer 0.29 validates options with pydantic, ~0.1 s more on
    every start. Here the real command line is parsed (the main callback and a subcommand run)
    and pydantic must not be loaded. When a newer Typer passes this, the pin can be lifted."""
    code = ("import atexit, sys\n"
            "atexit.register(lambda: print('pydantic' in sys.modules, 'typer' in sys.modules))\n"
            "from repl.cli import main\nmain()\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_STATE_HOME": str(tmp_path / "state"),
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code, "--yes", "--model", "m", "config"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    pydantic_loaded, typer_loaded = done.stdout.split()[-2:]
    assert typer_loaded == "True", "the command line did not go through Typer"
    assert pydantic_loaded == "False", "parsing glassloop's options loads pydantic (Typer >= 0.29?)"


def test_every_package_is_installed() -> None:
    """A sub-package missing from pyproject's list works in an editable install and nowhere else."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
                 ["tool"]["setuptools"]["packages"])
    found = {str(init.parent.relative_to(ROOT)).replace("/", ".")
             for top in ("repl", "tools") for init in (ROOT / top).rglob("__init__.py")}
    assert found == listed


# The packages of repl/ and what of ours each may import: a module or a package, with everything
# under it; a package's own modules are always allowed. Bottom up: tools/ (never imports repl/),
# config, loop (with the providers behind the Provider protocol), tracing, ui, archive, session\n# (its core, then the trials, then its doors), cli.
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "repl.config": ("tools",),  # settings and where their values come from: nothing else of ours
    # the loop sees a provider through its protocol only (providers/base.py), never an adapter
    "repl.loop": ("repl.config", "repl.providers.base", "tools"),
    # below the loop: an adapter imports nothing of it (Usage and the system text's layout live
    # in providers/base.py, which the loop imports)
    "repl.providers": ("repl.config", "tools"),
    # the embedded model's routers: the loop's routing types, the providers' parts
    "repl.embedded": ("repl.config", "repl.loop", "repl.providers", "tools"),
    "repl.tracing": ("repl.config", "repl.loop", "repl.ui.escape", "tools"),  # escape: pure, no Rich
    # the terminal draws events and answers the loop's questions: no providers, tools or session
    "repl.ui": ("repl.config", "repl.loop"),
    # what a session leaves behind (journal, recap, search index): nothing of the live session,
    # which writes and reads it
    "repl.archive": ("repl.config", "repl.loop", "repl.providers.base", "repl.tracing", "repl.ui.escape",
                     "tools"),
    "repl.session": ("repl.archive", "repl.config", "repl.embedded", "repl.loop", "repl.providers",
                     "repl.tracing", "repl.trials", "repl.ui", "tools"),
    # models on trial (/compare, replay, eval): dry runs of the session's core, above it and below
    # the session's doors (test_only_a_door_runs_a_trial)
    "repl.trials": ("repl.archive", "repl.config", "repl.loop", "repl.providers.base", "repl.session.core",
                    "repl.session.runtime", "repl.ui", "tools"),
    # and the one home of the private APIs it relies on (click's context, the interpreter's exit)
    "repl.cli": ("repl", "repl.archive", "repl.config", "repl.loop", "repl.session", "repl.tracing", "repl.trials",
                 "repl.ui", "tools.compat"),
}
# (file, module) imports against those directions, each with its reason; the list only shrinks
CROSSINGS: dict[tuple[str, str], str] = {}


def _package(name: str) -> str:
    """``repl/loop/agent.py`` or ``repl.loop.agent`` -> ``repl.loop``; ``repl/cli.py`` -> ``repl.cli``."""
    parts = name.removesuffix(".py").replace("/", ".").split(".")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return "tools" if parts[0] == "tools" else ".".join(parts[:2])


def _ours(module: str) -> bool:
    return _top(module) in PACKAGES


def test_the_top_of_repl_holds_only_the_command_line_and_packages() -> None:
    """A directory listing of repl/ is its architecture: every module lives in a package by concept."""
    top = sorted(p.name for p in (ROOT / "repl").glob("*.py"))
    assert top == ["__init__.py", "cli.py"], f"move {sorted(set(top) - {'__init__.py', 'cli.py'})} into a package"
    packages = {f"repl.{p.parent.name}" for p in (ROOT / "repl").glob("*/__init__.py")}
    assert packages | {"repl.cli"} == set(MAY_IMPORT), "each package of repl/ has its row in MAY_IMPORT"


def test_packages_import_each_other_only_downwards() -> None:
    strays = []
    for path, module, line in import_table():
        if not path.startswith("repl/") or not _ours(module):
            continue
        source, target = _package(path), _package(module)
        allowed = MAY_IMPORT.get(source, ())
        if (target == source or any(module == a or module.startswith(a + ".") for a in allowed)
                or (path, module) in CROSSINGS):
            continue
        strays.append(f"{path}:{line} imports {module}")
    assert strays == [], "see MAY_IMPORT in tests/test_architecture.py (and docs/DESIGN.md, Packages)"


# The live session's doors: the REPL (its start, `!command` and slash commands) and `glassloop ask`.
# Below them the session's core, which the trials run and which writes and reads the archive.
DOORS = ("repl.session.chat", "repl.session.commands", "repl.session.oneshot", "repl.session.start",
         "repl.session.user_shell")


def _module(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _under(module: str, names: tuple[str, ...]) -> bool:
    return any(module == n or module.startswith(n + ".") for n in names)


def test_the_archive_and_the_trials_import_no_door() -> None:
    strays = [f"{path}:{line} imports {module}" for path, module, line in import_table()
              if _package(path) in ("repl.archive", "repl.trials") and _under(module, DOORS)]
    assert strays == []


def test_only_a_door_runs_a_trial() -> None:
    """A trial runs the session's core, so of the session only a door or a command (``/compare``)
    imports one: the session's core never does, and the packages stay one way module by module."""
    runs = [(path, module, line) for path, module, line in import_table()
            if _package(path) == "repl.session" and _package(module) == "repl.trials"]
    assert [f"{path}:{line} imports {module}" for path, module, line in runs
            if not _under(_module(path), DOORS)] == []
    assert runs, "no door runs a trial: drop repl.trials from the session's row of MAY_IMPORT"
    assert set(DOORS) <= set(_module_graph()), "a door of DOORS is gone: name it again"


def test_each_crossing_is_still_needed() -> None:
    table = {(path, module) for path, module, _ in import_table()}
    assert [c for c in CROSSINGS if c not in table] == [], "that crossing is gone: drop it from CROSSINGS"


def test_the_direction_rules_see_every_package() -> None:
    """Guards the rule against holding vacuously: each package is found importing something of ours."""
    sources = {_package(path) for path, module, _ in import_table() if path.startswith("repl/") and _ours(module)}
    assert set(MAY_IMPORT) <= sources
    assert _package("repl/loop/agent.py") == _package("repl.loop.agent") == "repl.loop"
    assert _package("repl/cli.py") == "repl.cli" and _package("tools.store") == "tools"


# The hosted path: the wire adapters and what they stand on. None of them imports the embedded
# model's package (its server, weights, grammar, text calls, dialect, routers), even in a function
# or under TYPE_CHECKING, nor imports a module that does: a session on a hosted model reads and
# runs without it. The session picks the embedded package's adapter (runtime.make_provider).
HOSTED = ("repl/providers/base.py", "repl/providers/chat.py", "repl/providers/endpoint.py",
          "repl/providers/errors.py", "repl/providers/responses.py", "repl/providers/sdk.py")
EMBEDDED = "repl.embedded"


def test_the_hosted_path_never_imports_the_embedded_model() -> None:
    graph = _module_graph()
    reached: dict[str, str] = {}  # module -> the hosted module it is imported from
    todo = [_module_name(path) for path in HOSTED]
    for module in todo:
        for target in sorted(graph.get(module, ())):
            if target not in reached and target not in todo:
                reached[target] = reached.get(module, module)
                todo.append(target)
    strays = [f"{reached[m]} imports {m}" for m in todo
              if m == EMBEDDED or m.startswith(EMBEDDED + ".")]
    assert strays == [], "the hosted path reads and runs without repl.embedded"


def test_the_hosted_path_is_every_module_of_the_providers() -> None:
    """Guards the rule: a module added to repl/providers/ is on the hosted path, and is checked."""
    found = {p.relative_to(ROOT).as_posix() for p in (ROOT / "repl" / "providers").glob("*.py")}
    assert found - {"repl/providers/__init__.py"} == set(HOSTED)
    assert "repl.embedded.textchat" in _module_graph(), "the rule looks for a package that exists"


def _module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


def _module_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (a package: its ``__init__``), each import as
    written: at the top, in a function or under ``TYPE_CHECKING``."""
    modules = {p.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
               for p in source_files()}

    def module_of(name: str) -> str | None:  # "repl.loop.unicode.valid_text" -> "repl.loop.unicode"
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for path in source_files():
        source = module_of(path.relative_to(ROOT).with_suffix("").as_posix().replace("/", "."))
        assert source is not None
        targets = {module_of(name) for name, _ in imports(path, names=True) if _ours(name)}
        graph[source] = {t for t in targets if t is not None and t != source}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each import circle once (depth-first: an edge back to a module on the path closes one),
    as the modules from the first in order around the circle."""
    found: dict[tuple[str, ...], list[str]] = {}
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if target in path:
                circle = path[path.index(target):]
                start = circle.index(min(circle))
                circle = circle[start:] + circle[:start]
                found.setdefault(tuple(circle), circle)
            elif target not in done:
                visit(target, path)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module, [])
    return list(found.values())


# Import circles there are, each with its reason; the list only shrinks.
CIRCLES: dict[tuple[str, ...], str] = {}


def test_no_module_imports_itself_through_others() -> None:
    """Modules import one way: no circle of imports in repl/ or tools/. An import under
    ``TYPE_CHECKING`` or inside a function counts: it hides a circle from the interpreter,
    not from a reader (or mypy), whose types then still run both ways."""
    found = [" -> ".join([*c, c[0]]) for c in cycles(_module_graph()) if tuple(c) not in CIRCLES]
    assert found == [], "cut each circle where a concept ends (a type in a module of its own ...)"


def test_each_listed_circle_is_still_there() -> None:
    found = {tuple(c) for c in cycles(_module_graph())}
    assert [c for c in CIRCLES if c not in found] == [], "that circle is gone: drop it from CIRCLES"


def test_the_cycle_search_finds_a_circle() -> None:
    """Guards the rule against holding vacuously: a circle made under TYPE_CHECKING is one."""
    graph = _module_graph()
    assert "repl.config.settings" in graph["repl.config.schema"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({**graph, "repl.config.settings": {"repl.config.trust"}})  # the circle cut here


def test_the_conversations_message_carries_no_field_of_one_model() -> None:
    """The loop's note for one call is an overlay of the request (``Noted``), read through one
    function; ``Message``, what the history keeps and every adapter converts, has no such field."""
    from typing import get_type_hints

    from repl.providers.base import Message, Noted, note_of

    assert "note" not in get_type_hints(Message) and "note" in get_type_hints(Noted)
    said: Noted = {"role": "user", "content": "hi\n\nAnswer again.", "note": "Answer again."}
    assert note_of(said) == "Answer again." and note_of({"role": "user", "content": "hi"}) == ""
    read = re.compile(r"""\.get\(\s*["']note["']|\[\s*["']note["']\s*\]""")
    readers = [path.name for path in sorted((ROOT / "repl").rglob("*.py")) if read.search(path.read_text("utf-8"))]
    assert readers == ["base.py"], readers  # read by ``note_of`` alone
