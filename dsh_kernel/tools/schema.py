"""The JSON-Schema subset every tool schema is written in, its checker and its validator.

What the model sees of a tool is exactly what the pipeline enforces, so a schema may only use the
keywords below; anything else is refused with ``ToolSchemaError`` naming the keyword and where it is
(silently ignoring a keyword would let the model believe in a constraint nobody checks)::

    {}                                                    any JSON value
    {"type": "string"|"number"|"integer"|"boolean"|"null", "enum"?: [...], "const"?: v}
    {"type": "array", "items"?: S}
    {"type": "object", "properties"?: {name: S}, "required"?: [name], "additionalProperties"?: bool|S}
    {"oneOf": [S, S, ...]}                                at least two branches; exactly one must match
    annotations anywhere: "description", "title", "default", "examples"

``additionalProperties`` defaults to ``true`` as in JSON Schema; a schema there (``dict[str, T]``)
is what every property not in ``properties`` must match. ``integer`` accepts only whole numbers
written without a fraction (``3``, not ``3.0``); ``number`` accepts both; ``true``/``false`` are never
numbers, and enum/const comparison is type-exact (``1`` does not equal ``true``).

``validate(schema, value)`` returns error strings prefixed with the JSON path of the offending value
(``$.items[2].name: expected string, got integer``); an empty list means valid. The value is the
model's, so every piece of it quoted in an error is cut to ``ECHO_CHARS`` (100) characters, and an
object's unexpected properties are one error naming the first three and the count
(``$: 10000 unexpected properties ('a', 'b', 'c', …) (allowed: code)``), never one error each.

``from_json_schema`` turns full JSON Schema as pydantic writes it into this subset: ``$ref``/``$defs``
are inlined (recursive models are refused), ``anyOf`` becomes ``oneOf`` (``integer|number`` collapses to
``number``; an optional field's ``null`` branch is dropped — see ``strip_optional_null``), ``title`` noise
is dropped, and validation-only keywords (``format``, ``minimum``, ``maxLength``, …) move into the
description as a hint. Those hints are not enforced by ``validate``: the ``@tool`` decorator enforces
them through pydantic when it coerces arguments, and reports failures as ``INVALID_ARGS``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Final

from dsh_kernel.errors import ToolSchemaError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.textcap import cap_echo

ANNOTATION_KEYWORDS: Final = frozenset({"description", "title", "default", "examples"})
SCALAR_TYPES: Final = frozenset({"string", "number", "integer", "boolean", "null"})
ALL_TYPES: Final = SCALAR_TYPES | {"array", "object"}
NULL_SCHEMA: Final[JsonObject] = {"type": "null"}

_ALLOWED_BY_KIND: Final[dict[str, frozenset[str]]] = {
    "scalar": ANNOTATION_KEYWORDS | {"type", "enum", "const"},
    "array": ANNOTATION_KEYWORDS | {"type", "items"},
    "object": ANNOTATION_KEYWORDS | {"type", "properties", "required", "additionalProperties"},
    "oneOf": ANNOTATION_KEYWORDS | {"oneOf"},
    "any": ANNOTATION_KEYWORDS,
}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def json_type(value: object) -> str:
    """The JSON type name of ``value`` (``integer`` for ints, the Python type name for non-JSON)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def key_path(path: str, key: str) -> str:
    """The JSON path of ``key`` under ``path`` (``$.a`` or ``$["a b"]``), for error messages."""
    return f"{path}.{key}" if _IDENT.match(key) else f"{path}[{json.dumps(key)}]"


def _matches_type(value: JsonValue, type_name: str) -> bool:
    actual = json_type(value)
    return actual == type_name or (type_name == "number" and actual == "integer")


def json_equal(a: JsonValue, b: JsonValue) -> bool:
    """Equality that keeps JSON types apart (``True != 1``, ``1 == 1.0``)."""
    ta, tb = json_type(a), json_type(b)
    numeric = {"integer", "number"}
    if ta != tb and not (ta in numeric and tb in numeric):
        return False
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return a == b


# ---------------------------------------------------------------------------------------------------
# Checking a schema


def _kind(schema: JsonObject, path: str) -> str:
    if "oneOf" in schema:
        return "oneOf"
    t = schema.get("type")
    if t is None:
        if "enum" in schema or "const" in schema:
            raise ToolSchemaError(f"'enum'/'const' need a scalar 'type' at {path}")
        return "any"
    if not isinstance(t, str) or t not in ALL_TYPES:
        raise ToolSchemaError(f"unsupported 'type' {json.dumps(t)} at {path} (one type name only)")
    return t if t in ("array", "object") else "scalar"


