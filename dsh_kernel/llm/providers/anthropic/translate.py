"""Messages API events → ``StreamChunk``s (WIRE.md §4.2–§4.6).

``MessagesTranslator.feed(event)`` appends to ``out``. Blocks take our indices in order of their
``content_block_start``; each closes with ``block-end`` at its ``content_block_stop``:

- ``text`` → text block, ``text_delta`` → ``text-delta``;
- ``thinking`` → reasoning block, ``thinking_delta`` → ``reasoning-delta``; the ``signature_delta``
  is kept and lands, byte-exact, in the block's ``signature`` (it must be passed back verbatim);
- ``redacted_thinking`` → a reasoning block with empty text and ``redacted`` = its opaque data;
- ``tool_use`` → tool-call block: a first ``tool-call-delta`` announces id and name, then each
  ``input_json_delta`` fragment; the arguments are the fragments joined, or ``{}`` when none came
  (or the start block's ``input``, re-encoded, if it was sent whole);
- any other block type → an ``UnknownBlock`` keeping the start block as sent (plus streamed input).

``usage`` (``message_start`` overlaid with the cumulative ``message_delta`` counts) and ``finish``
wait for ``message_stop``; unclosed blocks are closed first. ``ping`` and unknown events are ignored.
An ``error`` event sets ``failure`` (``overloaded_error`` → ``SERVER``, retryable); the adapter ends
with ``finish{error}`` at once. End of body before ``message_stop`` → ``STREAM_CLOSED``.

Stop reasons: ``end_turn``/``stop_sequence`` → stop (``EMPTY_RESPONSE`` with ``detail:
model-stopped`` when the answer holds nothing: no block, or only empty text blocks — a proxy such as
LiteLLM sends an empty answer as one empty text block; an empty body is ``detail: empty-body``);
``tool_use`` → tool-calls; ``max_tokens`` → max-tokens; ``model_context_window_exceeded`` →
``error{CONTEXT_WINDOW_EXCEEDED}``; others (``refusal``, ``pause_turn``, …) → ``error{REASON}``.
"""

from __future__ import annotations

import json

from pydantic import ValidationError

from dsh_kernel.errors import LlmError
from dsh_kernel.ids import CallId
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.providers.anthropic.wire import WireUsage
from dsh_kernel.llm.providers.transport import error_info, inband_failure, json_object
from dsh_kernel.llm.types import (
    BlockEndChunk,
    BlockStartChunk,
    ContentBlock,
    FinishChunk,
    FinishError,
    FinishMaxTokens,
    FinishReason,
    FinishStop,
    FinishToolCalls,
    LlmFailure,
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
    empty_body,
    model_stopped,
)

_KINDS = {
    "text": "text",
    "thinking": "reasoning",
    "redacted_thinking": "reasoning",
    "tool_use": "tool-call",
}


class _Open:
    __slots__ = (
        "call_id",
        "closed",
        "index",
        "kind",
        "name",
        "parts",
        "raw",
        "redacted",
        "signature",
    )

    def __init__(self, index: int, kind: str, raw: JsonObject) -> None:
        self.index = index
        self.kind = kind
        self.raw = raw
        self.parts: list[str] = []
        self.signature: str | None = None
        self.redacted: str | None = None
        self.call_id = ""
        self.name = ""
        self.closed = False

    def block(self) -> ContentBlock:
        text = "".join(self.parts)
        if self.kind == "text":
            return TextBlock(text=text)
        if self.kind == "reasoning":
            return ReasoningBlock(text=text, signature=self.signature, redacted=self.redacted)
        if self.kind == "tool-call":
            if not text:
                start_input = self.raw.get("input")
                text = json.dumps(start_input, ensure_ascii=False) if start_input else "{}"
            return ToolCallBlock(id=CallId(self.call_id), name=self.name, arguments=text)
        raw = dict(self.raw)
        if text:
            raw["input"] = json_object(text) or text
        return UnknownBlock(type=self.kind, raw=raw)


def map_stop(reason: str | None, *, has_blocks: bool, has_tools: bool) -> FinishReason:
    """The finish reason for Anthropic's ``stop_reason`` (no content is ``EMPTY_RESPONSE``)."""
    if reason in (None, "end_turn", "stop_sequence"):
        if not has_blocks:
            if reason is None:
                return FinishError(
                    failure=LlmFailure(code="EMPTY_RESPONSE", message="the model returned nothing")
                )
            return FinishError(failure=model_stopped())
        return FinishToolCalls() if has_tools and reason is None else FinishStop()
    if reason == "tool_use":
        return FinishToolCalls() if has_tools else FinishStop()
    if reason == "max_tokens":
        return FinishMaxTokens()
    code = (
        "CONTEXT_WINDOW_EXCEEDED" if reason == "model_context_window_exceeded" else reason.upper()
    )
    return FinishError(failure=LlmFailure(code=code, message=f"model stopped: {reason}"))


def _str(value: JsonValue) -> str:
    return value if isinstance(value, str) else ""


