"""docs/USAGE.md's "Add an MCP server": its example, read from the page, is what glassloop's
configuration loader declares, `glassloop config` lists, a project file does not get without trust,
and the MCP client starts (the published ``mcp-server-time``, offline)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from repl.config.load import load_settings
from tests.support import ROOT, Stack, glassloop_here
from tools.mcp_client import ServerConfig

pytestmark = pytest.mark.timeout(60)


def page_example() -> str:
    section = (ROOT / "docs" / "USAGE.md").read_text(encoding="utf-8").split("\n## Add an MCP server\n", 1)[1]
    block = section.split("<!-- mcp-example -->\n", 1)[1].split("<!-- /mcp-example -->", 1)[0]
    return block.split("```toml\n", 1)[1].split("```", 1)[0]


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("CONFIG", "DATA", "STATE"):
        monkeypatch.setenv(f"XDG_{name}_HOME", str(tmp_path / name.lower()))
    path = tmp_path / "mine.toml"
    path.write_text(page_example(), encoding="utf-8")
    return path


def test_the_pages_example_declares_the_two_servers(example: Path, tmp_path: Path) -> None:
    servers = load_settings(cwd=tmp_path, env={}, config_file=example).mcp_servers
    assert servers["time"]["command"] == "mcp-server-time"
    assert servers["time"]["args"] == ["--local-timezone", "UTC"]
    assert servers["remote"]["url"] == "http://127.0.0.1:9000/mcp"
    assert servers["remote"]["headers"] == {"Authorization": "Bearer ..."}


def test_glassloop_config_lists_them_with_their_file(example: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GLASSLOOP_"))}
    shown = glassloop_here("config", "--config", str(example), env=env)
    assert shown.returncode == 0, shown.stderr
    rows = {line.split()[0]: line.split()[1:] for line in shown.stdout.splitlines() if line.strip()}
    assert rows["mcp.servers.time.command"] == ["mcp-server-time", str(example)]
    assert rows["mcp.servers.remote.url"] == ["http://127.0.0.1:9000/mcp", str(example)]
    assert "Bearer ..." not in shown.stdout  # headers are redacted


def test_a_projects_servers_wait_for_trust(example: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "glassloop.toml").write_text(example.read_text(encoding="utf-8"), encoding="utf-8")
    assert load_settings(cwd=project, env={}).mcp_servers == {}


def test_the_time_server_of_the_example_starts(example: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    table = load_settings(cwd=tmp_path, env={}, config_file=example).mcp_servers["time"]
    stack = Stack([ServerConfig.from_table("time", table)]).start()
    try:
        assert stack.notices == []
        assert {"time__get_current_time", "time__convert_time"} <= set(stack.registry.names())
    finally:
        stack.manager.close()
