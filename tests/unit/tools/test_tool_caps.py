"""Every tool call ends in a bounded result (issue 11, items 3 and 4), below the kernel.

Arguments nested too deeply are ``INVALID_ARGS`` (never a ``RecursionError``); results, errors and
echoed names are capped with a marker; an exception that escapes the pipeline still becomes the
call's result; and an agent whose tools fail internally leaves no call unanswered.
"""

from __future__ import annotations

import json

import pytest

from dsh_kernel import Agent
from dsh_kernel.abort import AbortController
from dsh_kernel.ids import CallId, new_message_id
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.arguments import MAX_ARGUMENT_DEPTH, ArgumentsTooDeep, parse_tool_arguments
from dsh_kernel.llm.assembler import MAX_TOOL_NAME_CHARS, BlockAssembler
from dsh_kernel.llm.types import (
    Message,
    TextBlock,
    ToolCallBlock,
    ToolCallDeltaChunk,
    UnknownBlock,
    UserSource,
)
from dsh_kernel.session.check.invariants import check_invariants
from dsh_kernel.testing import ScriptedProvider, text_response, tool_calls_response
from dsh_kernel.textcap import cap_echo, cap_text
from dsh_kernel.tools import (
    ApprovalPolicy,
    ToolCall,
    ToolContext,
    ToolDefinition,
    ToolRegistry,
    ToolResult,
    ToolRuntime,
    run_tool_calls,
)
from dsh_kernel.tools.bounds import RESULT_TEXT_BYTES
from dsh_kernel.tools.schema import validate


def nested(depth: int) -> str:
    return '{"a": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


# --- parsing -------------------------------------------------------------------------------------


def test_arguments_nest_at_most_64_levels() -> None:
    assert MAX_ARGUMENT_DEPTH == 64
    assert parse_tool_arguments(nested(64)) == {"a": json.loads("[" * 63 + "]" * 63)}
    for depth in (65, 2_000, 1_000_000):
        with pytest.raises(ArgumentsTooDeep, match="nested deeper than 64 levels"):
            parse_tool_arguments(nested(depth))


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    code = '"' + "[{" * 5_000 + '\\"' + "]" * 10 + '"'
    assert parse_tool_arguments('{"code": ' + code + "}") == {"code": json.loads(code)}


# --- caps ----------------------------------------------------------------------------------------


def test_cap_text_keeps_head_and_tail_and_says_how_much_was_cut() -> None:
    text = "HEAD" + "é" * 1_000_000 + "TAIL"
    out = cap_text(text, 10_000)
    assert len(out.encode()) <= 10_000
    assert out.startswith("HEAD") and out.endswith("TAIL")
    kept = len(out) - len(out.split("\n")[1]) - 2
    assert f"[{len(text) - kept} characters cut]" in out
    assert cap_text("short", 10_000) == "short"


def test_cap_echo_is_one_line_and_keeps_its_first_count() -> None:
    once = cap_echo("n" * 5_000_000)
    assert once == "n" * 100 + "… [4999900 characters cut]"
    assert cap_echo(once) == once
    assert cap_echo("a\nb") == "a\\nb"


def test_ten_thousand_unexpected_properties_are_one_short_error() -> None:
    schema: JsonObject = {
        "type": "object",
        "properties": {"code": {"type": "string"}},
        "additionalProperties": False,
    }
    value: JsonObject = {f"k{i}": i for i in range(10_000)}
    value["x" * 1_000_000] = 1
    (error,) = validate(schema, {"code": "1", **value})
    assert error.startswith("$: 10001 unexpected properties ('k0', 'k1', 'k2', …)")
    assert error.endswith("(allowed: code)") and len(error) < 200


def test_a_huge_tool_call_name_is_cut_in_the_assembled_message() -> None:
    asm = BlockAssembler()
    asm.push(ToolCallDeltaChunk(index=0, id=CallId("c1"), name="n" * 5_000_000, arguments_delta=""))
    (block,) = asm.blocks()
    assert isinstance(block, ToolCallBlock)
    assert block.name == cap_echo("n" * 5_000_000, MAX_TOOL_NAME_CHARS)
    assert block.id == "c1" and block.arguments == ""


# --- the pipeline and the scheduler --------------------------------------------------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("cannot even say what went wrong")


