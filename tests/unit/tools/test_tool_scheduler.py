"""run_tool_calls: model-order commits, pools and barriers, caps, abort and internal failure."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from dsh_kernel.abort import USER_CANCEL, AbortController
from dsh_kernel.ids import CallId
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import TextBlock
from dsh_kernel.tools import (
    ApprovalPolicy,
    StepToolOutcome,
    ToolCall,
    ToolContext,
    ToolDefinition,
    ToolRegistry,
    ToolResult,
    ToolRuntime,
    run_tool_calls,
)
from dsh_kernel.tools.scheduler import Refusal


class Bench:
    """A gated tool: call ``{"id": "p…"}`` is concurrency-safe, anything else exclusive. Each body
    waits for its gate, so the test decides the finishing order."""

    def __init__(self) -> None:
        self.gates: dict[str, asyncio.Event] = {}
        self.log: list[str] = []
        self.changed = asyncio.Event()
        self.running = 0
        self.peak = 0
        reg = ToolRegistry()
        reg.register(
            ToolDefinition(
                name="gate",
                description="waits for its gate",
                parameters={
                    "type": "object",
                    "properties": {"id": {"type": "string"}},
                    "required": ["id"],
                },
                execute=self.body,
                is_concurrency_safe=lambda args: (
                    isinstance(args, dict) and str(args.get("id", "")).startswith("p")
                ),
            )
        )

        def conclude(args: JsonObject, ctx: ToolContext) -> JsonValue:
            ctx.conclude_turn()
            return "bye"

        reg.register(
            ToolDefinition(
                name="conclude", description="", parameters={"type": "object"}, execute=conclude
            )
        )
        self.runtime = ToolRuntime(reg, None, ApprovalPolicy("auto"))

    def gate(self, gid: str) -> asyncio.Event:
        return self.gates.setdefault(gid, asyncio.Event())

    async def body(self, args: JsonObject, ctx: ToolContext) -> JsonValue:
        gid = str(args["id"])
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.note(f"body {gid}")
        try:
            await self.gate(gid).wait()
        finally:
            self.running -= 1
            self.note(f"end {gid}")
        return gid

    def on_start(self, call: ToolCall) -> None:
        self.note(f"start {call.call_id}")

    def on_result(self, call: ToolCall, result: ToolResult) -> None:
        self.note(f"result {call.call_id}")

    def run(
        self,
        calls: list[ToolCall],
        signal: AbortController | None = None,
        *,
        refusals: Mapping[int, Refusal] | None = None,
        **kw: int,
    ) -> asyncio.Task[StepToolOutcome]:
        ctl = signal or AbortController()
        return asyncio.ensure_future(
            run_tool_calls(
                calls,
                self.runtime,
                ctl.signal,
                on_start=self.on_start,
                on_result=self.on_result,
                refusals=refusals,
                **kw,
            )
        )

    def note(self, entry: str) -> None:
        self.log.append(entry)
        self.changed.set()

    async def until(self, entry: str) -> None:
        while entry not in self.log:
            self.changed.clear()
            await self.changed.wait()


def gc(gid: str, name: str = "gate") -> ToolCall:
    return ToolCall(call_id=CallId(gid), name=name, arguments=f'{{"id": "{gid}"}}')


def texts(outcome: StepToolOutcome) -> list[str]:
    out: list[str] = []
    for r in outcome.results:
        block = r.content[0]
        assert isinstance(block, TextBlock)
        out.append(block.text)
    return out


async def test_parallel_calls_commit_in_model_order_whatever_finishes_first() -> None:
    b = Bench()
    task = b.run([gc("p1"), gc("p2"), gc("p3")])
    await b.until("body p3")
    b.gate("p3").set()
    await b.until("end p3")
    b.gate("p2").set()
    await b.until("end p2")
    assert not any(e.startswith("result") for e in b.log)  # p1 still owes its result
    b.gate("p1").set()
    outcome = await task
    assert texts(outcome) == ["p1", "p2", "p3"]
    results = [e for e in b.log if e.startswith("result")]
    assert results == ["result p1", "result p2", "result p3"]
    assert b.log[:3] == ["start p1", "start p2", "start p3"]
    assert b.peak == 3 and outcome.concludes_turn is False


async def test_exclusive_call_is_a_barrier() -> None:
    b = Bench()
    for g in ("p1", "p2", "x", "p3"):
        b.gate(g).set()
    outcome = await b.run([gc("p1"), gc("p2"), gc("x"), gc("p3")])
    log = b.log
    assert log.index("start x") > log.index("end p1") and log.index("start x") > log.index("end p2")
    assert log.index("start p3") > log.index("end x")
    assert log.index("result p2") < log.index(
        "start x"
    )  # the pool's results commit before the barrier
    assert texts(outcome) == ["p1", "p2", "x", "p3"]


async def test_pool_never_exceeds_max_parallel() -> None:
    b = Bench()
    ids = [f"p{i}" for i in range(7)]
    task = b.run([gc(i) for i in ids], max_parallel=2)
    for i in ids:
        await b.until(f"body {i}")
        assert b.running <= 2
        b.gate(i).set()
    outcome = await task
    assert b.peak == 2 and texts(outcome) == ids


async def test_abort_before_dispatch_gives_synthetic_results() -> None:
    b = Bench()
    ctl = AbortController()
    ctl.abort(USER_CANCEL)
    outcome = await b.run([gc("p1"), gc("x"), gc("nope", name="missing")], ctl)
    assert b.log == ["start p1", "result p1", "start x", "result x", "start nope", "result nope"]
    assert all(
        r.error is not None and r.error.code == "ABORTED_BEFORE_DISPATCH" for r in outcome.results
    )
    assert texts(outcome) == ["Error: tool call aborted before dispatch"] * 3


async def test_abort_during_execution_drains_started_calls() -> None:
    b = Bench()
    ctl = AbortController()
    b.gate("p1").set()
    task = b.run([gc("p1"), gc("p2"), gc("x"), gc("p3")], ctl)
    await b.until("body p2")
    await b.until("end p1")
    ctl.abort(USER_CANCEL)  # p2 is running; x and p3 never started
    outcome = await task
    codes = [r.error.code if r.error else "ok" for r in outcome.results]
    assert codes == ["ok", "ABORTED", "ABORTED_BEFORE_DISPATCH", "ABORTED_BEFORE_DISPATCH"]
    assert "end p2" in b.log  # the running body was stopped before we returned
    assert "body x" not in b.log and "body p3" not in b.log
    assert [e for e in b.log if e.startswith(("start", "result"))] == [
        "start p1",
        "start p2",
        "result p1",
        "result p2",
        "start x",
        "result x",
        "start p3",
        "result p3",
    ]


async def test_turn_cancellation_commits_everything_then_reraises() -> None:
    b = Bench()
    ctl = AbortController()
    task = b.run([gc("p1"), gc("p2"), gc("x")], ctl)
    await b.until("body p2")
    # What the agent does on cancel: abort with a cause, then cancel the turn task.
    ctl.abort(USER_CANCEL)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [e for e in b.log if e.startswith("result")] == ["result p1", "result p2", "result x"]
    assert b.running == 0


async def test_foreign_cancellation_drains_without_inventing_results() -> None:
    b = Bench()
    task = b.run([gc("p1"), gc("x")])
    await b.until("body p1")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not any(e.startswith("result") for e in b.log)
    assert "end p1" in b.log and "start x" not in b.log


async def test_internal_failure_stops_drains_and_raises() -> None:
    b = Bench()
    b.gate("p1").set()
    committed: list[str] = []

    def failing(call: ToolCall, result: ToolResult) -> None:
        committed.append(call.call_id)
        raise RuntimeError("log write failed")

    ctl = AbortController()
    task = asyncio.ensure_future(
        run_tool_calls(
            [gc("p1"), gc("p2"), gc("x")],
            b.runtime,
            ctl.signal,
            on_start=b.on_start,
            on_result=failing,
        )
    )
    await b.until("body p2")
    b.gate("p2").set()
    with pytest.raises(RuntimeError, match="log write failed"):
        await task
    assert committed == ["p1"]
    assert "start x" not in b.log and b.running == 0


async def test_calls_beyond_the_cap_are_refused_without_running() -> None:
    b = Bench()
    for g in ("p1", "p2", "p3", "p4"):
        b.gate(g).set()
    outcome = await b.run([gc("p1"), gc("p2"), gc("p3"), gc("p4")], max_calls=2)
    assert texts(outcome)[:2] == ["p1", "p2"]
    for r in outcome.results[2:]:
        assert r.error is not None and r.error.code == "TOO_MANY_TOOL_CALLS"
        assert (
            r.error.message
            == "too many tool calls in one step (4 > 2); call at most 2 tools per step"
        )
    assert "body p3" not in b.log and "body p4" not in b.log
    assert [e for e in b.log if e.startswith(("start", "result"))][-4:] == [
        "start p3",
        "result p3",
        "start p4",
        "result p4",
    ]


async def test_refused_calls_never_run_and_commit_in_model_order() -> None:
    b = Bench()
    for g in ("p1", "x", "p3"):
        b.gate(g).set()
    refusal = Refusal(code="REPEATED_CALL", message="not run: a repeat")
    outcome = await b.run([gc("p1"), gc("x"), gc("p3")], refusals={1: refusal})
    assert "body x" not in b.log  # refused: never dispatched
    assert "body p1" in b.log and "body p3" in b.log
    x = outcome.results[1]
    assert x.is_error and x.error is not None and x.error.code == "REPEATED_CALL"
    assert texts(outcome)[1] == "Error: not run: a repeat"
    results = [e for e in b.log if e.startswith(("start", "result"))]
    assert [e for e in results if e.startswith("result")] == ["result p1", "result x", "result p3"]
    assert results.index("start x") < results.index("result x")


async def test_argument_parsing() -> None:
    b = Bench()
    calls = [
        ToolCall(call_id=CallId("blank"), name="conclude", arguments=""),
        ToolCall(call_id=CallId("broken"), name="gate", arguments='{"id": '),
        ToolCall(call_id=CallId("nan"), name="gate", arguments='{"id": NaN}'),
    ]
    outcome = await b.run(calls)
    assert not outcome.results[0].is_error  # "" parsed as {}
    for r in outcome.results[1:]:
        assert r.error is not None and r.error.code == "INVALID_ARGS"
        assert "not valid JSON" in r.error.message
    assert outcome.concludes_turn is True


def test_limits_must_be_positive() -> None:
    b = Bench()
    with pytest.raises(ValueError):
        asyncio.run(
            run_tool_calls(
                [],
                b.runtime,
                AbortController().signal,
                on_start=b.on_start,
                on_result=b.on_result,
                max_parallel=0,
            )
        )
