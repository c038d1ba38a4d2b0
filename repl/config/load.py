"""Layered configuration → a frozen ``Settings`` whose values remember their source.

Layers, lowest first: the packaged ``default_config.toml``, the user file, the
project file ``./glassloop.toml``, ``--config FILE``, the environment, CLI flags.
Every file is checked against one schema (``config_schema``); any problem is a
one-line ``ConfigError`` naming the file (or variable, or flag), the dotted key
and what was expected. The project file comes with the repository it sits in:
what it may set before the user trusts it is decided in ``repl.config.trust``. Only the
standard library and platformdirs are imported here: this module is on the
start-up path.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import platformdirs

from repl.config.project import ProjectTrust
from repl.config.schema import (
    SCHEMA,
    ConfigError,
    check,
    coerce,
    config_error,
    declared,
    flatten,
    overrides,
    read_input,
    show,
    spec_at,
    spec_for,
)
from repl.config.settings import (
    EMBEDDED_PROFILES,
    RUNTIME,
    Limits,
    McpServer,
    Meta,
    ModelPrice,
    ProviderSettings,
    Settings,
)
from repl.config.trust import project_tools, screen

__all__ = ["ConfigError", "Limits", "ModelPrice", "ProviderSettings", "Settings", "load_settings",
           "with_overrides"]

APP = "glassloop"
PROJECT_FILE = "glassloop.toml"
DEFAULT_FILE = Path(__file__).with_name("default_config.toml")


# ---- layers -------------------------------------------------------------------


MAX_KEY_PARTS = 32  # tomllib's time grows with the square of a dotted key's parts
_STRING_OR_COMMENT = re.compile(r'''
      """(?:[^"\\]|\\[\s\S]|"(?!""))*"{3,5}     # multi-line basic string
    | '{3}(?:[^']|'(?!''))*'{3,5}               # multi-line literal string
    | "(?:[^"\\\n]|\\.)*"                       # basic string
    | '[^'\n]*'                                 # literal string
    | \#[^\n]*                                  # comment
