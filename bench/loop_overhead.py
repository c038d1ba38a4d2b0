"""Loop overhead: glassloop's ``run_turn`` against a minimal hand-written openai SDK loop.

Each turn is a model call answered with 3 tool calls (a trivial read-only
tool), then a model call answered with text. Two shapes: one conversation
growing over N turns (request size grows, so the SDK's per-message cost
dominates), and N one-turn conversations (``/reset`` between turns: the loop's
fixed cost per call is most visible). Both stream with usage, send the same tool schema and the
same messages, and talk to the same scripted server (its own process, no
artificial latency). glassloop runs with everything the REPL has on: events,
argument validation, the thread pool, the JSONL trace and the session journal.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import ServerProcess, median, row, scratch, target

SYSTEM = "You are a benchmark assistant."
MODEL = "fake-model"
TEMPERATURE, MAX_TOKENS = 0.2, 2048
ANSWER = "All three keys were looked up; the values are in the tool results above. " * 2


def lookup(key: str) -> dict:
    """Look a key up.

    Args:
        key: the key.
    """
    return {"key": key, "value": len(key)}


def script(turns: int) -> list[dict[str, Any]]:
    pair = [{"tool_calls": [{"name": "lookup", "arguments": json.dumps({"key": f"k{i}"})} for i in range(3)],
             "usage": [50, 10, 0], "chunk_size": 16},
            {"text": ANSWER, "usage": [50, 30, 0], "chunk_size": 8}]
    return pair * turns


Timing = tuple[float, float]  # wall seconds, CPU seconds of this process (all threads)


class Clock:
    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def read(self) -> Timing:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


# ---- the baseline: the openai SDK by hand --------------------------------------------


def _read_stream(stream: Any) -> tuple[str, list[dict[str, str]]]:
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    for chunk in stream:
        for choice in chunk.choices:
            delta = choice.delta
            if delta is None:
                continue
            if delta.content:
                text.append(delta.content)
            for frag in delta.tool_calls or []:
                call = calls.setdefault(frag.index, {"id": "", "name": "", "arguments": ""})
                call["id"] = frag.id or call["id"]
                if frag.function is not None:
                    call["name"] += frag.function.name or ""
                    call["arguments"] += frag.function.arguments or ""
    return "".join(text), [calls[i] for i in sorted(calls)]


def _create(client: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]], raw: bool) -> Any:
    if raw:  # the same body, but the SDK's per-message transform of typed params is skipped
        return client.chat.completions.create(
            model=MODEL, messages=[], temperature=TEMPERATURE, max_tokens=MAX_TOKENS, stream=True,
            stream_options={"include_usage": True}, extra_body={"messages": messages, "tools": tools})
    return client.chat.completions.create(
        model=MODEL, messages=messages, tools=tools, temperature=TEMPERATURE,
        max_tokens=MAX_TOKENS, stream=True, stream_options={"include_usage": True})


def baseline_loop(client: Any, tools: list[dict[str, Any]], turns: int, raw: bool, fresh: bool) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for number in range(turns):
        if fresh:
            del messages[1:]
        messages.append({"role": "user", "content": f"question {number}"})
        while True:
            stream = _create(client, messages, tools, raw)
            text, calls = _read_stream(stream)
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                message["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
                    "name": c["name"], "arguments": c["arguments"]}} for c in calls]
            messages.append(message)
            if not calls:
                break
            for c in calls:
                result = lookup(**json.loads(c["arguments"]))
                messages.append({"role": "tool", "tool_call_id": c["id"],
                                 "content": json.dumps({"ok": True, **result})})


def run_baseline(base_url: str, turns: int, folder: Path, fresh: bool, raw: bool = False) -> Timing:
    import openai

    from repl.providers.chat import to_wire_tools
    from tools.registry import Registry, tool

    tools = to_wire_tools(Registry([tool(lookup)]).schemas())
    with openai.OpenAI(base_url=base_url, api_key="no-key", max_retries=0) as client:
        clock = Clock()
        baseline_loop(client, tools, turns, raw, fresh)
        return clock.read()


# ---- glassloop ----------------------------------------------------------------------


def run_glassloop(base_url: str, turns: int, folder: Path, fresh: bool, subscribers: bool = True) -> Timing:
    from repl.archive.journal import Journal
    from repl.config.redact import Redactor
    from repl.loop.agent import Limits, run_turn
    from repl.loop.approval import Approver
    from repl.loop.events import Event
    from repl.loop.history import History
    from repl.providers.chat import ChatProvider
    from repl.tracing.trace import JsonlWriter, Trace
    from tools.registry import Registry, tool

    provider = ChatProvider(name="bench", model=MODEL, base_url=base_url, api_key="no-key",
                            temperature=TEMPERATURE, max_tokens=MAX_TOKENS, max_retries=0,
                            context_window=128_000)
    provider._get_client()  # the client is built before the clock starts, as in the baseline
    registry, history, approver, limits = Registry([tool(lookup)]), History(SYSTEM), Approver("auto"), Limits()
    trace = Trace(JsonlWriter(folder / "trace.jsonl", Redactor()), "bench", "run")
    journal = Journal(folder / "journal.jsonl", Redactor(), {"session": "bench"})

    def emit(event: Event) -> None:
        if subscribers:
            trace(event)
            journal.sync(history)

    clock = Clock()
    for number in range(turns):
        if fresh:
            history.reset()  # what /reset does; the journal records a truncation
        finished = run_turn(history, f"question {number}", provider=provider, registry=registry,
                            approver=approver, limits=limits, emit=emit, turn=number + 1)
        if finished.stopped_by != "answer" or finished.tool_calls != 3:
            raise RuntimeError(f"turn {number + 1} ended with {finished.stopped_by}")
    elapsed = clock.read()
    provider.close()
    trace.writer.close()
    journal.close()
    return elapsed


Variant = Callable[[str, int, Path, bool], Timing]
VARIANTS: dict[str, Variant] = {
    "baseline": run_baseline,
    "glassloop": run_glassloop,
    "glassloop_bare": lambda url, turns, folder, fresh: run_glassloop(url, turns, folder, fresh, subscribers=False),
    "baseline_raw": lambda url, turns, folder, fresh: run_baseline(url, turns, folder, fresh, raw=True),
}
LABELS = {
    "baseline": "openai SDK loop by hand (baseline)",
    "glassloop": "glassloop run_turn + trace + journal",
    "glassloop_bare": "glassloop run_turn, no subscribers",
    "baseline_raw": "hand loop, messages in extra_body",
}


def measure(url: str, folder: Path, turns: int, repeats: int, fresh: bool) -> dict[str, list[Timing]]:
    """Interleaved runs, the order rotated each repeat; one untimed warm-up run of each first."""
    samples: dict[str, list[Timing]] = {name: [] for name in VARIANTS}
    for name, variant in VARIANTS.items():
        variant(url, 2, folder / f"warm-{name}", fresh)
    names = list(VARIANTS)
    for repeat in range(repeats):
        for name in names[repeat % len(names):] + names[:repeat % len(names)]:
            samples[name].append(VARIANTS[name](url, turns, folder / f"{name}-{fresh}-{repeat}", fresh))
    return samples


def medians(samples: dict[str, list[Timing]], index: int) -> dict[str, float]:
    return {name: median([t[index] for t in values]) for name, values in samples.items()}


def _rows(shape: str, samples: dict[str, list[Timing]], calls: int) -> list[dict[str, Any]]:
    wall, cpu = medians(samples, 0), medians(samples, 1)
    rows = [row(f"{shape}: {LABELS[name]}", wall[name], "s",
                f"{1000 * wall[name] / calls:.2f} ms wall, {1000 * cpu[name] / calls:.2f} ms CPU per model call")
            for name in VARIANTS]
    rows.append(row(f"{shape}: ratio glassloop / baseline", wall["glassloop"] / wall["baseline"], "x",
                    f"CPU {cpu['glassloop'] / cpu['baseline']:.3f}x; "
                    f"without subscribers {wall['glassloop_bare'] / wall['baseline']:.3f}x"))
    return rows


def run(quick: bool) -> dict[str, Any]:
    turns, repeats = (3, 1) if quick else (100, 4)
    fresh_repeats = 1 if quick else 7
    needed = len(VARIANTS) * (2 + turns * repeats) + len(VARIANTS) * (2 + turns * fresh_repeats)
    with scratch("loop") as folder, ServerProcess(script(needed), folder) as server:
        fresh = measure(server.base_url, folder, turns, fresh_repeats, fresh=True)
        one = measure(server.base_url, folder, turns, repeats, fresh=False)
    one_label, fresh_label = f"one {turns}-turn conversation", f"{turns} one-turn conversations"
    one_wall, fresh_wall = medians(one, 0), medians(fresh, 0)
    ratio_one = one_wall["glassloop"] / one_wall["baseline"]
    ratio_fresh = fresh_wall["glassloop"] / fresh_wall["baseline"]
    return {
        "name": "loop_overhead",
        "rows": _rows(fresh_label, fresh, 2 * turns) + _rows(one_label, one, 2 * turns),
        "targets": {
            "ratio": target(ratio_one, 1.15, f"glassloop / hand-written loop <= 1.15 ({one_label})"),
            "ratio_fresh": target(ratio_fresh, 1.15, f"glassloop / hand-written loop <= 1.15 ({fresh_label})"),
        },
        "params": {"turns": turns, "tool_calls_per_turn": 3, "repeats": repeats, "fresh_repeats": fresh_repeats},
        "samples": {"one_conversation": one, "fresh_conversations": fresh},
    }
