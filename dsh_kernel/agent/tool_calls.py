"""A step's tool calls and the approvals they ask for, written to the log (SPINE §3.4, §7.2).

``run_step_tools`` hands the calls of one assistant message to the scheduler and logs each as it
goes: ``tool/call`` when the call starts (with the tool's ``origin`` when it has one: an MCP
server's tool, named before any result), ``tool/result`` (a ``user`` message with one
``ToolResultBlock``, its ``error`` name and code, its presentation ``meta``) when it settles, whose
``source_event_seqs`` point at the call. A result's additional contexts are queued for the next
step. Calls the caller refuses (``refusals``: the repeated-call guard's, ``agent.repeats``) are
logged the same way but never run: their result is the refusal. When the tools fail internally (the
log could not be written, …) every call left without a result is closed as crash repair would close
it, so no later request carries an unanswered call; the original error is what propagates. It
returns the step's results, in model order, and whether a tool concluded the turn.

``ApprovalLog`` is the ``ApprovalRecorder`` of one session: ``approval/asked``,
``approval/decided`` and ``approval/policy`` (with where the change came from). Its failures
propagate: a log that cannot record the question must not let the call proceed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

from dsh_kernel.abort import AbortSignal
from dsh_kernel.agent.inbox import Inbox
from dsh_kernel.ids import ApprovalRequestId, CallId, new_message_id
from dsh_kernel.llm.codec import message_to_json
from dsh_kernel.llm.types import Message, ToolCallBlock, ToolResultBlock, ToolSource
from dsh_kernel.session import payloads
from dsh_kernel.session.log import Session
from dsh_kernel.session.log_images import record_images
from dsh_kernel.session.repair import closers
from dsh_kernel.tools.approval import (
    ApprovalOutcome,
    ApprovalPolicy,
    ApprovalRecorder,
    ApprovalRequest,
)
from dsh_kernel.tools.pipeline import ToolRuntime
from dsh_kernel.tools.scheduler import Refusal, StepToolOutcome, run_tool_calls
from dsh_kernel.tools.types import ToolCall, ToolResult


async def run_step_tools(
    session: Session,
    inbox: Inbox,
    runtime: ToolRuntime,
    *,
    turn: int,
    step: int,
    calls: Sequence[ToolCallBlock],
    signal: AbortSignal,
    max_parallel: int,
    refusals: Mapping[int, Refusal] | None = None,
) -> StepToolOutcome:
    """Run and log one step's tool calls (module docstring)."""
    call_seqs: dict[str, int] = {}

    def on_start(call: ToolCall) -> None:
        data = payloads.ToolCall(
            turn=turn, step=step, callId=call.call_id, name=call.name, arguments=call.arguments
        )
        defn = runtime.registry.get(call.name)
        if defn is not None and defn.origin is not None:
            data["origin"] = defn.origin  # whose tool: known before any result (an MCP server's)
        call_seqs[call.call_id] = session.append("tool/call", data).seq

    def on_result(call: ToolCall, result: ToolResult) -> None:
        append_tool_result(session, turn, step, call, result, call_seqs.get(call.call_id))
        for ctx in result.additional_contexts:
            inbox.append("next-step", ctx)

    try:
        outcome = await run_tool_calls(
            [ToolCall(call_id=c.id, name=c.name, arguments=c.arguments) for c in calls],
            runtime,
            signal,
            on_start=on_start,
            on_result=on_result,
            max_parallel=max_parallel,
            refusals=refusals,
        )
    except BaseException:
        with contextlib.suppress(Exception):  # best effort: the original error propagates
            for p in closers(session.events):
                if p.type == "tool/result":
                    session.append(
                        p.type,
                        p.data,
                        surface_op=p.surface_op,
                        source_event_seqs=p.source_event_seqs,
                    )
        raise
    return outcome


def append_tool_result(
    session: Session, turn: int, step: int, call: ToolCall, result: ToolResult, call_seq: int | None
) -> None:
    """Log ``result`` as the ``tool/result`` of ``call`` (whose ``tool/call`` is ``call_seq``)."""
    block = ToolResultBlock(
        tool_call_id=CallId(call.call_id),
        content=tuple(result.content),
        is_error=result.is_error,
    )
    msg = Message(
        id=new_message_id(),
        role="user",
        content=(block,),
        source=ToolSource(call_id=CallId(call.call_id)),
    )
    record_images(session, block.content)  # the bytes before the reference
    data = payloads.ToolResult(turn=turn, step=step, message=message_to_json(msg))
    if result.error is not None:
        data["error"] = payloads.ToolResultError(name=result.error.name, code=result.error.code)
    if isinstance(result.meta, dict):  # the pipeline lets only an object through
        data["meta"] = result.meta
    if result.duration_ms is not None:
        data["durationMs"] = result.duration_ms
    session.append(
        "tool/result",
        data,
        surface_op="append",
        source_event_seqs=[call_seq] if call_seq is not None else None,
    )


class ApprovalLog:
    """The approval events of one session (module docstring)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def recorder(self) -> ApprovalRecorder:
        return ApprovalRecorder(on_asked=self.asked, on_decided=self.decided, on_policy=self.policy)

    def asked(self, approval_id: ApprovalRequestId, request: ApprovalRequest) -> None:
        data = payloads.ApprovalAsked(id=approval_id, toolName=request.tool_name)
        if request.call_id is not None:
            data["callId"] = request.call_id
        if request.reason is not None:
            data["reason"] = request.reason
        self._session.append("approval/asked", data)

    def decided(self, approval_id: ApprovalRequestId, outcome: ApprovalOutcome) -> None:
        self._session.append(
            "approval/decided", payloads.ApprovalDecided(id=approval_id, outcome=outcome)
        )

    def policy(self, policy: ApprovalPolicy, source: str) -> None:
        data = payloads.ApprovalPolicy(policy=policy.to_json(), source=source)
        self._session.append("approval/policy", data)
