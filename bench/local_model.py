"""Benchmark of the embedded local model (a script, not a test).

Measures on this machine: server cold start, time to first token, prompt and
decode speed, the first token of a new session with and without the saved
prompt state, and the full turn time of the todo question, then prints the
figures (and writes bench/results/local_model.json). Every figure group
records the 1-minute load average it ran under.

    .venv/bin/python bench/local_model.py
    .venv/bin/python bench/local_model.py --threads-matrix   # threads x how OpenMP's threads wait
    .venv/bin/python bench/local_model.py --collect tests/data/textcall_corpus.json
    .venv/bin/python bench/local_model.py --profile local-large --new-session   # the 1.5B
    .venv/bin/python bench/local_model.py --profile local-large --ask   # glassloop ask, en + zh
    .venv/bin/python bench/local_model.py --step2   # step 2 of glassloop ask: tool results as JSON vs compact
    .venv/bin/python bench/local_model.py --context-sizes   # n_ctx 4k / 8k / 16k: memory, speed, ask
    .venv/bin/python bench/local_model.py --against HEAD~3 --asks 6   # warm ask: this tree beside a revision

``--collect`` records real replies of the model (several prompts, low and high
temperature, up to three steps each with the real tools run on a fixture) as
the parser test corpus; review the ``expected`` parses before committing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import compile_ours, patched_environ  # noqa: E402
from repl.config.settings import ProviderSettings  # noqa: E402
from repl.embedded.server import LocalServer  # noqa: E402
from repl.embedded.textcalls import parse_text_calls, to_text_messages  # noqa: E402
from repl.embedded.weights import BUNDLED, ensure_model  # noqa: E402
from repl.session.runtime import system_prompt_for  # noqa: E402
from tools import build_tools  # noqa: E402
from tools.registry import Registry  # noqa: E402

FRESH_SERVER = "keep_warm_s = 0\n"  # a profile line: the ask starts (and stops) its own server
QUESTION = "Which todos are not done yet? Explain the highest-priority one."
ZH_QUESTION = "今天还有哪些没完成？把优先级最高的一项展开说明。"
OTHER_QUESTION = "What is 17.5% of 2480?"
NEW_SESSION_TARGET_S = 2.0  # first token of a new session's first request, with the saved state
FIXTURE_TODOS = [
    {"id": "todo-001", "title": "Buy groceries", "detail": "Milk, eggs, rice.",
     "status": "done", "priority": "low"},
    {"id": "todo-002", "title": "Write the weekly report",
     "detail": "Summarise the release, the two incidents and next week's plan; send it to the team by Friday 17:00.",
     "status": "todo", "priority": "high", "due": "2025-05-02"},
    {"id": "todo-003", "title": "Reply to Alice's email", "detail": "She asked about the budget.",
     "status": "todo", "priority": "medium"},
    {"id": "todo-004", "title": "Book a dentist appointment", "detail": "",
     "status": "todo", "priority": "low"},
]
# --step2: a store of 8 todos (5 open) and the plain "what is open" questions
STEP2_TODOS = [
    {"id": "todo-001", "title": "Buy groceries", "status": "done", "priority": "low"},
    {"id": "todo-002", "title": "Write the weekly report", "status": "todo", "priority": "high",
     "due": "2026-12-04", "detail": "Release, incidents, next week's plan."},
    {"id": "todo-003", "title": "Reply to Alice's email", "status": "todo", "priority": "medium"},
    {"id": "todo-004", "title": "Renew the passport", "status": "done", "priority": "medium"},
    {"id": "todo-005", "title": "给妈妈打电话", "status": "todo", "priority": "medium"},
    {"id": "todo-006", "title": "Book a dentist appointment", "status": "todo", "priority": "low"},
    {"id": "todo-007", "title": "交电费", "status": "done", "priority": "high"},
    {"id": "todo-008", "title": "整理发票", "status": "todo", "priority": "low", "due": "2026-12-01"},
]
STEP2_QUESTIONS = (("en", "What's still open on my todo list?"), ("zh", "今天还有哪些没完成？"))
STEP2_MODES = (("json", 0), ("compact", 1500))  # compact_results of the profile
# at least MATRIX_DECODE tokens: "Count from 1 to 200, one number per line." stopped at 20 (51 tokens)
DECODE_PROMPT = "Write the numbers from one to two hundred in English words, one per line, with nothing else."
COLLECT_PROMPTS = [
    QUESTION,
    ZH_QUESTION,
    "提醒我明天下午三点开会",
    "Remind me to call the plumber on Friday, high priority.",
    "Add two todos: buy milk, and pay the rent.",
    "Mark todo 3 as done.",
    "Show me the details of todo-002.",
    "What is 17.5% of 2480?",
    "Search my notes for invoice.",
    "Write a Python function that reverses a string.",
    "Hi! Who are you?",
]


def fixture_registry(folder: Path) -> Registry:
    """glassloop's own tools (all of them, as a session has), the todos from the fixture."""
    todos = folder / "todos.json"
    todos.write_text(json.dumps({"version": 1, "todos": FIXTURE_TODOS}), encoding="utf-8")
    return Registry(build_tools(todos_path=todos, notes_path=folder / "notes.json",
                                files_root=folder, weather="sample"))


