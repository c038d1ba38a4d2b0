"""Layered configuration → a frozen ``Settings`` whose values remember their source.

Layers, lowest first: the packaged ``default_config.toml``, the user file, the
project file ``./glassloop.toml``, ``--config FILE``, the environment, CLI flags.
Every file is checked against one schema (``config_schema``); any problem is a
one-line ``ConfigError`` naming the file (or variable, or flag), the dotted key
and what was expected. The project file comes with the repository it sits in:
what it may set before the user trusts it is decided in ``repl.trust``. Only the
standard library and platformdirs are imported here: this module is on the
start-up path.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import platformdirs

from repl.config_schema import (
    GUARDS_SCHEMA,
    MCP_OPTIONAL,
    PRICE_SCHEMA,
    PROFILE_SCHEMA,
    SCHEMA,
    ConfigError,
    check,
    coerce,
    config_error,
    flatten,
    overrides,
    read_input,
    show,
    spec_for,
)
from repl.config_show import describe as describe  # re-exported for callers of repl.config
from repl.config_show import redact as redact
from repl.trust import ProjectTrust, ToolsTrust, project_tools, screen

APP = "glassloop"
PROJECT_FILE = "glassloop.toml"
DEFAULT_FILE = Path(__file__).with_name("default_config.toml")
RUNTIME = "runtime"  # source label of with_overrides() changes


@dataclass(frozen=True)
class ProviderSettings:
    """One endpoint profile. The defaults are the fallbacks for missing keys."""

    name: str
    base_url: str = ""
    api_key_env: str = ""
    api_key: str = field(default="", repr=False)  # resolved from the environment
    model: str = ""
    api: str = "chat"
    tool_call_format: str = "native"
    temperature: float = 0.2
    max_tokens: int = 2048
    context_window: int = 32768
    timeout_s: float = 60.0
    max_retries: int = 2
    price_input: float = 0.0  # USD per million tokens; 0 = unknown
    price_cached_input: float = 0.0
    price_output: float = 0.0
    model_path: str = ""  # local only; "" = the bundled model
    n_ctx: int = 4096
    threads: int = 0  # 0 = auto


@dataclass(frozen=True)
class Guards:
    max_steps: int = 8
    max_turn_tokens: int = 60000
    repeat_limit: int = 3
    turn_timeout_s: float = 300.0
    tool_timeout_s: float = 30.0
    max_tool_result_chars: int = 8000
    session_budget_usd: float = 0.0  # 0 = no budget
    session_budget_tokens: int = 0


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens (``[pricing."MODEL"]``)."""

    input: float
    cached_input: float
    output: float


@dataclass(frozen=True)
class Settings:
    provider: str  # resolved, never "auto"
    provider_auto: bool  # True when "auto" chose it
    providers: dict[str, ProviderSettings]
    approval: str
    system_prompt: str
    guards: Guards
    todos_file: Path
    notes_file: Path
    files_root: Path
    weather: str
    trace_enabled: bool
    trace_dir: Path
    data_dir: Path
    state_dir: Path
    config_dir: Path  # the user's: config.toml, trusted.json, tools/
    trust_project_tools: bool
    mcp_servers: dict[str, dict[str, Any]]
    sources: dict[str, str]  # dotted key -> "default" | file path | "env X" | "flag --x"
    config_files: tuple[Path, ...] = ()  # files read, lowest layer first
    pricing: dict[str, ModelPrice] = field(default_factory=dict)  # by model name
    show_reasoning: bool = True  # a reasoning model's thinking, dimmed (/reasoning on|off)
    trace_raw: bool = True  # keep each model call's request and response bodies beside the trace
    trace_raw_max_kb: int = 2048  # at most this much of them per session, the oldest dropped first
    project: ProjectTrust | None = None  # ./glassloop.toml as read, and what it was not allowed to set
    project_tools: ToolsTrust | None = None  # ./.glassloop/tools when it holds tool files
    tool_files: tuple[Path, ...] = ()  # --tools FILE

    @property
    def active(self) -> ProviderSettings:
        return self.providers[self.provider]


_PROFILE_FALLBACK = {f.name: f.default for f in fields(ProviderSettings)}


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
        has_url = bool(env.get("OPENAI_BASE_URL")) or any(k == "@.base_url" for k, _, _ in active)
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
            later.update(layer)
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
    return replace(settings, project=_without(project, later))


def _settle(flat: dict[str, Any], sources: dict[str, str], given: list[tuple[str, Any, str]],
            env: Mapping[str, str], cwd: Path, read: tuple[Path, ...]) -> Settings:
    """The file layers plus the environment and flags (``given``) → Settings."""
    active = [o for o in given if o[0].startswith("@.")]
    for key, raw, label in [o for o in given if not o[0].startswith("@.")]:
        flat[key], sources[key] = coerce(spec_for(key), raw, label, key), label
    provider, auto = _resolve_provider(flat, sources, env, active)
    for key, raw, label in active:
        key = f"providers.{provider}.{key[2:]}"
        flat[key], sources[key] = coerce(spec_for(key), raw, label, key), label
    return _build(flat, sources, env, cwd, provider, auto, read)


def _without(project: ProjectTrust, keys: set[str]) -> ProjectTrust:
    """``project`` minus risky keys that a later layer sets anyway."""
    if not any(k in keys for k in project.risky):
        return project
    return replace(project, risky={k: v for k, v in project.risky.items() if k not in keys})


