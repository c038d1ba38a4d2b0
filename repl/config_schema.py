"""The configuration schema: which keys exist, their types and limits, and checking.

Every layer (file, environment, flag, runtime change) goes through ``check``, so
a problem is always a one-line ``ConfigError`` naming where the value came from,
the dotted key and what was expected. Standard library only: on the start-up path.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# The documented defaults are 10 kB; tomllib needs about a second per megabyte of keys.
MAX_CONFIG_BYTES = 256_000


class ConfigError(Exception):
    """A bad configuration file or value; the message is one line."""


def read_input(path: Path, required: bool, limit: int = MAX_CONFIG_BYTES) -> bytes | None:
    """The bytes of a configuration input: a regular file of at most ``limit`` bytes.

    A FIFO, device or folder is refused without blocking (opened non-blocking, then
    checked on the open descriptor); a missing optional file is None.
    """
    origin = str(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):  # a path through a file: no such config either
        if required:
            raise ConfigError(f"config error in {origin}: file not found") from None
        return None
    except OSError as exc:
        raise ConfigError(f"config error in {origin}: cannot read ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ConfigError(f"config error in {origin}: cannot read (not a regular file)")
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise ConfigError(f"config error in {origin}: cannot read ({exc.strerror or exc})") from None
    if len(raw) > limit:
        raise ConfigError(f"config error in {origin}: larger than {limit // 1000} kB; not a config file")
    return raw


@dataclass(frozen=True)
class _Field:
    kind: str  # str | url | int | float | bool | enum | list | table (the last two hold strings)
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


_STR, _BOOL, _URL = _Field("str"), _Field("bool"), _Field("url")


def _int(minimum: int = 0) -> _Field:
    return _Field("int", minimum=minimum)


def _num(minimum: float = 0.0) -> _Field:
    return _Field("float", minimum=minimum)


def _enum(*choices: str) -> _Field:
    return _Field("enum", choices)


PROFILE_SCHEMA: dict[str, _Field] = {
    "base_url": _URL, "api_key_env": _STR, "model": _STR,
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
    "cwd": _STR, "url": _URL, "headers": _Field("table"),
    "read_only_tools": _Field("list"), "timeout_s": _num(),
}
MCP_OPTIONAL = ("read_only_tools", "timeout_s")  # present in Settings only when set
SCHEMA: dict[str, Any] = {
    "provider": _STR,
    "approval": _enum("ask", "auto", "read-only"),
    "system_prompt": _STR,
    "show_reasoning": _BOOL,
    "guards": GUARDS_SCHEMA,
    "tools": {"todos_file": _STR, "notes_file": _STR, "files_root": _STR,
              "weather": _enum("open-meteo", "sample"), "trust_project_tools": _BOOL},
    "trace": {"enabled": _BOOL, "dir": _STR, "raw": _BOOL, "raw_max_kb": _int(1)},
    "providers": _Named(PROFILE_SCHEMA),
    "mcp": {"servers": _Named(MCP_SCHEMA)},
    "pricing": _Named(PRICE_SCHEMA, quoted=True),
}
_EXPECTED = {"str": "a string", "url": "an http(s) URL or \"\"", "int": "an integer", "float": "a number",
             "bool": "true or false", "list": "a list of strings",
             "table": "a table of strings"}


def config_error(origin: str, key: str, problem: str) -> ConfigError:
    return ConfigError(f"config error in {origin}: {key}: {problem}")


def printable(text: str) -> str:
    """``text`` with control and bidi characters spelled as escapes: safe on one terminal line."""
    if text.isprintable():
        return text
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return "".join(c if c.isprintable() else named.get(c, f"\\u{ord(c):04x}") for c in text)


def show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return '"' + printable(text) + '"'
    if isinstance(value, int | float):
        return repr(value)
    return {dict: "a table", list: "a list"}.get(type(value), f"a {type(value).__name__}")


def url_problem(url: str) -> str | None:
    """Why ``url`` is not a usable http(s) URL, or None ("" means "not set" and is fine)."""
    if not url:
        return None
    if any(c.isspace() or not c.isprintable() for c in url):
        return "it holds spaces or control characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        return str(exc)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "expected http://HOST... or https://HOST..."
    return None


def check(spec: _Field, value: Any, origin: str, key: str) -> Any:
    """``value`` if it fits ``spec`` (ints widened to float), else ConfigError."""
    kind = spec.kind
    if kind == "url" and isinstance(value, str) and (problem := url_problem(value)):
        raise config_error(origin, key, f"expected {_EXPECTED[kind]}, got {show(value)} ({problem})")
    if kind == "list" and isinstance(value, list):
        return [check(_STR, v, origin, f"{key}[{i}]") for i, v in enumerate(value)]
    if kind == "table" and isinstance(value, dict):
        return {k: check(_STR, v, origin, f"{key}.{k}") for k, v in value.items()}
    number = isinstance(value, int | float) and not isinstance(value, bool)
    ok = {"str": isinstance(value, str), "url": isinstance(value, str), "enum": isinstance(value, str),
          "bool": isinstance(value, bool), "int": number and isinstance(value, int),
          "float": number and math.isfinite(value)}.get(kind, False)
    if not ok or (spec.choices and value not in spec.choices):
        what = "one of " + ", ".join(spec.choices) if spec.choices else _EXPECTED[kind]
        raise config_error(origin, key, f"expected {what}, got {show(value)}")
    if spec.minimum is not None and value < spec.minimum:
        minimum = int(spec.minimum) if kind == "int" else spec.minimum
        raise config_error(origin, key, f"expected {_EXPECTED[kind]} >= {minimum}, got {show(value)}")
    return float(value) if kind == "float" else value


def _unknown(origin: str, key: str, known: list[str]) -> ConfigError:
    import difflib  # only on the error path

    close = difflib.get_close_matches(key.rsplit(".", 1)[-1], known, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    return config_error(origin, key, f"unknown key (expected one of {', '.join(known)}){hint}")


def flatten(table: dict, schema: Any, prefix: str, origin: str, out: dict) -> None:
    """Check ``table`` against ``schema``; put its leaves into ``out`` by dotted key.

    A named table (``providers.NAME``) also gets an entry ``out[prefix+NAME] = True``
    so that a profile with no keys still exists.
    """
    for key, value in table.items():
        dotted = prefix + (quote(key) if isinstance(schema, _Named) and schema.quoted else key)
        if isinstance(schema, _Named):
            if not key or ("." in key and not schema.quoted):
                raise config_error(origin, dotted, "expected a name without dots")
            spec: Any = schema.schema
            out[dotted] = True
        elif key in schema:
            spec = schema[key]
        else:
            raise _unknown(origin, dotted, list(schema))
        if isinstance(spec, _Field):
            out[dotted] = check(spec, value, origin, dotted)
        elif not isinstance(value, dict):
            raise config_error(origin, dotted, f"expected a table, got {show(value)}")
        else:
            flatten(value, spec, dotted + ".", origin, out)


def quote(name: str) -> str:
    """A TOML key: bare when it can be, else a quoted string."""
    bare = all(c.isascii() and (c.isalnum() or c in "_-") for c in name)
    return name if bare and name else json.dumps(name, ensure_ascii=False)


def spec_for(dotted: str) -> _Field:
    node: Any = SCHEMA
    for part in dotted.split("."):
        node = node.schema if isinstance(node, _Named) else node[part]
    return node


# ---- environment and flags ------------------------------------------------------


# "@." keys go to the active profile, known only once the provider is resolved.
ENV_KEYS = {
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


def overrides(env: Mapping[str, str], flags: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
    """(dotted key, raw value, source label) of env then flags; None/"" = not given."""
    found = [(key, env[var], f"env {var}") for var, key in ENV_KEYS.items() if env.get(var)]
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


def coerce(spec: _Field, raw: Any, origin: str, key: str) -> Any:
    """Parse an env/flag string for a numeric field, then check it like a file value."""
    if isinstance(raw, str) and spec.kind in ("int", "float"):
        try:
            raw = int(raw) if spec.kind == "int" else float(raw)
        except ValueError:
            raise config_error(origin, key, f"expected {_EXPECTED[spec.kind]}, got {show(raw)}") from None
    if isinstance(raw, os.PathLike):
        raw = os.fspath(raw)
    return check(spec, raw, origin, key)
