"""An MCP server's prompts (``/mcp__SERVER__PROMPT``) and resources (``@SERVER:URI``), against the
reference server ``@modelcontextprotocol/server-everything`` (Node.js; ``make test`` installs it)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from repl.session.commands.mcp_prompts import specs
from repl.session.mentions import complete_mention
from repl.ui.prompt import SlashCompleter
from tests.fakeserver import FakeServer, text
from tests.support import Stack, glassloop_here, stdio_server
from tools.mcp_client import McpManager, ServerConfig
from tools.mcp_offers import Prompt, PromptArgument
from tools.results import ToolError

ROOT = Path(__file__).resolve().parent.parent
EVERYTHING = ROOT / ".venv" / "mcp-everything" / "node_modules" / "@modelcontextprotocol" / "server-everything"
DOC = "demo://resource/static/document/architecture.md"
pytestmark = pytest.mark.timeout(90)


def _everything() -> ServerConfig:
    node = shutil.which("node")
    if node is None or not (EVERYTHING / "dist" / "index.js").is_file():
        pytest.skip("the MCP reference server is not installed (make test installs it with npm)")
    return ServerConfig("everything", command=node, args=(str(EVERYTHING / "dist" / "index.js"), "stdio"))


@pytest.fixture(scope="module")
def everything() -> Iterator[McpManager]:
    manager = McpManager([_everything()], connect_timeout_s=30).start()
    assert manager.wait_ready(40) and manager.servers["everything"].status == "ready"
    yield manager
    manager.close()


def test_a_servers_prompts_and_resources_are_listed_with_their_arguments(everything: McpManager) -> None:
    state = everything.servers["everything"]
    by_command = {p.command: p for p in state.prompts}
    assert "mcp__everything__simple-prompt" in by_command
    args = by_command["mcp__everything__args-prompt"]
    assert [(a.name, a.required) for a in args.arguments] == [("city", True), ("state", False)]
    assert args.usage == "/mcp__everything__args-prompt city=… [state=…]"
    assert DOC in [r.uri for r in state.resources]
    assert state.tools  # the tools still serve beside them


def test_a_prompt_is_filled_from_its_arguments_and_an_embedded_resource_is_fenced(everything: McpManager) -> None:
    prompts = {p.name: p for p in everything.servers["everything"].prompts}
    args = prompts["args-prompt"]
    assert everything.get_prompt(args, args.arguments_from("Paris")) == "What's weather in Paris?"
    assert everything.get_prompt(args, args.arguments_from("state=Texas city=Austin")) == \
        "What's weather in Austin, Texas?"
    embedded = prompts["resource-prompt"]
    said = everything.get_prompt(embedded, embedded.arguments_from("resourceType=Text resourceId=2"))
    assert "demo://resource/dynamic/text/2:\n```\nResource 2:" in said
    with pytest.raises(ToolError, match="Invalid resourceType"):  # the server's refusal, one line
        everything.get_prompt(embedded, embedded.arguments_from("Nope 2"))


def test_a_resource_is_read_as_text_capped_and_bytes_or_unknown_uris_are_refused(everything: McpManager) -> None:
    body, chars = everything.read_resource("everything", DOC)
    assert body.startswith("# Everything Server") and chars == len(body)
    with pytest.raises(ToolError, match="holds bytes.*not text"):
        everything.read_resource("everything", "demo://resource/dynamic/blob/1")
    with pytest.raises(ToolError, match="not found") as missing:
        everything.read_resource("everything", "demo://nothing/here")
    assert "\n" not in str(missing.value.message)


def test_typed_arguments_are_read_by_name_or_in_order_and_mistakes_are_one_line() -> None:
    prompt = Prompt("s", "p", arguments=(PromptArgument("city", required=True), PromptArgument("state")))
    assert prompt.arguments_from('"New York" NY') == {"city": "New York", "state": "NY"}
    assert prompt.arguments_from("state=NY city=Albany") == {"city": "Albany", "state": "NY"}
    assert prompt.arguments_from("state=NY Albany") == {"state": "NY", "city": "Albany"}
    for typed, said in (("", "needs city"), ("town=x", "no argument 'town'"), ("a b c", "takes 2 arguments"),
                        ('"open', "cannot read the arguments")):
        with pytest.raises(ValueError, match=said):
            prompt.arguments_from(typed)


def test_prompts_and_resources_are_completed_as_servers_become_ready(everything: McpManager, tmp_path) -> None:
    ctx = SimpleNamespace(mcp=everything)
    completer = SlashCompleter()
    completer.set_commands([("help", "h", None)], lambda: specs(ctx))  # type: ignore[arg-type]
    names = [c.text for c in completer.get_completions(Document("/mcp__every"), CompleteEvent())]
    assert "/mcp__everything__args-prompt" in names and "/help" not in names
    after = [c.text for c in completer.get_completions(Document("/mcp__everything__args-prompt city=Oslo "),
                                                       CompleteEvent())]
    assert after == ["state="]
    resources = everything.servers["everything"].resources
    (tmp_path / "every.txt").write_text("x", encoding="utf-8")
    found = complete_mention(tmp_path, resources, "every")
    assert found[0] == "every.txt" and f"everything:{DOC}" in found
    assert complete_mention(tmp_path, resources, "everything:demo://resource/static/document/arch") == \
        [f"everything:{DOC}"]


def test_a_server_without_prompts_or_resources_still_serves_its_tools(tmp_path: Path) -> None:
    stack = Stack([stdio_server()], log_dir=tmp_path / "logs").start()
    try:
        state = stack.manager.servers["t"]
        assert state.status == "ready" and state.tools and state.prompts == [] and state.resources == []
    finally:
        stack.manager.close()


# ---- in the REPL and ask, against the scripted model ------------------------------------------


def _configure(home: dict[str, str]) -> None:
    config = _everything()
    folder = Path(home["XDG_CONFIG_HOME"]) / "glassloop"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(
        f"[mcp.servers.everything]\ncommand = {json.dumps(config.command)}\n"
        f"args = {json.dumps(list(config.args))}\n", encoding="utf-8")


def _users(server: FakeServer) -> list[str]:
    return [[m["content"] for m in r.body["messages"] if m["role"] == "user"][-1] for r in server.chat_requests()]


def test_a_prompt_runs_as_a_slash_command_and_a_resource_is_attached_in_the_repl(fake_server, home, tmp_path):
    _configure(home)
    fake_server.script(text("sunny"), text("it describes the server"))
    lines = ["/mcp__everything__args-prompt", "/mcp__everything__nope", "/help",
             "/mcp__everything__args-prompt city=Paris",
             f"what does @everything:{DOC} say?", "and @everything:demo://nothing/here?"]
    result = glassloop_here("--base-url", fake_server.base_url, env=home, cwd=tmp_path,
                            stdin="".join(f"{line}\n" for line in lines))
    out = result.stdout + result.stderr
    assert "Traceback" not in out, out
    assert "MCP prompts" in out and "/mcp__everything__args-prompt city=… [state=…]" in out
    assert "/mcp__everything__args-prompt needs city; usage:" in out
    assert "no MCP prompt /mcp__everything__nope" in out
    assert "MCP server everything's prompt args-prompt" in out
    assert f"attached everything:{DOC}" in out
    assert "@everything:demo://nothing/here not attached:" in out and "not found" in out
    sent = _users(fake_server)
    assert len(sent) == 2  # the prompt's text, then the message with the resource; nothing else
    assert sent[0] == "What's weather in Paris?"
    assert sent[1].startswith(f"what does @everything:{DOC} say?\n\nAttached file everything:{DOC}:\n```\n"
                              "# Everything Server")
    found = glassloop_here("search", "Everything Server", env=home, cwd=tmp_path)
    assert found.returncode == 0 and "what does @everything" in found.stdout, found.stdout + found.stderr


def test_ask_attaches_a_servers_resource(fake_server, home, tmp_path):
    _configure(home)
    fake_server.script(text("a summary"))
    result = glassloop_here("ask", f"summarise @everything:{DOC}", "--base-url", fake_server.base_url,
                            env=home, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "# Everything Server" in _users(fake_server)[0]