def stream_chat(url: str, messages: list[dict], **options: Any) -> dict[str, Any]:
    """One streamed chat request: the text and when each content chunk arrived."""
    body = {"messages": messages, "stream": True, "stream_options": {"include_usage": True},
            **options}
    started, stamps, parts, usage = time.perf_counter(), [], [], {}
    with httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=600) as reply:
        reply.raise_for_status()
        for line in reply.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            usage = event.get("usage") or usage
            for choice in event.get("choices") or []:
                text = (choice.get("delta") or {}).get("content")
                if text:
                    stamps.append(time.perf_counter() - started)
                    parts.append(text)
    return {"text": "".join(parts), "stamps": stamps, "usage": usage,
            "total_s": time.perf_counter() - started}


def raw_turn(url: str, registry: Registry, question: str, *, temperature: float = 0.1,
             seed: int | None = None, max_steps: int = 4, record: list | None = None) -> dict:
    """The model → tools → model loop without the CLI: steps, calls, answer, seconds."""
    history: list[dict[str, Any]] = [
        *system_prompt_for(ProviderSettings(name="local"), registry).messages(),
        {"role": "user", "content": question},
    ]
    started, calls_made = time.perf_counter(), []
    for step in range(1, max_steps + 1):
        tools = registry.schemas() if step < max_steps else None
        options = {"temperature": temperature, "max_tokens": 512}
        if seed is not None:
            options["seed"] = seed + step
        reply = stream_chat(url, to_text_messages(history, tools), **options)
        text, calls = parse_text_calls(reply["text"], registry.names() if tools else [])
        if record is not None:
            record.append({"prompt": question, "step": step, "temperature": temperature,
                           "seed": options.get("seed"), "tools": tools is not None,
                           "output": reply["text"]})
        history.append({"role": "assistant", "content": text, "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]})
        if not calls:
            break
        for call in calls:
            calls_made.append(call.name)
            result = registry.call(call.name, call.arguments)
            history.append({"role": "tool", "tool_call_id": call.id, "name": call.name,
                            "content": json.dumps(result, ensure_ascii=False)})
    return {"steps": step, "calls": calls_made, "answer": history[-1].get("content", ""),
            "seconds": time.perf_counter() - started}


def cli_turn(model: Path, work: Path, question: str = QUESTION,
             profile: str = "local", todos: list[dict[str, Any]] | None = None,
             profile_lines: str = "", keep_trace: bool = False, kept: bool = False,
             tree: Path | None = None) -> dict[str, Any] | None:
    """``glassloop ask`` on the question over the fixture (server start included);
    ``todos`` replace the fixture's, ``profile_lines`` are added to the profile's table;
    ``keep_trace``: the result keeps its events; ``kept``: the server is kept warm as configured
    (else it stops with the ask, ``keep_warm_s = 0``); ``tree``: the glassloop of that source tree
    (``python -m repl.cli`` with it first on the path), not the installed one."""
    exe = shutil.which("glassloop", path=str(Path(sys.executable).parent))
    if exe is None and tree is None:
        return None
    fixture_registry(work)  # a fresh todos.json
    if todos is not None:
        (work / "todos.json").write_text(json.dumps({"version": 1, "todos": todos}), encoding="utf-8")
    config = work / "bench.toml"
    lines = profile_lines if kept else FRESH_SERVER + profile_lines
    config.write_text(f"[providers.{profile}]\nmodel_path = {json.dumps(str(model))}\n{lines}", "utf-8")
    env = {**os.environ, "XDG_DATA_HOME": str(work / "xdg"), "XDG_STATE_HOME": str(work / "xdg"),
           "XDG_CONFIG_HOME": str(work / "xdg"), "XDG_CACHE_HOME": str(work / "xdg"),
           "GLASSLOOP_TODOS_FILE": str(work / "todos.json"), "GLASSLOOP_WEATHER": "sample"}  # as fixture_registry
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GLASSLOOP_BASE_URL", "GLASSLOOP_PROVIDER"):
        env.pop(key, None)
    program = [sys.executable, "-m", "repl.cli"] if tree is not None else [str(exe)]
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    compile_ours(tree or ROOT)  # as an installed glassloop starts: from bytecode
    started = time.perf_counter()
    done = subprocess.run([*program, "ask", question, "--json", "--config", str(config), "--provider", profile],
                          env=env, capture_output=True, text=True, timeout=900, cwd=work)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout).strip()[-600:], "seconds": seconds}
    result = json.loads(done.stdout)
    if not keep_trace:
        result.pop("trace", None)
    return {"wall_s": seconds, "result": result}


_PERF = re.compile(r"(prompt eval|eval) time =\s*([\d.]+) ms /\s*(\d+) (?:tokens|runs)")


