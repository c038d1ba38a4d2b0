"""What a resume shows before its session is built: the last turns and the figures of a journal.

``glassloop --resume`` draws the recap (the last turns, how many came before, the turn and
message counts) and the toolbar's totals from ``peek``, then the prompt; the session (the
journal read whole, checked and repaired: ``journal.load_checked``) is built behind it.
``peek`` is one pass over the file's bytes that places each line by how the journal's
writer begins it and parses only what it shows: the meta record, the ``truncate``, ``turn``
and ``undo`` records (short) and the messages of the last turns. Whatever is not plainly the
writer's (not a regular file, too big, a line it cannot place, a turn a crash left open) makes
it decline (None), and the resume builds the session first, with its notices and errors.
Damage inside a line it does not parse is found by the full load, whose notice follows.

This module imports no history, tools or trace: it is on the start path.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from repl.config.load import ConfigError, ProviderSettings, Settings, with_overrides
from repl.config.redact import REDACTED, mask_url
from repl.config.schema import check, spec_for
from repl.loop.cost import Cost
from repl.loop.events import TurnFinished, Usage
from repl.providers.base import Message

MAX_JOURNAL_BYTES = 256 * 1024 * 1024  # a bigger journal is refused on resume, not read
SHOWN_TURNS = 3  # the turns a resume shows

_META = b'{"kind": "meta", '
_MESSAGE = b'{"kind": "message", "message": {"role": "'
_ROLES = {b'user"': "user", b'assistant"': "assistant", b'tool"': "tool"}
_TRUNCATE = b'{"kind": "truncate", '
_NUMBERS = (b'{"kind": "turn", ', b'{"kind": "undo"')
_BRANCH = b'{"kind": "branch", '  # /rewind's mark: what the conversation shows is unchanged by it


@dataclass(frozen=True)
class TurnNote:
    """A journal ``turn`` record, checked: the numbers a resumed session continues."""

    finished: TurnFinished
    cost: Cost
    prompt_tokens: int
    calls: int
    compact: bool
    undone: bool

    @classmethod
    def parse(cls, r: dict[str, Any]) -> TurnNote | None:
        """None when the record is damaged."""
        try:
            u, c = r["usage"], r["cost"]
            usage = Usage(int(u["input_tokens"]), int(u.get("cached_tokens", 0)), int(u["output_tokens"]),
                          bool(u.get("estimated")), int(u.get("reasoning_tokens", 0)))
            finished = TurnFinished(int(r["turn"]), r["stopped_by"], int(r["steps"]), int(r["tool_calls"]),
                                    usage, float(r["duration_s"]))
            return cls(finished, Cost(float(c["usd"]), int(c["unpriced"])), int(r["prompt_tokens"]),
                       int(r["calls"]), bool(r.get("compact")), bool(r.get("undone")))
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


def totals(notes: Iterable[TurnNote]) -> tuple[Usage, Cost, int]:
    """The session's usage and cost, and the context in use (the last turn not undone)."""
    usage, cost, prompt_tokens = Usage(), Cost(), 0
    for note in notes:
        usage, cost = usage + note.finished.usage, cost + note.cost
        prompt_tokens = note.prompt_tokens if not note.undone else prompt_tokens
    return usage, cost, prompt_tokens


def note_record(turns: list[dict[str, Any]], record: dict[str, Any]) -> None:
    """A ``turn`` record appended to ``turns``; an ``undo`` marks the last one not undone."""
    if record.get("kind") == "turn":
        turns.append({**record, "undone": False})
    elif record.get("kind") == "undo":
        last = next((r for r in reversed(turns) if not r["undone"]), None)
        if last is not None:
            last["undone"] = True


# ---- where a session ran: its provider, base URL, API and model ----------------------------

ENDPOINT = ("provider", "base_url", "api", "model")  # keys of the meta record and of each turn record


def endpoint_of(profile: ProviderSettings) -> dict[str, str]:
    """What a journal records of where a turn ran (never a key: keys stay in the environment)."""
    return {"provider": profile.name, "base_url": profile.base_url, "api": profile.api, "model": profile.model}


