"""The routers alone, without the model: ``python -m bench.routes [--sets dev,heldout,fresh,fresh2]``.

Each case's message goes through the chain a session on the embedded model routes by (small
talk, the tools' words ranked by meaning, their meaning; ``repl/session/core.py``), over the
tools its set is run with (``bench/local_eval.py``: the fixture's built-in, user and MCP tools;
a set written apart with its own tools and the git server). Per set: the share of tool requests
whose right tool is among those the first call may use (``offered``) and is the first of them
(``first``), the requests sent to no tool, and the controls sent to no tool. A case is decided in
milliseconds (the median and slowest are given: what the routers add to a question), so this is
how a change to a router is seen on every set at once; the model's own
pick among the tools offered is ``bench.local_eval``'s.

Checked per run: the router by meaning loaded, and every case's right tool offered (an MCP server
not started fails the run rather than lowering its figures).

A set written apart is run end to end once (its README): it is left out unless named, and a set
not yet run that way should not be named here either, since its figures would guide the change.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

from bench.local_eval import CASE_FILES, CASES, require_offered, session, written_apart
from repl.loop.routing import RouteRequest
from tools.registry import ToolSchema

DEFAULT_SETS = ("dev", "heldout", "fresh", "fresh2")
# the development sets are read as one
GROUPS = {"dev": [CASE_FILES["dev"], *(CASE_FILES[f"dev{n}"] for n in range(2, 15))],
          "heldout": [CASE_FILES["heldout"]]}


def cases(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """(message, the right first tools: () for a control) of a case file; an MCP tool's name as the
    registry has it (a set may write it "mcp__SERVER__TOOL")."""
    out = []
    for case in tomllib.loads(path.read_text("utf-8"))["case"]:
        tool = case.get("tool") or ()
        names = (tool,) if isinstance(tool, str) else tuple(tool)
        out.append((str(case["message"]), tuple(name.removeprefix("mcp__") for name in names)))
    return out


def figures(core: Any, items: list[tuple[str, tuple[str, ...]]]) -> dict[str, Any]:
    [routing] = core._routing()
    routing.warm()  # the encoder loaded and what the tools say embedded, as before a first question
    if routing.failed:  # routed by the words alone, a run would be faster and its figures other
        raise RuntimeError(f"the router by meaning could not load: {routing.failed}")
    tools: tuple[ToolSchema, ...] = tuple(core.registry.schemas())
    offered = [tool["name"] for tool in tools]
    count: Counter[str] = Counter()
    took = []
    for message, right in items:
        require_offered(list(right), offered, message)  # a server not started fails the run
        start = time.perf_counter()
        choice = routing.router.choose(RouteRequest(message, "", (), tools, asked=False))
        took.append(1000 * (time.perf_counter() - start))
        allowed = choice.allowed if choice is not None and choice.mode != "none" else ()
        if right:
            count["requests"] += 1
            count["offered"] += bool(set(allowed) & set(right))
            count["first"] += bool(allowed) and allowed[0] in right
            count["no_tool"] += not allowed
        else:
            count["controls"] += 1
            count["controls_no_tool"] += not allowed
    pct = lambda part, whole: round(100 * count[part] / count[whole], 1) if count[whole] else None  # noqa: E731
    return {"requests": count["requests"], "offered_pct": pct("offered", "requests"),
            "first_pct": pct("first", "requests"), "no_tool": count["no_tool"],
            "controls": count["controls"], "controls_no_tool_pct": pct("controls_no_tool", "controls"),
            "ms_median": round(statistics.median(took), 1), "ms_max": round(max(took), 1)}


def run(sets: list[str]) -> dict[str, Any]:
    out = {}
    for name in sets:
        paths = GROUPS.get(name) or [CASE_FILES[name]]
        apart = written_apart(paths[0])
        with session("local", dry_run=True, apart=apart) as (core, _):
            core.mcp_ready()
            out[name] = figures(core, [item for path in paths for item in cases(path)])
        print(f"{name:8} {json.dumps(out[name])}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join(DEFAULT_SETS),
                        help=f"comma-separated: dev (all development sets), heldout, or a folder of {CASES}")
    args = parser.parse_args(argv)
    sets = [name.strip() for name in args.sets.split(",") if name.strip()]
    unknown = [name for name in sets if name not in GROUPS and name not in CASE_FILES]
    if unknown:
        print(f"unknown set: {', '.join(unknown)}", file=sys.stderr)
        return 2
    run(sets)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
