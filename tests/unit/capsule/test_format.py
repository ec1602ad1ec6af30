"""A turn's capsule (``capsule.format``): built from a real session, read back event for event,
refused when altered, malformed or too large — and compact."""

from __future__ import annotations

import base64
import copy
import json
import zlib
from typing import Any

import pytest

from dsh_kernel import Agent
from dsh_kernel.capsule.format import (
    CAPSULE_ALTERED,
    CAPSULE_INVALID,
    CapsuleError,
    capsule_of,
    read_capsule,
)
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.session.codec import event_to_json
from dsh_kernel.testing import ScriptedProvider, text_response, tool_call_response
from tests.unit.agent.helpers import agent_with


def unpack(capsule: JsonObject) -> list[Any]:
    return json.loads(zlib.decompress(base64.b64decode(str(capsule["events"]))))


def repack(capsule: JsonObject, lines: list[Any], *, rehash: bool) -> JsonObject:
    from dsh_kernel.capsule import format as f

    out = dict(capsule)
    out["events"] = base64.b64encode(zlib.compress(json.dumps(lines).encode())).decode()
    if rehash:
        keys = ("version", "session", "turn", "header", "first", "events", "images")
        out["sha256"] = f._digest([out[k] for k in keys])
    return out


async def session_of_turns(n: int, *, chunks: int = 40) -> Agent:
    words = " ".join(f"word{i}" for i in range(chunks))
    provider = ScriptedProvider([text_response(words, pieces=chunks) for _ in range(n)])
    agent = agent_with(provider)
    for i in range(1, n + 1):
        agent.followup(f"question {i}")
        await agent.when_idle()
    return agent


async def test_the_capsules_of_every_turn_are_the_log_seq_for_seq() -> None:
    agent = await session_of_turns(3)
    events = agent.session.events
    seen: list[JsonObject] = []
    for turn in (1, 2, 3):
        capsule = capsule_of(agent.session, turn)
        assert capsule is not None
        read = read_capsule(json.loads(json.dumps(capsule)), f"cell {turn}")
        assert (read.session, read.turn) == (agent.session.id, turn)
        assert read.first == len(seen)
        seen.extend(event_to_json(e) for e in read.events)
    assert seen == [event_to_json(e) for e in events]


async def test_streamed_deltas_travel_as_one_run() -> None:
    agent = await session_of_turns(1, chunks=400)
    capsule = capsule_of(agent.session, 1)
    assert capsule is not None
    runs = [e for e in unpack(capsule) if "run" in e]
    assert len(runs) == 1
    text = json.dumps(capsule)
    journal = "\n".join(json.dumps(event_to_json(e)) for e in agent.session.events)
    assert len(text) < len(journal) / 5


async def test_an_altered_capsule_is_refused_naming_the_cell() -> None:
    agent = await session_of_turns(1)
    capsule = capsule_of(agent.session, 1)
    assert capsule is not None
    lines = unpack(capsule)
    run = next(e for e in lines if "run" in e)
    run["run"]["text"] = run["run"]["text"].replace("word1", "WORD1")
    changed = repack(capsule, lines, rehash=False)
    with pytest.raises(CapsuleError) as info:
        read_capsule(changed, "cell 2 (id abc)")
    assert info.value.code == CAPSULE_ALTERED
    assert info.value.message.startswith("cell 2 (id abc): its session capsule was altered")
    assert "\n" not in info.value.message


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda c: c.update(version=99), "has version 99"),
        (lambda c: c.update(session=""), "names no session"),
        (lambda c: c.update(events=["no"]), "has no events"),
        (lambda c: c.pop("turn"), "has no valid 'turn'"),
    ],
)
async def test_a_malformed_capsule_is_refused_in_one_line(change: object, why: str) -> None:
    agent = await session_of_turns(1)
    capsule = capsule_of(agent.session, 1)
    assert capsule is not None
    bad = copy.deepcopy(capsule)
    change(bad)  # type: ignore[operator]
    with pytest.raises(CapsuleError) as info:
        read_capsule(bad, "cell 1")
    assert info.value.code == CAPSULE_INVALID
    assert why in info.value.message and "\n" not in info.value.message


async def test_a_rehashed_capsule_with_a_bad_event_is_still_refused() -> None:
    agent = await session_of_turns(1)
    capsule = capsule_of(agent.session, 1)
    assert capsule is not None
    lines = unpack(capsule)
    lines[0]["seq"] = 7
    bad = repack(capsule, lines, rehash=True)
    with pytest.raises(CapsuleError) as info:
        read_capsule(bad, "cell 1")
    assert info.value.code == CAPSULE_INVALID and "skips from seq" in info.value.message


async def test_a_capsule_that_unpacks_too_large_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_kernel.capsule import format as f

    agent = await session_of_turns(1)
    capsule = capsule_of(agent.session, 1)
    assert capsule is not None
    bomb = repack(capsule, [{"pad": "x" * 100_000}], rehash=True)
    assert len(str(bomb["events"])) < 2_000
    monkeypatch.setattr(f, "MAX_EVENTS_CHARS", 50_000)
    with pytest.raises(CapsuleError) as info:
        read_capsule(bomb, "cell 1")
    assert info.value.code == CAPSULE_INVALID and "unpacks to more than" in info.value.message
    garbage = repack(capsule, [], rehash=True)
    garbage["events"] = "not base64!"
    keys = ("version", "session", "turn", "header", "first", "events", "images")
    garbage["sha256"] = f._digest([garbage[k] for k in keys])
    with pytest.raises(CapsuleError) as info:
        read_capsule(garbage, "cell 1")
    assert "cannot be unpacked" in info.value.message


def test_something_that_is_not_a_capsule_is_refused() -> None:
    for value in (None, [], "x", 3):
        with pytest.raises(CapsuleError):
            read_capsule(value, "cell 1")


async def test_a_turn_with_a_tool_call_round_trips() -> None:
    from dsh_kernel import tool

    @tool(read_only=True)
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    provider = ScriptedProvider([tool_call_response("add", {"a": 2, "b": 3}), text_response("5")])
    agent = Agent(provider=provider, model="m1", tools=[add])
    agent.followup("2+3?")
    await agent.when_idle()
    capsule = capsule_of(agent.session, 1)
    assert capsule is not None
    read = read_capsule(json.loads(json.dumps(capsule)), "cell 1")
    assert [event_to_json(e) for e in read.events] == [
        event_to_json(e) for e in agent.session.events
    ]
