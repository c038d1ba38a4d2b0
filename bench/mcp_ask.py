"""``glassloop ask`` with MCP stdio servers, against a bare SDK script.

Every run is a fresh process against a scripted server in its own process (it
answers at once, so what is timed is start-up, the servers and the exit). The
baseline, in the same run: a script that imports the openai SDK and streams one
chat completion. Beside it: ``ask`` without MCP; with a Python server, the tests'
own and ``mcp-server-time`` (installed by the dev extra); with the reference server
``@modelcontextprotocol/server-everything`` (Node; found as ``mcp-server-everything``
on PATH or named by ``GLASSLOOP_BENCH_EVERYTHING``); with a command that does not
exist (it fails at once, so it should cost nothing); and with a "server" that never
answers (``sleep 30``, under ``[mcp] startup_timeout_s = 1``: it should cost that
wait and no more; it uses no CPU, so what it costs is ours).

A run counts only when ``ask`` did what is timed: the scripted server records each
request it receives, and a run with a server counts when its first model request
offered that server's tools (for the two that cannot start: when it did not, and
``ask`` named the server not ready on stderr). A run that did not is a failed run,
left out of the medians and counted. Runs are interleaved; medians shown. Wall time
is spawn to exit. ``ask`` exits without waiting for its servers to stop, so each run
waits until the previous run's servers are gone (they carry ``SERVER_MARK`` in their
environment) before it starts: a server still stopping would otherwise take CPU from
the next run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import ROOT, VENV_BIN, ServerProcess, isolated_env, median, row, scratch, target

BARE = """import sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1], api_key="sk-bench", max_retries=0)
stream = client.chat.completions.create(model="fake-model", stream=True,
                                        messages=[{"role": "user", "content": "hi"}])
