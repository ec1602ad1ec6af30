"""Token accounting: a projection of the log (SPINE §1.11, §2.7).

Usage is read per model attempt from the ``assistant/chunk`` usage chunks — a failed attempt has no
message, so its usage chunk is the only record of what it cost — falling back to
``assistant/message.usage`` for streams that logged no usage chunk. Counts are disjoint: input is
uncached input, cache reads and writes are separate, reasoning is *inside* output.

**Unknown is unknown.** An attempt the model answered (a ``stop``, ``tool-calls`` or ``max-tokens``
finish, or a stream cut by a cancel or a crash after some text) for which the server sent no usage at
all (llama.cpp's server never does; a cut stream cannot) is never counted as zero tokens: its counts
are *estimated* with the token meter's heuristic (``dsh_kernel.agent.meter``, SPINE §7.6: text and
reasoning ``ceil(chars / 4) + 4``, a tool call ``(name + arguments) / 4 + 4``, a tool result its nested
blocks ``+ 4``, ``+ 4`` per message, the system prompt and tool list ``chars / 4 + 4``) — input: the
history sent plus the request header in force; output: the message it produced — and counted in
``estimated_requests``; the cost of such totals is unknown (``None``) unless every price is zero. The
store's ``requests``/``usage`` views compute the same estimate in SQL (``estimated = true``); a test
holds the two, and the meter, equal. A failed attempt (``error`` finish) without usage has no counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.llm.types import ModelInfo
from dsh_kernel.session.codec import dumps
from dsh_kernel.session.events import SessionEvent

_ANSWERED = ("stop", "tool-calls", "max-tokens")
_DELTAS = ("text-delta", "reasoning-delta", "tool-call-delta")


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageTotals:
    """Requests and their token counts, summed over the log or one turn (estimates: module docstring)."""

    requests: int = 0
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    estimated_requests: int = 0
    """Requests the server sent no usage for: their counts (included above) are estimates."""

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def cost(self, info: ModelInfo) -> float | None:
        """Dollars, when the model's prices are known and no count is estimated — estimated counts
        make the cost unknown, unless every price is zero. Cache reads and writes without a price of
        their own are billed as input (as SQL's ``usage.cost``)."""
        inp, out = info.input_price_per_mtok, info.output_price_per_mtok
        if inp is None or out is None:
            return None
        cached = info.cached_input_price_per_mtok
        write = info.cache_write_price_per_mtok
        cached = cached if cached is not None else inp
        write = write if write is not None else inp
        free = inp == 0 and out == 0 and cached == 0 and write == 0
        if self.estimated_requests and not free:
            return None
        return (
            self.input_tokens * inp
            + self.cache_write_tokens * write
            + self.cache_read_tokens * cached
            + self.output_tokens * out
        ) / 1_000_000

    def describe(self, info: ModelInfo | None = None) -> str:
        cost = self.cost(info) if info is not None else None
        text = (
            f"{self.requests} request{'s' if self.requests != 1 else ''}: "
            f"{self.input_tokens:,} in, {self.cache_read_tokens:,} cached"
            + (f", {self.cache_write_tokens:,} cache write" if self.cache_write_tokens else "")
            + f", {self.output_tokens:,} out ({self.reasoning_tokens:,} reasoning)"
        )
        k = self.estimated_requests
        if k:
            text += (
                f" — estimated for {k} request{'s' if k != 1 else ''} the server sent no usage for"
            )
        if cost is not None:
            return text + f", ${cost:.4f}"
        if k:
            return text + ", cost unknown (estimated counts)"
        return text + ", price unknown (set one with dsh_kernel.store.set_price)"


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _chars(n: int) -> int:
    return math.ceil(n / 4) + 4


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def estimate_message_tokens(message: JsonValue) -> int:
    """The token meter's estimate of a logged message (its JSON form): per block, text and reasoning
    ``ceil(chars / 4) + 4``, a tool call ``(name + arguments) / 4 + 4``, a tool result its nested
    blocks ``+ 4``; ``+ 4`` per message. Other blocks count their text, if any, plus 4."""
    content = message.get("content") if isinstance(message, dict) else None
    total = 4
    for block in content if isinstance(content, list) else ():
        b = block if isinstance(block, dict) else {}
        kind = b.get("type")
        if kind == "tool-call":
            total += _chars(len(_text(b.get("name"))) + len(_text(b.get("arguments"))))
        elif kind == "tool-result":
            nested = b.get("content")
            total += 4 + sum(
                _chars(len(_text(c.get("text") if isinstance(c, dict) else None)))
                for c in (nested if isinstance(nested, list) else ())
            )
        else:
            total += _chars(len(_text(b.get("text"))))
    return total


def estimate_header_tokens(data: JsonValue) -> int:
    """The meter's estimate of a ``request/header`` event's system prompt and tool list."""
    header = data.get("header") if isinstance(data, dict) else None
    if not isinstance(header, dict):
        return 0
    system, tools = header.get("system"), header.get("tools")
    total = _chars(len(system)) if isinstance(system, str) and system else 0
    if isinstance(tools, list) and tools:
        total += _chars(len(dumps(tools)))
    return total


def _has_content(message: JsonValue) -> bool:
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and len(content) > 0


class _Totals:
    """The running sums of ``usage_totals``."""

    def __init__(self) -> None:
        self.req = self.inp = self.cr = self.cw = self.out = self.rea = self.est = 0

    def add(self, usage: JsonValue) -> None:
        if isinstance(usage, dict):
            self.inp += _int(usage.get("inputTokens"))
            self.out += _int(usage.get("outputTokens"))
            self.cr += _int(usage.get("cacheReadTokens"))
            self.cw += _int(usage.get("cacheWriteTokens"))
            self.rea += _int(usage.get("reasoningTokens"))


class _Attempt:
    """One model call being read: what it reported, and what would estimate it."""

    __slots__ = ("answered", "counted", "input_estimate", "usage")

    def __init__(self, input_estimate: int, counted: bool) -> None:
        self.input_estimate = input_estimate
        self.counted = counted  # inside the turn asked for
        self.usage = False
        self.answered: bool | None = None  # True: answered; False: failed; None: not finished


# Complexity (C901): one fold over the log, one branch per event type.
def usage_totals(events: Sequence[SessionEvent], *, turn: int | None = None) -> UsageTotals:  # noqa: C901
    """Sum usage over the log, or over one turn (see the module docstring for estimates)."""
    t = _Totals()
    history = header = 0  # estimated tokens of the history so far, and of the header in force
    current_turn: int | None = None
    attempt: _Attempt | None = None
    deltas = False

    def settle(output_estimate: int) -> None:
        nonlocal attempt
        a = attempt
        attempt = None
        if a is None or not a.counted:
            return
        estimated = not a.usage and (a.answered is True or (a.answered is None and deltas))
        if a.answered is not None or estimated:
            t.req += 1  # a call that finished, or one cut short after the model said something
        if estimated:
            t.est += 1
            t.inp += a.input_estimate
            t.out += output_estimate

    for ev in events:
        kind, data = ev.type, ev.data
        if kind == "assistant/chunk":
            chunk = data.get("chunk")
            c = chunk if isinstance(chunk, dict) else {}
            ctype = c.get("type")
            if attempt is None:
                attempt = _Attempt(history + header, turn is None or current_turn == turn)
                deltas = False
            if ctype == "usage":
                attempt.usage = True
                if attempt.counted:
                    t.add(c.get("usage"))
            elif ctype in _DELTAS:
                deltas = True
            elif ctype == "finish":
                reason = c.get("reason")
                attempt.answered = isinstance(reason, dict) and reason.get("kind") in _ANSWERED
                if not attempt.answered:
                    settle(0)  # a failed call: no message follows, a retry may
            continue
        if kind == "assistant/message":
            message = data.get("message")
            if attempt is not None and not attempt.usage and not data.get("interrupted"):
                usage = data.get("usage")
                if isinstance(usage, dict):
                    attempt.usage = True
                    if attempt.counted:
                        t.add(usage)
            settle(estimate_message_tokens(message))
            if ev.surface_op == "append" and _has_content(message):
                history += estimate_message_tokens(message)
            continue
        if attempt is not None and kind in (
            "step/start",
            "step/end",
            "turn/start",
            "turn/end",
            "llm/retry",
            "llm/retry-started",
        ):
            settle(0)
        if kind == "turn/start":
            tv = data.get("turn")
            current_turn = tv if isinstance(tv, int) else None
        elif kind == "request/header":
            header = estimate_header_tokens(data)
        elif kind in ("user/message", "tool/result") and ev.surface_op == "append":
            message = data if kind == "user/message" else data.get("message")
            if _has_content(message):
                history += estimate_message_tokens(message)
    settle(0)
    return UsageTotals(
        requests=t.req,
        input_tokens=t.inp,
        cache_read_tokens=t.cr,
        cache_write_tokens=t.cw,
        output_tokens=t.out,
        reasoning_tokens=t.rea,
        estimated_requests=t.est,
    )
