"""Context window: tokens sent per request over a long conversation, with and without management.

One scripted conversation of N turns (200; 20 with --quick): each turn asks
for a page, the model calls ``fetch`` (a ~3,300-character result, clipped to
1,500 characters by ``max_tool_result_chars``) and then answers in ~130
characters. It runs through the real ``run_turn`` and Chat Completions adapter
against the scripted server with prefix-cache accounting (``FakeServer(
prefix_cache=True)``: prompt = tools + messages as JSON at ~4 bytes a token,
cached = longest prefix shared with any earlier request in 64-token blocks).

Variants: no management (``context_window = 0``: the whole history is sent);
management that cuts just enough on every request (``refill = 1.0``); and
glassloop's management (cut to 75 % of the budget, cut kept while requests
only grow), each at a 2,000- and an 8,000-token window.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench import row, target

WINDOWS = (2000, 8000)
ANSWER_TOKENS = 256  # max_tokens: the reserve for the answer
PRICE_IN, PRICE_CACHED = 0.15, 0.075  # gpt-4o-mini as in config.toml, USD per million input tokens


def fetch(page: int) -> dict:
    """Fetch a page of a long document.

    Args:
        page: the page number.
    """
    return {"page": page, "text": f"page {page}: " + "lorem ipsum dolor sit amet " * 120}


def conversation(turns: int, window: int, refill: float | None) -> dict[str, Any]:
    """Run the conversation; ``refill`` None = no management. Per-request figures."""
    from repl.loop.agent import Limits, run_turn
    from repl.loop.approval import Approver
    from repl.loop.context import ContextWindow
    from repl.loop.events import EventLog, ModelUsage, Notice
    from repl.loop.history import History, check
    from repl.providers.chat import ChatProvider
    from tests.fakeserver import FakeServer, call, text, tool_calls
    from tools.registry import Registry, tool

    registry, limits = Registry([tool(fetch)]), Limits(max_tool_result_chars=1500)
    with FakeServer(prefix_cache=True) as server:
        for i in range(turns):
            server.script(tool_calls(call("fetch", {"page": i})), text(f"Page {i} is about lorem ipsum. " * 4))
        provider = ChatProvider(name="bench", model="fake-model", base_url=server.base_url, api_key="k",
                                max_retries=0, max_tokens=ANSWER_TOKENS,
                                context_window=window if refill is not None else 0)
        history, log = History("You are a benchmark assistant."), EventLog()
        context = ContextWindow(refill=refill if refill is not None else 1.0)
        started = time.perf_counter()
        for i in range(turns):
            run_turn(history, f"What does page {i} say?", provider=provider, registry=registry,
                     approver=Approver("auto"), limits=limits, emit=log, turn=i + 1, context=context)
        elapsed = time.perf_counter() - started
        provider.close()
    usages = [e.usage for e in log.of(ModelUsage)]
    sent = [u.input_tokens for u in usages]
    return {"sent": sent, "cached": [u.cached_tokens for u in usages], "cuts": len(log.of(Notice)),
            "errors": len(server.history_errors) + len(check(history.messages)), "seconds": elapsed}


def _summary(label: str, figures: dict[str, Any]) -> list[dict[str, Any]]:
    sent, cached = figures["sent"], sum(figures["cached"])
    total = sum(sent)
    share = cached / total if total else 0.0
    cost = ((total - cached) * PRICE_IN + cached * PRICE_CACHED) / 1e6
    return [
        row(f"{label}: tokens per request, mean", statistics.fmean(sent), "tokens",
            f"median {statistics.median(sent):,.0f}, last {sent[-1]:,}"),
        row(f"{label}: tokens per request, max", max(sent), "tokens"),
        row(f"{label}: tokens sent in all", total, "tokens", f"{len(sent)} requests"),
        row(f"{label}: cached share", 100 * share, "%", f"input ${cost:.3f} at gpt-4o-mini prices"),
        row(f"{label}: cuts announced", figures["cuts"], "", f"history errors {figures['errors']}"),
    ]


def run(quick: bool) -> dict[str, Any]:
    turns = 20 if quick else 200
    variants: dict[str, dict[str, Any]] = {"unmanaged": conversation(turns, 0, None)}
    for window in WINDOWS:
        variants[f"{window} window, cut just enough"] = conversation(turns, window, 1.0)
        variants[f"{window} window, glassloop"] = conversation(turns, window, 0.75)
    rows = [r for label, figures in variants.items() for r in _summary(label, figures)]
    small = variants[f"{WINDOWS[0]} window, glassloop"]
    over = max(small["sent"]) / WINDOWS[0]
    return {"name": "context_window", "rows": rows,
            "targets": {"inside": target(over, 1.0, f"largest request / {WINDOWS[0]}-token window <= 1"),
                        "valid": target(sum(v["errors"] for v in variants.values()), 0,
                                        "history errors at any request = 0")},
            "params": {"turns": turns, "windows": list(WINDOWS), "answer_reserve": ANSWER_TOKENS,
                       "max_tool_result_chars": 1500},
            "series": {label: {"sent": v["sent"], "cached": v["cached"]} for label, v in variants.items()}}


if __name__ == "__main__":  # until ``python -m bench`` lists it: python -m bench.context_window [--quick]
    import json
    import sys

    from bench import RESULTS
    from bench.__main__ import format_result, run_one

    result = run_one("context_window", quick="--quick" in sys.argv)
    print(format_result(result))
    if not result["quick"]:
        (RESULTS / "context_window.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
