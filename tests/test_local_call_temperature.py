"""The embedded server decodes calls conservatively: real llama.cpp inference.

A step's first token and every token of a call are sampled at min(t, 0.1); prose keeps the
request's temperature (``_GrammarLast`` in ``repl/embedded/llama_server.py``). At temperature 1.0
the same first step under other seeds must decide alike (answer, or call the same tool with
the same required arguments), while a prose answer still varies. Sampled at 1.0 throughout
(``LocalServer(call_temperature=None)``) the seeds called three tools.
"""

from __future__ import annotations

import json
import shutil
from importlib import util
from pathlib import Path

import pytest

from bench import isolated_env, patched_environ
from bench.tool_use import fixture
from repl.config.settings import ProviderSettings
from repl.session.runtime import system_prompt_for
from tests.support import FIVE_TOOLS

pytestmark = [
    pytest.mark.skipif(util.find_spec("llama_cpp") is None,
                       reason="needs the 'local' extra: pip install 'glassloop[local]'"),
    pytest.mark.xdist_group("llama"),  # real inference uses every CPU: one test worker runs it all
]
TOOLS = FIVE_TOOLS  # the prompt whose saved state the grammar tests share
CALLS = ("Is it raining in Berlin at the moment?", "我还有哪些待办没做完？")
PROSE = "Write one short sentence about autumn leaves."
SEEDS = range(4)


@pytest.mark.timeout(600)
def test_calls_are_decoded_alike_under_any_seed_while_prose_is_sampled(
        tmp_path: Path, embedded_model: Path, five_tool_prompt_state: Path) -> None:
    import httpx

    from repl.embedded import textcalls
    from repl.embedded.grammar import tool_grammar
    from repl.embedded.server import LocalServer

    registry = fixture(tmp_path / "tools")
    tools = [s for s in registry.schemas() if s["name"] in TOOLS]
    system = system_prompt_for(ProviderSettings(name="local"), registry)
    # the server's default cap (call_temperature=None shows the old sampling)
    with patched_environ(isolated_env(tmp_path / "xdg")), \
            LocalServer(embedded_model, n_ctx=2048, log_path=tmp_path / "server.log", state_dir=shutil.copytree(five_tool_prompt_state, tmp_path / "state")) as server, \
            httpx.Client(timeout=300, trust_env=False) as client:
        def replies(question: str, max_tokens: int) -> list[str]:
            messages = [*system.messages(), {"role": "user", "content": question}]
            body = {"model": "local", "messages": textcalls.to_text_messages(messages, tools),
                    "max_tokens": max_tokens, "grammar": tool_grammar(tools), "temperature": 1.0}
            return [client.post(f"{server.base_url}/chat/completions", json={**body, "seed": seed})
                    .json()["choices"][0]["message"]["content"] for seed in SEEDS]

        calls = {question: replies(question, 40) for question in CALLS}
        prose = replies(PROSE, 16)
    required = {s["name"]: s["parameters"].get("required", []) for s in tools}

    def decisions(text: str) -> list[tuple[str, dict[str, object]]]:
        """The tools called and their required arguments (optional ones may still differ at 0.1)."""
        found = textcalls.TextCallFilter(TOOLS)
        found.feed(text)
        made = []
        for call in found.finish()[1]:
            try:
                arguments = json.loads(call.arguments)
            except ValueError:
                arguments = {"": call.arguments}  # not an object: compared as written
            made.append((call.name, {k: v for k, v in arguments.items() if k in required[call.name] or not k}))
        return made

    made = {question: [decisions(text) for text in texts] for question, texts in calls.items()}
    assert any(m[0] for m in made.values()), calls  # a call was made and compared
    for question, texts in calls.items():  # each step decided (call or answer, which call) alike
        assert all(m == made[question][0] for m in made[question]), (question, texts)
    assert not any(t.lstrip().startswith(("{", "```", "<tool_call>")) for t in prose), prose
    assert len(set(prose)) > 1, prose


@pytest.mark.timeout(600)
def test_a_request_ending_with_the_start_of_the_reply_is_continued(
        tmp_path: Path, embedded_model: Path, five_tool_prompt_state: Path) -> None:
    """The client writes the words a grammar forces (``Dialect.reply_start``): the server puts
    them after the prompt and streams back the rest, which the grammar of the rest governs."""
    import httpx

    from repl.embedded import textcalls
    from repl.embedded.grammar import after_call_start, tool_grammar
    from repl.embedded.server import LocalServer

    registry = fixture(tmp_path / "tools")
    tools = [s for s in registry.schemas() if s["name"] in TOOLS]
    system = system_prompt_for(ProviderSettings(name="local"), registry)
    question = CALLS[0]
    weather = [s for s in tools if s["name"] == "get_weather"]
    split = after_call_start(tool_grammar(weather, optional="mentioned", question=question, text=False,
                                          several=False), "get_weather")
    assert split is not None
    start, rest, end = split
    messages = textcalls.to_text_messages([*system.messages(), {"role": "user", "content": question}], tools)
    with patched_environ(isolated_env(tmp_path / "xdg")), \
            LocalServer(embedded_model, n_ctx=2048, log_path=tmp_path / "server.log",
                        state_dir=shutil.copytree(five_tool_prompt_state, tmp_path / "state")) as server, \
            httpx.Client(timeout=300, trust_env=False) as client:
        def reply(body: dict[str, object]) -> dict[str, object]:
            sent = {"model": "local", "max_tokens": 40, "temperature": 0.0, **body}
            return client.post(f"{server.base_url}/chat/completions", json=sent).json()

        continued = reply({"messages": [*messages, {"role": "assistant", "content": start}], "grammar": rest})
        whole = reply({"messages": messages, "grammar": tool_grammar(weather, text=False, several=False)})
        start_tokens = client.post(f"{server.base_url.removesuffix('/v1')}/extras/tokenize",
                                   json={"input": start}).json()["tokens"]
    rest_text = continued["choices"][0]["message"]["content"]
    assert rest_text.startswith(" {") and "<tool_call>" not in rest_text  # the rest only
    assert continued["choices"][0]["finish_reason"] == "stop" and not rest_text.endswith("</tool_call>")  # the arguments only
    found = textcalls.TextCallFilter(["get_weather"])
    found.feed(start + rest_text + end)  # the client writes the end (Dialect.reply_start)
    calls = found.finish()[1]
    assert [(c.name, json.loads(c.arguments).get("city")) for c in calls] == [("get_weather", "Berlin")]
    # the start went into the prompt: it is that many tokens longer than the one without it
    added = continued["usage"]["prompt_tokens"] - whole["usage"]["prompt_tokens"]
    assert added == len(start_tokens) > 5, (added, start_tokens)
