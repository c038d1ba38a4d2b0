"""Configuration inputs of the wrong kind or shape: one line and exit code 2, never a hang.

A FIFO or a device given as ``--config`` (or found where the user or project
file should be), a file far larger than any configuration, TOML nested
thousands deep or a key of thousands of dotted parts (tomllib's time grows with
the square of that), and a base URL that is no URL: each is refused on the spot
with one line naming where it came from, through the real ``glassloop`` command.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.reliability.helpers import record

MEMORY_CAP = 1 << 30  # the previous code read /dev/zero until memory ran out: keep that bounded


def run(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    return subprocess.run([sys.executable, "-m", "repl.cli", *args], env={**env, "COLUMNS": "400"},
                          cwd=cwd, capture_output=True, text=True, timeout=15, preexec_fn=limit)


def one_line(result: subprocess.CompletedProcess, *words: str) -> str:
    assert result.returncode == 2, result.stderr[-400:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-400:]
    assert all(word in lines[0] for word in words), lines[0]
    return lines[0]


def place(env: dict[str, str], tmp: Path, where: str) -> tuple[Path, list[str]]:
    """Where a config file goes for ``where``, and the extra arguments that name it."""
    folder = {"project": tmp / "proj", "user": Path(env["XDG_CONFIG_HOME"]) / "glassloop",
              "--config": tmp / "extra"}[where]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ("config.toml" if where == "user" else "glassloop.toml")
    return path, (["--config", str(path)] if where == "--config" else [])


PLACES = ["project", "user", "--config"]


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    (tmp_path / "proj").mkdir(exist_ok=True)
    return tmp_path / "proj"


@pytest.mark.parametrize("where", PLACES)
def test_a_fifo_is_refused_without_waiting_for_a_writer(home, tmp_path, proj, where):
    path, extra = place(home, tmp_path, where)
    os.mkfifo(path)
    started = time.monotonic()
    line = one_line(run("config", *extra, env=home, cwd=proj), str(path), "not a regular file")
    seconds = time.monotonic() - started
    # refused for what it is: opening it for reading would wait for a writer (until the run's timeout)
    record("config inputs", case=f"fifo ({where})", seconds=round(seconds, 2), line=line)


def test_a_device_as_config_is_refused(home, proj):
    one_line(run("config", "--config", "/dev/zero", env=home, cwd=proj), "/dev/zero", "not a regular file")
    one_line(run("ask", "hi", "--config", "/dev/null", env=home, cwd=proj), "/dev/null")


@pytest.mark.parametrize("where", PLACES)
def test_an_oversized_file_is_refused(home, tmp_path, proj, where):
    path, extra = place(home, tmp_path, where)
    path.write_bytes(b"# padding\n" * 30_000)  # 300 kB of comments: valid TOML, not a config file
    one_line(run("config", *extra, env=home, cwd=proj), str(path), "larger than")


@pytest.mark.parametrize("where", PLACES)
@pytest.mark.parametrize("shape", ["array", "inline table"])
def test_deep_nesting_is_one_line(home, tmp_path, proj, where, shape):
    path, extra = place(home, tmp_path, where)
    depth = 3000
    value = "[" * depth + "]" * depth if shape == "array" else "{a = " * depth + "1" + "}" * depth
    path.write_text(f"system_prompt = {value}\n", encoding="utf-8")
    one_line(run("config", *extra, env=home, cwd=proj), str(path), "nested too deeply")


@pytest.mark.parametrize("where", PLACES)
def test_a_key_of_thousands_of_dotted_parts_is_refused_at_once(home, tmp_path, proj, where):
    path, extra = place(home, tmp_path, where)
    path.write_text("system_prompt" + ".a" * 100_000 + " = 1\n", encoding="utf-8")  # tomllib: minutes
    started = time.monotonic()
    one_line(run("config", *extra, env=home, cwd=proj), str(path), "dotted parts")  # refused before parsing
    seconds = time.monotonic() - started
    record("config inputs", case=f"100k-part key ({where})", seconds=round(seconds, 2))


def test_a_long_prompt_full_of_dots_still_loads(home, proj):
    prose = "Step one. Then two. Then 3.1.4.1.5. " * 3000  # 108 kB, ~21 000 dots, in a string and a comment
    (proj / "glassloop.toml").write_text(
        f'system_prompt = """\n{prose}\n"""\n# {prose}\n[guards]\nmax_steps = 2\n', encoding="utf-8")
    result = run("config", env=home, cwd=proj)
    assert result.returncode == 0, result.stderr
    assert any(line.startswith("guards.max_steps") and " 2 " in line for line in result.stdout.splitlines())


BAD_URLS = ["http://[::1", "http://host:99999/v1", "ftp://host/v1", "localhost:8000/v1",
            "http:///v1", "http://host/v1\x1b[31m", "http://ho st/v1"]


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_bad_base_url_is_one_line_wherever_it_comes_from(home, tmp_path, proj, url):
    one_line(run("ask", "hi", env={**home, "OPENAI_BASE_URL": url}, cwd=proj),
             "env OPENAI_BASE_URL", "providers.openai.base_url")
    one_line(run("ask", "hi", "--base-url", url, env=home, cwd=proj), "flag --base-url")
    user, _ = place(home, tmp_path, "user")
    user.write_text(f"[mcp.servers.web]\nurl = {json.dumps(url)}\n", encoding="utf-8")
    one_line(run("config", env=home, cwd=proj), str(user), "mcp.servers.web.url")
    user.unlink()


def test_a_bad_url_never_reaches_the_terminal_raw(home, proj):
    line = one_line(run("ask", "hi", env={**home, "GLASSLOOP_BASE_URL": "http://x/\x1b]0;pwned\x07"}, cwd=proj))
    assert "\x1b" not in line and "\x07" not in line


def test_good_urls_still_load(home, proj):
    for url in ("http://127.0.0.1:9/v1", "https://api.example.com/v1", "http://[::1]:8080/v1", ""):
        result = run("config", env={**home, "GLASSLOOP_BASE_URL": url}, cwd=proj)
        assert result.returncode == 0, result.stderr
