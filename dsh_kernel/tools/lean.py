"""The lean form of a tool's schema, for models with a small context window.

A small local model (a 4k window on one CPU thread) pays for every token of the tool list on every
request: the default tools' full descriptions and schemas are ~1,050 tokens, most of the first
request. The lean form keeps what the model needs to call a tool correctly — its name, one sentence
of what it does, and the parameter schema without the prose — and drops the rest.

The agent sends the lean form when its ``tool_schemas`` is ``lean``, or ``auto`` (the default) and
the model's known context window is under ``LEAN_BELOW`` tokens (``%agent tools lean|full|auto``).

``lean_description(text)`` is the text's first sentence (at most ``MAX_LEAN_DESCRIPTION`` characters).
``lean_parameters(schema)`` is the schema without ``description``, ``title`` and ``examples`` at every
level (property *names* called ``description`` are kept: only keywords are dropped). Neither changes
what a call may contain, so the pipeline validates a call against the full schema either way. A tool
may give its own lean text and parameters (``ToolDefinition.lean_description`` /
``lean_parameters``); the lean parameters must admit nothing the full ones refuse (they are only
ever a narrower description of the same arguments, and the full schema stays the one enforced).
"""

from __future__ import annotations

import re
from typing import Final, Literal, Protocol, TypeAlias

from dsh_kernel.jsonvalue import JsonObject, JsonValue

ToolSchemaForm: TypeAlias = Literal["auto", "full", "lean"]
"""Which form the agent sends (``Agent.tool_schemas``): ``auto`` is lean below ``LEAN_BELOW``."""
TOOL_SCHEMA_FORMS: Final[tuple[ToolSchemaForm, ...]] = ("auto", "full", "lean")
LEAN_BELOW: Final = 16_384
"""A known context window under this many tokens gets the lean tool set under ``auto``."""
MAX_LEAN_DESCRIPTION: Final = 160


class _Sized(Protocol):
    @property
    def tokens(self) -> int: ...


_PROSE_KEYWORDS: Final = frozenset({"description", "title", "examples", "$comment"})
_SCHEMA_MAPS: Final = frozenset({"properties", "patternProperties", "$defs", "definitions"})
_SCHEMA_LISTS: Final = frozenset({"oneOf", "anyOf", "allOf", "prefixItems"})
_SCHEMA_VALUES: Final = frozenset({"items", "additionalProperties", "not", "contains"})
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\"])")


def lean_for(form: ToolSchemaForm, window: _Sized | None) -> bool:
    """Whether the tools go out lean: ``form`` says, ``auto`` meaning a window (even one merely
    assumed) under ``LEAN_BELOW`` tokens."""
    if form == "auto":
        return window is not None and window.tokens < LEAN_BELOW
    return form == "lean"


def lean_description(text: str) -> str:
    """The first sentence of ``text`` (or its first line), at most ``MAX_LEAN_DESCRIPTION`` chars."""
    first = text.strip().split("\n", 1)[0]
    first = _SENTENCE_END.split(first, 1)[0].strip()
    if len(first) > MAX_LEAN_DESCRIPTION:
        first = first[: MAX_LEAN_DESCRIPTION - 1].rstrip() + "…"
    return first


def lean_parameters(schema: JsonObject) -> JsonObject:
    """``schema`` without its prose keywords, at every level (module docstring)."""
    out: JsonObject = {}
    for key, value in schema.items():
        if key in _PROSE_KEYWORDS:
            continue
        out[key] = _lean_child(key, value)
    return out


def _lean_child(key: str, value: JsonValue) -> JsonValue:
    if key in _SCHEMA_MAPS and isinstance(value, dict):
        return {name: _lean_schema(sub) for name, sub in value.items()}
    if key in _SCHEMA_LISTS and isinstance(value, list):
        return [_lean_schema(sub) for sub in value]
    if key in _SCHEMA_VALUES:
        return _lean_schema(value)
    return value


def _lean_schema(value: JsonValue) -> JsonValue:
    return lean_parameters(value) if isinstance(value, dict) else value
