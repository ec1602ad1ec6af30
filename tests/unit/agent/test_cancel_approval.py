"""Cancellation in every state, the wake latch, and approvals wired to the log."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from dsh_kernel import Agent, tool
from dsh_kernel.abort import AbortCause
from dsh_kernel.ids import ApprovalRequestId, CallId
from dsh_kernel.llm.types import BlockStartChunk, ToolCallDeltaChunk
from dsh_kernel.testing import (
    ScriptedProvider,
    hang,
    text_response,
    tool_call_response,
    tool_calls_response,
)
from dsh_kernel.tools.approval import ApprovalPolicy, ApprovalRequest

from .helpers import of_type, result_texts, turn_ends, types


async def wait_for(predicate: Callable[[], object], limit: float = 5.0) -> None:
    """Poll a condition on the event loop (the agent runs in the same loop)."""
    async with asyncio.timeout(limit):
        while not predicate():  # noqa: ASYNC110 - polling the log is the point
            await asyncio.sleep(0.001)


async def test_cancel_while_streaming_keeps_visible_text_only() -> None:
    provider = ScriptedProvider([hang()])
    agent = Agent(provider=provider, model="m1")
    agent.followup("go")
    await wait_for(lambda: of_type(agent.session.events, "assistant/chunk"))
    await wait_for(lambda: len(of_type(agent.session.events, "assistant/chunk")) >= 2)
    agent.cancel()
    await agent.when_idle()
    msgs = of_type(agent.session.events, "assistant/message")
    assert len(msgs) == 1
    assert msgs[0].data["interrupted"] is True
    assert msgs[0].data["message"]["content"] == [{"type": "text", "text": "partial"}]  # type: ignore[index]
    assert turn_ends(agent.session.events) == [{"kind": "aborted", "reason": {"kind": "user"}}]
    assert provider.cancellations == 1


async def test_cancel_while_streaming_a_tool_call_logs_no_message() -> None:
    prefix = [
        BlockStartChunk(index=0, block_type="tool-call"),
        ToolCallDeltaChunk(index=0, id=CallId("c1"), name="add", arguments_delta='{"a":'),
    ]
    provider = ScriptedProvider([hang(prefix)])
    agent = Agent(provider=provider, model="m1")
    agent.followup("go")
    await wait_for(lambda: len(of_type(agent.session.events, "assistant/chunk")) >= 2)
    agent.cancel(AbortCause(kind="hook", reason="test"))
    await agent.when_idle()
    assert of_type(agent.session.events, "assistant/message") == []
    assert of_type(agent.session.events, "tool/call") == []
    assert turn_ends(agent.session.events) == [
        {"kind": "aborted", "reason": {"kind": "hook", "reason": "test"}}
    ]


async def test_cancel_during_tool_execution_drains_and_synthesises() -> None:
    started = asyncio.Event()

    @tool
    async def slow() -> str:
        """Takes forever."""
        started.set()
        await asyncio.sleep(3600)
        return "never"

    @tool(read_only=True)
    def quick() -> str:
        """Quick."""
        return "q"

    provider = ScriptedProvider([tool_calls_response([("slow", {}, "c1"), ("quick", {}, "c2")])])
    agent = Agent(
        provider=provider,
        model="m1",
        tools=[slow, quick],
        approval_policy=ApprovalPolicy(default="auto"),
    )
    agent.followup("go")
    await asyncio.wait_for(started.wait(), 5)
    agent.cancel()
    await agent.when_idle()
    ev = agent.session.events
    results = of_type(ev, "tool/result")
    assert [r.data["error"]["code"] for r in results] == ["ABORTED", "ABORTED_BEFORE_DISPATCH"]  # type: ignore[index]
    assert [c.data["callId"] for c in of_type(ev, "tool/call")] == ["c1", "c2"]
    assert result_texts(ev)[1] == "Error: tool call aborted before dispatch"
    assert turn_ends(ev)[-1]["kind"] == "aborted"


async def test_cancel_while_waiting_for_approval() -> None:
    asked = asyncio.Event()

    async def answerer(_rid: ApprovalRequestId, _req: ApprovalRequest) -> object:
        asked.set()
        await asyncio.sleep(3600)
        return "allowed-once"

    @tool
    def danger() -> str:
        """Needs approval."""
        return "ran"

    provider = ScriptedProvider([tool_call_response("danger", {}, call_id="c1")])
    agent = Agent(provider=provider, model="m1", tools=[danger], answerer=answerer)
    agent.followup("go")
    await asyncio.wait_for(asked.wait(), 5)
    assert of_type(agent.session.events, "approval/asked")
    agent.cancel()
    await agent.when_idle()
    ev = agent.session.events
    assert of_type(ev, "approval/decided")[0].data["outcome"] == "cancelled"
    assert len(of_type(ev, "tool/result")) == 1
    assert turn_ends(ev) == [{"kind": "aborted", "reason": {"kind": "user"}}]
    assert "ran" not in result_texts(ev)


async def test_followup_during_abort_is_latched_and_runs() -> None:
    provider = ScriptedProvider([hang(), text_response("second answer")])
    agent = Agent(provider=provider, model="m1")
    agent.followup("first")
    await wait_for(lambda: of_type(agent.session.events, "assistant/chunk"))
    agent.cancel()
    agent.followup("second")  # arrives while aborting: queued as a fresh turn
    await agent.when_idle()
    ends = turn_ends(agent.session.events)
    assert [e["kind"] for e in ends] == ["aborted", "completed"]
    assert agent.session.derive_messages()[-1].text() == "second answer"


async def test_cancel_keep_inbox_keeps_queued_followups() -> None:
    provider = ScriptedProvider([hang(), text_response("later"), text_response("woken")])
    agent = Agent(provider=provider, model="m1")
    agent.followup("first")
    agent.followup("queued")
    await wait_for(lambda: of_type(agent.session.events, "assistant/chunk"))
    agent.cancel(keep_inbox=True)
    await agent.when_idle()
    assert [m.text() for m in agent.inbox.next_turn] == ["queued"]
    agent.followup("wake")
    await agent.when_idle()
    assert [e["kind"] for e in turn_ends(agent.session.events)] == [
        "aborted",
        "completed",
        "completed",
    ]


async def test_next_turn_after_cancel_works() -> None:
    provider = ScriptedProvider([hang(), text_response("fine")])
    agent = Agent(provider=provider, model="m1")
    agent.followup("a")
    # both chunks of the prefix (the block's start, then its text): a cancel after the first
    # alone leaves nothing visible to keep, which a loaded machine made happen
    await wait_for(lambda: len(of_type(agent.session.events, "assistant/chunk")) >= 2)
    agent.cancel()
    await agent.when_idle()
    agent.followup("b")
    await agent.when_idle()
    assert turn_ends(agent.session.events)[-1] == {"kind": "completed"}
    # The interrupted prefix is part of the history the model sees next.
    texts = [m.text() for m in provider.requests[1].messages]
    assert texts == ["a", "partial", "b"]


async def _approval_run(outcome: object, *, timeout_s: float | None = None) -> Agent:
    async def answerer(_rid: ApprovalRequestId, _req: ApprovalRequest) -> object:
        if outcome == "hang":
            await asyncio.sleep(3600)
        return outcome

    @tool
    def danger() -> str:
        """Needs approval."""
        return "ran"

    provider = ScriptedProvider(
        [tool_call_response("danger", {}), tool_call_response("danger", {}), text_response("end")]
    )
    agent = Agent(
        provider=provider,
        model="m1",
        tools=[danger],
        answerer=answerer,
        approval_timeout_s=timeout_s,
    )
    agent.followup("go")
    await agent.when_idle()
    return agent


async def test_approval_allow_once_asks_again() -> None:
    agent = await _approval_run("allowed-once")
    ev = agent.session.events
    assert [d.data["outcome"] for d in of_type(ev, "approval/decided")] == ["allowed-once"] * 2
    assert result_texts(ev) == ["ran", "ran"]


async def test_approval_always_allows_for_the_session() -> None:
    agent = await _approval_run("allowed-always")
    ev = agent.session.events
    assert [d.data["outcome"] for d in of_type(ev, "approval/decided")] == ["allowed-always"]
    assert of_type(ev, "approval/policy")[0].data["policy"]["tools"] == {"danger": "auto"}  # type: ignore[index]
    assert result_texts(ev) == ["ran", "ran"]


async def test_approval_reject_is_an_error_result() -> None:
    agent = await _approval_run("rejected")
    ev = agent.session.events
    assert all(t.startswith("Error:") for t in result_texts(ev))
    assert {r.data["error"]["code"] for r in of_type(ev, "tool/result")} == {"DENIED"}  # type: ignore[index]
    assert turn_ends(ev) == [{"kind": "completed"}]


async def test_approval_timeout_fails_closed() -> None:
    agent = await _approval_run("hang", timeout_s=0.05)
    ev = agent.session.events
    assert [d.data["outcome"] for d in of_type(ev, "approval/decided")] == ["timeout"] * 2
    assert "timed out" in result_texts(ev)[0]


async def test_no_answerer_fails_closed() -> None:
    @tool
    def danger() -> str:
        """Needs approval."""
        return "ran"

    provider = ScriptedProvider([tool_call_response("danger", {}), text_response("end")])
    agent = Agent(provider=provider, model="m1", tools=[danger])
    agent.followup("go")
    await agent.when_idle()
    ev = agent.session.events
    assert [d.data["outcome"] for d in of_type(ev, "approval/decided")] == ["unavailable"]
    assert result_texts(ev)[0].startswith("Error:")


async def test_policy_never_and_set_approval_logged() -> None:
    @tool
    def danger() -> str:
        """Needs approval."""
        return "ran"

    provider = ScriptedProvider([tool_call_response("danger", {}), text_response("end")])
    agent = Agent(provider=provider, model="m1", tools=[danger])
    agent.set_approval("never")
    agent.followup("go")
    await agent.when_idle()
    ev = agent.session.events
    assert of_type(ev, "approval/asked") == []
    assert of_type(ev, "approval/policy")[0].data["source"] == "user"
    assert result_texts(ev)[0].startswith("Error:")
    assert "approval/policy" in types(ev)
