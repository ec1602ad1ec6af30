"""TurnFold: one turn's events into a TurnModel (statuses, usage, times, retries, slicing)."""

from __future__ import annotations

import asyncio
import itertools

from dsh_kernel import Agent, tool
from dsh_kernel.agent.retry import RetryPolicy
from dsh_kernel.ids import CallId
from dsh_kernel.llm.types import BlockStartChunk, TokenUsage, ToolCallDeltaChunk
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.testing import (
    ScriptedProvider,
    error_response,
    hang,
    max_tokens_response,
    text_response,
    tool_call_response,
    tool_calls_response,
)
from dsh_kernel.transcript.model import NoticeItem, ReasoningItem, TextItem, ToolItem
from dsh_kernel.transcript.turn import TurnFold
from dsh_kernel.views import WidgetAnswerer, find_turn, fold_turn, turn_events

from .helpers import wait_for


def ticking_clock(step: int = 10) -> object:
    counter = itertools.count(1_000_000, step)
    return lambda: next(counter)


@tool
def boom() -> str:
    """Fails."""
    raise ValueError("no luck")


@tool(read_only=True)
def echo(text: str) -> str:
    """Echo."""
    return text


async def test_a_turn_folds_into_items_usage_and_times() -> None:
    usage1 = TokenUsage(
        input_tokens=100, output_tokens=20, cache_read_tokens=400, reasoning_tokens=7
    )
    usage2 = TokenUsage(input_tokens=30, output_tokens=10, cache_read_tokens=520)
    provider = ScriptedProvider(
        [
            tool_calls_response(
                [("echo", {"text": "hi"}, "c1"), ("boom", {}, "c2")],
                reasoning="plan",
                text="Let me look.",
                usage=usage1,
            ),
            text_response("All done.", usage=usage2, pieces=3),
        ]
    )
    agent = Agent(
        provider=provider,
        model="m1",
        tools=[echo, boom],
        clock=ticking_clock(),  # type: ignore[arg-type]
    )
    agent.set_approval("auto")
    agent.followup("go")
    await agent.when_idle()
    model = fold_turn(turn_events(agent.session.events, 1))
    kinds = [type(i).__name__ for i in model.items]
    assert kinds == ["ReasoningItem", "TextItem", "ToolItem", "ToolItem", "TextItem"]
    assert model.answer == "Let me look.\n\nAll done."
    assert model.reasoning == "plan"
    c1, c2 = model.cards
    assert (c1.name, c1.status, c1.result_text, c1.arguments) == (
        "echo",
        "done",
        "hi",
        '{"text":"hi"}',
    )
    assert (c2.status, c2.error_code, c2.is_error) == ("failed", "TOOL_FAILED", True)
    assert c1.duration_ms is not None and c1.duration_ms > 0
    assert (model.provider, model.model, model.prompt, model.turn) == ("scripted", "m1", "go", 1)
    u = model.usage
    assert (
        u.requests,
        u.input_tokens,
        u.cache_read_tokens,
        u.output_tokens,
        u.reasoning_tokens,
    ) == (
        2,
        130,
        920,
        30,
        7,
    )
    assert u.context_tokens == 30 + 520 + 10
    assert model.state == "ended" and model.end_kind == "completed"
    assert model.ttft_ms is not None and model.ttft_ms > 0
    assert model.total_ms == model.ended_at - model.started_at  # type: ignore[operator]
    assert all(i.done for i in model.items if isinstance(i, TextItem | ReasoningItem))


async def test_streaming_tool_call_is_a_pending_card_then_aborted() -> None:
    prefix = [
        BlockStartChunk(index=0, block_type="tool-call"),
        ToolCallDeltaChunk(index=0, id=CallId("c9"), name="echo", arguments_delta='{"te'),
    ]
    provider = ScriptedProvider([hang(prefix)])
    agent = Agent(provider=provider, model="m", tools=[echo])
    agent.followup("go")
    await wait_for(
        lambda: (
            len(agent.session.events) > 0
            and agent.session.events[-1].type == "assistant/chunk"
            and "c9" in str(agent.session.events[-1].data)
        )
    )
    live = fold_turn(turn_events(agent.session.events, 1))
    (card,) = live.cards
    assert (card.status, card.name, card.arguments) == ("pending", "echo", '{"te')
    assert live.state == "running"
    agent.cancel()
    await agent.when_idle()
    model = fold_turn(turn_events(agent.session.events, 1))
    assert model.cards[0].status == "aborted"
    assert model.end_kind == "aborted" and model.end_reason == {
        "kind": "aborted",
        "reason": {"kind": "user"},
    }