def session_endpoint(meta: dict[str, Any] | None, turns: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the session ran last: its last turn record that says, else its meta record (a journal
    written before turn records held it: the provider and model it started on)."""
    for record in [*reversed(turns), meta or {}]:
        if record.get("provider"):
            return {key: record[key] for key in ENDPOINT if key in record}
    return {}


def _usable(key: str, value: Any) -> bool:
    """Whether the journal's ``value`` of profile ``key`` may be set: of the key's type and range,
    and not a URL whose credentials the journal redacted."""
    if key == "base_url" and isinstance(value, str) and REDACTED in value:
        return False
    try:
        check(spec_for(f"providers.journal.{key}"), value, "the journal", key)
    except ConfigError:
        return False
    return bool(value) or key == "base_url"


def resumed_on(settings: Settings, endpoint: dict[str, Any]) -> tuple[Settings, str | None]:
    """``settings`` on the session's provider, base URL, API and model (``session_endpoint``),
    except what a flag chose: a flag's provider other than the session's keeps the settings as
    they are, a flag's base URL, API or model goes along to the session's provider. Returns the
    line that says so when where the next turn goes changed (None: nothing to say)."""
    name, active = endpoint.get("provider"), settings.active
    flagged = {key: settings.sources.get(key if key == "provider" else f"providers.{active.name}.{key}", "")
               for key in ENDPOINT}
    flagged = {key: label for key, label in flagged.items() if label.startswith("flag ")}
    if not isinstance(name, str) or not name or ("provider" in flagged and name != active.name):
        return settings, None
    if name not in settings.providers:
        return settings, (f"the session ran on provider {name}, which is not configured: "
                          f"continuing on provider {active.name}, model {active.model}")
    carried = {key: getattr(active, key) for key in flagged if key != "provider"}
    restored = {key: endpoint[key] for key in ENDPOINT[1:] if key in endpoint and key not in carried
                and _usable(key, endpoint[key])}
    out = with_overrides(settings, **({"provider": name} if name != active.name else {}), **carried, **restored)
    out = replace(out, sources={**out.sources, **{f"providers.{name}.{key}": flagged[key] for key in carried}})
    now = out.active
    if endpoint_of(now) == endpoint_of(active):
        return settings, None
    where = f" at {mask_url(now.base_url)}" if now.base_url else ""
    api = ", Responses API" if now.api == "responses" else ""
    flags = ", ".join(label.removeprefix("flag ") for key, label in flagged.items() if key in carried)
    return out, (f"resumed on provider {name}{where}, model {now.model}{api} (the session's"
                 f"{f'; {flags} from the command line' if flags else ''})")


def recap(messages: list[Message], last: int = SHOWN_TURNS) -> tuple[int, list[dict[str, Any]]]:
    """The last ``last`` turns as ``{"user", "calls": [(name, arguments, ok)], "answer"}``
    for showing on resume, and how many turns came before them."""
    starts = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    chosen = starts[-last:] if last > 0 else []
    shown = []
    for start, end in zip(chosen, [*chosen[1:], len(messages)][: len(chosen)], strict=True):
        turn = messages[start:end]
        results = {m.get("tool_call_id"): m.get("content", "") for m in turn if m.get("role") == "tool"}
        calls = [(c.get("name", ""), c.get("arguments", ""), _ok(results.get(c.get("id"))))
                 for m in turn if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
        answers = [m.get("content") or "" for m in turn if m.get("role") == "assistant"]
        shown.append({"user": messages[start].get("content", ""), "calls": calls,
                      "answer": answers[-1] if answers else ""})
    return len(starts) - len(shown), shown


def resumed_line(session_id: str, turns: int, messages: int) -> str:
    return f"resumed session {session_id}: {turns} turn{'' if turns == 1 else 's'}, {messages} messages"


def _ok(result: str | None) -> bool | None:
    """A tool result's ``ok`` (None when there is none, or it is not a JSON object)."""
    try:
        value = json.loads(result) if result else None
    except ValueError:
        return None
    return bool(value.get("ok")) if isinstance(value, dict) else None


def list_sessions(folder: Path) -> list[Path]:
    """Journal files, newest last."""
    if not folder.is_dir():
        return []
    return sorted(folder.glob("*.jsonl"), key=mtime)


def mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # a dangling symlink: listed first, refused when resumed
        return 0.0


def matching_session(folder: Path, key: str) -> Path | None:
    """A session by id, or the newest whose id starts with ``key``."""
    sessions = list_sessions(folder)
    matches = [p for p in sessions if p.stem == key] or [p for p in sessions if p.stem.startswith(key)]
    return matches[-1] if matches else None


@dataclass(frozen=True)
class Peek:
    """What a resume shows of a journal, read without loading it (``peek``)."""

    path: Path
    earlier: int  # turns before the ones shown
    shown: list[dict[str, Any]]  # ``recap``'s turns
    turns: int
    messages: int
    usage: Usage
    cost: Cost
    prompt_tokens: int  # the context in use after the last turn not undone
    endpoint: dict[str, Any] = field(default_factory=dict)  # where it ran (``session_endpoint``)

    @property
    def line(self) -> str:
        return resumed_line(self.path.stem, self.turns, self.messages)


def peek_session(folder: Path, key: str) -> Peek | None:
    """``peek`` of the session ``key`` (an id, its start, or ``last``: the newest with a turn);
    None when there is none or one it declines (the caller then resumes the slow way)."""
    if key != "last":
        path = matching_session(folder, key)
        return peek(path) if path is not None else None
    sessions = list_sessions(folder)  # the newest: one with no turn, or not plain, is the slow way's to judge
    return peek(sessions[-1]) if sessions else None


def peek(path: Path) -> Peek | None:
    """The recap and figures of the journal at ``path`` as the full load would give them;
    None for a journal with no turn or anything not plainly written by the journal."""
    data = _read_plain(path)
    if data is None or b"\r" in data:
        return None
    lines = [line for line in data.split(b"\n") if line.strip()]
    meta = _parse(lines[0]) if lines and lines[0].startswith(_META) else None
    if not _is_meta(meta):
        return None
    messages: list[tuple[str, bytes]] = []  # (role, line) of the history as replayed
    numbers: list[bytes] = []  # the turn and undo records, in order
    for line in lines[1:]:
        if line.startswith(_MESSAGE):
            role = _ROLES.get(line[len(_MESSAGE):][:10].split(b",", 1)[0])
            if role is None:
                return None
            messages.append((role, line))
        elif line.startswith(_TRUNCATE):
            record = _parse(line)
            length = record.get("length") if record is not None else None
            if type(length) is not int or not 0 <= length <= len(messages):
                return None
            del messages[length:]
        elif line.startswith(_NUMBERS):
            numbers.append(line)
        elif not line.startswith(_BRANCH):
            return None
    records = _parse_all(numbers)
    if records is None:
        return None
    turns: list[dict[str, Any]] = []
    for record in records:
        note_record(turns, record)
    peeked = _peeked(path, messages, turns)
    return replace(peeked, endpoint=session_endpoint(meta, turns)) if peeked is not None else None


def _peeked(path: Path, messages: list[tuple[str, bytes]], turns: list[dict[str, Any]]) -> Peek | None:
    starts = [i for i, (role, _) in enumerate(messages) if role == "user"]
    if not starts:
        return None
    tail = [_plain_message(_parse(line)) for _, line in messages[starts[-SHOWN_TURNS:][0]:]]
    if any(m is None for m in tail):
        return None
    shown_messages = [m for m in tail if m is not None]
    last = shown_messages[-1]
    if last["role"] != "assistant" or last.get("tool_calls"):  # a turn left open: the full load closes it
        return None
    _, shown = recap(shown_messages)
    notes = [n for n in map(TurnNote.parse, turns) if n is not None]
    usage, cost, prompt_tokens = totals(notes)
    return Peek(path, len(starts) - len(shown), shown, len(starts), len(messages), usage, cost, prompt_tokens)


def _read_plain(path: Path) -> bytes | None:
    """The bytes of a regular file of at most MAX_JOURNAL_BYTES, opened without blocking."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_JOURNAL_BYTES:
            return None
        data = os.read(fd, info.st_size + 1)
        return data if len(data) <= info.st_size else None  # it grew since: the full load's to judge
    except OSError:
        return None
    finally:
        os.close(fd)


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


def _parse_all(lines: list[bytes]) -> list[dict[str, Any]] | None:
    """Each line's record, or None when one is not a turn or undo record. One parse of them all
    as an array: a thousand turns took ~5 ms more parsed line by line."""
    try:
        records = json.loads(b"[" + b",".join(lines) + b"]")
    except (ValueError, RecursionError):
        return None
    plain = len(records) == len(lines) and all(isinstance(r, dict) and r.get("kind") in ("turn", "undo") for r in records)
    return records if plain else None


def _is_meta(record: dict[str, Any] | None) -> bool:
    return record is not None and record.get("kind") == "meta" and isinstance(record.get("system_prompt", ""), str)


def _plain_message(record: dict[str, Any] | None) -> Message | None:
    """The record's message when it is as the history writes it (the repair would keep it as it is)."""
    m = record.get("message") if record is not None and record.get("kind") == "message" else None
    return cast(Message, m) if _is_plain(m) else None


def _is_plain(m: Any) -> bool:
    if not isinstance(m, dict) or not isinstance(m.get("content"), str):
        return False
    role = m.get("role")
    if role == "user":
        return True
    if role == "tool":
        return isinstance(m.get("tool_call_id"), str) and bool(m["tool_call_id"]) and isinstance(m.get("name", ""), str)
    calls = m.get("tool_calls", [])
    return role == "assistant" and isinstance(calls, list) and all(
        isinstance(c, dict) and all(isinstance(c.get(k), str) for k in ("id", "name", "arguments")) for c in calls)
