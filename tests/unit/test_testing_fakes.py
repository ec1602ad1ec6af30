"""The public fakes in ``dsh_kernel.testing``: script entries, recording, cancellation, builders."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterable

import pytest

from dsh_kernel.agent.agent import Agent
from dsh_kernel.errors import LlmError, UsageError
from dsh_kernel.ids import CallId
from dsh_kernel.llm.assembler import BlockAssembler
from dsh_kernel.llm.invariants import check_stream
from dsh_kernel.llm.provider import Provider, stream_call
from dsh_kernel.llm.types import (
    BlockEndChunk,
    FinishChunk,
    FinishError,
    FinishMaxTokens,
    FinishStop,
    FinishToolCalls,
    GenerateRequest,
    LlmCallConfig,
    LlmFailure,
    ModelInfo,
    ReasoningBlock,
    StreamChunk,
    TextBlock,
    TextDeltaChunk,
    TokenUsage,
    ToolCallBlock,
    ToolCallDeltaChunk,
    UsageChunk,
)
from dsh_kernel.testing import (
    DEFAULT_HANG_PREFIX,
    FakeClock,
    FunctionProvider,
    ScriptedProvider,
    error_response,
    hang,
    max_tokens_response,
    raise_after,
    text_response,
    tool_call_response,
    tool_calls_response,
)


def request(model: str = "m") -> GenerateRequest:
    return GenerateRequest(provider="scripted", model=model, messages=())


async def collect(stream: AsyncIterator[StreamChunk]) -> list[StreamChunk]:
    return [chunk async for chunk in stream]


def assembled(chunks: Iterable[StreamChunk]) -> BlockAssembler:
    asm = BlockAssembler()
    for chunk in chunks:
        asm.push(chunk)
    return asm


FAILURE = LlmFailure(code="TRANSPORT", message="connection reset")

# --- ScriptedProvider ------------------------------------------------------------------------------


async def test_entries_are_consumed_in_order_and_requests_recorded() -> None:
    first, second = text_response("one"), text_response("two")
    provider = ScriptedProvider([first])
    provider.push(second)
    assert provider.remaining == 2
    r1, r2 = request("a"), request("b")
    assert await collect(provider.stream(r1)) == first
    assert await collect(provider.stream(r2)) == second
    assert provider.requests == [r1, r2]
    assert provider.remaining == 0
    provider.assert_consumed()


async def test_exhausted_script_raises_usage_error_and_records_the_request() -> None:
    provider = ScriptedProvider([text_response("only")])
    await collect(provider.stream(request()))
    with pytest.raises(UsageError, match="script exhausted after 1 requests"):
        provider.stream(request())
    assert len(provider.requests) == 2


async def test_exhaustion_propagates_through_stream_call_and_ends_the_agent_turn() -> None:
    """What the module docstring says running out of script does."""
    provider = ScriptedProvider([text_response("only")])
    await collect(stream_call(provider, request()))
    with pytest.raises(UsageError, match="script exhausted after 1 requests"):
        await collect(stream_call(provider, request()))  # not folded into a finish chunk
    agent = Agent(provider=ScriptedProvider([text_response("one")]), model="m")
    for prompt in ("first", "second"):
        agent.followup(prompt)
        await agent.when_idle()
    assert isinstance(agent.last_error, UsageError) and agent.status == "idle"
    ends = [e.data for e in agent.session.events if e.type == "turn/end"]
    assert ends[0]["reason"] == {"kind": "completed"}
    error = ends[1]["reason"]["error"]  # type: ignore[index]
    assert error == {
        "code": "USAGE",
        "message": "ScriptedProvider: script exhausted after 1 requests",
    }


def test_assert_consumed_fails_with_leftovers() -> None:
    provider = ScriptedProvider([text_response("a"), text_response("b")])
    with pytest.raises(AssertionError, match="2 script entries not consumed"):
        provider.assert_consumed()


def test_provider_protocol_identity_and_model_info() -> None:
    info = ModelInfo(context_window=1000, default_max_tokens=100)
    provider = ScriptedProvider(id="fake", info=info)
    assert isinstance(provider, Provider)
    assert provider.id == "fake"
    assert provider.model_info("anything") == info
    assert ScriptedProvider().model_info("x") == ModelInfo()
    assert ScriptedProvider().id == "scripted"
    config = LlmCallConfig(provider="fake", model="m")
    assert provider.prepare_call(config).config == config


async def test_callable_entries_may_be_sync_or_async_and_see_the_request() -> None:
    def sync_fn(req: GenerateRequest) -> list[StreamChunk]:
        return text_response(f"sync {req.model}")

    async def async_fn(req: GenerateRequest) -> AsyncIterator[StreamChunk]:
        for chunk in text_response(f"async {req.model}"):
            yield chunk

    provider = ScriptedProvider([sync_fn, async_fn])
    one = assembled(await collect(provider.stream(request("x"))))
    two = assembled(await collect(provider.stream(request("y"))))
    assert one.blocks() == (TextBlock(text="sync x"),)
    assert two.blocks() == (TextBlock(text="async y"),)


async def test_llm_error_entry_raises_before_any_chunk() -> None:
    provider = ScriptedProvider([LlmError(FAILURE)])
    seen: list[StreamChunk] = []
    with pytest.raises(LlmError) as info:
        async for chunk in provider.stream(request()):
            seen.append(chunk)
    assert info.value.failure == FAILURE
    assert seen == []


async def test_llm_error_entry_becomes_a_finish_error_through_stream_call() -> None:
    provider = ScriptedProvider([LlmError(FAILURE)])
    assert await collect(stream_call(provider, request())) == [
        FinishChunk(reason=FinishError(failure=FAILURE))
    ]


async def test_raise_after_streams_chunks_then_raises() -> None:
    prefix = [TextDeltaChunk(index=0, text="par"), TextDeltaChunk(index=0, text="tial")]
    provider = ScriptedProvider([raise_after(prefix, LlmError(FAILURE))])
    seen: list[StreamChunk] = []
    with pytest.raises(LlmError):
        async for chunk in provider.stream(request()):
            seen.append(chunk)
    assert seen == prefix
    assert assembled(seen).interrupted_blocks() == (TextBlock(text="partial"),)


class _Consumer:
    """Consumes a stream in its own task; ``reached(n)`` fires once ``n`` chunks have arrived."""

    def __init__(self, stream: AsyncIterator[StreamChunk]) -> None:
        self.seen: list[StreamChunk] = []
        self._want = 0
        self._reached = asyncio.Event()
        self.task = asyncio.create_task(self._run(stream))

    async def _run(self, stream: AsyncIterator[StreamChunk]) -> None:
        async for chunk in stream:
            self.seen.append(chunk)
            if len(self.seen) >= self._want:
                self._reached.set()

    async def reached(self, count: int) -> None:
        self._want = count
        if len(self.seen) < count:
            self._reached.clear()
            await asyncio.wait_for(self._reached.wait(), timeout=5)


async def test_hang_streams_the_prefix_then_waits_for_cancellation() -> None:
    provider = ScriptedProvider([hang()])
    consumer = _Consumer(provider.stream(request()))
    await consumer.reached(len(DEFAULT_HANG_PREFIX))
    task, seen = consumer.task, consumer.seen
    for _ in range(20):
        await asyncio.sleep(0)
    assert not task.done()
    assert seen == list(DEFAULT_HANG_PREFIX)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert provider.cancellations == 1
    assert assembled(seen).interrupted_blocks() == (TextBlock(text="partial"),)


async def test_hang_with_custom_prefix() -> None:
    prefix = text_response("whole answer")[:-1]  # everything but the finish
    provider = ScriptedProvider([hang(prefix)])
    consumer = _Consumer(provider.stream(request()))
    await consumer.reached(len(prefix))
    task, seen = consumer.task, consumer.seen
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == prefix


async def test_hang_late_keeps_running_after_cancellation() -> None:
    provider = ScriptedProvider([hang(late_ms=80)])
    consumer = _Consumer(provider.stream(request()))
    await consumer.reached(len(DEFAULT_HANG_PREFIX))
    task = consumer.task
    loop = asyncio.get_running_loop()
    cancelled_at = loop.time()
    task.cancel()
    await asyncio.sleep(0.02)
    assert not task.done()  # still "noticing" the abort
    with pytest.raises(asyncio.CancelledError):
        await task
    assert loop.time() - cancelled_at >= 0.075
    assert provider.cancellations == 1


def test_hang_rejects_negative_lateness() -> None:
    with pytest.raises(UsageError):
        hang(late_ms=-1)


async def test_streams_yield_between_chunks_so_cancellation_lands_mid_stream() -> None:
    chunks = text_response("x" * 200, pieces=200)
    provider = ScriptedProvider([chunks])
    consumer = _Consumer(provider.stream(request()))
    task, seen = consumer.task, consumer.seen
    for _ in range(10):
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert 0 < len(seen) < len(chunks)
    assert seen == chunks[: len(seen)]
    assert provider.cancellations == 1


# --- FunctionProvider ------------------------------------------------------------------------------


async def test_function_provider_answers_every_request_and_records_them() -> None:
    async def answer(req: GenerateRequest) -> AsyncIterator[StreamChunk]:
        for chunk in text_response(f"echo {len(provider.requests)}"):
            yield chunk

    provider = FunctionProvider(answer, info=ModelInfo(context_window=7))
    assert provider.id == "function"
    assert isinstance(provider, Provider)
    assert provider.model_info("m").context_window == 7
    for n in (1, 2, 3):
        out = assembled(await collect(provider.stream(request())))
        assert out.blocks() == (TextBlock(text=f"echo {n}"),)
    assert len(provider.requests) == 3

    sync_provider = FunctionProvider(lambda req: text_response(req.model), id="fn")
    out = assembled(await collect(sync_provider.stream(request("model-z"))))
    assert out.blocks() == (TextBlock(text="model-z"),)
    assert sync_provider.id == "fn"


# --- builders --------------------------------------------------------------------------------------


def test_text_response_shape() -> None:
    usage = TokenUsage(input_tokens=5, output_tokens=3)
    chunks = text_response("hello world", reasoning="hmm", usage=usage, pieces=3)
    check_stream(chunks)
    deltas = [c for c in chunks if isinstance(c, TextDeltaChunk)]
    assert len(deltas) == 3 and "".join(d.text for d in deltas) == "hello world"
    assert chunks[-2:] == [UsageChunk(usage=usage), FinishChunk(reason=FinishStop())]
    asm = assembled(chunks)
    assert asm.blocks() == (ReasoningBlock(text="hmm"), TextBlock(text="hello world"))
    assert asm.usage == usage
    assert chunks[-1] == FinishChunk(reason=FinishStop())
    with pytest.raises(UsageError):
        text_response("x", pieces=0)


def test_tool_call_response_splits_arguments_across_two_deltas() -> None:
    chunks = tool_call_response("read", {"path": "a.txt", "n": 2}, call_id="c7", text="Reading.")
    check_stream(chunks)
    deltas = [c for c in chunks if isinstance(c, ToolCallDeltaChunk)]
    assert len(deltas) == 2
    assert all(d.id == "c7" for d in deltas) and deltas[0].name == "read"
    assert all(d.arguments_delta for d in deltas)
    raw = "".join(d.arguments_delta for d in deltas)
    assert json.loads(raw) == {"path": "a.txt", "n": 2}
    asm = assembled(chunks)
    assert asm.finish == FinishToolCalls()
    assert asm.blocks() == (
        TextBlock(text="Reading."),
        ToolCallBlock(id=CallId("c7"), name="read", arguments=raw),
    )


def test_tool_call_response_keeps_raw_string_arguments_verbatim() -> None:
    chunks = tool_call_response("run", '{"code": "1 + 1"}', call_id="c1")
    assert assembled(chunks).blocks()[0] == ToolCallBlock(
        id=CallId("c1"), name="run", arguments='{"code": "1 + 1"}'
    )


def test_default_call_ids_are_unique_and_well_formed() -> None:
    ids = {
        b.id
        for _ in range(3)
        for b in assembled(tool_call_response("t", {})).blocks()
        if isinstance(b, ToolCallBlock)
    }
    assert len(ids) == 3
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", i) for i in ids)


def test_tool_calls_response_several_calls_in_one_step() -> None:
    chunks = tool_calls_response(
        [("a", {"x": 1}, "id-a"), ("b", "{}")], text="two calls", reasoning="plan"
    )
    check_stream(chunks)
    blocks = assembled(chunks).blocks()
    assert [b.type for b in blocks] == ["reasoning", "text", "tool-call", "tool-call"]
    calls = [b for b in blocks if isinstance(b, ToolCallBlock)]
    assert calls[0] == ToolCallBlock(id=CallId("id-a"), name="a", arguments='{"x":1}')
    assert calls[1].name == "b" and calls[1].arguments == "{}"
    indices = sorted({c.index for c in chunks if isinstance(c, BlockEndChunk)})
    assert indices == [0, 1, 2, 3]


def test_max_tokens_response_truncates_and_the_call_is_dropped() -> None:
    chunks = max_tokens_response("cut sh", tool_call=("write", {"path": "long.txt"}))
    check_stream(chunks)
    assert any(isinstance(c, ToolCallDeltaChunk) for c in chunks)
    asm = assembled(chunks)
    assert asm.finish == FinishMaxTokens()
    assert asm.blocks() == (TextBlock(text="cut sh"),)
    assert assembled(max_tokens_response("only text")).blocks() == (TextBlock(text="only text"),)


def test_error_response_carries_the_failure_and_partial_text() -> None:
    chunks = error_response(
        "RATE_LIMIT", "slow down", status=429, retry_after_ms=1500, partial_text="I was say"
    )
    check_stream(chunks)
    asm = assembled(chunks)
    assert asm.finish == FinishError(
        failure=LlmFailure(
            code="RATE_LIMIT", message="slow down", status=429, provider_retry_after_ms=1500
        )
    )
    assert asm.interrupted_blocks() == (TextBlock(text="I was say"),)
    assert error_response("SERVER", "boom") == [
        FinishChunk(reason=FinishError(failure=LlmFailure(code="SERVER", message="boom")))
    ]


def test_fake_clock_reads_advance_and_sleeps_are_recorded_not_waited() -> None:
    clock = FakeClock(start=100, step_ms=5)
    assert (clock(), clock()) == (105, 110)
    loop = asyncio.new_event_loop()
    try:
        started = loop.time()
        loop.run_until_complete(clock.sleep(3600))
        loop.run_until_complete(clock.sleep(0.25))
        assert loop.time() - started < 60  # an hour asked for, not waited
    finally:
        loop.close()
    assert clock.slept == [3600, 0.25]
    assert clock() == 110 + 3_600_000 + 250 + 5


@pytest.mark.parametrize("seconds", [-1.0, float("nan"), float("inf")])
async def test_fake_clock_refuses_a_sleep_no_backoff_asks_for(seconds: float) -> None:
    clock = FakeClock()
    with pytest.raises(UsageError, match="finite and >= 0"):
        await clock.sleep(seconds)
    assert clock.slept == []
    with pytest.raises(UsageError, match="step_ms"):
        FakeClock(step_ms=-1)


async def test_fake_clock_drives_an_agent_s_event_times_and_its_retry_backoff() -> None:
    clock = FakeClock(start=1_000)
    provider = ScriptedProvider(
        [
            error_response("RATE_LIMIT", "slow down", status=429, retry_after_ms=1500),
            text_response("ok"),
        ]
    )
    agent = Agent(provider=provider, model="m", clock=clock, sleep=clock.sleep)
    agent.followup("hi")
    await agent.when_idle()
    assert clock.slept == [1.5]
    times = [e.time for e in agent.session.events]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert times[0] > 1_000 and times[-1] >= 1_000 + 1_500
