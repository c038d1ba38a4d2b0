"""``glassloop ask`` with an MCP stdio server, against a bare SDK script.

Every run is a fresh process against a scripted server in its own process (it
answers at once, so what is timed is start-up, the servers and the exit). The
baseline, in the same run: a script that imports the openai SDK and streams one
chat completion. Beside it: ``ask`` without MCP, with the reference server
``@modelcontextprotocol/server-everything`` (Node; found as
``mcp-server-everything`` on PATH or named by ``GLASSLOOP_BENCH_EVERYTHING``),
with the tests' Python server, and with a "server" that never answers (``sleep 30``:
it stands for one still starting, and is never needed by the answer, so it should cost
nothing; it uses no CPU, so what it costs is ours). Runs are
interleaved; medians shown. Wall time is spawn to exit. ``ask`` exits without waiting
for its servers to stop, so each run waits until the previous run's servers are gone
(they carry ``SERVER_MARK`` in their environment) before it starts: a server still
stopping would otherwise take CPU from the next run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import ROOT, ServerProcess, isolated_env, median, row, scratch, target

BARE = """import sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1], api_key="sk-bench", max_retries=0)
stream = client.chat.completions.create(model="fake-model", stream=True,
                                        messages=[{"role": "user", "content": "hi"}])
print("".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices))
"""
TEST_SERVER = ROOT / "tests" / "mcp_test_server.py"
SERVER_MARK = "GLASSLOOP_BENCH_SERVER"


def everything_command() -> str | None:
    """The reference Node server's launcher, if installed (``npm install
    @modelcontextprotocol/server-everything``; set GLASSLOOP_BENCH_EVERYTHING to its
    ``node_modules/.bin/mcp-server-everything``)."""
    named = os.environ.get("GLASSLOOP_BENCH_EVERYTHING", "")
    return named if named and Path(named).exists() else shutil.which("mcp-server-everything")


def _server_config(folder: Path, name: str, command: str, args: list[str], env: dict[str, str]) -> Path:
    path = folder / f"{name}.toml"
    table = ", ".join(f"{k} = {json.dumps(v)}" for k, v in (env | {SERVER_MARK: "1"}).items())
    path.write_text(f"[mcp.servers.{name}]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n"
                    f"env = {{ {table} }}\n", encoding="utf-8")
    return path


def _wall(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{argv[1:4]} failed: {done.stderr.strip()[-500:]}")
    _servers_gone()
    return took


def _servers_gone(timeout: float = 5.0) -> None:
    """Wait (bounded) until no process carries ``SERVER_MARK``: the run's servers have stopped
    (stdin closed, or the reaper's SIGTERM 0.2 s and SIGKILL 0.4 s after the exit)."""
    mark = f"{SERVER_MARK}=1".encode()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(mark in _environ(pid) for pid in os.listdir("/proc") if pid.isdigit()):
            return
        time.sleep(0.01)


def _environ(pid: str) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:  # gone, or not ours to read
        return []


def run(quick: bool) -> dict[str, Any]:
    rounds = 1 if quick else 9
    everything = everything_command()
    with scratch("mcp-ask") as folder, ServerProcess([], folder) as server:
        env = isolated_env(folder) | {"OPENAI_API_KEY": "sk-bench"}
        (folder / "bare.py").write_text(BARE, encoding="utf-8")
        ask = [sys.executable, "-m", "repl.cli", "ask", "hi", "--base-url", server.base_url]
        python = _server_config(folder, "py", sys.executable, [str(TEST_SERVER)], {})
        slow = _server_config(folder, "slow", shutil.which("sleep") or "sleep", ["30"], {})
        cases = {"bare": [sys.executable, str(folder / "bare.py"), server.base_url], "ask": ask,
                 "python": ask + ["--config", str(python)], "slow": ask + ["--config", str(slow)]}
        if everything:
            cases["everything"] = ask + ["--config", str(_server_config(folder, "everything", everything,
                                                                        ["stdio"], {}))]
        for argv in cases.values():  # warm-up: file caches, the compiled modules
            _wall(argv, env, ROOT)
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(rounds):
            for name, argv in cases.items():
                samples[name].append(_wall(argv, env, ROOT))
    m = {name: median(values) for name, values in samples.items()}
    base = m["bare"]
    ref = "everything" if everything else "python"
    rows = [row("bare SDK script: import openai, one streamed completion", base, "s", "the baseline"),
            row("glassloop ask, no MCP server", m["ask"], "s", f"{m['ask'] / base:.2f}x bare")]
    if everything:
        rows.append(row("glassloop ask + server-everything (Node)", m["everything"], "s",
                        f"{m['everything'] / base:.2f}x bare"))
    missing = "" if everything else ("; server-everything not installed (npm install "
                                     "@modelcontextprotocol/server-everything, set GLASSLOOP_BENCH_EVERYTHING)")
    rows += [row("glassloop ask + the tests' Python MCP server", m["python"], "s",
                 f"{m['python'] / base:.2f}x bare" + missing),
             row("glassloop ask + a server that does not answer (sleep 30)", m["slow"], "s",
                 f"+{m['slow'] - m['ask']:.3f} s over ask without MCP")]
    return {"name": "mcp_ask", "rows": rows,
            "samples": samples, "reference_server": ref, "targets": {
        "mcp": target(m[ref] / base, 1.3, f"ask + one MCP stdio server ({ref}) / bare SDK script <= 1.3"),
        "slow": target(m["slow"] / m["ask"], 1.1,
                       "ask + a server not ready in time / ask without MCP <= 1.1 (costs nothing)")}}
