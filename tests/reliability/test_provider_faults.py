"""Provider faults through a real kernel against the loopback server (issue 7, item 1).

One kernel serves the module (idle timeout 0.5 s, deadline 3 s, set through ``DSH_IDLE_TIMEOUT`` and
``DSH_DEADLINE``). Each case scripts a fault, runs a chat cell, and checks that the cell ended in a
retry (``llm/retry`` logged, the answer arrives) or in a clear error (``ename`` = the failure code,
a readable ``evalue``); that the journal on disk equals the live log and passes the invariants; that
no text of a failed attempt reaches the next request; and that the next chat cell works.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from dsh_kernel.errors import UsageError
from dsh_kernel.llm.config import config_from_env
from tests.reliability.support import (
    chat,
    launch,
    loopback_env,
    of_type,
    stress,
    text_reply,
    turn_ends,
    verify_log,
)
from tests.support.kernel import Kernel
from tests.support.sse_server import Frame, Reply, SseServer, comment_frame, json_reply, sse_reply
from tests.support.wire_transcripts import OPENAI_INSTREAM_ERROR

IDLE_S = 0.5
DEADLINE_S = 2.0
MINIMAL = (
    b'data: {"choices":[{"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)
"""The smallest valid answer (content and finish in one chunk): 85 bytes, 8.5 s as a drip."""


@dataclass(frozen=True)
class Case:
    replies: tuple[Reply, ...]
    outcome: str
    """``retry`` (answered after retries) or ``error`` (the cell fails with ``code``)."""
    code: str
    retries: int = 1
    delay_ms: tuple[int, int] | None = None
    """Bounds of the first retry's logged delay."""
    requests: int | None = None
    max_s: float = 10.0
    partial: str | None = None
    """Text streamed by the failed attempt, which must never reach a later request."""
    says: str = ""
    """Words the first failure's message must contain (which bound fired)."""


def error_body(status: int, message: str) -> Reply:
    return json_reply(status, {"error": {"message": message, "type": "server_error"}})


def with_retry_after(reply: Reply, value: str) -> Reply:
    return Reply(
        status=reply.status, headers={**reply.headers, "retry-after": value}, body=reply.body
    )


def data(text: str) -> Frame:
    return Frame(raw=b'data: {"choices":[{"delta":{"content":"%s"}}]}\n\n' % text.encode())


def drip(body: bytes, *, every_ms: float = 100) -> Reply:
    return sse_reply([Frame(raw=body[i : i + 1], delay_ms=every_ms) for i in range(len(body))])


BACKOFF = (450, 550)  # the first retry without Retry-After: 500 ms ± 10 % jitter
CASES: dict[str, Case] = {
    "429-retry-after": Case(
        (with_retry_after(error_body(429, "slow down"), "0.05"),),
        "retry",
        "RATE_LIMIT",
        delay_ms=(50, 50),
    ),
    "429-no-retry-after": Case(
        (error_body(429, "slow down"),), "retry", "RATE_LIMIT", delay_ms=BACKOFF
    ),
    "503-retry-after": Case(
        (with_retry_after(error_body(503, "unavailable"), "0.08"),),
        "retry",
        "SERVER",
        delay_ms=(80, 80),
    ),
    "503-no-retry-after": Case(
        (error_body(503, "unavailable"),), "retry", "SERVER", delay_ms=BACKOFF
    ),
    "529-retry-after": Case(
        (with_retry_after(error_body(529, "overloaded"), "0.03"),),
        "retry",
        "SERVER",
        delay_ms=(30, 30),
    ),
    "529-no-retry-after": Case(
        (error_body(529, "overloaded"),), "retry", "SERVER", delay_ms=BACKOFF
    ),
    "429-every-time": Case(
        tuple(with_retry_after(error_body(429, "slow down"), "0.01") for _ in range(6)),
        "error",
        "RATE_LIMIT",
        retries=5,
        requests=6,
    ),
    "429-retry-after-too-long": Case(
        (with_retry_after(error_body(429, "come back in an hour"), "3600"),),
        "error",
        "RATE_LIMIT",
        retries=0,
        requests=1,
        max_s=2.0,
    ),
    "disconnect-mid-stream": Case(
        (sse_reply([data("partial-"), data("answer-abc")], close="abort"),),
        "error",
        "STREAM_CLOSED",
        retries=0,
        requests=1,
        partial="partial-",
    ),
    "malformed-json-chunk": Case(
        (sse_reply([data("half-"), Frame(raw=b'data: {"choices":[{"delta\n\n')]),),
        "error",
        "MALFORMED_RESPONSE",
        retries=0,
        requests=1,
        partial="half-",
    ),
    "in-band-error-after-text": Case(
        (sse_reply(OPENAI_INSTREAM_ERROR),), "retry", "SERVER", delay_ms=BACKOFF, partial="Par"
    ),
    "no-bytes-past-idle-timeout": Case(
        (sse_reply([data("stalled-")], close="hang"),),
        "retry",
        "TIMEOUT",
        delay_ms=BACKOFF,
        partial="stalled-",
        says="idle for 0.5s",
    ),
    "no-headers-past-idle-timeout": Case(
        (
            Reply(
                headers={"content-type": "text/event-stream"},
                frames=(Frame(raw=b"data: [DONE]\n\n"),),
                first_byte_delay_ms=2500,
            ),
        ),
        "retry",
        "TIMEOUT",
        delay_ms=BACKOFF,
        says="timed out",
    ),
    "keep-alives-past-deadline": Case(
        (sse_reply([comment_frame(delay_ms=100) for _ in range(25)]),),
        "retry",
        "TIMEOUT",
        delay_ms=BACKOFF,
        says="overall deadline",
    ),
    "drip-past-deadline": Case(
        (drip(MINIMAL),), "retry", "TIMEOUT", delay_ms=BACKOFF, says="overall deadline"
    ),
    "drip-within-bounds": Case(
        (sse_reply([Frame(raw=MINIMAL[:-12]), *drip(MINIMAL[-12:]).frames]),),
        "answer",
        "",
        retries=0,
        requests=1,
    ),
}


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kernel, SseServer]]:
    with SseServer() as srv:
        env = loopback_env(
            srv, DSH_IDLE_TIMEOUT=str(IDLE_S), DSH_DEADLINE=str(DEADLINE_S), DSH_APPROVAL="auto"
        )
        with launch(tmp_path_factory.mktemp("faults"), env=env) as k:
            yield k, srv


