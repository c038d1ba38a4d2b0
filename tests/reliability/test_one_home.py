"""One home per concern: a change to how files are replaced, how a missing call id is
made or how a cost is written happens in one place.

Like ``test_architecture``, modules are parsed, never imported; code inside a string
(the local model server's child scripts) does not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import parse_source

ROOT = Path(__file__).resolve().parent.parent.parent


def source_files() -> list[Path]:
    return sorted(p for pkg in ("repl", "tools") for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts)


def _calls(attrs: set[tuple[str, str]]) -> dict[str, list[int]]:
    """Where ``module.function(...)`` is called, for each (module, function) in ``attrs``."""
    found: dict[str, list[int]] = {}
    for path in source_files():
        for node in ast.walk(parse_source(path)):
            func = node.func if isinstance(node, ast.Call) else None
            if isinstance(func, ast.Attribute) and (getattr(func.value, "id", None), func.attr) in attrs:
                found.setdefault(path.relative_to(ROOT).as_posix(), []).append(node.lineno)
    return found


def _fstrings(predicate) -> list[str]:
    out = []
    for path in source_files():
        for node in ast.walk(parse_source(path)):
            if isinstance(node, ast.JoinedStr) and predicate(node):
                out.append(f"{path.relative_to(ROOT).as_posix()}:{node.lineno}")
    return out


def _text(node: ast.JoinedStr) -> str:
    return "".join(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.format_spec or v).strip()
                   + "}" for v in node.values)


def test_files_are_replaced_atomically_in_one_place() -> None:
    places = _calls({("os", "replace"), ("os", "rename"), ("tempfile", "mkstemp"),
                     ("tempfile", "NamedTemporaryFile")})
    # tools.safe_io.atomic_write; and the embedded server's own program, which runs isolated
    # (python -I, none of glassloop importable) and saves the prompt state the same way
    assert set(places) == {"tools/safe_io.py", "repl/embedded/llama_server.py"}, places


def test_a_missing_call_id_is_made_in_one_place() -> None:
    made = _fstrings(lambda n: isinstance(n.values[0], ast.Constant) and n.values[0].value == "call_")
    assert [m.split(":")[0] for m in made] == ["repl/providers/base.py"], made  # new_call_id()


def test_a_cost_is_written_in_one_place() -> None:
    written = _fstrings(lambda n: "$" in _text(n) and ".4f" in _text(n))
    assert [w.split(":")[0] for w in written] == ["repl/loop/cost.py"], written  # format_usd()


def test_turns_are_chosen_in_one_place() -> None:
    defined = [f"{p.relative_to(ROOT).as_posix()}:{n.name}" for p in source_files()
               for n in ast.walk(parse_source(p))
               if isinstance(n, ast.FunctionDef) and "pick_turns" in n.name]
    assert defined == ["repl/tracing/timeline.py:pick_turns"], defined


def test_brackets_are_balanced_by_one_scanner() -> None:
    """A scanner keeps a depth or a stack of open brackets: only ``tools.registry.JsonScan`` does."""
    scanners = []
    for path in source_files():
        for node in ast.walk(parse_source(path)):
            if isinstance(node, ast.Compare) and any(isinstance(c, ast.Constant) and c.value in ("{", "{[")
                                                    for c in node.comparators):
                scanners.append(f"{path.relative_to(ROOT).as_posix()}:{node.lineno}")
    assert {s.split(":")[0] for s in scanners} == {"tools/registry.py"}, scanners


def _imported(path: Path) -> set[str]:
    return {n.module or "" for n in ast.walk(parse_source(path))
            if isinstance(n, ast.ImportFrom)}


def test_the_config_modules_import_no_circle() -> None:
    """``config`` builds Settings, ``config_show`` lists them: neither imports the other."""
    assert "repl.config.show" not in _imported(ROOT / "repl" / "config" / "load.py")
    assert "repl.config.load" not in _imported(ROOT / "repl" / "config" / "show.py")
