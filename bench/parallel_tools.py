"""Parallel tools: one step with 4 read-only calls of 0.5 s each.

The turn is two model calls (4 tool calls, then the answer) against the
scripted server. Concurrent: the tool is read-only, so ``run_turn`` runs the
four calls at once. Serial, beside it: the same tool declared with side
effects (approval mode auto), which the loop runs one after another.
"""

from __future__ import annotations

import json
import time
from typing import Any

from bench import median, row, target

CALLS = 4


def make_tool(seconds: float, side_effects: bool) -> Any:
    from tools.registry import tool

    @tool(name="slow_lookup", side_effects=side_effects)
    def slow_lookup(key: str) -> dict:
        """Look a key up slowly.

        Args:
            key: the key.
        """
        time.sleep(seconds)
        return {"key": key}

    return slow_lookup


def one_turn(server: Any, provider: Any, seconds: float, side_effects: bool) -> float:
    from repl.loop.agent import Limits, run_turn
    from repl.loop.approval import Approver
    from repl.loop.events import EventLog
    from repl.loop.history import History
    from tests.fakeserver import call, text, tool_calls
    from tools.registry import Registry

    server.script(tool_calls(*(call("slow_lookup", {"key": f"k{i}"}) for i in range(CALLS))), text("done"))
    log = EventLog()
    started = time.perf_counter()
    finished = run_turn(History("bench"), "look up four keys", provider=provider,
                        registry=Registry([make_tool(seconds, side_effects)]), approver=Approver("auto"),
                        limits=Limits(), emit=log)
    elapsed = time.perf_counter() - started
    results = [e.result for e in log.events if type(e).__name__ == "ToolCallFinished"]
    if finished.stopped_by != "answer" or [r.get("ok") for r in results] != [True] * CALLS:
        raise RuntimeError(f"turn ended with {finished.stopped_by}: {json.dumps(results)[:300]}")
    return elapsed


def run(quick: bool) -> dict[str, Any]:
    from repl.providers.chat import ChatProvider
    from tests.fakeserver import FakeServer

    seconds, repeats = (0.1, 1) if quick else (0.5, 5)
    samples: dict[str, list[float]] = {"concurrent": [], "serial": []}
    with FakeServer() as server:
        provider = ChatProvider(name="bench", model="fake-model", base_url=server.base_url,
                                api_key="no-key", max_retries=0)
        one_turn(server, provider, 0.0, False)  # warm up: SDK import, client, connection
        for _ in range(repeats):
            samples["concurrent"].append(one_turn(server, provider, seconds, False))
            samples["serial"].append(one_turn(server, provider, seconds, True))
        provider.close()
    concurrent, serial = median(samples["concurrent"]), median(samples["serial"])
    limit = 1.3 * seconds  # 0.65 s for calls of 0.5 s
    return {
        "name": "parallel_tools",
        "rows": [
            row("slowest single call", seconds, "s", "the floor"),
            row("turn, 4 read-only calls (concurrent)", concurrent, "s", "2 model calls + tools"),
            row("turn, same calls run serially", serial, "s", "tool declared with side effects, mode auto"),
            row("speed-up", serial / concurrent, "x"),
        ],
        "targets": {"turn": target(concurrent, limit, f"turn with {CALLS} calls of {seconds:g} s <= {limit:g} s")},
        "params": {"calls": CALLS, "call_seconds": seconds, "repeats": repeats},
        "samples": samples,
    }
