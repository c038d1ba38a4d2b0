"""The embedded model's server process: llama-cpp-python's OpenAI-compatible server with
glassloop's changes to it, started by ``repl.embedded.server.LocalServer`` as

    python -I -m repl.embedded.llama_server [OUR OPTIONS] -- [THE SERVER'S OPTIONS]

``-I`` keeps the working directory (and ``PYTHON*`` variables, the user site) off
``sys.path``: a folder that ships ``threading.py`` or ``llama_cpp/`` runs nothing here.
Our options are parsed here and never reach the server; every knob is an argument.

The changes, each an override of a private llama-cpp-python 0.3.36 internal (the
version pinned in pyproject.toml; ``tests/test_local_server.py`` checks every name
used here still exists):

- a watchdog thread exits when the parent's end of our stdin pipe closes; or, for a server
  kept warm (``--idle-exit``), after that many seconds without a request, its requests then
  needing the key the parent put in ``GLASSLOOP_SERVER_KEY`` (``_exit_when_idle``);
- on CPUs with AMX, llama.cpp's extra weight layouts are off (their matrix product
  crashes on the first prompt of more than one token: llama.cpp issue 20824);
- a request's grammar is checked on the sampled token only, and calls are decoded at a
  low temperature (``_GrammarLast``);
- the KV cache of the prompt prefix is restored at start and saved after the first
  completion (``_PrefixState``);
- the KV cache a request sets aside (another system text) is kept in memory and put back
  when a later request continues it (``_KeptPrefix``);
- with ``--decode-threads N``, each request decodes on as many threads, of N, as other processes
  leave CPUs free (``_DecodeThreads``);
- a chat request whose messages end with the assistant's continues that message, as llama.cpp's
  own server does: its text goes after the prompt and the reply is the rest (``_ReplyStart``).

Standard library only at import; ``llama_cpp`` is imported by the parts that need it.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

STATE_LINE = "glassloop prefix state: "  # LocalServer reads the outcome from the log by it
SAMPLER_LINE = "glassloop sampler: grammar checked on the sampled token"
_MAGIC = b"glassloop prefix state 1\n"
# The openings textcalls.py accepts for a call: a reply that starts with one is a call.
_OPENINGS = (b"{", b"```", b"<tool_call>")


@dataclass(frozen=True)
class Options:
    """Ours, from the front of the command line (``--`` ends them)."""

    state: str  # the prefix state file ("" : none)
    state_key: str  # what the state was made for (LocalServer.state_key)
    call_temperature: float | None  # the cap for a step's first token and its calls; None: off
    grammar_first: bool  # llama-cpp-python's own sampler order (for measuring)
    amx: bool  # keep llama.cpp's AMX weight buffers even where they crash
    idle_exit: float = 0.0  # > 0: outlive the parent, exit after this many seconds without a request
    holders: str = ""  # ... unless a glassloop holds this file locked (shared): it is still using us
    decode_threads: int = 0  # > 0: each request decodes on 1 to this many threads, the CPUs left free


def parse(argv: Sequence[str]) -> tuple[Options, list[str]]:
    """Our options and the server's arguments (everything after ``--``)."""
    import argparse

    ours, server = list(argv), []
    if "--" in ours:
        cut = ours.index("--")
        ours, server = ours[:cut], ours[cut + 1:]
    parser = argparse.ArgumentParser(prog="repl.embedded.llama_server")
    parser.add_argument("--state", default="")
    parser.add_argument("--state-key", default="")
    parser.add_argument("--call-temperature", default="off")
    parser.add_argument("--grammar-first", action="store_true")
    parser.add_argument("--amx", action="store_true")
    parser.add_argument("--idle-exit", type=float, default=0.0)
    parser.add_argument("--holders", default="")
    parser.add_argument("--decode-threads", type=int, default=0)
    args = parser.parse_args(ours)
    try:
        low: float | None = float(args.call_temperature)
    except ValueError:  # "off": every token at the request's temperature
        low = None
    return Options(args.state, args.state_key, low, args.grammar_first, args.amx,
                   args.idle_exit, args.holders, max(0, args.decode_threads)), server


def _watch_parent() -> None:
    """Exit when the parent's end of the stdin pipe closes (the parent died or stopped us)."""
    def watch() -> None:
        while os.read(0, 512):
            pass
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