def run_case(k: Kernel, srv: SseServer, case: Case, *, answer: str = "recovered-answer") -> None:
    srv.script(*case.replies, text_reply(answer))
    started = time.monotonic()
    ex = chat(k, "What is the answer?", timeout=60)
    elapsed = time.monotonic() - started
    events = verify_log(k)
    end = turn_ends(events)[-1]
    retries: list[Any] = [
        e.data for e in of_type(events, "llm/retry") if e.data["turn"] == len(turn_ends(events))
    ]
    if case.outcome == "error":
        assert ex.status == "error", ex.content
        assert ex.content["ename"] == case.code
        evalue = ex.content["evalue"]
        assert len(evalue) > 40 and ex.content["traceback"] == [f"{case.code}: {evalue}"]
        assert ex.content["traceback"][0].count(case.code) == 1, ex.content["traceback"]
        assert end["kind"] == "error" and end["error"]["code"] == case.code
    else:
        assert ex.status == "ok", ex.content
        assert end == {"kind": "completed"}
        shown = " ".join(str(m["content"]) for m in ex.messages)
        assert (answer if case.outcome == "retry" else "ok") in shown
    assert len(retries) == case.retries, retries
    if retries:
        assert {r["failure"]["code"] for r in retries} == {case.code}
        if case.delay_ms is not None:
            low, high = case.delay_ms
            assert low <= retries[0]["delayMs"] <= high, retries[0]
        assert case.says in retries[0]["failure"]["message"], retries[0]
    if case.requests is not None:
        assert len(srv.requests) == case.requests
    assert elapsed < case.max_s, f"took {elapsed:.1f} s"
    # the next chat cell works, and nothing of a failed attempt reaches the model
    srv.script(text_reply("next-cell-works"))
    ex = chat(k, "And now?")
    assert ex.status == "ok", ex.content
    assert "next-cell-works" in " ".join(str(m["content"]) for m in ex.messages)
    sent = str(srv.requests[-1].json["messages"])
    assert "What is the answer?" in sent and "And now?" in sent
    if case.partial is not None:
        assert case.partial not in sent
    verify_log(k)


@pytest.mark.parametrize("name", list(CASES))
def test_fault_ends_in_retry_or_clear_error(rig: tuple[Kernel, SseServer], name: str) -> None:
    k, srv = rig
    run_case(k, srv, CASES[name])


def set_timeouts(k: Kernel, idle: float, deadline: float) -> None:
    """Change the timeouts the way a user would: environment, then re-pick the provider."""
    k.python(
        f"import os\nos.environ['DSH_IDLE_TIMEOUT'] = '{idle}'\nos.environ['DSH_DEADLINE'] = '{deadline}'"
    )
    assert "now using openai-compatible" in k.execute("%agent provider openai-compatible").stdout


@stress
def test_whole_answer_as_a_one_byte_per_100ms_drip(rig: tuple[Kernel, SseServer]) -> None:
    k, srv = rig
    set_timeouts(k, IDLE_S, 30)
    try:
        run_case(k, srv, Case((drip(MINIMAL),), "answer", "", retries=0, requests=1, max_s=20))
    finally:
        set_timeouts(k, IDLE_S, DEADLINE_S)


@stress
def test_silence_every_time_gives_up_with_timeout(rig: tuple[Kernel, SseServer]) -> None:
    k, srv = rig
    hang = sse_reply([data("x")], close="hang")
    run_case(k, srv, Case((hang,) * 6, "error", "TIMEOUT", retries=5, requests=6, max_s=30))


def test_timeouts_come_from_the_environment() -> None:
    base = {"DSH_BASE_URL": "http://127.0.0.1:9"}
    config = config_from_env({**base, "DSH_IDLE_TIMEOUT": "0.5", "DSH_DEADLINE": "7"})
    assert config is not None
    assert (config.timeouts.idle_s, config.timeouts.deadline_s) == (0.5, 7.0)
    assert config.timeouts.connect_s == 10.0
    default = config_from_env(base)
    assert default is not None and default.timeouts.idle_s == 300.0
    for bad in ("0", "-1", "soon", "inf"):
        with pytest.raises(UsageError, match="DSH_DEADLINE"):
            config_from_env({**base, "DSH_DEADLINE": bad})
