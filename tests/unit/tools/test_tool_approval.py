"""Approval policy (modes, JSON round trip) and the approval service's outcomes, failing closed."""

from __future__ import annotations

import asyncio

import pytest

from dsh_kernel.abort import USER_CANCEL, AbortController
from dsh_kernel.errors import UsageError
from dsh_kernel.ids import ApprovalRequestId, CallId
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.tools import (
    ApprovalOutcome,
    ApprovalPolicy,
    ApprovalRecorder,
    ApprovalRequest,
    ApprovalService,
    ToolContext,
    ToolDefinition,
)


def make(name: str, *, read_only: bool = False) -> ToolDefinition:
    def execute(args: JsonObject, ctx: ToolContext) -> JsonValue:
        return None

    return ToolDefinition(
        name=name,
        description="",
        parameters={"type": "object"},
        execute=execute,
        read_only=read_only,
    )


READER, WRITER = make("read", read_only=True), make("write")
REQUEST = ApprovalRequest(tool_name="write", call_id=CallId("c1"), arguments='{"x": 1}')


def test_default_policy_reads_run_writes_ask() -> None:
    p = ApprovalPolicy()
    assert p.decide(READER) == "allow"
    assert p.decide(WRITER) == "ask"


def test_global_mode_applies_to_non_read_only_tools_only() -> None:
    p = ApprovalPolicy()
    p.set(None, "never")
    assert p.decide(WRITER) == "deny" and p.decide(READER) == "allow"
    p.set(None, "auto")
    assert p.decide(WRITER) == "allow"


def test_explicit_entries_win_and_can_be_cleared() -> None:
    p = ApprovalPolicy("auto", {"read": "never"})
    assert p.decide(READER) == "deny"
    p.set("write", "ask")
    assert p.decide(WRITER) == "ask"
    p.set("write", None)
    assert p.decide(WRITER) == "allow"
    with pytest.raises(UsageError):
        p.set(None, None)
    with pytest.raises(ValueError, match="ask, auto, never"):
        p.set("write", "sometimes")  # type: ignore[arg-type]


def test_policy_json_round_trip() -> None:
    p = ApprovalPolicy("never", {"b": "auto", "a": "ask"})
    data = p.to_json()
    assert data == {"default": "never", "tools": {"a": "ask", "b": "auto"}}
    assert ApprovalPolicy.from_json(data) == p
    assert ApprovalPolicy.from_json({}) == ApprovalPolicy()
    with pytest.raises(ValueError, match=r"tools\.a"):
        ApprovalPolicy.from_json({"tools": {"a": "yes"}})
    with pytest.raises(ValueError):
        ApprovalPolicy.from_json([])


