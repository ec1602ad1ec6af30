"""The spending budget in the agent loop (issue 17): a request that would pass the budget is not
sent, the output cap is lowered to what is left, a dollar budget needs a price, a compaction's
summary call is held to it too, and usage is split by UTC day and route. The provider is scripted;
the log, the meter, the usage reading and the loop are real (dev invariants on)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pytest

from dsh_kernel.agent.compaction.summary import Route, summarise
from dsh_kernel.agent.request.meter import header_tokens
from dsh_kernel.agent.request.spend import (
    Budget,
    SpendGate,
    session_usage,
    tokens_of,
    usd_of,
)
from dsh_kernel.errors import LlmError
from dsh_kernel.llm.estimate import message_tokens
from dsh_kernel.llm.provider import PreparedCall
from dsh_kernel.llm.types import (
    GenerateRequest,
    LlmCallConfig,
    ModelInfo,
    StreamChunk,
    TokenUsage,
)
from dsh_kernel.session.daily_usage import DAY_MS, DailyUsage, utc_day
from dsh_kernel.session.derive import EpochHeader
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.log import Session
from dsh_kernel.session.usage import UsageTotals, streamed_tokens, usage_totals
from dsh_kernel.testing import FunctionProvider, ScriptedProvider, error_response, text_response
from tests.unit.agent.helpers import agent_with, of_type, run, turn_ends

DAY0 = 20_000 * DAY_MS  # a UTC midnight
PRICED = ModelInfo(input_price_per_mtok=1.0, output_price_per_mtok=4.0)


class Clock:
    """Epoch milliseconds that a test moves (the clock is an edge the tests fake)."""

    def __init__(self, ms: int = DAY0 + 3_600_000) -> None:
        self.ms = ms

    def __call__(self) -> int:
        self.ms += 1
        return self.ms


def used(n: int) -> UsageTotals:
    return UsageTotals(requests=1, input_tokens=n)


def gate_over(spent: dict[str, int], budget: Budget, *, price: ModelInfo | None = PRICED, **kw):
    """A gate whose usage is ``spent`` (tokens by model of provider ``scripted``), set by the test."""

    def usage() -> Mapping[tuple[str, str], UsageTotals]:
        return {("scripted", m): used(n) for m, n in spent.items()}

    return SpendGate(budget, usage=usage, price=lambda _p, _m: price, **kw)


def error_of(events) -> dict[str, object]:
    (end,) = [r for r in turn_ends(events) if r["kind"] == "error"]
    return end["error"]  # type: ignore[return-value]


def request_tokens(request: GenerateRequest) -> int:
    header = EpochHeader(config=request.config, system=request.system, tools=request.tools)
    return header_tokens(header.canonical()) + sum(message_tokens(m) for m in request.messages)


# --- the gate in the loop ------------------------------------------------------------------------


async def test_a_request_that_would_pass_the_token_budget_is_not_sent() -> None:
    provider = ScriptedProvider([text_response("never")])
    spent = {"m1": 9_900}
    agent = agent_with(provider, spend=gate_over(spent, Budget(tokens=10_000)))
    await run(agent, "Tell me about the data.")
    ev = agent.session.events
    assert provider.requests == []  # nothing was sent
    assert of_type(ev, "request/header") == []
    error = error_of(ev)
    assert error["code"] == "BUDGET_EXCEEDED"
    message = str(error["message"])
    assert "9,900 of today's 10,000 tokens used (UTC day), 100 left" in message
    assert "it was not sent (the limit is Budget.tokens, set by the program that made" in message


async def test_the_output_cap_is_lowered_to_what_is_left_and_never_raised() -> None:
    provider = ScriptedProvider([text_response("one"), text_response("two")])
    spent = {"m1": 9_000}
    agent = agent_with(provider, spend=gate_over(spent, Budget(tokens=10_000)))
    await run(agent, "Hello.")
    (request,) = provider.requests
    assert request.max_tokens == 10_000 - 9_000 - request_tokens(request)
    header = of_type(agent.session.events, "request/header")[-1]
    assert header.data["header"]["config"]["maxTokens"] == request.max_tokens  # type: ignore[index]
    agent.max_tokens = 300  # a cap below what is left stays as it is
    await run(agent, "Again.")
    assert provider.requests[1].max_tokens == 300


async def test_what_is_left_below_the_least_answer_refuses() -> None:
    provider = ScriptedProvider([text_response("never")])
    agent = agent_with(provider, spend=gate_over({}, Budget(tokens=200)))
    await run(agent, "Hi.")  # ~10 tokens in, but at least 256 must be left for the answer
    assert provider.requests == []
    assert error_of(agent.session.events)["code"] == "BUDGET_EXCEEDED"


async def test_a_dollar_budget_counts_at_the_price_and_lowers_the_cap() -> None:
    provider = ScriptedProvider([text_response("ok"), text_response("never")])
    spent = {"m1": 0}
    # $0.01 at $4 per million output tokens buys 2,500 tokens, less the input's cost
    agent = agent_with(provider, spend=gate_over(spent, Budget(usd=0.01, usd_setting="DSH_X")))
    await run(agent, "Hello.")
    (request,) = provider.requests
    n = request_tokens(request)
    assert request.max_tokens == int((0.01 - n * 1e-6) * 1e6 / 4.0)
    spent["m1"] = 9_000  # $0.009 at $1/M input: $0.001 left, less than 256 tokens out cost
    await run(agent, "Again.")
    assert len(provider.requests) == 1
    error = error_of(agent.session.events)
    assert error["code"] == "BUDGET_EXCEEDED"
    message = str(error["message"])
    assert "$0.0090 of today's $0.0100 spent (UTC day), $0.0010 left" in message
    assert "at least 256 out, about $0.0011" in message and "the limit is DSH_X" in message


async def test_a_dollar_budget_with_an_unpriced_model_refuses_with_one_line() -> None:
    provider = ScriptedProvider([text_response("never")])
    agent = agent_with(provider, spend=gate_over({}, Budget(usd=5.0), price=None))
    await run(agent, "Hello.")
    assert provider.requests == []
    error = error_of(agent.session.events)
    assert error["code"] == "BUDGET_UNPRICED"
    message = str(error["message"])
    assert "scripted:m1 has no known price" in message and "\n" not in message


async def test_a_free_provider_is_not_gated() -> None:
    provider = ScriptedProvider([text_response("ok")])
    gate = gate_over({"m1": 10**9}, Budget(tokens=10, usd=0.0), free={"scripted"})
    agent = agent_with(provider, spend=gate)
    await run(agent, "Hello.")
    assert len(provider.requests) == 1 and turn_ends(agent.session.events)[0]["kind"] == "completed"


async def test_no_budget_changes_nothing() -> None:
    provider = ScriptedProvider([text_response("ok")])
    agent = agent_with(provider, spend=gate_over({"m1": 10**9}, Budget()))
    await run(agent, "Hello.")
    assert provider.requests[0].max_tokens is None


async def test_the_gate_reads_the_session_it_guards() -> None:
    """``session_usage``: the default source for a plain ``Agent`` — its own session's usage
    today, estimates included, so the turn after the one that used the budget is refused."""
    usage = TokenUsage(input_tokens=700, output_tokens=300)
    provider = ScriptedProvider([text_response("ok", usage=usage), text_response("never")])
    session = Session(header=SessionHeader(id="s-budget", created_at=DAY0))
    gate = SpendGate(Budget(tokens=1_200), usage=session_usage(session))
    agent = agent_with(provider, session=session, spend=gate)
    await run(agent, "Hello.", "Again.")
    assert len(provider.requests) == 1
    assert "1,000 of today's 1,200 tokens used" in str(error_of(session.events)["message"])
    assert gate.reading().tokens == 1_000 and gate.reading().tokens_left == 200


async def test_failed_attempts_count_and_a_retry_the_budget_cannot_pay_for_is_not_sent() -> None:
    """An attempt that streams and then fails, without usage, costs its input and what streamed;
    the retry policy asks the budget before it schedules a retry, so the one that would pass it is
    neither logged nor sent (before: each failed attempt counted zero and all six went out)."""
    partial = "An answer that the server drops halfway. " * 100
    failures = [
        error_response("SERVER", "the server fell over", partial_text=partial) for _ in range(6)
    ]
    provider = ScriptedProvider(failures)
    session = Session(header=SessionHeader(id="s-retries", created_at=DAY0))
    budget = 4_000
    gate = SpendGate(Budget(tokens=budget), usage=session_usage(session))
    agent = agent_with(provider, session=session, spend=gate)
    await run(agent, "Explain the data.")
    each = request_tokens(provider.requests[0]) + streamed_tokens(len(partial))
    sent = 0
    while sent < 6 and sent * each + request_tokens(provider.requests[0]) + 256 <= budget:
        sent += 1
    assert 1 < sent < 6
    assert len(provider.requests) == sent
    assert len(of_type(session.events, "llm/retry")) == sent - 1  # the refused one never logged
    assert gate.reading().tokens == tokens_of(usage_totals(session.events)) == sent * each
    error = error_of(session.events)
    assert error["code"] == "BUDGET_EXCEEDED"
    message = str(error["message"])
    assert "the answer failed (SERVER: the server fell over) and its retry was not sent" in message
    assert f"{sent * each:,} of today's {budget:,} tokens used" in message
    assert "(the limit is Budget.tokens, set by the program that made this agent)" in message


# --- the summary call --------------------------------------------------------------------------

ANSWER = "The answer goes on at length about the data. " * 90  # ~1k tokens


def summarising(request: GenerateRequest) -> Iterable[StreamChunk]:
    return text_response("- the user asked" if request.purpose == "compaction" else ANSWER)


async def test_a_summary_call_the_budget_refuses_is_not_sent_and_the_reduction_stands_in() -> None:
    provider = FunctionProvider(summarising)
    holder: list[object] = []

    def usage() -> Mapping[tuple[str, str], UsageTotals]:
        # everything is used while a compaction is open: only its summary call is refused
        agent = holder[0]
        open_ = agent.session.compaction_open is not None  # type: ignore[attr-defined]
        return {("scripted", "m1"): used(10**6 if open_ else 0)}

    gate = SpendGate(Budget(tokens=10**6), usage=usage, price=lambda _p, _m: None)
    agent = agent_with(provider, window=4096, spend=gate)
    holder.append(agent)
    await run(agent, *(f"Question {i}." for i in range(1, 6)))
    ev = agent.session.events
    assert [r["kind"] for r in turn_ends(ev)] == ["completed"] * 5
    assert [r for r in provider.requests if r.purpose == "compaction"] == []
    summary = of_type(ev, "compaction/summary")[0].data
    assert summary["method"] == "reduction" and "provider" not in summary
    assert summary["failure"]["code"] == "BUDGET_EXCEEDED"  # type: ignore[index]


async def test_a_summary_calls_cap_is_lowered_to_what_is_left() -> None:
    provider = FunctionProvider(summarising)
    agent = agent_with(provider, window=64_000)
    await run(agent, "Question 1.", "Question 2.", "Question 3.")
    session = agent.session
    seqs = list(session.surface)[:4]
    left = [0]

    def usage() -> Mapping[tuple[str, str], UsageTotals]:
        return {("scripted", "m1"): used(100_000 - left[0])}

    gate = SpendGate(Budget(tokens=100_000), usage=usage)
    route = Route(
        provider=provider,
        config=LlmCallConfig(provider="scripted", model="m1"),
        window=None,
        system="",
        tools=(),
        spend=gate,
    )
    left[0] = 10**4  # plenty: the summary's own cap (1,024 with no window, half the range)
    await summarise(session, route, seqs, 2_000, 2_048)
    first = provider.requests[-1]
    assert first.purpose == "compaction" and first.max_tokens == 1_000
    left[0] = request_tokens(first) + 300  # 300 left for the answer
    await summarise(session, route, seqs, 2_000, 2_048)
    assert provider.requests[-1].max_tokens == 300
    left[0] = request_tokens(first) + 100  # less than a summary's least (256): refused
    calls = len(provider.requests)
    result = await summarise(session, route, seqs, 2_000, 2_048)
    assert len(provider.requests) == calls
    assert result.method == "reduction" and result.failure is not None
    assert result.failure.code == "BUDGET_EXCEEDED"


# --- usage by day and route ----------------------------------------------------------------------


async def test_usage_is_split_by_utc_day_and_route_and_adds_up_to_the_bill() -> None:
    clock = Clock(DAY0 - 60_000)  # a minute before midnight
    usage = TokenUsage(input_tokens=100, output_tokens=10)
    provider = ScriptedProvider([text_response("a", usage=usage) for _ in range(3)])
    agent = agent_with(provider, clock=clock)
    await run(agent, "Before midnight.")
    clock.ms = DAY0 + 1_000
    await run(agent, "After midnight.")
    agent.set_route(model="m2")
    await run(agent, "Another model.")
    tally = DailyUsage()
    for ev in agent.session.events:
        tally.apply(ev)
    yesterday, today = tally.on(utc_day(DAY0) - 1), tally.on(utc_day(DAY0))
    assert {r: tokens_of(t) for r, t in yesterday.items()} == {("scripted", "m1"): 110}
    assert {r: tokens_of(t) for r, t in today.items()} == {
        ("scripted", "m1"): 110,
        ("scripted", "m2"): 110,
    }
    total = usage_totals(agent.session.events)
    assert sum(tokens_of(t) for t in [*yesterday.values(), *today.values()]) == tokens_of(total)


async def test_estimated_counts_count_as_their_estimate() -> None:
    provider = ScriptedProvider([text_response("no usage reported " * 20)])
    agent = agent_with(provider)
    await run(agent, "Hello.")
    total = usage_totals(agent.session.events)
    assert total.estimated_requests == 1 and tokens_of(total) > 0
    reading = SpendGate(
        Budget(tokens=10**6, usd=10.0),
        usage=session_usage(agent.session),
        price=lambda _p, _m: PRICED,
    ).reading()
    assert reading.tokens == tokens_of(total)
    assert reading.usd == pytest.approx(usd_of(total, PRICED)) and reading.usd > 0
    assert total.cost(PRICED) is None  # the bill says unknown; the budget counts the estimate


async def test_a_forks_seeded_events_are_not_counted_again() -> None:
    usage = TokenUsage(input_tokens=100, output_tokens=10)
    provider = ScriptedProvider([text_response("a", usage=usage), text_response("b", usage=usage)])
    agent = agent_with(provider)
    await run(agent, "One.")
    seed = len(agent.session.events)
    await run(agent, "Two.")
    tally = DailyUsage(seed_length=seed)
    for ev in agent.session.events:
        tally.apply(ev)
    today = utc_day(agent.session.events[-1].time)
    assert [tokens_of(t) for t in tally.on(today).values()] == [110]


def test_what_a_huge_dollar_budget_buys_is_a_cap_the_log_keeps() -> None:
    """A dollar budget's cap is what the dollars left buy; however many that is, the cap (logged
    with the request) stays within 2^53, the log's exact range."""
    cheap = ModelInfo(input_price_per_mtok=0.01, output_price_per_mtok=0.01)
    gate = gate_over({}, Budget(usd=1e12), price=cheap)
    cap = gate.cap("scripted", "m1", 1_000, None)
    assert cap == 2**53


