"""The token meter: how much of the model's context window the session's history uses (SPINE §7.6).

``measure(session)`` anchors on the latest successful model call's real usage — its billed input plus
its output covers the whole history up to and including that answer — when the request header in
force then still matches the current one (same system prompt and tools; the output cap, which the
agent sets per request from the room left, is not compared: it does not change the input) and the
history up to that answer is still on the surface unchanged (``Session.prefix_kept``: a compaction
that replaced older turns voids the anchor, whose usage counted them); everything
the surface holds after that answer is *estimated* and added on top. With no such anchor the whole
request is estimated.

Estimates (the harness heuristic): text or reasoning ``ceil(chars / 4) + 4``; a tool call
``(name + arguments) / 4 + 4``; a tool result its nested blocks ``+ 4``; ``+ 4`` per message; the
system prompt ``chars / 4 + 4``; the tool list ``len(json(tools)) / 4 + 4``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Literal

from dsh_kernel.llm.codec import tool_schema_to_json
from dsh_kernel.llm.types import (
    ContentBlock,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UnknownBlock,
)
from dsh_kernel.session.derive import EpochHeader, header_equals, project_event
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.session.log import Session
from dsh_kernel.session.payloads import payload_of


def _chars(n: int) -> int:
    return math.ceil(n / 4) + 4


def block_tokens(block: ContentBlock) -> int:
    match block:
        case TextBlock() | ReasoningBlock():
            return _chars(len(block.text))
        case ToolCallBlock():
            return _chars(len(block.name) + len(block.arguments))
        case ToolResultBlock():
            return sum(block_tokens(b) for b in block.content) + 4
        case ImageBlock():
            # as an image, about one token per 750 pixels (Anthropic's rule; OpenAI's tiles come to
            # about the same at 1,024 px); as its description, its text: whichever is larger
            return max(block.width * block.height // 750, _chars(len(block.description))) + 4
        case UnknownBlock():
            return _chars(len(json.dumps(block.raw)))


def message_tokens(message: Message) -> int:
    return sum(block_tokens(b) for b in message.content) + 4


def header_tokens(header: EpochHeader | None) -> int:
    if header is None:
        return 0
    total = _chars(len(header.system)) if header.system else 0
    if header.tools:
        total += _chars(len(json.dumps([tool_schema_to_json(t) for t in header.tools])))
    return total


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenMeasurement:
    baseline: Literal["usage", "estimated"]
    baseline_tokens: int
    """Tokens of the anchor: a real usage, or the estimate of the system prompt and tools."""
    surface_delta_tokens: int
    """Estimated tokens of the history after the anchor."""
    context_window: int | None

    @property
    def total_tokens(self) -> int:
        return self.baseline_tokens + self.surface_delta_tokens

    @property
    def fraction(self) -> float | None:
        return self.total_tokens / self.context_window if self.context_window else None

    def describe(self) -> str:
        how = "measured" if self.baseline == "usage" else "estimated"
        text = f"~{self.total_tokens:,} tokens ({how})"
        if self.context_window:
            text += f" of {self.context_window:,} ({100 * (self.fraction or 0):.1f}%)"
        return text


def _same_input(a: EpochHeader | None, b: EpochHeader | None) -> bool:
    """Whether two headers send the same input: equal but for the output cap."""

    def uncapped(h: EpochHeader | None) -> EpochHeader | None:
        if h is None:
            return None
        return replace(
            h,
            config=replace(h.config, max_tokens=None),
            adapter_defaults=h.adapter_defaults - {"maxTokens"},
        )

    return header_equals(uncapped(a), uncapped(b))


def _anchor(events: list[SessionEvent]) -> tuple[int, int, EpochHeader | None] | None:
    """``(seq of the answer, its tokens, the header then in force)`` of the latest successful call
    with usage, or ``None``."""
    for ev in reversed(events):
        if ev.type != "assistant/message":
            continue
        answer = payload_of(ev, "assistant/message")
        usage = answer.get("usage")
        if answer.get("interrupted") or usage is None:
            continue
        tokens = 0
        for key in ("inputTokens", "cacheReadTokens", "cacheWriteTokens", "outputTokens"):
            value = usage.get(key)
            tokens += value if isinstance(value, int) else 0
        header: EpochHeader | None = None
        for before in reversed(events[: ev.seq]):
            if before.type == "request/header":
                header = EpochHeader.from_json(payload_of(before, "request/header")["header"])
                break
        return ev.seq, tokens, header
    return None


def measure(
    session: Session, *, header: EpochHeader | None = None, context_window: int | None = None
) -> TokenMeasurement:
    """The context the next request would use. ``header`` defaults to the log's latest."""
    events = list(session.events)
    if header is None:
        for ev in reversed(events):
            if ev.type == "request/header":
                header = EpochHeader.from_json(payload_of(ev, "request/header")["header"])
                break
    anchor = _anchor(events)
    surface = session.surface
    if anchor is not None and _same_input(anchor[2], header) and session.prefix_kept(anchor[0]):
        seq, tokens, _ = anchor
        after = surface[surface.index(seq) + 1 :]
        delta = 0
        for s in after:
            m = project_event(events[s])
            if m is not None:
                delta += message_tokens(m)
        return TokenMeasurement(
            baseline="usage",
            baseline_tokens=tokens,
            surface_delta_tokens=delta,
            context_window=context_window,
        )
    delta = sum(message_tokens(m) for m in session.derive_messages())
    return TokenMeasurement(
        baseline="estimated",
        baseline_tokens=header_tokens(header),
        surface_delta_tokens=delta,
        context_window=context_window,
    )