class Log:
    """The agent's side: what it would append to the session log."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def recorder(self) -> ApprovalRecorder:
        return ApprovalRecorder(
            on_asked=lambda rid, req: self.events.append(("asked", (rid, req))),
            on_decided=lambda rid, outcome: self.events.append(("decided", (rid, outcome))),
            on_policy=lambda policy, source: self.events.append(
                ("policy", (policy.to_json(), source))
            ),
        )

    def outcomes(self) -> list[object]:
        return [e[1][1] for e in self.events if e[0] == "decided"]  # type: ignore[index]


def answering(answer: object):
    async def answerer(rid: ApprovalRequestId, req: ApprovalRequest) -> object:
        return answer

    return answerer


@pytest.mark.parametrize("answer", ["allowed-once", "allowed-always", "rejected"])
async def test_answers_are_recorded(answer: ApprovalOutcome) -> None:
    log = Log()
    policy = ApprovalPolicy()
    service = ApprovalService(answering(answer), log.recorder(), policy=policy)
    outcome = await service.request(REQUEST, AbortController().signal)
    assert outcome == answer
    kinds = [e[0] for e in log.events]
    assert kinds[:2] == ["asked", "decided"]
    (asked_id, asked_req), (decided_id, decided) = log.events[0][1], log.events[1][1]  # type: ignore[misc]
    assert asked_id == decided_id and asked_req is REQUEST and decided == answer
    if answer == "allowed-always":
        assert policy.decide(make("write")) == "allow"
        assert log.events[2] == (
            "policy",
            ({"default": "ask", "tools": {"write": "auto"}}, "allowed-always"),
        )
    else:
        assert policy.decide(make("write")) == "ask"
        assert len(log.events) == 2


async def test_no_answerer_is_unavailable() -> None:
    log = Log()
    assert (
        await ApprovalService(None, log.recorder()).request(REQUEST, AbortController().signal)
        == "unavailable"
    )
    assert log.outcomes() == ["unavailable"]


async def test_failing_or_garbage_answerer_is_unavailable(caplog: pytest.LogCaptureFixture) -> None:
    async def boom(rid: ApprovalRequestId, req: ApprovalRequest) -> object:
        raise RuntimeError("widget crashed")

    async def self_cancel(rid: ApprovalRequestId, req: ApprovalRequest) -> object:
        raise asyncio.CancelledError

    signal = AbortController().signal
    for answerer in (
        boom,
        answering("yes please"),
        answering(None),
        answering("cancelled"),
        self_cancel,
    ):
        log = Log()
        assert (
            await ApprovalService(answerer, log.recorder()).request(REQUEST, signal)
            == "unavailable"
        )
        assert log.outcomes() == ["unavailable"]


async def test_timeout_cancels_the_answerer() -> None:
    stopped = asyncio.Event()

    async def slow(rid: ApprovalRequestId, req: ApprovalRequest) -> object:
        try:
            await asyncio.sleep(10)
        finally:
            stopped.set()
        return "allowed-once"

    log = Log()
    outcome = await ApprovalService(slow, log.recorder(), timeout_s=0.02).request(
        REQUEST, AbortController().signal
    )
    assert outcome == "timeout"
    assert stopped.is_set()  # the answerer was stopped before we returned
    assert log.outcomes() == ["timeout"]


async def test_abort_while_waiting_is_cancelled() -> None:
    ctl = AbortController()
    started = asyncio.Event()
    stopped = asyncio.Event()

    async def waits(rid: ApprovalRequestId, req: ApprovalRequest) -> object:
        started.set()
        try:
            await asyncio.sleep(10)
        finally:
            stopped.set()
        return "allowed-once"

    log = Log()
    task = asyncio.ensure_future(
        ApprovalService(waits, log.recorder()).request(REQUEST, ctl.signal)
    )
    await started.wait()
    ctl.abort(USER_CANCEL)
    assert await task == "cancelled"
    assert stopped.is_set()
    assert log.outcomes() == ["cancelled"]


async def test_already_aborted_never_asks() -> None:
    ctl = AbortController()
    ctl.abort(USER_CANCEL)
    asked: list[str] = []

    async def answerer(rid: ApprovalRequestId, req: ApprovalRequest) -> object:
        asked.append("asked")
        return "allowed-once"

    log = Log()
    assert (
        await ApprovalService(answerer, log.recorder()).request(REQUEST, ctl.signal) == "cancelled"
    )
    assert asked == [] and log.outcomes() == ["cancelled"]


async def test_task_cancellation_records_cancelled_and_propagates() -> None:
    started = asyncio.Event()
    stopped = asyncio.Event()

    async def waits(rid: ApprovalRequestId, req: ApprovalRequest) -> object:
        started.set()
        try:
            await asyncio.sleep(10)
        finally:
            stopped.set()
        return "allowed-once"

    log = Log()
    task = asyncio.ensure_future(
        ApprovalService(waits, log.recorder()).request(REQUEST, AbortController().signal)
    )
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert stopped.is_set()
    assert log.outcomes() == ["cancelled"]


def test_timeout_must_be_positive() -> None:
    with pytest.raises(UsageError):
        ApprovalService(None, None, timeout_s=0)
