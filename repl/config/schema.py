"""The configuration schema, derived from the dataclasses of ``repl.config.settings``, and checking.

Every layer (file, environment, flag, runtime change) goes through ``check``, so
a problem is always a one-line ``ConfigError`` naming where the value came from,
the dotted key and what was expected. Standard library only: on the start-up path.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import stat
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin
from urllib.parse import urlsplit

from repl.config.settings import Meta, Settings

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
class Spec:
    """How one key is checked, derived from its field in ``repl.config.settings``."""

    # str | url | int | float | bool | enum | list | table (these two hold strings) | rows
    kind: str
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    meta: Meta = Meta()
    name: str = ""  # the field's name
    maximum: float | None = None
    row: type | None = None  # rows: the dataclass each table of the list follows ([[KEY]])


@dataclass(frozen=True)
class _Named:
    """A table of user-named tables, each following ``schema``.

    ``quoted``: names may hold dots (model names); dotted keys then quote them
    the TOML way: ``pricing."gpt-4.1-mini".input``.
    """

    schema: dict[str, Any]
    quoted: bool = False


_STR = Spec("str")
_KINDS: dict[Any, str] = {bool: "bool", int: "int", float: "float", str: "str", Path: "str",
                          list: "list", dict: "table"}


def declared(cls: type) -> list[tuple[dataclasses.Field, Meta]]:
    """The fields of ``cls`` that are settings, in declaration order."""
    return [(f, f.metadata["setting"]) for f in dataclasses.fields(cls) if "setting" in f.metadata]


def _spec(f: dataclasses.Field, meta: Meta) -> Spec:
    hint: Any = f.type
    if get_origin(hint) in (Union, types.UnionType):  # X | None: None is "not set", never written
        hint = next(a for a in get_args(hint) if a is not type(None))
    if get_origin(hint) is Literal:
        return Spec("enum", get_args(hint), meta=meta, name=f.name)
    row = get_args(hint)[0] if get_origin(hint) is list else None
    if isinstance(row, type) and dataclasses.is_dataclass(row):  # a list of tables: [[KEY]]
        return Spec("rows", meta=meta, name=f.name, row=row)
    kind = _KINDS[get_origin(hint) or hint]
    if kind == "str" and meta.url:
        kind = "url"
    minimum = None if kind not in ("int", "float") else (
        int(meta.minimum or 0) if kind == "int" else float(meta.minimum or 0))
    return Spec(kind, minimum=minimum, meta=meta, name=f.name, maximum=meta.maximum)


def _table_of(f: dataclasses.Field, meta: Meta) -> type | None:
    """The dataclass a field is a table of: ``guards`` (one), ``providers.NAME`` (named)."""
    if isinstance(f.type, type) and dataclasses.is_dataclass(f.type):
        return f.type
    args = get_args(f.type)
    table = args[1] if len(args) == 2 else None
    return meta.named or (table if isinstance(table, type) and dataclasses.is_dataclass(table) else None)


def schema_of(cls: type) -> dict[str, Any]:
    """The nested schema of ``cls``'s settings, by dotted key."""
    schema: dict[str, Any] = {}
    for f, meta in declared(cls):
        *path, last = (meta.key or f.name).split(".")
        node = schema
        for part in path:
            node = node.setdefault(part, {})
        table = _table_of(f, meta)
        if table is None:
            node[last] = _spec(f, meta)
        elif dataclasses.is_dataclass(f.type):
            node[last] = schema_of(table)
        else:
            node[last] = _Named(schema_of(table), quoted=meta.quoted)
    return schema


SCHEMA: dict[str, Any] = schema_of(Settings)


_EXPECTED = {"str": "a string", "url": "an http(s) URL or \"\"", "int": "an integer", "float": "a number",
             "bool": "true or false", "list": "a list of strings",
             "table": "a table of strings", "rows": "a list of tables ([[KEY]])"}


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
    kinds: dict[type, str] = {dict: "a table", list: "a list"}
    return kinds.get(type(value), f"a {type(value).__name__}")


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


def check(spec: Spec, value: Any, origin: str, key: str) -> Any:
    """``value`` if it fits ``spec`` (ints widened to float), else ConfigError."""
    kind = spec.kind
    if kind == "url" and isinstance(value, str) and (problem := url_problem(value)):
        raise config_error(origin, key, f"expected {_EXPECTED[kind]}, got {show(value)} ({problem})")
    if kind == "list" and isinstance(value, list):
        return [check(_STR, v, origin, f"{key}[{i}]") for i, v in enumerate(value)]
    if kind == "table" and isinstance(value, dict):
        return {k: check(_STR, v, origin, f"{key}.{k}") for k, v in value.items()}
    if kind == "rows" and isinstance(value, list) and all(isinstance(v, dict) for v in value):
        assert spec.row is not None
        return [_row(spec.row, v, origin, f"{key}[{i}]") for i, v in enumerate(value)]
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
    if spec.maximum is not None and value > spec.maximum:
        expected = f"{_EXPECTED[kind]} <= {spec.maximum:g}"
        raise config_error(origin, key, f"expected {expected}, got {show(value)}")
    return float(value) if kind == "float" else value


