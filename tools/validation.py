"""JSON schema validation, and its violations as sentences a model can act on.

The one place that imports jsonschema (~50 ms: only when first needed, never at
start-up; a schema of the common plain shapes is judged without it, so an MCP
server's tools are vetted without that import). jsonschema reports each violation with its validator and path;
``describe_errors`` turns them into one line that names the field, what it must
be and what came, and lists the parameters so the model can correct the call.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jsonschema


def validator_for(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """A validator for tool arguments (``iter_errors``) against ``schema``."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema)


def check_schema(schema: dict[str, Any]) -> None:
    """Raise ``jsonschema.SchemaError`` unless ``schema`` is a valid draft 2020-12 schema."""
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(schema)


# Keywords whose values are data, not schemas: a "$ref" inside them is not a reference.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` cannot validate tool arguments (one line), or None when it can.

    ``check_schema`` accepts a ``$ref`` that points nowhere; validating against it
    raises later, on a call. So every ``$ref`` must also resolve within the schema
    (nothing is fetched from the network), and a validator built from it must run.
    """
    if isinstance(schema, dict) and _plain(schema):
        return None
    from jsonschema import Draft202012Validator, SchemaError

    if not isinstance(schema, dict):
        return f"the schema is {json_type(schema)}, not an object"
    try:
        Draft202012Validator.check_schema(schema)
        missing = _unresolved_refs(schema)
        if missing:
            return f"$ref {missing[0]!r} does not resolve within the schema"
        list(Draft202012Validator(schema).iter_errors({}))
    except SchemaError as exc:
        return f"invalid schema: {_first_line(exc.message)}"
    except RecursionError:
        return "the schema is nested too deeply"
    except Exception as exc:  # noqa: BLE001 - any failure to validate means the schema is unusable
        return f"the schema cannot be used: {type(exc).__name__}: {_first_line(str(exc))}"
    return None


# The plain shapes: keywords whose values the draft 2020-12 meta-schema only asks a JSON type of.
_SIMPLE_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
_DIALECTS = frozenset({"https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2019-09/schema",
                       "http://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-06/schema#",
                       "http://json-schema.org/draft-04/schema#"})
_TEXT_KEYWORDS = frozenset({"title", "description", "$comment", "format"})
_NUMBER_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_COUNT_KEYWORDS = frozenset({"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"})
_FLAG_KEYWORDS = frozenset({"uniqueItems", "deprecated", "readOnly", "writeOnly"})
_LIST_KEYWORDS = frozenset({"enum", "examples"})
_SUBSCHEMA_KEYWORDS = frozenset({"items", "additionalProperties", "not"})
_SUBSCHEMAS_KEYWORDS = frozenset({"allOf", "anyOf", "oneOf"})
_PLAIN_DEPTH = 16


def _plain(schema: Any, depth: int = 0) -> bool:
    """Whether ``schema`` is valid by its shape alone: only the keywords above (no ``$ref`` to
    resolve, no regex to compile, ``$schema`` a known dialect and only at the top), each value
    of the JSON type the meta-schema asks for. Such a schema passes ``check_schema`` and a
    validator runs on it; False leaves the verdict to jsonschema (never a refusal by itself).
    tests/test_validation.py checks the first against jsonschema on generated schemas."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or depth > _PLAIN_DEPTH:
        return False
    for key, value in schema.items():
        if key in _TEXT_KEYWORDS:
            ok = isinstance(value, str)
        elif key in _NUMBER_KEYWORDS:
            ok = type(value) in (int, float)
        elif key in _COUNT_KEYWORDS:
            ok = type(value) is int and value >= 0
        elif key in _FLAG_KEYWORDS:
            ok = isinstance(value, bool)
        elif key in _LIST_KEYWORDS:
            ok = isinstance(value, list)
        elif key in ("default", "const"):
            ok = True
        elif key == "type":
            ok = (isinstance(value, str) and value in _SIMPLE_TYPES) or (
                isinstance(value, list) and bool(value) and _distinct_texts(value) and set(value) <= _SIMPLE_TYPES)
        elif key == "required":
            ok = isinstance(value, list) and _distinct_texts(value)
        elif key == "properties":
            ok = isinstance(value, dict) and all(_plain(sub, depth + 1) for sub in value.values())
        elif key in _SUBSCHEMA_KEYWORDS:
            ok = _plain(value, depth + 1)
        elif key in _SUBSCHEMAS_KEYWORDS:
            ok = isinstance(value, list) and bool(value) and all(_plain(sub, depth + 1) for sub in value)
        elif key == "$schema":
            ok = depth == 0 and isinstance(value, str) and value in _DIALECTS
        else:
            ok = False
        if not ok:
            return False
    return True


