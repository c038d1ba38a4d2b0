from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import store
from tools.notes import make_note_tools
from tools.registry import Registry


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "notes.json"


@pytest.fixture
def reg(path: Path) -> Registry:
    return Registry(make_note_tools(path))


def test_add_list_search(reg: Registry, path: Path) -> None:
    assert reg.call("list_notes", "") == {"ok": True, "count": 0, "notes": []}
    first = reg.call("add_note", {"text": "Wi-Fi password is on the fridge", "tags": ["home"]})
    assert first["note"]["id"] == "note-001" and first["note"]["tags"] == ["home"]
    second = reg.call("add_note", '{"text": "周五交房租"}')["note"]
    assert second["id"] == "note-002" and second["tags"] == []
    assert reg.call("list_notes", "{}")["count"] == 2

    by_text = reg.call("search_notes", {"query": "WIFI"})
    assert by_text["count"] == 0  # substring, not fuzzy: "Wi-Fi" != "wifi"
    assert reg.call("search_notes", {"query": "wi-fi"})["notes"][0]["id"] == "note-001"
    assert reg.call("search_notes", {"query": "HOME"})["count"] == 1
    assert reg.call("search_notes", {"query": "房租"})["notes"][0]["id"] == "note-002"
    assert reg.call("search_notes", {"query": "  "})["error"]["type"] == "invalid_arguments"
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["version"] == 1 and len(saved["notes"]) == 2


def test_add_note_validation(reg: Registry, path: Path) -> None:
    assert reg.call("add_note", {"text": ""})["error"]["type"] == "invalid_arguments"
    wrong = reg.call("add_note", {"text": "x", "tags": "home"})["error"]
    assert wrong["type"] == "invalid_arguments" and "tags" in wrong["message"]
    assert not path.exists()


def test_preview_and_side_effects(reg: Registry, path: Path) -> None:
    tool = reg.get("add_note")
    assert tool.side_effects and not reg.get("list_notes").side_effects
    preview = reg.get("add_note").preview({"text": "idea", "tags": ["x"]})
    assert preview["before"] is None and preview["after"]["text"] == "idea"
    assert not path.exists()


def test_legacy_list_and_garbage(reg: Registry, path: Path) -> None:
    path.parent.mkdir(parents=True)
    legacy = json.dumps([{"text": "old note", "tags": ["a"]}]).encode()
    path.write_bytes(legacy)
    assert reg.call("search_notes", {"query": "old"})["count"] == 1
    assert path.read_bytes() == legacy
    assert reg.call("add_note", {"text": "new"})["note"]["id"] == "note-001"
    assert len(json.loads(path.read_text())["notes"]) == 2

    garbage = b'[{"tags": []}, 3]'
    path.write_bytes(garbage)
    for name, args in [("list_notes", {}), ("add_note", {"text": "x"})]:
        error = reg.call(name, args)["error"]
        assert error["type"] == "corrupt_store" and str(path) in error["message"]
    assert path.read_bytes() == garbage


def test_observer_sees_note_writes(reg: Registry, path: Path) -> None:
    seen: list[tuple[Path, bytes | None]] = []
    with store.reporting(lambda w: seen.append((w.path, w.before))):
        reg.call("add_note", {"text": "a"})
        reg.call("add_note", {"text": "b"})
    assert seen[0] == (path, None)
    store.restore_bytes(path, seen[1][1])
    assert [n["text"] for n in reg.call("list_notes", "")["notes"]] == ["a"]
