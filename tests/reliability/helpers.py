"""Shared pieces of the reliability suite: counts, figures, sockets, traces."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

FULL = os.environ.get("GLASSLOOP_RELIABILITY_FULL") == "1"
REPORT = os.environ.get("GLASSLOOP_RELIABILITY_REPORT")


def scaled(full: int, reduced: int) -> int:
    """The full count with ``GLASSLOOP_RELIABILITY_FULL=1``, else the reduced one."""
    return full if FULL else reduced


def record(part: str, **figures: Any) -> None:
    """Append one JSON line of measured figures to the report file (when one is set)."""
    if not REPORT:
        return
    line = json.dumps({"part": part, "full": FULL, **figures}, ensure_ascii=False, default=str)
    with open(REPORT, "a", encoding="utf-8") as report:
        report.write(line + "\n")


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


# ---- sockets --------------------------------------------------------------------

ESTABLISHED = "01"


def _socket_inodes(pid: int | str) -> set[str]:
    inodes = set()
    folder = Path(f"/proc/{pid}/fd")
    for fd in folder.iterdir() if folder.is_dir() else []:
        try:
            target = os.readlink(fd)
        except OSError:  # closed while listing
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def tcp_connections(pid: int | str = "self", port: int | None = None) -> int:
    """ESTABLISHED TCP connections owned by process ``pid`` (to remote ``port`` if given)."""
    inodes = _socket_inodes(pid)
    count = 0
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        lines = path.read_text().splitlines()[1:] if path.exists() else []
        for line in lines:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if fields[3] == ESTABLISHED and fields[9] in inodes and port in (None, remote_port):
                count += 1
    return count


def open_fds(pid: int | str = "self") -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def thread_count(pid: int | str = "self") -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def rss_bytes(pid: int | str = "self") -> int:
    pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


# ---- traces and journals ------------------------------------------------------------

def trace_records(env: dict[str, str]) -> list[dict[str, Any]]:
    """Every record of every trace file under the environment's XDG state dir."""
    folder = Path(env["XDG_STATE_HOME"]) / "glassloop" / "traces"
    records = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    return records


def strict_json(text: str) -> Any:
    """``text`` parsed as JSON by the standard's rules: ``NaN`` and ``Infinity``, which Python's json
    reads, are refused as every other parser refuses them."""
    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def written_lines(env: dict[str, str]) -> list[str]:
    """Every line of every trace, raw-body file and session journal under the environment's XDG dirs."""
    folders = [Path(env["XDG_STATE_HOME"]) / "glassloop" / "traces", Path(env["XDG_DATA_HOME"]) / "glassloop" / "sessions"]
    return [line for folder in folders for path in sorted(folder.glob("*.*"))
            for line in path.read_text(encoding="utf-8").splitlines()]


def finished_turns(env: dict[str, str]) -> list[dict[str, Any]]:
    return [r for r in trace_records(env) if r.get("type") == "turn_finished"]


# ---- a trace someone sends you: every value hostile -------------------------------------

PWNED = "document.title='pwned';document.body.insertAdjacentHTML('beforeend','<p id=pwned></p>')"
EVIL = f"\"'><script>{PWNED}</script><img src=x onerror=\"{PWNED}\"><svg onload=\"{PWNED}\">"
EVIL_NAME = "x\"'><svg onload=alert(1)>"  # a file name cannot hold "/", so no closing tag


def hostile_trace(folder: Path) -> Path:
    """A trace whose records carry a script, or a value of the wrong type, in every field the page
    shows (file name included), with its raw bodies beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{EVIL_NAME}.jsonl"
    call_ = {"call_id": EVIL, "name": EVIL}
    records = [
        {"type": "notice", "turn": EVIL, "message": EVIL, "time": EVIL},  # before the first turn
        {"type": "turn_started", "turn": EVIL, "user_text": EVIL, "time": 1.0},
        {"type": "model_request", "turn": EVIL, "step": EVIL, "time": 1.1},
        {"type": "model_usage", "step": EVIL, "latency_s": EVIL, "time": 1.5, "finish_reason": EVIL,
         "usage": {"input_tokens": EVIL, "cached_tokens": EVIL, "output_tokens": EVIL, "estimated": EVIL}},
        {"type": "tool_call_started", "step": EVIL, **call_, "arguments": {EVIL: EVIL}, "time": 1.6},
        {"type": "approval_requested", **call_, "time": 1.7},
        {"type": "approval_decided", **call_, "allowed": EVIL, "by": EVIL, "reason": EVIL, "time": 1.8},
        {"type": "tool_call_finished", **call_, "ok": False, "error_type": EVIL, "duration_s": EVIL,
         "result": {EVIL: [EVIL]}, "time": 1.9},
        {"type": "tool_call_started", "step": [EVIL], "call_id": {EVIL: 1}, "name": [EVIL], "time": 2.0},
        {"type": "guard_tripped", "guard": EVIL, "detail": EVIL, "time": 2.1},
        {"type": "error", "kind": EVIL, "message": EVIL, "time": 2.2},
        {"type": "turn_finished", "stopped_by": EVIL, "steps": EVIL, "tool_calls": EVIL, "usage": EVIL,
         "duration_s": EVIL, "time": 2.3},
        {"type": "turn_started", "turn": [EVIL], "user_text": {EVIL: EVIL}, "time": 3.0},
        {"type": "model_request", "step": {EVIL: 1}, "time": 3.1},
        {"type": "model_usage", "step": {EVIL: 1}, "usage": [EVIL], "time": 3.2},
        {"type": "turn_finished", "stopped_by": [EVIL], "usage": {"input_tokens": EVIL}, "time": 3.3},
    ]
    lines = [json.dumps(r) for r in records]
    lines.insert(3, '{"type": "model_request", "step": 2, "time": Infinity}')  # Python's json reads it
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    wire = [{"type": "wire_dropped", "records": EVIL},
            {"kind": "request", "turn": EVIL, "step": EVIL, "body": {EVIL: EVIL}},
            {"kind": "response", "turn": EVIL, "step": EVIL, "body": {EVIL: EVIL}},
            {"kind": "request", "turn": [EVIL], "step": {EVIL: 1}, "body": EVIL, "omitted_bytes": EVIL}]
    path.with_suffix(".wire").write_text("".join(json.dumps(w) + "\n" for w in wire), encoding="utf-8")
    return path