print("".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices))
"""
TEST_SERVER = ROOT / "tests" / "mcp_test_server.py"
SERVER_MARK = "GLASSLOOP_BENCH_SERVER"
ROUNDS = 7
NEVER_READY_TIMEOUT_S = 1.0  # [mcp] startup_timeout_s of the run with the server that never answers


@dataclass(frozen=True)
class Case:
    argv: list[str]
    server: str = ""  # the MCP server's name; "" for none
    offered: bool = True  # a run holds when its tools are offered; False: when it is named not ready


def everything_command() -> str | None:
    """The reference Node server's launcher, if installed (``npm install
    @modelcontextprotocol/server-everything``; set GLASSLOOP_BENCH_EVERYTHING to its
    ``node_modules/.bin/mcp-server-everything``)."""
    named = os.environ.get("GLASSLOOP_BENCH_EVERYTHING", "")
    return named if named and Path(named).exists() else shutil.which("mcp-server-everything")


def _server_config(folder: Path, name: str, command: str, args: list[str],
                   startup_timeout_s: float | None = None) -> Path:
    path = folder / f"{name}.toml"
    startup = "" if startup_timeout_s is None else f"[mcp]\nstartup_timeout_s = {startup_timeout_s}\n"
    path.write_text(f"{startup}[mcp.servers.{name}]\ncommand = {json.dumps(command)}\n"
                    f"args = {json.dumps(args)}\nenv = {{ {SERVER_MARK} = \"1\" }}\n", encoding="utf-8")
    return path


def _cases(folder: Path, base_url: str) -> dict[str, Case]:
    ask = [sys.executable, "-m", "repl.cli", "ask", "hi", "--base-url", base_url]

    def with_server(name: str, command: str, args: list[str], offered: bool = True,
                    startup_timeout_s: float | None = None) -> Case:
        config = _server_config(folder, name, command, args, startup_timeout_s)
        return Case(ask + ["--config", str(config)], name, offered)

    (folder / "bare.py").write_text(BARE, encoding="utf-8")
    cases = {"bare": Case([sys.executable, str(folder / "bare.py"), base_url]), "ask": Case(ask)}
    if everything := everything_command():
        cases["everything"] = with_server("everything", everything, ["stdio"])
    cases["python"] = with_server("py", sys.executable, [str(TEST_SERVER)])
    if (time_server := VENV_BIN / "mcp-server-time").exists():
        cases["time"] = with_server("time", str(time_server), [])
    cases["bad"] = with_server("bad", str(folder / "no-such-server"), [], offered=False)
    cases["slow"] = with_server("slow", shutil.which("sleep") or "sleep", ["30"], offered=False,
                                startup_timeout_s=NEVER_READY_TIMEOUT_S)
    return cases


def _run(case: Case, env: dict[str, str], record: Path) -> tuple[float, bool]:
    """One run's wall time, and whether it held (see the module's docstring)."""
    offset = record.stat().st_size if record.exists() else 0
    started = time.perf_counter()
    done = subprocess.run(case.argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{case.argv[1:4]} failed: {done.stderr.strip()[-500:]}")
    _servers_gone()
    if not case.server:
        return took, True
    offered = any(name.startswith(f"{case.server}__") for name in _first_tools(record, offset))
    named = any("not ready" in line and f" {case.server} (" in line for line in done.stderr.splitlines())
    return took, (offered and not named) if case.offered else (named and not offered)


def _first_tools(record: Path, offset: int) -> list[str]:
    """The tool names of the first model request recorded after ``offset``."""
    with record.open("rb") as requests:
        requests.seek(offset)
        for line in requests.read().decode("utf-8").splitlines():
            request = json.loads(line)
            if request["path"].endswith("/chat/completions"):
                return [tool["function"]["name"] for tool in request["body"].get("tools", [])]
    return []


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


def _loadavg() -> str:
    return Path("/proc/loadavg").read_text(encoding="ascii").strip()


def run(quick: bool) -> dict[str, Any]:
    rounds = 1 if quick else ROUNDS
    load_before = _loadavg()
    with scratch("mcp-ask") as folder:
        record = folder / "requests.jsonl"
        with ServerProcess([], folder, record=record) as server:
            env = isolated_env(folder) | {"OPENAI_API_KEY": "sk-bench"}
            cases = _cases(folder, server.base_url)
            for case in cases.values() if not quick else ():  # warm-up: file caches, compiled modules
                _run(case, env, record)  # (a quick run checks that it works, not how fast)
            samples: dict[str, list[float]] = {name: [] for name in cases}
            held: dict[str, int] = dict.fromkeys(cases, 0)
            for _ in range(rounds):
                for name, case in cases.items():
                    took, ok = _run(case, env, record)
                    if ok:
                        samples[name].append(took)
                        held[name] += 1
    return _result(cases, samples, held, rounds, load_before)


def _result(cases: dict[str, Case], samples: dict[str, list[float]], held: dict[str, int], rounds: int,
            load_before: str) -> dict[str, Any]:
    m = {name: median(values) for name, values in samples.items()}
    base, ask = m["bare"], m["ask"]
    counted = {name: f"{held[name]} of {rounds} runs" for name in cases}
    rows = [row("bare SDK script: import openai, one streamed completion", base, "s", "the baseline"),
            row("glassloop ask, no MCP server", ask, "s", f"{ask / base:.2f}x bare")]
    servers = {"everything": "server-everything (Node)", "python": "the tests' Python MCP server",
               "time": "mcp-server-time (Python)"}
    for name, label in servers.items():
        if name in cases:
            rows.append(row(f"glassloop ask + {label}", m[name], "s",
                            f"{m[name] / base:.2f}x bare; tools offered in {counted[name]}"))
    if "everything" not in cases:
        rows[-1]["note"] += ("; server-everything not installed (npm install "
                             "@modelcontextprotocol/server-everything, set GLASSLOOP_BENCH_EVERYTHING)")
    rows += [row("glassloop ask + a command that does not exist", m["bad"], "s",
                 f"{m['bad'] - ask:+.3f} s over ask; named not ready in {counted['bad']}"),
             row(f"glassloop ask + a server that never answers (sleep 30), startup_timeout_s = "
                 f"{NEVER_READY_TIMEOUT_S:g}", m["slow"], "s",
                 f"{m['slow'] - ask:+.3f} s over ask; named not ready in {counted['slow']}")]
    ref = "everything" if "everything" in cases else "python"
    kinds = [name for name in servers if name in cases]
    targets = {
        "offered": target(min(held[name] for name in kinds) / rounds, 1.0,
                          f"tools offered in every run, with each server ({', '.join(kinds)}) = 100%",
                          at_least=True),
        "mcp": target(m[ref] / base, 1.3, f"ask + one MCP stdio server ({ref}) / bare SDK script <= 1.3"),
        "bad": target(m["bad"] / ask, 1.1, "ask + a server that fails at once / ask without MCP <= 1.1"),
        "slow": target(m["slow"] - ask, NEVER_READY_TIMEOUT_S,
                       f"ask + a server never ready - ask without MCP <= its startup_timeout_s "
                       f"({NEVER_READY_TIMEOUT_S:g} s)")}
    return {"name": "mcp_ask", "rows": rows, "targets": targets, "rounds": rounds, "held": held,
            "samples": samples, "reference_server": ref, "loadavg": {"before": load_before, "after": _loadavg()}}
