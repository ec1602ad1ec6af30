"""BlockAssembler: SPINE §2.5 behaviour, plus a property test over generated valid streams that also
checks the stream grammar accepts them and that every chunk survives the JSON codec."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_kernel.errors import DshError
from dsh_kernel.ids import CallId, MessageId
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.assembler import BlockAssembler, IncompleteBlockError
from dsh_kernel.llm.codec import chunk_from_json, chunk_to_json
from dsh_kernel.llm.invariants import check_stream
from dsh_kernel.llm.types import (
    BlockEndChunk,
    BlockStartChunk,
    ContentBlock,
    FinishAborted,
    FinishChunk,
    FinishError,
    FinishMaxTokens,
    FinishReason,
    FinishStop,
    FinishToolCalls,
    LlmFailure,
    ModelSource,
    ReasoningBlock,
    ReasoningDeltaChunk,
    StreamChunk,
    TextBlock,
    TextDeltaChunk,
    TokenUsage,
    ToolCallBlock,
    ToolCallDeltaChunk,
    UnknownBlock,
    UsageChunk,
)


def assemble(*chunks: StreamChunk) -> BlockAssembler:
    asm = BlockAssembler()
    for chunk in chunks:
        asm.push(chunk)
    return asm


SOURCE = ModelSource(provider="p", model="m")

# --- targeted behaviour ----------------------------------------------------------------------------


def test_delta_only_stream_builds_blocks_in_first_seen_order() -> None:
    asm = assemble(
        ReasoningDeltaChunk(index=3, text="think"),
        TextDeltaChunk(index=1, text="Hel"),
        ReasoningDeltaChunk(index=3, text="ing"),
        TextDeltaChunk(index=1, text="lo"),
    )
    assert asm.blocks() == (ReasoningBlock(text="thinking"), TextBlock(text="Hello"))


def test_block_end_is_authoritative_and_first_close_wins() -> None:
    asm = assemble(
        BlockStartChunk(index=0, block_type="text"),
        TextDeltaChunk(index=0, text="draft"),
        BlockEndChunk(index=0, block=TextBlock(text="final")),
        TextDeltaChunk(index=0, text=" straggler"),
        BlockEndChunk(index=0, block=TextBlock(text="second close")),
    )
    assert asm.blocks() == (TextBlock(text="final"),)


def test_late_tool_deltas_after_close_are_ignored() -> None:
    closed = ToolCallBlock(id=CallId("c1"), name="run", arguments='{"a":1}')
    asm = assemble(
        ToolCallDeltaChunk(index=0, id=CallId("c1"), name="run", arguments_delta='{"a"'),
        BlockEndChunk(index=0, block=closed),
        ToolCallDeltaChunk(index=0, id=CallId("other"), name="x", arguments_delta="junk"),
    )
    assert asm.blocks() == (closed,)


def test_tool_call_deltas_set_id_keep_name_and_append_arguments() -> None:
    asm = assemble(
        ToolCallDeltaChunk(index=2, id=CallId("c9"), name="grep", arguments_delta='{"pat'),
        ToolCallDeltaChunk(index=2, id=CallId("c9"), name=None, arguments_delta='tern":"x"}'),
        ToolCallDeltaChunk(index=2, id=CallId("c9"), name="", arguments_delta=""),
    )
    assert asm.blocks() == (
        ToolCallBlock(id=CallId("c9"), name="grep", arguments='{"pattern":"x"}'),
    )


def test_open_tool_call_without_deltas_gets_index_call_id() -> None:
    asm = assemble(
        BlockStartChunk(index=4, block_type="tool-call"), FinishChunk(reason=FinishStop())
    )
    assert asm.blocks() == (ToolCallBlock(id=CallId("call-4"), name="", arguments=""),)


def test_block_start_after_deltas_does_not_reset_the_partial() -> None:
    asm = assemble(
        TextDeltaChunk(index=0, text="kept"),
        BlockStartChunk(index=0, block_type="reasoning"),
    )
    assert asm.blocks() == (TextBlock(text="kept"),)


def test_unknown_block_type_that_never_closed_raises_malformed_response() -> None:
    asm = assemble(
        TextDeltaChunk(index=0, text="hi"),
        BlockStartChunk(index=1, block_type="image"),
        FinishChunk(reason=FinishStop()),
    )
    with pytest.raises(IncompleteBlockError, match="'image'") as info:
        asm.blocks()
    assert isinstance(info.value, DshError)
    assert info.value.code == "MALFORMED_RESPONSE"
    with pytest.raises(IncompleteBlockError):
        asm.message(SOURCE)
    # The interrupted prefix never raises: an open unknown block has nothing to keep.
    assert asm.interrupted_blocks() == (TextBlock(text="hi"),)


def test_unknown_block_type_closed_by_block_end_is_kept() -> None:
    image = UnknownBlock(type="image", raw={"type": "image", "attachment": "a1"})
    asm = assemble(
        BlockStartChunk(index=0, block_type="image"), BlockEndChunk(index=0, block=image)
    )
    assert asm.blocks() == (image,)


def test_usage_and_finish_last_wins_and_missing_finish_is_stop() -> None:
    asm = BlockAssembler()
    assert asm.finish == FinishStop()
    assert asm.usage is None
    assert asm.replay_state is None
    first = TokenUsage(input_tokens=1, output_tokens=2)
    last = TokenUsage(input_tokens=3, output_tokens=4, reasoning_tokens=1)
    asm.push(UsageChunk(usage=first))
    asm.push(UsageChunk(usage=last))
    asm.push(FinishChunk(reason=FinishToolCalls(), replay_state={"response": 1}))
    asm.push(FinishChunk(reason=FinishStop(), replay_state={"response": 2}))
    assert asm.usage == last
    assert asm.finish == FinishStop()
    assert asm.replay_state == {"response": 2}


def _truncated_stream(replay_blocks: list[JsonValue] | None) -> BlockAssembler:
    state: JsonObject = {"response": {"id": "r1"}}
    if replay_blocks is not None:
        state["blocks"] = replay_blocks
    return assemble(
        ReasoningDeltaChunk(index=0, text="plan"),
        ToolCallDeltaChunk(index=1, id=CallId("c1"), name="a", arguments_delta="{}"),
        BlockEndChunk(index=1, block=ToolCallBlock(id=CallId("c1"), name="a", arguments="{}")),
        TextDeltaChunk(index=2, text="partial answer"),
        ToolCallDeltaChunk(index=3, id=CallId("c2"), name="b", arguments_delta='{"x":'),
        FinishChunk(reason=FinishMaxTokens(), replay_state=state),
    )


def test_max_tokens_drops_every_tool_call_and_prunes_replay_blocks() -> None:
    asm = _truncated_stream(["r", "t1", "x", "t2"])
    assert asm.blocks() == (ReasoningBlock(text="plan"), TextBlock(text="partial answer"))
    assert asm.replay_state == {"response": {"id": "r1"}, "blocks": ["r", "x"]}
    assert asm.message(SOURCE).content == asm.blocks()


def test_max_tokens_replay_length_mismatch_drops_the_envelope() -> None:
    assert _truncated_stream(["r", "x"]).replay_state is None


def test_max_tokens_replay_without_blocks_is_kept_whole() -> None:
    assert _truncated_stream(None).replay_state == {"response": {"id": "r1"}}


def test_other_finishes_keep_tool_calls_and_replay_state_untouched() -> None:
    state: JsonObject = {"response": None, "blocks": ["only one"]}
    asm = assemble(
        TextDeltaChunk(index=0, text="t"),
        ToolCallDeltaChunk(index=1, id=CallId("c1"), name="a", arguments_delta="{}"),
        FinishChunk(reason=FinishToolCalls(), replay_state=state),
    )
    assert [b.type for b in asm.blocks()] == ["text", "tool-call"]
    assert asm.replay_state == state


def test_interrupted_blocks_keep_non_blank_text_and_reasoning_only() -> None:
    asm = assemble(
        ReasoningDeltaChunk(index=0, text="  \n"),
        TextDeltaChunk(index=1, text="kept text"),
        ToolCallDeltaChunk(index=2, id=CallId("c"), name="n", arguments_delta="{"),
        BlockStartChunk(index=3, block_type="reasoning"),
        BlockEndChunk(index=3, block=ReasoningBlock(text="closed thought", signature="sig")),
        BlockStartChunk(index=4, block_type="text"),
    )
    assert asm.interrupted_blocks() == (
        TextBlock(text="kept text"),
        ReasoningBlock(text="closed thought", signature="sig"),
    )


def test_message_is_an_assistant_message_over_blocks() -> None:
    asm = assemble(TextDeltaChunk(index=0, text="hi"), FinishChunk(reason=FinishStop()))
    given_id = asm.message(SOURCE, id=MessageId("m-1"))
    assert given_id.id == "m-1"
    assert given_id.role == "assistant"
    assert given_id.source == SOURCE
    assert given_id.content == (TextBlock(text="hi"),)
    fresh_a, fresh_b = asm.message(SOURCE), asm.message(SOURCE)
    assert fresh_a.id != fresh_b.id
    assert len(fresh_a.id) == 36


def test_blocks_can_be_read_mid_stream() -> None:
    asm = assemble(TextDeltaChunk(index=0, text="a"))
    assert asm.blocks() == (TextBlock(text="a"),)
    asm.push(TextDeltaChunk(index=0, text="b"))
    assert asm.blocks() == (TextBlock(text="ab"),)


# --- property: generated valid streams -------------------------------------------------------------


@dataclass
class _Plan:
    """One block of a generated stream: its chunk events (in order) and the block expected back."""

    events: list[StreamChunk]
    expected: ContentBlock


_texts = st.text(max_size=12)
_fragments = st.lists(_texts, max_size=4)


@st.composite
def _block_plan(draw: st.DrawFn, index: int) -> _Plan:
    kind = draw(st.sampled_from(["text", "reasoning", "tool-call"]))
    start = draw(st.booleans())
    fragments = draw(_fragments if start else _fragments.filter(bool))
    close = draw(st.booleans())
    events: list[StreamChunk] = [BlockStartChunk(index=index, block_type=kind)] if start else []
    built: ContentBlock
    if kind == "text":
        events += [TextDeltaChunk(index=index, text=f) for f in fragments]
        built = TextBlock(text="".join(fragments))
    elif kind == "reasoning":
        events += [ReasoningDeltaChunk(index=index, text=f) for f in fragments]
        built = ReasoningBlock(text="".join(fragments))
    else:
        call_id = CallId(draw(st.from_regex(r"call_[a-z0-9]{1,6}", fullmatch=True)))
        name = draw(st.from_regex(r"[a-z_]{1,8}", fullmatch=True))
        events += [
            ToolCallDeltaChunk(
                index=index, id=call_id, name=name if k == 0 else None, arguments_delta=f
            )
            for k, f in enumerate(fragments)
        ]
        built = (
            ToolCallBlock(id=call_id, name=name, arguments="".join(fragments))
            if fragments
            else ToolCallBlock(id=CallId(f"call-{index}"), name="", arguments="")
        )
    expected = built
    if close:
        # The close is authoritative: sometimes it differs from what the deltas built (an adapter
        # that re-stringifies arguments, or attaches a reasoning signature).
        if draw(st.booleans()):
            match built:
                case TextBlock():
                    expected = TextBlock(text=draw(_texts))
                case ReasoningBlock():
                    expected = ReasoningBlock(text=built.text, signature=draw(_texts))
                case ToolCallBlock():
                    expected = ToolCallBlock(id=built.id, name=built.name, arguments="{}")
                case _:
                    raise AssertionError(built)
        events.append(BlockEndChunk(index=index, block=expected))
    return _Plan(events=events, expected=expected)


_usages = st.builds(
    TokenUsage,
    input_tokens=st.integers(0, 10**6),
    output_tokens=st.integers(0, 10**6),
    cache_read_tokens=st.none() | st.integers(0, 10**6),
    reasoning_tokens=st.none() | st.integers(0, 10**6),
)
_failures = st.builds(
    LlmFailure,
    message=st.text(min_size=1, max_size=10),
    code=st.sampled_from(["SERVER", "ABORTED", "RATE_LIMIT"]),
    status=st.none() | st.integers(100, 599),
)
_finishes: st.SearchStrategy[FinishReason] = st.one_of(
    st.just(FinishStop()),
    st.just(FinishToolCalls()),
    st.just(FinishMaxTokens()),
    st.builds(FinishError, failure=_failures),
    st.builds(FinishAborted, failure=_failures),
)


@dataclass
class _Stream:
    chunks: list[StreamChunk]
    plans: list[_Plan]  # in first-seen order
    usage: TokenUsage | None
    finish: FinishReason
    replay: JsonObject | None


@st.composite
def valid_streams(draw: st.DrawFn) -> _Stream:
    indices = draw(st.lists(st.integers(0, 40), unique=True, max_size=5))
    plans = [draw(_block_plan(i)) for i in indices]
    # Random interleaving that keeps each block's own events in order.
    cursors = [0] * len(plans)
    chunks: list[StreamChunk] = []
    first_seen: list[int] = []
    while live := [k for k, p in enumerate(plans) if cursors[k] < len(p.events)]:
        k = draw(st.sampled_from(live))
        if cursors[k] == 0:
            first_seen.append(k)
        chunks.append(plans[k].events[cursors[k]])
        cursors[k] += 1
    usages = draw(st.lists(_usages, max_size=2))
    # Ascending insertion points keep the usages in draw order, so the last drawn is the last sent.
    points = sorted(
        draw(st.lists(st.integers(0, len(chunks)), min_size=len(usages), max_size=len(usages)))
    )
    for shift, (point, usage) in enumerate(zip(points, usages, strict=True)):
        chunks.insert(point + shift, UsageChunk(usage=usage))
    finish = draw(_finishes)
    replay: JsonObject | None = None
    if draw(st.booleans()):
        replay = {"response": {"id": draw(_texts)}}
        if draw(st.booleans()):
            extra = draw(st.integers(-1, 1)) if draw(st.booleans()) else 0
            replay["blocks"] = [{"n": n} for n in range(max(0, len(plans) + extra))]
    chunks.append(FinishChunk(reason=finish, replay_state=replay))
    return _Stream(
        chunks=chunks,
        plans=[plans[k] for k in first_seen],
        usage=usages[-1] if usages else None,
        finish=finish,
        replay=replay,
    )


@settings(max_examples=300, deadline=None)
@given(valid_streams())
def test_valid_streams_assemble_pass_the_grammar_and_round_trip(stream: _Stream) -> None:
    check_stream(stream.chunks)

    for chunk in stream.chunks:
        wire = json.loads(json.dumps(chunk_to_json(chunk), allow_nan=False))
        assert chunk_from_json(wire) == chunk

    asm = assemble(*stream.chunks)
    every = [p.expected for p in stream.plans]
    truncated = isinstance(stream.finish, FinishMaxTokens)
    keep = [not (truncated and b.type == "tool-call") for b in every]
    assert asm.blocks() == tuple(b for b, k in zip(every, keep, strict=True) if k)
    assert asm.usage == stream.usage
    assert asm.finish == stream.finish
    assert asm.interrupted_blocks() == tuple(
        b for b in every if isinstance(b, TextBlock | ReasoningBlock) and b.text.strip()
    )

    expected_replay = stream.replay
    if truncated and stream.replay is not None and "blocks" in stream.replay:
        entries = stream.replay["blocks"]
        assert isinstance(entries, list)
        expected_replay = (
            {**stream.replay, "blocks": [e for e, k in zip(entries, keep, strict=True) if k]}
            if len(entries) == len(every)
            else None
        )
    assert asm.replay_state == expected_replay
