"""The stream-grammar checker: every rule rejects its violation at the right chunk, valid streams pass,
and ``checked`` validates an async stream as it is consumed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dsh_kernel.errors import DshError
from dsh_kernel.ids import CallId
from dsh_kernel.llm.invariants import (
    GrammarRule,
    StreamGrammar,
    StreamGrammarError,
    check_stream,
    checked,
)
from dsh_kernel.llm.types import (
    BlockEndChunk,
    BlockStartChunk,
    FinishChunk,
    FinishStop,
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
from dsh_kernel.testing import (
    error_response,
    max_tokens_response,
    text_response,
    tool_calls_response,
)

FINISH = FinishChunk(reason=FinishStop())
USAGE = UsageChunk(usage=TokenUsage(input_tokens=1, output_tokens=1))


def tool_delta(index: int, call_id: str, args: str = "") -> ToolCallDeltaChunk:
    return ToolCallDeltaChunk(index=index, id=CallId(call_id), name="t", arguments_delta=args)


def rejects(chunks: list[StreamChunk], rule: GrammarRule, position: int) -> StreamGrammarError:
    with pytest.raises(StreamGrammarError) as info:
        check_stream(chunks)
    err = info.value
    assert (err.rule, err.position) == (rule, position), str(err)
    assert err.code == "STREAM_GRAMMAR"
    assert isinstance(err, DshError)
    assert f"chunk {position}" in str(err) and rule in str(err)
    return err


def test_minimal_and_tolerant_streams_are_valid() -> None:
    check_stream([FINISH])
    # delta-only, blocks left open, several usages before finish
    check_stream(
        [
            USAGE,
            ReasoningDeltaChunk(index=1, text="r"),
            TextDeltaChunk(index=0, text="a"),
            tool_delta(5, "c1", "{"),
            tool_delta(5, "c1", "}"),
            USAGE,
            FINISH,
        ]
    )
    # block-end with no start or deltas, and an unknown block type opened and closed
    image = UnknownBlock(type="image", raw={"type": "image"})
    check_stream(
        [
            BlockEndChunk(index=0, block=TextBlock(text="x")),
            BlockStartChunk(index=1, block_type="image"),
            BlockEndChunk(index=1, block=image),
            FINISH,
        ]
    )


def test_chunk_after_finish() -> None:
    rejects([FINISH, TextDeltaChunk(index=0, text="late")], "after-finish", 1)


def test_usage_after_finish() -> None:
    rejects([USAGE, FINISH, USAGE], "after-finish", 2)


def test_second_finish() -> None:
    rejects([FINISH, FINISH], "after-finish", 1)


def test_missing_finish_reports_the_end_position() -> None:
    rejects([TextDeltaChunk(index=0, text="a"), USAGE], "missing-finish", 2)
    rejects([], "missing-finish", 0)


def test_delta_after_block_end() -> None:
    rejects(
        [
            TextDeltaChunk(index=0, text="a"),
            BlockEndChunk(index=0, block=TextBlock(text="a")),
            TextDeltaChunk(index=0, text="b"),
            FINISH,
        ],
        "delta-after-end",
        2,
    )


def test_delta_type_disagrees_with_index() -> None:
    rejects(
        [TextDeltaChunk(index=0, text="a"), ReasoningDeltaChunk(index=0, text="b"), FINISH],
        "type-mismatch",
        1,
    )
    rejects(
        [BlockStartChunk(index=2, block_type="tool-call"), TextDeltaChunk(index=2, text="x")],
        "type-mismatch",
        1,
    )


def test_block_end_type_disagrees_with_index() -> None:
    rejects(
        [
            BlockStartChunk(index=0, block_type="text"),
            BlockEndChunk(index=0, block=ReasoningBlock(text="a")),
            FINISH,
        ],
        "type-mismatch",
        1,
    )


def test_block_start_type_disagrees_with_delta_opened_index() -> None:
    rejects(
        [tool_delta(0, "c"), BlockStartChunk(index=0, block_type="text"), FINISH],
        "type-mismatch",
        1,
    )


def test_duplicate_block_start() -> None:
    rejects(
        [
            BlockStartChunk(index=0, block_type="text"),
            BlockStartChunk(index=0, block_type="text"),
            FINISH,
        ],
        "duplicate-block-start",
        1,
    )
    rejects(
        [TextDeltaChunk(index=0, text="a"), BlockStartChunk(index=0, block_type="text"), FINISH],
        "duplicate-block-start",
        1,
    )


def test_duplicate_block_end() -> None:
    end = BlockEndChunk(index=0, block=TextBlock(text="a"))
    rejects([end, end, FINISH], "duplicate-block-end", 1)


def test_tool_call_id_changes_within_an_index() -> None:
    rejects([tool_delta(0, "c1"), tool_delta(0, "c2"), FINISH], "tool-call-id-changed", 1)


def test_negative_index() -> None:
    rejects([TextDeltaChunk(index=-1, text="a"), FINISH], "negative-index", 0)
    rejects([BlockStartChunk(index=-2, block_type="text"), FINISH], "negative-index", 0)
    rejects([BlockEndChunk(index=-3, block=TextBlock(text="")), FINISH], "negative-index", 0)


def test_incremental_checker_does_not_consume_a_rejected_chunk() -> None:
    grammar = StreamGrammar()
    grammar.feed(TextDeltaChunk(index=0, text="a"))
    with pytest.raises(StreamGrammarError):
        grammar.feed(ReasoningDeltaChunk(index=0, text="b"))
    assert grammar.position == 1
    grammar.feed(TextDeltaChunk(index=0, text="c"))
    grammar.feed(FINISH)
    assert grammar.finished
    grammar.end()


# --- the async wrapper -----------------------------------------------------------------------------


class _Source:
    """An async generator over fixed chunks that records whether it was closed."""

    def __init__(self, chunks: list[StreamChunk]) -> None:
        self.chunks = chunks
        self.closed = False

    async def stream(self) -> AsyncIterator[StreamChunk]:
        try:
            for chunk in self.chunks:
                yield chunk
        finally:
            self.closed = True


async def test_checked_passes_a_valid_stream_through_unchanged() -> None:
    chunks = text_response("hello", pieces=3)
    assert [c async for c in checked(_Source(chunks).stream())] == chunks


async def test_checked_raises_at_the_offending_chunk_and_closes_the_source() -> None:
    source = _Source(
        [
            TextDeltaChunk(index=0, text="a"),
            FINISH,
            TextDeltaChunk(index=0, text="late"),
            TextDeltaChunk(index=0, text="never read"),
        ]
    )
    seen: list[StreamChunk] = []
    with pytest.raises(StreamGrammarError) as info:
        async for chunk in checked(source.stream()):
            seen.append(chunk)
    assert info.value.rule == "after-finish" and info.value.position == 2
    assert seen == source.chunks[:2]
    assert source.closed


async def test_checked_flags_a_source_that_ends_without_finish() -> None:
    source = _Source([TextDeltaChunk(index=0, text="a")])
    seen: list[StreamChunk] = []
    with pytest.raises(StreamGrammarError) as info:
        async for chunk in checked(source.stream()):
            seen.append(chunk)
    assert info.value.rule == "missing-finish" and info.value.position == 1
    assert seen == source.chunks


# --- properties ------------------------------------------------------------------------------------

_builder_streams = st.one_of(
    st.builds(text_response, st.text(max_size=20), pieces=st.integers(1, 5)),
    st.builds(
        tool_calls_response,
        st.lists(
            st.tuples(
                st.sampled_from(["a", "b"]), st.dictionaries(st.text(max_size=3), st.integers())
            ),
            max_size=3,
        ),
        text=st.none() | st.text(max_size=5),
        reasoning=st.none() | st.text(max_size=5),
    ),
    st.builds(max_tokens_response, st.text(max_size=10)),
    st.builds(
        error_response,
        st.just("SERVER"),
        st.just("boom"),
        partial_text=st.none() | st.text(max_size=5),
    ),
)


@settings(max_examples=100, deadline=None)
@given(_builder_streams, st.data())
def test_a_chunk_after_finish_is_always_rejected(
    chunks: list[StreamChunk], data: st.DataObject
) -> None:
    check_stream(chunks)
    extra = data.draw(st.sampled_from(chunks))
    rejects([*chunks, extra], "after-finish", len(chunks))


@settings(max_examples=100, deadline=None)
@given(_builder_streams, st.data())
def test_dropping_the_finish_is_always_rejected(
    chunks: list[StreamChunk], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(0, len(chunks) - 1))
    rejects(chunks[:cut], "missing-finish", cut)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_replaying_a_closed_blocks_delta_is_rejected(data: st.DataObject) -> None:
    chunks = data.draw(_builder_streams)
    closed = {c.index for c in chunks if isinstance(c, BlockEndChunk)}
    deltas = [
        (pos, c)
        for pos, c in enumerate(chunks)
        if isinstance(c, TextDeltaChunk | ReasoningDeltaChunk | ToolCallDeltaChunk)
        and c.index in closed
    ]
    assume(deltas)
    _, delta = data.draw(st.sampled_from(deltas))
    finish_at = len(chunks) - 1 - (1 if isinstance(chunks[-2], UsageChunk) else 0)
    rejects([*chunks[:finish_at], delta, *chunks[finish_at:]], "delta-after-end", finish_at)


def test_tool_delta_after_its_block_end() -> None:
    rejects(
        [
            tool_delta(0, "c1", "{}"),
            BlockEndChunk(index=0, block=ToolCallBlock(id=CallId("c1"), name="t", arguments="{}")),
            tool_delta(0, "c1", "x"),
            FINISH,
        ],
        "delta-after-end",
        2,
    )
