"""A cloned folder runs no code: glassloop started in a folder that ships modules named like
the standard library's or llama-cpp-python's imports none of them, in any process it starts.

The embedded model's server was once started as ``python -c …`` in the working directory,
which puts that directory first on the child's ``sys.path``: a ``threading.py`` there ran
the moment ``glassloop`` started with no key set (the embedded model is the default).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support import isolated_env
from tools.mcp_stdio import child_env

PLANTED = ("threading.py", "json.py", "runpy.py", "ctypes/__init__.py", "llama_cpp/__init__.py")


def _plant(folder: Path, marker: Path) -> None:
    for name in PLANTED:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\n", encoding="utf-8")


def test_the_embedded_server_started_in_a_planted_folder_imports_nothing_from_it(tmp_path: Path) -> None:
    """``glassloop ask`` on the embedded model, as a newcomer runs it in a cloned repository:
    the server's child starts (and fails on a model file that is not one) without importing
    any planted module."""
    pytest.importorskip("llama_cpp")  # the 'local' extra: installed by make, so in CI
    folder, marker = tmp_path / "clone", tmp_path / "ran.txt"
    folder.mkdir()
    _plant(folder, marker)
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"not a model")
    config = tmp_path / "config.toml"
    config.write_text(f'[providers.local]\nmodel_path = "{bogus}"\n', encoding="utf-8")
    (tmp_path / "home").mkdir()
    env = {k: v for k, v in isolated_env(tmp_path / "home").items() if k != "OPENAI_API_KEY"}
    import subprocess

    done = subprocess.run([str(Path(sys.executable).parent / "glassloop"), "ask", "hi",
                           "--provider", "local", "--config", str(config)],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    log = (tmp_path / "home" / "state" / "glassloop" / "local-server.log")
    assert done.returncode == 1, done.stderr
    assert "local model server exited" in done.stderr  # it did start, and failed on the file
    assert "Traceback" not in done.stderr
    assert not marker.exists(), marker.read_text()
    assert log.exists()


def test_the_embedded_server_command_is_isolated_and_runs_in_our_own_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from repl.embedded.server import LocalServer

    (tmp_path / "relative.gguf").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    server = LocalServer(Path("relative.gguf"), log_path=tmp_path / "logs" / "server.log",
                         state_dir=tmp_path / "state")
    command = server.command(8080)
    assert command[:3] == [sys.executable, "-I", str(Path(__file__).resolve().parents[2]
                                                      / "repl" / "embedded" / "llama_server.py")]
    assert "-c" not in command
    assert command[command.index("--model") + 1] == str(tmp_path / "relative.gguf")  # absolute


def test_mcp_servers_do_not_put_the_working_directory_on_a_python_servers_path() -> None:
    """A stdio MCP server is the user's own command, started in the working directory; a
    Python one (``python -m server``) would put that directory first on its path."""
    assert child_env({})["PYTHONSAFEPATH"] == "1"
    assert child_env({"PYTHONSAFEPATH": ""})["PYTHONSAFEPATH"] == ""  # the user's own choice