def _row(row: type, table: dict[str, Any], origin: str, key: str) -> dict[str, Any]:
    """One table of a list of tables, checked against ``row``'s settings; a key without a default
    must be there, and not empty."""
    fields = {f.name: (f, meta) for f, meta in declared(row)}
    checked: dict[str, Any] = {}
    for name, value in table.items():
        if name not in fields:
            raise _unknown(origin, f"{key}.{name}", list(fields))
        checked[name] = check(_spec(*fields[name]), value, origin, f"{key}.{name}")
    for name, (f, _) in fields.items():
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and not checked.get(name):
            got = ("nothing" if name not in checked else "an empty one" if checked[name] == []
                   else show(checked[name]))
            expected = _EXPECTED[_spec(f, Meta()).kind]
            raise config_error(origin, f"{key}.{name}", f"expected {expected}, got {got}")
    return checked


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
        if isinstance(spec, Spec):
            out[dotted] = check(spec, value, origin, dotted)
        elif not isinstance(value, dict):
            raise config_error(origin, dotted, f"expected a table, got {show(value)}")
        else:
            flatten(value, spec, dotted + ".", origin, out)


def quote(name: str) -> str:
    """A TOML key: bare when it can be, else a quoted string."""
    bare = all(c.isascii() and (c.isalnum() or c in "_-") for c in name)
    return name if bare and name else json.dumps(name, ensure_ascii=False)


_PART = re.compile(r'"(?:[^"\\]|\\.)*"|[^.]+')  # a dotted key's parts, quoted names whole


def spec_at(dotted: str) -> Spec | None:
    """The spec of a dotted key (``pricing."gpt-4.1".input`` too); None for a table, such as
    a named table's own entry (``providers.NAME``), or a key the schema does not have."""
    node: Any = SCHEMA
    for part in _PART.findall(dotted):
        if isinstance(node, _Named):
            node = node.schema  # ``part`` is the table's name
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return None
    return node if isinstance(node, Spec) else None


def spec_for(dotted: str) -> Spec:
    spec = spec_at(dotted)
    if spec is None:
        raise KeyError(dotted)
    return spec


# ---- environment and flags ------------------------------------------------------


def _leaves(node: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Spec]]:
    """(key, spec) of every key the environment or a flag may set, in declaration order;
    a profile's keys as "@.KEY" (the active profile, known once the provider is resolved)."""
    for name, sub in node.items():
        if isinstance(sub, Spec):
            yield prefix + name, sub
        elif isinstance(sub, dict):
            yield from _leaves(sub, f"{prefix}{name}.")
        elif prefix + name == "providers":
            yield from _leaves(sub.schema, "@.")


def _env_and_flags() -> tuple[dict[str, str], dict[str, str]]:
    env, flags = {}, {}
    for key, spec in _leaves(SCHEMA):
        meta = spec.meta
        if meta.env:
            env[meta.env] = key
        if meta.sdk_env:  # the SDK's own variables set the openai profile
            env[meta.sdk_env] = "providers.openai." + key.removeprefix("@.")
        if meta.flag:
            flags[meta.flag] = "providers.local." + key.removeprefix("@.") if meta.local_only else key
    flags["yes"] = "approval"  # --yes: approval = "auto"
    return env, flags


ENV_KEYS, FLAG_KEYS = _env_and_flags()  # variable or flag -> dotted key ("@.KEY": active profile)
# The options of the glassloop command (--yes and the rest are its own): flag name -> spec.
CLI_OPTIONS: dict[str, Spec] = {s.meta.flag: s for _, s in _leaves(SCHEMA) if s.meta.cli}


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
        negated = value is False and name != "yes"  # a bool flag: --no-trace
        found.append((FLAG_KEYS[name], value, f"flag --{'no-' if negated else ''}{name.replace('_', '-')}"))
    return found


def coerce(spec: Spec, raw: Any, origin: str, key: str) -> Any:
    """Parse an env/flag string for a numeric field, then check it like a file value."""
    if isinstance(raw, str) and spec.kind in ("int", "float"):
        try:
            raw = int(raw) if spec.kind == "int" else float(raw)
        except ValueError:
            raise config_error(origin, key, f"expected {_EXPECTED[spec.kind]}, got {show(raw)}") from None
    if isinstance(raw, os.PathLike):
        raw = os.fspath(raw)
    return check(spec, raw, origin, key)
