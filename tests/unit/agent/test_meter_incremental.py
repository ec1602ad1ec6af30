"""The meter keeps what it read of a session between calls (issue 16): its reading must stay exactly
what reading the whole log afresh gives, through appends, surface replacements, header changes,
interrupted answers, and seeded (forked, resumed) sessions.

The oracle is the meter's rule written as a plain walk over the whole log (``from_scratch``); each
test measures the same session at many points, so a reading that went stale (an anchor not moved
on, an estimate not redone after a replacement) differs from the oracle at the next one."""

from __future__ import annotations

import json
import random
from dataclasses import replace

from dsh_kernel import Agent, tool
from dsh_kernel.agent.compaction.run import CompactionSettings
from dsh_kernel.agent.request.meter import (
    TokenMeasurement,
    header_tokens,
    measure,
)
from dsh_kernel.llm.estimate import message_tokens
from dsh_kernel.llm.types import LlmCallConfig, ModelInfo
from dsh_kernel.session.derive import EpochHeader, header_equals, project_event
from dsh_kernel.session.events import ReplaceOp, SessionEvent
from dsh_kernel.session.log import Session
from dsh_kernel.testing import FakeClock, ScriptedProvider, text_response, tool_call_response
from tests.unit.agent.helpers import of_type, turn_ends
from tests.unit.session.scripts import (
    HEADER,
    LoopScript,
    assistant_message,
    chunk,
    new_session,
    tool_result_data,
    user_message,
)


def _uncapped(h: EpochHeader | None) -> EpochHeader | None:
    if h is None:
        return None
    return replace(
        h,
        config=replace(h.config, max_tokens=None),
        adapter_defaults=h.adapter_defaults - {"maxTokens"},
    )


def from_scratch(
    session: Session, header: EpochHeader | None = None, window: int | None = None
) -> TokenMeasurement:
    """The meter's rule (module docstring of ``agent.request.meter``), reading every event of the log."""
    events = list(session.events)

    def header_before(seq: int) -> EpochHeader | None:
        for ev in reversed(events[:seq]):
            if ev.type == "request/header":
                return EpochHeader.from_json(ev.data["header"])
        return None

    if header is None:
        header = header_before(len(events))
    anchor: tuple[int, int, EpochHeader | None] | None = None
    for ev in reversed(events):
        usage = ev.data.get("usage")
        if ev.type == "assistant/message" and not ev.data.get("interrupted") and usage is not None:
            assert isinstance(usage, dict)
            tokens = sum(
                v
                for k in ("inputTokens", "cacheReadTokens", "cacheWriteTokens", "outputTokens")
                if isinstance(v := usage.get(k), int)
            )
            anchor = (ev.seq, tokens, header_before(ev.seq))
            break
    surface = list(session.surface)
    raw = header_tokens(header) + sum(
        message_tokens(m) for s in surface if (m := project_event(events[s])) is not None
    )
    if (
        anchor is not None
        and header_equals(_uncapped(anchor[2]), _uncapped(header))
        and session.prefix_kept(anchor[0])
    ):
        after = surface[surface.index(anchor[0]) + 1 :]
        delta = sum(message_tokens(m) for s in after if (m := project_event(events[s])) is not None)
        return TokenMeasurement(
            baseline="usage",
            baseline_tokens=anchor[1],
            surface_delta_tokens=delta,
            context_window=window,
            raw_tokens=raw,
        )
    delta = sum(message_tokens(m) for s in surface if (m := project_event(events[s])) is not None)
    return TokenMeasurement(
        baseline="estimated",
        baseline_tokens=header_tokens(header),
        surface_delta_tokens=delta,
        context_window=window,
        raw_tokens=raw,
    )


def _header(system: str, max_tokens: int | None = None) -> dict[str, object]:
    config = LlmCallConfig(provider="fake", model="fake-1", max_tokens=max_tokens)
    return {"header": EpochHeader(config=config, system=system).to_json(), "reason": "change"}