async def test_approval_statuses() -> None:
    provider = ScriptedProvider([tool_call_response("boom", {}, call_id="c1"), text_response("ok")])
    answerer = WidgetAnswerer()
    agent = Agent(provider=provider, model="m", tools=[boom], answerer=answerer)
    agent.followup("go")
    await wait_for(lambda: answerer.pending)
    waiting = fold_turn(turn_events(agent.session.events, 1)).cards[0]
    assert waiting.status == "waiting-approval" and waiting.approval_id == answerer.pending[0]
    answerer.resolve(answerer.pending[0], "rejected")
    await agent.when_idle()
    card = fold_turn(turn_events(agent.session.events, 1)).cards[0]
    assert (card.status, card.approval_outcome, card.error_code) == ("denied", "rejected", "DENIED")


async def test_retry_discards_the_failed_attempt_and_notes_it() -> None:
    provider = ScriptedProvider(
        [
            error_response("RATE_LIMIT", "slow down", status=429, partial_text="Hel"),
            text_response("Hello", usage=TokenUsage(input_tokens=5, output_tokens=1)),
        ]
    )

    async def no_sleep(seconds: float) -> None:
        del seconds
        await asyncio.sleep(0)

    agent = Agent(provider=provider, model="m", sleep=no_sleep, retry_policy=RetryPolicy())
    agent.followup("go")
    await agent.when_idle()
    model = fold_turn(turn_events(agent.session.events, 1))
    texts = [i.text for i in model.items if isinstance(i, TextItem)]
    notices = [i.text for i in model.items if isinstance(i, NoticeItem)]
    assert texts == ["Hello"]
    assert len(notices) == 1 and "RATE_LIMIT" in notices[0] and "slow down" in notices[0]
    assert model.end_kind == "completed"


async def test_max_tokens_and_error_ends() -> None:
    provider = ScriptedProvider(
        [
            max_tokens_response("cut", tool_call=("echo", {"text": "x"})),
            error_response("AUTH", "bad key"),
        ]
    )
    agent = Agent(provider=provider, model="m", tools=[echo])
    agent.followup("one")
    await agent.when_idle()
    agent.followup("two")
    await agent.when_idle()
    first = fold_turn(turn_events(agent.session.events, 1))
    assert first.end_kind == "max-tokens"
    assert [c.status for c in first.cards] == ["aborted"]  # cut off: never ran
    second = fold_turn(turn_events(agent.session.events, 2))
    assert second.end_kind == "error"
    assert second.error is not None and (second.error.code, second.error.message) == (
        "AUTH",
        "bad key",
    )


async def test_turn_slicing_and_lookup() -> None:
    provider = ScriptedProvider([text_response("a"), text_response("b")])
    agent = Agent(provider=provider, model="m")
    first = agent.followup("one")
    await agent.when_idle()
    second = agent.followup("two")
    await agent.when_idle()
    events = list(agent.session.events)
    assert find_turn(events, first.id) == 1 and find_turn(events, second.id) == 2
    assert find_turn(events, "nope") is None
    t2 = turn_events(events, 2)
    assert t2[0].type == "turn/start" and t2[-1].type == "turn/end"
    assert all(e.seq > turn_events(events, 1)[-1].seq for e in t2)
    assert fold_turn(t2).answer == "b"
    assert fold_turn(t2, message_id=second.id).message_id == second.id
    assert [type(i) for i in fold_turn(t2).items] == [TextItem]
    assert not any(isinstance(i, ToolItem) for i in fold_turn(t2).items)


async def test_appeared_counts_what_comes_to_show_something() -> None:
    # reasoning, then text (its first delta empty), then a streamed call, then the answer after it
    provider = ScriptedProvider(
        [
            tool_calls_response([("echo", {"text": "hi"}, "c1")], reasoning="plan", text="Look."),
            text_response("All done.", pieces=3),
        ]
    )
    agent = Agent(provider=provider, model="m")
    agent.registry.register(echo)
    fold = TurnFold()
    grew: list[str] = []

    def observe(event: SessionEvent) -> None:
        before = fold.appeared
        fold.apply(event)
        if fold.appeared != before:
            chunk = event.data.get("chunk")
            kind = chunk.get("type") if isinstance(chunk, dict) else None
            grew.append(f"{event.type}:{kind}" if kind else event.type)

    agent.session.subscribe(observe)
    agent.followup("go")
    await agent.when_idle()
    assert fold.appeared == 4  # reasoning, "Look.", the card, "All done."
    assert grew == [
        "assistant/chunk:reasoning-delta",
        "assistant/chunk:text-delta",
        "assistant/chunk:tool-call-delta",
        "assistant/chunk:text-delta",
    ]
    # growth is not appearance: most of the turn's events left the count alone
    assert len(agent.session.events) > 3 * len(grew)
