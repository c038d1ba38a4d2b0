"""``glassloop config``: every effective value as (key, value, source) rows, secrets redacted."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

from repl.config_schema import GUARDS_SCHEMA, PRICE_SCHEMA, printable, quote
from repl.redact import mask_url
from repl.redact import masked_key as redact

if TYPE_CHECKING:
    from repl.config import Settings


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):  # a project file is untrusted: no escape sequence reaches the terminal
        return printable(value) if value else '""'
    return printable(str(value))


def describe(settings: Settings) -> list[tuple[str, str, str]]:
    """(key, value, source) rows of every effective value; secrets redacted."""
    src = settings.sources
    provider = settings.provider + (" (auto)" if settings.provider_auto else "")
    rows = [("provider", provider, src.get("provider", "default"))]
    rows += _profile_rows(settings, settings.active)  # the profile in use first
    plain = {"approval": settings.approval, "system_prompt": settings.system_prompt,
             "show_reasoning": settings.show_reasoning,
             **{f"guards.{k}": getattr(settings.guards, k) for k in GUARDS_SCHEMA},
             "tools.todos_file": settings.todos_file, "tools.notes_file": settings.notes_file,
             "tools.files_root": settings.files_root, "tools.weather": settings.weather,
             "tools.trust_project_tools": settings.trust_project_tools,
             "trace.enabled": settings.trace_enabled, "trace.dir": settings.trace_dir,
             "trace.raw": settings.trace_raw, "trace.raw_max_kb": settings.trace_raw_max_kb}
    rows += [(k, _fmt(v), src.get(k, "default")) for k, v in plain.items()]
    rows += [("data_dir", str(settings.data_dir), "platformdirs"),
             ("state_dir", str(settings.state_dir), "platformdirs"),
             ("config_dir", str(settings.config_dir), "platformdirs")]
    for profile in settings.providers.values():
        if profile.name != settings.provider:
            rows += _profile_rows(settings, profile)
    for name, price in settings.pricing.items():
        for f in PRICE_SCHEMA:
            key = f"pricing.{quote(name)}.{f}"
            rows.append((key, _fmt(getattr(price, f)), src.get(key, "= input")))
    for name, server in settings.mcp_servers.items():
        for k, value in server.items():
            key = f"mcp.servers.{name}.{k}"
            if isinstance(value, dict):  # env / headers often hold tokens
                value = "{" + ", ".join(f"{h} = {redact(str(v))}" for h, v in value.items()) + "}"
            elif k == "url":
                value = mask_url(str(value))
            rows.append((key, _fmt(value), src.get(key, "default")))
    rows += _ignored_rows(settings)
    return [(printable(key), value, printable(source)) for key, value, source in rows]


LOCAL_ONLY = frozenset({"model_path", "n_ctx", "threads"})  # keys of the embedded model server


def _profile_rows(settings: Settings, profile: Any) -> list[tuple[str, str, str]]:
    """A profile's rows, without the keys that do not apply to it (``n_ctx`` for an HTTP one)."""
    src, rows = settings.sources, []
    for f in fields(profile):
        key, value = f"providers.{profile.name}.{f.name}", getattr(profile, f.name)
        if f.name == "name" or (f.name in LOCAL_ONLY and profile.name != "local"):
            continue
        if f.name == "api_key":
            rows.append((key, redact(value), src.get(key, "(none)")))
        elif f.name == "base_url":
            rows.append((key, _fmt(mask_url(value)), src.get(key, "default")))
        else:
            rows.append((key, _fmt(value), src.get(key, "default")))
    return rows


def _ignored_rows(settings: Settings) -> list[tuple[str, str, str]]:
    """What the untrusted project file asked for and did not get."""
    project = settings.project
    if project is None or not project.ignored:
        return []
    source = f"ignored: {project.path} is not trusted (glassloop trust)"
    rows = []
    for key, value in project.ignored.items():
        if value is True and key.startswith(("mcp.", "pricing.")):
            continue  # a table's marker
        if isinstance(value, dict):
            value = "{" + ", ".join(f"{h} = {redact(str(v))}" for h, v in value.items()) + "}"
        elif key.endswith("url"):
            value = mask_url(str(value))
        rows.append((key, _fmt(value), source))
    return rows
