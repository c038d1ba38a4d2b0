from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tools import store
from tools.registry import Registry
from tools.results import ToolError
from tools.todos import make_todo_tools, normalize_id

ROOT = Path(__file__).resolve().parents[1]

LEGACY = [
    {"id": "todo-001", "title": "买菜", "status": "done", "priority": "low",
     "detail": "鸡蛋、青菜、牛奶"},
    {"id": "todo-002", "title": "写周报", "status": "todo", "priority": "high",
     "detail": "本周进展和下周计划"},
    {"id": "todo-003", "title": "回复邮件", "status": "todo", "priority": "medium",
     "detail": "确认上线时间"},
]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "todos.json"


@pytest.fixture
def reg(path: Path) -> Registry:
    return Registry(make_todo_tools(path))


@pytest.fixture
def legacy(path: Path) -> bytes:
    data = json.dumps(LEGACY, ensure_ascii=False, indent=2).encode()
    path.write_bytes(data)
    return data


def test_normalize_id() -> None:
    assert normalize_id(2) == "todo-002"
    assert normalize_id("2") == "todo-002"
    assert normalize_id("todo-7") == "todo-007"
    assert normalize_id("TODO-0012") == "todo-012"
    assert normalize_id(1234) == "todo-1234"
    assert normalize_id("shopping") == "shopping"


def test_empty_store_and_add(reg: Registry, path: Path) -> None:
    assert reg.call("list_todos", "{}") == {"ok": True, "count": 0, "todos": []}
    added = reg.call("add_todo", {"title": "开会", "priority": "high", "due": "2025-05-01T15:00"})
    todo = added["todo"]
    assert todo["id"] == "todo-001" and todo["status"] == "todo" and todo["priority"] == "high"
    assert todo["created_at"] == todo["updated_at"] and "T" in todo["created_at"]
    second = reg.call("add_todo", {"title": "second"})["todo"]
    assert second["id"] == "todo-002" and second["priority"] == "medium"
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["version"] == 1 and [t["id"] for t in saved["todos"]] == ["todo-001", "todo-002"]


def test_add_rejects_blank_title(reg: Registry, path: Path) -> None:
    result = reg.call("add_todo", {"title": "   "})
    assert result["error"]["type"] == "invalid_arguments"
    assert not path.exists()


def test_legacy_list_is_read_without_rewriting(reg: Registry, path: Path, legacy: bytes) -> None:
    listed = reg.call("list_todos", "{}")
    assert listed["count"] == 3
    assert listed["todos"][1] == {"id": "todo-002", "title": "写周报", "status": "todo",
                                  "priority": "high", "due": None}
    assert "detail" not in listed["todos"][0]
    assert reg.call("list_todos", {"status": "todo"})["count"] == 2
    assert reg.call("list_todos", {"status": "todo", "priority": "high"})["count"] == 1
    assert reg.call("get_todo", {"todo_id": "todo-002"})["todo"]["detail"] == "本周进展和下周计划"
    assert path.read_bytes() == legacy

    added = reg.call("add_todo", {"title": "new"})["todo"]
    assert added["id"] == "todo-004"
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["version"] == 1 and len(saved["todos"]) == 4
    assert saved["todos"][0] == LEGACY[0]


@pytest.mark.parametrize("raw_id", [2, "2", "todo-002", "todo-2", " todo-002 "])
def test_bare_number_ids(reg: Registry, legacy: bytes, raw_id: object) -> None:
    assert reg.call("get_todo", {"todo_id": raw_id})["todo"]["title"] == "写周报"


def test_bare_number_in_raw_json(reg: Registry, legacy: bytes) -> None:
    assert reg.call("get_todo", '{"todo_id": 3}')["todo"]["id"] == "todo-003"


def test_unknown_id(reg: Registry, legacy: bytes) -> None:
    error = reg.call("get_todo", {"todo_id": 9})["error"]
    assert error["type"] == "not_found"
    assert "todo-009" in error["message"] and "todo-001, todo-002, todo-003" in error["message"]
    for name in ("complete_todo", "delete_todo"):
        assert reg.call(name, {"todo_id": "todo-009"})["error"]["type"] == "not_found"


def test_update(reg: Registry, path: Path, legacy: bytes) -> None:
    updated = reg.call("update_todo", {"todo_id": 3, "priority": "high", "tag": "work"})["todo"]
    assert updated["priority"] == "high" and updated["tag"] == "work"
    assert updated["title"] == "回复邮件" and "updated_at" in updated
    cleared = reg.call("update_todo", {"todo_id": 3, "tag": ""})["todo"]
    assert cleared["tag"] is None
    nothing = reg.call("update_todo", {"todo_id": 3})["error"]
    assert nothing["type"] == "invalid_arguments" and "nothing to update" in nothing["message"]
    bad = reg.call("update_todo", {"todo_id": 3, "status": "finished"})["error"]
    assert bad["type"] == "invalid_arguments" and "status" in bad["message"]


