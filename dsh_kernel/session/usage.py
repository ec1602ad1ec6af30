"""Token accounting: a projection of the log (SPINE §1.11, §2.7).

Usage is read per model attempt from the ``assistant/chunk`` usage chunks — a failed attempt has no
message, so its usage chunk is the only record of what it cost — falling back to
``assistant/message.usage`` for streams that logged no usage chunk. Counts are disjoint: input is
uncached input, cache reads and writes are separate, reasoning is *inside* output.

**Unknown is unknown.** An attempt the server read — the model answered (a ``stop``, ``tool-calls``
or ``max-tokens`` finish), or streamed something before it failed (a server error mid-answer, an idle
timeout, a dropped connection) or was cut by a cancel or a crash — for which the server sent no usage
at all (llama.cpp's server never does; a failed or cut stream cannot) is never counted as zero
tokens: its counts are *estimated* with the one token estimate (``dsh_kernel.llm.estimate``, SPINE
§7.6, the token meter's) — input: the history sent plus the request header in force; output: the
message it produced, or, when it logged none (a failed attempt, a stream cut with nothing visible),
what its deltas streamed
(``streamed_tokens``: ``ceil(chars / 4) + 4``) — and counted in ``estimated_requests``. The input
estimate is *calibrated* by the ``request/context`` in force when the call was made
(``llm.calibration``: ``ceil(raw × tokenRatio) + tokenAllowance``), as the token meter measured it;
the output estimate is not (the calibration is learned from prompt counts); the cost of
such totals is unknown (``None``) unless every price is zero. The store's ``requests``/``usage`` views
compute the same estimate in SQL (``estimated = true``); a test holds the two, and the meter, equal. A
failed attempt that streamed nothing (a refusal such as a 429 or a 500 before the answer began) and
reported no usage has no counts: nothing shows the server read it.

**One reading.** ``UsageReader`` reads the attempts once, event by event; ``usage_totals`` (``%agent
cost``) is its ``totals()`` over a log, and the turn reader (``dsh_kernel.transcript.turn``) feeds it a
turn's events for the footer's ``summary()``: the same calls, the same counts (the last ``usage``
chunk of an attempt wins, as in the stream grammar), but only what the servers *reported* — the
footer shows no estimate; the bill (``%agent cost``, SQL) does. A compaction's summary call
(``compaction/summary`` with a ``provider``) is a request too, in the turn it ran in (none for one
by hand, between turns), as the store's ``requests`` counts it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.calibration import IDENTITY, Calibration
from dsh_kernel.llm.codec import block_from_json
from dsh_kernel.llm.estimate import block_tokens, chars_tokens, text_tokens, tools_json_tokens
from dsh_kernel.llm.types import ContentBlock, ModelInfo, UnknownBlock
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.session.payloads import CompactionSummary, RequestHeader, payload_of

_ANSWERED = ("stop", "tool-calls", "max-tokens")
_DELTAS = ("text-delta", "reasoning-delta", "tool-call-delta")


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageTotals:
    """Token counts (disjoint: uncached input, cache reads, cache writes, output) and their cost."""

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
            return text + (", free" if cost == 0 and _free(info) else f", ${cost:.4f}")
        if k:
            return text + ", cost unknown (estimated counts)"
        return text + ", price unknown (set one with dsh_kernel.store.set_price)"


def _free(info: ModelInfo | None) -> bool:
    """Whether every price of ``info`` is known and zero (the offline demo, a local server the user
    priced at zero)."""
    if info is None:
        return False
    prices = (
        info.input_price_per_mtok,
        info.cached_input_price_per_mtok,
        info.cache_write_price_per_mtok,
        info.output_price_per_mtok,
    )
    return info.input_price_per_mtok == 0 and all(p in (None, 0) for p in prices)


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageSummary:
    """Token counts the servers reported for a turn's model calls (disjoint, as in ``TokenUsage``)."""

    requests: int = 0
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    context_tokens: int | None = None
    """Prompt plus answer of the last call that reported a count (a usage of 0 in all is passed
    over: no request has an empty prompt): roughly what the next request starts from."""

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _message_tokens(message: JsonValue) -> int | None:
    """The estimate of a logged message (``llm.estimate.message_tokens``), or ``None`` when it has
    no content. Lenient, as a footer must be: only the blocks are decoded (a journal's messages are
    held to the codec when it is loaded, a session built in memory is not), and a block that does
    not decode counts as a block this version does not know (its text, if any)."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list) or not content:
        return None
    blocks: list[ContentBlock] = []
    for raw in content:
        try:
            blocks.append(block_from_json(raw))
        except ValueError:
            obj = raw if isinstance(raw, dict) else {}
            blocks.append(UnknownBlock(type=_text(obj.get("type")), raw=obj))
    return sum(block_tokens(b) for b in blocks) + 4


def _header_tokens(data: RequestHeader) -> int:
    """The estimate of a ``request/header`` event's system prompt and tool list."""
    header = data["header"]
    system = header.get("system")
    return (text_tokens(system) if isinstance(system, str) and system else 0) + tools_json_tokens(
        header.get("tools")
    )


