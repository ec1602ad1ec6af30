"""Compaction in the agent loop (issue 16): on pressure, on an overflow, by hand; the fallback
reduction; pruning a huge tool result; tool pairs kept together; the lock and a crash mid-way. The
provider is scripted (a function of the request); the log, the meter and the loop are real, with dev
invariants on, so every request is also rebuilt from the log alone."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import pytest

from dsh_kernel import tool
from dsh_kernel.agent.compaction.range import reduce_range
from dsh_kernel.agent.compaction.run import (
    PLUGIN,
    CompactionSettings,
    select_range,
)
from dsh_kernel.agent.request.meter import header_tokens, measure
from dsh_kernel.ids import CallId, MessageId
from dsh_kernel.llm.codec import message_to_json
from dsh_kernel.llm.estimate import message_tokens
from dsh_kernel.llm.types import (
    FinishChunk,
    FinishError,
    GenerateRequest,
    ImageBlock,
    LlmFailure,
    Message,
    StreamChunk,
    TextBlock,
    TokenUsage,
    ToolResultBlock,
    ToolSource,
)
from dsh_kernel.session.derive import EpochHeader
from dsh_kernel.session.events import ReplaceOp, SessionHeader
from dsh_kernel.session.log import Session
from dsh_kernel.store.replay import ReplayProvider
from dsh_kernel.testing import FunctionProvider, text_response, tool_call_response
from dsh_kernel.transcript.model import NoticeItem
from dsh_kernel.transcript.turn import fold_turn, turn_events
from tests.unit.agent.helpers import agent_with, of_type, run, turn_ends

ANSWER = "The answer goes on at length about the data. " * 90  # ~4k chars: ~1k tokens


SUMMARY = (  # what a model that summarises writes of these sessions: it passes the substance check
    "## Goal\n- Answer the user's questions about the data, one per turn.\n## Notebook state\n"
    "(none)\n## Done so far\n- Each question asked about the data; each answer went on at length "
    "about the data, repeating the same plain description of it many times over.\n"
    "## Errors and how they were resolved\n(none)\n## Open questions and next step\n- Wait for "
    "the next question about the data and answer it in the same way, at the same length."
)


def summarising(answer: str = ANSWER, summary: str = SUMMARY):
    """A model that answers at length and, asked to compact, writes ``summary``."""

    def fn(request: GenerateRequest) -> Iterable[StreamChunk]:
        if request.purpose == "compaction":
            return text_response(summary)
        return text_response(answer)

    return fn


def request_tokens(request: GenerateRequest) -> int:
    header = EpochHeader(
        config=request.config, system=request.system, tools=request.tools
    ).canonical()
    return header_tokens(header) + sum(message_tokens(m) for m in request.messages)


async def test_six_long_answers_in_a_small_window_all_succeed_by_compacting() -> None:
    provider = FunctionProvider(summarising())
    agent = agent_with(provider, window=4096)
    await run(agent, *(f"Question {i}: tell me about the data." for i in range(1, 7)))
    ev = agent.session.events
    assert [r["kind"] for r in turn_ends(ev)] == ["completed"] * 6
    starts = of_type(ev, "compaction/start")
    assert starts and all(s.data["trigger"] == "pressure" for s in starts)
    assert len(of_type(ev, "compaction/end")) == len(starts)
    assert all("error" not in e.data for e in of_type(ev, "compaction/end"))
    chat = [r for r in provider.requests if r.purpose is None]
    summaries = [r for r in provider.requests if r.purpose == "compaction"]
    assert len(summaries) == len(starts)
    assert all(request_tokens(r) + 256 <= 4096 for r in chat)  # every request fits the window
    # Every original prompt is still in the log; the last request carries a summary instead of
    # the first questions.
    prompts = " ".join(str(e.data["content"]) for e in of_type(ev, "user/message"))
    assert all(f"Question {i}:" in prompts for i in range(1, 7))
    last = [m.text() for m in chat[-1].messages]
    assert any("<compacted-summary>" in t for t in last)
    assert not any("Question 1:" in t for t in last)
    (summary_event, *_) = of_type(ev, "compaction/summary")
    assert summary_event.data["method"] == "model" and summary_event.data["turns"][0] == 1  # type: ignore[index]
    assert summary_event.data["provider"] == provider.id


async def test_the_summary_call_replays_the_system_prompt_and_tools_and_ends_with_the_instruction() -> (
    None
):
    @tool(read_only=True)
    def peek() -> str:
        """Look."""
        return "x"

    provider = FunctionProvider(summarising())
    agent = agent_with(provider, window=4096, tools=[peek], system="Be brief.")
    await run(agent, *(f"Question {i}." for i in range(1, 6)))
    chat = next(r for r in provider.requests if r.purpose is None)
    summary = next(r for r in provider.requests if r.purpose == "compaction")
    assert summary.system == chat.system and summary.tools == chat.tools
    assert "checkpoint" in summary.messages[-1].text()
    assert summary.messages[0].text() == "Question 1."


async def test_a_failed_summary_call_falls_back_to_a_deterministic_reduction() -> None:
    def fn(request: GenerateRequest) -> Iterable[StreamChunk]:
        if request.purpose == "compaction":
            failure = LlmFailure(code="SERVER", message="overloaded")
            return [FinishChunk(reason=FinishError(failure=failure))]
        return text_response(ANSWER)

    agent = agent_with(FunctionProvider(fn), window=4096)
    await run(agent, *(f"Question {i}." for i in range(1, 6)))
    ev = agent.session.events
    assert [r["kind"] for r in turn_ends(ev)] == ["completed"] * 5
    summary = of_type(ev, "compaction/summary")[0].data
    assert summary["method"] == "reduction"
    assert summary["failure"]["code"] == "SERVER"  # type: ignore[index]
    assert "Question 1." in str(summary["summary"]) and "deterministic" in str(summary["summary"])


HEADINGS = (  # what Qwen2.5-Coder-0.5B answered a live server's summary call with, twice
    "## Goal\n## Notebook state\n## Done so far\n## Errors and how they were resolved\n"
    "## Open questions and next step"
)


async def test_a_template_echo_is_set_aside_for_the_reduction_which_keeps_turn_1s_fact() -> None:
    provider = FunctionProvider(summarising(summary=HEADINGS))
    agent = agent_with(provider, window=4096)
    await run(agent, "My project's code name is Zephyrine. Remember it.")
    await run(agent, *(f"Question {i}: tell me about the data." for i in range(2, 7)))
    ev = agent.session.events
    assert [r["kind"] for r in turn_ends(ev)] == ["completed"] * 6
    summaries = of_type(ev, "compaction/summary")
    assert summaries and [s.data["method"] for s in summaries] == ["reduction"] * len(summaries)
    first = summaries[0].data
    assert first["failure"] == {  # the call worked; its answer was not used
        "code": "SUMMARY_UNFIT",
        "message": "only the instruction's headings, nothing under them",
    }
    assert first["rawOutput"] == HEADINGS and first["provider"] == provider.id
    assert "the model's summary was not used — SUMMARY_UNFIT" in str(first["summary"])
    # the fact from turn 1 is still sent, in the reduction that replaced turn 1
    chat = [r for r in provider.requests if r.purpose is None]
    assert not any(m.text().startswith("My project's code name") for m in chat[-1].messages)
    assert any("Zephyrine" in m.text() for m in chat[-1].messages)
    # the turn's notice says which method wrote the summary, and why
    turn = of_type(ev, "compaction/start")[0].data["turn"]
    assert isinstance(turn, int)
    (note,) = [
        i.text
        for i in fold_turn(turn_events(ev, turn)).items
        if isinstance(i, NoticeItem) and i.key.startswith("compaction")
    ]
    assert note.startswith("Compacted ") and note.endswith(
        " by a deterministic reduction (the model's summary was not used — SUMMARY_UNFIT: only "
        "the instruction's headings, nothing under them)"
    )


async def test_a_summary_that_lost_the_users_numbers_is_set_aside_by_hand_too() -> None:
    lost = SUMMARY.replace("Answer the user's", "Answer the user's budget questions and")
    writes = [lost]

    def fn(request: GenerateRequest) -> Iterable[StreamChunk]:
        return text_response(writes[-1] if request.purpose == "compaction" else ANSWER)

    provider = FunctionProvider(fn)
    agent = agent_with(provider, window=None)
    await run(agent, "Our budget is 4,096 euros and the deadline is 2027.", "One?", "Two?")
    result = await agent.compact()
    assert result is not None and result.method == "reduction"
    assert result.failure is not None and result.failure.code == "SUMMARY_UNFIT"
    assert result.failure.message == "it lost all 2 numbers the user gave (4096, 2027)"
    assert result.describe().endswith(
        " by a deterministic reduction (the model's summary was not used — SUMMARY_UNFIT: it lost "
        "all 2 numbers the user gave (4096, 2027))"
    )
    kept = lost.replace("budget questions", "budget (4,096 euros, due 2027) questions")
    writes.append(kept)
    await run(agent, "Three?", "Four?")
    result = await agent.compact()
    assert result is not None and result.method == "model"
    assert result.describe().endswith(" by a model summary")


async def test_a_replay_sets_an_unfit_summary_aside_again() -> None:
    recorded = agent_with(FunctionProvider(summarising(summary=HEADINGS)), window=4096)
    questions = [f"Question {i}." for i in range(1, 6)]
    await run(recorded, *questions)
    summaries = [e.data for e in of_type(recorded.session.events, "compaction/summary")]
    assert summaries and all(s.get("rawOutput") == HEADINGS for s in summaries)
    replay = ReplayProvider(list(recorded.session.events))
    again = agent_with(FunctionProvider(summarising()), window=None)
    again.set_route(provider=replay, model="m1")
    await run(again, *questions)
    replay.assert_consumed()
    replayed = [e.data for e in of_type(again.session.events, "compaction/summary")]
    assert [(s["method"], s["failure"], s["rawOutput"]) for s in replayed] == [
        (s["method"], s["failure"], s["rawOutput"]) for s in summaries
    ]


async def test_a_model_that_does_not_summarise_is_reduced_without_a_call() -> None:
    provider = FunctionProvider(summarising())
    provider.summarizes = False  # type: ignore[attr-defined]  # as the offline demo model says
    agent = agent_with(provider, window=4096)
    await run(agent, *(f"Question {i}." for i in range(1, 6)))
    assert [r for r in provider.requests if r.purpose == "compaction"] == []
    summary = of_type(agent.session.events, "compaction/summary")[0].data
    assert summary["method"] == "reduction" and "provider" not in summary


async def test_an_overflow_the_server_reports_compacts_once_and_retries() -> None:
    calls: list[GenerateRequest] = []

    def fn(request: GenerateRequest) -> Iterable[StreamChunk]:
        calls.append(request)
        if request.purpose == "compaction":
            return text_response("- earlier: three questions about the data")
        if len(request.messages) > 4:  # the server's window holds two exchanges
            failure = LlmFailure(
                code="CONTEXT_WINDOW_EXCEEDED", message="maximum context length is 4096 tokens"
            )
            return [FinishChunk(reason=FinishError(failure=failure))]
        return text_response(ANSWER)

    agent = agent_with(FunctionProvider(fn), window=None)  # nothing known: the server says
    await run(agent, "One?", "Two?", "Three?")
    ev = agent.session.events
    assert [r["kind"] for r in turn_ends(ev)] == ["completed"] * 3
    (start,) = of_type(ev, "compaction/start")
    assert start.data["trigger"] == "overflow" and start.data["turn"] == 3
    assert of_type(ev, "llm/retry") == []
    assert [c.purpose for c in calls][-3:] == [None, "compaction", None]


async def test_an_overflow_with_nothing_to_compact_still_fails_and_is_left_out() -> None:
    def fn(request: GenerateRequest) -> Iterable[StreamChunk]:
        failure = LlmFailure(code="CONTEXT_WINDOW_EXCEEDED", message="too long")
        return [FinishChunk(reason=FinishError(failure=failure))]

    agent = agent_with(FunctionProvider(fn), window=None)
    await run(agent, "x" * 3000)
    ev = agent.session.events
    assert turn_ends(ev)[0]["error"]["code"] == "CONTEXT_WINDOW_EXCEEDED"  # type: ignore[index]
    assert of_type(ev, "compaction/start") == []  # a single message: nothing to replace


async def test_a_huge_tool_result_is_cut_first_and_the_turn_completes() -> None:
    @tool(read_only=True)
    def dump() -> str:
        """Prints a lot."""
        return "line of output\n" * 2500  # ~37k characters: ~9k tokens

    answers = iter([tool_call_response("dump", {}, call_id="c1"), text_response("Done.")])

    def fn(request: GenerateRequest) -> Iterable[StreamChunk]:
        return text_response("- summary") if request.purpose == "compaction" else next(answers)

    provider = FunctionProvider(fn)
    agent = agent_with(provider, window=6000, tools=[dump])
    await run(agent, "Dump it.")
    ev = agent.session.events
    assert turn_ends(ev) == [{"kind": "completed"}]
    (prune,) = of_type(ev, "compaction/prune")
    replaced = [e for e in of_type(ev, "tool/result") if isinstance(e.surface_op, ReplaceOp)]
    assert len(replaced) == 1 and replaced[0].source_event_seqs == tuple(prune.data["shadowedSeqs"])  # type: ignore[arg-type]
    sent = str(message_to_json(provider.requests[-1].messages[-1]))
    assert "left out to save context" in sent and len(sent) < 10_000
    assert prune.data["prunedTokenCount"] < prune.data["shadowedTokenCount"]  # type: ignore[operator]


async def test_compaction_off_keeps_the_old_refusal() -> None:
    provider = FunctionProvider(summarising())
    agent = agent_with(provider, window=4096, compaction=CompactionSettings(auto=False))
    await run(agent, *(f"Question {i}." for i in range(1, 6)))
    ev = agent.session.events
    assert of_type(ev, "compaction/start") == []
    assert any(r.get("kind") == "error" for r in turn_ends(ev))


async def test_compact_by_hand_between_turns() -> None:
    provider = FunctionProvider(summarising())
    agent = agent_with(provider, window=None)
    assert await agent.compact() is None  # nothing yet: nothing written
    assert of_type(agent.session.events, "compaction/start") == []
    await run(agent, "One?", "Two?", "Three?")
    result = await agent.compact()
    assert result is not None and result.trigger == "manual" and result.method == "model"
    assert result.turns == (1, 2)  # the newest exchange stays verbatim
    ev = agent.session.events
    (start,) = of_type(ev, "compaction/start")
    assert start.data["turn"] is None
    assert "compacted 2 earlier turns" in result.describe()
    await run(agent, "Four?")
    texts = [m.text() for m in provider.requests[-1].messages]
    assert (
        "One?" not in texts and "Three?" in texts and any("<compacted-summary>" in t for t in texts)
    )
    assert turn_ends(agent.session.events)[-1] == {"kind": "completed"}


async def test_an_unanswered_tool_call_and_pairs_stay_together() -> None:
    session = Session(header=SessionHeader(id="s", created_at=0))
    append = session.append
    append("turn/start", {"turn": 1})
    append("step/start", {"turn": 1, "step": 1})
    u = append("user/message", _user("hi"), surface_op="append")
    a = append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": _calls("c1", "c2")},
        surface_op="append",
    )
    append("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "t", "arguments": "{}"})
    r1 = append("tool/result", _result("c1"), surface_op="append")
    # c2 unanswered: the unit of a is open, so only what comes before it may go
    assert select_range(session, retain_tokens=0) == [u.seq]
    r2 = append("tool/result", _result("c2"), surface_op="append")
    b = append(
        "assistant/message", {"turn": 1, "step": 2, "message": _text("ok")}, surface_op="append"
    )
    # the assistant call and both results move together; the newest unit stays
    assert select_range(session, retain_tokens=0) == [u.seq, a.seq, r1.seq, r2.seq]
    assert b.seq not in select_range(session, retain_tokens=None)


async def test_a_crash_mid_compaction_leaves_a_stale_orphan_and_the_old_surface() -> None:
    provider = FunctionProvider(summarising())
    agent = agent_with(provider, window=None)
    await run(agent, "One?", "Two?", "Three?")
    surface = agent.session.surface
    # what a crash leaves: the lock taken, the summary call under way, nothing replaced
    agent.session.append(
        "compaction/start", {"compactionId": "cmp_x", "turn": None, "trigger": "manual"}
    )
    assert agent.session.compaction_open is not None
    with pytest.raises(Exception, match="already under way"):
        await agent.compact()
    # a new lifecycle (resume) over the same events: the orphan is stale, the surface unchanged
    resumed = Session(header=agent.session.header, seed=list(agent.session.events))
    assert resumed.surface == surface and resumed.compaction_open is None
    again = agent_with(provider, window=None, session=resumed)
    result = await again.compact()
    assert result is not None and resumed.compaction_open is None
    assert of_type(resumed.events, "session/end-seed")  # the end-seed rule made it stale


async def test_a_cancel_during_the_summary_closes_the_bracket_and_changes_nothing() -> None:
    gate = asyncio.Event()
    slow = False

    async def slow_summary(request: GenerateRequest):
        if request.purpose == "compaction" and slow:
            gate.set()
            await asyncio.sleep(3600)
        for c in text_response(ANSWER if request.purpose is None else "- summary"):
            yield c

    agent = agent_with(FunctionProvider(slow_summary), window=4096)
    await run(agent, "One.", "Two.")
    slow = True
    before = agent.session.surface
    agent.followup("Three. " + ANSWER + ANSWER[:1000])
    await gate.wait()
    agent.cancel()
    await agent.when_idle()
    ev = agent.session.events
    assert turn_ends(ev)[-1]["kind"] == "aborted"
    end = of_type(ev, "compaction/end")[-1]
    assert end.data["error"]["code"] == "ABORTED"  # type: ignore[index]
    assert [e for e in of_type(ev, "user/message") if PLUGIN in str(e.data["source"])] == []
    assert set(before) <= set(agent.session.surface)
    assert agent.session.compaction_open is None


# --- builders ---------------------------------------------------------------------------------------


def _user(text: str) -> dict[str, object]:
    return {
        "id": "msg_u",
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }


def _text(text: str) -> dict[str, object]:
    return {
        "id": "msg_t",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }


def _calls(*ids: str) -> dict[str, object]:
    return {
        "id": "msg_a",
        "role": "assistant",
        "content": [{"type": "tool-call", "id": i, "name": "t", "arguments": "{}"} for i in ids],
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }


def _result(call_id: str) -> dict[str, object]:
    return {
        "turn": 1,
        "step": 1,
        "message": {
            "id": f"msg_{call_id}",
            "role": "user",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "content": [{"type": "text", "text": "r"}],
                }
            ],
            "source": {"kind": "tool", "callId": call_id},
        },
    }


async def test_a_replay_of_a_compacted_session_compacts_where_the_recording_did() -> None:
    recorded = agent_with(FunctionProvider(summarising()), window=4096)
    questions = [f"Question {i}." for i in range(1, 6)]
    await run(recorded, *questions)
    summaries = [e.data["summary"] for e in of_type(recorded.session.events, "compaction/summary")]
    assert summaries
    replay = ReplayProvider(list(recorded.session.events))
    again = agent_with(FunctionProvider(summarising()), window=None)
    again.set_route(provider=replay, model="m1")
    await run(again, *questions)
    replay.assert_consumed()
    ev = again.session.events
    assert [r["kind"] for r in turn_ends(ev)] == ["completed"] * 5
    assert [e.data["summary"] for e in of_type(ev, "compaction/summary")] == summaries


async def test_the_meter_stops_anchoring_on_usage_that_counted_compacted_turns() -> None:
    def fn(request: GenerateRequest) -> Iterable[StreamChunk]:
        if request.purpose == "compaction":
            return text_response("- summary")
        # the server says the history was big: the anchor the meter would otherwise keep using
        return text_response(ANSWER, usage=TokenUsage(input_tokens=9000, output_tokens=1000))

    agent = agent_with(FunctionProvider(fn), window=None)
    await run(agent, "One?", "Two?", "Three?")
    assert measure(agent.session).baseline == "usage"
    await agent.compact()
    after = measure(agent.session)
    # the estimate from scratch; its calibration learned the server's (made-up) 9,000-token counts
    assert after.baseline == "estimated" and after.raw_tokens < 9000
    assert after.calibration.source == "usage" and after.total_tokens > after.raw_tokens


def test_a_reduction_keeps_first_lines_and_image_descriptions() -> None:
    session = Session(header=SessionHeader(id="s", created_at=0))
    append = session.append
    append("turn/start", {"turn": 1})
    append("step/start", {"turn": 1, "step": 1})
    u = append("user/message", _user("Plot the sales."), surface_op="append")
    a = append(
        "assistant/message", {"turn": 1, "step": 1, "message": _calls("c1")}, surface_op="append"
    )
    image = ImageBlock(
        sha256="0" * 64,
        media_type="image/png",
        width=10,
        height=10,
        size=100,
        description="line chart 'Sales by month'",
    )
    result = {
        "turn": 1,
        "step": 1,
        "message": message_to_json(
            Message(
                id=MessageId("msg_r"),
                role="user",
                content=(
                    ToolResultBlock(
                        tool_call_id=CallId("c1"),
                        content=(TextBlock(text="first line\n" + "noise\n" * 500), image),
                    ),
                ),
                source=ToolSource(call_id=CallId("c1")),
            )
        ),
    }
    r = append("tool/result", result, surface_op="append")
    text = reduce_range(session, [u.seq, a.seq, r.seq], 500, "a test")
    assert "User: Plot the sales." in text and "Called t: {}" in text
    assert "Tool output: first line [image: line chart 'Sales by month']" in text
    assert "noise" not in text and "deterministic reduction" in text and "Turn 1:" in text


async def test_a_turn_that_still_overflows_after_compacting_leaves_the_summary_in_place() -> None:
    def fn(request: GenerateRequest) -> Iterable[StreamChunk]:
        if request.purpose == "compaction":
            return text_response("- two questions were answered")
        if any("x" * 3000 in m.text() for m in request.messages):
            failure = LlmFailure(code="CONTEXT_WINDOW_EXCEEDED", message="too long")
            return [FinishChunk(reason=FinishError(failure=failure))]
        return text_response(ANSWER)

    provider = FunctionProvider(fn)
    agent = agent_with(provider, window=None)
    await run(agent, "One?", "Two?", "x" * 3000, "Say hi.")
    ev = agent.session.events
    assert [r["kind"] for r in turn_ends(ev)] == ["completed", "completed", "error", "completed"]
    assert len(of_type(ev, "compaction/summary")) == 1
    texts = [m.text() for m in provider.requests[-1].messages]
    assert any("<compacted-summary>" in t for t in texts)  # the drop note did not replace it
    assert any("left out here" in t for t in texts) and "Say hi." in texts


def test_the_question_being_asked_is_never_in_the_range() -> None:
    session = Session(header=SessionHeader(id="s", created_at=0))
    append = session.append
    append("turn/start", {"turn": 1})
    append("step/start", {"turn": 1, "step": 1})
    u1 = append("user/message", _user("first"), surface_op="append")
    a1 = append(
        "assistant/message", {"turn": 1, "step": 1, "message": _text("ok")}, surface_op="append"
    )
    append("step/end", {"turn": 1, "step": 1})
    append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    append("turn/start", {"turn": 2})
    append("step/start", {"turn": 2, "step": 1})
    append("user/message", _user("a long question " * 500), surface_op="append")
    append(
        "user/message",
        {**_user("<runtime-context/>"), "source": {"kind": "plugin", "plugin": "p"}},
        surface_op="append",
    )
    # the prompt and the runtime context after it are the newest step's input: one unit, kept
    assert select_range(session, retain_tokens=None) == [u1.seq, a1.seq]


async def test_a_request_under_no_pressure_does_not_walk_the_history(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 16 item 5: the check before every request is the meter's (incremental); the range
    # walk (and the measure of everything replaceable) runs only once the threshold is passed.
    import dsh_kernel.agent.compaction.run as compaction

    walks: list[int] = []

    def counting(session: Session, retain: int | None, **kw: object) -> list[int]:
        walks.append(len(session))
        return select_range(session, retain, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(compaction, "select_range", counting)
    agent = agent_with(FunctionProvider(summarising("Short.")), window=1 << 20)
    await run(agent, *(f"Question {i}." for i in range(1, 6)))
    assert walks == []
    agent = agent_with(FunctionProvider(summarising()), window=4096)
    await run(agent, *(f"Question {i}." for i in range(1, 6)))
    assert walks  # under pressure it does walk (the counter sees the walks it should)