KEY_VARIABLE = "GLASSLOOP_SERVER_KEY"  # a kept server's key: in its environment, never its arguments


def _exit_when_idle(seconds: float, holders: str) -> None:
    """A server kept warm between glassloop runs: every request needs the key the parent left
    in ``KEY_VARIABLE`` (the port is open to every local user; the arguments are visible to them
    in the process table, the environment is not), and the process exits once no glassloop
    holds ``holders`` locked (each one using it does, shared, until it stops or dies), no
    request has begun or ended for ``seconds`` and none is running."""
    import fcntl

    from llama_cpp.server import app as server_app

    key = os.environ.pop(KEY_VARIABLE, "")
    if not key:
        raise SystemExit(f"--idle-exit needs {KEY_VARIABLE}")
    # one argument, so that a key beginning with "-" is not taken for an option; in Python's copy
    # of the arguments only: the process table keeps the original
    sys.argv += [f"--api_key={key}"]
    last = [time.monotonic()]
    create = server_app.create_app

    def create_watched(*args: Any, **kwargs: Any) -> Any:
        app = create(*args, **kwargs)

        @app.middleware("http")
        async def active(request: Any, call_next: Any) -> Any:
            last[0] = time.monotonic()
            try:
                return await call_next(request)
            finally:
                last[0] = time.monotonic()

        return app

    def held() -> bool:
        try:
            with open(holders, "a") as lock:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return True
                fcntl.flock(lock, fcntl.LOCK_UN)
        except OSError:
            pass
        return False

    def watch() -> None:
        while True:
            time.sleep(min(1.0, seconds / 4))
            if server_app.llama_outer_lock.locked() or server_app.llama_inner_lock.locked() or held():
                last[0] = time.monotonic()  # a completion is running (or streaming), or a glassloop is on
            elif time.monotonic() - last[0] > seconds:
                os._exit(0)

    server_app.create_app = create_watched
    threading.Thread(target=watch, daemon=True, name="glassloop-idle").start()


def _has_amx() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            return " amx_tile" in cpuinfo.read()
    except OSError:
        return False


def _without_amx() -> None:
    """Keep llama.cpp off its extra (repacked, AMX) weight buffers. Prompt evaluation measured
    44 tokens/s without them, as fast as on a machine without AMX (docs/LOCAL_MODEL.md)."""
    import llama_cpp.llama as llama_module

    default_params = llama_module.llama_cpp.llama_model_default_params

    def model_params_without_amx() -> Any:
        params = default_params()
        params.use_extra_bufts = False
        return params

    llama_module.llama_cpp.llama_model_default_params = model_params_without_amx


def _calling(head: bytes) -> bool:
    """Whether a reply starting with ``head`` is still undecided or a call."""
    head = head.lstrip()
    return any(head.startswith(o) or o.startswith(head) for o in _OPENINGS)