class _Attempt:
    """One model call being read: what it reported, and what would estimate it."""

    __slots__ = ("answered", "counted", "deltas", "input_estimate", "streamed", "usage")

    def __init__(self, input_estimate: int, counted: bool) -> None:
        self.input_estimate = input_estimate  # calibrated
        self.counted = counted  # inside the turn asked for
        self.usage: JsonObject | None = None  # the last usage reported (the last chunk wins)
        self.answered: bool | None = None  # True: answered; False: failed; None: not finished
        self.deltas = False  # the model said something: the server had read the request
        self.streamed = 0  # characters of the deltas streamed

    def streamed_estimate(self) -> int:
        """The estimate of what streamed, for a call that logged no message (``streamed_tokens``)."""
        return streamed_tokens(self.streamed) if self.deltas else 0


def streamed_tokens(chars: int) -> int:
    """The estimate of an answer known only by its deltas' ``chars`` (a failed or cut call that
    logged no message): ``ceil(chars / 4) + 4``, as one block of text."""
    return chars_tokens(chars)


class _Sums:
    """Running sums of token counts."""

    __slots__ = ("cr", "cw", "inp", "out", "rea", "req")

    def __init__(self) -> None:
        self.req = self.inp = self.cr = self.cw = self.out = self.rea = 0

    def add(self, usage: JsonObject) -> None:
        self.inp += _int(usage.get("inputTokens"))
        self.out += _int(usage.get("outputTokens"))
        self.cr += _int(usage.get("cacheReadTokens"))
        self.cw += _int(usage.get("cacheWriteTokens"))
        self.rea += _int(usage.get("reasoningTokens"))


_ENDS_ATTEMPT = frozenset(
    ("step/start", "step/end", "turn/start", "turn/end", "llm/retry", "llm/retry-started")
)