# Complexity (C901): one check per keyword of the supported subset.
def check_schema(schema: JsonValue, path: str = "$") -> None:  # noqa: C901
    """Raise ``ToolSchemaError`` unless ``schema`` is in the subset (see the module docstring)."""
    if not isinstance(schema, dict):
        raise ToolSchemaError(f"a schema must be an object at {path}, got {json_type(schema)}")
    kind = _kind(schema, path)
    for key in schema:
        if key not in _ALLOWED_BY_KIND[kind]:
            raise ToolSchemaError(
                f"unsupported JSON-Schema keyword '{key}' at {path}"
                + ("" if kind == "any" else f" (not allowed with {kind})")
            )
    if "description" in schema and not isinstance(schema["description"], str):
        raise ToolSchemaError(f"'description' must be a string at {path}")
    if "title" in schema and not isinstance(schema["title"], str):
        raise ToolSchemaError(f"'title' must be a string at {path}")
    if "examples" in schema and not isinstance(schema["examples"], list):
        raise ToolSchemaError(f"'examples' must be an array at {path}")
    match kind:
        case "scalar":
            t = schema["type"]
            assert isinstance(t, str)
            if "enum" in schema:
                enum = schema["enum"]
                if not isinstance(enum, list) or not enum:
                    raise ToolSchemaError(f"'enum' must be a non-empty array at {path}")
                for i, v in enumerate(enum):
                    if not _matches_type(v, t):
                        raise ToolSchemaError(f"enum value {i} is not a {t} at {path}.enum")
            if "const" in schema and not _matches_type(schema["const"], t):
                raise ToolSchemaError(f"'const' is not a {t} at {path}")
        case "array":
            if "items" in schema:
                check_schema(schema["items"], f"{path}.items")
        case "object":
            props = schema.get("properties", {})
            if not isinstance(props, dict):
                raise ToolSchemaError(f"'properties' must be an object at {path}")
            for name, sub in props.items():
                check_schema(sub, f"{path}.properties{key_path('', name)}")
            required = schema.get("required", [])
            if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
                raise ToolSchemaError(f"'required' must be an array of names at {path}")
            for r in required:
                assert isinstance(r, str)
                if r not in props:
                    raise ToolSchemaError(f"required property '{r}' is not declared at {path}")
            extra = schema.get("additionalProperties", True)
            if not isinstance(extra, bool):
                check_schema(extra, f"{path}.additionalProperties")
        case "oneOf":
            branches = schema["oneOf"]
            if not isinstance(branches, list) or len(branches) < 2:
                raise ToolSchemaError(f"'oneOf' needs at least two branches at {path}")
            for i, b in enumerate(branches):
                check_schema(b, f"{path}.oneOf[{i}]")
        case _:
            pass


# ---------------------------------------------------------------------------------------------------
# Validating a value


def validate(schema: JsonObject, value: JsonValue, path: str = "$") -> list[str]:
    """Errors for ``value`` against a checked ``schema``; empty when it matches."""
    if "oneOf" in schema:
        branches = schema["oneOf"]
        assert isinstance(branches, list)
        results = [validate(_obj(b), value, path) for b in branches]
        matched = [i for i, errs in enumerate(results) if not errs]
        if len(matched) == 1:
            return []
        if matched:
            return [f"{path}: matches more than one alternative of oneOf (branches {matched})"]
        detail = "; ".join(f"branch {i}: {errs[0]}" for i, errs in enumerate(results))
        return [f"{path}: matches none of the oneOf alternatives ({detail})"]
    t = schema.get("type")
    if t is None:
        return []
    assert isinstance(t, str)
    if not _matches_type(value, t):
        return [f"{path}: expected {t}, got {json_type(value)}"]
    errors: list[str] = []
    if "enum" in schema:
        enum = _list(schema["enum"])
        if not any(json_equal(value, e) for e in enum):
            allowed = ", ".join(json.dumps(e) for e in enum)
            errors.append(f"{path}: expected one of [{allowed}], got {_quote(value)}")
    if "const" in schema and not json_equal(value, schema["const"]):
        errors.append(f"{path}: expected {json.dumps(schema['const'])}, got {_quote(value)}")
    if isinstance(value, list) and "items" in schema:
        items = _obj(schema["items"])
        for i, v in enumerate(value):
            errors.extend(validate(items, v, f"{path}[{i}]"))
    if isinstance(value, dict):
        errors.extend(_validate_object(schema, value, path))
    return errors