def server_perf(log: Path, offset: int) -> dict[str, float]:
    """llama.cpp's own timing of the last request, read from the server log."""
    text = log.read_bytes()[offset:].decode("utf-8", "replace")
    found = {kind: (float(ms), int(count)) for kind, ms, count in _PERF.findall(text)}
    prompt_ms, prompt_tokens = found.get("prompt eval", (0.0, 0))
    eval_ms, eval_runs = found.get("eval", (0.0, 0))
    return {"prompt_tokens_evaluated": prompt_tokens,
            "prompt_tok_s": prompt_tokens / prompt_ms * 1000 if prompt_ms else 0.0,
            "decode_tokens": eval_runs + 1,
            "decode_tok_s": eval_runs / eval_ms * 1000 if eval_ms else 0.0}


def measured(url: str, log: Path, messages: list[dict], **options: Any) -> dict[str, Any]:
    offset = log.stat().st_size
    reply = stream_chat(url, messages, **options)
    time.sleep(0.2)  # the timing lines are printed just after the last chunk
    ttft = reply["stamps"][0] if reply["stamps"] else reply["total_s"]
    return {"ttft_s": ttft, "total_s": reply["total_s"], "usage": reply["usage"], **server_perf(log, offset)}


def todo_prompt(registry: Registry, fresh: bool, question: str = QUESTION) -> list[dict[str, Any]]:
    messages = to_text_messages([
        *system_prompt_for(ProviderSettings(name="local"), registry).messages(),
        {"role": "user", "content": question},
    ], registry.schemas())
    if fresh:  # a different first token: nothing of the prompt can come from the cache
        messages[0]["content"] = f"[{time.time():.0f}] " + messages[0]["content"]
    return messages


def start_seconds(model: Path, log: Path, evict: bool, threads: int = 0,
                  state_dir: Path | None = None, threads_batch: int = 0) -> tuple[LocalServer, float]:
    """A started server and how long it took (evict: drop the model from the page cache).

    Without ``state_dir`` the server gets an empty one of its own: no saved prompt state.
    """
    if evict:
        with model.open("rb") as handle:
            os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    state_dir = state_dir or Path(tempfile.mkdtemp(prefix="state-", dir=log.parent))
    server = LocalServer(model, log_path=log, threads=threads, threads_batch=threads_batch,
                         state_dir=state_dir)
    started = time.perf_counter()
    server.start()
    return server, time.perf_counter() - started


def new_sessions(model: Path, work: Path, threads: int = 0) -> dict[str, Any]:
    """A new session's first request in a fresh server: with no saved prompt state (the
    server saves it after answering), then in another fresh server that restores it.

    The second session asks another question, as a new session would: only the
    fixed prefix (instructions + tool block) is shared with what was saved.
    """
    state = work / "prefix-state"
    figures: dict[str, Any] = {"target_with_state_s": NEW_SESSION_TARGET_S}
    for label, question in (("without_state", QUESTION), ("with_state", OTHER_QUESTION)):
        log = work / f"session-{label}.log"
        load = os.getloadavg()[0]
        server, start_s = start_seconds(model, log, evict=False, threads=threads, state_dir=state)
        try:
            prompt = todo_prompt(fixture_registry(work), fresh=False, question=question)
            result = measured(server.base_url or "", log, prompt, temperature=0, max_tokens=16)
        finally:
            server.stop()
        figures[label] = {"load_avg_1m": load, "server_start_s": start_s,
                          "prefix_state": server.prefix_state, **result}
    with_state = figures["with_state"]["ttft_s"]
    figures["met_target"] = with_state <= NEW_SESSION_TARGET_S
    figures["speedup"] = figures["without_state"]["ttft_s"] / max(with_state, 1e-9)
    return figures


# how OpenMP's threads wait for each other: the variables the server is started with (none
# set: glassloop's own choice, GOMP_SPINCOUNT=1000; "": the OpenMP runtime's default), the
# three in turn for each thread count, so a drift in the machine's load reaches all three
WAITS = {"glassloop (spin 1,000)": {}, "PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
         "openmp default": {"OMP_WAIT_POLICY": ""}}
MATRIX = [(threads, batch, wait) for threads, batch in ((1, 2), (1, 1), (2, 2)) for wait in WAITS]
SPEED_PROMPT = "Summarise this text in one line.\n\n" + " ".join(
    f"Note {n}: the weekly report lists open issues, the release plan and the budget." for n in range(40))


MATRIX_DECODE = 120  # tokens the matrix's decode request asks for (DECODE_PROMPT needs more)


def matrix_shortfall(prompt: dict[str, Any], decode: dict[str, Any]) -> str:
    """Why a threads-matrix row timed less than it names ("": it did not): its prompt must be
    evaluated whole (the server's own count of the prompt, nothing of it cached) and its decode
    must run all ``MATRIX_DECODE`` tokens."""
    usage = prompt.get("usage") or {}
    whole = usage.get("prompt_tokens") or 0
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    if not whole or cached or prompt["prompt_tokens_evaluated"] != whole:
        return f"prompt: {prompt['prompt_tokens_evaluated']} of {whole or '?'} tokens evaluated, {cached} cached"
    if decode["decode_tokens"] < MATRIX_DECODE:
        return f"decode: {decode['decode_tokens']} of {MATRIX_DECODE} tokens"
    return ""