class UsageReader:
    """The one reading of usage: feed a log's events in order with ``apply``; read ``totals()``
    (estimates included: ``%agent cost``, equal to SQL) or ``summary()`` (what the servers reported:
    a turn's footer) at any point. ``turn`` limits the counting to one turn's calls."""

    __slots__ = (
        "_attempt",
        "_calibration",
        "_current_turn",
        "_est",
        "_est_in",
        "_est_out",
        "_header",
        "_history",
        "_last",
        "_reported",
        "_settled",
        "_turn",
    )

    def __init__(self, *, turn: int | None = None) -> None:
        self._turn = turn
        self._current_turn: int | None = None
        self._history = self._header = 0  # estimated tokens of the history so far, of the header
        self._calibration = IDENTITY  # of the request/context in force
        self._attempt: _Attempt | None = None
        self._settled = 0  # calls that finished, or were cut short after the model said something
        self._est = self._est_in = self._est_out = 0  # estimated calls and their estimates
        self._reported = _Sums()  # reported usage of settled calls; ``req``: calls that reported
        self._last: JsonObject | None = None  # the last reported usage

    def apply(self, ev: SessionEvent) -> None:
        kind = ev.type
        if kind == "assistant/chunk":
            # The hot path: read as JSON (the log checks a chunk's keys on append, not their kinds).
            chunk = ev.data["chunk"]
            c = chunk if isinstance(chunk, dict) else {}
            ctype = c.get("type")
            attempt = self._attempt
            if attempt is None:
                counted = self._turn is None or self._current_turn == self._turn
                attempt = self._attempt = _Attempt(
                    self._calibration.tokens(self._history + self._header), counted
                )
            if ctype in _DELTAS:
                attempt.deltas = True
                if ctype == "tool-call-delta":
                    attempt.streamed += len(_text(c.get("name"))) + len(
                        _text(c.get("argumentsDelta"))
                    )
                else:
                    attempt.streamed += len(_text(c.get("text")))
            elif ctype == "usage":
                usage = c.get("usage")
                if isinstance(usage, dict):
                    attempt.usage = usage
            elif ctype == "finish":
                reason = c.get("reason")
                attempt.answered = isinstance(reason, dict) and reason.get("kind") in _ANSWERED
                if not attempt.answered:
                    self._settle(None)  # a failed call: no message follows, a retry may
            return
        if kind == "assistant/message":
            answer = payload_of(ev, "assistant/message")
            tokens = _message_tokens(answer["message"])
            attempt = self._attempt
            if attempt is not None and attempt.usage is None and not answer.get("interrupted"):
                usage = answer.get("usage")
                if usage is not None:
                    attempt.usage = usage
            self._settle(tokens if tokens is not None else 4)
            if ev.surface_op == "append" and tokens is not None:
                self._history += tokens
            return
        if self._attempt is not None and kind in _ENDS_ATTEMPT:
            self._settle(None)
        self._between_calls(ev, kind)

    def _between_calls(self, ev: SessionEvent, kind: str) -> None:
        """An event that is not part of a call's answer: the turn, the envelope, the history."""
        if kind == "turn/start":
            self._current_turn = payload_of(ev, "turn/start")["turn"]
        elif kind == "turn/end":
            self._current_turn = None
        elif kind == "compaction/summary":
            self._compaction_call(payload_of(ev, "compaction/summary"))
        elif kind == "request/header":
            self._header = _header_tokens(payload_of(ev, "request/header"))
        elif kind == "request/context":
            self._calibration = Calibration.from_context(ev.data)
        elif kind in ("user/message", "tool/result") and ev.surface_op == "append":
            tokens = _message_tokens(
                ev.data if kind == "user/message" else payload_of(ev, "tool/result")["message"]
            )
            if tokens is not None:
                self._history += tokens

    def _compaction_call(self, d: CompactionSummary) -> None:
        """A compaction's summary call (``provider`` set: one was made) is a request like any
        other, counted as the store counts it: its reported usage; else, when it did not fail,
        estimated — input the range it summarised plus the header in force, output its text."""
        if "provider" not in d or (self._turn is not None and self._current_turn != self._turn):
            return
        usage = d.get("usage")
        if usage is not None:
            self._settled += 1
            self._reported.req += 1
            self._reported.add(usage)
        elif "failure" not in d:
            self._settled += 1
            self._est += 1
            self._est_in += d["shadowedTokenCount"] + self._header
            self._est_out += math.ceil(len(d["summary"]) / 4) + 8

    @staticmethod
    def _estimated(a: _Attempt) -> bool:
        """No usage reported, and the server read the request: it answered, or said something
        before it failed or was cut."""
        return a.usage is None and (a.answered is True or a.deltas)

    def _settle(self, output_estimate: int | None) -> None:
        """Close the open call; ``output_estimate`` is its message's, ``None`` when it logged none
        (then what streamed is the estimate)."""
        a = self._attempt
        self._attempt = None
        if a is None or not a.counted:
            return
        estimated = self._estimated(a)
        if a.answered is not None or estimated:
            self._settled += 1
        if estimated:
            self._est += 1
            self._est_in += a.input_estimate
            self._est_out += a.streamed_estimate() if output_estimate is None else output_estimate
        if a.usage is not None:
            self._reported.req += 1
            self._reported.add(a.usage)
            if any(_counts(a.usage)[:4]):  # 0/0 measures no context (a proxy's placeholder)
                self._last = a.usage

    def _open(self) -> _Attempt | None:
        """The call still being read, when it counts."""
        a = self._attempt
        return a if a is not None and a.counted else None

    def totals(self) -> UsageTotals:
        """The calls so far, estimates included (a call still open counts as the log's end would:
        as cut short, its output estimated from what streamed)."""
        r, a = self._reported, self._open()
        req, est, est_in, est_out = self._settled, self._est, self._est_in, self._est_out
        sums = [r.inp, r.cr, r.cw, r.out, r.rea]
        if a is not None:
            estimated = self._estimated(a)
            req += 1 if a.answered is not None or estimated else 0
            if estimated:
                est += 1
                est_in += a.input_estimate
                est_out += a.streamed_estimate()
            if a.usage is not None:
                sums = [s + n for s, n in zip(sums, _counts(a.usage), strict=True)]
        return UsageTotals(
            requests=req,
            input_tokens=sums[0] + est_in,
            cache_read_tokens=sums[1],
            cache_write_tokens=sums[2],
            output_tokens=sums[3] + est_out,
            reasoning_tokens=sums[4],
            estimated_requests=est,
        )

    def summary(self) -> UsageSummary:
        """What the servers reported so far, the open call's usage included (a live footer)."""
        r, a, last = self._reported, self._open(), self._last
        req, sums = r.req, [r.inp, r.cr, r.cw, r.out, r.rea]
        if a is not None and a.usage is not None:
            req += 1
            sums = [s + n for s, n in zip(sums, _counts(a.usage), strict=True)]
            if any(_counts(a.usage)[:4]):
                last = a.usage
        return UsageSummary(
            requests=req,
            input_tokens=sums[0],
            cache_read_tokens=sums[1],
            cache_write_tokens=sums[2],
            output_tokens=sums[3],
            reasoning_tokens=sums[4],
            context_tokens=sum(_counts(last)[:4]) if last is not None else None,
        )


def _counts(usage: JsonObject) -> list[int]:
    """input, cache read, cache write, output, reasoning."""
    return [
        _int(usage.get(k))
        for k in (
            "inputTokens",
            "cacheReadTokens",
            "cacheWriteTokens",
            "outputTokens",
            "reasoningTokens",
        )
    ]


def usage_totals(events: Iterable[SessionEvent], *, turn: int | None = None) -> UsageTotals:
    """Sum usage over the log, or over one turn (see the module docstring for estimates)."""
    reader = UsageReader(turn=turn)
    for ev in events:
        reader.apply(ev)
    return reader.totals()