''', re.VERBOSE)
_DOTTED_KEY = re.compile(r'(?:[A-Za-z0-9_-]+|"")(?:[ \t]*\.[ \t]*(?:[A-Za-z0-9_-]+|""))+')


def _longest_key(text: str) -> int:
    """The most dots in one dotted key: strings and comments set aside, a key is on one line."""
    if text.count(".") < MAX_KEY_PARTS:
        return 0
    bare = _STRING_OR_COMMENT.sub(lambda m: "" if m.group().startswith("#") else '""', text)
    return max((m.group().count(".") for line in bare.splitlines() if line.count(".") >= MAX_KEY_PARTS
                for m in _DOTTED_KEY.finditer(line)), default=0)


def _parse_toml(path: Path, raw: bytes) -> dict:
    origin = str(path)
    try:
        text = raw.decode("utf-8")
        if _longest_key(text) >= MAX_KEY_PARTS:
            raise ConfigError(f"config error in {origin}: invalid TOML: a key of more than "
                              f"{MAX_KEY_PARTS} dotted parts")
        return tomllib.loads(text)
    except UnicodeDecodeError:
        raise ConfigError(f"config error in {origin}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config error in {origin}: invalid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"config error in {origin}: invalid TOML: nested too deeply") from None


def _file_layers(cwd: Path, config_file: Path | None) -> list[tuple[Path, bool]]:
    layers = [(DEFAULT_FILE, True), (platformdirs.user_config_path(APP) / "config.toml", False)]
    project = cwd / PROJECT_FILE
    if config_file is None:
        return [*layers, (project, False)]
    path = Path(config_file).expanduser()
    path = path if path.is_absolute() else cwd / path
    if os.path.realpath(path) == os.path.realpath(project):  # named explicitly: read once, as --config
        return [*layers, (path, True)]
    return [*layers, (project, False), (path, True)]


def _profile_names(flat: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(k.split(".")[1] for k in flat if k.startswith("providers.")))


def _resolve_provider(flat: dict, sources: dict, env: Mapping[str, str],
                      active: list[tuple[str, Any, str]]) -> tuple[str, bool]:
    name, names = flat["provider"], _profile_names(flat)
    if name == "auto":
        key_var = flat.get("providers.openai.api_key_env", "")
        has_key = bool(key_var and env.get(key_var))
        has_url = (bool(flat.get("base_url") or env.get("OPENAI_BASE_URL"))
                   or any(k == "@.base_url" for k, _, _ in active))
        return ("openai" if has_key or has_url else "local"), True
    if name not in names:
        expected = "auto or one of " + ", ".join(names)
        raise config_error(sources["provider"], "provider", f"expected {expected}, got {show(name)}")
    return name, False


def load_settings(flags: dict | None = None, *, cwd: Path | None = None,
                  env: Mapping[str, str] | None = None,
                  config_file: Path | None = None) -> Settings:
    """Merge every layer into ``Settings``; raises ConfigError (one line) on bad input."""
    cwd = Path.cwd() if cwd is None else Path(cwd)
    env = os.environ if env is None else env
    flat: dict[str, Any] = {}
    sources: dict[str, str] = {}
    whole: tuple[dict[str, Any], dict[str, str]] = ({}, {})  # as if the project file were trusted
    read: list[Path] = []
    project: ProjectTrust | None = None
    later: set[str] = set()  # keys set above the project file
    for path, required in _file_layers(cwd, config_file):
        raw = read_input(path, required)
        if raw is None:
            continue
        layer: dict[str, Any] = {}
        label = "default" if path == DEFAULT_FILE else str(path)
        flatten(_parse_toml(path, raw), SCHEMA, "", label, layer)
        whole[0].update(layer)
        whole[1].update(dict.fromkeys(layer, label))
        if path == cwd / PROJECT_FILE and not required:
            project = screen(path, raw, layer, flat)
        elif project is not None:
            later.update(k for k in layer if not _rows(k))  # a list of tables adds, never replaces
        _add_rows(layer, flat, label)
        flat.update(layer)
        sources.update(dict.fromkeys(layer, label))
        read.append(path)
    given = overrides(env, flags or {})
    settings = _settle(flat, sources, given, env, cwd, tuple(read))
    settings = replace(settings, project_tools=project_tools(cwd, settings.trust_project_tools))
    if project is None or not project.ignored:
        return replace(settings, project=project)
    _settle(*whole, given, env, cwd, tuple(read))  # the file is checked whole, ignored parts too
    later.update(k for k, _, _ in given)
    later.update(f"providers.{settings.provider}.{k[2:]}" for k, _, _ in given if k.startswith("@."))
    later.update(k[2:] for k, _, _ in given if k.startswith("@.") and k[2:] in TOP_LEVEL)
    return replace(settings, project=_without(project, later))


def _rows(key: str) -> bool:
    spec = spec_at(key)
    return spec is not None and spec.kind == "rows"


def _add_rows(layer: dict[str, Any], below: dict[str, Any], label: str) -> None:
    """A layer's lists of tables (``[[hooks.pre_tool_use]]``) come after the lower layers' (each
    table marked with the file it came from); a table a lower layer has is not added again."""
    for key, rows in layer.items():
        if _rows(key):
            earlier = below.get(key, [])
            plain = [{k: v for k, v in row.items() if k != "origin"} for row in earlier]
            layer[key] = [*earlier, *({**row, "origin": label} for row in rows if row not in plain)]


def _settle(flat: dict[str, Any], sources: dict[str, str], given: list[tuple[str, Any, str]],
            env: Mapping[str, str], cwd: Path, read: tuple[Path, ...]) -> Settings:
    """The file layers plus the environment and flags (``given``) → Settings."""
    active = [o for o in given if o[0].startswith("@.")]
    for key, raw, label in [o for o in given if not o[0].startswith("@.")]:
        flat[key], sources[key] = coerce(spec_for(key), raw, label, key), label
    provider, auto = _resolve_provider(flat, sources, env, active)
    _top_level(flat, sources, provider, read)
    for key, raw, label in active:
        key = f"providers.{provider}.{key[2:]}"
        flat[key], sources[key] = coerce(spec_for(key), raw, label, key), label
    return _build(flat, sources, env, cwd, provider, auto, read)


TOP_LEVEL = ("model", "base_url")  # a file's keys for the active profile (``Settings.model``)


def _top_level(flat: dict[str, Any], sources: dict[str, str], provider: str, read: tuple[Path, ...]) -> None:
    """A file's top-level ``model`` and ``base_url`` set the active profile's, unless the profile's
    own key comes from the same or a later layer (a file above, the environment)."""
    rank = {"default": 0, **{str(path): i for i, path in enumerate(read)}}
    for key in TOP_LEVEL:
        profile_key = f"providers.{provider}.{key}"
        if flat.get(key) and rank[sources[key]] > rank.get(sources.get(profile_key, "default"), len(read)):
            flat[profile_key], sources[profile_key] = flat[key], f"{sources[key]}: {key}"


def _without(project: ProjectTrust, keys: set[str]) -> ProjectTrust:
    """``project`` minus risky keys that a later layer sets anyway."""
    if not any(k in keys for k in project.risky):
        return project
    return replace(project, risky={k: v for k, v in project.risky.items() if k not in keys})


# ---- building -----------------------------------------------------------------


def _path(raw: str, meta: Meta, cwd: Path, dirs: dict[str, Path]) -> Path | None:
    """A path setting: relative to ``cwd``, ``~`` expanded; "" as ``meta.empty`` says
    (``("unset",)``: None)."""
    if raw:
        path = Path(raw).expanduser()
        return path if path.is_absolute() else cwd / path
    where, *name = meta.empty
    return None if where == "unset" else cwd if where == "cwd" else dirs[where].joinpath(*name)


def _default(f: dataclasses.Field) -> Any:
    factory: Any = f.default_factory
    return f.default if factory is dataclasses.MISSING else factory()


def _values(cls: type, prefix: str, flat: dict, sources: dict, cwd: Path,
            dirs: dict[str, Path]) -> dict[str, Any]:
    """The values of ``cls``'s keys under ``prefix`` (a table of one dataclass, such as
    ``guards``, built whole); named tables are left to their own builders."""
    values: dict[str, Any] = {}
    for f, meta in declared(cls):
        key = prefix + (meta.key or f.name)
        if isinstance(f.type, type) and dataclasses.is_dataclass(f.type):
            values[f.name] = f.type(**_values(f.type, key + ".", flat, sources, cwd, dirs))
            continue
        spec = spec_at(key)
        if spec is None:  # a named table
            continue
        value = flat[key] if key in flat else _default(f)
        sources.setdefault(key, "default")
        if spec.row is not None:  # a list of tables, from each file that added to it
            value = [spec.row(**row) for row in value]
            origins = dict.fromkeys(row.origin for row in value if row.origin)
            sources[key] = " + ".join(origins) or sources[key]
        if meta.empty:
            path = _path(value, meta, cwd, dirs)
            value = path if f.type is Path else str(path or "")
        values[f.name] = value
    return values


def _profile(name: str, flat: dict, sources: dict, env: Mapping[str, str], cwd: Path,
             dirs: dict[str, Path]) -> ProviderSettings:
    values = _values(ProviderSettings, f"providers.{name}.", flat, sources, cwd, dirs)
    if name in EMBEDDED_PROFILES:  # the embedded server holds n_ctx tokens: the window is that, or less if set so
        window, n_ctx = f"providers.{name}.context_window", f"providers.{name}.n_ctx"
        if sources[window] == "default":
            values["context_window"], sources[window] = values["n_ctx"], sources[n_ctx]
        values["context_window"] = min(values["context_window"], values["n_ctx"])
    key_var = values["api_key_env"]
    api_key = env.get(key_var, "") if key_var else ""
    if api_key:
        sources[f"providers.{name}.api_key"] = f"env {key_var}"
    return ProviderSettings(name=name, api_key=api_key, **values)


def _mcp_servers(flat: dict, sources: dict) -> dict[str, dict[str, Any]]:
    """Each server as a table: every key with a default, the ones without (None) only when set."""
    servers: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(k.split(".")[2] for k in flat if k.startswith("mcp.servers.")):
        prefix, server = f"mcp.servers.{name}.", {}
        for f, _ in declared(McpServer):
            if prefix + f.name in flat:
                server[f.name] = flat[prefix + f.name]
            elif f.default is not None:
                server[f.name] = f.default_factory() if callable(f.default_factory) else f.default
        if not server["command"] and not server["url"]:
            raise config_error(sources[prefix[:-1]], prefix[:-1], "expected a command or a url")
        servers[name] = server
    return servers


def _pricing(flat: dict, sources: dict) -> dict[str, ModelPrice]:
    prices: dict[str, ModelPrice] = {}
    for key in [k for k, v in flat.items() if k.startswith("pricing.") and v is True]:
        quoted = key.removeprefix("pricing.")
        name = json.loads(quoted) if quoted.startswith('"') else quoted
        given = {f.name: flat[f"{key}.{f.name}"] for f, _ in declared(ModelPrice) if f"{key}.{f.name}" in flat}
        if "input" not in given or "output" not in given:
            raise config_error(sources[key], key, "expected input and output prices (cached_input is optional)")
        prices[name] = ModelPrice(**{"cached_input": given["input"], **given})
    return prices


def _build(flat: dict, sources: dict, env: Mapping[str, str], cwd: Path, provider: str,
           auto: bool, read: tuple[Path, ...]) -> Settings:
    dirs = {"data": platformdirs.user_data_path(APP), "state": platformdirs.user_state_path(APP)}
    values = _values(Settings, "", flat, sources, cwd, dirs)
    values.update(
        provider=provider,
        provider_auto=auto,
        providers={n: _profile(n, flat, sources, env, cwd, dirs) for n in _profile_names(flat)},
        mcp_servers=_mcp_servers(flat, sources),
        pricing=_pricing(flat, sources),
        data_dir=dirs["data"],
        state_dir=dirs["state"],
        config_dir=platformdirs.user_config_path(APP),
        sources=sources,
        config_files=read,
    )
    return Settings(**values)


# ---- changing -----------------------------------------------------------------


_PROFILE_KEYS = frozenset(f.name for f, _ in declared(ProviderSettings))
_GUARD_KEYS = frozenset(f.name for f, _ in declared(Limits))
_SETTINGS_KEYS = {f.name: meta.key or f.name for f, meta in declared(Settings)}  # field -> dotted key


def with_overrides(settings: Settings, **changes: Any) -> Settings:
    """A copy with runtime changes (``/provider``, ``/model``, ``/approve`` ...).

    ``provider`` switches first; profile keys (``model``, ``base_url``, ``api`` ...)
    apply to the (new) active profile; guard keys to ``guards``; other Settings
    fields are replaced as given. Bad values raise ConfigError.
    """
    sources, out = dict(settings.sources), settings
    if "provider" in changes:
        name = changes.pop("provider")
        if name not in settings.providers:
            expected = "one of " + ", ".join(settings.providers)
            raise config_error(RUNTIME, "provider", f"expected {expected}, got {show(name)}")
        out, sources["provider"] = replace(out, provider=name, provider_auto=False), RUNTIME
    groups: dict[str, dict[str, Any]] = {"profile": {}, "guards": {}, "settings": {}}
    for key, value in changes.items():
        if key in _PROFILE_KEYS:
            dotted, group = f"providers.{out.provider}.{key}", "profile"
        elif key in _GUARD_KEYS:
            dotted, group = f"guards.{key}", "guards"
        else:
            dotted, group = _SETTINGS_KEYS.get(key, key), "settings"
        spec = spec_at(dotted)
        if spec is not None and not spec.meta.empty:  # a path arrives resolved
            value = check(spec, value, RUNTIME, dotted)
        groups[group][key], sources[dotted] = value, RUNTIME
    providers = dict(out.providers)
    providers[out.provider] = replace(out.active, **groups["profile"])
    guards = replace(out.guards, **groups["guards"])
    return replace(out, providers=providers, guards=guards, sources=sources, **groups["settings"])
