"""The calibration of the token estimate (``llm.calibration``): the fit, the rule for a proxy's own
usage, the tokenizer's calibration, and what a ``request/context`` records."""

from __future__ import annotations

import math

import pytest

from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.calibration import (
    IDENTITY,
    PROXY_FLOOR,
    TEMPLATE_MESSAGE_TOKENS,
    TEMPLATE_PROMPT_TOKENS,
    TEMPLATE_TOOL_TOKENS,
    Calibration,
    Calibrations,
    fit,
    made_up,
    reported_prompt,
    tokenizer_calibration,
)

ROUTE = ("openai-compatible", "http://127.0.0.1:8080/v1", "qwen")


def test_no_sample_is_no_calibration() -> None:
    assert fit([]) is IDENTITY
    assert IDENTITY.tokens(1234) == 1234 and IDENTITY.delta(10) == 10
    assert not IDENTITY.calibrated and IDENTITY.describe() == ""


def test_one_sample_is_its_ratio() -> None:
    cal = fit([(1000, 1180)])
    assert (cal.ratio, cal.allowance, cal.source, cal.samples) == (1.18, 0, "usage", 1)
    assert cal.tokens(2000) == 2360 and cal.delta(100) == 118


def test_samples_of_one_size_give_the_median_ratio_not_a_line() -> None:
    # all within 25 % of each other: no slope can be trusted, the ratio alone is used
    cal = fit([(1000, 1200), (1050, 1239), (1100, 1320), (1150, 9999)])
    # ratios 1.2, 1.18, 1.2 and 8.69: the median is 1.2, the wild one does not move it
    assert cal.allowance == 0 and cal.ratio == 1.2


def test_a_line_through_requests_of_different_sizes_finds_the_template_share() -> None:
    # a server whose template adds 120 tokens to every request and whose tokenizer counts
    # 1.1 tokens per estimated token; one wild sample does not move a median
    samples = [(raw, math.ceil(raw * 1.1) + 120) for raw in (800, 1200, 1900, 2600, 3400)]
    samples.append((2000, 200))
    cal = fit(samples)
    assert cal.source == "usage" and cal.samples == 6
    assert cal.ratio == pytest.approx(1.1, abs=0.002)
    assert cal.allowance == pytest.approx(120, abs=3)
    for raw, real in samples[:-1]:
        assert abs(cal.tokens(raw) - real) <= 3


def test_an_implausible_line_falls_back_to_the_ratio() -> None:
    # counts that shrink as requests grow: a negative slope is no template
    cal = fit([(1000, 3000), (2000, 2000), (3000, 1000)])
    assert cal.allowance == 0 and cal.ratio == 1.0


def test_samples_outside_the_plausible_ratios_are_ignored() -> None:
    assert fit([(1000, 10), (0, 50), (100, 0)]) is IDENTITY
    assert fit([(1000, 10), (1000, 1300)]).ratio == 1.3


def test_reported_prompt_counts_every_input_kind() -> None:
    usage: JsonObject = {
        "inputTokens": 100,
        "cacheReadTokens": 900,
        "cacheWriteTokens": 5,
        "outputTokens": 50,
    }
    assert reported_prompt(usage) == 1005
    assert reported_prompt({"inputTokens": True, "outputTokens": 1}) == 0


def test_a_proxy_count_far_under_the_estimate_is_the_proxys_own() -> None:
    raw = 1000
    low = int(PROXY_FLOOR * raw) - 1
    assert made_up({"inputTokens": low, "outputTokens": 1, "via": "litellm"}, raw)
    # passed through (plausible), or not through a proxy at all: the server's
    assert not made_up({"inputTokens": 1150, "outputTokens": 1, "via": "litellm"}, raw)
    assert not made_up({"inputTokens": low, "outputTokens": 1}, raw)


def test_a_proxy_made_usage_never_calibrates() -> None:
    cals = Calibrations()
    assert not cals.observe(ROUTE, 1000, {"inputTokens": 520, "outputTokens": 9, "via": "litellm"})
    assert cals.current(ROUTE) is IDENTITY and not cals.learned_from_usage(ROUTE)
    assert cals.observe(ROUTE, 1000, {"inputTokens": 1190, "outputTokens": 9})
    assert cals.current(ROUTE).ratio == 1.19