def _validate_object(schema: JsonObject, value: JsonObject, path: str) -> list[str]:
    """An object's errors: missing required properties, then each property against its schema —
    a declared one's, else ``additionalProperties`` (``false``: unexpected; a schema: that)."""
    errors: list[str] = []
    props = _obj(schema.get("properties", {}))
    for r in _list(schema.get("required", [])):
        if isinstance(r, str) and r not in value:
            errors.append(f"{path}: missing required property '{r}'")
    extra = schema.get("additionalProperties", True)
    unexpected: list[str] = []
    for k, v in value.items():
        if k in props:
            errors.extend(validate(_obj(props[k]), v, key_path(path, k)))
        elif extra is False:
            unexpected.append(k)
        elif isinstance(extra, dict):
            errors.extend(validate(extra, v, key_path(path, k)))
    if unexpected:
        errors.append(_unexpected(path, unexpected, props))
    return errors


def _quote(value: JsonValue) -> str:
    """A (short) value as a message quotes it; a scalar's JSON, a container only by its type."""
    if isinstance(value, list | dict):
        return json_type(value)
    return cap_echo(json.dumps(value, ensure_ascii=False))


def _unexpected(path: str, keys: list[str], props: JsonObject) -> str:
    known = ", ".join(sorted(props)) or "none"
    if len(keys) == 1:
        return f"{path}: unexpected property '{cap_echo(keys[0])}' (allowed: {known})"
    named = ", ".join(f"'{cap_echo(k)}'" for k in keys[:3]) + (", …" if len(keys) > 3 else "")
    return f"{path}: {len(keys)} unexpected properties ({named}) (allowed: {known})"


def _obj(value: JsonValue) -> JsonObject:
    assert isinstance(value, dict)
    return value


def _list(value: JsonValue) -> list[JsonValue]:
    assert isinstance(value, list)
    return value


# ---------------------------------------------------------------------------------------------------
# Building schemas


def union_schema(branches: Sequence[JsonObject]) -> JsonObject:
    """The subset's spelling of "any of these": flattened, deduplicated, ``integer`` folded into a
    sibling ``number`` (so an int never matches two branches), a single branch returned bare."""
    flat: list[JsonObject] = []
    for b in branches:
        if set(b) == {"oneOf"}:
            flat.extend(_obj(x) for x in _list(b["oneOf"]))
        else:
            flat.append(b)
    if any(b == {} for b in flat):
        return {}
    out: list[JsonObject] = []
    for b in flat:
        if not any(json_equal(b, o) for o in out):
            out.append(b)
    if {"type": "number"} in out:
        out = [b for b in out if b != {"type": "integer"}]
    return out[0] if len(out) == 1 else {"oneOf": list(out)}


def strip_optional_null(schema: JsonObject) -> JsonObject:
    """For a property that may be omitted and defaults to ``None``: drop the ``null`` alternative.

    Models handle "leave it out" far better than "send null", so an optional ``x: T | None = None``
    is shown (and enforced) as plain ``T``, not required. A null that means something other than the
    default (``T | None`` without a default, or with a non-None default) keeps its ``null`` branch.
    """
    if schema.get("default", 0) is not None or "oneOf" not in schema:
        return schema
    branches = [_obj(b) for b in _list(schema["oneOf"])]
    rest = [b for b in branches if b != NULL_SCHEMA]
    if len(rest) == len(branches) or not rest:
        return schema
    annotations = {k: v for k, v in schema.items() if k in ANNOTATION_KEYWORDS and k != "default"}
    inner = union_schema(rest)
    return {**inner, **annotations}


_DROPPED: Final = frozenset(
    {"title", "$schema", "$id", "readOnly", "writeOnly", "deprecated", "discriminator"}
)
_HINTED: Final = frozenset(
    {
        "format",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
    }
)


def from_json_schema(schema: JsonObject) -> JsonObject:
    """Convert a full JSON Schema (as pydantic writes it) into the checked subset."""
    defs = schema.get("$defs", {})
    if not isinstance(defs, dict):
        raise ToolSchemaError("'$defs' must be an object at $")
    body = {k: v for k, v in schema.items() if k != "$defs"}
    out = _convert(body, defs, (), "$")
    check_schema(out)
    return out


