"""Schema verdicts: the plain shapes judged without jsonschema give jsonschema's verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from tests.support import ROOT
from tools.validation import schema_problem

TYPES = ["array", "boolean", "integer", "null", "number", "object", "string"]
DIALECTS = ["https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft-07/schema#"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6)


def _keyword_values(schemas: st.SearchStrategy[Any]) -> dict[str, st.SearchStrategy[Any]]:
    """Each keyword with values of its meta-schema type (and near misses); any JSON value may come instead."""
    text, number = st.text(max_size=3), st.integers(-5, 5) | st.floats(allow_nan=False)
    return {
        "type": st.sampled_from(TYPES + ["bogus"]) | st.lists(st.sampled_from(TYPES + ["bogus"]), max_size=3),
        "properties": st.dictionaries(text, schemas, max_size=3),
        "required": st.lists(st.sampled_from(["a", "b", "c"]), max_size=3),
        "items": schemas, "additionalProperties": schemas, "not": schemas,
        "anyOf": st.lists(schemas, max_size=3), "oneOf": st.lists(schemas, max_size=2),
        "allOf": st.lists(schemas, max_size=2),
        "enum": st.lists(json_values, max_size=3), "examples": st.lists(json_values, max_size=2),
        "const": json_values, "default": json_values,
        "description": text, "title": text, "format": text, "$comment": text,
        "minimum": number, "maximum": number, "exclusiveMinimum": number, "exclusiveMaximum": number,
        "minLength": number, "maxItems": number, "minProperties": number,
        "uniqueItems": st.booleans(), "deprecated": st.booleans(), "readOnly": st.booleans(),
        "$schema": st.sampled_from(DIALECTS + ["not a uri", "https://example.com/x"]),
        "pattern": st.sampled_from(["^a+$", "("]), "multipleOf": number, "x-vendor": json_values,
    }


def _objects(schemas: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    values = _keyword_values(schemas)
    return st.lists(st.sampled_from(sorted(values)), max_size=5, unique=True).flatmap(
        lambda keys: st.fixed_dictionaries({k: values[k] | json_values for k in keys}))


subschemas = st.deferred(lambda: st.booleans() | _objects(subschemas))
top_schemas = _objects(subschemas)


def _jsonschema_accepts(schema: dict[str, Any]) -> bool:
    try:
        Draft202012Validator.check_schema(schema)
        list(Draft202012Validator(schema).iter_errors({}))
    except Exception:  # noqa: BLE001 - any failure is a refusal, as in schema_problem
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(top_schemas)
def test_the_verdict_is_jsonschemas(schema: dict[str, Any]) -> None:
    assert (schema_problem(schema) is None) == _jsonschema_accepts(schema), schema


MCP_SHAPES = [  # as MCP servers list them: zod (Node) and pydantic (Python) output
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
     "properties": {"message": {"type": "string", "description": "Message to echo"}}, "required": ["message"]},
    {"type": "object", "properties": {"a": {"type": "number", "minimum": 0, "maximum": 10, "default": 1},
                                      "mode": {"type": "string", "enum": ["x", "y"], "format": "uri"}}},
    {"type": "object", "properties": {"numbers": {"items": {"type": "number"}, "title": "Numbers", "type": "array"},
                                      "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}},
     "required": ["numbers"], "additionalProperties": False},
]


def test_common_mcp_shapes_are_judged_without_importing_jsonschema() -> None:
    """jsonschema's import (~50 ms) competed with the provider SDK's for the GIL while `ask`
    registered an MCP server's tools."""
    code = ("import json, sys\nfrom tools.validation import schema_problem\n"
            f"problems = [schema_problem(s) for s in json.loads({json.dumps(MCP_SHAPES)!r})]\n"
            "print(json.dumps([problems, 'jsonschema' in sys.modules]))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    problems, imported = json.loads(done.stdout)
    assert problems == [None, None, None]
    assert imported is False


def test_a_broken_schema_is_still_refused() -> None:
    assert schema_problem({"type": "object", "properties": {"x": {"$ref": "#/$defs/nowhere"}}}) is not None
    assert schema_problem({"type": "object", "required": ["a", "a"]}) is not None
    assert schema_problem({"type": "object", "properties": {"x": {"type": "text"}}}) is not None
    assert schema_problem({"type": "object", "properties": {"x": {"pattern": "("}}}) is not None
