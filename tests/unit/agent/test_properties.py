"""Property: after any random sequence of followup / steer / inject / cancel over a scripted
provider, the log passes the invariants checker, and crash repair of *every* prefix of the log yields
a log that passes it too and keeps every event of the prefix."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Iterable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_kernel import Agent, tool
from dsh_kernel.abort import AbortCause
from dsh_kernel.errors import LlmError
from dsh_kernel.llm.types import GenerateRequest, LlmFailure, StreamChunk
from dsh_kernel.session.check.invariants import assert_invariants, check_invariants
from dsh_kernel.session.repair import repair
from dsh_kernel.testing import (
    FunctionProvider,
    error_response,
    max_tokens_response,
    text_response,
    tool_calls_response,
)
from dsh_kernel.tools.approval import ApprovalPolicy


@tool(read_only=True)
def echo(text: str) -> str:
    """Echo the text."""
    return text


@tool(read_only=True)
async def nap() -> str:
    """Sleep a moment (cancellable)."""
    await asyncio.sleep(0.002)
    return "rested"


RESPONSES = st.sampled_from(["text", "tools", "bad-tool", "max", "error", "slow", "raise"])
OPS = st.lists(
    st.tuples(
        st.sampled_from(["followup", "steer", "inject", "cancel", "cancel-keep", "yield", "idle"]),
        st.integers(min_value=0, max_value=3),
    ),
    min_size=1,
    max_size=12,
)


def _respond(kind: str, n: int) -> Iterable[StreamChunk]:
    match kind:
        case "text":
            return text_response(f"answer {n}", pieces=3)
        case "tools":
            return tool_calls_response([("echo", {"text": f"e{n}"}), ("nap", {})])
        case "bad-tool":
            return tool_calls_response([("missing_tool", {}), ("echo", '{"text": ')])
        case "max":
            return max_tokens_response("cut", tool_call=("echo", {"text": "x"}))
        case "error":
            return error_response("INVALID_REQUEST", "bad", status=400, partial_text="par")
        case _:
            return text_response("slow", pieces=8)


async def _scenario(responses: list[str], ops: list[tuple[str, int]]) -> Agent:
    counter = itertools.count()
    cycle = itertools.cycle(responses)

    async def fn(_req: GenerateRequest):
        n = next(counter)
        kind = next(cycle)
        if kind == "raise":
            raise LlmError(LlmFailure(code="INVALID_REQUEST", message="refused"))
        for c in _respond(kind, n):
            if kind == "slow":
                await asyncio.sleep(0.001)
            yield c

    agent = Agent(
        provider=FunctionProvider(fn),
        model="m",
        tools=[echo, nap],
        approval_policy=ApprovalPolicy(default="auto"),
        max_steps_per_turn=4,
    )
    for i, (op, spins) in enumerate(ops):
        match op:
            case "followup":
                agent.followup(f"follow {i}")
            case "steer":
                agent.steer(f"steer {i}")
            case "inject":
                agent.inject(f"inject {i}")
            case "cancel":
                agent.cancel()
            case "cancel-keep":
                agent.cancel(AbortCause(kind="hook", reason="prop"), keep_inbox=True)
            case "idle":
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(agent.when_idle()), 0.2)
            case _:
                pass
        for _ in range(spins):
            await asyncio.sleep(0)
    agent.cancel()
    await asyncio.wait_for(agent.when_idle(), 10)
    return agent


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(responses=st.lists(RESPONSES, min_size=1, max_size=5), ops=OPS)
def test_random_operations_keep_the_log_valid_and_repairable(
    responses: list[str], ops: list[tuple[str, int]]
) -> None:
    agent = asyncio.run(_scenario(responses, ops))
    events = list(agent.session.events)
    assert_invariants(events)
    assert agent.status == "idle"
    for n in range(len(events) + 1):
        prefix = events[:n]
        repaired = repair(prefix)
        assert repaired[:n] == prefix
        assert check_invariants(repaired) == [], (n, check_invariants(repaired))