# Complexity (C901): one branch per JSON-Schema construct it inlines.
def _convert(node: JsonObject, defs: JsonObject, stack: tuple[str, ...], path: str) -> JsonObject:  # noqa: C901
    if "$ref" in node:
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
            raise ToolSchemaError(f"unsupported $ref {json.dumps(ref)} at {path}")
        name = ref.removeprefix("#/$defs/")
        if name in stack:
            raise ToolSchemaError(f"recursive type '{name}' at {path} cannot be inlined")
        target = defs.get(name)
        if not isinstance(target, dict):
            raise ToolSchemaError(f"unresolved $ref '{ref}' at {path}")
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _convert(merged, defs, (*stack, name), path)
    if "allOf" in node:
        parts = node["allOf"]
        if not isinstance(parts, list) or len(parts) != 1 or not isinstance(parts[0], dict):
            raise ToolSchemaError(f"unsupported JSON-Schema keyword 'allOf' at {path}")
        merged = {**parts[0], **{k: v for k, v in node.items() if k != "allOf"}}
        return _convert(merged, defs, stack, path)

    out: JsonObject = {}
    hints: list[str] = []
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key in _HINTED:
            hints.append(f"{key}: {json.dumps(value)}")
        elif key in ANNOTATION_KEYWORDS or key in ("enum", "const", "required"):
            out[key] = value
        elif key == "type":
            out["type"] = value
        elif key == "items":
            out["items"] = _convert(_sub(value, path, key), defs, stack, f"{path}.items")
        elif key == "properties":
            props = _sub(value, path, key)
            out["properties"] = {
                k: _convert(_sub(v, path, k), defs, stack, key_path(f"{path}.properties", k))
                for k, v in props.items()
            }
        elif key == "additionalProperties":
            # a value schema (dict[str, T]) is kept: every other property must match it
            if isinstance(value, bool):
                out[key] = value
            else:
                extra = _convert(_sub(value, path, key), defs, stack, f"{path}.{key}")
                out[key] = extra if extra else True
        elif key in ("anyOf", "oneOf"):
            if not isinstance(value, list):
                raise ToolSchemaError(f"'{key}' must be an array at {path}")
            out["oneOf"] = [
                _convert(_sub(b, path, key), defs, stack, f"{path}.{key}[{i}]")
                for i, b in enumerate(value)
            ]
        else:
            raise ToolSchemaError(f"unsupported JSON-Schema keyword '{key}' at {path}")

    out = _normalise_types(out)
    if out.get("type") == "object" and "additionalProperties" not in out:
        # pydantic models ignore unknown fields; we refuse them so a misspelt name is reported.
        out["additionalProperties"] = "properties" not in out
    if out.get("type") == "object" and "properties" in out:
        required = {r for r in _list(out.get("required", [])) if isinstance(r, str)}
        props = _obj(out["properties"])
        for k in list(props):
            if k not in required:
                props[k] = strip_optional_null(_obj(props[k]))
    if hints:
        hint = "(" + ", ".join(hints) + ")"
        desc = out.get("description")
        out["description"] = f"{desc} {hint}" if isinstance(desc, str) and desc else hint
    return out


def _normalise_types(out: JsonObject) -> JsonObject:
    """Rewrite what the subset cannot say directly: type lists, untyped enums, anyOf branches."""
    annotations = {k: v for k, v in out.items() if k in ANNOTATION_KEYWORDS}
    t = out.get("type")
    if isinstance(t, list):
        rest = {k: v for k, v in out.items() if k not in ANNOTATION_KEYWORDS and k != "type"}
        branches: list[JsonObject] = [{**rest, "type": x} for x in t]
        return {**union_schema(branches), **annotations}
    if t is None and "enum" in out:
        groups: dict[str, list[JsonValue]] = {}
        for v in _list(out["enum"]):
            groups.setdefault(json_type(v), []).append(v)
        branches = [
            NULL_SCHEMA if g == "null" else {"type": g, "enum": vs} for g, vs in groups.items()
        ]
        return {**union_schema(branches), **annotations}
    if t is None and "const" in out:
        return {"type": json_type(out["const"]), "const": out["const"], **annotations}
    if "oneOf" in out:
        joined = union_schema([_obj(b) for b in _list(out["oneOf"])])
        return {**joined, **annotations}
    return out


def _sub(value: JsonValue, path: str, key: str) -> JsonObject:
    if not isinstance(value, dict):
        raise ToolSchemaError(f"'{key}' must hold a schema object at {path}")
    return value
