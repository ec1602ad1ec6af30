"""ToolRuntime.execute: every stage of SPINE §4.3 and every error code it produces."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated

import pytest
from pydantic import AfterValidator, Field

from dsh_kernel.abort import USER_CANCEL, AbortController, AbortSignal
from dsh_kernel.errors import DshError, UsageError
from dsh_kernel.ids import ApprovalRequestId, CallId, MessageId
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import ContentBlock, Message, PluginSource, TextBlock
from dsh_kernel.tools import (
    ApprovalPolicy,
    ApprovalRequest,
    ApprovalService,
    HookAccept,
    HookAllow,
    HookAsk,
    HookBlock,
    HookDeny,
    ReplaceValue,
    ToolCall,
    ToolContext,
    ToolDefinition,
    ToolHooks,
    ToolLike,
    ToolRegistry,
    ToolResult,
    ToolRuntime,
)
from dsh_kernel.tools.decorator import tool
from dsh_kernel.tools.hooks import (
    PostDecision,
    PostExecuteHook,
    PostExecuteInput,
    PreDecision,
    PreExecuteHook,
    PreExecuteInput,
)
from dsh_kernel.tools.pipeline import lossless_problem

PARAMS: JsonObject = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}


@dataclass
class Probe:
    """Records what the tool body and its finaliser saw."""

    bodies: int = 0
    finalized: list[ToolResult] = field(default_factory=lambda: [])


def make(
    probe: Probe,
    body: Callable[[JsonObject, ToolContext], JsonValue] | None = None,
    *,
    name: str = "t",
    **kw: object,
) -> ToolDefinition:
    def execute(args: JsonObject, ctx: ToolContext) -> JsonValue:
        probe.bodies += 1
        return body(args, ctx) if body else args["n"]

    def finalize(ctx: ToolContext, result: ToolResult) -> tuple[ContentBlock, ...] | None:
        probe.finalized.append(result)
        return None

    return ToolDefinition(
        name=name,
        description="test tool",
        parameters=PARAMS,
        execute=execute,
        finalize_content=finalize,
        **kw,  # type: ignore[arg-type]
    )


def runtime(
    *defs: ToolLike,
    policy: ApprovalPolicy | None = None,
    approval: ApprovalService | None = None,
    hooks: ToolHooks | None = None,
    clock: Callable[[], int] | None = None,
) -> ToolRuntime:
    reg = ToolRegistry()
    for d in defs:
        reg.register(d)
    return ToolRuntime(reg, approval, policy or ApprovalPolicy("auto"), hooks=hooks, clock=clock)


def call(arguments: str = '{"n": 1}', name: str = "t") -> ToolCall:
    return ToolCall(call_id=CallId("c1"), name=name, arguments=arguments)


def parsed(c: ToolCall) -> JsonValue:
    try:
        return json.loads(c.arguments)
    except ValueError:
        return c.arguments


async def run(
    rt: ToolRuntime, c: ToolCall | None = None, signal: AbortSignal | None = None
) -> ToolResult:
    c = c or call()
    return await rt.execute(c, parsed(c), signal or AbortController().signal)


def text(result: ToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextBlock)
    return block.text


def code(result: ToolResult) -> str:
    assert result.is_error and result.error is not None
    assert text(result) == f"Error: {result.error.message}"
    return result.error.code


def user_message(text_: str) -> Message:
    return Message(
        id=MessageId(text_),
        role="user",
        content=(TextBlock(text=text_),),
        source=PluginSource(plugin="test"),
    )


# -- success and rendering --------------------------------------------------------------------------


async def test_success_renders_value_and_finalizes_once() -> None:
    probe = Probe()
    result = await run(runtime(make(probe)))
    assert not result.is_error and result.error is None
    assert result.value == 1 and text(result) == "1"
    assert probe.bodies == 1 and probe.finalized == [result]


async def test_default_render_is_string_as_is_else_compact_json() -> None:
    probe = Probe()
    rt = runtime(
        make(probe, lambda a, c: "plain text", name="s"),
        make(probe, lambda a, c: {"a": [1, 2.5], "b": "é"}, name="j"),
    )
    assert text(await run(rt, call(name="s"))) == "plain text"
    assert text(await run(rt, call(name="j"))) == '{"a":[1,2.5],"b":"é"}'


async def test_custom_render_and_presentation_meta() -> None:
    probe = Probe()
    defn = make(
        probe,
        lambda a, c: {"rows": 3},
        render=lambda args, value: (TextBlock(text=f"{args['n']} -> {value}"),),
        presentation_meta=lambda args, value: {"shown": value},
    )
    result = await run(runtime(defn))
    assert text(result) == "1 -> {'rows': 3}"
    assert result.meta == {"shown": {"rows": 3}}


async def test_async_body_is_awaited() -> None:
    async def body(args: JsonObject, ctx: ToolContext) -> JsonValue:
        await asyncio.sleep(0)
        return "done"

    defn = ToolDefinition(name="t", description="", parameters={"type": "object"}, execute=body)
    assert (await run(runtime(defn))).value == "done"


# -- failures before the body -----------------------------------------------------------------------


async def test_unknown_tool() -> None:
    probe = Probe()
    rt = runtime(make(probe, name="alpha"), make(probe, name="beta"))
    result = await run(rt, call(name="gamma"))
    assert code(result) == "UNKNOWN_TOOL"
    assert result.error is not None and "'gamma'" in result.error.message
    assert "alpha, beta" in result.error.message
    assert probe.bodies == 0


async def test_restricted_tool_is_unknown() -> None:
    probe = Probe()
    rt = runtime(make(probe))
    rt.registry.restrict(deny=["t"])
    assert code(await run(rt)) == "UNKNOWN_TOOL"


async def test_already_aborted_is_aborted_before_dispatch() -> None:
    probe = Probe()
    ctl = AbortController()
    ctl.abort(USER_CANCEL)
    result = await run(runtime(make(probe)), signal=ctl.signal)
    assert code(result) == "ABORTED_BEFORE_DISPATCH"
    assert text(result) == "Error: tool call aborted before dispatch"
    assert probe.bodies == 0 and probe.finalized == [result]


async def test_invalid_arguments_name_the_path() -> None:
    probe = Probe()
    result = await run(runtime(make(probe)), call('{"n": "one", "m": 2}'))
    assert code(result) == "INVALID_ARGS"
    assert result.error is not None
    assert result.error.message.startswith("invalid arguments: ")
    assert "$.n: expected integer, got string" in result.error.message
    assert "unexpected property 'm'" in result.error.message
    assert probe.bodies == 0 and len(probe.finalized) == 1


async def test_invalid_json_arguments_say_so_and_where() -> None:
    probe = Probe()
    raw = '{"n": 1,, }'
    result = await runtime(make(probe)).execute(call(raw), raw, AbortController().signal)
    assert code(result) == "INVALID_ARGS"
    assert result.error is not None
    assert "not valid JSON" in result.error.message
    assert "line 1 column 9" in result.error.message
    assert probe.bodies == 0


async def test_a_json_string_is_not_mistaken_for_invalid_json() -> None:
    probe = Probe()
    c = call('"hello"')
    result = await runtime(make(probe)).execute(c, "hello", AbortController().signal)
    assert result.error is not None and result.error.code == "INVALID_ARGS"
    assert "$: expected object, got string" in result.error.message


# -- hooks, policy, approval, guards ----------------------------------------------------------------


def pre(decision: PreDecision | None, seen: list[PreExecuteInput] | None = None) -> PreExecuteHook:
    async def hook(inp: PreExecuteInput) -> PreDecision | None:
        if seen is not None:
            seen.append(inp)
        return decision

    return hook


class Human:
    """The approval edge: answers with a scripted outcome and remembers what it was asked."""

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.asked: list[ApprovalRequest] = []
        self.was_asked = asyncio.Event()

    async def __call__(self, rid: ApprovalRequestId, req: ApprovalRequest) -> object:
        self.asked.append(req)
        self.was_asked.set()
        if self.answer == "wait":
            await asyncio.sleep(10)
        return self.answer


async def test_pre_hook_deny_wins_and_body_never_runs() -> None:
    probe = Probe()
    seen: list[PreExecuteInput] = []
    rt = runtime(
        make(probe),
        hooks=ToolHooks(pre_execute=[pre(HookDeny(reason="not today"), seen), pre(HookAllow())]),
    )
    result = await run(rt)
    assert code(result) == "DENIED" and text(result) == "Error: not today"
    assert probe.bodies == 0 and len(probe.finalized) == 1
    assert seen[0].args == {"n": 1} and seen[0].call.call_id == "c1"


async def test_policy_never_denies_even_when_a_hook_allows() -> None:
    probe = Probe()
    rt = runtime(
        make(probe), policy=ApprovalPolicy("never"), hooks=ToolHooks(pre_execute=[pre(HookAllow())])
    )
    result = await run(rt)
    assert code(result) == "DENIED"
    assert "approval policy is 'never'" in text(result)
    assert probe.bodies == 0


async def test_hook_allow_skips_the_policy_question() -> None:
    probe = Probe()
    human = Human("rejected")
    rt = runtime(
        make(probe),
        policy=ApprovalPolicy("ask"),
        approval=ApprovalService(human),
        hooks=ToolHooks(pre_execute=[pre(None), pre(HookAllow())]),
    )
    assert not (await run(rt)).is_error
    assert human.asked == []


async def test_hook_ask_asks_even_under_auto() -> None:
    probe = Probe()
    human = Human("allowed-once")
    rt = runtime(
        make(probe),
        policy=ApprovalPolicy("auto"),
        approval=ApprovalService(human),
        hooks=ToolHooks(pre_execute=[pre(HookAsk(reason="touches prod"))]),
    )
    assert (await run(rt)).value == 1
    assert human.asked == [
        ApprovalRequest(
            tool_name="t", call_id=CallId("c1"), reason="touches prod", arguments='{"n": 1}'
        )
    ]


async def test_read_only_tools_run_without_asking_by_default() -> None:
    probe = Probe()
    human = Human("rejected")
    rt = runtime(
        make(probe, read_only=True), policy=ApprovalPolicy(), approval=ApprovalService(human)
    )
    assert not (await run(rt)).is_error and human.asked == []


@pytest.mark.parametrize(
    ("answer", "timeout_s", "fragments"),
    [
        ("rejected", None, ["the user rejected this call to 't'", "Do not repeat it unchanged"]),
        ("wait", 0.02, ["timed out after 0.02 s", "change the approval policy"]),
        ("nonsense", None, ["approval unavailable", "change the approval policy"]),
    ],
)
async def test_approval_refusals_are_denied_with_actionable_text(
    answer: str, timeout_s: float | None, fragments: list[str]
) -> None:
    probe = Probe()
    rt = runtime(
        make(probe),
        policy=ApprovalPolicy("ask"),
        approval=ApprovalService(Human(answer), timeout_s=timeout_s),
    )
    result = await run(rt)
    assert code(result) == "DENIED"
    for f in fragments:
        assert f in text(result)
    assert probe.bodies == 0 and len(probe.finalized) == 1


async def test_no_approval_service_is_denied() -> None:
    probe = Probe()
    result = await run(runtime(make(probe), policy=ApprovalPolicy("ask")))
    assert code(result) == "DENIED" and "nobody can be asked" in text(result)
    assert probe.bodies == 0


# Arguments are validated before anyone is asked (a deliberate departure from SPINE §4.3): a person
# approving reads the card, so a call that could never run is not shown, and the model is told
# INVALID_ARGS (which it can fix) rather than DENIED, whatever the policy or the approver.
MALFORMED = ['{"n": 1,, }', '{"n": "one"}', '{"m": 2}', "[1, 2]"]


@pytest.mark.parametrize("raw", MALFORMED)
@pytest.mark.parametrize("answer", ["allowed-once", "rejected", "nonsense"])
async def test_invalid_arguments_are_never_shown_for_approval(raw: str, answer: str) -> None:
    probe = Probe()
    human = Human(answer)
    seen: list[PreExecuteInput] = []
    rt = runtime(
        make(probe),
        policy=ApprovalPolicy("ask"),
        approval=ApprovalService(human),
        hooks=ToolHooks(pre_execute=[pre(HookAsk(reason="check"), seen)]),
    )
    result = await run(rt, call(raw))
    assert code(result) == "INVALID_ARGS", text(result)
    assert human.asked == [] and seen == []
    assert probe.bodies == 0 and probe.finalized == [result]


@pytest.mark.parametrize("raw", MALFORMED)
@pytest.mark.parametrize("policy", [ApprovalPolicy("ask"), ApprovalPolicy("never")])
async def test_invalid_arguments_are_invalid_args_with_nobody_to_ask(
    raw: str, policy: ApprovalPolicy
) -> None:
    probe = Probe()
    result = await run(runtime(make(probe), policy=policy), call(raw))
    assert code(result) == "INVALID_ARGS", text(result)
    assert "invalid arguments" in text(result)
    assert probe.bodies == 0


coerced_calls: list[tuple[dict[str, int], int]] = []
factors_validated: list[int] = []


def _validated_factor(value: int) -> int:
    factors_validated.append(value)
    return value


@tool
def scale(
    counts: dict[str, int],
    factor: Annotated[int, Field(gt=0), AfterValidator(_validated_factor)] = 1,
) -> int:
    """Scale each count by a positive factor."""
    coerced_calls.append((counts, factor))
    return sum(counts.values()) * factor


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ('{"counts": {"a": "many"}}', "$.counts.a: expected integer, got string"),
        ('{"counts": {"a": 1}, "factor": 0}', "$.factor: Input should be greater than 0"),
        ('{"counts": {"a": 1}, "factor": -3}', "$.factor: Input should be greater than 0"),
    ],
)
async def test_everything_a_signature_says_is_checked_before_anyone_is_asked(
    raw: str, says: str
) -> None:
    """A ``dict[str, T]`` value and a pydantic constraint are checked before approval, so the
    call is INVALID_ARGS and nobody is asked (before: the Allow came first)."""
    human = Human("allowed-once")
    rt = runtime(scale, policy=ApprovalPolicy("ask"), approval=ApprovalService(human))
    result = await run(rt, call(raw, name="scale"))
    assert code(result) == "INVALID_ARGS", text(result)
    assert says in text(result)
    assert human.asked == []


async def test_a_signatures_valid_call_is_asked_and_coerced_once() -> None:
    human = Human("allowed-once")
    rt = runtime(scale, policy=ApprovalPolicy("ask"), approval=ApprovalService(human))
    coerced_calls.clear()
    factors_validated.clear()
    result = await run(rt, call('{"counts": {"a": 2, "b": 3}, "factor": 2}', name="scale"))
    assert not result.is_error, text(result)
    assert result.value == 10 and len(human.asked) == 1
    assert coerced_calls == [({"a": 2, "b": 3}, 2)]
    assert factors_validated == [2]  # pydantic ran once: before approval, not again at the call


async def test_a_valid_call_is_still_asked_with_its_arguments() -> None:
    probe = Probe()
    human = Human("rejected")
    seen: list[PreExecuteInput] = []
    rt = runtime(
        make(probe),
        policy=ApprovalPolicy("ask"),
        approval=ApprovalService(human),
        hooks=ToolHooks(pre_execute=[pre(None, seen)]),
    )
    result = await run(rt, call('{"n": 3}'))
    assert code(result) == "DENIED"
    assert [r.arguments for r in human.asked] == ['{"n": 3}']
    assert [i.args for i in seen] == [{"n": 3}]


async def test_allowed_always_runs_and_updates_the_policy() -> None:
    probe = Probe()
    policy = ApprovalPolicy("ask")
    human = Human("allowed-always")
    rt = runtime(make(probe), policy=policy, approval=ApprovalService(human, policy=policy))
    assert not (await run(rt)).is_error
    assert not (await run(rt)).is_error
    assert len(human.asked) == 1 and probe.bodies == 2


async def test_abort_while_waiting_for_approval_is_aborted() -> None:
    probe = Probe()
    ctl = AbortController()
    human = Human("wait")
    rt = runtime(make(probe), policy=ApprovalPolicy("ask"), approval=ApprovalService(human))
    task = asyncio.ensure_future(run(rt, signal=ctl.signal))
    await human.was_asked.wait()
    ctl.abort(USER_CANCEL)
    result = await task
    assert code(result) == "ABORTED" and text(result) == "Error: tool call aborted"
    assert probe.bodies == 0 and len(probe.finalized) == 1


async def test_guard_denial() -> None:
    probe = Probe()
    rt = runtime(make(probe))
    rt.registry.guard(lambda c, args: "n must be small" if args == {"n": 99} else None)
    assert not (await run(rt)).is_error
    result = await run(rt, call('{"n": 99}'))
    assert code(result) == "DENIED" and text(result) == "Error: n must be small"
    assert probe.bodies == 1


async def test_a_failing_hook_fails_closed() -> None:
    probe = Probe()

    async def broken(inp: PreExecuteInput) -> PreDecision | None:
        raise RuntimeError("hook bug")

    result = await run(runtime(make(probe), hooks=ToolHooks(pre_execute=[broken])))
    assert code(result) == "TOOL_FAILED" and "RuntimeError: hook bug" in text(result)
    assert probe.bodies == 0


# -- the body and its output ------------------------------------------------------------------------


class QuotaError(DshError):
    code = "QUOTA_EXCEEDED"


def raiser(exc: BaseException) -> Callable[[JsonObject, ToolContext], JsonValue]:
    def body(args: JsonObject, ctx: ToolContext) -> JsonValue:
        raise exc

    return body


async def test_exceptions_are_normalised() -> None:
    probe = Probe()
    foreign = await run(runtime(make(probe, raiser(ValueError("bad n")))))
    assert code(foreign) == "TOOL_FAILED"
    assert text(foreign) == "Error: ValueError: bad n"
    assert foreign.error is not None and foreign.error.name == "ValueError"

    ours = await run(runtime(make(probe, raiser(QuotaError("quota used up; retry tomorrow")))))
    assert code(ours) == "QUOTA_EXCEEDED"
    assert text(ours) == "Error: quota used up; retry tomorrow"
    assert ours.error is not None and ours.error.name == "QuotaError"
    assert len(probe.finalized) == 2


class Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (math.nan, "$: nan is not finite"),
        ({"x": [1, math.inf]}, "$.x[1]: inf is not finite"),
        ({"z": -0.0}, "$.z: -0.0"),
        ({"t": (1, 2)}, "$.t: tuple values are not allowed"),
        ([{1, 2}], "$[0]: set values are not allowed"),
        ({"b": b"raw"}, "$.b: bytes values are not allowed"),
        ({1: "one"}, "$: key 1 is not a string"),
        ({"o": Opaque()}, "$.o: Opaque values are not allowed"),
    ],
)
async def test_non_json_output_is_invalid_tool_output(value: object, fragment: str) -> None:
    probe = Probe()
    result = await run(runtime(make(probe, lambda a, c: value)))  # type: ignore[arg-type,return-value]
    assert code(result) == "INVALID_TOOL_OUTPUT"
    assert fragment in text(result)
    assert result.value is None


def test_circular_output_is_reported() -> None:
    loop: list[object] = []
    loop.append(loop)
    assert lossless_problem({"a": loop}) == "$.a[0]: a cycle"
    shared = [1]
    assert lossless_problem({"a": shared, "b": shared}) is None


async def test_output_schema_is_enforced() -> None:
    probe = Probe()
    defn = make(
        probe,
        lambda a, c: {"count": "many"},
        output_schema={
            "type": "object",
            "properties": {"count": {"type": "integer"}},
            "required": ["count"],
        },
    )
    result = await run(runtime(defn))
    assert code(result) == "INVALID_TOOL_OUTPUT"
    assert "does not match its output schema: $.count: expected integer, got string" in text(result)


async def test_non_json_presentation_meta_is_invalid_output() -> None:
    probe = Probe()
    defn = make(probe, presentation_meta=lambda args, value: {"when": (1, 2)})
    result = await run(runtime(defn))
    assert code(result) == "INVALID_TOOL_OUTPUT" and "meta.when" in text(result)


async def test_presentation_meta_that_is_not_an_object_is_invalid_output() -> None:
    probe = Probe()
    defn = make(probe, presentation_meta=lambda args, value: [value])
    result = await run(runtime(defn))
    assert code(result) == "INVALID_TOOL_OUTPUT"
    assert "presentation meta of 't' must be a JSON object (or None), not list" in text(result)


class SteppedClock:
    """Milliseconds that move only when told to (the clock is the faked edge)."""

    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


async def test_the_body_alone_is_timed_not_the_wait_for_approval() -> None:
    clock = SteppedClock()

    class SlowHuman(Human):
        async def __call__(self, rid: ApprovalRequestId, req: ApprovalRequest) -> object:
            clock.now += 5_000  # the user takes five seconds to click
            return await super().__call__(rid, req)

    def body(args: JsonObject, ctx: ToolContext) -> JsonValue:
        clock.now += 250
        if args["n"] == 0:
            raise ValueError("zero")
        return args["n"]

    probe = Probe()
    rt = runtime(
        make(probe, body),
        policy=ApprovalPolicy("ask"),
        approval=ApprovalService(SlowHuman("allowed-once")),
        clock=clock,
    )
    done = await run(rt)
    assert not done.is_error and done.duration_ms == 250
    failed = await run(rt, call('{"n": 0}'))
    assert code(failed) == "TOOL_FAILED" and failed.duration_ms == 250  # timed whatever the outcome
    refused = runtime(
        make(probe, body),
        policy=ApprovalPolicy("ask"),
        approval=ApprovalService(SlowHuman("rejected")),
        clock=clock,
    )
    denied = await run(refused)
    assert code(denied) == "DENIED" and denied.duration_ms is None  # the body never started
    assert probe.bodies == 2


async def test_timeout_stops_the_body() -> None:
    probe = Probe()
    seen: list[AbortSignal] = []
    stopped = asyncio.Event()

    async def slow(args: JsonObject, ctx: ToolContext) -> JsonValue:
        seen.append(ctx.signal)
        try:
            await asyncio.sleep(10)
        finally:
            stopped.set()
        return 1

    defn = ToolDefinition(
        name="t",
        description="",
        parameters={"type": "object"},
        execute=slow,
        timeout_ms=20,
        finalize_content=lambda ctx, r: probe.finalized.append(r),
    )
    result = await run(runtime(defn))
    assert code(result) == "TIMEOUT"
    assert "timed out after 20 ms" in text(result)
    assert stopped.is_set() and seen[0].aborted
    assert len(probe.finalized) == 1


async def test_a_body_raising_timeout_error_is_not_our_timeout() -> None:
    probe = Probe()
    result = await run(runtime(make(probe, raiser(TimeoutError("upstream slow")), timeout_ms=5000)))
    assert code(result) == "TOOL_FAILED" and "TimeoutError: upstream slow" in text(result)


# -- post-execute hooks -----------------------------------------------------------------------------


def post(
    decision: PostDecision | None, seen: list[PostExecuteInput] | None = None
) -> PostExecuteHook:
    async def hook(inp: PostExecuteInput) -> PostDecision | None:
        if seen is not None:
            seen.append(inp)
        return decision

    return hook


async def test_post_accept_replaces_content() -> None:
    probe = Probe()
    seen: list[PostExecuteInput] = []
    hooks = ToolHooks(post_execute=[post(HookAccept(content=(TextBlock(text="redacted"),)), seen)])
    result = await run(runtime(make(probe), hooks=hooks))
    assert text(result) == "redacted" and result.value == 1
    assert seen[0].result.value == 1 and seen[0].args == {"n": 1}


async def test_post_accept_replaces_value_and_rerenders() -> None:
    probe = Probe()
    hooks = ToolHooks(
        post_execute=[
            post(
                HookAccept(
                    value=ReplaceValue(value={"n": 2}), additional_contexts=(user_message("note"),)
                )
            )
        ]
    )
    result = await run(runtime(make(probe), hooks=hooks))
    assert result.value == {"n": 2} and text(result) == '{"n":2}'
    assert [m.text() for m in result.additional_contexts] == ["note"]


async def test_post_accept_with_a_bad_value_is_invalid_output() -> None:
    probe = Probe()
    hooks = ToolHooks(post_execute=[post(HookAccept(value=ReplaceValue(value=math.nan)))])
    assert code(await run(runtime(make(probe), hooks=hooks))) == "INVALID_TOOL_OUTPUT"


def test_post_accept_cannot_replace_both() -> None:
    with pytest.raises(ValueError, match="not both"):
        HookAccept(content=(), value=ReplaceValue(value=1))


async def test_post_block_turns_success_into_feedback() -> None:
    probe = Probe()
    hooks = ToolHooks(
        post_execute=[
            post(HookBlock(feedback="output leaked a secret; rerun with redact=true")),
            post(None),
        ]
    )
    result = await run(runtime(make(probe), hooks=hooks))
    assert code(result) == "BLOCKED"
    assert text(result) == "Error: output leaked a secret; rerun with redact=true"
    assert probe.finalized == [result]


# -- abort, contexts, conclude, finalize ------------------------------------------------------------


async def test_late_abort_turns_success_into_aborted() -> None:
    probe = Probe()
    ctl = AbortController()

    def body(args: JsonObject, ctx: ToolContext) -> JsonValue:
        ctl.abort(USER_CANCEL)  # the user pressed Stop while the body ran
        assert ctx.signal.aborted  # the body's signal follows the caller's
        return "finished anyway"

    result = await run(runtime(make(probe, body)), signal=ctl.signal)
    assert code(result) == "ABORTED" and text(result) == "Error: tool call aborted"
    assert probe.finalized == [result]


async def test_cancellation_with_aborted_signal_becomes_aborted_result() -> None:
    probe = Probe()
    ctl = AbortController()
    started = asyncio.Event()
    cleaned = asyncio.Event()

    async def body(args: JsonObject, ctx: ToolContext) -> JsonValue:
        started.set()
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.set()
        return 1

    defn = ToolDefinition(
        name="t",
        description="",
        parameters={"type": "object"},
        execute=body,
        finalize_content=lambda ctx, r: probe.finalized.append(r),
    )
    task = asyncio.ensure_future(run(runtime(defn), signal=ctl.signal))
    await started.wait()
    ctl.abort(USER_CANCEL)
    task.cancel()
    result = await task
    assert code(result) == "ABORTED" and cleaned.is_set()
    assert len(probe.finalized) == 1


async def test_foreign_cancellation_propagates() -> None:
    started = asyncio.Event()

    async def body(args: JsonObject, ctx: ToolContext) -> JsonValue:
        started.set()
        await asyncio.sleep(10)
        return 1

    defn = ToolDefinition(name="t", description="", parameters={"type": "object"}, execute=body)
    task = asyncio.ensure_future(run(runtime(defn)))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_deferred_context_and_conclude_turn() -> None:
    probe = Probe()
    kept: list[ToolContext] = []

    def body(args: JsonObject, ctx: ToolContext) -> JsonValue:
        kept.append(ctx)
        ctx.defer_context(user_message("look at the plot"))
        ctx.conclude_turn()
        return "ok"

    result = await run(runtime(make(probe, body)))
    assert result.concludes_turn is True
    assert [m.text() for m in result.additional_contexts] == ["look at the plot"]
    with pytest.raises(UsageError, match="settled"):
        kept[0].defer_context(user_message("too late"))
    with pytest.raises(UsageError, match="user message"):
        ToolContext(call_id=CallId("x"), name="t", signal=AbortController().signal).defer_context(
            Message(
                id=MessageId("m"), role="assistant", content=(), source=PluginSource(plugin="p")
            )
        )


async def test_failure_never_concludes_but_keeps_deferred_context() -> None:
    probe = Probe()

    def body(args: JsonObject, ctx: ToolContext) -> JsonValue:
        ctx.defer_context(user_message("partial"))
        ctx.conclude_turn()
        raise RuntimeError("then it broke")

    result = await run(runtime(make(probe, body)))
    assert result.is_error and result.concludes_turn is False
    assert [m.text() for m in result.additional_contexts] == ["partial"]


async def test_finalize_may_replace_content_and_may_not_fail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []

    def replace_it(ctx: ToolContext, result: ToolResult) -> tuple[ContentBlock, ...] | None:
        calls.append("replace")
        return (TextBlock(text=f"final: {result.value}"),)

    def broken(ctx: ToolContext, result: ToolResult) -> tuple[ContentBlock, ...] | None:
        calls.append("broken")
        raise RuntimeError("finaliser bug")

    base = {"description": "", "parameters": {"type": "object"}, "execute": lambda a, c: 7}
    good = ToolDefinition(name="good", finalize_content=replace_it, **base)
    bad = ToolDefinition(name="bad", finalize_content=broken, **base)
    rt = runtime(good, bad)
    assert text(await run(rt, call("{}", "good"))) == "final: 7"
    result = await run(rt, call("{}", "bad"))
    assert not result.is_error and text(result) == "7"
    assert calls == ["replace", "broken"]


async def test_allowed_always_updates_the_runtime_policy_when_the_service_has_none() -> None:
    probe = Probe()
    policy = ApprovalPolicy("ask")
    service = ApprovalService(Human("allowed-always"))
    rt = runtime(make(probe), policy=policy, approval=service)
    assert service.policy is policy
    assert not (await run(rt)).is_error
    assert policy.tools == {"t": "auto"}


def test_runtime_and_service_must_share_one_policy() -> None:
    with pytest.raises(UsageError, match="share one policy"):
        runtime(policy=ApprovalPolicy(), approval=ApprovalService(policy=ApprovalPolicy()))
