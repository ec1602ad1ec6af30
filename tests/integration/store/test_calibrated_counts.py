"""Calibrated counts (``llm.calibration``) through a real Agent, its log and the store.

A first session's server reports usage at ``K`` times the kernel's own raw estimate of each request
plus a fixed template share (computed from the request it was sent, with the one estimate rule);
the calibration learns it. A second session, sharing what was learned (as a kernel's sessions do),
talks to a server that reports nothing: every request is estimated, and the token meter's reading
of each request as it was sent — read from the log alone at the ``before-request`` checkpoint —
equals the store's ``requests.input_tokens`` and ``session.usage``'s count of it (the same
calibrated figure, in Python and in SQL), and is ``K`` times the raw estimate, give or take the
template share."""

from __future__ import annotations

import math
from collections.abc import Iterable

from dsh_kernel import Agent
from dsh_kernel.agent.hooks import Checkpoint
from dsh_kernel.agent.request.meter import measure
from dsh_kernel.llm.calibration import Calibrations
from dsh_kernel.llm.estimate import message_tokens, request_header_tokens
from dsh_kernel.llm.types import GenerateRequest, StreamChunk, TokenUsage
from dsh_kernel.session.usage import usage_totals
from dsh_kernel.store.journal import attach_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query
from dsh_kernel.testing import FunctionProvider, text_response

from .conftest import TOOLS, chat

K = 1.3
SHARE = 60
PROMPTS = (
    "What is in the frame? " * 3,
    "def f(x):\n    return [i ** 2 for i in range(x) if i % 3]\n" * 6,
    "Thanks, and now the long story. " * 40,
    "ok",
)


def raw_estimate(request: GenerateRequest) -> int:
    return request_header_tokens(request.system, request.tools) + sum(
        message_tokens(m) for m in request.messages
    )


def reporting(request: GenerateRequest) -> Iterable[StreamChunk]:
    prompt = math.ceil(K * raw_estimate(request)) + SHARE
    return text_response(
        "Noted: " + "x" * 40, usage=TokenUsage(input_tokens=prompt, output_tokens=9)
    )


def silent(request: GenerateRequest) -> Iterable[StreamChunk]:
    return text_response("Noted without usage.")


async def test_the_meter_the_usage_reader_and_the_views_give_one_calibrated_count(
    store: Store,
) -> None:
    calibrations = Calibrations()
    first = Agent(
        provider=FunctionProvider(reporting),
        model="m1",
        tools=TOOLS,
        token_calibrations=calibrations,
    )
    await chat(first, *PROMPTS)
    cal = first.calibration()
    assert cal.source == "usage" and cal.samples == len(PROMPTS)
    # the line through the reported counts is the server's rule
    assert abs(cal.ratio - K) < 0.01 and abs(cal.allowance - SHARE) <= 3

    second = Agent(
        provider=FunctionProvider(silent), model="m1", tools=TOOLS, token_calibrations=calibrations
    )
    writer = attach_journal(second, store)
    readings: list[tuple[int, int]] = []

    async def before_request(c: Checkpoint) -> None:
        if c.reason == "before-request":
            m = measure(second.session)
            readings.append((m.total_tokens, m.raw_tokens))

    second.hooks.checkpoint.on(before_request)
    await chat(second, *PROMPTS)
    writer.flush()

    contexts = [e for e in second.session.events if e.type == "request/context"]
    assert contexts and all(e.data["tokenCalibration"] == "usage" for e in contexts)
    assert all(e.data["tokenRatio"] == cal.ratio for e in contexts)
    assert all(abs(total - (K * raw + SHARE)) <= 0.01 * total for total, raw in readings), readings

    rows = run_query(
        store,
        "SELECT input_tokens, estimated FROM requests WHERE session_id = ? ORDER BY request",
        [second.session.id],
    ).rows
    assert [(r[0], r[1]) for r in rows] == [(t, True) for t, _ in readings]
    totals = usage_totals(second.session.events)
    assert totals.estimated_requests == len(PROMPTS)
    assert totals.input_tokens == sum(t for t, _ in readings)
    writer.close()
