"""Workspace trust: what a project file (``./glassloop.toml``) may set before the user trusts it.

A project file comes with a cloned repository, so it is treated as code. Keys
declared ``safe`` in ``repl.config.settings`` (how the model answers: model,
temperature, system prompt ...) apply at once, and so does a value of a key
declared ``tighten`` that only tightens a lower layer (fewer steps, a smaller
budget, a stricter approval mode, a higher price). Everything else (MCP servers,
hooks (``[[hooks.EVENT]]``: commands run at each turn), base URLs and key variables,
approval loosened, file roots, store and trace paths, provider choice, new prices) needs
trust: ``glassloop trust`` or a yes
at the REPL's start records the file's path and the SHA-256 of its bytes in the user's config dir
(``trust.json``, a record of its own, not a config file); a changed file is untrusted again (the
way ``direnv allow`` binds to content).

Standard library and platformdirs only: this module is on the start-up path.
Writes go through the locked, atomic JSON store, imported when needed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import platformdirs

from repl.config.project import ProjectTrust, ToolsTrust
from repl.config.schema import ConfigError, Spec, printable, read_input, spec_at

APP = "glassloop"
TRUST_FILE = "trust.json"  # {"version": 2, "trusted": [{"path", "sha256"}, ...]}, one entry a line
OLD_TRUST_FILE = "trusted.json"  # {"version": 1, "projects": {path: sha256}}: read once, moved in
# The record's own limit, not a config file's 256 kB (which ~1,900 folders filled): ~100,000
# folders, and a write drops the folders that are gone.
MAX_TRUST_BYTES = 16_000_000


def _tightens(spec: Spec, value: Any, below: Any) -> bool:
    """Whether ``value`` is stricter than ``below`` by the key's declared rule."""
    meta = spec.meta
    if isinstance(meta.tighter, tuple):  # values, strictest first
        return meta.tighter.index(value) <= meta.tighter.index(below)
    if meta.zero_is_no_limit:
        return value > 0 and (below == 0 or value <= below)
    return value <= below if meta.tighter == "lower" else value >= below


def needs_trust(key: str, value: Any, below: dict[str, Any]) -> bool:
    """Whether a project file's ``key = value`` may apply only once the file is trusted: by the
    key's declared rule (``project`` in ``repl.config.settings``)."""
    if below.get(key, object()) == value:
        return False
    spec = spec_at(key)
    if spec is None:  # a named table's own entry: a profile of its own is fine, a server or price is not
        return not key.startswith("providers.")
    if spec.meta.project == "safe":
        return False
    return not (spec.meta.project == "tighten" and key in below and _tightens(spec, value, below[key]))


def trust_file() -> Path:
    return platformdirs.user_config_path(APP) / TRUST_FILE


def trust_key(path: Path) -> str:
    """Records are keyed by the real folder: the same checkout reached by a symlink is one entry."""
    return str(Path(os.path.realpath(path.parent)) / path.name)


def digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _validate(data: Any) -> dict[str, Any]:
    entries = data.get("trusted") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get("path"), str) and isinstance(e.get("sha256"), str)
            for e in entries):
        raise ValueError('expected {"version": 2, "trusted": [{"path": ..., "sha256": ...}, ...]}')
    return {"version": 2, "trusted": entries}


def _entries(data: Any) -> dict[str, str]:
    return {e["path"]: e["sha256"] for e in _validate(data)["trusted"]}


def _old_entries(data: Any) -> dict[str, str]:
    projects = data.get("projects") if isinstance(data, dict) else None
    if not isinstance(projects, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in projects.items()):
        raise ValueError('expected {"version": 1, "projects": {path: sha256}}')
    return projects


def _old_trust_file() -> Path:
    return trust_file().with_name(OLD_TRUST_FILE)


def _read(path: Path, entries: Callable[[Any], dict[str, str]]) -> dict[str, str] | None:
    """path -> sha256 of the record at ``path`` (``entries`` reads its format); None when there
    is no such file; ConfigError (one line) if it is bad."""
    raw = read_input(path, required=False, limit=MAX_TRUST_BYTES)
    if raw is None:
        return None
    if not raw.strip():
        return {}
    try:
        return entries(json.loads(raw.decode("utf-8")))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        problem = str(exc).splitlines()[0] if isinstance(exc, ValueError) else "not valid JSON"
        raise ConfigError(f"config error in {path}: {problem}; fix it or delete it "
                          "(every project file is then untrusted)") from None


def trusted_projects() -> dict[str, str]:
    """path -> sha256 of every trusted project file and tool folder; ConfigError (one line) if
    the record is bad. The old record, when there is no new one, is read and moved into it."""
    trusted = _read(trust_file(), _entries)
    if trusted is not None:
        return trusted
    old = _read(_old_trust_file(), _old_entries)
    if old is None:  # none, or another process just moved it
        return _read(trust_file(), _entries) or {}
    from tools.safe_io import StoreError

    try:
        _update(lambda record: False)
    except (ConfigError, StoreError, OSError):
        pass  # a config dir we cannot write: the old record still answers, and is moved by a later write
    return old


def screen(path: Path, raw: bytes, layer: dict[str, Any], below: dict[str, Any]) -> ProjectTrust:
    """Remove from ``layer`` (the project file's keys) what needs trust, unless this exact
    content is trusted; the trust record is read only when something needs it."""
    sha = digest(raw)
    risky = {k: v for k, v in layer.items() if needs_trust(k, v, below)}
    trusted = bool(risky) and trusted_projects().get(trust_key(path)) == sha
    if risky and not trusted:
        for key in risky:
            del layer[key]
    return ProjectTrust(path, sha, trusted, risky)