def threads_matrix(model: Path, work: Path) -> list[dict[str, Any]]:
    """Prompt evaluation and decode speed per (n_threads, n_threads_batch, OpenMP's wait); a row
    that timed less work than it names says so (``failed``: ``matrix_shortfall``)."""
    rows = []
    for threads, batch, wait in MATRIX:
        log = work / f"matrix-{threads}-{batch}-{wait.split()[0]}.log"
        load = os.getloadavg()[0]
        unset = {key: value for key, value in os.environ.items() if key not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
        with patched_environ({**unset, **WAITS[wait]}):
            server, _ = start_seconds(model, log, evict=False, threads=threads, threads_batch=batch)
        try:
            url = server.base_url or ""
            prompt = measured(url, log, [{"role": "user", "content": SPEED_PROMPT}],
                              temperature=0, max_tokens=1)
            decode = measured(url, log, [{"role": "user", "content": DECODE_PROMPT}],
                              temperature=0.1, max_tokens=MATRIX_DECODE, seed=1)
        finally:
            server.stop()
        rows.append({"n_threads": threads, "n_threads_batch": batch,
                     "openmp_wait": wait, "load_avg_1m": load,
                     "prompt_tokens": prompt["prompt_tokens_evaluated"],
                     "prompt_tok_s": prompt["prompt_tok_s"], "decode_tok_s": decode["decode_tok_s"],
                     "failed": matrix_shortfall(prompt, decode), "load_avg_1m_after": os.getloadavg()[0]})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def benchmark(model: Path, work: Path, threads: int = 0, with_cli: bool = True) -> dict[str, Any]:
    figures: dict[str, Any] = {"load_avg_1m_before": os.getloadavg()[0]}
    started = time.perf_counter()
    ensure_model(work / "fresh-data")
    figures["assemble_weights_s"] = time.perf_counter() - started
    server, figures["start_cold_cache_s"] = start_seconds(model, work / "cold.log", evict=True)
    server.stop()
    log = work / "server.log"
    server, figures["start_warm_cache_s"] = start_seconds(model, log, evict=False, threads=threads)
    figures.update(threads=server.threads, threads_batch=server.threads_batch, n_ctx=server.n_ctx,
                   openmp_wait={key: os.environ[key] for key in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
                                if key in os.environ} or "glassloop's (GOMP_SPINCOUNT=1000)")
    url = server.base_url or ""
    try:
        prompt = todo_prompt(fixture_registry(work), fresh=True)
        figures["todo_prompt_uncached"] = measured(url, log, prompt, temperature=0.1, max_tokens=64)
        figures["todo_prompt_cached"] = measured(url, log, prompt, temperature=0.1, max_tokens=64)
        figures["decode"] = measured(url, log, [{"role": "user", "content": DECODE_PROMPT}],
                                     temperature=0.1, max_tokens=200, seed=1)
        figures["raw_turn"] = raw_turn(url, fixture_registry(work), QUESTION)
    finally:
        server.stop()
    figures["new_session"] = new_sessions(model, work, threads)
    if with_cli:
        (work / "cli").mkdir()
        # English without the saved state (this run saves it), then English and Chinese with it
        figures["glassloop_ask"] = ask_turns(model, work / "cli", "local")
        (work / "step2").mkdir()
        figures["step2"] = step2_turns(model, work / "step2", "local")
    figures["load_avg_1m_after"] = os.getloadavg()[0]
    return figures


# the todos the question asks for ("which are not done yet?"): a run's list must hold them all
OPEN_TODOS = frozenset(t["id"] for t in FIXTURE_TODOS if t["status"] == "todo")


def ask_turns(model: Path, work: Path, profile: str, rounds: int = 3) -> dict[str, Any]:
    """``glassloop ask`` on the English todo question with an empty cache dir (no saved
    state: the first run saves it), then ``rounds`` rounds of the English and the Chinese one,
    each asked by a glassloop starting its own server (``keep_warm_s = 0``) and by one using a
    server kept warm (as configured; the first such ask starts it), alternated. A run counts
    only when it did the work: it listed every open todo (``OPEN_TODOS``) and answered after
    them (2 steps or more); any other is a failed run, listed and left out of the medians. The kept
    server is stopped after."""
    figures: dict[str, Any] = {}
    runs: list[dict[str, Any]] = []

    def ask(label: str, question: str, kept: bool) -> dict[str, Any]:
        load = os.getloadavg()[0]
        done = cli_turn(model, work, question, profile, kept=kept, keep_trace=True) or {}
        called, worked = _read_todos(done)
        row = {"label": label, "load_avg_1m": load, "load_avg_1m_after": os.getloadavg()[0], **done,
               "called": called, "failed": not worked}
        print(json.dumps(row, ensure_ascii=False), flush=True)
        return row

    try:
        figures["en_without_state"] = ask("en_without_state", QUESTION, False)
        ask("kept_server_start", QUESTION, True)  # starts the server the kept runs use
        for _ in range(rounds):
            for lang, question in (("en", QUESTION), ("zh", ZH_QUESTION)):
                runs += [ask(f"{lang} own server", question, False), ask(f"{lang} kept warm", question, True)]
    finally:
        _stop_kept_servers(work)
    for label in dict.fromkeys(r["label"] for r in runs):
        figures[label] = _figures(runs, label)
    figures["runs"] = runs
    return figures


def _read_todos(done: dict[str, Any]) -> tuple[list[str], bool]:
    """The tools an ask called (its trace taken out of ``done``), and whether it did the work:
    a list it read held every open todo (``OPEN_TODOS``), and it answered after it (2 steps or
    more). A list narrowed further is less work: filtered to priority "high" for "Explain the
    highest-priority one", the 0.5B's runs had listed one open todo of three."""
    result = done.get("result") or {}
    trace = result.pop("trace", None) or []
    called = [e["name"] for e in trace if e.get("type") == "tool_call_started"]
    listed = {todo.get("id") for e in trace if e.get("type") == "tool_call_finished" and e.get("name") == "list_todos"
              for todo in (e.get("result") or {}).get("todos") or [] if isinstance(todo, dict)}
    return called, OPEN_TODOS <= listed and (result.get("steps") or 0) >= 2


def _figures(runs: list[dict[str, Any]], label: str) -> dict[str, Any]:
    """``label``'s failed runs, and the median, min and max seconds of the others."""
    seconds = [r["wall_s"] for r in runs if r["label"] == label and not r["failed"] and "wall_s" in r]
    return {"failed_runs": sum(r["failed"] for r in runs if r["label"] == label),
            **({"median_s": statistics.median(seconds), "min_s": min(seconds), "max_s": max(seconds)}
               if seconds else {})}


def _stop_kept_servers(work: Path) -> None:
    for record in (work / "xdg").glob("**/server-*.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            os.kill(int(json.loads(record.read_text(encoding="utf-8"))["pid"]), signal.SIGTERM)


def ask_against(model: Path, work: Path, revision: str, rounds: int = 6) -> dict[str, Any]:
    """The warm English ``glassloop ask`` of this source tree beside that of git ``revision`` (a
    worktree made for the run and removed after): side by side, alternated, each with its own
    home and its own server kept warm (the first ask of each, which starts it, not counted). A
    run counts only when it listed every open todo and answered after them; the medians leave failed
    runs out. ``ratio``: this tree's median over the revision's."""
    other = work / "against"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(other), revision],
                   check=True, capture_output=True, text=True)
    trees = {"this tree": (ROOT, work / "this"), revision: (other, work / "revision")}
    runs: list[dict[str, Any]] = []
    try:
        for round_number in range(rounds + 1):
            order = list(trees.items())
            for label, (tree, home) in order if round_number % 2 else order[::-1]:
                home.mkdir(exist_ok=True)
                load = os.getloadavg()[0]
                done = cli_turn(model, home, QUESTION, kept=True, keep_trace=True, tree=tree) or {}
                steps = [round(e["latency_s"], 2) for e in (done.get("result") or {}).get("trace") or []
                         if e.get("type") == "model_usage"]
                called, worked = _read_todos(done)
                row = {"label": label, "round": round_number, "load_avg_1m": load, "model_steps_s": steps,
                       **done, "called": called, "failed": not worked}
                print(json.dumps(row, ensure_ascii=False), flush=True)
                if round_number:  # the first round starts the servers
                    runs.append(row)
    finally:
        for _, home in trees.values():
            _stop_kept_servers(home)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)], capture_output=True)
    figures: dict[str, Any] = {label: _figures(runs, label) for label in trees}
    medians = [figures[label].get("median_s") for label in trees]
    if all(medians):
        figures["ratio"] = medians[0] / medians[1]
    figures["runs"] = runs
    return figures


