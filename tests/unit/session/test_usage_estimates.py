"""Usage the server did not send is estimated with the token meter's heuristic, never counted as zero,
and its cost is unknown (issue 12, item 9)."""

from __future__ import annotations

import math

from dsh_kernel.ids import CallId, MessageId
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.codec import message_from_json, message_to_json
from dsh_kernel.llm.estimate import message_tokens
from dsh_kernel.llm.types import (
    ImageBlock,
    Message,
    ModelInfo,
    ModelSource,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSource,
    UserSource,
)
from dsh_kernel.session.usage import (
    UsageTotals,
    streamed_tokens,
    usage_totals,
)
from tests.unit.session.scripts import new_session

MESSAGES = (
    Message(
        id=MessageId("m1"),
        role="user",
        content=(TextBlock(text="What is in the frame? " * 7),),
        source=UserSource(),
    ),
    Message(
        id=MessageId("m2"),
        role="assistant",
        content=(
            ReasoningBlock(text="look at the columns first", signature="sig"),
            TextBlock(text="Let me look."),
            ToolCallBlock(id=CallId("c1"), name="python", arguments='{"code": "df.head()"}'),
        ),
        source=ModelSource(provider="p", model="m"),
    ),
    Message(
        id=MessageId("m3"),
        role="user",
        content=(
            ToolResultBlock(
                tool_call_id=CallId("c1"),
                content=(TextBlock(text="   a  b\n0  1  2"), TextBlock(text="(1 row)")),
                is_error=False,
            ),
        ),
        source=ToolSource(call_id=CallId("c1")),
    ),
    Message(
        id=MessageId("m4"),
        role="assistant",
        content=(),
        source=ModelSource(provider="p", model="m"),
    ),
)


def _chunk(turn: int, step: int, chunk: JsonObject) -> JsonObject:
    return {"turn": turn, "step": step, "chunk": chunk}


def test_a_finished_call_without_usage_is_estimated_and_its_cost_unknown() -> None:
    s = new_session()
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    prompt = message_to_json(MESSAGES[0])
    s.append("user/message", prompt, surface_op="append")
    c1 = s.append("assistant/chunk", _chunk(1, 1, {"type": "text-delta", "index": 0, "text": "Hi"}))
    s.append("assistant/chunk", _chunk(1, 1, {"type": "finish", "reason": {"kind": "stop"}}))
    answer = message_to_json(
        Message(
            id=MessageId("a1"),
            role="assistant",
            content=(TextBlock(text="Hi"),),
            source=ModelSource(provider="p", model="m"),
        )
    )
    s.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": answer},
        surface_op="append",
        source_event_seqs=[c1.seq],
    )
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    totals = usage_totals(s.events)
    assert totals.requests == 1 and totals.estimated_requests == 1
    assert totals.input_tokens == message_tokens(MESSAGES[0])
    assert totals.output_tokens == message_tokens(message_from_json(answer)) > 0
    priced = ModelInfo(input_price_per_mtok=1.0, output_price_per_mtok=2.0)
    assert totals.cost(priced) is None
    text = totals.describe(priced)
    assert "estimated for 1 request" in text and "cost unknown" in text and "$" not in text
    free = ModelInfo(input_price_per_mtok=0.0, output_price_per_mtok=0.0)
    assert totals.cost(free) == 0.0


def test_reported_usage_is_not_estimated_and_a_failed_call_has_no_counts() -> None:
    s = new_session()
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    s.append("user/message", message_to_json(MESSAGES[0]), surface_op="append")
    fail: JsonObject = {"kind": "error", "failure": {"code": "RATE_LIMIT", "message": "slow down"}}
    s.append("assistant/chunk", _chunk(1, 1, {"type": "finish", "reason": fail}))
    s.append("llm/retry-started", {"retryId": "r", "turn": 1, "step": 1, "retry": 1})
    s.append(
        "assistant/chunk",
        _chunk(1, 1, {"type": "usage", "usage": {"inputTokens": 40, "outputTokens": 3}}),
    )
    s.append("assistant/chunk", _chunk(1, 1, {"type": "finish", "reason": {"kind": "stop"}}))
    totals = usage_totals(s.events)
    assert totals == UsageTotals(requests=2, input_tokens=40, output_tokens=3)
    assert totals.cost(ModelInfo(input_price_per_mtok=1.0, output_price_per_mtok=1.0)) is not None


def test_images_are_estimated_as_the_meter_estimates_them() -> None:
    # a big image counts its pixels; a small one with a long description counts the description
    big = ImageBlock(
        sha256="a" * 64,
        media_type="image/png",
        width=1024,
        height=768,
        size=88_000,
        description="Figure: 1 axes",
    )
    small = ImageBlock(
        sha256="b" * 64,
        media_type="image/png",
        width=8,
        height=8,
        size=90,
        description="Figure: " + "a long legend, " * 40,
    )
    one = Message(id=MessageId("x"), role="user", content=(big,), source=UserSource())
    assert message_tokens(one) == 1024 * 768 // 750 + 4 + 4
    assert message_tokens(
        Message(
            id=MessageId("u"),
            role="user",
            content=(TextBlock(text="see"), big, small),
            source=UserSource(),
        )
    ) == 4 + (1 + 4) + (1024 * 768 // 750 + 4) + (math.ceil(len(small.description) / 4) + 4 + 4)
    assert message_tokens(
        Message(
            id=MessageId("t"),
            role="user",
            content=(
                ToolResultBlock(
                    tool_call_id=CallId("c1"), content=(TextBlock(text="drew"), big, small)
                ),
            ),
            source=ToolSource(call_id=CallId("c1")),
        )
    ) == 4 + 4 + (1 + 4) + (1024 * 768 // 750 + 4) + (math.ceil(len(small.description) / 4) + 4 + 4)


def test_a_call_that_streamed_and_then_failed_counts_its_input_and_what_streamed() -> None:
    # A server error mid-answer, then a retry that fails the same way: neither sent usage, both
    # had read the request. Each counts the history and header it sent, plus what it streamed.
    s = new_session()
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    prompt = message_to_json(MESSAGES[0])
    s.append("user/message", prompt, surface_op="append")
    fail: JsonObject = {"kind": "error", "failure": {"code": "SERVER", "message": "mid-answer"}}
    streamed = "Half an answer, then the server fell over"
    for retry in (1, 2):
        if retry == 2:
            s.append("llm/retry-started", {"retryId": "r", "turn": 1, "step": 1, "retry": 1})
        s.append(
            "assistant/chunk", _chunk(1, 1, {"type": "reasoning-delta", "index": 0, "text": "hm"})
        )
        s.append(
            "assistant/chunk", _chunk(1, 1, {"type": "text-delta", "index": 1, "text": streamed})
        )
        s.append(
            "assistant/chunk",
            _chunk(
                1,
                1,
                {
                    "type": "tool-call-delta",
                    "index": 2,
                    "id": "c9",
                    "name": "py",
                    "argumentsDelta": "{",
                },
            ),
        )
        s.append("assistant/chunk", _chunk(1, 1, {"type": "finish", "reason": fail}))
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "error"}})
    totals = usage_totals(s.events)
    out = streamed_tokens(len("hm") + len(streamed) + len("py") + len("{"))
    assert out == math.ceil((2 + len(streamed) + 3) / 4) + 4
    assert totals == UsageTotals(
        requests=2,
        input_tokens=2 * message_tokens(MESSAGES[0]),
        output_tokens=2 * out,
        estimated_requests=2,
    )