class MessagesTranslator:
    """Stateful translation of one response. Not reusable."""

    __slots__ = (
        "_blocks",
        "_next_index",
        "_order",
        "_provider",
        "_secret",
        "_stop_reason",
        "_usage",
        "failure",
        "out",
        "stopped",
    )

    def __init__(self, *, provider: str, secret: str | None) -> None:
        self._provider = provider
        self._secret = secret
        self.out: list[StreamChunk] = []
        self._blocks: dict[int, _Open] = {}
        self._order: list[_Open] = []
        self._next_index = 0
        self._usage: JsonObject = {}
        self._stop_reason: str | None = None
        self.stopped = False
        self.failure: LlmFailure | None = None

    def feed(self, event: JsonObject) -> None:
        kind = event.get("type")
        if kind == "content_block_delta":
            self._delta(event)
        elif kind == "content_block_start":
            self._start(event)
        elif kind == "content_block_stop":
            block = self._blocks.get(_index(event))
            if block is not None:
                self._close(block)
        elif kind == "message_start":
            message = event.get("message")
            if isinstance(message, dict) and isinstance(usage := message.get("usage"), dict):
                self._usage.update(usage)
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict) and isinstance(reason := delta.get("stop_reason"), str):
                self._stop_reason = reason
            usage = event.get("usage")
            if isinstance(usage, dict):
                self._usage.update({k: v for k, v in usage.items() if v is not None})
        elif kind == "message_stop":
            self.finish()
        elif kind == "error":
            info = error_info(event)
            if info is not None:
                self.failure = inband_failure(info, provider=self._provider, secret=self._secret)

    def _start(self, event: JsonObject) -> None:
        raw = event.get("content_block")
        if not isinstance(raw, dict):
            return
        wire_type = _str(raw.get("type"))
        block = _Open(self._next_index, _KINDS.get(wire_type, wire_type or "unknown"), raw)
        self._next_index += 1
        self._blocks[_index(event)] = block
        self._order.append(block)
        self.out.append(BlockStartChunk(index=block.index, block_type=block.kind))
        if wire_type == "text" and (text := _str(raw.get("text"))):
            block.parts.append(text)
            self.out.append(TextDeltaChunk(index=block.index, text=text))
        elif wire_type == "thinking":
            block.signature = _str(raw.get("signature")) or None
            if thinking := _str(raw.get("thinking")):
                block.parts.append(thinking)
                self.out.append(ReasoningDeltaChunk(index=block.index, text=thinking))
        elif wire_type == "redacted_thinking":
            block.redacted = _str(raw.get("data"))
        elif wire_type == "tool_use":
            block.call_id = _str(raw.get("id"))
            block.name = _str(raw.get("name"))
            self.out.append(
                ToolCallDeltaChunk(
                    index=block.index, id=CallId(block.call_id), name=block.name, arguments_delta=""
                )
            )

    def _delta(self, event: JsonObject) -> None:
        block = self._blocks.get(_index(event))
        delta = event.get("delta")
        if block is None or block.closed or not isinstance(delta, dict):
            return
        kind = delta.get("type")
        if kind == "text_delta":
            text = _str(delta.get("text"))
            if text and block.kind == "text":
                block.parts.append(text)
                self.out.append(TextDeltaChunk(index=block.index, text=text))
        elif kind == "thinking_delta":
            text = _str(delta.get("thinking"))
            if text and block.kind == "reasoning":
                block.parts.append(text)
                self.out.append(ReasoningDeltaChunk(index=block.index, text=text))
        elif kind == "signature_delta":
            block.signature = (block.signature or "") + _str(delta.get("signature"))
        elif kind == "input_json_delta":
            fragment = _str(delta.get("partial_json"))
            block.parts.append(fragment)
            if block.kind == "tool-call" and fragment:
                self.out.append(
                    ToolCallDeltaChunk(
                        index=block.index,
                        id=CallId(block.call_id),
                        name=block.name,
                        arguments_delta=fragment,
                    )
                )
        # citations_delta and future delta types carry nothing we keep

    def _close(self, block: _Open) -> None:
        if not block.closed:
            block.closed = True
            self.out.append(BlockEndChunk(index=block.index, block=block.block()))

    def finish(self) -> None:
        """Close open blocks, then emit ``usage`` (if any) and ``finish``."""
        self.stopped = True
        for block in self._order:
            self._close(block)
        usage = map_usage(self._usage)
        if usage is not None:
            self.out.append(UsageChunk(usage=usage))
        has_tools = any(b.kind == "tool-call" for b in self._order)
        self.out.append(
            FinishChunk(
                reason=map_stop(
                    self._stop_reason,
                    has_blocks=any(not _blank(b) for b in self._order),
                    has_tools=has_tools,
                )
            )
        )

    def end_of_stream(self, *, bytes_seen: int) -> None:
        """The body ended before ``message_stop``."""
        if bytes_seen == 0:
            raise LlmError(empty_body(f"{self._provider} sent an empty body"))
        raise LlmError(
            LlmFailure(
                code="STREAM_CLOSED",
                message=f"{self._provider} stream ended before message_stop",
            )
        )


def _blank(block: _Open) -> bool:
    """A text block that holds no text: an answer of only these is empty (``map_stop``)."""
    return block.kind == "text" and not any(block.parts)


def _index(event: JsonObject) -> int:
    index = event.get("index")
    return index if isinstance(index, int) else -1


def map_usage(raw: JsonObject) -> TokenUsage | None:
    """Anthropic counts are already disjoint: ``input_tokens`` excludes cache reads and writes.

    ``None`` (unknown, then estimated) when no count came, or every count is 0 — what a proxy such as
    LiteLLM reports for an answer it did not measure: a real request always has input tokens."""
    if not raw:
        return None
    try:
        u = WireUsage.model_validate(raw)
    except ValidationError:
        return None
    counts = (
        u.input_tokens,
        u.output_tokens,
        u.cache_read_input_tokens,
        u.cache_creation_input_tokens,
    )
    if not any(counts):
        return None  # none, or all 0: no request has an empty prompt, so not a count
    return TokenUsage(
        input_tokens=u.input_tokens or 0,
        output_tokens=u.output_tokens or 0,
        cache_read_tokens=u.cache_read_input_tokens,
        cache_write_tokens=u.cache_creation_input_tokens,
    )
