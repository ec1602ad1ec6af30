"""The token meter: how much of the model's context window the session's history uses (SPINE §7.6).

``measure(session)`` anchors on the latest successful model call's real usage — its billed input plus
its output covers the whole history up to and including that answer; a usage of 0 tokens in all is
no measurement (no request has an empty prompt: a proxy's placeholder) and is passed over — when the request header in
force then still matches the current one (same system prompt and tools; the output cap, which the
agent sets per request from the room left, is not compared: it does not change the input) and the
history up to that answer is still on the surface unchanged (``Session.prefix_kept``: a compaction
that replaced older turns voids the anchor, whose usage counted them); everything
the surface holds after that answer is *estimated* and added on top. With no such anchor the whole
request is estimated.

Estimates are the one token estimate (``dsh_kernel.llm.estimate``), the same the usage reader and
the store use, *calibrated* (``llm.calibration``): ``measure(…, calibration=…)`` scales the
estimated part to what the route's server counts — a whole estimated request by
``Calibration.tokens``, the history after an anchor by ``Calibration.delta``. Without one given, the
calibration in force is the latest ``request/context``'s (what the last request was measured with),
so a reading from the log alone gives what the store's views give. A usage a proxy made up
(``usageOrigin: "proxy"`` on its answer) is no anchor: it was not measured.

Incremental: what a call learns about a session (the anchor, the parsed headers, the estimate of the
surface) is kept beside it (weakly: it goes with the session) and brought up to date from the log's
indexes, so a call reads only what was appended since the previous one — the answers, the surface
nodes — and turn 1,000 is measured as fast as turn 1. The log is append-only and its events are
immutable, so what was read stays true; the only change to what was read is a surface replacement,
which the estimate notices (``Session.replace_generation``) and the anchor rule already checks
(``prefix_kept``). The result is the same as reading the whole log afresh.
"""

from __future__ import annotations

import bisect
import weakref
from dataclasses import dataclass, replace
from typing import Literal

from dsh_kernel.llm.calibration import IDENTITY, Calibration
from dsh_kernel.llm.estimate import message_tokens, request_header_tokens
from dsh_kernel.llm.provider import PreparedCall
from dsh_kernel.llm.types import ToolSchema
from dsh_kernel.session.derive import EpochHeader, header_equals
from dsh_kernel.session.log import Session
from dsh_kernel.session.payloads import payload_of


def header_tokens(header: EpochHeader | None) -> int:
    """The estimate of ``header``'s system prompt and tool list (``llm.estimate``)."""
    if header is None:
        return 0
    return request_header_tokens(header.system, header.tools)


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenMeasurement:
    baseline: Literal["usage", "estimated"]
    baseline_tokens: int
    """Tokens of the anchor: a real usage, or the calibrated estimate of the system prompt and tools
    (the request's calibrated total less ``surface_delta_tokens``)."""
    surface_delta_tokens: int
    """Estimated tokens of the history after the anchor (calibrated)."""
    context_window: int | None
    raw_tokens: int = 0
    """The uncalibrated estimate of the whole request (header and history), anchored or not: what
    a reported usage of it is compared with (``llm.calibration``)."""
    calibration: Calibration = IDENTITY
    """The calibration the estimated part was scaled by."""

    @property
    def total_tokens(self) -> int:
        return self.baseline_tokens + self.surface_delta_tokens

    @property
    def fraction(self) -> float | None:
        return self.total_tokens / self.context_window if self.context_window else None

    def describe(self) -> str:
        how = "measured" if self.baseline == "usage" else "estimated"
        scaled = self.calibration.describe()
        if scaled:
            how += f"; estimates calibrated {scaled}"
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


@dataclass(slots=True)
class _Anchor:
    seq: int
    """The answer's seq."""
    tokens: int
    """Its billed input plus its output."""
    header_seq: int | None
    """The ``request/header`` in force when it was answered."""


