"""Todo store scale: ``/todos`` and the todo tools on 20,000 and 100,000 items.

The REPL runs with its input and output on pipes; ``/todos`` (first screenful
and a count) and ``/todos all`` (every item) are timed from the command to its
last line. The tools are timed through the registry, best of three, each
beside the floor of any JSON store of that size measured in the same run:
``json.loads`` of the file plus a compact ``json.dumps`` of its data. For
context, what the writes did before: the pure-Python pretty printer
(``indent=2``) and a deep copy of the list on every update.
"""

from __future__ import annotations

import copy
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import ROOT, isolated_env, row, scratch, target

STEP_FACTOR = 3.0  # a write may cost this many times the floor (as in tests/reliability/test_todo_scale.py)


def make_store(path: Path, count: int) -> None:
    todos = [{"id": f"todo-{n:03d}", "title": f"task number {n}", "detail": "some detail " * 3,
              "status": "todo" if n % 3 else "done", "priority": ("low", "medium", "high")[n % 3],
              "due": None, "tag": None, "created_at": "2025-01-01T09:00:00+00:00",
              "updated_at": "2025-01-01T09:00:00+00:00"} for n in range(1, count + 1)]
    path.write_text(json.dumps({"version": 1, "todos": todos}, ensure_ascii=False), "utf-8")


def best(fn: Callable[[], Any], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def tools(path: Path, count: int) -> dict[str, float]:
    from tools.registry import Registry
    from tools.todos import make_todo_tools

    registry = Registry(make_todo_tools(path))
    raw = path.read_bytes()
    data = json.loads(raw)
    open_ids = iter(range(3 * (count // 6) + 1, count, 3))  # 3k+1: items still open

    def call(name: str, args: dict[str, Any]) -> None:
        result = registry.call(name, args)
        if not result.get("ok"):
            raise RuntimeError(f"{name} failed: {result}")

    return {
        "floor": best(lambda: json.dumps(json.loads(raw), ensure_ascii=False)),
        "old pretty print": best(lambda: json.dumps(data, ensure_ascii=False, indent=2), 1),
        "old deep copy": best(lambda: copy.deepcopy(data["todos"]), 1),
        "list_todos (a page)": best(lambda: call("list_todos", {})),
        "get_todo": best(lambda: call("get_todo", {"todo_id": f"todo-{count // 2}"})),
        "add_todo": best(lambda: call("add_todo", {"title": "one more"})),
        "complete_todo": best(lambda: call("complete_todo", {"todo_id": next(open_ids)})),
        "update_todo": best(lambda: call("update_todo", {"todo_id": next(open_ids), "title": "renamed"})),
        "delete_todo": best(lambda: call("delete_todo", {"todo_id": next(open_ids)})),
    }


def repl_commands(env: dict[str, str], count: int) -> dict[str, float]:
    """Seconds from sending ``/todos`` (and ``/todos all``) to the last line it prints."""
    child = subprocess.Popen([sys.executable, "-m", "repl.cli", "--base-url", "http://127.0.0.1:9/v1"],
                             cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
    assert child.stdin is not None and child.stdout is not None
    seen = b""

    def until(marker: bytes) -> None:
        nonlocal seen
        deadline = time.monotonic() + 600
        while marker not in seen and time.monotonic() < deadline:
            if select.select([child.stdout], [], [], 0.1)[0]:
                chunk = os.read(child.stdout.fileno(), 1 << 16)
                if not chunk:
                    raise RuntimeError(f"the REPL ended before printing {marker!r}")
                seen += chunk
        if marker not in seen:
            raise RuntimeError(f"no {marker!r} after 600 s")
        seen = seen[seen.index(marker) + len(marker):]

    def timed(line: bytes, marker: bytes) -> float:
        started = time.monotonic()
        child.stdin.write(line)  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
        until(marker)
        return time.monotonic() - started

    try:
        until(b"session")
        figures = {"/todos": timed(b"/todos\n", b"/todos all"),
                   "/todos all": timed(b"/todos all\n", f"task number {count}\n".encode())}
    finally:
        child.communicate(timeout=60)
    return figures


def run(quick: bool) -> dict[str, Any]:
    sizes = [2_000] if quick else [20_000, 100_000]
    rows, figures = [], {}
    for count in sizes:
        with scratch("todos") as folder:
            env = isolated_env(folder)
            path = folder / "todos.json"
            env["GLASSLOOP_TODOS_FILE"] = str(path)
            make_store(path, count)
            size_mb = path.stat().st_size / 1e6
            commands = repl_commands(env, count)
            measured = tools(path, count)
        figures[count] = {**commands, **measured, "file_mb": size_mb}
        label = f"{count:,} todos ({size_mb:.1f} MB)"
        for name, seconds in commands.items():
            rows.append(row(f"{label}: {name} in the REPL", seconds, "s", "command sent → last line"))
        floor = measured["floor"]
        for name, seconds in measured.items():
            note = "json.loads + json.dumps: any JSON store" if name == "floor" else f"{seconds / floor:.1f}x the floor"
            rows.append(row(f"{label}: {name}", seconds, "s", note))
    big = figures[sizes[-1]]
    writes = max(big[name] for name in ("add_todo", "complete_todo", "update_todo", "delete_todo"))
    return {
        "name": "todo_scale",
        "rows": rows,
        "targets": {
            "page": target(big["/todos"], 2.0, f"/todos with {sizes[-1]:,} todos <= 2 s"),
            "writes": target(writes / big["floor"], STEP_FACTOR,
                             f"every write with {sizes[-1]:,} todos <= {STEP_FACTOR}x the floor"),
        },
        "params": {"sizes": sizes},
        "figures": {str(k): v for k, v in figures.items()},
    }
