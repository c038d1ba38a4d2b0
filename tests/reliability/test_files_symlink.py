"""File tools and symlinks that go out of the workspace and back in.

``list_files`` used to follow symlinked folders while globbing: with
``link -> outside`` and ``outside/*/back -> workspace``, the glob ``link/*/back``
listed ``link/SECRET_…/back`` (the outside folders' names), because each
candidate resolved back inside the root. ``read_file`` answered such a path
too, which told whether a folder exists outside.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.reliability.helpers import record
from tools.files import make_file_tools
from tools.registry import Registry

SECRETS = ("SECRET_alpha", "SECRET_beta")


@pytest.fixture
def world(tmp_path: Path) -> tuple[Registry, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "plan.md").write_text("# Plan\n", encoding="utf-8")
    for name in SECRETS:
        (outside / name).mkdir(parents=True)
        (outside / name / "back").symlink_to(root / "docs", target_is_directory=True)
        (outside / name / "SECRET_file.txt").write_text("secret\n", encoding="utf-8")
    (root / "link").symlink_to(outside, target_is_directory=True)  # absolute link out
    (root / "rel").symlink_to("../outside", target_is_directory=True)  # relative link out
    (root / "alias").symlink_to(root / "docs", target_is_directory=True)  # link that stays inside
    (root / "loop").symlink_to(root, target_is_directory=True)  # a loop through the root itself
    (root / "a").symlink_to(root / "b")
    (root / "b").symlink_to(root / "a")  # a loop between two links
    (root / "docs" / "up").symlink_to("../link", target_is_directory=True)  # a link to a link out
    return Registry(make_file_tools(root)), root


GLOBS = ["link/*/back", "link/*/back/*", "rel/*/back", "*/*/back", "*/*/*", "*/*/*/*", "link/*", "link/**",
         "**/back", "**/back/*", "**/*", "**", "**/SECRET*", "*/SECRET*/**", "docs/up/*/back",
         "loop/*", "loop/loop/loop/*", "*/" * 8 + "*", "**/" * 5 + "*", "a/*", "a/**"]


@pytest.mark.parametrize("glob", GLOBS)
def test_no_outside_name_is_listed(world, glob, monkeypatch):
    registry, root = world
    scanned: Counter[str] = Counter()
    scandir = os.scandir

    def noting(path: str | os.PathLike[str]) -> object:
        scanned[os.fspath(path)] += 1
        return scandir(path)

    monkeypatch.setattr(os, "scandir", noting)
    started = time.perf_counter()
    result = registry.call("list_files", {"glob": glob})
    elapsed = time.perf_counter() - started
    monkeypatch.undo()
    record("files_symlink", glob=glob, entries=result.get("count"), seconds=round(elapsed, 4))
    # a link loop is not walked round and round: only real folders inside are listed (no link on
    # the way), each at most once per part of the pattern
    assert all(os.path.realpath(folder) == os.path.abspath(folder) for folder in scanned), scanned
    assert all(Path(folder).resolve().is_relative_to(root.resolve()) for folder in scanned), scanned
    assert max(scanned.values(), default=0) <= len(glob.split("/")), scanned
    assert result["ok"] is True, result
    assert "SECRET" not in json.dumps(result), glob
    paths = [e["path"] for e in result["entries"]]
    # nothing is reached through a symlinked folder, and a link pointing out is not listed itself
    assert not any(p.split("/")[0] in {"link", "rel", "alias", "loop", "a", "b"} and "/" in p for p in paths)
    assert not {"link", "rel", "docs/up"} & set(paths)


def test_real_files_are_still_found(world):
    registry, _ = world
    listed = {e["path"] for e in registry.call("list_files", {"glob": "**/*"})["entries"]}
    assert {"docs", "docs/plan.md", "alias", "loop"} <= listed  # links inside are listed, not entered
    assert [e["path"] for e in registry.call("list_files", {"glob": "**/*.md"})["entries"]] == ["docs/plan.md"]
    assert registry.call("list_files", {"path": "docs", "glob": "*.md"})["count"] == 1


@pytest.mark.parametrize("secret", [*SECRETS, "no_such_folder"])
def test_a_path_out_and_back_is_outside_whether_or_not_it_exists(world, secret):
    registry, _ = world
    for name, arguments in [("read_file", {"path": f"link/{secret}/back/plan.md"}),
                            ("list_files", {"path": f"link/{secret}/back"}),
                            ("search_files", {"pattern": "plan", "path": f"rel/{secret}/back"}),
                            ("read_file", {"path": f"docs/up/{secret}/back/plan.md"})]:
        result = registry.call(name, arguments)
        assert result["ok"] is False and result["error"]["type"] == "outside_root", (name, result)
        assert secret not in result["error"]["message"].replace(arguments.get("path", ""), "")


def test_paths_that_stay_inside_still_work(world):
    registry, _ = world
    assert registry.call("read_file", {"path": "alias/plan.md"})["content"] == "# Plan"
    assert registry.call("read_file", {"path": "docs/../docs/plan.md"})["ok"] is True
    assert registry.call("read_file", {"path": "loop/docs/plan.md"})["ok"] is True
    assert registry.call("search_files", {"pattern": "plan"})["count"] == 1
    assert registry.call("list_files", {"glob": "***"})["error"]["type"] == "invalid_arguments"
