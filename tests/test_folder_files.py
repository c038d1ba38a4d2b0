"""The one reader of files a folder brings (``tools.folder_files``): its rules, each refusal one
line naming the file and the rule, and every file kind it meets on a real disk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools.folder_files import Refused, read_folder_file


def test_a_regular_file_inside_its_root_is_read_with_its_resolved_path(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("hello\n", encoding="utf-8")
    (tmp_path / "link.md").symlink_to(tmp_path / "a.md")
    read = read_folder_file(tmp_path / "link.md", 100, root=tmp_path)
    assert read is not None and read.data == b"hello\n" and read.real == (tmp_path / "a.md").resolve()
    assert not read.cut and len(read.sha256) == 64
    assert read_folder_file(tmp_path / "none.md", 100, root=tmp_path) is None


@pytest.mark.parametrize("target, rule", [("outside", "outside_root"), ("/proc/self/environ", "system_path"),
                                          ("/dev/zero", "system_path"), ("/sys/kernel/notes", "system_path")])
def test_a_link_out_of_the_root_or_into_a_system_path_is_refused(tmp_path: Path, target: str, rule: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("secret\n", encoding="utf-8")
    (root / "AGENTS.md").symlink_to(outside if target == "outside" else Path(target))
    with pytest.raises(Refused) as refused:
        read_folder_file(root / "AGENTS.md", 1000, root=root)
    assert refused.value.type == rule
    assert str(root / "AGENTS.md") in refused.value.message and "\n" not in refused.value.message
    if rule == "system_path":  # also for a file of the user's own (no root)
        with pytest.raises(Refused):
            read_folder_file(root / "AGENTS.md", 1000)


def test_a_fifo_a_folder_and_a_big_file_are_refused_without_waiting(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.md")  # nobody writes: a blocking open would hang the test
    (tmp_path / "folder.md").mkdir()
    (tmp_path / "big.md").write_bytes(b"x\n" * 600)
    for name, rule in (("pipe.md", "not_a_file"), ("folder.md", "not_a_file"), ("big.md", "too_large")):
        with pytest.raises(Refused) as refused:
            read_folder_file(tmp_path / name, 1000, root=tmp_path)
        assert refused.value.type == rule, name
    cut = read_folder_file(tmp_path / "big.md", 1000, root=tmp_path, cut=True)
    assert cut is not None and cut.cut and len(cut.data) == 1000 and cut.size == 1200
