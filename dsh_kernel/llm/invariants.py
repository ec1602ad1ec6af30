"""The stream grammar (SPINE §2.3–§2.4): what a well-behaved provider stream looks like.

The assembler is deliberately tolerant (it ignores stragglers and accepts delta-only streams); this
module is the strict companion that tests and debug builds wrap around every provider stream so a
misbehaving adapter is caught at the chunk that broke the rules, not three layers later.

Every index has a *block type*, fixed by the first chunk that names the index: a ``block-start``
(its ``block_type``), a delta (``text-delta`` → ``text``, ``reasoning-delta`` → ``reasoning``,
``tool-call-delta`` → ``tool-call``) or a ``block-end`` (its block's ``type``). ``block-start`` is
optional, and a stream may leave blocks open at its finish (delta-only protocols never close them).

Rules (the ``rule`` string carried by ``StreamGrammarError``):

``negative-index``
    A ``block-start``, delta or ``block-end`` has an index below 0.
``after-finish``
    Any chunk (usage included) follows the ``finish`` chunk. ``finish`` is terminal and unique.
``missing-finish``
    The stream ended without a ``finish`` chunk (reported at position = number of chunks).
``duplicate-block-start``
    A ``block-start`` names an index that is already known (started, or opened by a delta or a
    ``block-end``) with the same type: the start, when present, must be the first chunk of its
    index. (With a different type it is a ``type-mismatch``.)
``type-mismatch``
    A delta, ``block-start`` or ``block-end`` implies a block type that disagrees with the index's
    block type (e.g. a ``text-delta`` for a ``tool-call`` index, or a ``block-end`` whose block is
    ``reasoning`` for a ``text`` index).
``delta-after-end``
    A delta arrives for an index already closed by ``block-end``.
``duplicate-block-end``
    A second ``block-end`` for the same index.
``tool-call-id-changed``
    A ``tool-call-delta`` carries a different call id than the earlier deltas of its index.

``usage`` may appear any number of times before ``finish`` (the last one wins); only usage after the
finish is an error (``after-finish``).

Use ``check_stream(chunks)`` on a finished sequence, ``checked(stream)`` to validate an async stream
as it is consumed (chunks pass through unchanged; the error is raised at the offending chunk, before it
is yielded), or a ``StreamGrammar`` directly to feed chunks one by one.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from typing import Literal, TypeAlias, assert_never

from dsh_kernel.errors import DshError
from dsh_kernel.ids import CallId
from dsh_kernel.llm.types import StreamChunk

GrammarRule: TypeAlias = Literal[
    "negative-index",
    "after-finish",
    "missing-finish",
    "duplicate-block-start",
    "type-mismatch",
    "delta-after-end",
    "duplicate-block-end",
    "tool-call-id-changed",
]


class StreamGrammarError(DshError):
    """A provider stream broke the grammar. ``position`` is the 0-based chunk position."""

    code = "STREAM_GRAMMAR"

    def __init__(self, *, position: int, rule: GrammarRule, detail: str) -> None:
        super().__init__(f"stream grammar violated at chunk {position} [{rule}]: {detail}")
        self.position = position
        self.rule: GrammarRule = rule
        self.detail = detail


class _IndexState:
    __slots__ = ("block_type", "call_id", "closed")

    def __init__(self, block_type: str) -> None:
        self.block_type = block_type
        self.closed = False
        self.call_id: CallId | None = None


class StreamGrammar:
    """Incremental checker: ``feed`` each chunk in order, then ``end()`` once the stream is over."""

    __slots__ = ("_finished", "_indices", "_position")

    def __init__(self) -> None:
        self._indices: dict[int, _IndexState] = {}
        self._position = 0
        self._finished = False

    @property
    def position(self) -> int:
        """How many chunks have been fed and accepted."""
        return self._position

    @property
    def finished(self) -> bool:
        return self._finished

    def _fail(self, rule: GrammarRule, detail: str) -> StreamGrammarError:
        return StreamGrammarError(position=self._position, rule=rule, detail=detail)

    def feed(self, chunk: StreamChunk) -> None:
        """Check one chunk; raises ``StreamGrammarError`` without consuming it on a violation."""
        if self._finished:
            raise self._fail("after-finish", f"{chunk.type} chunk after the finish chunk")
        match chunk.type:
            case "text-delta":
                self._delta(chunk.index, "text", chunk.type)
            case "reasoning-delta":
                self._delta(chunk.index, "reasoning", chunk.type)
            case "tool-call-delta":
                state = self._delta(chunk.index, "tool-call", chunk.type)
                if state.call_id is not None and state.call_id != chunk.id:
                    raise self._fail(
                        "tool-call-id-changed",
                        f"tool-call-delta for index {chunk.index} has id {chunk.id!r}, "
                        f"earlier deltas had {state.call_id!r}",
                    )
                state.call_id = chunk.id
            case "block-start":
                self._check_index(chunk.index, chunk.type)
                known = self._indices.get(chunk.index)
                if known is not None and known.block_type != chunk.block_type:
                    raise self._fail(
                        "type-mismatch",
                        f"block-start of a {chunk.block_type!r} block for index {chunk.index}, "
                        f"which is already {self._describe(chunk.index)}",
                    )
                if known is not None:
                    raise self._fail(
                        "duplicate-block-start",
                        f"block-start for index {chunk.index}, which is already "
                        f"{self._describe(chunk.index)}",
                    )
                self._indices[chunk.index] = _IndexState(chunk.block_type)
            case "block-end":
                self._check_index(chunk.index, chunk.type)
                state = self._indices.get(chunk.index)
                if state is None:
                    state = self._indices[chunk.index] = _IndexState(chunk.block.type)
                elif state.closed:
                    raise self._fail(
                        "duplicate-block-end", f"index {chunk.index} was already closed"
                    )
                elif state.block_type != chunk.block.type:
                    raise self._fail(
                        "type-mismatch",
                        f"block-end for index {chunk.index} carries a {chunk.block.type!r} block, "
                        f"but the index is a {state.block_type!r} block",
                    )
                state.closed = True
            case "usage":
                pass
            case "finish":
                self._finished = True
            case _:
                assert_never(chunk)
        self._position += 1

    def end(self) -> None:
        """Declare the stream over; raises ``missing-finish`` if no finish chunk was fed."""
        if not self._finished:
            raise self._fail("missing-finish", "the stream ended without a finish chunk")

    def _check_index(self, index: int, what: str) -> None:
        if index < 0:
            raise self._fail("negative-index", f"{what} has negative index {index}")

    def _describe(self, index: int) -> str:
        state = self._indices[index]
        return f"{'closed' if state.closed else 'open'} as a {state.block_type!r} block"

    def _delta(self, index: int, block_type: str, what: str) -> _IndexState:
        self._check_index(index, what)
        state = self._indices.get(index)
        if state is None:
            state = self._indices[index] = _IndexState(block_type)
            return state
        if state.block_type != block_type:
            raise self._fail(
                "type-mismatch",
                f"{what} for index {index}, which is a {state.block_type!r} block",
            )
        if state.closed:
            raise self._fail("delta-after-end", f"{what} for index {index} after its block-end")
        return state


def check_stream(chunks: Iterable[StreamChunk]) -> None:
    """Validate a finished chunk sequence; raises ``StreamGrammarError`` at the first violation."""
    grammar = StreamGrammar()
    for chunk in chunks:
        grammar.feed(chunk)
    grammar.end()


async def checked(stream: AsyncIterator[StreamChunk]) -> AsyncIterator[StreamChunk]:
    """Pass ``stream`` through, raising ``StreamGrammarError`` at the first offending chunk.

    The offending chunk is not yielded. ``missing-finish`` is raised when the source is exhausted
    without a finish chunk (not when the consumer stops early or is cancelled).
    """
    grammar = StreamGrammar()
    try:
        async for chunk in stream:
            grammar.feed(chunk)
            yield chunk
    finally:
        # Close the source at once on a violation or an early stop, so an HTTP stream behind it
        # is released now rather than whenever the generator is garbage-collected.
        if isinstance(stream, AsyncGenerator):
            await stream.aclose()
    grammar.end()