def _update(change: Callable[[dict[str, str]], bool]) -> bool:
    """Locked read -> ``change(record)`` (path -> sha256, changed in place; True if it changed)
    -> atomic write. The first write moves the old record in; every write drops the entries
    whose folder is gone."""
    from tools.store import encode_json, update_json  # locked atomic write, off the start-up path

    path, old = trust_file(), _old_trust_file()

    def apply(data: dict[str, Any]) -> tuple[dict[str, Any] | None, tuple[bool, bool]]:
        moving = not path.exists() and old.exists()  # under the lock: no other writer moves it now
        record = (_read(old, _old_entries) or {}) if moving else _entries(data)
        before = dict(record)
        changed = change(record)
        record = {key: sha for key, sha in record.items() if os.path.isdir(os.path.dirname(key))}
        if record == before and not moving:
            return None, (changed, False)
        new = {"version": 2, "trusted": [{"path": key, "sha256": sha} for key, sha in sorted(record.items())]}
        if len(encode_json(new)) > MAX_TRUST_BYTES:
            raise ConfigError(f"cannot record trust in {path}: it would exceed {MAX_TRUST_BYTES // 1_000_000} MB; "
                              "revoke the folders you no longer use (`glassloop trust --revoke`)")
        return new, (changed, moving)

    changed, moved = update_json(path, apply, {"version": 2, "trusted": []}, _validate)
    if moved:
        old.unlink(missing_ok=True)
    return changed


def _change_record(path: Path, sha: str | None) -> bool:
    """Set (``sha``) or remove (None) the record for ``path``; True if it changed."""
    from tools.safe_io import StoreError

    key = trust_key(path)

    def change(record: dict[str, str]) -> bool:
        if record.get(key) == sha:
            return False
        if sha is None:
            del record[key]
        else:
            record[key] = sha
        return True

    try:
        return _update(change)
    except (StoreError, OSError) as exc:
        reason = str(exc).splitlines()[0] if isinstance(exc, StoreError) else exc.strerror or str(exc)
        raise ConfigError(f"cannot record trust in {trust_file()}: {reason}") from None


def record(project: ProjectTrust | ToolsTrust) -> bool:
    return _change_record(project.path, project.sha256)


def record_folder(folder: Path, sha: str) -> bool:
    """Trust a folder's exact content (``./.glassloop/commands``: the digest of its files)."""
    return _change_record(folder, sha)


# ---- a project's own tools (./.glassloop/tools/*.py) --------------------------------

PROJECT_TOOLS = Path(".glassloop") / "tools"


def tools_trusted(folder: Path, sha: str) -> bool:
    return trusted_projects().get(trust_key(folder)) == sha


def project_tools(cwd: Path, trust_all: bool = False) -> ToolsTrust | None:
    """The project's tool folder as it is now; None when it holds no tool file (one stat)."""
    folder = Path(cwd) / PROJECT_TOOLS
    if not folder.is_dir():
        return None
    from tools.user_loader import digest, read_sources, tool_files  # only when the folder exists

    sources = read_sources(tool_files(folder), root=cwd)  # a tool file may not lead out of the project
    if not sources:
        return None
    sha = digest(sources, folder)
    return ToolsTrust(folder, sha, trust_all or tools_trusted(folder, sha),
                      tuple(s.path.name for s in sources), tuple(s.listed() for s in sources))


def tools_notice(tools: ToolsTrust) -> str:
    count = f"{len(tools.files)} tool file" + ("" if len(tools.files) == 1 else "s")
    return (f"{printable(str(tools.path))} is not trusted: its {count} ({printable(', '.join(tools.files[:5]))}"
            f"{', …' if len(tools.files) > 5 else ''}) {'was' if len(tools.files) == 1 else 'were'} not loaded (run `glassloop trust` to allow "
            "this exact content, or set trust_project_tools = true under [tools] in your user config)")


def revoke(path: Path) -> bool:
    return _change_record(path, None)


# ---- telling the user -------------------------------------------------------------


def shown(value: Any, limit: int = 100) -> str:
    text = printable(json.dumps(value, ensure_ascii=False))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def groups(keys: Any) -> list[str]:
    """Dotted keys, one entry per MCP server (``mcp.servers.x``)."""
    out: dict[str, None] = {}
    for key in keys:
        parts = key.split(".")
        out[".".join(parts[:3]) if parts[0] == "mcp" else key] = None
    return list(out)


def notice(project: ProjectTrust) -> str:
    """One line: what was ignored and how to trust it."""
    names = groups(project.ignored)
    listed = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (f"{printable(str(project.path))} is not trusted: ignoring {listed} "
            f"(run `glassloop trust` to allow them; `glassloop config` shows the values)")


def details(project: ProjectTrust) -> list[str]:
    """``key = value`` lines of what trusting the file would enable; a hook's command whole, one
    line each (it runs as a program)."""
    lines = []
    for key, value in project.risky.items():
        spec = spec_at(key)
        if spec is not None and spec.kind == "rows" and isinstance(value, list):
            lines += [f"{printable(key)}: runs {shown(row.get('command'), 400)}"
                      + (f" for tools {shown(row['matcher'])}" if row.get("matcher") else "")
                      for row in value]
        elif not (value is True and key.startswith(("mcp.", "pricing."))):  # table markers
            lines.append(f"{printable(key)} = {shown(value)}")
    return lines