DECODE_THREADS = {"auto": "", "1 thread": "threads = 1\n", "2 threads": "threads = 2\n"}


def decode_threads_under_load(model: Path, work: Path, rounds: int = 3) -> dict[str, Any]:
    """The warm English ``glassloop ask`` with the decode threads chosen per request (``auto``,
    the default) beside one and two fixed threads, with 0, 1 and 2 other processes spinning on
    the CPUs: side by side, each setting's server kept warm (its first ask, which starts it, not
    counted), the settings alternated within each round. A run counts only when it read the
    todos and answered after them; the medians leave failed runs out."""
    figures: dict[str, Any] = {"cpus": os.cpu_count()}
    spinners: list[subprocess.Popen[bytes]] = []
    try:
        for busy in (0, 1, 2):
            while len(spinners) < busy:
                spinners.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
            time.sleep(2)
            runs: list[dict[str, Any]] = []
            for round_number in range(rounds + 1):
                for label, lines in DECODE_THREADS.items():
                    load = os.getloadavg()[0]
                    done = cli_turn(model, work, QUESTION, profile_lines=lines, kept=True, keep_trace=True) or {}
                    _, worked = _read_todos(done)
                    if round_number:  # the first round starts the servers
                        runs.append({"label": label, "wall_s": done.get("wall_s"), "failed": not worked,
                                     "load_avg_1m": load})
                        print(json.dumps({"busy": busy, **runs[-1]}), flush=True)
            figures[f"{busy} busy"] = {label: _figures(runs, label) for label in DECODE_THREADS}
        log = (work / "xdg" / "glassloop" / "local-server.log")
        figures["auto_chose"] = [line.split(": ", 1)[1] for line in
                                 log.read_text("utf-8", "replace").splitlines() if "glassloop decode threads: " in line]
    finally:
        for spinner in spinners:
            spinner.kill()
        _stop_kept_servers(work)
    return figures