def runtime() -> ToolRuntime:
    reg = ToolRegistry()

    def huge(args: JsonObject, ctx: ToolContext) -> JsonValue:
        return "y" * 10_000_000

    def fail(args: JsonObject, ctx: ToolContext) -> JsonValue:
        raise ValueError("z" * 10_000_000)

    def weird(args: JsonObject, ctx: ToolContext) -> JsonValue:
        raise Unprintable()

    any_args: JsonObject = {"type": "object"}
    strict: JsonObject = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "additionalProperties": False,
    }
    for name, body, params in (
        ("huge", huge, any_args),
        ("fail", fail, any_args),
        ("weird", weird, any_args),
        ("strict", huge, strict),
    ):
        reg.register(
            ToolDefinition(
                name=name, description="", parameters=params, execute=body, read_only=True
            )
        )
    return ToolRuntime(reg, None, ApprovalPolicy())


async def run(*calls: tuple[str, str]) -> list[ToolResult]:
    results: list[ToolResult] = []
    outcome = await run_tool_calls(
        [ToolCall(call_id=CallId(f"c{i}"), name=n, arguments=a) for i, (n, a) in enumerate(calls)],
        runtime(),
        AbortController().signal,
        on_start=lambda call: None,
        on_result=lambda call, result: results.append(result),
    )
    assert list(outcome.results) == results
    return results


def text_of(result: ToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextBlock))


async def test_every_result_is_capped_with_a_marker() -> None:
    big, failed = await run(("huge", "{}"), ("fail", "{}"))
    for result in (big, failed):
        text = text_of(result)
        assert len(text.encode()) <= RESULT_TEXT_BYTES
        assert "characters cut]" in text
    assert failed.error is not None and failed.error.code == "TOOL_FAILED"
    assert len(failed.error.message.encode()) <= RESULT_TEXT_BYTES


async def test_deep_arguments_and_many_mistakes_are_short_invalid_args() -> None:
    many = json.dumps({f"bad{i}": i for i in range(10_000)} | {"n": "x"})
    deep, mistakes = await run(("strict", nested(5_000)), ("strict", many))
    assert deep.error is not None and deep.error.code == "INVALID_ARGS"
    assert "nested deeper than 64 levels" in deep.error.message
    assert mistakes.error is not None and mistakes.error.code == "INVALID_ARGS"
    assert "10000 unexpected properties" in mistakes.error.message
    assert "$.n: expected integer, got string" in mistakes.error.message
    assert len(text_of(mistakes)) < 400


async def test_an_unknown_huge_name_is_quoted_cut() -> None:
    (result,) = await run(("n" * 5_000_000, "{}"))
    assert result.error is not None and result.error.code == "UNKNOWN_TOOL"
    assert len(text_of(result)) < 300 and "characters cut]" in text_of(result)


async def test_an_exception_escaping_the_pipeline_is_still_the_calls_result() -> None:
    weird, after = await run(("weird", "{}"), ("huge", "{}"))
    assert weird.error is not None and weird.error.code == "TOOL_FAILED"
    assert "cannot even say what went wrong" in weird.error.message
    assert not after.is_error  # the step went on


# --- the agent -----------------------------------------------------------------------------------


async def test_an_internal_tool_failure_leaves_no_call_unanswered() -> None:
    def defer(args: JsonObject, ctx: ToolContext) -> JsonValue:
        # A context the log cannot hold: committing this call's result fails after the result
        # itself was logged, which stops the step with the second call not yet answered.
        bad = UnknownBlock(type="x", raw={"type": "x", "v": float("nan")})
        ctx.defer_context(
            Message(id=new_message_id(), role="user", content=(bad,), source=UserSource())
        )
        return "deferred"

    tool = ToolDefinition(
        name="defer", description="", parameters={"type": "object"}, execute=defer
    )
    provider = ScriptedProvider(
        [
            tool_calls_response([("defer", {}, "t1"), ("defer", {}, "t2")]),
            text_response("after"),
        ]
    )
    agent = Agent(
        provider=provider, model="m", tools=[tool], approval_policy=ApprovalPolicy(default="auto")
    )
    agent.followup("go")
    await agent.when_idle()
    assert agent.last_error is not None and agent.last_error.code == "NOT_LOSSLESS_JSON"  # type: ignore[attr-defined]
    events = agent.session.events
    assert check_invariants(events) == []
    results = [e for e in events if e.type == "tool/result"]
    assert [e.data.get("error") for e in results] == [
        None,
        {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"},
    ]
    agent.followup("again")
    await agent.when_idle()  # the next request is valid: every call has its result
    assert check_invariants(agent.session.events) == []
    assert agent.session.derive_messages()[-1].text() == "after"
