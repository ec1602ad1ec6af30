"""The repeated-call guard and an empty answer after a tool step, through the real loop.

Only the provider is scripted. A model that makes one call with one result twice in a row has the
third identical call refused (never run; the model is told, in that call's result, to answer with
what it has) and, if it asks once more, the turn ends completed with ``note: repeated-call``; a model
that ends its turn with nothing after a tool step ends the turn completed with ``note: no-reply``,
not as a failure, and is not retried.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from dsh_kernel import Agent, tool
from dsh_kernel.agent.repeats import REPEATED_CALL, RepeatGuard, call_key
from dsh_kernel.llm.types import (
    FinishChunk,
    FinishError,
    LlmFailure,
    StreamChunk,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    empty_body,
    model_stopped,
)
from dsh_kernel.session.check.invariants import assert_invariants
from dsh_kernel.testing import ScriptedProvider, text_response, tool_call_response
from dsh_kernel.tools.types import ToolResult
from dsh_kernel.transcript.model import NoticeItem, ToolItem
from dsh_kernel.transcript.turn import fold_turn, turn_events
from dsh_kernel.views.format import end_notice

from .helpers import agent_with, of_type, run, turn_ends

RUNS: list[str] = []


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key
    """
    RUNS.append(key)
    return f"value of {key}"


TICKS: list[int] = []


@tool(read_only=True)
def tick() -> int:
    """A counter: a different result every call."""
    TICKS.append(1)
    return len(TICKS)


def stopped() -> list[StreamChunk]:
    """What the adapters make of an answer that ends the turn at once with nothing."""
    return [FinishChunk(reason=FinishError(failure=model_stopped()))]


def lookup_call(n: int, args: str = '{"key": "k"}') -> list[StreamChunk]:
    return tool_call_response("lookup", args, call_id=f"c{n}")


def results(agent: Agent) -> list[dict[str, Any]]:
    return [cast("dict[str, Any]", e.data) for e in of_type(agent.session.events, "tool/result")]


def result_text(data: dict[str, Any]) -> str:
    block = data["message"]["content"][0]
    return "".join(b["text"] for b in block["content"] if b["type"] == "text")


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RUNS.clear()
    TICKS.clear()


async def test_the_third_identical_call_is_not_run_and_the_model_is_told() -> None:
    provider = ScriptedProvider(
        [
            lookup_call(1),
            lookup_call(2, '{ "key" : "k" }'),  # the same call: JSON compared, not text
            lookup_call(3),
            text_response("The value is 'value of k'."),
        ]
    )
    agent = agent_with(provider, tools=[lookup])
    await run(agent, "look k up")
    assert RUNS == ["k", "k"]  # the third call never ran
    rs = results(agent)
    assert [r.get("error", {}).get("code") for r in rs] == [None, None, REPEATED_CALL]
    told = result_text(rs[2])
    assert "not run" in told and "2 times in a row" in told and "use that result" in told
    # The model was asked again with that refusal as the call's result, and could answer.
    fourth = provider.requests[3].messages[-1]
    (block,) = fourth.content
    assert isinstance(block, ToolResultBlock) and block.tool_call_id == "c3" and block.is_error
    assert turn_ends(agent.session.events) == [{"kind": "completed"}]
    # The view's notice, from the logged result alone.
    model = fold_turn(turn_events(agent.session.events, 1))
    notices = [i for i in model.items if isinstance(i, NoticeItem)]
    assert len(notices) == 1 and "not run again" in notices[0].text
    cards = [i.card for i in model.items if isinstance(i, ToolItem)]
    assert [c.status for c in cards] == ["done", "done", "failed"]
    assert cards[2].error_code == REPEATED_CALL


async def test_asking_once_more_ends_the_turn_cleanly() -> None:
    provider = ScriptedProvider([lookup_call(1), lookup_call(2), lookup_call(3), lookup_call(4)])
    agent = agent_with(provider, tools=[lookup], max_steps_per_turn=100)
    await run(agent, "look k up")
    assert RUNS == ["k", "k"]
    assert len(provider.requests) == 4  # not 100: the fourth identical call ended the turn
    provider.assert_consumed()
    rs = results(agent)
    codes = [r.get("error", {}).get("code") for r in rs]
    assert codes == [None, None, REPEATED_CALL, REPEATED_CALL]
    assert "the turn ends here" in result_text(rs[3])
    assert turn_ends(agent.session.events) == [{"kind": "completed", "note": "repeated-call"}]
    assert_invariants(list(agent.session.events))  # every call has its result
    notice = end_notice(fold_turn(turn_events(agent.session.events, 1)))
    assert notice is not None and notice.level == "warning"
    assert notice.title.startswith("Stopped: the model kept repeating a tool call")


async def test_a_different_result_or_a_step_between_starts_the_count_again() -> None:
    provider = ScriptedProvider(
        [
            tool_call_response("tick", {}, call_id="t1"),
            tool_call_response("tick", {}, call_id="t2"),
            tool_call_response("tick", {}, call_id="t3"),  # a new result each time: runs
            lookup_call(1),
            lookup_call(2),
            tool_call_response("tick", {}, call_id="t4"),  # a step without lookup
            lookup_call(3),  # the run of lookup starts again: runs
            text_response("done"),
        ]
    )
    agent = agent_with(provider, tools=[lookup, tick])
    await run(agent, "go")
    assert len(TICKS) == 4 and RUNS == ["k", "k", "k"]
    assert all("error" not in r for r in results(agent))


