"""Note tools over one JSON file: add, list, search.

File format: ``{"version": 1, "notes": [...]}``; a bare list of note objects
(each with a ``text``) is also read and only rewritten on the next change.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from tools.registry import Tool, tool
from tools.results import ToolError
from tools.store import collection_validator, read_json, update_json

DEFAULT: dict[str, Any] = {"version": 1, "notes": []}
_validate = collection_validator("notes", ("text",))
_ID_NUMBER = re.compile(r"^note-(\d+)$")


def _next_id(notes: list[dict[str, Any]]) -> str:
    numbers = [int(m.group(1)) for n in notes if (m := _ID_NUMBER.match(str(n.get("id", ""))))]
    return f"note-{max(numbers, default=0) + 1:03d}"


def _new_note(notes: list[dict[str, Any]], text: str, tags: list[str] | None) -> dict[str, Any]:
    if not text.strip():
        raise ToolError("invalid_arguments", "text must not be empty")
    clean_tags = [t.strip() for t in tags or [] if t.strip()]
    now = datetime.now().astimezone().isoformat(timespec="seconds")
    return {"id": _next_id(notes), "text": text.strip(), "tags": clean_tags, "created_at": now}


def _matches(note: dict[str, Any], needle: str) -> bool:
    tags = note.get("tags") or []
    haystack = [note["text"], *(t for t in tags if isinstance(t, str))]
    return any(needle in part.casefold() for part in haystack)


def make_note_tools(path: Path) -> list[Tool]:
    """add_note, list_notes and search_notes bound to the store at ``path``."""
    path = Path(path)

    def load() -> list[dict[str, Any]]:
        return read_json(path, DEFAULT, _validate)["notes"]

    def preview_add(args: dict[str, Any]) -> dict[str, Any]:
        return {"before": None, "after": _new_note(load(), args["text"], args.get("tags"))}

    @tool(examples=("jot down: gate code 7781", "keep a memo: Tom turns 40 in June", "记一下：停车位在B2层45号", "帮我存个笔记，护照放在书柜第二层"),
          side_effects=True, preview=preview_add)
    def add_note(text: str, tags: list[str] | None = None) -> dict:
        """Save a short note for later. Use when the user asks to note or remember a fact
        (for tasks with a status or due date use add_todo instead).

        Args:
            text: The note itself.
            tags: Labels or categories the user named, e.g. ["recipe", "work"]; 标签.
        """

        def change(data: dict) -> tuple[dict, dict]:
            note = _new_note(data["notes"], text, tags)
            return {**data, "notes": [*data["notes"], note]}, {"note": note}

        return update_json(path, change, DEFAULT, _validate)

    @tool(examples=("dump all my saved notes", "what notes exist", "把我的笔记都列出来", "我存过哪些笔记"))
    def list_notes() -> dict:
        """List all saved notes with their ids, text and tags. To find notes about
        a topic, search_notes is shorter."""
        notes = load()
        return {"count": len(notes), "notes": notes}

    @tool(examples=("gym fee: did I jot that?", "scan notes for visa stuff", "我之前记过车位号码吗", "在笔记里找一下关于签证的内容"))
    def search_notes(query: str) -> dict:
        """Find notes whose text or tags contain the query (case-insensitive substring).

        Args:
            query: Text to look for, e.g. "wifi".
        """
        needle = query.strip().casefold()
        if not needle:
            raise ToolError("invalid_arguments", "query must not be empty; use list_notes")
        found = [n for n in load() if _matches(n, needle)]
        return {"query": query, "count": len(found), "notes": found}

    return [add_note, list_notes, search_notes]
