"""Spending budgets, enforced before a request is sent: tokens and US dollars per UTC day.

(Not ``agent.request.fit``, which is the *context window's* budget: what fits in one request.)

A ``SpendGate`` holds a ``Budget`` (a daily limit in tokens, in dollars, or both; the names of the
settings that set them and who owns them, for the refusal) and reads what was used today from a
``UsageSource`` — today's ``UsageTotals`` by ``(provider, model)``: ``session_usage(session)`` for
one session (the default for a plain ``Agent``), ``dsh_kernel.store.ledger.DailyLedger`` for every
session of a user in a store (the kernel's). The agent sets it with ``Agent(spend=…)`` or
``agent.spend = …``; ``None`` is no budget.

**The gate.** Before each request (``StepRequests.build``, after the context window has fitted the
output cap) and before a compaction's summary call (``agent.compaction.summary``), ``fit`` takes the
request's estimated input (the token meter's reading, ``agent.request.meter.measure``) and its output cap:

* **tokens** — what is left is ``budget − used``; a request whose input plus ``MIN_ANSWER_TOKENS``
  does not fit in it is refused; otherwise its cap is lowered to ``left − input`` where that is less;
* **dollars** — the request is priced at its route's price (``price``: input at the uncached input
  price, output at the output price) the same way, and its cap lowered to what the dollars left
  buy; a route with no known price is refused (``BUDGET_UNPRICED``): its cost cannot be counted.

A refusal is ``LlmError`` ``BUDGET_EXCEEDED`` (not retryable): the turn ends with it and nothing is
sent. Its message says what was used, the limit, which setting holds it and who owns it (what to do
is ``dsh_kernel.failures``' advice for the code).

**Retries.** A retry is a request like any other and is checked the same way — and *before* the
retry is scheduled (``agent.request.step.StepRequests.check_retry``, which the retry policy calls
before it logs ``llm/retry`` and waits): a retry the budget cannot pay for is not sent, and the
refusal names the failure that would have been retried.

**What "used" is.** Tokens are input, cache reads and writes, and output (reasoning is inside output);
estimated counts, for servers that report none, count as their estimate — among them an attempt that
streamed something and then failed (a server error mid-answer, an idle timeout, a dropped
connection): it counts its input and what streamed (``session.usage``). Dollars are each route's
tokens at that route's price; a route with no price adds nothing (no request to it can have been sent
under a dollar budget). Providers in ``free`` (the kernel's offline demo and replay, which send
nothing anywhere) are neither gated nor counted.

The estimate of the input is the meter's (measured where a real usage anchors it, else ``chars /
4`` calibrated to the route's server, ``llm.calibration``), so a request may cost a little
more than it was allowed; the next one then sees the excess. An estimated request counts in "used"
at the same calibrated figure (``session.usage``, the store's ``requests``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Final, TypeAlias

from dsh_kernel.agent.request.fit import MIN_ANSWER_TOKENS, with_cap
from dsh_kernel.agent.request.meter import measure, prepared_header
from dsh_kernel.errors import LlmError
from dsh_kernel.llm.calibration import Calibration
from dsh_kernel.llm.catalogue import CATALOGUE
from dsh_kernel.llm.provider import PreparedCall
from dsh_kernel.llm.types import LlmFailure, ModelInfo, ToolSchema
from dsh_kernel.session.codec import MAX_EXACT_INT
from dsh_kernel.session.daily_usage import DailyUsage, Route, utc_day
from dsh_kernel.session.log import Clock, Session, wall_clock_ms
from dsh_kernel.session.usage import UsageTotals

UsageSource: TypeAlias = Callable[[], Mapping[Route, UsageTotals]]
"""Today's usage (UTC) by ``(provider, model)``."""
PriceLookup: TypeAlias = Callable[[str, str], ModelInfo | None]
"""``(provider, model) -> ModelInfo`` whose prices the budget counts at."""