class _Reading:
    """What ``measure`` keeps about one session between calls, brought up to date from the log's
    indexes (``Session.seqs_of``) so that a call reads only what was appended since the last one."""

    __slots__ = ("anchor", "answers_read", "estimate", "headers")

    def __init__(self) -> None:
        self.answers_read = 0
        self.anchor: _Anchor | None = None
        self.headers: dict[int, EpochHeader] = {}
        """Parsed ``request/header`` payloads by seq (the latest and the anchor's are kept)."""
        self.estimate: tuple[int, int | None, int] = (-1, None, 0)
        """``(replace generation, the last node counted, tokens)`` of the estimated surface."""

    def catch_up(self, session: Session) -> None:
        """Take in the answers appended since the last call: the latest successful one with usage
        is the anchor, with the header then in force."""
        answers = session.seqs_of("assistant/message", self.answers_read)
        self.answers_read += len(answers)
        events = session.events
        for seq in reversed(answers):
            answer = payload_of(events[seq], "assistant/message")
            usage = answer.get("usage")
            if answer.get("interrupted") or usage is None or answer.get("usageOrigin") == "proxy":
                continue
            tokens = 0
            for key in ("inputTokens", "cacheReadTokens", "cacheWriteTokens", "outputTokens"):
                value = usage.get(key)
                tokens += value if isinstance(value, int) else 0
            if tokens == 0:
                continue  # 0 in and 0 out measures nothing (a proxy's placeholder): no anchor
            headers = session.seqs_of("request/header")
            before = bisect.bisect_left(headers, seq)
            self.anchor = _Anchor(seq, tokens, headers[before - 1] if before else None)
            break
        kept = {self.anchor.header_seq} if self.anchor is not None else set[int | None]()
        latest = session.latest("request/header")
        kept.add(latest.seq if latest is not None else None)
        self.headers = {k: v for k, v in self.headers.items() if k in kept}

    def header(self, session: Session, seq: int | None) -> EpochHeader | None:
        if seq is None:
            return None
        found = self.headers.get(seq)
        if found is None:
            raw = payload_of(session.events[seq], "request/header")["header"]
            found = self.headers[seq] = EpochHeader.from_json(raw)
        return found

    def estimated_history(self, session: Session) -> int:
        """``message_tokens`` summed over the surface: only the nodes appended since the last call
        are read, unless a replacement changed the surface since."""
        generation, last, total = self.estimate
        if generation != session.replace_generation:
            last, total = None, 0
        added = session.surface_after(last)
        for seq in added:
            m = session.projection(seq)
            if m is not None:
                total += message_tokens(m)
        if added:
            last = added[-1]
        self.estimate = (session.replace_generation, last, total)
        return total


_READINGS: weakref.WeakKeyDictionary[Session, _Reading] = weakref.WeakKeyDictionary()


def _reading(session: Session) -> _Reading:
    reading = _READINGS.get(session)
    if reading is None:
        reading = _READINGS[session] = _Reading()
    reading.catch_up(session)
    return reading


def prepared_header(
    prepared: PreparedCall, *, system: str, tools: tuple[ToolSchema, ...]
) -> EpochHeader:
    """The canonical header a request of ``prepared`` with ``system`` and ``tools`` is logged with
    (what the meter, the context window's fit and the spending gate measure)."""
    return EpochHeader(
        config=prepared.config,
        adapter_defaults=prepared.adapter_defaults,
        system=system or None,
        tools=tools,
    ).canonical()


def logged_calibration(session: Session) -> Calibration:
    """The calibration in force in ``session``'s log: the latest ``request/context``'s."""
    latest = session.latest("request/context")
    return Calibration.from_context(latest.data) if latest is not None else IDENTITY


def measure(
    session: Session,
    *,
    header: EpochHeader | None = None,
    context_window: int | None = None,
    calibration: Calibration | None = None,
) -> TokenMeasurement:
    """The context the next request would use. ``header`` defaults to the log's latest,
    ``calibration`` to the log's (``logged_calibration``).

    Its cost is what was appended since the previous call on the same session (the answers and
    surface nodes since), not the session's length."""
    reading = _reading(session)
    if header is None:
        latest = session.latest("request/header")
        header = reading.header(session, latest.seq if latest is not None else None)
    cal = calibration if calibration is not None else logged_calibration(session)
    history = reading.estimated_history(session)
    raw = header_tokens(header) + history
    anchor = reading.anchor
    if (
        anchor is not None
        and _same_input(reading.header(session, anchor.header_seq), header)
        and session.prefix_kept(anchor.seq)
    ):
        delta = 0
        for s in session.surface_after(anchor.seq):
            m = session.projection(s)
            if m is not None:
                delta += message_tokens(m)
        return TokenMeasurement(
            baseline="usage",
            baseline_tokens=anchor.tokens,
            surface_delta_tokens=cal.delta(delta),
            context_window=context_window,
            raw_tokens=raw,
            calibration=cal,
        )
    scaled_history = cal.delta(history)
    return TokenMeasurement(
        baseline="estimated",
        baseline_tokens=cal.tokens(raw) - scaled_history,
        surface_delta_tokens=scaled_history,
        context_window=context_window,
        raw_tokens=raw,
        calibration=cal,
    )