async def test_the_count_is_per_turn() -> None:
    provider = ScriptedProvider(
        [
            lookup_call(1),
            lookup_call(2),
            text_response("first"),
            lookup_call(3),  # a new turn: the same call runs again
            text_response("second"),
        ]
    )
    agent = agent_with(provider, tools=[lookup])
    await run(agent, "one", "two")
    assert RUNS == ["k", "k", "k"]


async def test_limit_zero_switches_the_guard_off() -> None:
    provider = ScriptedProvider([lookup_call(n) for n in range(1, 6)] + [text_response("ok")])
    agent = agent_with(provider, tools=[lookup], repeat_limit=0)
    await run(agent, "go")
    assert RUNS == ["k"] * 5


async def test_a_limit_of_one_refuses_the_second() -> None:
    provider = ScriptedProvider([lookup_call(1), lookup_call(2), text_response("ok")])
    agent = agent_with(provider, tools=[lookup], repeat_limit=1)
    await run(agent, "go")
    assert RUNS == ["k"]
    assert "1 times in a row" in result_text(results(agent)[1])


def test_a_negative_limit_is_refused() -> None:
    with pytest.raises(Exception, match="repeat_limit"):
        agent_with(ScriptedProvider([]), repeat_limit=-1)


async def test_an_empty_answer_after_a_tool_step_completes_without_a_reply() -> None:
    provider = ScriptedProvider([lookup_call(1), stopped()])
    agent = agent_with(provider, tools=[lookup])
    await run(agent, "look k up")
    assert len(provider.requests) == 2  # no retry: the model chose to stop
    provider.assert_consumed()
    assert turn_ends(agent.session.events) == [{"kind": "completed", "note": "no-reply"}]
    assert agent.last_error is None
    assert result_text(results(agent)[0]) == "value of k"  # the tool result stands
    assert len(of_type(agent.session.events, "assistant/message")) == 1  # none for the empty one
    assert not of_type(agent.session.events, "llm/retry")
    model = fold_turn(turn_events(agent.session.events, 1))
    notice = end_notice(model)
    assert notice is not None and notice.level == "info"
    assert notice.title == "The model ended without a reply; the tool results above stand."
    # The next turn goes on from the history as it stands: the tool result, then the new prompt.
    provider.push(text_response("It is 'value of k'."))
    await run(agent, "so?")
    roles = [m.role for m in provider.requests[2].messages]
    assert roles[-3:] == ["assistant", "user", "user"]


async def test_an_empty_answer_to_the_prompt_itself_still_fails_after_one_retry() -> None:
    provider = ScriptedProvider([stopped(), stopped()])
    agent = agent_with(provider)
    await run(agent, "say nothing")
    (end,) = turn_ends(agent.session.events)
    assert end["kind"] == "error"
    assert end["error"]["code"] == "EMPTY_RESPONSE"  # type: ignore[index]
    assert end["error"]["detail"] == "model-stopped"  # type: ignore[index]
    hint = end_notice(fold_turn(turn_events(agent.session.events, 1)))
    assert hint is not None and hint.hint is not None
    assert "chose to end its turn" in hint.hint and "context" not in hint.hint


@pytest.mark.parametrize(
    "failure",
    [empty_body("the server sent an empty body"), LlmFailure(code="EMPTY_RESPONSE", message="x")],
)
async def test_an_empty_body_after_a_tool_step_is_still_a_failure(failure: LlmFailure) -> None:
    empty = [FinishChunk(reason=FinishError(failure=failure))]
    provider = ScriptedProvider([lookup_call(1), empty, empty])
    agent = agent_with(provider, tools=[lookup])
    await run(agent, "look k up")
    assert len(provider.requests) == 3  # retried once, then failed
    (end,) = turn_ends(agent.session.events)
    assert end["kind"] == "error" and end["error"]["code"] == "EMPTY_RESPONSE"  # type: ignore[index]


def test_call_keys_compare_arguments_as_json() -> None:
    assert call_key("f", '{"a": 1, "b": [1, 2]}') == call_key("f", '{"b":[1,2],"a":1}')
    assert call_key("f", "") == call_key("f", "{}")
    assert call_key("f", '{"a": 1}') != call_key("g", '{"a": 1}')
    assert call_key("f", '{"a": 1') == ("f", '{"a": 1')  # not JSON: the text


def test_the_guard_counts_consecutive_steps_with_the_same_result() -> None:
    guard = RepeatGuard(2)
    call = ToolCallBlock(id="c", name="f", arguments="{}")  # type: ignore[arg-type]
    same = ToolResult(is_error=False, content=(TextBlock(text="1"),))
    other = ToolResult(is_error=False, content=(TextBlock(text="2"),))
    for result in (same, other, other):  # a different result starts the run again
        plan = guard.plan([call])
        assert not plan.refusals
        guard.record([call], [result], plan)
    plan = guard.plan([call])
    assert list(plan.refusals) == [0] and not plan.ends_turn
    guard.record([call], [same], plan)
    again = guard.plan([call])
    assert list(again.refusals) == [0] and again.ends_turn