def _answer(s: Session, turn: int, step: int, text: str, **extra: object) -> int:
    seqs = [s.append("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk(text)}).seq]
    data: dict[str, object] = {"turn": turn, "step": step, "message": assistant_message(text)}
    data.update(extra)
    return s.append("assistant/message", data, surface_op="append", source_event_seqs=seqs).seq


def _check(s: Session) -> None:
    assert measure(s, context_window=9000) == from_scratch(s, window=9000)
    fresh = Session(header=s.header, seed=list(s.events))  # nothing read of it yet
    assert measure(fresh, context_window=9000) == from_scratch(s, window=9000)


def test_the_reading_follows_answers_headers_and_replacements() -> None:
    s = new_session()
    _check(s)  # empty log: an estimate of nothing
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    s.append("request/header", _header("be brief"))
    first = s.append("user/message", user_message("a" * 120), surface_op="append").seq
    _check(s)  # no answer yet: estimated
    _answer(s, 1, 1, "x" * 40, usage={"inputTokens": 300, "outputTokens": 20})
    _check(s)  # anchored
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    s.append("turn/start", {"turn": 2})
    s.append("step/start", {"turn": 2, "step": 1})
    s.append("user/message", user_message("b" * 80), surface_op="append")
    _check(s)  # the anchor, plus the new message estimated
    _answer(s, 2, 1, "cut", interrupted=True, usage={"inputTokens": 999, "outputTokens": 1})
    _check(s)  # an interrupted answer never anchors: still the first
    _answer(s, 2, 1, "y" * 30)
    _check(s)  # no usage: still the first, with both later answers estimated
    # only the output cap changed: the same input, the anchor holds
    s.append("request/header", _header("be brief", max_tokens=512))
    _answer(s, 2, 1, "z", usage={"inputTokens": 500, "cacheReadTokens": 40, "outputTokens": 9})
    _check(s)
    # a different system prompt: the anchor's header no longer matches the one in force
    s.append("request/header", _header("be very brief"))
    _check(s)
    second = _answer(s, 2, 1, "w" * 8, usage={"inputTokens": 700, "outputTokens": 3})
    _check(s)  # anchored again, under the new header
    # a replacement before the anchor voids it (prefix_kept), and the estimate is redone
    note = {**user_message("summary of earlier turns"), "source": {"kind": "user"}}
    shadowed = [x for x in s.surface if x <= second]
    s.append(
        "user/message",
        note,
        surface_op=ReplaceOp(start=first, end=second),
        source_event_seqs=shadowed,
    )
    _check(s)
    s.append("user/message", user_message("c" * 44), surface_op="append")
    _check(s)  # the estimate goes on from the replaced surface
    s.append("step/end", {"turn": 2, "step": 1})
    s.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    _answer_turn_with_tool(s, 3)
    _check(s)


def _answer_turn_with_tool(s: Session, turn: int) -> None:
    s.append("turn/start", {"turn": turn})
    s.append("step/start", {"turn": turn, "step": 1})
    s.append("user/message", user_message("use the tool"), surface_op="append")
    call = f"call-{turn}"
    data = {
        "turn": turn,
        "step": 1,
        "message": assistant_message("", (call,)),
        "usage": {"inputTokens": 900, "outputTokens": 11},
    }
    seqs = [s.append("assistant/chunk", {"turn": turn, "step": 1, "chunk": chunk("t")}).seq]
    s.append("assistant/message", data, surface_op="append", source_event_seqs=seqs)
    result = s.append(
        "tool/result", tool_result_data(turn, 1, call, "r" * 400), surface_op="append"
    ).seq
    _check(s)
    # a pruned tool result (a replacement after the anchor): the anchor holds, the delta shrinks
    pruned = tool_result_data(turn, 1, call, "r")
    old = s.events[result].data["message"]
    assert isinstance(old, dict) and isinstance(pruned["message"], dict)
    pruned["message"]["id"] = old["id"]
    s.append(
        "tool/result",
        pruned,
        surface_op=ReplaceOp(start=result, end=result),
        source_event_seqs=[result],
    )
    _check(s)
    s.append("step/end", {"turn": turn, "step": 1})
    s.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def test_a_given_header_is_compared_not_the_logged_one() -> None:
    s = new_session()
    s.append("request/header", _header("be brief"))
    s.append("user/message", user_message("hello"), surface_op="append")
    _answer(s, 1, 1, "hi", usage={"inputTokens": 50, "outputTokens": 2})
    same = EpochHeader.from_json(json.loads(json.dumps(_header("be brief")["header"])))
    other = EpochHeader(config=LlmCallConfig(provider="fake", model="fake-1"), system="new")
    for h in (same, other, same):
        assert measure(s, header=h) == from_scratch(s, header=h)


def test_logs_the_loop_writes_measure_as_read_afresh_at_every_turn() -> None:
    for seed in range(12):
        rng = random.Random(seed)
        script = LoopScript(rng.randrange, Session(header=HEADER, clock=FakeClock()))
        for _ in range(6):
            script.run(1)
            _check(script.session)
            assert measure(script.session) == from_scratch(script.session)


def test_a_fork_reads_its_own_log() -> None:
    rng = random.Random(7)
    parent = LoopScript(rng.randrange).run(4)
    measure(parent)  # the parent's reading must not leak into a session seeded from it
    events: list[SessionEvent] = list(parent.events)
    for cut in (len(events) // 3, len(events) // 2, len(events)):
        child = new_session(events[:cut])
        assert measure(child) == from_scratch(child)
        child.append("user/message", user_message("after the fork"), surface_op="append")
        assert measure(child) == from_scratch(child)


async def test_every_turn_over_the_mark_warns_once() -> None:
    @tool(read_only=True)
    def more() -> str:
        """Adds a little."""
        return "z" * 40

    provider = ScriptedProvider(
        [
            tool_call_response("more", {}, call_id="c1"),
            text_response("a"),
            tool_call_response("more", {}, call_id="c2"),
            text_response("b"),
        ],
        info=ModelInfo(context_window=1024),  # assumed: warned against, never refused
    )
    agent = Agent(
        provider=provider,
        model="m1",
        tools=[more],
        check_invariants=True,
        compaction=CompactionSettings(auto=False),  # on, it would compact the first turn away
    )
    for text in ("w" * 4000, "x"):
        agent.followup(text)
        await agent.when_idle()
    warnings = of_type(agent.session.events, "context/warning")
    assert [w.data["turn"] for w in warnings] == [1, 2]  # two requests a turn, one warning each
    assert turn_ends(agent.session.events) == [{"kind": "completed"}] * 2
