"""Benchmarks of glassloop, each figure beside a baseline measured in the same run.

Every benchmark module exposes ``run(quick: bool) -> dict`` returning

    {"name": str,
     "rows": [{"what": str, "value": float, "unit": str, "note": str}, ...],
     "targets": {key: {"value": float, "limit": float, "met": bool, "text": str}},
     ...anything else worth keeping (parameters, raw samples)}

``quick`` means tiny counts: the harness runs, the figures mean nothing.
``python -m bench NAME`` prints the table and writes ``bench/results/NAME.json``.
"""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
VENV_BIN = Path(sys.executable).parent


def compile_ours(root: Path = ROOT) -> None:
    """Bytecode for glassloop's modules in the tree ``root``, as ``pip install`` writes an installed
    program's, whatever PYTHONDONTWRITEBYTECODE says: with it set (as on these machines), each
    ``ask`` compiled 44 of them again on its main thread alone (0.09 s), which no installed glassloop does."""
    import compileall

    for package in ("repl", "tools"):
        compileall.compile_dir(root / package, quiet=1)
    compileall.compile_file(root / "glassloop_tools.py", quiet=1)


def row(what: str, value: float, unit: str = "s", note: str = "") -> dict[str, Any]:
    return {"what": what, "value": round(value, 6), "unit": unit, "note": note}


def target(value: float, limit: float, text: str, *, at_least: bool = False) -> dict[str, Any]:
    """A target met when ``value <= limit`` (``value >= limit`` with ``at_least``)."""
    met = value >= limit if at_least else value <= limit
    return {"value": round(value, 6), "limit": limit, "met": met, "text": text}


def median(samples: list[float]) -> float:
    return statistics.median(samples) if samples else float("nan")


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def rss_mb() -> float:
    """Resident set size of this process (VmRSS) in MB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as info:
        model = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "")
    return {"nproc": os.cpu_count(), "cpu": model or platform.processor(),
            "python": platform.python_version(), "platform": platform.platform(),
            "load_avg_1m": round(os.getloadavg()[0], 2)}  # other work on a shared machine


def isolated_env(folder: Path) -> dict[str, str]:
    """Environment with every XDG dir inside ``folder`` and no provider settings inherited."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "GLASSLOOP_", "XDG_"))}
    for name in ("CONFIG", "DATA", "STATE", "CACHE"):
        path = folder / name.lower()
        path.mkdir(parents=True, exist_ok=True)
        env[f"XDG_{name}_HOME"] = str(path)
    env["GLASSLOOP_WEATHER"] = "sample"
    env["GLASSLOOP_KEEP_WARM_S"] = "0"  # each run's embedded server stops with it
    return env


@contextlib.contextmanager
def patched_environ(env: dict[str, str]) -> Iterator[None]:
    """Run with ``os.environ`` replaced by ``env`` (platformdirs reads it at call time)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix=f"glassloop-bench-{prefix}-") as folder:
        yield Path(folder)


class ServerProcess:
    """``tests.fakeserver`` in its own process, so its CPU and memory are not the client's;
    with ``record``, each request it receives is appended to that file (a JSON line each)."""

    def __init__(self, replies: list[dict[str, Any]], folder: Path, record: Path | None = None) -> None:
        import json
        import subprocess

        script = folder / "script.json"
        script.write_text(json.dumps(replies), encoding="utf-8")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.fakeserver", "--port", "0", "--script", str(script),
             *(["--record", str(record)] if record else [])],
            cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.base_url = self.process.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            self.close()
            raise RuntimeError("the scripted server did not start")

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
