"""The enforced JSON-Schema subset: checking, validation with JSON paths, pydantic conversion."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field, TypeAdapter

from dsh_kernel.errors import ToolSchemaError
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.tools.schema import check_schema, from_json_schema, union_schema, validate

PERSON: JsonObject = {
    "type": "object",
    "description": "a person",
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "age": {"type": "integer", "default": 0},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        "pet": {
            "oneOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "properties": {"kind": {"type": "string", "const": "cat"}},
                    "required": ["kind"],
                    "additionalProperties": False,
                },
            ]
        },
        "extra": {},
    },
    "required": ["name"],
    "additionalProperties": False,
}


def test_subset_schema_is_accepted() -> None:
    check_schema(PERSON)
    check_schema({})
    check_schema({"type": "number", "examples": [1, 2.5]})


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        (
            {"type": "object", "properties": {"q": {"type": "string", "minLength": 1}}},
            "unsupported JSON-Schema keyword 'minLength' at $.properties.q",
        ),
        ({"type": "object", "patternProperties": {}}, "'patternProperties' at $"),
        ({"anyOf": [{}, {}]}, "'anyOf' at $"),
        ({"$ref": "#/$defs/X"}, "'$ref' at $"),
        ({"type": "array", "items": {"type": "string", "format": "uri"}}, "'format' at $.items"),
        ({"type": ["string", "null"]}, "unsupported 'type'"),
        (
            {"type": "object", "additionalProperties": {"type": "string", "format": "uri"}},
            "'format' at $.additionalProperties",
        ),
        ({"oneOf": [{"type": "string"}]}, "at least two branches"),
        ({"type": "string", "enum": ["a", 1]}, "enum value 1 is not a string"),
        ({"type": "integer", "enum": [True]}, "enum value 0 is not a integer"),
        ({"enum": ["a"]}, "need a scalar 'type'"),
        ({"type": "object", "properties": {}, "required": ["x"]}, "'x' is not declared"),
        ({"type": "string", "items": {}}, "'items' at $ (not allowed with scalar)"),
    ],
)
def test_unsupported_or_malformed_schema_is_refused(schema: JsonObject, fragment: str) -> None:
    with pytest.raises(ToolSchemaError) as exc:
        check_schema(schema)
    assert fragment in str(exc.value)


def test_valid_values_have_no_errors() -> None:
    assert validate(PERSON, {"name": "x", "age": 3, "tags": ["a"], "pet": None}) == []
    assert validate(PERSON, {"name": "x", "pet": {"kind": "cat"}, "extra": [1, {"a": None}]}) == []


def test_errors_name_json_paths() -> None:
    errors = validate(
        PERSON,
        {"age": "3", "tags": ["a", "c", 1], "pet": {"kind": "dog"}, "zz": 1},
    )
    assert "$: missing required property 'name'" in errors
    assert "$.age: expected integer, got string" in errors
    assert '$.tags[1]: expected one of ["a", "b"], got "c"' in errors
    assert "$.tags[2]: expected string, got integer" in errors
    assert any(e.startswith("$.pet: matches none of the oneOf alternatives") for e in errors)
    assert any(e.startswith("$: unexpected property 'zz'") for e in errors)


def test_json_types_are_kept_apart() -> None:
    assert validate({"type": "integer"}, True) == ["$: expected integer, got boolean"]
    assert validate({"type": "integer"}, 3.0) == ["$: expected integer, got number"]
    assert validate({"type": "number"}, 3) == []
    assert validate({"type": "number"}, False) != []
    assert validate({"type": "integer", "enum": [1]}, 1) == []
    assert validate({"type": "boolean", "const": True}, True) == []
    assert validate({"type": "boolean", "const": True}, False) != []


def test_one_of_needs_exactly_one_match() -> None:
    schema: JsonObject = {"oneOf": [{"type": "number"}, {"type": "integer"}]}
    assert validate(schema, 2.5) == []
    assert "more than one" in validate(schema, 2)[0]


def test_odd_keys_are_quoted_in_paths() -> None:
    schema: JsonObject = {"type": "object", "properties": {"a b": {"type": "string"}}}
    assert validate(schema, {"a b": 1}) == ['$["a b"]: expected string, got integer']


def test_union_folds_integer_into_number_and_flattens() -> None:
    assert union_schema([{"type": "integer"}, {"type": "number"}]) == {"type": "number"}
    assert union_schema([{"type": "string"}, {"type": "string"}]) == {"type": "string"}
    assert union_schema(
        [{"oneOf": [{"type": "string"}, {"type": "null"}]}, {"type": "boolean"}]
    ) == {"oneOf": [{"type": "string"}, {"type": "null"}, {"type": "boolean"}]}
    assert union_schema([{"type": "string"}, {}]) == {}


class Address(BaseModel):
    street: str
    zip_code: str | None = Field(default=None, pattern=r"^\d{5}$")


class Customer(BaseModel):
    """A customer."""

    name: str = Field(description="full name", max_length=80)
    home: Address
    others: list[Address] = []
    score: int | float = 0
    nickname: str | None
    scores: dict[str, int] = {}


def test_pydantic_schema_becomes_the_subset() -> None:
    schema = from_json_schema(Customer.model_json_schema())
    check_schema(schema)
    assert "$defs" not in str(schema) and "title" not in schema
    props = schema["properties"]
    assert isinstance(props, dict)
    # $ref inlined, titles gone, unknown fields refused like a typo would be
    assert props["home"] == {
        "type": "object",
        "properties": {
            "street": {"type": "string"},
            "zip_code": {"type": "string", "description": '(pattern: "^\\\\d{5}$")'},
        },
        "required": ["street"],
        "additionalProperties": False,
    }
    assert props["others"] == {"type": "array", "items": props["home"], "default": []}
    assert props["name"] == {"type": "string", "description": "full name (maxLength: 80)"}
    assert props["score"] == {"type": "number", "default": 0}
    # required but nullable keeps its null branch; an optional one with a None default does not
    assert props["nickname"] == {"oneOf": [{"type": "string"}, {"type": "null"}]}
    # dict[str, int]: the value type is kept
    assert props["scores"] == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
        "default": {},
    }
    assert schema["description"] == "A customer."
    assert schema["required"] == ["name", "home", "nickname"]


class Node(BaseModel):
    children: list[Node] = []


def test_a_value_schema_checks_every_other_property() -> None:
    """``dict[str, T]``: ``additionalProperties`` holds T's schema, and every property not in
    ``properties`` must match it (before: only ``true``, so any value passed)."""
    schema: JsonObject = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "additionalProperties": {"type": "integer"},
    }
    check_schema(schema)
    assert validate(schema, {"name": "x", "a": 1, "b": 2}) == []
    assert validate(schema, {"name": "x", "a": "one", "odd key": 2.5}) == [
        "$.a: expected integer, got string",
        '$["odd key"]: expected integer, got number',
    ]
    nested = from_json_schema(TypeAdapter(dict[str, list[int]]).json_schema())
    assert nested == {
        "type": "object",
        "additionalProperties": {"type": "array", "items": {"type": "integer"}},
    }
    assert validate(nested, {"a": [1, "2"]}) == ["$.a[1]: expected integer, got string"]
    # a value schema of anything is plain true
    assert from_json_schema(TypeAdapter(dict[str, Any]).json_schema()) == {
        "type": "object",
        "additionalProperties": True,
    }


def test_recursive_models_are_refused() -> None:
    with pytest.raises(ToolSchemaError, match="recursive type 'Node'"):
        from_json_schema(Node.model_json_schema())


def test_tuples_are_refused_by_name() -> None:
    class T(BaseModel):
        pair: tuple[int, str]

    with pytest.raises(ToolSchemaError, match="'prefixItems'"):
        from_json_schema(T.model_json_schema())


def test_untyped_mixed_enum_becomes_typed_branches() -> None:
    out = from_json_schema({"enum": [1, "a", "b", None], "title": "X"})
    assert out == {
        "oneOf": [
            {"type": "integer", "enum": [1]},
            {"type": "string", "enum": ["a", "b"]},
            {"type": "null"},
        ]
    }
    assert validate(out, "b") == [] and validate(out, 2) != []
