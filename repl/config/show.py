"""``glassloop config``: every effective value as (key, value, source) rows, secrets redacted."""

from __future__ import annotations

import dataclasses
from typing import Any

from repl.config.redact import mask_url
from repl.config.redact import masked_key as redact
from repl.config.schema import declared, printable, quote, spec_at
from repl.config.settings import (
    HookCommand,
    ModelPrice,
    ProviderSettings,
    Settings,
    ToolHookCommand,
)

# A profile's keys about its model: they describe the model the same layer names, not one a later layer chose.
MODEL_KEYS = ("price_input", "price_cached_input", "price_output", "context_window")


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):  # a project file is untrusted: no escape sequence reaches the terminal
        return printable(value) if value else '""'
    return printable(str(value))


def _shown(key: str, value: Any) -> Any:
    """A value as ``glassloop config`` may show it: secrets (MCP env and headers) redacted,
    credentials in URLs masked."""
    spec = spec_at(key)
    if spec is not None and spec.kind == "rows" and isinstance(value, list):
        # a project file's, as read (ignored): tables, not yet hooks
        rows = [spec.row(**row) if isinstance(row, dict) and spec.row else row for row in value]
        return "; ".join(_hook(row) for row in rows if isinstance(row, HookCommand)) or "[]"
    if spec is not None and spec.meta.secret and isinstance(value, dict):
        return "{" + ", ".join(f"{h} = {redact(str(v))}" for h, v in value.items()) + "}"
    if spec is not None and spec.meta.url:
        return mask_url(str(value))
    return value


def _hook(hook: HookCommand) -> str:
    """A hook as one value: its command, the tools it is for, its time."""
    matcher = hook.matcher if isinstance(hook, ToolHookCommand) else ""
    tools = f" for tools {matcher}" if matcher else ""
    return f"{mask_url(hook.said())}{tools} ({hook.timeout_s:g} s)"


def describe(settings: Settings) -> list[tuple[str, str, str]]:
    """(key, value, source) rows of every effective value; secrets redacted."""
    src = settings.sources
    provider = settings.provider + (" (auto)" if settings.provider_auto else "")
    rows = [("provider", provider, src.get("provider", "default"))]
    rows += _profile_rows(settings, settings.active)  # the profile in use first
    rows += _plain_rows(settings, settings, "")
    rows += [("data_dir", str(settings.data_dir), "platformdirs"),
             ("state_dir", str(settings.state_dir), "platformdirs"),
             ("config_dir", str(settings.config_dir), "platformdirs")]
    for profile in settings.providers.values():
        if profile.name != settings.provider:
            rows += _profile_rows(settings, profile)
    for name, price in settings.pricing.items():
        for f, _ in declared(ModelPrice):
            key = f"pricing.{quote(name)}.{f.name}"
            rows.append((key, _fmt(getattr(price, f.name)), src.get(key, "= input")))
    for name, server in settings.mcp_servers.items():
        for k, value in server.items():
            key = f"mcp.servers.{name}.{k}"
            rows.append((key, _fmt(_shown(key, value)), src.get(key, "default")))
    rows += _ignored_rows(settings)
    return [(printable(key), value, printable(source)) for key, value, source in rows]


def _plain_rows(settings: Settings, table: Any, prefix: str) -> list[tuple[str, str, str]]:
    """The rows of ``table``'s keys in declaration order, a table of one dataclass (``guards``)
    in its place; ``provider`` and the named tables have rows of their own."""
    rows = []
    for f, meta in declared(type(table)):
        key, value = prefix + (meta.key or f.name), getattr(table, f.name)
        if dataclasses.is_dataclass(value):
            rows += _plain_rows(settings, value, key + ".")
        elif key != "provider" and spec_at(key) is not None:
            rows.append((key, _fmt(_shown(key, value)), settings.sources.get(key, "default")))
    return rows


def _profile_rows(settings: Settings, profile: ProviderSettings) -> list[tuple[str, str, str]]:
    """A profile's rows, without the keys that do not apply to it (``n_ctx`` for an HTTP one)."""
    src, rows = settings.sources, []
    for f in dataclasses.fields(profile):
        key, value = f"providers.{profile.name}.{f.name}", getattr(profile, f.name)
        meta = f.metadata.get("setting")
        if f.name == "name" or (meta and meta.local_only and not profile.embedded):
            continue
        if f.name == "api_key":
            rows.append((key, redact(value), src.get(key, "(none)")))
        elif f.name in MODEL_KEYS and not settings.of_its_model(profile, (f.name,)):
            rows.append((key, _fmt(value), f"{src.get(key, 'default')} (another model's: not used with "
                                           f"{printable(profile.model)})"))
        else:
            rows.append((key, _fmt(_shown(key, value)), src.get(key, "default")))
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
        rows.append((key, _fmt(_shown(key, value)), source))
    return rows
