"""Token accounting: a projection of the log (SPINE §1.11, §2.7).

Usage is read per model attempt from the ``assistant/chunk`` usage chunks — a failed attempt has no
message, so its usage chunk is the only record of what it cost — falling back to
``assistant/message.usage`` for streams that logged no usage chunk. Counts are disjoint: input is
uncached input, cache reads and writes are separate, reasoning is *inside* output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dsh_kernel.llm.types import ModelInfo
from dsh_kernel.session.events import SessionEvent


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageTotals:
    requests: int = 0
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def cost(self, info: ModelInfo) -> float | None:
        """Dollars, when the model's prices are known (cache writes are billed as input)."""
        if info.input_price_per_mtok is None or info.output_price_per_mtok is None:
            return None
        cached = (
            info.cached_input_price_per_mtok
            if info.cached_input_price_per_mtok is not None
            else info.input_price_per_mtok
        )
        return (
            (self.input_tokens + self.cache_write_tokens) * info.input_price_per_mtok
            + self.cache_read_tokens * cached
            + self.output_tokens * info.output_price_per_mtok
        ) / 1_000_000

    def describe(self, info: ModelInfo | None = None) -> str:
        cost = self.cost(info) if info is not None else None
        text = (
            f"{self.requests} request{'s' if self.requests != 1 else ''}: "
            f"{self.total_input_tokens:,} tokens in ({self.cache_read_tokens:,} cached), "
            f"{self.output_tokens:,} out ({self.reasoning_tokens:,} reasoning)"
        )
        return text + (
            f", ${cost:.4f}" if cost is not None else ", cost unknown (no price configured)"
        )


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_totals(events: Sequence[SessionEvent], *, turn: int | None = None) -> UsageTotals:
    """Sum usage over the log, or over one turn."""
    req = inp = cr = cw = out = rea = 0
    current_turn: int | None = None
    attempt_has_usage = False
    for ev in events:
        t = ev.type
        if t == "turn/start":
            tv = ev.data.get("turn")
            current_turn = tv if isinstance(tv, int) else None
            continue
        if turn is not None and current_turn != turn:
            continue
        usage: object = None
        if t == "assistant/chunk":
            chunk = ev.data.get("chunk")
            if isinstance(chunk, dict):
                if chunk.get("type") == "usage":
                    usage = chunk.get("usage")
                    attempt_has_usage = True
                elif chunk.get("type") == "finish":
                    req += 1
        elif t == "assistant/message":
            if not attempt_has_usage and not ev.data.get("interrupted"):
                usage = ev.data.get("usage")
            attempt_has_usage = False
        elif t in ("step/start", "llm/retry-started"):
            attempt_has_usage = False
        if isinstance(usage, dict):
            inp += _int(usage.get("inputTokens"))
            out += _int(usage.get("outputTokens"))
            cr += _int(usage.get("cacheReadTokens"))
            cw += _int(usage.get("cacheWriteTokens"))
            rea += _int(usage.get("reasoningTokens"))
    return UsageTotals(
        requests=req,
        input_tokens=inp,
        cache_read_tokens=cr,
        cache_write_tokens=cw,
        output_tokens=out,
        reasoning_tokens=rea,
    )
