"""A real Arize Phoenix receives a glassloop turn: ``phoenix serve`` on free ports in a temporary
working folder, one ``glassloop ask --otel`` against the scripted server (a tool call, then the
answer) sending to Phoenix's OTLP/HTTP endpoint, and Phoenix's REST API then holds the trace: the
turn, its two model calls and its tool call, as Phoenix's kinds of span (agent, LLM, tool).

Opt-in: collected only when ``GLASSLOOP_PHOENIX`` names the ``phoenix`` program (installed in a
virtualenv of its own, never the project's; see docs/EXPORTING.md, "Phoenix")::

    GLASSLOOP_PHOENIX=/tmp/phoenix-venv/bin/phoenix .venv/bin/python -m pytest -n 0 tests/opt_in -q
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakeserver import FakeServer, call, text, tool_calls
from tests.support import glassloop

QUESTION = "what is still open?"
ANSWER = "Two todos are open: write the weekly report (high) and answer the mail (medium)."
ASKED, ANSWERED = "model-a", "model-a-2025-01-01"
START_S = 180.0  # at most, for Phoenix to start (it migrates its database first)
ARRIVE_S = 30.0  # at most, for the spans to be stored once sent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - a local URL
        return json.loads(response.read())


def _wait_until_up(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        assert server.poll() is None, log.read_text(errors="replace")[-3000:]
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):  # noqa: S310 - a local URL
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    pytest.fail(f"phoenix serve did not answer {url}/healthz: {log.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``phoenix serve`` on 127.0.0.1 with its own working folder; its web URL (the UI, the REST
    API under /v1, OTLP/HTTP at /v1/traces)."""
    folder = tmp_path_factory.mktemp("phoenix")
    port = _free_port()
    # none of the user's own Phoenix settings (a database URL) reaches the one started here
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "PYTHON"))}
    env = {**kept, "PHOENIX_WORKING_DIR": str(folder), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(_free_port()),
           "PHOENIX_TELEMETRY_ENABLED": "false"}
    log = folder / "phoenix.log"
    with log.open("wb") as out:
        server = subprocess.Popen([os.environ["GLASSLOOP_PHOENIX"], "serve"], env=env, cwd=folder,
                                  stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, server, log)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _spans_of(url: str, count: int) -> list[dict[str, Any]]:
    """The default project's spans, once ``count`` have been stored (or ``ARRIVE_S`` passed)."""
    deadline = time.monotonic() + ARRIVE_S
    spans: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        spans = _get(f"{url}/v1/projects/default/spans?limit=100")["data"]
        if len(spans) >= count:
            break
        time.sleep(0.5)
    return spans


@pytest.mark.timeout(300)
def test_phoenix_receives_the_turn_with_its_model_and_tool_calls(phoenix, fake_server: FakeServer, home):
    fake_server.script(tool_calls(call("list_todos", {}, id="call_a"), model=ANSWERED),
                       text(ANSWER, model=ANSWERED))
    env = {**home, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{phoenix}/v1/traces"}
    result = glassloop("ask", QUESTION, "--json", "--otel", "--model", ASKED,
                       "--base-url", fake_server.base_url, env=env)
    assert result.returncode == 0, result.stderr
    assert "OpenTelemetry" not in result.stderr, result.stderr  # every batch was accepted
    out = json.loads(result.stdout)
    assert out["answer"] == ANSWER

    spans = _spans_of(phoenix, 4)
    assert len(spans) == 4, spans
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    [turn] = [s for s in spans if s["name"] == "invoke_agent glassloop"]
    models = sorted((s for s in spans if s["attributes"].get("gen_ai.operation.name") == "chat"),
                    key=lambda s: s["attributes"]["glassloop.step"])
    [tool] = [s for s in spans if s["name"] == "execute_tool list_todos"]
    assert turn["parent_id"] is None and turn["span_kind"] == "AGENT"
    assert turn["attributes"]["gen_ai.conversation.id"] == out["session"]
    assert turn["attributes"]["glassloop.turn.stopped_by"] == "answer"
    assert all(s["parent_id"] == turn["context"]["span_id"] for s in [*models, tool])
    assert [s["span_kind"] for s in models] == ["LLM", "LLM"]
    assert [(s["attributes"]["gen_ai.request.model"], s["attributes"]["gen_ai.response.model"])
            for s in models] == [(ASKED, ANSWERED)] * 2
    assert [s["attributes"]["gen_ai.response.finish_reasons"] for s in models] == [["tool_calls"], ["stop"]]
    assert tool["span_kind"] == "TOOL"
    assert (tool["attributes"]["gen_ai.tool.call.id"], tool["attributes"]["glassloop.tool.outcome"]) == (
        "call_a", "ok")
