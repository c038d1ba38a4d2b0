from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools.files import make_file_tools
from tools.registry import Registry


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "root"
    (base / "docs").mkdir(parents=True)
    (base / "docs" / "plan.md").write_text("# Plan\nship the REPL\nwrite tests\n", encoding="utf-8")
    (base / "hello.txt").write_text("\n".join(f"line {i}" for i in range(1, 301)), encoding="utf-8")
    (base / "中文.txt").write_text("你好，世界\nHello World\n", encoding="utf-8")
    evil = tmp_path / "root-evil"
    evil.mkdir()
    (evil / "secret.txt").write_text("top secret\n", encoding="utf-8")
    (tmp_path / "outside.txt").write_text("outside secret\n", encoding="utf-8")
    return base


@pytest.fixture
def reg(root: Path) -> Registry:
    return Registry(make_file_tools(root, max_bytes=10_000, max_output_chars=500))


def error_type(result: dict) -> str:
    assert result["ok"] is False, result
    return result["error"]["type"]


def test_read_file_lines(reg: Registry) -> None:
    result = reg.call("read_file", {"path": "docs/plan.md"})
    assert result["content"] == "# Plan\nship the REPL\nwrite tests"
    assert result["total_lines"] == 3 and result["path"] == "docs/plan.md"
    page = reg.call("read_file", {"path": "hello.txt", "offset": 10, "limit": 3})
    assert page["content"] == "line 11\nline 12\nline 13" and page["first_line"] == 11
    assert "offset=13" in page["more"]
    assert reg.call("read_file", {"path": "中文.txt"})["content"].startswith("你好")


def test_output_is_capped_with_a_note(reg: Registry) -> None:
    result = reg.call("read_file", {"path": "hello.txt", "limit": 300})
    assert len(result["content"]) == 500
    assert "500" in result["note"] and "cut" in result["note"]


def test_read_file_argument_limits(reg: Registry) -> None:
    assert error_type(reg.call("read_file", {"path": "hello.txt", "offset": -1})) == "invalid_arguments"
    assert error_type(reg.call("read_file", {"path": "hello.txt", "limit": 0})) == "invalid_arguments"


def test_list_files(reg: Registry) -> None:
    top = reg.call("list_files", {})
    assert [e["path"] for e in top["entries"]] == ["docs", "hello.txt", "中文.txt"]
    assert top["entries"][0]["type"] == "dir" and top["entries"][1]["size"] > 0
    md = reg.call("list_files", {"glob": "**/*.md"})
    assert [e["path"] for e in md["entries"]] == ["docs/plan.md"]
    assert [e["path"] for e in reg.call("list_files", {"path": "docs"})["entries"]] == ["docs/plan.md"]
    assert error_type(reg.call("list_files", {"glob": "../*"})) == "invalid_arguments"
    assert error_type(reg.call("list_files", {"glob": "/etc/*"})) == "invalid_arguments"
    assert error_type(reg.call("list_files", {"path": "hello.txt"})) == "not_a_directory"


def test_search_files(reg: Registry) -> None:
    result = reg.call("search_files", {"pattern": "HELLO"})
    assert [(m["path"], m["line"]) for m in result["matches"]] == [("中文.txt", 2)]
    assert reg.call("search_files", {"pattern": "tests", "path": "docs/plan.md"})["count"] == 1
    assert reg.call("search_files", {"pattern": "secret"})["count"] == 0
    assert error_type(reg.call("search_files", {"pattern": ""})) == "invalid_arguments"
    assert error_type(reg.call("search_files", {"pattern": "x", "path": "nope"})) == "not_found"


def test_search_is_capped(reg: Registry) -> None:
    result = reg.call("search_files", {"pattern": "line"})
    assert 0 < result["count"] < 300 and "cut" in result["note"]


