"""The replay provider reproduces a recorded session and refuses one that diverges."""

from __future__ import annotations

import asyncio

import pytest

from dsh_kernel import tool
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.store.layout import Store
from dsh_kernel.store.replay import ReplayProvider, recorded_attempts
from dsh_kernel.testing import hang

from .conftest import RICH_PROMPTS, TOOLS, chat, make_agent, record_rich_session


def answers(events: object) -> list[JsonObject]:
    """Assistant messages without ids and route (what the model said, not who relayed it)."""
    out: list[JsonObject] = []
    for e in events:  # type: ignore[attr-defined]
        assert isinstance(e, SessionEvent)
        if e.type == "assistant/message":
            message = e.data["message"]
            assert isinstance(message, dict)
            msg = dict(message)
            msg.pop("id")
            msg.pop("source")
            out.append(
                {
                    "turn": e.data["turn"],
                    "step": e.data["step"],
                    "message": msg,
                    "usage": e.data.get("usage"),
                }
            )
    return out


def turn_end_reasons(events: object) -> list[JsonObject]:
    return [e.data["reason"] for e in events if e.type == "turn/end"]  # type: ignore[attr-defined,misc]


async def test_replay_reproduces_the_recording_including_retries(store: Store) -> None:
    original, writer = await record_rich_session(store)
    writer.close()
    replay = ReplayProvider.from_store(store, original.id)
    assert [(a.turn, a.step, a.attempt, a.finished) for a in replay.attempts] == [
        (1, 1, 1, True), (1, 2, 1, True), (1, 3, 1, True), (1, 4, 1, True),
        (1, 5, 1, True), (1, 5, 2, True), (2, 1, 1, True),
    ]  # fmt: skip
    agent, _, w2 = make_agent(store, [])
    agent.set_route(provider=replay)
    await chat(agent, *RICH_PROMPTS)
    replay.assert_consumed()
    assert answers(agent.session.events) == answers(original.session.events)
    assert turn_end_reasons(agent.session.events) == turn_end_reasons(original.session.events)
    retried = [e for e in agent.session.events if e.type == "llm/retry"]
    assert len(retried) == 1 and retried[0].data["failure"]["code"] == "RATE_LIMIT"  # type: ignore[index]
    w2.close()


async def test_a_different_prompt_diverges_with_a_clear_error(store: Store) -> None:
    original, writer = await record_rich_session(store)
    writer.close()
    replay = ReplayProvider.from_store(store, original.id)
    agent, _, w2 = make_agent(store, [])
    agent.set_route(provider=replay)
    await chat(agent, "What is 2+4? Use the tools.")
    [reason] = turn_end_reasons(agent.session.events)
    assert reason["kind"] == "error"
    error = reason["error"]
    assert isinstance(error, dict) and error["code"] == "REPLAY_DIVERGED"
    message = str(error["message"])
    assert "turn 1, step 1" in message and "2+3" in message and "2+4" in message
    assert replay.remaining == len(replay.attempts)
    with pytest.raises(AssertionError, match="not replayed"):
        replay.assert_consumed()
    w2.close()


@tool(read_only=True, name="add")
def add_wrong(a: int, b: int) -> int:
    """Add two integers (badly)."""
    return a + b + 1


async def test_a_tool_result_with_other_text_still_replays(store: Store) -> None:
    # Tool output depends on the machine (paths, counters, versions): only which call a result
    # answers and whether it failed are compared.
    original, writer = await record_rich_session(store)
    writer.close()
    agent, _, w2 = make_agent(store, [], tools=(add_wrong, *TOOLS[1:]))
    agent.set_route(provider=ReplayProvider.from_store(store, original.id))
    await chat(agent, RICH_PROMPTS[0])
    [reason] = turn_end_reasons(agent.session.events)
    assert reason == {"kind": "completed"}
    w2.close()


@tool(read_only=True, name="add")
def add_failing(a: int, b: int) -> int:
    """Add two integers (broken: raises)."""
    raise RuntimeError(f"cannot add {a} and {b}")


async def test_a_tool_that_now_fails_diverges_at_the_next_step(store: Store) -> None:
    original, writer = await record_rich_session(store)
    writer.close()
    agent, _, w2 = make_agent(store, [], tools=(add_failing, *TOOLS[1:]))
    agent.set_route(provider=ReplayProvider.from_store(store, original.id))
    await chat(agent, RICH_PROMPTS[0])
    [reason] = turn_end_reasons(agent.session.events)
    error = reason["error"]
    assert isinstance(error, dict) and error["code"] == "REPLAY_DIVERGED"
    assert "turn 1, step 2" in str(error["message"])
    w2.close()


async def test_asking_beyond_the_recording_is_exhausted(store: Store) -> None:
    original, writer = await record_rich_session(store)
    writer.close()
    replay = ReplayProvider.from_store(store, original.id)
    agent, _, w2 = make_agent(store, [])
    agent.set_route(provider=replay)
    await chat(agent, *RICH_PROMPTS, "and one more")
    replay.assert_consumed()
    reason = turn_end_reasons(agent.session.events)[-1]
    assert reason["kind"] == "error" and reason["error"]["code"] == "REPLAY_EXHAUSTED"  # type: ignore[index]
    w2.close()


async def test_an_unfinished_recorded_call_replays_as_incomplete(store: Store) -> None:
    agent, _, writer = make_agent(store, [hang()])
    agent.followup("wait for me")
    await asyncio.sleep(0.05)
    agent.cancel()
    await agent.when_idle()
    writer.close()
    [attempt] = recorded_attempts(list(agent.session.events))
    assert not attempt.finished
    replay = ReplayProvider(list(agent.session.events))
    again, _, w2 = make_agent(store, [])
    again.set_route(provider=replay)
    await chat(again, "wait for me")
    [reason] = turn_end_reasons(again.session.events)
    assert reason["error"]["code"] == "REPLAY_INCOMPLETE"  # type: ignore[index]
    w2.close()


@pytest.mark.parametrize(
    ("kind", "replayed"), [("rewind", [1, 2]), ("import", [1, 2]), ("fork", [2])]
)
async def test_a_rewind_or_an_import_replays_from_its_first_turn_a_fork_from_its_own(
    store: Store, kind: str, replayed: list[int]
) -> None:
    from dsh_kernel.store.journal import attach_journal
    from dsh_kernel.store.sessions import fork
    from dsh_kernel.testing import ScriptedProvider, text_response

    agent, _, writer = make_agent(store, [text_response("one"), text_response("two")])
    await chat(agent, "first", "second")
    writer.close()
    child = fork(agent.session.header, list(agent.session.events), 1, kind=kind)
    branch = type(agent)(
        provider=ScriptedProvider([text_response("two again")]), model="m1", session=child
    )
    w2 = attach_journal(branch, store)
    await chat(branch, "second again")
    w2.close()
    replay = ReplayProvider.from_store(store, child.id)
    assert sorted({a.turn for a in replay.attempts}) == replayed