BUDGET_EXCEEDED: Final = "BUDGET_EXCEEDED"
BUDGET_UNPRICED: Final = "BUDGET_UNPRICED"


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Daily limits per UTC day (``None``: no limit) and who sets them (for the refusal's line)."""

    tokens: int | None = None
    usd: float | None = None
    tokens_setting: str = "Budget.tokens"
    """The name of the setting that holds the token limit (``DSH_BUDGET_TOKENS``, …)."""
    usd_setting: str = "Budget.usd"
    owner: str = "the program that made this agent"
    """Who can change the limits (``"your course's administrator"``)."""

    @property
    def limited(self) -> bool:
        return self.tokens is not None or self.usd is not None


def catalogue_price(provider: str, model: str) -> ModelInfo | None:
    """The catalogue's list price of ``model`` under provider id ``provider``, if it has one."""
    return CATALOGUE.get(provider, {}).get(model)


def priced(info: ModelInfo | None) -> bool:
    """Whether ``info`` has an input and an output price."""
    return (
        info is not None
        and info.input_price_per_mtok is not None
        and info.output_price_per_mtok is not None
    )


def usd_of(totals: UsageTotals, info: ModelInfo) -> float:
    """``totals`` at ``info``'s prices, estimated counts included (``UsageTotals.cost`` leaves a bill
    with estimates unknown; a budget counts the estimate)."""
    return replace(totals, estimated_requests=0).cost(info) or 0.0


def tokens_of(totals: UsageTotals) -> int:
    """The tokens a budget counts: all input (uncached, cache reads and writes) and output."""
    return totals.total_input_tokens + totals.output_tokens


def usd(amount: float) -> str:
    """Dollars for people: four decimals under $1 (a turn costs fractions of a cent)."""
    return f"${amount:.4f}" if abs(amount) < 1 else f"${amount:,.2f}"


@dataclass(frozen=True, slots=True, kw_only=True)
class SpendReading:
    """What was used today against a budget."""

    budget: Budget
    tokens: int
    usd: float
    unpriced_tokens: int = 0
    """Tokens of routes without a price (in ``tokens``, not in ``usd``)."""

    @property
    def tokens_left(self) -> int | None:
        b = self.budget.tokens
        return None if b is None else max(0, b - self.tokens)

    @property
    def usd_left(self) -> float | None:
        b = self.budget.usd
        return None if b is None else max(0.0, b - self.usd)

    def describe(self) -> str:
        """``"1,234 of 50,000 tokens used today (UTC), 48,766 left; …"`` (``%agent status``)."""
        parts: list[str] = []
        b = self.budget
        if b.tokens is not None:
            parts.append(
                f"{self.tokens:,} of {b.tokens:,} tokens used today (UTC), "
                f"{self.tokens_left or 0:,} left ({b.tokens_setting})"
            )
        if b.usd is not None:
            parts.append(
                f"{usd(self.usd)} of {usd(b.usd)} spent today (UTC), {usd(self.usd_left or 0)} "
                f"left ({b.usd_setting})"
            )
        return "; ".join(parts) or "none"

    def left(self) -> str:
        """What is left, short (a footer's part): ``"budget 48.8k tokens, $0.9500 left"``."""
        parts: list[str] = []
        if self.tokens_left is not None:
            parts.append(f"{self.tokens_left:,} tokens")
        if self.usd_left is not None:
            parts.append(usd(self.usd_left))
        return f"budget left today {' · '.join(parts)}" if parts else ""


def session_usage(session: Session, *, clock: Clock | None = None) -> UsageSource:
    """Today's usage of ``session`` alone, read incrementally (each call reads the events appended
    since the previous one)."""
    tally = DailyUsage(seed_length=session.header.seed_length or 0)
    read = [0]
    now = clock or wall_clock_ms

    def today() -> Mapping[Route, UsageTotals]:
        events = session.events
        for i in range(read[0], len(events)):
            tally.apply(events[i])
        read[0] = len(events)
        return tally.on(utc_day(now()))

    return today


def request_input_tokens(
    session: Session,
    prepared: PreparedCall,
    *,
    system: str,
    tools: tuple[ToolSchema, ...],
    calibration: Calibration | None = None,
) -> int:
    """The meter's reading of the next request's input (``agent.request.meter.measure``), with
    ``calibration`` (default: the log's)."""
    header = prepared_header(prepared, system=system, tools=tools)
    return measure(session, header=header, calibration=calibration).total_tokens


class SpendGate:
    """A budget and the usage it is held against (module docstring)."""

    def __init__(
        self,
        budget: Budget,
        *,
        usage: UsageSource,
        price: PriceLookup = catalogue_price,
        free: Collection[str] = (),
    ) -> None:
        self.budget = budget
        self.usage = usage
        self.price = price
        self.free = frozenset(free)
        self.last: SpendReading | None = None
        """The reading of the latest ``reading()`` (a footer redrawn while streaming shows it)."""

    def reading(self) -> SpendReading:
        """Today's usage against the budget (reads the usage source)."""
        tokens = unpriced = 0
        dollars = 0.0
        for (provider, model), totals in self.usage().items():
            if provider in self.free:
                continue
            n = tokens_of(totals)
            tokens += n
            info = self.price(provider, model)
            if info is not None and priced(info):
                dollars += usd_of(totals, info)
            else:
                unpriced += n
        self.last = SpendReading(
            budget=self.budget, tokens=tokens, usd=dollars, unpriced_tokens=unpriced
        )
        return self.last

    def fit(
        self, prepared: PreparedCall, input_tokens: int, *, retry_of: LlmFailure | None = None
    ) -> PreparedCall:
        """``prepared`` with its output cap lowered to what the budget leaves, or ``LlmError``
        ``BUDGET_EXCEEDED`` / ``BUDGET_UNPRICED`` (module docstring). ``retry_of``: the request
        is the retry of an attempt that failed so (the refusal says so)."""
        cap = self.cap(
            prepared.config.provider,
            prepared.config.model,
            input_tokens,
            prepared.config.max_tokens,
            retry_of=retry_of,
        )
        if cap == prepared.config.max_tokens:
            return prepared
        return with_cap(prepared, cap)

    def cap(
        self,
        provider: str,
        model: str,
        input_tokens: int,
        cap: int | None,
        *,
        least: int = 0,
        retry_of: LlmFailure | None = None,
    ) -> int | None:
        """The output cap a request of ``input_tokens`` to ``(provider, model)`` may have, at most
        ``cap`` and at least ``least`` (default ``MIN_ANSWER_TOKENS``); raises when even that does
        not fit in what is left (``retry_of``: as in ``fit``)."""
        b = self.budget
        if not b.limited or provider in self.free:
            return cap
        least = least or MIN_ANSWER_TOKENS
        r = self.reading()
        caps = [cap] if cap is not None else []
        if b.tokens is not None:
            left = b.tokens - r.tokens
            if input_tokens + least > left:
                raise LlmError(
                    _exceeded(
                        r, f"~{input_tokens:,} tokens in and at least {least:,} out", retry_of
                    )
                )
            caps.append(left - input_tokens)
        if b.usd is not None:
            info = self.price(provider, model)
            if info is None or not priced(info):
                raise LlmError(_unpriced(b, provider, model))
            inp, out = info.input_price_per_mtok or 0.0, info.output_price_per_mtok or 0.0
            left_usd = b.usd - r.usd
            cost_in = input_tokens * inp / 1_000_000
            least_cost = cost_in + least * out / 1_000_000
            if (inp or out) and least_cost > left_usd:
                what = (
                    f"~{input_tokens:,} tokens in and at least {least:,} out, about "
                    f"{usd(least_cost)}"
                )
                raise LlmError(_exceeded(r, what, retry_of, dollars=True))
            if out > 0:
                # what a huge dollar budget buys is no cap: a logged one must stay exact
                caps.append(min(MAX_EXACT_INT, math.floor((left_usd - cost_in) * 1_000_000 / out)))
        return min(caps) if caps else None


def _exceeded(
    r: SpendReading, request: str, retry_of: LlmFailure | None, *, dollars: bool = False
) -> LlmFailure:
    b = r.budget
    if dollars:
        used = f"{usd(r.usd)} of today's {usd(b.usd or 0)} spent (UTC day), {usd(r.usd_left or 0)} left"
        setting = b.usd_setting
    else:
        used = (
            f"{r.tokens:,} of today's {b.tokens or 0:,} tokens used (UTC day), "
            f"{r.tokens_left or 0:,} left"
        )
        setting = b.tokens_setting
    limit = f"the limit is {setting}, set by {b.owner}"
    if retry_of is not None:
        return LlmFailure(
            code=BUDGET_EXCEEDED,
            message=f"the answer failed ({retry_of.code}: {retry_of.message}) and its retry was not "
            f"sent: the daily budget would be passed: {used} (the failed attempts counted), and "
            f"the retry needs {request} ({limit})",
        )
    return LlmFailure(
        code=BUDGET_EXCEEDED,
        message=f"the daily budget would be passed: {used}, and this request needs {request}; "
        f"it was not sent ({limit})",
    )


def _unpriced(b: Budget, provider: str, model: str) -> LlmFailure:
    return LlmFailure(
        code=BUDGET_UNPRICED,
        message=f"a daily budget in dollars is in force ({b.usd_setting}, set by {b.owner}) and "
        f"{provider}:{model} has no known price, so its cost cannot be counted: the request was "
        "not sent",
    )
