"""The turn/step loop: exact event order, tools, max-tokens, errors, retry, inbox semantics."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any, cast

import pytest

from dsh_kernel import Agent, tool
from dsh_kernel.agent.hooks import Enter, Next, PreStep, PreStepDecision, Reject, TurnStopping
from dsh_kernel.agent.inbox import Inbox
from dsh_kernel.agent.retry import RetryPolicy
from dsh_kernel.errors import LlmError
from dsh_kernel.ids import new_message_id, new_session_id
from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.llm.types import LlmFailure, Message, TextBlock, TokenUsage, UserSource
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.log import Session
from dsh_kernel.testing import (
    FakeClock,
    ScriptedProvider,
    error_response,
    max_tokens_response,
    text_response,
    tool_call_response,
    tool_calls_response,
)
from dsh_kernel.tools.types import ToolContext

from .helpers import of_type, result_texts, turn_ends, types


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


@tool(read_only=True)
def boom(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"kaboom: {reason}")


@tool(read_only=True)
def not_json() -> object:
    """Returns something that is not JSON."""
    return {1, 2, 3}


async def run(agent: Agent, *messages: str) -> None:
    for m in messages:
        agent.followup(m)
    await agent.when_idle()


async def test_text_turn_event_order() -> None:
    provider = ScriptedProvider([text_response("Hello there", pieces=3)])
    agent = Agent(provider=provider, model="m1")
    await run(agent, "hi")
    assert types(agent.session.events) == [
        "agent/inbox/spliced",
        "turn/start",
        "agent/inbox/spliced",
        "step/start",
        "user/message",
        "request/header",
        "request/context",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    assert turn_ends(agent.session.events) == [{"kind": "completed"}]
    msgs = agent.session.derive_messages()
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[1].text() == "Hello there"
    assert len(of_type(agent.session.events, "assistant/chunk")) >= 5
    assert agent.status == "idle"


async def test_tool_two_step_turn() -> None:
    provider = ScriptedProvider(
        [tool_call_response("add", {"a": 2, "b": 3}, call_id="c1"), text_response("It is 5.")]
    )
    agent = Agent(provider=provider, model="m1", tools=[add])
    await run(agent, "what is 2+3?")
    ev = agent.session.events
    assert types(ev) == [
        "agent/inbox/spliced",
        "turn/start",
        "agent/inbox/spliced",
        "step/start",
        "user/message",
        "request/header",
        "request/context",
        "assistant/message",
        "tool/call",
        "tool/result",
        "step/end",
        "step/start",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    assert result_texts(ev) == ["5"]
    call = of_type(ev, "tool/call")[0]
    res = of_type(ev, "tool/result")[0]
    assert res.source_event_seqs == (call.seq,)
    second = provider.requests[1]
    assert [m.role for m in second.messages] == ["user", "assistant", "user"]
    assert [t.name for t in second.tools] == ["add"]


@pytest.mark.parametrize(
    ("script_args", "code", "fragment"),
    [
        ('{"a": 1, "b":', "INVALID_ARGS", "invalid arguments"),
        ({"a": "x", "b": 1}, "INVALID_ARGS", "invalid arguments"),
    ],
)
async def test_bad_arguments_become_results(script_args: object, code: str, fragment: str) -> None:
    provider = ScriptedProvider(
        [tool_call_response("add", script_args, call_id="c1"), text_response("sorry")]  # type: ignore[arg-type]
    )
    agent = Agent(provider=provider, model="m1", tools=[add])
    await run(agent, "go")
    res = of_type(agent.session.events, "tool/result")[0]
    assert res.data["error"]["code"] == code  # type: ignore[index]
    assert fragment in result_texts(agent.session.events)[0]
    # The model saw the error and the turn went on.
    assert turn_ends(agent.session.events) == [{"kind": "completed"}]
    assert "Error:" in repr(provider.requests[1].messages[-1])


async def test_unknown_tool_and_failures_are_results() -> None:
    provider = ScriptedProvider(
        [
            tool_calls_response(
                [("nope", {}, "c1"), ("boom", {"reason": "r"}, "c2"), ("not_json", {}, "c3")]
            ),
            text_response("ok"),
        ]
    )
    agent = Agent(provider=provider, model="m1", tools=[boom, not_json])
    await run(agent, "go")
    results = of_type(agent.session.events, "tool/result")
    assert [r.data["error"]["code"] for r in results] == [  # type: ignore[index]
        "UNKNOWN_TOOL",
        "TOOL_FAILED",
        "INVALID_TOOL_OUTPUT",
    ]
    assert [r.data["message"]["source"]["callId"] for r in results] == ["c1", "c2", "c3"]  # type: ignore[index]
    assert "kaboom: r" in result_texts(agent.session.events)[1]


async def test_max_tokens_drops_tool_calls_and_is_sticky() -> None:
    provider = ScriptedProvider(
        [max_tokens_response("partial", tool_call=("add", {"a": 1, "b": 2}))]
    )
    agent = Agent(provider=provider, model="m1", tools=[add])
    await run(agent, "go")
    assert of_type(agent.session.events, "tool/call") == []
    assert turn_ends(agent.session.events) == [{"kind": "max-tokens"}]
    msg = of_type(agent.session.events, "assistant/message")[0]
    assert [b["type"] for b in msg.data["message"]["content"]] == ["text"]  # type: ignore[index]


async def test_max_tokens_sticky_across_steps() -> None:
    # Step 1 is cut at max tokens while a steer is pending, so a step 2 runs and completes.
    agent: Agent

    def first(_req: object) -> list[object]:
        agent.steer("continue please")
        return max_tokens_response("cut")  # type: ignore[return-value]

    provider = ScriptedProvider([first, text_response("done")])  # type: ignore[list-item]
    agent = Agent(provider=provider, model="m1")
    await run(agent, "go")
    assert len(of_type(agent.session.events, "step/start")) == 2
    assert turn_ends(agent.session.events) == [{"kind": "max-tokens"}]


async def test_provider_error_ends_turn_with_code_and_next_turn_works() -> None:
    provider = ScriptedProvider(
        [error_response("AUTH", "key rejected", status=401), text_response("hello again")]
    )
    agent = Agent(provider=provider, model="m1")
    await run(agent, "one")
    end = turn_ends(agent.session.events)[-1]
    assert end["kind"] == "error"
    assert end["error"]["code"] == "AUTH"  # type: ignore[index]
    assert isinstance(agent.last_error, LlmError)
    await run(agent, "two")
    assert turn_ends(agent.session.events)[-1] == {"kind": "completed"}
    # The failed attempt never entered the history.
    assert [m.role for m in provider.requests[1].messages] == ["user", "user"]


async def test_raised_provider_failure_becomes_error_turn() -> None:
    provider = ScriptedProvider([LlmError(LlmFailure(code="TRANSPORT", message="refused"))])
    agent = Agent(provider=provider, model="m1", retry_policy=RetryPolicy(mode="off"))
    await run(agent, "x")
    assert turn_ends(agent.session.events)[-1]["error"]["code"] == "TRANSPORT"  # type: ignore[index]


async def test_retry_in_same_step_honours_retry_after() -> None:
    clock = FakeClock()
    provider = ScriptedProvider(
        [
            error_response("RATE_LIMIT", "slow down", status=429, retry_after_ms=1500),
            error_response("SERVER", "oops", status=503),
            text_response("finally"),
        ]
    )
    agent = Agent(provider=provider, model="m1", sleep=clock.sleep)
    await run(agent, "x")
    ev = agent.session.events
    assert len(of_type(ev, "turn/start")) == 1
    assert len(of_type(ev, "step/start")) == 1
    retries = of_type(ev, "llm/retry")
    assert [r.data["retry"] for r in retries] == [1, 2]
    assert retries[0].data["delayMs"] == 1500
    assert clock.slept[0] == 1.5
    assert 0.45 <= clock.slept[1] <= 1.1  # 2nd retry: 1000 ms ± 10 %
    assert len({cast(str, r.data["retryId"]) for r in retries}) == 1
    assert len(of_type(ev, "llm/retry-started")) == 2
    assert turn_ends(ev) == [{"kind": "completed"}]
    assert len(provider.requests) == 3


async def test_non_retryable_and_exhausted_retries() -> None:
    clock = FakeClock()
    provider = ScriptedProvider([error_response("SERVER", "down", status=500)] * 3)
    agent = Agent(
        provider=provider, model="m1", sleep=clock.sleep, retry_policy=RetryPolicy(max_retries=2)
    )
    await run(agent, "x")
    assert len(of_type(agent.session.events, "llm/retry")) == 2
    assert turn_ends(agent.session.events)[-1]["error"]["code"] == "SERVER"  # type: ignore[index]


async def test_followups_are_fifo_turns() -> None:
    provider = ScriptedProvider([text_response("a"), text_response("b")])
    agent = Agent(provider=provider, model="m1")
    await run(agent, "first", "second")
    assert [e.data["turn"] for e in of_type(agent.session.events, "turn/start")] == [1, 2]
    users = [m.text() for m in agent.session.derive_messages() if m.role == "user"]
    assert users == ["first", "second"]


async def test_steer_enters_at_next_step_boundary() -> None:
    agent: Agent

    @tool(read_only=True)
    def slow() -> str:
        """Steers the agent while running."""
        agent.steer("also mention cats")
        return "done"

    provider = ScriptedProvider([tool_call_response("slow", {}), text_response("cats!")])
    agent = Agent(provider=provider, model="m1", tools=[slow])
    await run(agent, "go")
    ev = agent.session.events
    ts = types(ev)
    # steering enters right after the second step/start, not between tool results
    second_step = [i for i, t in enumerate(ts) if t == "step/start"][1]
    assert ts[second_step + 1] == "user/message"
    assert provider.requests[1].messages[-1].text() == "also mention cats"


async def test_inject_waits_for_wake_and_cancel_idle_clears_inbox() -> None:
    provider = ScriptedProvider([text_response("ok")])
    agent = Agent(provider=provider, model="m1")
    agent.inject("context A")
    await agent.when_idle()
    assert provider.requests == []
    assert agent.status == "idle"
    agent.cancel()
    assert agent.inbox.next_step == ()
    cancel_splice = of_type(agent.session.events, "agent/inbox/spliced")[-1]
    assert cancel_splice.data.get("outcome") == "canceled"
    agent.inject("context B")
    await run(agent, "question")
    texts = [m.text() for m in provider.requests[0].messages]
    assert texts == ["context B", "question"]  # queued first, so it enters first


async def test_context_injected_before_a_followup_enters_before_its_prompt() -> None:
    provider = ScriptedProvider([text_response("ok")])
    agent = Agent(provider=provider, model="m1")
    agent.inject("context before")
    agent.followup("the question")
    agent.inject("context after")
    await agent.when_idle()
    logged = [
        cast(Any, m.data)["content"][0]["text"]
        for m in of_type(agent.session.events, "user/message")
    ]
    assert logged == ["context before", "the question", "context after"]
    sent = [m.text() for m in provider.requests[0].messages]
    assert sent == logged


def _message(text: str) -> Message:
    return Message(
        id=new_message_id(), role="user", content=(TextBlock(text=text),), source=UserSource()
    )


def test_inbox_claims_in_queue_order_after_a_replay_and_a_replace() -> None:
    session = Session(header=SessionHeader(id=new_session_id(), created_at=0))
    inbox = Inbox(session)
    before = _message("context before")
    inbox.append("next-step", before)
    inbox.append("next-turn", _message("first prompt"))
    inbox.append("next-turn", _message("second prompt"))
    inbox.append("next-step", _message("context after"))
    revised = _message("context before, revised")
    assert inbox.replace(before.id, revised)
    restarted = Inbox(session)
    restarted.replay(session.events)
    for box in (inbox, restarted):
        assert [m.text() for m in box.claim("next-turn")] == [
            "context before, revised",
            "first prompt",
            "context after",
        ]
        assert [m.text() for m in box.claim("next-turn")] == ["second prompt"]


async def test_pre_step_reject_blocks_turn() -> None:
    provider = ScriptedProvider([])
    agent = Agent(provider=provider, model="m1")

    async def reject(_p: PreStep, _next: Next[PreStepDecision]) -> PreStepDecision:
        return Reject(reason="not now")

    agent.hooks.pre_step.on(reject)
    await run(agent, "x")
    assert turn_ends(agent.session.events)[0]["kind"] == "blocked"
    assert of_type(agent.session.events, "user/message") == []


async def test_pre_step_can_rewrite_messages() -> None:
    provider = ScriptedProvider([text_response("ok")])
    agent = Agent(provider=provider, model="m1")

    async def add_note(p: PreStep, next: Next[PreStepDecision]) -> PreStepDecision:
        d = await next()
        assert isinstance(d, Enter)
        return Enter(messages=(*d.messages,))

    agent.hooks.pre_step.on(add_note)
    await run(agent, "x")
    assert turn_ends(agent.session.events) == [{"kind": "completed"}]


async def test_turn_stopping_listener_can_keep_going() -> None:
    provider = ScriptedProvider([text_response("first"), text_response("second")])
    agent = Agent(provider=provider, model="m1")
    nudged: list[int] = []

    async def keep_going(p: TurnStopping) -> None:
        if not nudged:
            nudged.append(p.turn)
            agent.steer("keep going")

    agent.hooks.turn_stopping.on(keep_going)
    await run(agent, "x")
    assert len(of_type(agent.session.events, "step/start")) == 2
    assert len(of_type(agent.session.events, "turn/start")) == 1


async def test_concludes_turn_and_additional_contexts() -> None:
    @tool(read_only=True)
    def finish(ctx: ToolContext) -> str:
        """Conclude with a note."""
        ctx.defer_context(
            Message(
                id=new_message_id(),
                role="user",
                content=(TextBlock(text="note"),),
                source=UserSource(),
            )
        )
        ctx.conclude_turn()
        return "bye"

    provider = ScriptedProvider([tool_call_response("finish", {}), text_response("after note")])
    agent = Agent(provider=provider, model="m1", tools=[finish])
    await run(agent, "x")
    # concludes_turn: the model is not asked again for the tool result alone, but the deferred
    # context still runs in a next step.
    ts = types(agent.session.events)
    assert ts.count("step/start") == 2
    assert provider.requests[1].messages[-1].text() == "note"


async def test_runtime_context_snapshot_only_when_changed() -> None:
    from dsh_kernel.agent.system_prompt import PromptContext

    provider = ScriptedProvider([text_response("a"), text_response("b"), text_response("c")])
    agent = Agent(provider=provider, model="m1")
    value = {"policy": "ask"}
    agent.runtime_context.add(lambda: PromptContext(name="approval", order=0, text=value["policy"]))
    await run(agent, "1", "2")
    value["policy"] = "auto"
    await run(agent, "3")
    snapshots = [
        e
        for e in of_type(agent.session.events, "user/message")
        if e.data["source"]["kind"] == "plugin"  # type: ignore[index]
    ]
    assert len(snapshots) == 2
    # the system prompt stayed byte-stable
    assert len({r.system for r in provider.requests}) == 1


class CountingHistory(Sequence[Message]):
    """A history that counts the messages read from it."""

    def __init__(self, messages: Iterable[Message]) -> None:
        self.messages = list(messages)
        self.reads = 0

    def __len__(self) -> int:
        return len(self.messages)

    def __getitem__(self, i: Any) -> Any:
        self.reads += 1
        return self.messages[i]


def _msg(text: str, *, snapshot: list[JsonValue] | None = None) -> Message:
    from dsh_kernel.agent.system_prompt import RUNTIME_CONTEXT_PLUGIN
    from dsh_kernel.llm.types import PluginSource

    source = (
        PluginSource(plugin=RUNTIME_CONTEXT_PLUGIN, form={"kind": "snapshot", "sections": snapshot})
        if snapshot is not None
        else UserSource()
    )
    return Message(id=new_message_id(), role="user", content=(TextBlock(text=text),), source=source)


def test_the_newest_snapshot_is_found_without_walking_the_history_again() -> None:
    # Issue 16 item 5: a step of a long session reads only what came after the last step's read.
    from dsh_kernel.agent.system_prompt import PromptContext, RuntimeContext

    ctx = RuntimeContext()
    value = {"text": "x = 1"}
    ctx.add(lambda: PromptContext(name="variables", order=0, text=value["text"]))
    sections: list[JsonValue] = [{"name": "variables", "text": "x = 1"}]
    snap = _msg("<runtime-context/>", snapshot=sections)
    history = CountingHistory([_msg("a"), snap, *(_msg(f"m{i}") for i in range(500))])
    assert ctx.project(history) is None  # unchanged since the snapshot 500 messages back
    history.messages.extend(_msg(f"n{i}") for i in range(3))
    history.reads = 0
    assert ctx.project(history) is None
    assert history.reads <= 10  # the three new messages and the two checks, not 505

    # A compaction that replaced the snapshot in place (one node for one): it is read again, and
    # the snapshot re-sent, since the model no longer has it.
    history.messages[1] = _msg("<compacted-summary>…</compacted-summary>")
    again = ctx.project(history)
    assert again is not None and "x = 1" in again.text()


async def test_unknown_template_variable_is_a_turn_error() -> None:
    from dsh_kernel.agent.system_prompt import PromptSection

    provider = ScriptedProvider([])
    agent = Agent(provider=provider, model="m1")
    agent.system_prompt.add(PromptSection(name="bad", order=5, text="Hello {{nobody}}"))
    await run(agent, "x")
    end = turn_ends(agent.session.events)[0]
    assert end["kind"] == "error"
    assert "nobody" in end["error"]["message"]  # type: ignore[index]


async def test_resume_continues_turn_numbers_and_history() -> None:
    provider = ScriptedProvider([text_response("one")])
    agent = Agent(provider=provider, model="m1")
    await run(agent, "first")
    seed = list(agent.session.events)
    session = Session(header=SessionHeader(id=agent.session.id, created_at=0), seed=seed)
    provider2 = ScriptedProvider([text_response("two")])
    agent2 = Agent(provider=provider2, model="m1", session=session)
    await run(agent2, "second")
    ev = agent2.session.events
    assert [e.data["turn"] for e in of_type(ev, "turn/start")] == [1, 2]
    assert of_type(ev, "session/end-seed")
    assert [h.data["reason"] for h in of_type(ev, "request/header")] == ["initial", "resume"]
    assert [m.text() for m in provider2.requests[0].messages] == ["first", "one", "second"]


async def test_inbox_replays_queued_prompts_after_restart() -> None:
    provider = ScriptedProvider([])
    agent = Agent(provider=provider, model="m1")
    agent.inject("queued context")  # durable, not yet claimed
    session = Session(header=agent.session.header, seed=list(agent.session.events))
    agent2 = Agent(provider=ScriptedProvider([text_response("ok")]), model="m1", session=session)
    assert [m.text() for m in agent2.inbox.next_step] == ["queued context"]


async def test_usage_logged_on_message() -> None:
    usage = TokenUsage(input_tokens=10, output_tokens=5, cache_read_tokens=90, reasoning_tokens=2)
    agent = Agent(provider=ScriptedProvider([text_response("hi", usage=usage)]), model="m1")
    await run(agent, "x")
    msg = of_type(agent.session.events, "assistant/message")[0]
    assert msg.data["usage"] == {
        "inputTokens": 10,
        "outputTokens": 5,
        "cacheReadTokens": 90,
        "reasoningTokens": 2,
    }


async def test_followup_before_loop_runs_is_started_by_when_idle() -> None:
    agent = Agent(provider=ScriptedProvider([text_response("hi")]), model="m1")

    def outside_loop() -> None:
        agent.followup("hello")

    await asyncio.get_running_loop().run_in_executor(None, outside_loop)
    await agent.when_idle()
    assert turn_ends(agent.session.events) == [{"kind": "completed"}]


async def test_max_steps_per_turn_stops_a_tool_loop() -> None:
    provider = ScriptedProvider([tool_call_response("add", {"a": 1, "b": 1}) for _ in range(3)])
    agent = Agent(provider=provider, model="m1", tools=[add], max_steps_per_turn=3)
    await run(agent, "loop forever")
    ev = agent.session.events
    assert len(of_type(ev, "step/start")) == 3
    assert turn_ends(ev) == [{"kind": "max-steps", "limit": 3}]
    assert len(of_type(ev, "tool/result")) == 3


def test_a_failed_turn_keeps_the_failure_as_the_codec_writes_it() -> None:
    from dsh_kernel.abort import AbortCause
    from dsh_kernel.agent.agent import aborted, failed, failed_llm
    from dsh_kernel.errors import UsageError
    from dsh_kernel.llm.codec import failure_to_json

    full = LlmFailure(
        message="slow down",
        code="RATE_LIMITED",
        status=429,
        provider_retry_after_ms=1500,
        request_id="req-1",
    )
    for failure in (full, LlmFailure(message="down", code="NETWORK")):
        assert failed_llm(failure) == {"kind": "error", "error": failure_to_json(failure)}
    assert failed(UsageError("bad input")) == {
        "kind": "error",
        "error": {"message": "bad input", "code": UsageError.code},
    }
    assert failed(ValueError("x")).get("error") == {"message": "ValueError: x", "code": "UNKNOWN"}
    assert aborted(None) == {"kind": "aborted", "reason": {"kind": "disposed"}}
    hook = AbortCause(kind="hook", reason="why")
    assert aborted(hook) == {"kind": "aborted", "reason": {"kind": "hook", "reason": "why"}}