class _GrammarLast:
    """A sampler that applies the grammar the way llama.cpp's own server does
    (common_sampler_sample): sample without it, check only the sampled token, and apply it
    to the whole vocabulary only when that token is refused. llama-cpp-python puts the
    grammar first, checking all 151,936 tokens at every step: +26-34% per generated token.

    With ``call_chain`` a step's first token and every token of a call are sampled at the
    low temperature; once the reply is prose it keeps the request's. A sampled wrong tool
    or argument is a wrong action, not a turn of phrase."""

    def __init__(self, chain: Any, grammar: Any, n_vocab: int, call_chain: Any = None,
                 piece: Callable[[int], bytes] | None = None, head: bytes = b"") -> None:
        import llama_cpp
        import numpy as np

        self._lc = llama_cpp
        self._chain, self._grammar, self._n_vocab = chain, grammar, n_vocab
        self._call_chain, self._piece, self._head = call_chain, piece, head  # head: the reply's start (_ReplyStart)
        self._cells = np.zeros(n_vocab, dtype=[("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
        self._ids = np.arange(n_vocab, dtype="<i4")
        self._one: Any = llama_cpp.llama_token_data()

    def _candidates(self, ctx: Any, idx: int) -> Any:
        import numpy as np

        lc = self._lc
        logits = lc.llama_get_logits_ith(ctx.ctx, idx)
        self._cells["id"] = self._ids
        self._cells["logit"] = np.ctypeslib.as_array(logits, shape=(self._n_vocab,))
        self._cells["p"] = 0.0
        data = self._cells.ctypes.data_as(ctypes.POINTER(lc.llama_token_data))
        return lc.llama_token_data_array(data, self._n_vocab, -1, False)

    def _pick(self, cells: Any, *samplers: Any) -> int:
        for sampler in samplers:
            self._lc.llama_sampler_apply(sampler, ctypes.byref(cells))
        return int(cells.data[cells.selected].id)

    def sample(self, ctx: Any, idx: int = -1) -> int:
        lc = self._lc
        calling = self._call_chain is not None and _calling(self._head)
        chain = (self._call_chain if calling else self._chain).sampler
        token = self._pick(self._candidates(ctx, idx), chain)
        self._one.id, self._one.logit, self._one.p = token, 1.0, 0.0
        single = lc.llama_token_data_array(ctypes.pointer(self._one), 1, -1, False)
        lc.llama_sampler_apply(self._grammar, ctypes.byref(single))
        if math.isinf(single.data[0].logit):  # refused: the grammar over every token, then the chain
            token = self._pick(self._candidates(ctx, idx), self._grammar, chain)
        lc.llama_sampler_accept(self._grammar, token)
        lc.llama_sampler_accept(self._chain.sampler, token)
        if self._call_chain is not None:
            lc.llama_sampler_accept(self._call_chain.sampler, token)
            if len(self._head) < 16 and self._piece is not None:  # enough to tell a call from prose
                self._head += self._piece(token)
        return token

    def close(self) -> None:
        if self._grammar is not None:
            self._lc.llama_sampler_free(self._grammar)
            self._grammar = None
        self._chain.close()
        if self._call_chain is not None:
            self._call_chain.close()
            self._call_chain = None

    __del__ = close


def _grammar_last(call_temperature: float | None) -> None:
    import llama_cpp

    init_sampler: Any = llama_cpp.Llama._init_sampler

    def init_sampler_grammar_last(self: Any, *args: Any, grammar: Any = None, **kwargs: Any) -> Any:
        chain = init_sampler(self, *args, **kwargs)
        if grammar is None:
            return chain
        checker = llama_cpp.llama_sampler_init_grammar(
            self._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
        if not checker:  # llama.cpp could not parse it: its own order, and its own error
            chain.close()
            return init_sampler(self, *args, grammar=grammar, **kwargs)
        call_chain = None
        if call_temperature is not None and kwargs.get("temp", 0.8) > call_temperature:
            call_chain = init_sampler(self, *args, **{**kwargs, "temp": call_temperature})
        return _GrammarLast(chain, checker, self._n_vocab, call_chain,
                            lambda token: self.detokenize([token]), head=getattr(grammar, _START, b""))

    llama_cpp.Llama._init_sampler = init_sampler_grammar_last  # type: ignore[method-assign]
    sys.stderr.write(SAMPLER_LINE + "\n")


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens ``a`` and ``b`` begin with alike."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _say(text: str) -> None:
    sys.stderr.write(STATE_LINE + text + "\n")
    sys.stderr.flush()


class _PrefixState:
    """The KV cache of the prompt prefix saved by an earlier server, restored right after the
    model loads, and saved after the first completion when there was none (or it no longer
    fits). llama-cpp-python's own longest-common-prefix check then skips the tokens that
    match. The file: magic line, JSON header (settings key, token count, state size, SHA-256
    of the rest), the tokens (int32), the seq state (llama_state_seq_get_data: the KV cells
    only, ~12 KB per token here; not Llama.save_state, which also copies a ~300 MB logits
    buffer)."""

    def __init__(self, path: str, key: str) -> None:
        self.path, self.key = path, key
        self.restored: list[int] = []  # the tokens restored at start
        self.handled = False  # once the first completion has been looked at

    def sweep(self, folder: str) -> None:
        for name in os.listdir(folder) if os.path.isdir(folder) else ():
            path = os.path.join(folder, name)
            try:
                age = time.time() - os.path.getmtime(path)
                if name.endswith(".partial") and age > 3600:
                    os.unlink(path)  # left by a server killed while writing
                elif name.endswith(".bin") and path != self.path and age > 30 * 86400:
                    os.unlink(path)  # other settings, unused for 30 days (a used one is touched)
            except OSError:
                pass  # another server finished or swept it meanwhile

    def restore(self, llama: Any) -> str:
        import llama_cpp
        import numpy as np

        try:
            self.sweep(os.path.dirname(self.path))
            with open(self.path, "rb") as handle:
                data = bytearray(handle.read())
        except FileNotFoundError:
            return "missing"
        except OSError as exc:
            return f"unusable (unreadable: {exc.strerror or exc})"
        end = data.find(b"\n", len(_MAGIC))
        if not data.startswith(_MAGIC) or end < 0:
            return "unusable (not a state file)"
        try:
            head = json.loads(bytes(data[len(_MAGIC):end]))
            n, size, digest = int(head["n_tokens"]), int(head["state_bytes"]), str(head["sha256"])
        except (ValueError, KeyError, TypeError):
            return "unusable (damaged header)"
        if head.get("key") != self.key:
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
        self.restored = tokens.tolist()
        try:
            os.utime(self.path)  # in use: not swept as unused by servers with other settings
        except OSError:
            pass
        return f"loaded {n} tokens"

    def save(self, llama: Any) -> tuple[int, int]:
        import tempfile

        import llama_cpp
        import numpy as np

        n, ctx = llama.n_tokens, llama._ctx.ctx
        blob = (ctypes.c_uint8 * llama_cpp.llama_state_seq_get_size(ctx, 0))()
        size = llama_cpp.llama_state_seq_get_data(ctx, blob, len(blob), 0)
        tokens = np.ascontiguousarray(llama.input_ids[:n], dtype="<i4").tobytes()
        state = memoryview(blob).cast("B")[:size]
        digest = hashlib.sha256(tokens)
        digest.update(state)
        head = {"key": self.key, "n_tokens": n, "state_bytes": size, "sha256": digest.hexdigest()}
        folder = os.path.dirname(self.path)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=folder, prefix=".prefix-", suffix=".partial")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(_MAGIC + json.dumps(head).encode() + b"\n")
                out.write(tokens)
                out.write(state)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, self.path)  # atomic: readers see the old file or the whole new one
        except BaseException:
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise
        return n, size

    def after_first(self, llama: Any) -> None:
        if self.handled:
            return
        self.handled = True
        n = llama.n_tokens
        same = _common(self.restored, llama.input_ids[:n].tolist())
        if self.restored and (2 * same >= n or n <= len(self.restored)):
            # the saved prefix served this request, or this one is shorter (a question asked
            # under the chat prompt first: its 69 tokens replaced the tool prompt's 2,528)
            return
        started = time.perf_counter()
        try:
            saved, size = self.save(llama)
        except Exception as exc:
            _say(f"not saved ({type(exc).__name__}: {exc})")
            return
        _say(f"saved {saved} tokens, {size / 1e6:.0f} MB, in {time.perf_counter() - started:.2f} s")

    def install(self) -> None:
        import llama_cpp
        from llama_cpp.server import model as server_model

        load = server_model.LlamaProxy.load_llama_from_model_settings
        create = llama_cpp.Llama.create_completion
        state = self

        def load_restoring(settings: Any) -> Any:
            llama = load(settings)
            started = time.perf_counter()
            try:
                outcome = state.restore(llama)
            except Exception as exc:
                llama.n_tokens = 0  # the next evaluation drops whatever was restored
                outcome = f"unusable ({type(exc).__name__}: {exc})"
            _say(f"{outcome} ({time.perf_counter() - started:.2f} s)")
            return llama

        def create_saving(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = create(self, *args, **kwargs)
            if state.handled:
                return result
            if isinstance(result, dict):
                state.after_first(self)
                return result

            def chunks() -> Iterator[Any]:
                yield from result
                state.after_first(self)

            return chunks()

        server_model.LlamaProxy.load_llama_from_model_settings = staticmethod(load_restoring)  # type: ignore[method-assign]
        llama_cpp.Llama.create_completion = create_saving  # type: ignore[method-assign]


KEPT_LINE = "glassloop kept prefix: "
_KEPT_MIN = 64  # tokens: a shorter prefix costs less to evaluate again than to keep


def _note(text: str) -> None:
    sys.stderr.write(KEPT_LINE + text + "\n")
    sys.stderr.flush()


class _KeptPrefix:
    """A second prompt prefix kept in memory: the KV cache of the conversation a request set
    aside, put back when a later request continues it. llama-cpp-python's server keeps one:
    a request with another system text (the embedded model's chat without tools, docs/
    LOCAL_MODEL.md) evicted the tool prompt, and the next question about the todos evaluated
    its ~2,400 tokens again (about 15 s on two cores). Costs the set-aside cache's memory
    (~12 KB per token for the 0.5B, at most its KV cache) while one is kept."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.blob: Any = None

    def _take(self, llama: Any) -> None:
        import llama_cpp

        ctx = llama._ctx.ctx
        blob = (ctypes.c_uint8 * llama_cpp.llama_state_seq_get_size(ctx, 0))()
        size = llama_cpp.llama_state_seq_get_data(ctx, blob, len(blob), 0)
        self.tokens, self.blob = llama.input_ids[:llama.n_tokens].tolist(), (blob, size)

    @staticmethod
    def _put_back(llama: Any, tokens: list[int], blob: Any) -> bool:
        import llama_cpp

        data, size = blob
        llama._ctx.kv_cache_seq_rm(-1, 0, -1)
        if llama_cpp.llama_state_seq_set_data(llama._ctx.ctx, data, size, 0) != size:
            llama._ctx.kv_cache_seq_rm(-1, 0, -1)
            llama.n_tokens = 0
            return False
        llama.input_ids[:len(tokens)] = tokens
        llama.n_tokens = len(tokens)
        llama._requires_eval = True  # the logits are not restored: always evaluate one token
        return True

    def before(self, llama: Any, tokens: Sequence[int]) -> None:
        """Before ``tokens`` are evaluated: put the kept prefix back if it serves them better
        than the cache does (the cache is then kept in its place), or keep the cache if they
        set it aside (they share less than half of it) and it is longer than the one kept."""
        current = llama.input_ids[:llama.n_tokens].tolist()
        here = _common(current, tokens)
        kept = _common(self.tokens, tokens) if self.blob is not None else 0
        started = time.perf_counter()
        if kept >= here + _KEPT_MIN:
            back, blob = self.tokens, self.blob
            if len(current) >= _KEPT_MIN:
                self._take(llama)
            else:
                self.tokens, self.blob = [], None
            done = "put back" if self._put_back(llama, back, blob) else "could not put back"
            _note(f"{done} {len(back)} tokens ({time.perf_counter() - started:.2f} s)")
        elif len(current) >= max(_KEPT_MIN, len(self.tokens) + 1) and 2 * here < len(current):
            # the longer of the two is kept: a few chat questions in a row replaced the tool prompt
            self._take(llama)
            _note(f"set aside {len(current)} tokens ({time.perf_counter() - started:.2f} s)")

    def install(self) -> None:
        import llama_cpp

        generate = llama_cpp.Llama.generate
        kept = self

        def generate_keeping(self: Any, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("reset", True):
                try:
                    kept.before(self, tokens)
                except Exception as exc:  # a cache we could not keep costs time, not the answer
                    self.n_tokens = 0
                    kept.tokens, kept.blob = [], None
                    _note(f"dropped ({type(exc).__name__}: {exc})")
            return generate(self, tokens, *args, **kwargs)

        llama_cpp.Llama.generate = generate_keeping  # type: ignore[method-assign]


DECODE_LINE = "glassloop decode threads: "


def decode_threads(most: int, others: float) -> int:
    """Threads to decode on, of ``most``: the CPUs other processes leave free (``others``: the
    CPUs they kept busy meanwhile), at least one. llama.cpp's decode threads wait for each other
    at every layer, so one that shares its CPU stalls them all: on two cores a warm ``glassloop
    ask`` took 6.6 s on two threads and 7.1 s on one beside no busy process, 8.1 s and 7.8 s
    beside one, 10.2 s and 9.0 s beside two (docs/BENCHMARKS.md, local_model)."""
    return max(1, min(most, math.floor(most - others + 0.5)))


class _DecodeThreads:
    """Each request's decode threads, chosen between its prompt's evaluation and its first
    decoded token (``decode_threads``) from the CPU time other processes took while the prompt
    was evaluated: ``/proc/stat``'s busy time of all CPUs less this process's own (``os.times``).
    Then the glassloop that asked is waiting, so its own start-up is not counted. Prompt
    evaluation keeps all its threads: its large matrix products share a CPU well. A prompt
    evaluated in under ``_SHORTEST`` seconds says too little: the threads stay as they were."""

    _SHORTEST = 0.1

    def __init__(self, most: int) -> None:
        self.most = most
        self.current = 0
        self._tick = os.sysconf("SC_CLK_TCK")
        self._since: tuple[float, float, float] | None = None  # the sample the prompt began with
        self._evals = 0

    def _sample(self) -> tuple[float, float, float] | None:
        """(wall s, all CPUs' busy s, this process's CPU s), or None without ``/proc/stat``."""
        try:
            with open("/proc/stat", encoding="ascii") as stat:
                fields = stat.readline().split()
        except OSError:
            return None
        if len(fields) < 8 or fields[0] != "cpu":
            return None
        # user nice system idle iowait irq softirq steal: busy is all but idle and iowait
        numbers = [int(field) for field in fields[1:9]]
        own = os.times()
        return time.monotonic(), (sum(numbers) - numbers[3] - numbers[4]) / self._tick, own.user + own.system

    def others(self, since: tuple[float, float, float] | None) -> float | None:
        """The CPUs other processes kept busy since ``since``; None: unknown or too short a time."""
        now = self._sample()
        if since is None or now is None or now[0] - since[0] < self._SHORTEST:
            return None
        return max(0.0, ((now[1] - since[1]) - (now[2] - since[2])) / (now[0] - since[0]))

    def choose(self, llama: Any) -> None:
        import llama_cpp

        others = self.others(self._since)
        if others is None:
            return
        threads = decode_threads(self.most, others)
        if threads != self.current:
            llama_cpp.llama_set_n_threads(llama._ctx.ctx, threads, llama.n_threads_batch)
            self.current = llama.n_threads = threads
            sys.stderr.write(f"{DECODE_LINE}{threads} ({others:.1f} CPUs busy elsewhere)\n")
            sys.stderr.flush()

    def install(self) -> None:
        import llama_cpp

        generate, evaluate = llama_cpp.Llama.generate, llama_cpp.Llama.eval
        chooser = self

        def generate_timed(self: Any, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Any:
            chooser._since, chooser._evals = chooser._sample(), 0
            return generate(self, tokens, *args, **kwargs)

        def eval_choosing(self: Any, tokens: Sequence[int]) -> None:
            chooser._evals += 1
            if chooser._evals == 2:  # the prompt is in; the first decoded token is next
                try:
                    chooser.choose(self)
                except Exception as exc:  # the threads it has decode too, only slower
                    sys.stderr.write(f"{DECODE_LINE}kept ({type(exc).__name__}: {exc})\n")
            evaluate(self, tokens)

        llama_cpp.Llama.generate = generate_timed  # type: ignore[method-assign]
        llama_cpp.Llama.eval = eval_choosing  # type: ignore[method-assign]


_START = "glassloop_reply_start"  # the attribute a request's grammar carries the reply's start in


class _ReplyStart:
    """A chat request whose messages end with the assistant's is answered by continuing that
    message (the client writes the words its grammar forces a reply to begin with:
    ``Dialect.reply_start``). The message is taken off before the chat template makes the prompt,
    its tokens go after the prompt's, and the reply streamed back is the rest. The grammar (of
    the rest) carries the start, so a call's arguments are decoded at the call temperature."""

    def __init__(self) -> None:
        self._pending = threading.local()  # the handler's create_completion runs on this thread

    def install(self) -> None:
        import llama_cpp

        create_chat, create = llama_cpp.Llama.create_chat_completion, llama_cpp.Llama.create_completion
        pending = self._pending

        def create_chat_continuing(self: Any, *args: Any, **kwargs: Any) -> Any:
            messages = list(kwargs["messages"] if "messages" in kwargs else args[0])
            last = messages[-1] if messages else None
            start = last.get("content") if isinstance(last, dict) and last.get("role") == "assistant" else None
            if not isinstance(start, str) or not start:
                return create_chat(self, *args, **kwargs)
            if "messages" in kwargs:
                kwargs["messages"] = messages[:-1]
            else:
                args = (messages[:-1], *args[1:])
            pending.start = start
            try:
                return create_chat(self, *args, **kwargs)
            finally:
                pending.start = ""

        def create_continuing(self: Any, prompt: Any, *args: Any, **kwargs: Any) -> Any:
            start, pending.start = getattr(pending, "start", ""), ""
            if start and isinstance(prompt, list):
                prompt = prompt + self.tokenize(start.encode("utf-8"), add_bos=False, special=True)
                if kwargs.get("grammar") is not None:
                    setattr(kwargs["grammar"], _START, start.encode("utf-8"))
            return create(self, prompt, *args, **kwargs)

        llama_cpp.Llama.create_chat_completion = create_chat_continuing  # type: ignore[method-assign]
        llama_cpp.Llama.create_completion = create_continuing  # type: ignore[method-assign]


class _Usage:
    """A streamed chat reply ends with its token counts, as the OpenAI API sends them for
    ``stream_options.include_usage``. llama-cpp-python's server sends none, so glassloop showed
    an estimate, and "cached 0" for a prompt whose tokens all came from the server's cache but
    the question's. Counted where the work is done: the prompt's tokens (the reply's start with
    them), the ones its first evaluation did not need (cached) and the tokens generated."""

    def install(self) -> None:
        import llama_cpp

        generate, evaluate = llama_cpp.Llama.generate, llama_cpp.Llama.eval
        create_chat = llama_cpp.Llama.create_chat_completion

        def counted(tokens: Generator[int, Any, None], counts: dict[str, Any]) -> Generator[int, Any, None]:
            sent = None  # generate's callers may send tokens back; passed on
            try:
                while True:
                    token = tokens.send(sent)
                    counts["generated"] += 1
                    sent = yield token
            except StopIteration:
                return
            finally:
                tokens.close()

        def generate_counting(self: Any, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Any:
            counts = {"prompt": len(tokens), "evaluated": None, "generated": 0}
            setattr(self, _COUNTS, counts)
            return counted(generate(self, tokens, *args, **kwargs), counts)

        def eval_counting(self: Any, tokens: Sequence[int]) -> None:
            counts = getattr(self, _COUNTS, None)
            if counts is not None and counts["evaluated"] is None:  # the prompt, less what was cached
                counts["evaluated"] = len(tokens)
            evaluate(self, tokens)

        def with_usage(llama: Any, chunks: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
            last = None
            for last in chunks:
                yield last
            counts = getattr(llama, _COUNTS, None)
            if last is None or not counts or counts["evaluated"] is None:
                return
            prompt, generated = counts["prompt"], counts["generated"]
            yield {"id": last["id"], "model": last["model"], "created": last["created"],
                   "object": "chat.completion.chunk", "choices": [],
                   "usage": {"prompt_tokens": prompt, "completion_tokens": generated,
                             "total_tokens": prompt + generated,
                             "prompt_tokens_details": {"cached_tokens": max(0, prompt - counts["evaluated"])}}}

        def create_chat_counting(self: Any, *args: Any, **kwargs: Any) -> Any:
            setattr(self, _COUNTS, None)  # this request's, once it generates
            reply: Any = create_chat(self, *args, **kwargs)
            return with_usage(self, reply) if kwargs.get("stream") else reply

        llama_cpp.Llama.generate = generate_counting  # type: ignore[method-assign]
        llama_cpp.Llama.eval = eval_counting  # type: ignore[method-assign]
        llama_cpp.Llama.create_chat_completion = create_chat_counting  # type: ignore[method-assign]


_COUNTS = "glassloop_counts"  # the attribute the request being answered keeps its counts in


def _settings_not_from_environment() -> None:
    """Drop the variables llama-cpp-python's server would read its settings from: they are
    pydantic settings, each field also read from a variable of its name in any case, and the
    server's __main__ reads CONFIG_FILE. The user's API_KEY (for something else) made the
    server refuse every request; CHAT_FORMAT or N_CTX would change the model's."""
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    fields = {name.casefold() for kind in (ModelSettings, ServerSettings) for name in kind.model_fields}
    for key in [key for key in os.environ if key.casefold() in fields | {"config_file"}]:
        del os.environ[key]


def main(argv: Sequence[str]) -> None:
    import runpy

    options, server_args = parse(argv)
    _settings_not_from_environment()
    sys.argv = [sys.argv[0], *server_args]
    if options.idle_exit > 0:
        _exit_when_idle(options.idle_exit, options.holders)
    else:
        _watch_parent()
    if _has_amx() and not options.amx:
        _without_amx()
    if not options.grammar_first:
        _grammar_last(options.call_temperature)
    if options.state:
        _PrefixState(options.state, options.state_key).install()
    _KeptPrefix().install()
    _ReplyStart().install()
    _Usage().install()
    if options.decode_threads:
        _DecodeThreads(options.decode_threads).install()
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