def _distinct_texts(values: list[Any]) -> bool:
    return all(isinstance(v, str) for v in values) and len(set(values)) == len(values)


def _unresolved_refs(schema: dict[str, Any]) -> list[str]:
    from referencing import Registry
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012

    root = DRAFT202012.create_resource(schema)
    missing: list[str] = []

    def walk(node: Any, resolver: Any) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, resolver)
            return
        if not isinstance(node, dict):
            return
        if node is not schema and isinstance(node.get("$id"), str):
            resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
        if isinstance(node.get("$ref"), str):
            try:
                resolver.lookup(node["$ref"])
            except Unresolvable:
                missing.append(node["$ref"])
        for key, value in node.items():
            if key not in _DATA_KEYWORDS:
                walk(value, resolver)

    walk(schema, Registry().with_resource(root.id() or "", root).resolver(root.id() or ""))
    return missing


def _first_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 160 else line[:159] + "…"


_JSON_TYPES = [(bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
               (list, "array"), (dict, "object"), (type(None), "null")]


def json_type(value: Any) -> str:
    return next((label for kind, label in _JSON_TYPES if isinstance(value, kind)), "value")


def _expected(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    kinds = schema.get("type", "any value")
    return " or ".join(kinds) if isinstance(kinds, list) else str(kinds)


def _field(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _error_lines(err: jsonschema.ValidationError, props: dict[str, Any]) -> list[str]:
    if err.validator == "required":
        missing = [k for k in err.validator_value if k not in err.instance]
        where = err.schema.get("properties", props)
        return [f"missing required field {k!r} ({_expected(where.get(k, {}))})" for k in missing]
    if err.validator == "additionalProperties":
        allowed = list(err.schema.get("properties", {}))
        extras = [k for k in err.instance if k not in allowed]
        return [f"unexpected field {k!r} (allowed: {', '.join(allowed) or 'none'})" for k in extras]
    field = _field(err.absolute_path) or "arguments"
    got = json.dumps(err.instance, ensure_ascii=False)
    got = got if len(got) <= 60 else got[:57] + "..."
    if err.validator == "type":
        kind = json_type(err.instance)
        return [f"field {field!r} must be {_expected(err.schema)}, got {kind} {got}"]
    if err.validator == "enum":
        return [f"field {field!r} must be one of {_expected(err.schema)}, got {got}"]
    return [f"field {field!r}: {err.message}"]


def describe_errors(name: str, errors: list[Any], schema: dict[str, Any]) -> str:
    """Schema violations as one sentence the model can act on."""
    props = schema.get("properties", {})
    ordered = sorted(errors, key=lambda e: (e.validator != "required", list(e.absolute_path)))
    lines: list[str] = []
    for err in ordered:
        lines += [line for line in _error_lines(err, props) if line not in lines]
    required = set(schema.get("required", []))
    params = ", ".join(
        f"{k}: {_expected(v)}{' (required)' if k in required else ''}" for k, v in props.items()
    )
    return f"invalid arguments for {name}: {'; '.join(lines[:6])}. Parameters: {params or 'none'}"