@pytest.mark.parametrize(
    "path",
    ["../outside.txt", "../root-evil/secret.txt", "/etc/passwd", "docs/../../outside.txt"],
)
def test_paths_outside_root(reg: Registry, path: str) -> None:
    assert error_type(reg.call("read_file", {"path": path})) == "outside_root"
    assert error_type(reg.call("list_files", {"path": path})) == "outside_root"
    assert error_type(reg.call("search_files", {"pattern": "secret", "path": path})) == "outside_root"


def test_sibling_with_shared_prefix(tmp_path: Path, root: Path) -> None:
    evil_abs = str(tmp_path / "root-evil" / "secret.txt")
    assert evil_abs.startswith(str(root))  # the trap a string-prefix check falls into
    reg = Registry(make_file_tools(root))
    assert error_type(reg.call("read_file", {"path": evil_abs})) == "outside_root"


def test_symlink_pointing_out(reg: Registry, root: Path, tmp_path: Path) -> None:
    (root / "link.txt").symlink_to(tmp_path / "outside.txt")
    (root / "linkdir").symlink_to(tmp_path / "root-evil", target_is_directory=True)
    assert error_type(reg.call("read_file", {"path": "link.txt"})) == "outside_root"
    assert error_type(reg.call("read_file", {"path": "linkdir/secret.txt"})) == "outside_root"
    listed = [e["path"] for e in reg.call("list_files", {"glob": "**/*"})["entries"]]
    assert "link.txt" not in listed and not any("secret" in p for p in listed)
    assert reg.call("search_files", {"pattern": "secret"})["count"] == 0


def test_symlink_inside_root_is_fine(reg: Registry, root: Path) -> None:
    (root / "alias.md").symlink_to(root / "docs" / "plan.md")
    assert reg.call("read_file", {"path": "alias.md"})["content"].startswith("# Plan")


def test_symlink_loop(reg: Registry, root: Path) -> None:
    (root / "a").symlink_to(root / "b")
    (root / "b").symlink_to(root / "a")
    assert error_type(reg.call("read_file", {"path": "a"})) in {"invalid_path", "not_found"}
    assert reg.call("list_files", {})["ok"] is True
    assert reg.call("search_files", {"pattern": "plan"})["ok"] is True


def test_dev_zero(tmp_path: Path) -> None:
    reg = Registry(make_file_tools(Path("/")))
    assert error_type(reg.call("read_file", {"path": "dev/zero"})) == "system_path"  # never opened


def test_fifo_does_not_hang(reg: Registry, root: Path) -> None:
    os.mkfifo(root / "pipe")  # opened for reading, it would wait for a writer that never comes
    assert error_type(reg.call("read_file", {"path": "pipe"})) == "not_a_file"
    assert reg.call("search_files", {"pattern": "x"})["ok"] is True
    assert [e["type"] for e in reg.call("list_files", {"glob": "pipe"})["entries"]] == ["other"]


def test_nul_byte(reg: Registry) -> None:
    assert error_type(reg.call("read_file", {"path": "hello.txt\x00.md"})) == "invalid_path"


def test_huge_and_binary_files(reg: Registry, root: Path) -> None:
    (root / "big.txt").write_text("x" * 20_000)
    (root / "image.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 10)
    assert error_type(reg.call("read_file", {"path": "big.txt"})) == "too_large"
    assert error_type(reg.call("read_file", {"path": "image.bin"})) == "binary_file"
    assert reg.call("search_files", {"pattern": "png"})["count"] == 0


def test_missing_and_folder(reg: Registry) -> None:
    assert error_type(reg.call("read_file", {"path": "nope.txt"})) == "not_found"
    assert error_type(reg.call("read_file", {"path": "docs"})) == "not_a_file"
    assert error_type(reg.call("list_files", {"path": "nope"})) == "not_found"


def test_the_schemas_name_no_folder_a_model_could_take_for_the_root(reg: Registry) -> None:
    """Told paths were "relative to the workspace root", the 0.5B model asked for
    "/workspace/plan.md" (outside the root, refused) when the user said plan.md."""
    import json

    schemas = json.dumps([s for s in reg.schemas() if s["name"] in ("read_file", "list_files", "search_files")])
    assert "workspace" not in schemas and "relative to the current folder" in schemas
