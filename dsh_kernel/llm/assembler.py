"""The one canonical chunk-to-message assembler (SPINE §2.5).

The agent loop feeds every ``StreamChunk`` of a model call to a ``BlockAssembler`` (while logging the
raw chunk), then reads ``blocks()`` / ``message()`` / ``usage`` / ``finish`` / ``replay_state`` when
the stream ends, or ``interrupted_blocks()`` when cancellation cut it short.

Contract:

- **Partials** are kept per ``index`` in first-seen order. ``block-start`` is optional: the first
  delta for an index opens a partial of the delta's type (delta-only protocols are tolerated).
- **Deltas** append: text and reasoning deltas append text; a tool-call delta sets the call id, sets
  the name when one is given, and appends its arguments fragment.
- **``block-end``** freezes the partial with the authoritative block; the first close wins and every
  later chunk for that index (deltas or another close) is ignored, so a misbehaving adapter can
  neither grow memory nor change a finished block.
- **``usage`` and ``finish``**: the last of each wins; no finish counts as ``FinishStop()``.
- **``blocks()``** assembles every index: closed ones are their authoritative block, open ones are
  built from their deltas (a tool call with no id gets ``call-<index>``, no name gets ``""``); an open
  partial of a type we cannot build from deltas raises ``IncompleteBlockError``. On a ``max-tokens``
  finish every tool-call block is dropped (a truncated call is unsafe to run). A tool-call name
  longer than ``MAX_TOOL_NAME_CHARS`` (no tool can have it: names are at most 64 characters) is cut
  with a marker (``dsh_kernel.textcap.cap_echo``), because the assembled message is logged and resent
  on every later request; the raw chunks keep the name as it came.
- **``replay_state``** is the finish chunk's opaque state. On ``max-tokens`` its ``blocks`` array
  (parallel to the assembled blocks) is pruned with the same keep mask; if its length does not match
  the assembled blocks the whole envelope is dropped (``None``), because a misaligned replay state
  would attach provider state to the wrong block.
- **``interrupted_blocks()``**: the text and reasoning blocks, open or closed, whose text is not
  blank; tool calls and unknown types are dropped whole (nothing safe to keep).
- **``partial(index)``**: one index's block as far as it has streamed and whether ``block-end``
  closed it, for a reader that shows a stream while it runs (the turn reader,
  ``dsh_kernel.transcript.turn``); it keeps the joined fragments, so reading at every tick stays
  linear in the stream's length.

``push`` is the hot path (one call per streamed token): it dispatches on the chunk's ``type`` string
and stores text fragments in a list that is joined only when a block is assembled.
"""

from __future__ import annotations

from dataclasses import replace
from typing import assert_never

from dsh_kernel.errors import DshError
from dsh_kernel.ids import CallId, MessageId, new_message_id
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import (
    ContentBlock,
    FinishReason,
    FinishStop,
    Message,
    ModelSource,
    ReasoningBlock,
    StreamChunk,
    TextBlock,
    TokenUsage,
    ToolCallBlock,
)
from dsh_kernel.textcap import cap_echo

MAX_TOOL_NAME_CHARS = 100
_DELTA_TYPES = frozenset(("text", "reasoning", "tool-call"))


class IncompleteBlockError(DshError):
    """A block of a type that cannot be built from deltas was never closed by ``block-end``."""

    code = "MALFORMED_RESPONSE"


class _Partial:
    """One index's accumulated state. ``parts`` holds text or argument fragments, joined lazily."""

    __slots__ = ("block", "block_type", "call_id", "name", "parts")

    def __init__(self, block_type: str) -> None:
        self.block_type = block_type
        self.parts: list[str] = []
        self.call_id: CallId | None = None
        self.name: str | None = None
        # Set by block-end: authoritative, and freezes the partial.
        self.block: ContentBlock | None = None