def test_usage_wins_over_the_tokenizer_and_routes_are_apart() -> None:
    cals = Calibrations()
    counted = tokenizer_calibration(raw=1000, text_tokens=900, tool_tokens=300, messages=3)
    cals.counted(ROUTE, counted)
    assert cals.current(ROUTE) == counted
    cals.observe(ROUTE, 1000, {"inputTokens": 1250, "outputTokens": 9})
    assert cals.current(ROUTE).source == "usage"
    other = (ROUTE[0], ROUTE[1], "smollm")
    assert cals.current(other) is IDENTITY
    cals.forget()
    assert cals.current(ROUTE) is IDENTITY


def test_the_tokenizer_calibration_scales_the_messages_and_adds_the_tools() -> None:
    # raw 1000, 250 of it the tool list; the messages' 750 are counted 800 tokens over 4 messages
    cal = tokenizer_calibration(
        raw=1000, raw_tools=250, text_tokens=800, tool_tokens=300, messages=4
    )
    messages = 800 + 4 * TEMPLATE_MESSAGE_TOKENS + TEMPLATE_PROMPT_TOKENS
    assert cal.ratio == round(messages / 750, 4) and cal.source == "tokenizer"
    assert cal.allowance == 300 + TEMPLATE_TOOL_TOKENS - math.ceil(250 * cal.ratio)
    assert abs(cal.tokens(1000) - (messages + 300 + TEMPLATE_TOOL_TOKENS)) <= 1
    # the history grows at the messages' ratio; the tool list stays what the server counts
    assert (
        abs(cal.tokens(1300) - (messages + round(300 * cal.ratio) + 300 + TEMPLATE_TOOL_TOKENS))
        <= 2
    )
    no_tools = tokenizer_calibration(raw=750, text_tokens=800, tool_tokens=0, messages=4)
    assert no_tools.allowance == 0 and no_tools.tokens(750) == messages
    assert (
        tokenizer_calibration(raw=100, raw_tools=100, text_tokens=10, tool_tokens=0, messages=1)
        is IDENTITY
    )


def test_a_measured_template_share_and_one_that_drops_the_tools() -> None:
    probed = tokenizer_calibration(
        raw=1000,
        raw_tools=250,
        text_tokens=800,
        tool_tokens=300,
        messages=4,
        prompt=1,
        tool_preamble=87,
    )
    assert abs(probed.tokens(1000) - (800 + 300 + 4 * TEMPLATE_MESSAGE_TOKENS + 1 + 87)) <= 1
    # a template that leaves the tools out (SmolLM2's): neither their text nor a preamble counts,
    # and the allowance takes the tool list's estimate back out
    dropped = tokenizer_calibration(
        raw=1000,
        raw_tools=250,
        text_tokens=800,
        tool_tokens=300,
        messages=4,
        prompt=1,
        tools_rendered=False,
        tool_preamble=0,
    )
    assert dropped.allowance < 0
    assert abs(dropped.tokens(1000) - (800 + 4 * TEMPLATE_MESSAGE_TOKENS + 1)) <= 1
    assert "-" in dropped.describe()


def test_a_request_context_round_trips_and_bad_fields_are_none() -> None:
    cal = Calibration(ratio=1.1834, allowance=96, source="usage", samples=4)
    data: JsonObject = {
        "provider": "p",
        "model": "m",
        "tokenRatio": cal.ratio,
        "tokenAllowance": cal.allowance,
        "tokenCalibration": cal.source,
    }
    assert Calibration.from_context(data) == cal  # samples are not logged nor compared
    for bad in (
        {"tokenRatio": "1.2", "tokenAllowance": 0, "tokenCalibration": "usage"},
        {"tokenRatio": 1.2, "tokenAllowance": 1.5, "tokenCalibration": "usage"},
        {"tokenRatio": 1.2, "tokenAllowance": 0, "tokenCalibration": "guess"},
        {"tokenRatio": -1.0, "tokenAllowance": 0, "tokenCalibration": "usage"},
        {"tokenRatio": 1.2, "tokenAllowance": True, "tokenCalibration": "usage"},
        {},
    ):
        assert Calibration.from_context(bad) is IDENTITY
    assert "×1.1834 +96" in cal.describe() and "4 requests" in cal.describe()
