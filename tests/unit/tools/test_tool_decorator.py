"""``@tool``: schemas from signatures, docstrings and pydantic; argument coercion; naming rules."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from dsh_kernel.abort import AbortController
from dsh_kernel.errors import ToolSchemaError, UsageError
from dsh_kernel.ids import CallId
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import TextBlock
from dsh_kernel.tools import (
    ApprovalPolicy,
    ToolCall,
    ToolContext,
    ToolDefinition,
    ToolLike,
    ToolRegistry,
    ToolResult,
    ToolRuntime,
    build_definition,
    definition_of,
    tool,
)
from dsh_kernel.tools.decorator import parse_docstring
from dsh_kernel.tools.schema import check_schema


async def call(given: ToolLike, arguments: str) -> ToolResult:
    """Run a tool through the real pipeline with an auto-approving policy."""
    defn = definition_of(given)
    registry = ToolRegistry()
    registry.register(given)
    runtime = ToolRuntime(registry, None, ApprovalPolicy("auto"))
    import json

    try:
        args: JsonValue = json.loads(arguments)
    except ValueError:
        args = arguments
    c = ToolCall(call_id=CallId("c1"), name=defn.name, arguments=arguments)
    return await runtime.execute(c, args, AbortController().signal)


def text(result: ToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextBlock)
    return block.text


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def test_signature_and_google_docstring_become_the_schema() -> None:
    @tool
    def find(
        pattern: str,
        limit: int = 10,
        paths: list[str] | None = None,
        mode: Literal["regex", "literal"] = "regex",
        scale: float = 1.0,
        anything: Any = None,
        color: Color = Color.RED,
        flags: dict[str, bool] | None = None,
    ) -> list[str]:
        """Find lines matching a pattern.

        Searches every file.

        Args:
            pattern: what to look for
            limit (int): at most this many
                matches in total
            paths: where to look
        Returns:
            the matching lines
        """
        return []

    assert find.tool_definition.name == "find"
    assert (
        find.tool_definition.description == "Find lines matching a pattern.\n\nSearches every file."
    )
    props = find.tool_definition.parameters["properties"]
    assert isinstance(props, dict)
    assert props["pattern"] == {"type": "string", "description": "what to look for"}
    assert props["limit"] == {
        "type": "integer",
        "description": "at most this many matches in total",
        "default": 10,
    }
    # Optional with a None default: omitted rather than null
    assert props["paths"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "where to look",
    }
    assert props["mode"] == {"type": "string", "enum": ["regex", "literal"], "default": "regex"}
    assert props["scale"] == {"type": "number", "default": 1.0}
    assert props["anything"] == {"default": None}
    assert props["color"] == {"type": "string", "enum": ["red", "blue"], "default": "red"}
    assert props["flags"] == {"type": "object", "additionalProperties": {"type": "boolean"}}
    assert find.tool_definition.parameters["required"] == ["pattern"]
    assert find.tool_definition.parameters["additionalProperties"] is False
    assert find.tool_definition.output_schema == {"type": "array", "items": {"type": "string"}}
    check_schema(find.tool_definition.parameters)


def test_numpy_docstring() -> None:
    summary, params = parse_docstring(
        """Do X.

        Parameters
        ----------
        a : int
            The a.
        b
            The b,
            continued.

        Returns
        -------
        int
            Never a parameter.
        """
    )
    assert summary == "Do X."
    assert params == {"a": "The a.", "b": "The b, continued."}


def test_required_nullable_keeps_null_and_json_value_means_anything() -> None:
    @tool
    def f(a: int | None, b: JsonValue, c: JsonObject, d: int | str = 1) -> None:
        """F."""

    props = f.tool_definition.parameters["properties"]
    assert isinstance(props, dict)
    assert props["a"] == {"oneOf": [{"type": "integer"}, {"type": "null"}]}
    assert props["b"] == {}
    assert props["c"] == {"type": "object", "additionalProperties": True}
    assert props["d"] == {"oneOf": [{"type": "integer"}, {"type": "string"}], "default": 1}
    assert f.tool_definition.output_schema == {"type": "null"}


class Query(BaseModel):
    text: str = Field(min_length=1)
    limit: int = 5


@dataclass
class Box:
    width: int
    height: int = 1


class Opts(TypedDict):
    verbose: bool
    level: NotRequired[int]


async def test_model_params_are_coerced_and_context_is_injected() -> None:
    seen: dict[str, object] = {}

    @tool(name="run-query", description="Run it.", read_only=True, timeout_ms=5000)
    async def run(
        q: Query, box: Box, opts: Opts, ctx: ToolContext, color: Color = Color.RED
    ) -> Query:
        seen.update(q=q, box=box, opts=opts, ctx=ctx, color=color)
        return Query(text=q.text.upper(), limit=q.limit)

    defn = run.tool_definition
    assert defn.name == "run-query" and defn.read_only and defn.timeout_ms == 5000
    props = defn.parameters["properties"]
    assert isinstance(props, dict)
    assert "ctx" not in props
    assert props["opts"] == {
        "type": "object",
        "properties": {"verbose": {"type": "boolean"}, "level": {"type": "integer"}},
        "additionalProperties": False,
        "required": ["verbose"],
    }
    result = await call(
        run,
        '{"q": {"text": "hi"}, "box": {"width": 2}, "opts": {"verbose": true}, "color": "blue"}',
    )
    assert not result.is_error, result
    assert seen["q"] == Query(text="hi", limit=5)
    assert seen["box"] == Box(width=2, height=1)
    assert seen["opts"] == {"verbose": True}
    assert seen["color"] is Color.BLUE
    ctx = seen["ctx"]
    assert isinstance(ctx, ToolContext) and ctx.call_id == "c1" and ctx.name == "run-query"
    # a pydantic return value is dumped to JSON and rendered compactly
    assert result.value == {"text": "HI", "limit": 5}
    assert text(result) == '{"text":"HI","limit":5}'


async def test_pydantic_constraints_are_enforced_as_invalid_args() -> None:
    @tool
    def q(query: Query, counts: dict[str, int], n: Annotated[int, Field(ge=0)] = 0) -> str:
        """Q."""
        return "ok"

    props = q.tool_definition.parameters["properties"]
    assert isinstance(props, dict)
    assert props["n"] == {"type": "integer", "description": "(minimum: 0)", "default": 0}

    bad_model = await call(q, '{"query": {"text": ""}, "counts": {}}')
    assert bad_model.error is not None and bad_model.error.code == "INVALID_ARGS"
    assert "$.query.text" in bad_model.error.message

    bad_values = await call(q, '{"query": {"text": "x"}, "counts": {"a": "many"}}')
    assert bad_values.error is not None and bad_values.error.code == "INVALID_ARGS"
    assert "$.counts.a" in bad_values.error.message

    bad_n = await call(q, '{"query": {"text": "x"}, "counts": {}, "n": -1}')
    assert bad_n.error is not None and bad_n.error.code == "INVALID_ARGS"

    ok = await call(q, '{"query": {"text": "x"}, "counts": {"a": 1}, "n": 2}')
    assert not ok.is_error and ok.value == "ok"


async def test_return_annotation_is_enforced_as_output_schema() -> None:
    @tool
    def lies() -> int:
        """Claims an int."""
        return "three"  # type: ignore[return-value]

    result = await call(lies, "{}")
    assert result.error is not None and result.error.code == "INVALID_TOOL_OUTPUT"
    assert "$: expected integer, got string" in result.error.message


async def test_kwargs_open_the_arguments_object() -> None:
    @tool
    def echo(**extra: int) -> JsonValue:
        """Echo."""
        return dict(extra)

    assert echo.tool_definition.parameters["additionalProperties"] is True
    result = await call(echo, '{"a": 1}')
    assert result.value == {"a": 1}


def test_names_are_checked() -> None:
    def f() -> None:
        """F."""

    with pytest.raises(UsageError, match="reserved"):
        tool(name="run_code")(f)
    with pytest.raises(UsageError, match="invalid tool name"):
        tool(name="has space")(f)
    with pytest.raises(UsageError, match="invalid tool name"):
        tool(name="x" * 65)(f)
    assert tool(name="A_b-9")(f).tool_definition.name == "A_b-9"


def test_unsupported_signatures_are_refused() -> None:
    def positional(*items: int) -> None:
        """P."""

    with pytest.raises(ToolSchemaError, match="only named parameters"):
        tool(positional)

    def weird(x: set[int]) -> None:
        """W."""

    with pytest.raises(ToolSchemaError, match=r"cannot express annotation .*set"):
        tool(weird)

    def int_keys(x: dict[int, str]) -> None:
        """K."""

    with pytest.raises(ToolSchemaError, match="dict keys must be str"):
        tool(int_keys)


class Tree(BaseModel):
    kids: list[Tree] = []


def test_recursive_model_param_is_refused() -> None:
    def t(tree: Tree) -> None:
        """T."""

    with pytest.raises(ToolSchemaError, match="recursive"):
        tool(t)


async def test_sync_and_async_bodies_run_and_concurrency_flag() -> None:
    @tool(concurrency_safe=True)
    def add(a: int, b: int = 2) -> int:
        """Add."""
        return a + b

    @tool
    async def neg(a: int) -> int:
        """Negate."""
        return -a

    assert add.tool_definition.is_concurrency_safe({}) is True
    assert neg.tool_definition.is_concurrency_safe({}) is False
    assert (await call(add, '{"a": 1}')).value == 3
    assert (await call(neg, '{"a": 1}')).value == -1
    assert text(await call(add, '{"a": 40}')) == "42"


async def test_the_decorated_function_is_the_function_still_callable() -> None:
    def plain(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    add = tool(plain)
    assert add is plain and add(1, 2) == 3  # the function you wrote, called as written
    assert add.tool_definition.name == "plain"
    assert definition_of(add) is add.tool_definition
    assert definition_of(add.tool_definition) is add.tool_definition  # a definition is its own

    @tool(read_only=True)
    async def later(x: int) -> int:
        """Later."""
        return x * 2

    assert await later(21) == 42
    assert later.__name__ == "later" and later.tool_definition.read_only
    # the model's call runs the same body
    assert (await call(later, '{"x": 4}')).value == 8
    assert (await call(later.tool_definition, '{"x": 5}')).value == 10


async def test_a_callable_without_attributes_comes_back_wrapped() -> None:
    class Counter:
        def __init__(self) -> None:
            self.n = 0

        def bump(self, by: int = 1) -> int:
            """Bump the counter."""
            self.n += by
            return self.n

    c = Counter()
    bump = tool(c.bump)  # a bound method cannot carry an attribute
    assert bump(2) == 2 and c.n == 2
    assert bump.__name__ == "bump" and bump.tool_definition.name == "bump"
    assert (await call(bump, '{"by": 3}')).value == 5


def test_build_definition_leaves_the_function_alone() -> None:
    def convert(amount: float, rate: float) -> float:
        """Convert."""
        return amount * rate

    defn = build_definition(convert, read_only=True)
    assert isinstance(defn, ToolDefinition) and defn.name == "convert" and defn.read_only
    assert not hasattr(convert, "tool_definition")


def test_decorating_again_replaces_the_attached_definition() -> None:
    @tool
    def f() -> None:
        """F."""

    first = f.tool_definition
    again = tool(name="g", read_only=True)(f)
    assert again is f and f.tool_definition is not first
    assert f.tool_definition.name == "g" and f.tool_definition.read_only


def test_what_is_no_tool_is_refused_where_a_tool_is_taken() -> None:
    def undecorated(a: int) -> int:
        """U."""
        return a

    registry = ToolRegistry()
    with pytest.raises(UsageError, match=r"'undecorated' is not a tool: decorate the function"):
        registry.register(undecorated)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"'int' is not a tool"):
        definition_of(3)  # type: ignore[arg-type]
    assert registry.names() == ()
