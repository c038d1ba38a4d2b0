"""Todo tools over one JSON file: list, read, add, update, complete, delete.

File format: ``{"version": 1, "todos": [...]}``. A bare list of todo objects
(the older format) is read as-is and only rewritten on the next change.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, NamedTuple

from tools.days import is_span, when_of
from tools.registry import Tool, tool
from tools.results import ToolError
from tools.store import collection_validator, read_json, update_json

Status = Literal["todo", "done"]
Priority = Literal["low", "medium", "high"]

DEFAULT: dict[str, Any] = {"version": 1, "todos": []}
_validate = collection_validator("todos", ("id", "title"))
_ID_NUMBER = re.compile(r"(?i)^\s*(?:todo[-_ ]?)?0*(\d+)\s*$")
PAGE = 50  # list_todos items per call unless asked otherwise (about one screenful)
_IDS_IN_ERROR = 10  # a not-found error names this many existing ids


class Outcome(NamedTuple):
    data: dict[str, Any] | None  # None: nothing to write
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    result: dict[str, Any]


def _now() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")


def _number(todo_id: Any) -> int | None:
    if isinstance(todo_id, bool):
        return None
    if isinstance(todo_id, int):
        return todo_id
    match = _ID_NUMBER.match(str(todo_id))
    return int(match.group(1)) if match else None


def normalize_id(todo_id: str | int) -> str:
    """``2``, ``"2"``, ``"todo-2"`` -> ``"todo-002"``; other text is kept as given."""
    number = _number(todo_id)
    return f"todo-{number:03d}" if number is not None else str(todo_id).strip()


def _index(todos: list[dict[str, Any]], todo_id: str | int) -> int:
    wanted, number = normalize_id(todo_id), _number(todo_id)
    for i, item in enumerate(todos):
        if item["id"] == wanted:
            return i
    for i, item in enumerate(todos):
        if number is not None and _number(item["id"]) == number:
            return i
    existing = ", ".join(item["id"] for item in todos[:_IDS_IN_ERROR]) or "none (the list is empty)"
    if len(todos) > _IDS_IN_ERROR:
        existing += f", … ({len(todos)} in all; list_todos finds one)"
    raise ToolError("not_found", f"no todo {wanted}; existing ids: {existing}")


def _id_number(todo_id: str) -> int | None:
    """``_number`` with a fast path for the ids glassloop writes (``todo-NNN``)."""
    digits = todo_id[5:]
    if todo_id.startswith("todo-") and digits.isascii() and digits.isdigit():
        return int(digits)
    return _number(todo_id)


def _next_id(todos: list[dict[str, Any]]) -> str:
    numbers = (_id_number(item["id"]) for item in todos)
    return f"todo-{max((n for n in numbers if n is not None), default=0) + 1:03d}"


def _summary(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": item["id"],
        "title": item["title"],
        "status": item.get("status", "todo"),
        "priority": item.get("priority", "medium"),
        "due": item.get("due"),
    }


_DUE_FORMS = ("give the day, with the time if one was said: 'tomorrow', 'tomorrow at 3pm', "
              "'Friday', 'next Monday', 'Dec 20', 'in 2 days', '明天上午十点', '周五', "
              "or YYYY-MM-DD [HH:MM]")


def _due(said: str | None) -> str | None:
    """The due date ``said`` means now, in local time: ``YYYY-MM-DD``, or ``YYYY-MM-DD HH:MM``
    when a time was said ("tomorrow at 3pm": words are wrong the day after). None and "" pass."""
    if not said:
        return said
    if is_span(said):
        raise ToolError("invalid_arguments",
                        f"due {said!r} is a span of days, not a day; {_DUE_FORMS}")
    when = when_of(said, datetime.now())
    if when is None:
        raise ToolError("invalid_arguments",
                        f"due {said!r} is not a day that could be read; {_DUE_FORMS}")
    return when.iso()


# what links a day to the words before it ("call mum at 3pm", "renew it by Friday") or, in
# Chinese, after it (周五前交报告)
_LINK_BEFORE = re.compile(r"(?:[\s,，;]+(?:at|on|by|before|until|due))?[\s,，;:：]*$",
                          re.IGNORECASE)
_LINK_AFTER = re.compile(r"^(?:之前|以前|前)?[\s,，;:：]*")
_HAN = re.compile(r"[\u3400-\u9fff]")


def _title_without_due(title: str, due: str | None) -> str:
    """``title`` without the due's words at its end ("Call mum tomorrow at 3pm") or, before
    Chinese, at its start ("明天上午十点开会"): the due holds them as a date, and in the title
    "tomorrow" is wrong the day after. A title that is only those words is kept."""
    said = " ".join((due or "").split())
    if not said or len(said) >= len(title):
        return title
    if title[-len(said):].casefold() == said.casefold() and (
            title[-len(said) - 1].isspace() or _HAN.match(title[-len(said) - 1])):
        kept = _LINK_BEFORE.sub("", title[:-len(said)])
    elif title[:len(said)].casefold() == said.casefold() and _HAN.match(title[len(said)]):
        kept = _LINK_AFTER.sub("", title[len(said):])
    else:
        return title
    return kept.strip() or title


def _require_text(field: str, value: str) -> str:
    if not value.strip():
        raise ToolError("invalid_arguments", f"{field} must not be empty")
    return value.strip()


def _add(data: dict, *, title: str, detail: str = "", priority: Priority = "medium",
         due: str | None = None, tag: str | None = None) -> Outcome:
    todos = data["todos"]
    stamp = _now()
    item = {
        "id": _next_id(todos), "title": _title_without_due(_require_text("title", title), due),
        "detail": detail, "status": "todo", "priority": priority, "due": _due(due) or None,
        "tag": tag or None, "created_at": stamp, "updated_at": stamp,
    }
    return Outcome({**data, "todos": [*todos, item]}, None, item, {"todo": item})


def _update(data: dict, *, todo_id: str | int, **fields: Any) -> Outcome:
    changes = {k: v for k, v in fields.items() if v is not None}
    if not changes:
        names = ", ".join(fields)
        raise ToolError("invalid_arguments", f"nothing to update; pass at least one of {names}")
    if "title" in changes:
        title = _require_text("title", changes["title"])
        changes["title"] = _title_without_due(title, changes.get("due"))
    if "due" in changes:
        changes["due"] = _due(changes["due"])
    for clearable in ("due", "tag"):  # an empty string clears the field
        if changes.get(clearable) == "":
            changes[clearable] = None
    todos = list(data["todos"])  # items are never changed in place: a shallow copy suffices
    index = _index(todos, todo_id)
    before = todos[index]
    after = {**before, **changes, "updated_at": _now()}
    todos[index] = after
    return Outcome({**data, "todos": todos}, before, after, {"todo": after})


def _complete(data: dict, *, todo_id: str | int) -> Outcome:
    item = data["todos"][_index(data["todos"], todo_id)]
    if item.get("status") == "done":
        return Outcome(None, item, item, {"todo": item, "already_done": True})
    return _update(data, todo_id=todo_id, status="done")


def _delete(data: dict, *, todo_id: str | int) -> Outcome:
    index = _index(data["todos"], todo_id)
    before = data["todos"][index]
    todos = data["todos"][:index] + data["todos"][index + 1 :]
    return Outcome({**data, "todos": todos}, before, None, {"deleted": before})


Operation = Callable[..., Outcome]


def _commit(path: Path, op: Operation, args: dict[str, Any]) -> dict[str, Any]:
    def change(data: dict) -> tuple[dict | None, dict]:
        outcome = op(data, **args)
        return outcome.data, outcome.result

    return update_json(path, change, DEFAULT, _validate)


def _previewer(path: Path, op: Operation) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def preview(args: dict[str, Any]) -> dict[str, Any]:
        outcome = op(read_json(path, DEFAULT, _validate), **args)
        return {"before": outcome.before, "after": _with_due_said(outcome.after, args.get("due"))}

    return preview


def _with_due_said(after: dict[str, Any] | None, said: Any) -> dict[str, Any] | None:
    """``after`` with the words said beside the date they resolved to, for the person to check:
    "2026-12-08 15:00 (tomorrow at 3pm)"."""
    if not (after and after.get("due") and isinstance(said, str) and said.strip() != after["due"]):
        return after
    return {**after, "due": f"{after['due']} ({said.strip()})"}


def make_todo_tools(path: Path) -> list[Tool]:
    """The six todo tools bound to the store at ``path``."""
    path = Path(path)

    def load() -> list[dict[str, Any]]:
        return read_json(path, DEFAULT, _validate)["todos"]

    @tool(examples=("which chores remain undone", "show my open tasks", "anything overdue?", "我的待办清单里还剩什么", "列出所有高优先级的任务"))
    def list_todos(status: Status | None = None, priority: Priority | None = None,
                   offset: int = 0, limit: int = PAGE) -> dict:
        """List todo summaries (id, title, status, priority, due) and a count.

        Use it to see what exists or to find an id. It leaves out each item's
        detail: use get_todo for one item's full text. A long list comes in
        pages: ``count`` is the number of matching items, and when ``more``
        is present, call again with ``offset`` = ``next_offset``.

        Args:
            status: Only items with this status ("todo" = not finished yet, still open or left
                to do: 未完成, 没做完, 还有; "done" = finished, 做完了).
            priority: Only items with this priority (high: urgent, important, 重要, 紧急).
            offset: How many matching items to skip.
            limit: At most this many items (0 = all of them).
        """
        matching = [t for t in load() if status in (None, t.get("status", "todo"))
                    and priority in (None, t.get("priority", "medium"))]
        start = max(0, offset)
        end = len(matching) if limit <= 0 else start + limit
        page = [_summary(t) for t in matching[start:end]]
        result: dict[str, Any] = {"count": len(matching), "todos": page}
        if start + len(page) < len(matching):
            result.update(offset=start, more=len(matching) - start - len(page),
                          next_offset=start + len(page))
        return result

    @tool(examples=("full info on item 5", "expand task 2 for me", "第二个任务的备注写了什么", "把 todo-007 的全部信息给我看"))
    def get_todo(todo_id: str | int) -> dict:
        """Get one todo with all its fields, including the detail text.

        Use it after list_todos when you need an item's detail; do not call it
        for every item just to list them.

        Args:
            todo_id: The id, e.g. "todo-002" (a bare number like 2 also works).
        """
        todos = load()
        return {"todo": todos[_index(todos, todo_id)]}

    @tool(examples=("task list: renew my ID card", "rent: due Monday, track it", "new task: email Greg, urgent", "帮我记个待办：周六去洗车", "下周之前要把简历改好，加到任务里"),
          side_effects=True, preview=_previewer(path, _add))
    def add_todo(title: str, detail: str = "", priority: Priority = "medium",
                 due: str | None = None, tag: str | None = None) -> dict:
        """Add a new todo (status "todo"). Use only when the user asks to add or remember something.

        Check list_todos first if the item might already exist.

        Args:
            title: Short title, e.g. "Write the weekly report".
            detail: Longer explanation, only when the user wrote one besides the title.
            priority: How important it is; 优先级 (high = 高, 重要, urgent; low = 低).
            due: The day it is due, with the time if the user said one, in their words: today,
                tomorrow at 3pm, Friday, next Monday, a date like "2025-05-01"; 今天, 明天上午十点, 周五.
            tag: A label or category the user named, e.g. "work"; 标签.
        """
        return _commit(path, _add, dict(title=title, detail=detail, priority=priority,
                                         due=due, tag=tag))

    @tool(examples=("push task 3 back to Thursday", "bump item 2 up to urgent", "把第五项的标题改成买菜", "任务4的截止日期推到月底"),
          side_effects=True, preview=_previewer(path, _update))
    def update_todo(todo_id: str | int, title: str | None = None, detail: str | None = None,
                    priority: Priority | None = None, due: str | None = None,
                    tag: str | None = None, status: Status | None = None) -> dict:
        """Change fields of an existing todo; fields you leave out stay as they are.

        To mark an item finished prefer complete_todo. Pass "" for due or tag to clear it.

        Args:
            todo_id: The id, e.g. "todo-002" (a bare number like 2 also works).
            title: New title (to rename it).
            detail: New detail text (replaces the old one).
            priority: New priority; 优先级 (high = 高, 重要, urgent; low = 低).
            due: New due day, with the time if the user said one, in their words or as a date:
                tomorrow at 3pm, Friday, "2025-05-01"; 明天, 周五.
            tag: New label.
            status: New status ("todo" reopens a finished item).
        """
        return _commit(path, _update, dict(todo_id=todo_id, title=title, detail=detail,
                                            priority=priority, due=due, tag=tag, status=status))

    @tool(examples=("the laundry is all done, check it off", "item 6 is done now", "第二项我弄完了", "把洗车那个任务勾掉"),
          side_effects=True, preview=_previewer(path, _complete))
    def complete_todo(todo_id: str | int) -> dict:
        """Mark a todo as done. Use when the user says a task is finished.

        Args:
            todo_id: The id, e.g. "todo-002" (a bare number like 2 also works).
        """
        return _commit(path, _complete, {"todo_id": todo_id})

    @tool(examples=("remove task 8 from the list entirely", "scrap the vet todo", "把第七项待办删掉", "这个任务不要了，删除它"),
          destructive=True, preview=_previewer(path, _delete))
    def delete_todo(todo_id: str | int) -> dict:
        """Delete a todo for good. Only when the user asks to remove it; finished items
        should be completed with complete_todo, not deleted.

        Args:
            todo_id: The id, e.g. "todo-002" (a bare number like 2 also works).
        """
        return _commit(path, _delete, {"todo_id": todo_id})

    return [list_todos, get_todo, add_todo, update_todo, complete_todo, delete_todo]
