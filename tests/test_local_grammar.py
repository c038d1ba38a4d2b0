"""The embedded model under the grammar: real llama.cpp inference, a few short requests.

The provider is built as glassloop builds it (``make_provider``: the embedded server,
text tool calls, the grammar switched on for it). A handful of the evaluation's
questions (English, Chinese, a greeting) get a first step at temperature 0.9, where the
unconstrained model wrote broken or invented calls; every call must be schema-valid.
Five tools keep the prompt short (the whole test takes well under a minute idle).
"""

from __future__ import annotations

import shutil
from importlib import util
from pathlib import Path

import pytest

from bench import isolated_env, patched_environ
from bench.tool_use import cases, fixture, local_provider, schema_valid
from repl.config.settings import ProviderSettings
from repl.providers.base import Completed, RequestSent
from repl.session.runtime import system_prompt_for
from tests.support import FIVE_TOOLS

pytestmark = [
    pytest.mark.skipif(util.find_spec("llama_cpp") is None,
                       reason="needs the 'local' extra: pip install 'glassloop[local]'"),
    pytest.mark.xdist_group("llama"),  # real inference uses every CPU: one test worker runs it all
]
TOOLS = FIVE_TOOLS
QUESTIONS = [c for c in cases() if set(c.tools) & set(TOOLS) and c.id in ("todos-open", "percent", "remind")
             or c.id == "hello" and c.lang == "zh"]


@pytest.mark.timeout(600)
def test_every_call_the_model_makes_under_the_grammar_is_schema_valid(
        tmp_path: Path, embedded_model: Path, five_tool_prompt_state: Path) -> None:
    shutil.copytree(five_tool_prompt_state, tmp_path / "xdg" / "cache" / "glassloop" / "local-model")
    registry = fixture(tmp_path / "tools")
    tools = [s for s in registry.schemas() if s["name"] in TOOLS]
    system = system_prompt_for(ProviderSettings(name="local"), registry)
    schemas = {s["name"]: s["parameters"] for s in tools}
    calls, bodies = [], []
    with patched_environ(isolated_env(tmp_path / "xdg")):
        provider = local_provider(0.9, embedded_model, tmp_path, grammar=True, n_ctx=2048)
    try:
        assert provider.dialect.grammar  # the embedded server's dialect has it on
        for case in QUESTIONS:
            messages = [*system.messages(), {"role": "user", "content": case.message}]
            parts = list(provider.stream(messages, tools))
            bodies += [p.body for p in parts if isinstance(p, RequestSent)]
            done = [p for p in parts if isinstance(p, Completed)][-1]
            calls += [(case.id, c.name, c.arguments) for c in done.tool_calls]
    finally:
        provider.close()
    assert len(QUESTIONS) == 7 and len(bodies) == len(QUESTIONS)
    assert all("root ::=" in body.get("grammar", "") for body in bodies)
    assert calls, "the model made no call at all: nothing was checked"
    invalid = [call for call in calls if not schema_valid(call[1], call[2], schemas)]
    assert invalid == []


def _greedy_first_steps(model: Path, tmp_path: Path, state: Path, grammar_first: bool) -> tuple[list[str], str]:
    """The replies of a server to the first step of four of QUESTIONS (temperature 0, the tool
    grammar), and its log."""
    import httpx

    from repl.embedded import textcalls
    from repl.embedded.grammar import tool_grammar
    from repl.embedded.server import LocalServer

    registry = fixture(tmp_path / "tools")
    tools = [s for s in registry.schemas() if s["name"] in TOOLS]
    system = system_prompt_for(ProviderSettings(name="local"), registry)
    log = tmp_path / f"server-{grammar_first}.log"
    # a fenced and a bare call, both languages, and a text answer: each way decodes them all
    questions = [c for c in QUESTIONS if (c.id, c.lang) in (("todos-open", "en"), ("remind", "zh"),
                                                             ("percent", "zh"), ("hello", "zh"))]
    with patched_environ(isolated_env(tmp_path / "xdg")), \
            LocalServer(model, n_ctx=2048, log_path=log, state_dir=state,
                        grammar_first=grammar_first) as server:
        replies = []
        with httpx.Client(timeout=300, trust_env=False) as client:
            for case in questions:
                messages = [*system.messages(), {"role": "user", "content": case.message}]
                body = {"model": "local", "messages": textcalls.to_text_messages(messages, tools),
                        "temperature": 0.0, "max_tokens": 60, "grammar": tool_grammar(tools)}
                reply = client.post(f"{server.base_url}/chat/completions", json=body).json()
                replies.append(reply["choices"][0]["message"]["content"])
    return replies, log.read_text("utf-8", "replace")


@pytest.mark.timeout(900)
def test_the_grammar_checked_on_the_sampled_token_decodes_what_the_whole_vocabulary_check_does(
        tmp_path: Path, embedded_model: Path, five_tool_prompt_state: Path) -> None:
    """The server checks the grammar on the sampled token only, and over the whole vocabulary
    only when that token is refused (llama.cpp's own order, much cheaper per token); greedy
    decoding then gives the very text llama-cpp-python's order gives."""
    state = shutil.copytree(five_tool_prompt_state, tmp_path / "state")
    checked, log = _greedy_first_steps(embedded_model, tmp_path, state, grammar_first=False)
    whole, old_log = _greedy_first_steps(embedded_model, tmp_path, state, grammar_first=True)
    assert "glassloop sampler: grammar checked on the sampled token" in log
    assert "glassloop sampler" not in old_log  # grammar_first: llama-cpp-python's order
    assert len(checked) == 4 and checked == whole
    assert any(reply.lstrip().startswith(("{", "```json")) for reply in checked)  # calls were decoded
    assert any(not reply.lstrip().startswith(("{", "```")) for reply in checked)  # and a text answer