def test_complete_and_delete(reg: Registry, path: Path, legacy: bytes) -> None:
    done = reg.call("complete_todo", {"todo_id": "2"})["todo"]
    assert done["status"] == "done"
    before = path.read_bytes()
    again = reg.call("complete_todo", {"todo_id": "2"})
    assert again["already_done"] is True and path.read_bytes() == before
    deleted = reg.call("delete_todo", {"todo_id": 1})["deleted"]
    assert deleted["title"] == "买菜"
    assert [t["id"] for t in reg.call("list_todos", "{}")["todos"]] == ["todo-002", "todo-003"]
    assert reg.call("add_todo", {"title": "x"})["todo"]["id"] == "todo-004"


def test_side_effect_flags() -> None:
    tools = {t.name: t for t in make_todo_tools(Path("unused.json"))}
    mutating = {"add_todo", "update_todo", "complete_todo", "delete_todo"}
    assert {n for n, t in tools.items() if t.side_effects} == mutating
    assert all(tools[n].preview is not None for n in mutating)
    assert "get_todo" in tools["list_todos"].description


def test_previews_change_nothing(reg: Registry, path: Path, legacy: bytes) -> None:
    add = reg.get("add_todo").preview({"title": "开会"})
    assert add["before"] is None and add["after"]["id"] == "todo-004"
    update = reg.get("update_todo").preview({"todo_id": 2, "priority": "low"})
    assert update["before"]["priority"] == "high" and update["after"]["priority"] == "low"
    done = reg.get("complete_todo").preview({"todo_id": 3})
    assert done["before"]["status"] == "todo" and done["after"]["status"] == "done"
    delete = reg.get("delete_todo").preview({"todo_id": 1})
    assert delete["before"]["title"] == "买菜" and delete["after"] is None
    with pytest.raises(ToolError) as missing:  # the approval dialog says the call would fail
        reg.get("delete_todo").preview({"todo_id": 99})
    assert missing.value.type == "not_found"
    assert path.read_bytes() == legacy


@pytest.mark.parametrize(
    "content",
    [
        b'[1, 2, "three"]',
        b'[{"id": "todo-001"}]',
        b'[{"title": "no id"}]',
        b'{"todos": "nope"}',
        b'{"version": 9, "todos": []}',
        b'"just a string"',
        b'{"todos": [',
        b"\xff\xfe garbage",
    ],
)
def test_bad_store_is_reported_and_untouched(reg: Registry, path: Path, content: bytes) -> None:
    path.write_bytes(content)
    for name, args in [("list_todos", {}), ("add_todo", {"title": "x"}),
                       ("delete_todo", {"todo_id": 1})]:
        error = reg.call(name, args)["error"]
        assert error["type"] == "corrupt_store"
        assert str(path) in error["message"] and "move" in error["message"]
    assert path.read_bytes() == content


def test_write_observer_and_restore(reg: Registry, path: Path, legacy: bytes) -> None:
    writes: list[tuple[Path, bytes | None]] = []
    with store.reporting(lambda w: writes.append((w.path, w.before))):
        reg.call("add_todo", {"title": "x"})
        reg.call("complete_todo", {"todo_id": 4})
        reg.call("list_todos", "{}")
    assert [w[0] for w in writes] == [path, path]
    assert writes[0][1] == legacy
    store.restore_bytes(path, writes[1][1])
    assert reg.call("get_todo", {"todo_id": 4})["todo"]["status"] == "todo"
    store.restore_bytes(path, writes[0][1])
    assert path.read_bytes() == legacy


def test_observer_sees_none_for_new_file_and_restore_deletes(reg: Registry, path: Path) -> None:
    writes: list[bytes | None] = []
    with store.reporting(lambda w: writes.append(w.before)):
        reg.call("add_todo", {"title": "first"})
    assert writes == [None] and path.exists()
    store.restore_bytes(path, None)
    assert not path.exists()


def test_failing_observer_does_not_fail_the_write(reg: Registry, path: Path) -> None:
    def broken(write: store.StoreWrite) -> None:
        raise RuntimeError("journal is full")

    with store.reporting(broken):
        assert reg.call("add_todo", {"title": "kept"})["ok"] is True
    assert json.loads(path.read_text())["todos"][0]["title"] == "kept"


def test_no_temp_files_left_behind(reg: Registry, path: Path) -> None:
    for i in range(5):
        reg.call("add_todo", {"title": f"t{i}"})
    leftovers = [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_threads_adding_concurrently(reg: Registry, path: Path) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda i: reg.call("add_todo", {"title": str(i)}), range(80)))
    assert all(r["ok"] for r in results)
    ids = [t["id"] for t in json.loads(path.read_text(encoding="utf-8"))["todos"]]
    assert len(ids) == 80 and len(set(ids)) == 80


WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from tools.registry import Registry
    from tools.todos import make_todo_tools

    reg = Registry(make_todo_tools(Path(sys.argv[1])))
    for i in range(200):
        result = reg.call("add_todo", {"title": sys.argv[2] + str(i)})
        assert result["ok"], result
    """
)


def test_two_processes_adding_concurrently(path: Path) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(path), name], cwd=ROOT,
                         stderr=subprocess.PIPE, text=True)
        for name in ("a", "b")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    todos = json.loads(path.read_text(encoding="utf-8"))["todos"]
    ids = [t["id"] for t in todos]
    assert len(todos) == 400 and len(set(ids)) == 400
    assert {t["title"] for t in todos} == {f"{n}{i}" for n in "ab" for i in range(200)}
    assert sorted(ids) == [f"todo-{i:03d}" for i in range(1, 401)]
