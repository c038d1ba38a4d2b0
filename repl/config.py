"""Layered configuration → a frozen ``Settings`` whose values remember their source.

Layers, lowest first: the packaged ``default_config.toml``, the user file, the
project file ``./glassloop.toml``, ``--config FILE``, the environment, CLI flags.
Every file is checked against one schema; any problem is a one-line
``ConfigError`` naming the file (or variable, or flag), the dotted key and what
was expected. Only the standard library and platformdirs are imported here:
this module is on the start-up path.
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import platformdirs

APP = "glassloop"
PROJECT_FILE = "glassloop.toml"
DEFAULT_FILE = Path(__file__).with_name("default_config.toml")
RUNTIME = "runtime"  # source label of with_overrides() changes


class ConfigError(Exception):
    """A bad configuration file or value; the message is one line."""


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
    mcp_servers: dict[str, dict[str, Any]]
    sources: dict[str, str]  # dotted key -> "default" | file path | "env X" | "flag --x"
    config_files: tuple[Path, ...] = ()  # files read, lowest layer first
    pricing: dict[str, ModelPrice] = field(default_factory=dict)  # by model name

    @property
    def active(self) -> ProviderSettings:
        return self.providers[self.provider]


# ---- schema -------------------------------------------------------------------


@dataclass(frozen=True)
class _Field:
    kind: str  # str | int | float | bool | enum | list | table (the last two hold strings)
    choices: tuple[str, ...] = ()
    minimum: float | None = None


@dataclass(frozen=True)
class _Named:
    """A table of user-named tables, each following ``schema``.

    ``quoted``: names may hold dots (model names); dotted keys then quote them
    the TOML way: ``pricing."gpt-4.1-mini".input``.
    """

    schema: dict[str, _Field]
    quoted: bool = False


_STR, _BOOL = _Field("str"), _Field("bool")


def _int(minimum: int = 0) -> _Field:
    return _Field("int", minimum=minimum)


def _num(minimum: float = 0.0) -> _Field:
    return _Field("float", minimum=minimum)


def _enum(*choices: str) -> _Field:
    return _Field("enum", choices)


PROFILE_SCHEMA: dict[str, _Field] = {
    "base_url": _STR, "api_key_env": _STR, "model": _STR,
    "api": _enum("chat", "responses"), "tool_call_format": _enum("native", "text"),
    "temperature": _num(), "max_tokens": _int(1), "context_window": _int(1),
    "timeout_s": _num(), "max_retries": _int(0), "price_input": _num(),
    "price_cached_input": _num(), "price_output": _num(),
    "model_path": _STR, "n_ctx": _int(1), "threads": _int(0),
}
GUARDS_SCHEMA: dict[str, _Field] = {
    "max_steps": _int(1), "max_turn_tokens": _int(1), "repeat_limit": _int(1),
    "turn_timeout_s": _num(), "tool_timeout_s": _num(), "max_tool_result_chars": _int(1),
    "session_budget_usd": _num(), "session_budget_tokens": _int(0),
}
PRICE_SCHEMA: dict[str, _Field] = {"input": _num(), "cached_input": _num(), "output": _num()}
MCP_SCHEMA: dict[str, _Field] = {
    "command": _STR, "args": _Field("list"), "env": _Field("table"),
    "cwd": _STR, "url": _STR, "headers": _Field("table"),
    "read_only_tools": _Field("list"), "timeout_s": _num(),
}
_MCP_OPTIONAL = ("read_only_tools", "timeout_s")  # present in Settings only when set
SCHEMA: dict[str, Any] = {
    "provider": _STR,
    "approval": _enum("ask", "auto", "read-only"),
    "system_prompt": _STR,
    "guards": GUARDS_SCHEMA,
    "tools": {"todos_file": _STR, "notes_file": _STR, "files_root": _STR,
              "weather": _enum("open-meteo", "sample")},
    "trace": {"enabled": _BOOL, "dir": _STR},
    "providers": _Named(PROFILE_SCHEMA),
    "mcp": {"servers": _Named(MCP_SCHEMA)},
    "pricing": _Named(PRICE_SCHEMA, quoted=True),
}
_EXPECTED = {"str": "a string", "int": "an integer", "float": "a number",
             "bool": "true or false", "list": "a list of strings",
             "table": "a table of strings"}
_PROFILE_FALLBACK = {f.name: f.default for f in fields(ProviderSettings)}


def _error(origin: str, key: str, problem: str) -> ConfigError:
    return ConfigError(f"config error in {origin}: {key}: {problem}")


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return '"' + text.replace("\n", "\\n").replace("\r", "\\r") + '"'
    if isinstance(value, int | float):
        return repr(value)
    return {dict: "a table", list: "a list"}.get(type(value), f"a {type(value).__name__}")


def _check(spec: _Field, value: Any, origin: str, key: str) -> Any:
    """``value`` if it fits ``spec`` (ints widened to float), else ConfigError."""
    kind = spec.kind
    if kind == "list" and isinstance(value, list):
        return [_check(_STR, v, origin, f"{key}[{i}]") for i, v in enumerate(value)]
    if kind == "table" and isinstance(value, dict):
        return {k: _check(_STR, v, origin, f"{key}.{k}") for k, v in value.items()}
    number = isinstance(value, int | float) and not isinstance(value, bool)
    ok = {"str": isinstance(value, str), "enum": isinstance(value, str),
          "bool": isinstance(value, bool), "int": number and isinstance(value, int),
          "float": number and math.isfinite(value)}.get(kind, False)
    if not ok or (spec.choices and value not in spec.choices):
        what = "one of " + ", ".join(spec.choices) if spec.choices else _EXPECTED[kind]
        raise _error(origin, key, f"expected {what}, got {_show(value)}")
    if spec.minimum is not None and value < spec.minimum:
        minimum = int(spec.minimum) if kind == "int" else spec.minimum
        raise _error(origin, key, f"expected {_EXPECTED[kind]} >= {minimum}, got {_show(value)}")
    return float(value) if kind == "float" else value


def _unknown(origin: str, key: str, known: list[str]) -> ConfigError:
    import difflib  # only on the error path

    close = difflib.get_close_matches(key.rsplit(".", 1)[-1], known, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    return _error(origin, key, f"unknown key (expected one of {', '.join(known)}){hint}")


def _flatten(table: dict, schema: Any, prefix: str, origin: str, out: dict) -> None:
    """Check ``table`` against ``schema``; put its leaves into ``out`` by dotted key.

    A named table (``providers.NAME``) also gets an entry ``out[prefix+NAME] = True``
    so that a profile with no keys still exists.
    """
    for key, value in table.items():
        dotted = prefix + (_quote(key) if isinstance(schema, _Named) and schema.quoted else key)
        if isinstance(schema, _Named):
            if not key or ("." in key and not schema.quoted):
                raise _error(origin, dotted, "expected a name without dots")
            spec: Any = schema.schema
            out[dotted] = True
        elif key in schema:
            spec = schema[key]
        else:
            raise _unknown(origin, dotted, list(schema))
        if isinstance(spec, _Field):
            out[dotted] = _check(spec, value, origin, dotted)
        elif not isinstance(value, dict):
            raise _error(origin, dotted, f"expected a table, got {_show(value)}")
        else:
            _flatten(value, spec, dotted + ".", origin, out)


def _quote(name: str) -> str:
    """A TOML key: bare when it can be, else a quoted string."""
    bare = all(c.isascii() and (c.isalnum() or c in "_-") for c in name)
    return name if bare and name else json.dumps(name, ensure_ascii=False)


def _spec_for(dotted: str) -> _Field:
    node: Any = SCHEMA
    for part in dotted.split("."):
        node = node.schema if isinstance(node, _Named) else node[part]
    return node


# ---- layers -------------------------------------------------------------------


def _read_toml(path: Path, required: bool) -> dict | None:
    origin = str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if required:
            raise ConfigError(f"config error in {origin}: file not found") from None
        return None
    except OSError as exc:
        raise ConfigError(f"config error in {origin}: cannot read ({exc.strerror or exc})") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"config error in {origin}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config error in {origin}: invalid TOML: {exc}") from None


def _file_layers(cwd: Path, config_file: Path | None) -> list[tuple[Path, bool]]:
    layers = [(DEFAULT_FILE, True), (platformdirs.user_config_path(APP) / "config.toml", False),
              (cwd / PROJECT_FILE, False)]
    if config_file is not None:
        path = Path(config_file).expanduser()
        layers.append((path if path.is_absolute() else cwd / path, True))
    return layers


# "@." keys go to the active profile, known only once the provider is resolved.
_ENV_KEYS = {
    "OPENAI_BASE_URL": "providers.openai.base_url", "OPENAI_MODEL": "providers.openai.model",
    "GLASSLOOP_PROVIDER": "provider", "GLASSLOOP_MODEL": "@.model",
    "GLASSLOOP_BASE_URL": "@.base_url", "GLASSLOOP_API": "@.api",
    "GLASSLOOP_APPROVAL": "approval", "GLASSLOOP_MAX_STEPS": "guards.max_steps",
    "GLASSLOOP_TODOS_FILE": "tools.todos_file", "GLASSLOOP_NOTES_FILE": "tools.notes_file",
    "GLASSLOOP_FILES_ROOT": "tools.files_root", "GLASSLOOP_WEATHER": "tools.weather",
}
FLAG_KEYS = {
    "provider": "provider", "model": "@.model", "base_url": "@.base_url", "api": "@.api",
    "approval": "approval", "yes": "approval", "max_steps": "guards.max_steps",
    "todos_file": "tools.todos_file", "notes_file": "tools.notes_file",
    "files_root": "tools.files_root", "weather": "tools.weather",
    "system_prompt": "system_prompt", "trace": "trace.enabled", "trace_dir": "trace.dir",
    "model_path": "providers.local.model_path",
}


def _overrides(env: Mapping[str, str], flags: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
    """(dotted key, raw value, source label) of env then flags; None/"" = not given."""
    found = [(key, env[var], f"env {var}") for var, key in _ENV_KEYS.items() if env.get(var)]
    for name, value in sorted(flags.items(), key=lambda item: item[0] == "yes"):  # --yes wins
        if name not in FLAG_KEYS:
            raise ValueError(f"unknown config flag {name!r} (known: {', '.join(FLAG_KEYS)})")
        if value is None or (name == "yes" and not value):
            continue
        if name == "yes":
            value = "auto"
        if name == "trace":
            found.append((FLAG_KEYS[name], value, "flag --trace" if value else "flag --no-trace"))
        else:
            found.append((FLAG_KEYS[name], value, "flag --" + name.replace("_", "-")))
    return found


def _coerce(spec: _Field, raw: Any, origin: str, key: str) -> Any:
    """Parse an env/flag string for a numeric field, then check it like a file value."""
    if isinstance(raw, str) and spec.kind in ("int", "float"):
        try:
            raw = int(raw) if spec.kind == "int" else float(raw)
        except ValueError:
            raise _error(origin, key, f"expected {_EXPECTED[spec.kind]}, got {_show(raw)}") from None
    if isinstance(raw, os.PathLike):
        raw = os.fspath(raw)
    return _check(spec, raw, origin, key)


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
        raise _error(sources["provider"], "provider", f"expected {expected}, got {_show(name)}")
    return name, False


def load_settings(flags: dict | None = None, *, cwd: Path | None = None,
                  env: Mapping[str, str] | None = None,
                  config_file: Path | None = None) -> Settings:
    """Merge every layer into ``Settings``; raises ConfigError (one line) on bad input."""
    cwd = Path.cwd() if cwd is None else Path(cwd)
    env = os.environ if env is None else env
    flat: dict[str, Any] = {}
    sources: dict[str, str] = {}
    read: list[Path] = []
    for path, required in _file_layers(cwd, config_file):
        data = _read_toml(path, required)
        if data is None:
            continue
        layer: dict[str, Any] = {}
        label = "default" if path == DEFAULT_FILE else str(path)
        _flatten(data, SCHEMA, "", label, layer)
        flat.update(layer)
        sources.update(dict.fromkeys(layer, label))
        read.append(path)
    given = _overrides(env, flags or {})
    active = [o for o in given if o[0].startswith("@.")]
    for key, raw, label in [o for o in given if not o[0].startswith("@.")]:
        flat[key], sources[key] = _coerce(_spec_for(key), raw, label, key), label
    provider, auto = _resolve_provider(flat, sources, env, active)
    for key, raw, label in active:
        key = f"providers.{provider}.{key[2:]}"
        flat[key], sources[key] = _coerce(_spec_for(key), raw, label, key), label
    return _build(flat, sources, env, cwd, provider, auto, tuple(read))


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


def _mcp_servers(flat: dict) -> dict[str, dict[str, Any]]:
    servers: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(k.split(".")[2] for k in flat if k.startswith("mcp.servers.")):
        empty: dict[str, Any] = {"command": "", "args": [], "env": {}, "cwd": "", "url": "",
                                 "headers": {}}
        servers[name] = {k: flat.get(f"mcp.servers.{name}.{k}", v) for k, v in empty.items()}
        servers[name].update({k: flat[f"mcp.servers.{name}.{k}"] for k in _MCP_OPTIONAL
                              if f"mcp.servers.{name}.{k}" in flat})
    return servers


def _pricing(flat: dict, sources: dict) -> dict[str, ModelPrice]:
    prices: dict[str, ModelPrice] = {}
    for key in [k for k, v in flat.items() if k.startswith("pricing.") and v is True]:
        quoted = key.removeprefix("pricing.")
        name = json.loads(quoted) if quoted.startswith('"') else quoted
        given = {f: flat[f"{key}.{f}"] for f in PRICE_SCHEMA if f"{key}.{f}" in flat}
        if "input" not in given or "output" not in given:
            raise _error(sources[key], key, "expected input and output prices (cached_input is optional)")
        prices[name] = ModelPrice(given["input"], given.get("cached_input", given["input"]), given["output"])
    return prices


def _build(flat: dict, sources: dict, env: Mapping[str, str], cwd: Path, provider: str,
           auto: bool, read: tuple[Path, ...]) -> Settings:
    data_dir, state_dir = platformdirs.user_data_path(APP), platformdirs.user_state_path(APP)
    servers = _mcp_servers(flat)
    for name, server in servers.items():
        if not server["command"] and not server["url"]:
            raise _error(sources[f"mcp.servers.{name}"], f"mcp.servers.{name}",
                         "expected a command or a url")
    return Settings(
        provider=provider,
        provider_auto=auto,
        providers={n: _profile(n, flat, sources, env, cwd) for n in _profile_names(flat)},
        approval=flat["approval"],
        system_prompt=flat["system_prompt"],
        guards=Guards(**{k: flat[f"guards.{k}"] for k in GUARDS_SCHEMA}),
        todos_file=_path(flat["tools.todos_file"], cwd, data_dir / "todos.json"),
        notes_file=_path(flat["tools.notes_file"], cwd, data_dir / "notes.json"),
        files_root=_path(flat["tools.files_root"], cwd, cwd),
        weather=flat["tools.weather"],
        trace_enabled=flat["trace.enabled"],
        trace_dir=_path(flat["trace.dir"], cwd, state_dir / "traces"),
        data_dir=data_dir,
        state_dir=state_dir,
        mcp_servers=servers,
        sources=sources,
        config_files=read,
        pricing=_pricing(flat, sources),
    )


# ---- showing and changing -----------------------------------------------------


def redact(secret: str) -> str:
    """``sk-…abcd`` (never more than the last 4 characters), or (set) / (not set)."""
    if not secret:
        return "(not set)"
    if len(secret) < 12:
        return "(set)"
    return ("sk-" if secret.startswith("sk-") else "") + "…" + secret[-4:]


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else '""'
    return str(value)


def describe(settings: Settings) -> list[tuple[str, str, str]]:
    """(key, value, source) rows of every effective value; secrets redacted."""
    src = settings.sources
    provider = settings.provider + (" (auto)" if settings.provider_auto else "")
    rows = [("provider", provider, src.get("provider", "default"))]
    plain = {"approval": settings.approval, "system_prompt": settings.system_prompt,
             **{f"guards.{k}": getattr(settings.guards, k) for k in GUARDS_SCHEMA},
             "tools.todos_file": settings.todos_file, "tools.notes_file": settings.notes_file,
             "tools.files_root": settings.files_root, "tools.weather": settings.weather,
             "trace.enabled": settings.trace_enabled, "trace.dir": settings.trace_dir}
    rows += [(k, _fmt(v), src.get(k, "default")) for k, v in plain.items()]
    rows += [("data_dir", str(settings.data_dir), "platformdirs"),
             ("state_dir", str(settings.state_dir), "platformdirs")]
    for name, profile in settings.providers.items():
        for f in fields(profile):
            key, value = f"providers.{name}.{f.name}", getattr(profile, f.name)
            if f.name == "api_key":
                rows.append((key, redact(value), src.get(key, "(none)")))
            elif f.name != "name":
                rows.append((key, _fmt(value), src.get(key, "default")))
    for name, price in settings.pricing.items():
        for f in PRICE_SCHEMA:
            key = f"pricing.{_quote(name)}.{f}"
            rows.append((key, _fmt(getattr(price, f)), src.get(key, "= input")))
    for name, server in settings.mcp_servers.items():
        for k, value in server.items():
            key = f"mcp.servers.{name}.{k}"
            if isinstance(value, dict):  # env / headers often hold tokens
                value = "{" + ", ".join(f"{h} = {redact(str(v))}" for h, v in value.items()) + "}"
            rows.append((key, _fmt(value), src.get(key, "default")))
    return rows


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
            raise _error(RUNTIME, "provider", f"expected {expected}, got {_show(name)}")
        out, sources["provider"] = replace(out, provider=name, provider_auto=False), RUNTIME
    groups: dict[str, dict[str, Any]] = {"profile": {}, "guards": {}, "settings": {}}
    for key, value in changes.items():
        if key in PROFILE_SCHEMA:
            dotted, group = f"providers.{out.provider}.{key}", "profile"
            value = _check(PROFILE_SCHEMA[key], value, RUNTIME, dotted)
        elif key in GUARDS_SCHEMA:
            dotted, group = f"guards.{key}", "guards"
            value = _check(GUARDS_SCHEMA[key], value, RUNTIME, dotted)
        else:
            dotted, group = _SETTINGS_KEYS.get(key, key), "settings"
            if key in _SETTINGS_KEYS:
                value = _check(_spec_for(dotted), value, RUNTIME, dotted)
        groups[group][key], sources[dotted] = value, RUNTIME
    providers = dict(out.providers)
    providers[out.provider] = replace(out.active, **groups["profile"])
    guards = replace(out.guards, **groups["guards"])
    return replace(out, providers=providers, guards=guards, sources=sources, **groups["settings"])