_PREFIX_HIT = re.compile(r"(\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
_PROMPT_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_DECODE = re.compile(r"\s eval time =\s*([\d.]+) ms /\s*(\d+) runs")


def server_requests(log: Path, offset: int) -> list[dict[str, Any]]:
    """Each model call in the server log from ``offset``: prompt tokens (reused from the
    cache + evaluated), prefill seconds, decode tokens and seconds (llama.cpp's timings)."""
    requests: list[dict[str, Any]] = []
    reused = 0
    for line in log.read_bytes()[offset:].decode("utf-8", "replace").splitlines():
        if hit := _PREFIX_HIT.search(line):
            reused = int(hit.group(1))
        elif prompt := _PROMPT_EVAL.search(line):
            evaluated = int(prompt.group(2))
            requests.append({"prompt_tokens": reused + evaluated, "prompt_tokens_reused": reused,
                             "prefill_tokens": evaluated, "prefill_s": float(prompt.group(1)) / 1000})
            reused = 0
        elif (decode := _DECODE.search(line)) and requests:
            requests[-1].update(decode_tokens=int(decode.group(2)), decode_s=float(decode.group(1)) / 1000)
    return requests


def open_todos_listed(answer: str, todos: list[dict[str, Any]]) -> dict[str, int]:
    """How many open (and done) todos the answer names by title or id."""
    def named(todo: dict[str, Any]) -> bool:
        return todo["title"].lower() in answer.lower() or todo["id"] in answer
    open_todos = [t for t in todos if t["status"] != "done"]
    return {"open_named": sum(map(named, open_todos)), "open_total": len(open_todos),
            "done_named": sum(named(t) for t in todos if t["status"] == "done")}


def step2_turns(model: Path, work: Path, profile: str, rounds: int = 1) -> dict[str, Any]:
    """``glassloop ask`` on the todo questions (8 todos), tool results sent as JSON and as
    compact text: the step-2 prompt (its tokens, how many were evaluated, the prefill time,
    from the server log), the whole ask, and whether the answer names the open todos.
    A first ask builds the saved prompt state; the runs then alternate between the modes."""
    log = work / "xdg" / "glassloop" / "local-server.log"
    warm = cli_turn(model, work, STEP2_QUESTIONS[0][1], profile, STEP2_TODOS)
    runs: list[dict[str, Any]] = []
    for _ in range(rounds):
        for lang, question in STEP2_QUESTIONS:
            for mode, chars in STEP2_MODES:
                offset = log.stat().st_size if log.exists() else 0
                load = os.getloadavg()[0]
                done = cli_turn(model, work, question, profile, STEP2_TODOS,
                                f"compact_results = {chars}\n") or {}
                calls = server_requests(log, offset) if log.exists() else []
                answer = (done.get("result") or {}).get("answer", "")
                row = {"mode": mode, "lang": lang, "load_avg_1m": load, "load_avg_1m_after": os.getloadavg()[0],
                       "ask_s": done.get("wall_s") or done.get("seconds"),
                       "steps": (done.get("result") or {}).get("steps"), "model_calls": len(calls),
                       "step1": calls[0] if calls else None, "step2": calls[1] if len(calls) > 1 else None,
                       **open_todos_listed(answer, STEP2_TODOS), "answer": answer, "error": done.get("error")}
                runs.append(row)
                print(json.dumps(row, ensure_ascii=False), flush=True)
    return {"warm_up_s": (warm or {}).get("wall_s"), "summary": step2_summary(runs), "runs": runs}


def step2_summary(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per question language and result form: medians of the step-2 figures and the ask,
    and the open todos named (the report's rows; the runs keep every figure)."""
    summary: dict[str, dict[str, float]] = {}
    for lang, _ in STEP2_QUESTIONS:
        for mode, _ in STEP2_MODES:
            rows = [r for r in runs if r["lang"] == lang and r["mode"] == mode]
            step2 = [r["step2"] for r in rows if r["step2"]]
            figures = {"step2_prompt_tokens": [s["prompt_tokens"] for s in step2],
                       "step2_prefill_tokens": [s["prefill_tokens"] for s in step2],
                       "step2_prefill_s": [s["prefill_s"] for s in step2],
                       "ask_s": [r["ask_s"] for r in rows if r["ask_s"] is not None],
                       "model_calls": [r["model_calls"] for r in rows],
                       "open_todos_named": [r["open_named"] for r in rows]}
            summary[f"{lang} {mode}"] = {k: statistics.median(v) for k, v in figures.items() if v}
    return summary


CONTEXT_SIZES = (4096, 8192, 16384)
CONTEXT_TARGET = 0.35  # the context after a first turn, at most this share full


def rss_mb(pid: int | None) -> dict[str, float]:
    """The server process's resident memory now and at its peak (VmRSS, VmHWM), in MB."""
    found: dict[str, float] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found["rss_mb" if key == "VmRSS" else "peak_rss_mb"] = int(value.split()[0]) / 1024
    except (OSError, ValueError):
        pass
    return found


def ask_context(model: Path, work: Path, n_ctx: int, question: str) -> dict[str, Any]:
    """``glassloop ask`` at ``n_ctx`` (the profile's context): the wall time and how full the
    context is after the turn (the last model call's prompt over n_ctx, as the toolbar and
    ``/usage`` show it)."""
    done = cli_turn(model, work, question, profile_lines=f"n_ctx = {n_ctx}\ncontext_window = {n_ctx}\n", keep_trace=True) or {}
    calls = [e for e in (done.get("result") or {}).get("trace", []) if e.get("type") == "model_usage"]
    prompt = calls[-1]["usage"]["input_tokens"] if calls else 0
    return {"load_avg_1m": os.getloadavg()[0], "wall_s": done.get("wall_s") or done.get("seconds"),
            "steps": (done.get("result") or {}).get("steps"), "last_prompt_tokens": prompt,
            "context_full_pct": 100 * prompt / n_ctx, "error": done.get("error")}


def context_size(model: Path, work: Path, n_ctx: int, asks: int = 3) -> dict[str, Any]:
    """One context size: the server's memory idle and after the todo prompt, prefill and
    decode speed, the saved prompt state's size and load time, and ``glassloop ask`` warm
    (its cache dir holds that state: ask's prompt shares most of the todo prompt's prefix)."""
    state, log = work / "state", work / "server.log"
    figures: dict[str, Any] = {"n_ctx": n_ctx, "load_avg_1m": os.getloadavg()[0]}
    server = LocalServer(model, n_ctx=n_ctx, log_path=log, state_dir=state)
    started = time.perf_counter()
    server.start()
    figures["start_s"] = time.perf_counter() - started
    try:
        figures["idle"] = rss_mb(server.pid)
        url = server.base_url or ""
        prompt = todo_prompt(fixture_registry(work), fresh=False)
        figures["prefill"] = measured(url, log, prompt, temperature=0, max_tokens=1)  # saves the state
        figures["decode"] = measured(url, log, [{"role": "user", "content": DECODE_PROMPT}],
                                     temperature=0.1, max_tokens=MATRIX_DECODE, seed=1)
        figures["after_requests"] = rss_mb(server.pid)
    finally:
        server.stop()
    [saved] = list(state.iterdir())
    figures["state_file_mb"] = saved.stat().st_size / 1e6
    again = LocalServer(model, n_ctx=n_ctx, log_path=work / "restore.log", state_dir=state)
    started = time.perf_counter()
    try:
        again.start()
        figures["start_with_state_s"] = time.perf_counter() - started
        figures["state_restore"] = again.prefix_state  # "loaded N tokens (S s)"
        seconds = re.search(r"\(([\d.]+) s\)$", again.prefix_state or "")
        figures["state_load_s"] = float(seconds.group(1)) if seconds else None
        figures["idle_with_state"] = rss_mb(again.pid)
    finally:
        again.stop()
    cli = work / "cli"
    (cli / "xdg" / "glassloop" / "local-model").mkdir(parents=True)  # ask starts with the state saved above
    shutil.copy2(saved, cli / "xdg" / "glassloop" / "local-model" / saved.name)
    figures["ask_warm"] = [ask_context(model, cli, n_ctx, QUESTION) for _ in range(asks)]
    # a run counts only when it answered after calling a tool (the question needs the todo list):
    # a turn that failed, or answered without looking, would time less work
    held = [r for r in figures["ask_warm"]
            if r["wall_s"] is not None and not r["error"] and (r["steps"] or 0) >= 2]
    figures["ask_failed_runs"] = len(figures["ask_warm"]) - len(held)
    figures["ask_warm_median_s"] = statistics.median(r["wall_s"] for r in held) if held else None
    figures["context_full_pct"] = statistics.median(r["context_full_pct"] for r in held) if held else None
    figures["load_avg_1m_after"] = os.getloadavg()[0]
    return figures


def context_sizes(model: Path, work: Path, sizes: tuple[int, ...] = CONTEXT_SIZES, asks: int = 3) -> dict[str, Any]:
    """Each context size in turn (its own folder: state files and ask's cache are per size)."""
    results = {}
    for n_ctx in sizes:
        folder = work / f"n_ctx-{n_ctx}"
        folder.mkdir()
        results[str(n_ctx)] = context_size(model, folder, n_ctx, asks)
        print(json.dumps({n_ctx: results[str(n_ctx)]}, ensure_ascii=False), flush=True)
    return {"target_context_full_pct": 100 * CONTEXT_TARGET, "sizes": results}


def collect(model: Path, work: Path, target: Path) -> None:
    records: list[dict[str, Any]] = []
    with LocalServer(model, log_path=work / "server.log", state_dir=work / "state") as server:
        for prompt in COLLECT_PROMPTS:
            for temperature, seed in ((0.1, 7), (0.9, 21)):
                raw_turn(server.base_url or "", fixture_registry(work), prompt, max_steps=3,
                         temperature=temperature, seed=seed, record=records)
                print(f"{len(records):3d} records  ({prompt[:40]!r} t={temperature})", flush=True)
    names = fixture_registry(work).names()
    for number, record in enumerate(records, 1):
        text, calls = parse_text_calls(record["output"], names if record["tools"] else [])
        record["id"] = f"r{number:03d}"
        record["expected"] = {"text": text, "calls": [
            {"name": c.name, "arguments": c.arguments} for c in calls]}
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = {"model": model.name, "tool_names": names, "records": records}
    target.write_text(json.dumps(payload, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(records)} records to {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collect", type=Path, help="write a corpus of real replies here")
    parser.add_argument("--threads", type=int, default=0, help="llama.cpp decode threads (0 = auto: per request, the CPUs left free)")
    parser.add_argument("--no-cli", action="store_true", help="skip the `glassloop ask` turns")
    parser.add_argument("--threads-matrix", action="store_true",
                        help="only compare thread counts and how OpenMP's threads wait")
    parser.add_argument("--new-session", action="store_true",
                        help="only the new-session first token, without and with the saved state")
    parser.add_argument("--ask", action="store_true",
                        help="only `glassloop ask` on the English and Chinese todo questions")
    parser.add_argument("--against", metavar="REVISION",
                        help="the warm English `glassloop ask` of this tree beside that of a git revision, "
                             "alternated (--asks rounds)")
    parser.add_argument("--decode-threads", action="store_true",
                        help="only the warm `glassloop ask` with decode threads auto, 1 and 2, beside 0, 1 and 2 "
                             "busy processes")
    parser.add_argument("--step2", type=int, nargs="?", const=1, default=0, metavar="ROUNDS",
                        help="only step 2 of `glassloop ask` (8 todos, en + zh): tool results as JSON vs compact")
    parser.add_argument("--context-sizes", nargs="?", const=",".join(map(str, CONTEXT_SIZES)), metavar="N,N,...",
                        help="only these n_ctx (default 4k, 8k, 16k, in this order): memory, prefill and decode "
                             "speed, the saved state's size and load time, `glassloop ask` warm and its context share")
    parser.add_argument("--asks", type=int, default=3, help="--context-sizes: warm `glassloop ask` runs per size; --ask: rounds of own-server and kept-warm asks; "
                             "--decode-threads: rounds per load")
    parser.add_argument("--profile", default="local", choices=sorted(BUNDLED),
                        help="the embedded model: local (0.5B) or local-large (1.5B, its extra installed)")
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "glassloop-bench")
    args = parser.parse_args()
    model = ensure_model(args.data_dir, spec=BUNDLED[args.profile])
    with tempfile.TemporaryDirectory() as folder:
        if args.collect:
            collect(model, Path(folder), args.collect)
            return
        if args.step2:
            found = step2_turns(model, Path(folder), args.profile, args.step2)
            print(json.dumps({"profile": args.profile, "step2": found}, indent=1, ensure_ascii=False))
            return
        if args.context_sizes:
            order = tuple(int(n) for n in args.context_sizes.split(","))
            sizes = context_sizes(model, Path(folder), order, args.asks)
            out = ROOT / "bench" / "results" / "local_model_context.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(sizes, indent=1, ensure_ascii=False), encoding="utf-8")
            print(json.dumps(sizes, indent=1, ensure_ascii=False))
            return
        if args.decode_threads:
            print(json.dumps({"decode_threads": decode_threads_under_load(model, Path(folder), args.asks)}, indent=1))
            return
        if args.against:
            found = ask_against(model, Path(folder), args.against, args.asks)
            print(json.dumps({"against": args.against, "ask": found}, indent=1, ensure_ascii=False))
            return
        if args.threads_matrix or args.new_session or args.ask:
            part = "threads_matrix" if args.threads_matrix else "new_session" if args.new_session else "ask"
            found = (threads_matrix(model, Path(folder)) if args.threads_matrix
                     else new_sessions(model, Path(folder), args.threads) if args.new_session
                     else ask_turns(model, Path(folder), args.profile, args.asks))
            print(json.dumps({"profile": args.profile, part: found}, indent=1, ensure_ascii=False))
            return
        figures = benchmark(model, Path(folder), args.threads, not args.no_cli)
    figures["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "python": platform.python_version()}
    out = ROOT / "bench" / "results" / "local_model.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=1, ensure_ascii=False), encoding="utf-8")
    print(json.dumps(figures, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