def test_the_gate_refuses_in_the_engine_with_no_agent() -> None:
    gate = gate_over({"m1": 950}, Budget(tokens=1_000, tokens_setting="T", owner="me"))
    prepared = PreparedCall(config=LlmCallConfig(provider="scripted", model="m1"))
    with pytest.raises(LlmError) as info:
        gate.fit(prepared, 10)
    assert info.value.failure.code == "BUDGET_EXCEEDED"
    assert "(the limit is T, set by me)" in info.value.failure.message
    assert gate.last is not None and gate.last.tokens_left == 50


async def test_a_summary_call_counts_under_its_own_route() -> None:
    """A compaction's summary call is a request like any other: its usage is in the day's count."""

    def fn(request: GenerateRequest) -> Iterable[StreamChunk]:
        if request.purpose == "compaction":  # the answers report no usage: they are estimated
            return text_response(
                "- the user asked", usage=TokenUsage(input_tokens=50_000, output_tokens=7)
            )
        return text_response(ANSWER)

    agent = agent_with(FunctionProvider(fn), window=4096)
    await run(agent, *(f"Question {i}." for i in range(1, 6)))
    ev = agent.session.events
    summaries = [e for e in ev if e.type == "compaction/summary" and "usage" in e.data]
    assert summaries
    total = usage_totals(ev)
    assert total.requests == 5 + len(summaries)
    reading = SpendGate(Budget(tokens=10**9), usage=session_usage(agent.session)).reading()
    assert reading.tokens == tokens_of(total) > len(summaries) * 50_007
