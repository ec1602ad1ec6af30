"""The lean tool set (dsh_kernel.tools.lean): small, still correct, never looser than the full one."""

from __future__ import annotations

import json
from dataclasses import dataclass

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.kernel.toolbox.ask_user import LEAN_PARAMETERS, PARAMETERS, ask_user_tool
from dsh_kernel.kernel.toolbox.python import inspect_tool, python_tool
from dsh_kernel.kernel.toolbox.sql import sql_tool
from dsh_kernel.llm.types import ToolSchema
from dsh_kernel.runtime.runner import CodeRunner
from dsh_kernel.tools import ToolContext, ToolDefinition
from dsh_kernel.tools.lean import (
    LEAN_BELOW,
    MAX_LEAN_DESCRIPTION,
    lean_description,
    lean_for,
    lean_parameters,
)
from dsh_kernel.tools.registry import ToolRegistry
from dsh_kernel.tools.schema import validate


def default_tools() -> list[ToolDefinition]:
    ns: dict[str, object] = {}
    # The definitions only: neither body runs here, so the sql tool needs no store.
    return [python_tool(CodeRunner(ns)), inspect_tool(ns), ask_user_tool(None), sql_tool(None)]  # type: ignore[arg-type]


def wire_chars(schemas: tuple[ToolSchema, ...]) -> int:
    """Characters of the tool list as an OpenAI-compatible request carries it (compact JSON)."""
    wire = [
        {"type": "function", "function": {"name": s.name, "description": s.description,
                                          "parameters": s.parameters}}
        for s in schemas
    ]  # fmt: skip
    return sum(len(json.dumps(w, ensure_ascii=False, separators=(",", ":"))) for w in wire)


def registry(tools: list[ToolDefinition]) -> ToolRegistry:
    reg = ToolRegistry()
    for t in tools:
        reg.register(t)
    return reg


def test_the_default_lean_set_stays_within_what_was_measured_to_fit_400_tokens() -> None:
    reg = registry(default_tools())
    full = wire_chars(reg.schemas())
    lean = wire_chars(reg.schemas(lean=True))
    # Measured against a real server (Qwen2.5-Coder's template on llama-cpp-python, make
    # test-local's cache; tests/local/test_lean_tools.py): the lean set a notebook kernel offers when
    # no tool is named — python, inspect, notebook_read, notebook_insert — is 399 prompt tokens at
    # 1,120 characters, of which python and inspect are 434 (the notebook tools' part is held by
    # the live test itself): these two must not grow past what was measured.
    assert lean <= 434, lean
    assert lean * 5 <= full, (lean, full)


def test_ask_user_and_sql_are_offered_lean_only_when_the_turn_names_them() -> None:
    reg = registry(default_tools())
    assert [s.name for s in reg.schemas(lean=True)] == ["inspect", "python"]
    assert [s.name for s in reg.schemas(lean=True, named={"sql"})] == ["inspect", "python", "sql"]
    assert [s.name for s in reg.schemas()] == ["ask_user", "inspect", "python", "sql"]  # full: all
    assert reg.get("ask_user") is not None  # not offered is not switched off: a call still runs


def test_lean_description_is_the_first_sentence_capped() -> None:
    assert lean_description("Run code. It persists.\nMore.") == "Run code."
    assert lean_description("  One line only  ") == "One line only"
    assert lean_description("e.g. this is kept whole? Yes.") == "e.g. this is kept whole?"
    long = lean_description("x" * 500)
    assert len(long) == MAX_LEAN_DESCRIPTION and long.endswith("…")


def test_lean_parameters_drop_prose_keywords_but_keep_a_property_named_description() -> None:
    schema: JsonObject = {
        "type": "object",
        "title": "T",
        "description": "prose",
        "properties": {
            "description": {"type": "string", "description": "a property called description"},
            "items": {
                "type": "array",
                "items": {"oneOf": [{"type": "string", "examples": ["a"]}, {"type": "integer"}]},
            },
        },
        "required": ["description"],
        "additionalProperties": False,
    }
    assert lean_parameters(schema) == {
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "items": {
                "type": "array",
                "items": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            },
        },
        "required": ["description"],
        "additionalProperties": False,
    }


def test_every_call_the_lean_ask_user_schema_describes_is_valid_under_the_full_one() -> None:
    calls: list[JsonValue] = [
        {"questions": [{"id": "q", "question": "Which?"}]},
        {"questions": [{"id": "a", "question": "?"}, {"id": "b", "question": "Which one?"}]},
    ]
    for call in calls:
        assert validate(LEAN_PARAMETERS, call) == []
        assert validate(PARAMETERS, call) == []


def test_a_tool_without_a_lean_form_gets_one_mechanically() -> None:
    def execute(args: JsonObject, ctx: ToolContext) -> JsonValue:
        return None

    t = ToolDefinition(
        name="t",
        description="Does a thing. At length, with caveats.",
        parameters={
            "type": "object",
            "properties": {"n": {"type": "integer", "description": "N."}},
        },
        execute=execute,
    )
    assert t.lean_schema.description == "Does a thing."
    assert t.lean_schema.parameters == {"type": "object", "properties": {"n": {"type": "integer"}}}


def test_lean_below_the_threshold_under_auto_or_when_told() -> None:
    @dataclass
    class Window:
        tokens: int

    assert lean_for("auto", Window(4_096)) is True
    assert lean_for("auto", Window(LEAN_BELOW)) is False
    assert lean_for("auto", None) is False  # unknown window: full
    assert lean_for("lean", Window(1_000_000)) is True
    assert lean_for("full", Window(4_096)) is False