class BlockAssembler:
    """Incrementally assembles raw stream chunks into content blocks and an assistant message."""

    __slots__ = ("_finish", "_partials", "_replay_state", "_usage")

    def __init__(self) -> None:
        # dicts keep insertion order, which is exactly the first-seen order of indices.
        self._partials: dict[int, _Partial] = {}
        self._usage: TokenUsage | None = None
        self._finish: FinishReason | None = None
        self._replay_state: JsonObject | None = None

    def push(self, chunk: StreamChunk) -> None:
        """Feed the next chunk, in stream order. Never raises on a well-typed chunk."""
        # Compare the tag string (cheaper than isinstance chains); pyright narrows on it.
        if chunk.type == "text-delta" or chunk.type == "reasoning-delta":
            partial = self._partials.get(chunk.index)
            if partial is None:
                partial = self._partials[chunk.index] = _Partial(
                    "text" if chunk.type == "text-delta" else "reasoning"
                )
            if partial.block is None:
                partial.parts.append(chunk.text)
        elif chunk.type == "tool-call-delta":
            partial = self._partials.get(chunk.index)
            if partial is None:
                partial = self._partials[chunk.index] = _Partial("tool-call")
            if partial.block is None:
                partial.call_id = chunk.id
                if chunk.name:
                    partial.name = chunk.name
                partial.parts.append(chunk.arguments_delta)
        elif chunk.type == "block-start":
            if chunk.index not in self._partials:
                self._partials[chunk.index] = _Partial(chunk.block_type)
        elif chunk.type == "block-end":
            partial = self._partials.get(chunk.index)
            if partial is None:
                partial = self._partials[chunk.index] = _Partial(chunk.block.type)
            if partial.block is None:
                partial.block = chunk.block
        elif chunk.type == "usage":
            self._usage = chunk.usage
        elif chunk.type == "finish":
            self._finish = chunk.reason
            self._replay_state = chunk.replay_state
        else:
            assert_never(chunk)

    # --- results ------------------------------------------------------------------------------------

    @property
    def usage(self) -> TokenUsage | None:
        """The last usage chunk's counts; ``None`` until one arrives."""
        return self._usage

    @property
    def finish(self) -> FinishReason:
        """The last finish chunk's reason; ``FinishStop()`` when the stream ended without one."""
        return self._finish if self._finish is not None else FinishStop()

    @property
    def _truncated(self) -> bool:
        return self._finish is not None and self._finish.kind == "max-tokens"

    def _all_blocks(self) -> list[ContentBlock]:
        return [_bounded(_assemble(p, i)) for i, p in self._partials.items()]

    def blocks(self) -> tuple[ContentBlock, ...]:
        """Every block seen, in first-seen order; tool calls dropped on a max-tokens finish.

        Raises ``IncompleteBlockError`` for an open block of a type that has no delta form.
        """
        blocks = self._all_blocks()
        if self._truncated:
            return tuple(b for b in blocks if b.type != "tool-call")
        return tuple(blocks)

    def interrupted_blocks(self) -> tuple[ContentBlock, ...]:
        """The prefix an interrupted stream can keep: non-blank text and reasoning blocks."""
        kept: list[ContentBlock] = []
        for index, partial in self._partials.items():
            kind = partial.block.type if partial.block is not None else partial.block_type
            if kind != "text" and kind != "reasoning":
                continue
            block = _assemble(partial, index)
            if isinstance(block, TextBlock | ReasoningBlock) and block.text.strip():
                kept.append(block)
        return tuple(kept)

    def partial(self, index: int) -> tuple[ContentBlock, bool] | None:
        """The block at ``index`` so far and whether it is closed; ``None`` when nothing was seen at
        ``index`` or it is an open block of a type that has no delta form."""
        partial = self._partials.get(index)
        if partial is None:
            return None
        if partial.block is not None:
            return partial.block, True
        if partial.block_type not in _DELTA_TYPES:
            return None
        if len(partial.parts) > 1:
            partial.parts[:] = ["".join(partial.parts)]
        return _assemble(partial, index), False

    @property
    def replay_state(self) -> JsonObject | None:
        """The finish chunk's replay state, its ``blocks`` pruned like ``blocks()`` on max-tokens."""
        state = self._replay_state
        if state is None or not self._truncated:
            return state
        entries = state.get("blocks")
        if not isinstance(entries, list):
            return state
        blocks = self._all_blocks()
        if len(entries) != len(blocks):
            return None
        kept: list[JsonValue] = [
            entry for entry, block in zip(entries, blocks, strict=True) if block.type != "tool-call"
        ]
        return {**state, "blocks": kept}

    def message(self, source: ModelSource, *, id: MessageId | None = None) -> Message:
        """The assistant message over ``blocks()``, with a fresh id unless one is given."""
        return Message(
            id=id if id is not None else new_message_id(),
            role="assistant",
            content=self.blocks(),
            source=source,
        )


def _bounded(block: ContentBlock) -> ContentBlock:
    if isinstance(block, ToolCallBlock) and len(block.name) > MAX_TOOL_NAME_CHARS:
        return replace(block, name=cap_echo(block.name, MAX_TOOL_NAME_CHARS))
    return block


def _assemble(partial: _Partial, index: int) -> ContentBlock:
    if partial.block is not None:
        return partial.block
    match partial.block_type:
        case "text":
            return TextBlock(text="".join(partial.parts))
        case "reasoning":
            return ReasoningBlock(text="".join(partial.parts))
        case "tool-call":
            return ToolCallBlock(
                id=partial.call_id if partial.call_id is not None else CallId(f"call-{index}"),
                name=partial.name if partial.name is not None else "",
                arguments="".join(partial.parts),
            )
        case other:
            raise IncompleteBlockError(
                f"cannot assemble block {index}: type {other!r} was opened but never closed by "
                "block-end, and it has no delta form"
            )