# ---- building -----------------------------------------------------------------


def _path(raw: str, cwd: Path, empty: Path) -> Path:
    if not raw:
        return empty
    path = Path(raw).expanduser()
    return path if path.is_absolute() else cwd / path


def _profile(name: str, flat: dict, sources: dict, env: Mapping[str, str],
             cwd: Path) -> ProviderSettings:
    values: dict[str, Any] = {}
    for key in PROFILE_SCHEMA:
        dotted = f"providers.{name}.{key}"
        values[key] = flat.get(dotted, _PROFILE_FALLBACK[key])
        sources.setdefault(dotted, "default")
    if values["model_path"]:
        values["model_path"] = str(_path(values["model_path"], cwd, Path()))
    key_var = values["api_key_env"]
    api_key = env.get(key_var, "") if key_var else ""
    if api_key:
        sources[f"providers.{name}.api_key"] = f"env {key_var}"
    return ProviderSettings(name=name, api_key=api_key, **values)


def _mcp_servers(flat: dict, sources: dict) -> dict[str, dict[str, Any]]:
    servers: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(k.split(".")[2] for k in flat if k.startswith("mcp.servers.")):
        empty: dict[str, Any] = {"command": "", "args": [], "env": {}, "cwd": "", "url": "",
                                 "headers": {}}
        servers[name] = {k: flat.get(f"mcp.servers.{name}.{k}", v) for k, v in empty.items()}
        servers[name].update({k: flat[f"mcp.servers.{name}.{k}"] for k in MCP_OPTIONAL
                              if f"mcp.servers.{name}.{k}" in flat})
        if not servers[name]["command"] and not servers[name]["url"]:
            raise config_error(sources[f"mcp.servers.{name}"], f"mcp.servers.{name}",
                               "expected a command or a url")
    return servers


def _pricing(flat: dict, sources: dict) -> dict[str, ModelPrice]:
    prices: dict[str, ModelPrice] = {}
    for key in [k for k, v in flat.items() if k.startswith("pricing.") and v is True]:
        quoted = key.removeprefix("pricing.")
        name = json.loads(quoted) if quoted.startswith('"') else quoted
        given = {f: flat[f"{key}.{f}"] for f in PRICE_SCHEMA if f"{key}.{f}" in flat}
        if "input" not in given or "output" not in given:
            raise config_error(sources[key], key, "expected input and output prices (cached_input is optional)")
        prices[name] = ModelPrice(given["input"], given.get("cached_input", given["input"]), given["output"])
    return prices


def _build(flat: dict, sources: dict, env: Mapping[str, str], cwd: Path, provider: str,
           auto: bool, read: tuple[Path, ...]) -> Settings:
    data_dir, state_dir = platformdirs.user_data_path(APP), platformdirs.user_state_path(APP)
    servers = _mcp_servers(flat, sources)
    return Settings(
        provider=provider,
        provider_auto=auto,
        providers={n: _profile(n, flat, sources, env, cwd) for n in _profile_names(flat)},
        approval=flat["approval"],
        system_prompt=flat["system_prompt"],
        show_reasoning=flat["show_reasoning"],
        guards=Guards(**{k: flat[f"guards.{k}"] for k in GUARDS_SCHEMA}),
        todos_file=_path(flat["tools.todos_file"], cwd, data_dir / "todos.json"),
        notes_file=_path(flat["tools.notes_file"], cwd, data_dir / "notes.json"),
        files_root=_path(flat["tools.files_root"], cwd, cwd),
        weather=flat["tools.weather"],
        trace_enabled=flat["trace.enabled"],
        trace_dir=_path(flat["trace.dir"], cwd, state_dir / "traces"),
        trace_raw=flat["trace.raw"],
        trace_raw_max_kb=flat["trace.raw_max_kb"],
        data_dir=data_dir,
        state_dir=state_dir,
        config_dir=platformdirs.user_config_path(APP),
        trust_project_tools=flat["tools.trust_project_tools"],
        mcp_servers=servers,
        sources=sources,
        config_files=read,
        pricing=_pricing(flat, sources),
    )


# ---- changing -----------------------------------------------------------------


_SETTINGS_KEYS = {"approval": "approval", "system_prompt": "system_prompt",
                  "weather": "tools.weather", "trace_enabled": "trace.enabled"}


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
        if key in PROFILE_SCHEMA:
            dotted, group = f"providers.{out.provider}.{key}", "profile"
            value = check(PROFILE_SCHEMA[key], value, RUNTIME, dotted)
        elif key in GUARDS_SCHEMA:
            dotted, group = f"guards.{key}", "guards"
            value = check(GUARDS_SCHEMA[key], value, RUNTIME, dotted)
        else:
            dotted, group = _SETTINGS_KEYS.get(key, key), "settings"
            if key in _SETTINGS_KEYS:
                value = check(spec_for(dotted), value, RUNTIME, dotted)
        groups[group][key], sources[dotted] = value, RUNTIME
    providers = dict(out.providers)
    providers[out.provider] = replace(out.active, **groups["profile"])
    guards = replace(out.guards, **groups["guards"])
    return replace(out, providers=providers, guards=guards, sources=sources, **groups["settings"])
