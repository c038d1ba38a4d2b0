"""``python -m bench NAME [--quick]`` or ``python -m bench all``: table + bench/results/NAME.json.

``python -m bench report`` prints the saved results as Markdown (for docs/BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import RESULTS, ROOT, machine, row, target

# Run order of ``all``: the cheap, CPU-light ones first.
BENCHMARKS = ["time_to_prompt", "mcp_ask", "loop_overhead", "parallel_tools", "memory_resume",
              "context_window", "render_stream", "textcalls", "todo_scale", "search", "local_model", "tool_use",
              "first_conversation", "router_candidates"]


def _local_model(quick: bool) -> dict[str, Any]:
    """bench/local_model.py is a script (``main()``, no ``run``): run it and read its JSON."""
    name = "local_model"
    if quick:
        return {"name": name, "rows": [], "targets": {}, "skipped": "not run with --quick (minutes of CPU)"}
    from repl.embedded.server import missing_extra_message

    problem = missing_extra_message()
    if problem:
        return {"name": name, "rows": [], "targets": {}, "skipped": problem}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "local_model.py")], cwd=ROOT,
                          capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        return {"name": name, "rows": [], "targets": {}, "error": done.stderr.strip()[-2000:]}
    figures = json.loads((RESULTS / "local_model.json").read_text(encoding="utf-8"))
    return {"name": name, "rows": _local_rows(figures), "targets": {}, "figures": figures}


def _local_rows(figures: dict[str, Any], prefix: str = "") -> list[dict[str, Any]]:
    """Every number the script reported, as a row (its keys say the unit: ``*_s``, ``*tok_s``)."""
    rows = []
    for key, value in figures.items():
        label = f"{prefix}{key}"
        if isinstance(value, dict) and key != "machine":
            rows += _local_rows(value, label + ": ")
        elif isinstance(value, int | float) and not isinstance(value, bool):
            unit = "tok/s" if key.endswith("tok_s") else "s" if key.endswith("_s") or key == "seconds" else ""
            rows.append(row(label, float(value), unit))
        elif key == "error":
            rows.append(row(label, float("nan"), "", str(value)[:120]))
    return rows


def _render_stream(module: Any, quick: bool) -> dict[str, Any]:
    """bench/render_stream.py prints its own table from ``main()``; this drives its functions."""
    sizes, repeat, samples = ([100, 200], 1, 6) if quick else ([1000, 5000, 20000], 3, 24)
    module.run_renderer(module.chunks(module.make_answer(300)))  # warm-up: lazy imports
    rows, per_1k, slowest, speedup = [], [], 0.0, 0.0
    for size in sizes:
        pieces = module.chunks(module.make_answer(size))
        runs = [module.run_renderer(pieces) for _ in range(repeat)]
        cpu = min(r.cpu_s for r in runs)
        slowest = max([slowest] + [r.slowest_frame_s for r in runs])
        naive = module.run_naive(pieces) if size <= 1000 else module.estimate_naive(pieces, samples)
        per_1k.append(cpu * 1000 / size)
        speedup = naive.cpu_s / cpu
        rows.append(row(f"{size} tokens: glassloop renderer", cpu, "s CPU",
                        f"{1000 * per_1k[-1]:.1f} ms per 1k tokens"))
        rows.append(row(f"{size} tokens: naive Live(Markdown(text))", naive.cpu_s, "s CPU",
                        ("~estimated, " if naive.estimated else "") + f"{speedup:.0f}x the renderer"))
    rows.append(row("slowest renderer frame", slowest * 1000, "ms"))
    flat = max(per_1k) / min(per_1k)
    return {"name": "render_stream", "rows": rows, "targets": {
        "flat": target(flat, 1.5, "cost per 1k tokens, largest / smallest size <= 1.5"),
        "speedup": target(speedup, 20, f"naive / renderer at {sizes[-1]} tokens >= 20", at_least=True),
        "frame": target(slowest, 0.05, "no frame slower than 50 ms")}}


SCRIPT_ADAPTERS = {"render_stream": _render_stream}  # benchmark modules written as scripts


def run_one(name: str, quick: bool) -> dict[str, Any]:
    if name == "local_model":
        result = _local_model(quick)
    elif importlib.util.find_spec(f"bench.{name}") is None:
        result = {"name": name, "rows": [], "targets": {}, "skipped": f"bench/{name}.py does not exist yet"}
    else:
        module = importlib.import_module(f"bench.{name}")
        adapter = SCRIPT_ADAPTERS.get(name)
        result = module.run(quick=quick) if hasattr(module, "run") or adapter is None else adapter(module, quick)
    result.setdefault("name", name)
    result.setdefault("rows", [])
    result.setdefault("targets", {})
    result["quick"] = quick
    result["machine"] = machine()
    result["time"] = time.strftime("%Y-%m-%d %H:%M:%S")
    return result


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def format_result(result: dict[str, Any]) -> str:
    lines = [f"== {result['name']}" + (" (quick: figures are meaningless)" if result.get("quick") else "")]
    for reason in ("skipped", "error"):
        if result.get(reason):
            lines.append(f"   {reason}: {result[reason]}")
    rows = [r if "what" in r else {"what": json.dumps(r, ensure_ascii=False), "value": "", "unit": "", "note": ""}
            for r in result["rows"]]
    width = max((len(r["what"]) for r in rows), default=0)
    for r in rows:
        value = f"{_value(r.get('value', ''))} {r.get('unit', '')}".strip()
        lines.append(f"   {r['what']:<{width}}  {value:>12}  {r.get('note', '')}".rstrip())
    for key, t in result["targets"].items():
        mark = "met   " if t.get("met") else "MISSED"
        lines.append(f"   target {mark} {t.get('text', key)}  (got {_value(t.get('value'))})")
    return "\n".join(lines)


def format_markdown(result: dict[str, Any]) -> str:
    lines = [f"### {result['name']}", ""]
    load = result.get("machine", {}).get("load_avg_1m")
    if result.get("time"):
        where = f", 1-minute load average {load} at the end" if load is not None else ""
        lines += [f"Run {result['time']}{where}.", ""]
    for reason in ("skipped", "error"):
        if result.get(reason):
            lines += [f"{reason}: {result[reason]}", ""]
    if result["rows"]:
        lines += ["| measure | value | note |", "|---|---:|---|"]
        for r in result["rows"]:
            value = f"{_value(r.get('value', ''))} {r.get('unit', '')}".strip()
            lines.append(f"| {r['what']} | {value} | {r.get('note', '')} |")
        lines.append("")
    for key, t in result["targets"].items():
        lines.append(f"- target {'met' if t.get('met') else '**missed**'}: {t.get('text', key)} "
                     f"(got {_value(t.get('value'))})")
    return "\n".join(lines).rstrip() + "\n"


def report(folder: Path) -> int:
    for name in BENCHMARKS:
        path = folder / f"{name}.json"
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            if "rows" not in data and name == "local_model":  # written by the script itself
                data = {"name": name, "rows": _local_rows(data), "targets": {}}
            print(format_markdown(data))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("name", choices=[*BENCHMARKS, "all", "report"])
    parser.add_argument("--quick", action="store_true", help="tiny counts: checks the harness, not the speed")
    parser.add_argument("--out", type=Path, help=f"folder for NAME.json (default {RESULTS}, "
                        "quick runs in its quick/ subfolder so they never replace real figures)")
    args = parser.parse_args(argv)
    args.out = args.out or (RESULTS / "quick" if args.quick and args.name != "report" else RESULTS)
    if args.name == "report":
        return report(args.out)
    names = BENCHMARKS if args.name == "all" else [args.name]
    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        result = run_one(name, args.quick)
        (args.out / f"{name}.json").write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
        print(format_result(result), flush=True)
    m = machine()
    print(f"\nmachine: {m['nproc']} CPUs, {m['cpu']}, Python {m['python']}, load {m['load_avg_1m']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
