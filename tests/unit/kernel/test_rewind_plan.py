"""The rewind's decisions (``kernel.rewind``) on real sessions: which cell asked each turn, what a
re-run, a deletion or a cell placed above does to the context, and that every cut keeps the log
rebuildable (the agent's dev invariants check each request)."""

from __future__ import annotations

import json
from collections.abc import Iterable

import pytest

from dsh_kernel import Agent
from dsh_kernel.ids import new_message_id
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.kernel.rewind import context_of, cut, names_made, plan, turns_of, with_cell
from dsh_kernel.llm.codec import message_to_json
from dsh_kernel.llm.types import (
    FinishChunk,
    FinishError,
    GenerateRequest,
    LlmFailure,
    Message,
    StreamChunk,
    TextBlock,
    UserSource,
)
from dsh_kernel.session.log import Session
from dsh_kernel.store.sessions import fork
from dsh_kernel.testing import (
    FunctionProvider,
    ScriptedProvider,
    text_response,
    tool_call_response,
)
from dsh_kernel.tools.types import ToolContext, ToolDefinition
from dsh_kernel.transcript.rewind_note import rewind_notice
from tests.unit.agent.helpers import agent_with


def prompt(text: str, cell: str | None) -> Message:
    msg = Message(
        id=new_message_id(), role="user", content=(TextBlock(text=text),), source=UserSource()
    )
    return with_cell(msg, cell, None) if cell is not None else msg


async def conversation(*cells: str | None) -> Agent:
    """An agent whose session has one turn per entry of ``cells`` (``None``: a console's)."""
    provider = ScriptedProvider([text_response(f"answer {i}") for i in range(1, len(cells) + 1)])
    agent = agent_with(provider)
    for i, cell in enumerate(cells, 1):
        agent.followup(prompt(f"question {i}", cell))
        await agent.when_idle()
    return agent


def sent_text(session: Session) -> str:
    return json.dumps([message_to_json(m) for m in session.derive_messages()])


async def test_each_turn_knows_its_cell_and_its_surface_nodes() -> None:
    agent = await conversation("a", None, "c")
    turns = turns_of(agent.session)
    assert [(t.turn, t.cell_id) for t in turns] == [(1, "a"), (2, None), (3, "c")]
    assert all(len(t.nodes) == 2 and not t.left and not t.summary for t in turns)


async def test_a_plain_next_cell_appends() -> None:
    agent = await conversation("a", "b")
    assert plan(turns_of(agent.session), "c") is None
    assert plan(turns_of(agent.session), "c", order=["a", "b", "c"]) is None


async def test_rerunning_forks_before_its_turn_and_drops_what_followed() -> None:
    agent = await conversation("a", "b", None, "d")
    p = plan(turns_of(agent.session), "b")
    assert p is not None
    assert (p.order, p.fork_after, p.replaces) == ("run", 1, 2)
    assert [(d["turn"], d["why"]) for d in p.dropped] == [
        (2, "rerun"),
        (3, "after"),
        (4, "below"),
    ]
    assert p.left == ()


async def test_a_cell_placed_above_forks_before_the_first_turn_below_it() -> None:
    agent = await conversation("a", "c")
    p = plan(turns_of(agent.session), "b", order=["a", "b", "c"])
    assert p is not None
    assert (p.order, p.fork_after, p.replaces) == ("notebook", 1, None)
    assert [(d["turn"], d["why"]) for d in p.dropped] == [(2, "below")]


async def test_a_cell_moved_below_forks_before_its_turn() -> None:
    # c asked turn 1, then was moved below b; b (turn 2) is re-run: c's turn 1 is below it, and a
    # branch is a prefix, so it branches before turn 1.
    agent = await conversation("c", "b")
    p = plan(turns_of(agent.session), "b", order=["a", "b", "c"])
    assert p is not None
    assert (p.fork_after, p.replaces, p.left) == (0, 2, ())
    assert [(x["turn"], x["why"]) for x in p.dropped] == [(1, "below"), (2, "rerun")]


async def test_a_deleted_cell_is_cut_on_the_same_session_and_the_log_stays_sound() -> None:
    agent = await conversation("a", "b", "c")
    p = plan(turns_of(agent.session), "d", deleted=["b"])
    assert p is not None and p.fork_after is None
    assert [(x["turn"], x["why"]) for x in p.left] == [(2, "deleted")]
    cut(agent.session, p.left)
    text = sent_text(agent.session)
    assert "question 2" not in text and "answer 2" not in text
    assert "Turn 2 is left out" in text and "question 3" in text
    turns = turns_of(agent.session)
    assert [t.left for t in turns] == [False, True, False]
    # Cut once: the next plan does not see it again, and the next request checks the invariants.
    assert plan(turns, "d", deleted=["b"]) is None
    agent.provider.push(text_response("answer 4"))  # type: ignore[attr-defined]
    agent.followup(prompt("question 4", "d"))
    await agent.when_idle()
    assert "question 2" not in sent_text(agent.session)


async def test_a_branch_seeds_the_prefix_and_its_cuts() -> None:
    agent = await conversation("a", "b", "c", "d")
    session = agent.session
    p = plan(turns_of(session), "c", deleted=["a"])
    assert p is not None and p.fork_after == 2
    child = fork(session.header, list(session.events), p.fork_after, kind="rewind")
    assert child.header.parent_kind == "rewind"
    cut(child, p.left)
    text = sent_text(child)
    assert "question 2" in text and "question 1" not in text and "question 3" not in text
    assert [(t.turn, t.left) for t in turns_of(child)] == [(1, True), (2, False)]
    # A turn on the branch: its request is rebuilt from the branch's log (dev invariants on).
    branch = agent_with(ScriptedProvider([text_response("answer 3b")]), session=child)
    branch.followup(prompt("question 3 again", "c"))
    await branch.when_idle()
    text = sent_text(child)
    assert "question 3 again" in text and "answer 3b" in text and "question 1" not in text
    assert child.events[-1].type == "turn/end"
    assert child.events[-1].data["reason"] == {"kind": "completed"}


def made(name: str) -> ToolDefinition:
    """A tool whose result's meta says it made ``name`` (as the python tool's ``namesAdded``)."""

    def body(args: JsonObject, ctx: ToolContext) -> JsonValue:
        return "made"

    return ToolDefinition(
        name="make",
        description="makes a name",
        parameters={"type": "object"},
        execute=body,
        read_only=True,  # runs without asking
        presentation_meta=lambda args, value: {"namesAdded": [name], "namesChanged": ["shared"]},
    )


@pytest.mark.parametrize("compacted", [False, True])
async def test_names_made_reads_the_results_of_the_turns_left_out(compacted: bool) -> None:
    def fn(request: GenerateRequest) -> Iterable[StreamChunk]:
        if request.purpose == "compaction":
            failure = LlmFailure(code="SERVER", message="overloaded")
            return [FinishChunk(reason=FinishError(failure=failure))]
        last = request.messages[-1]
        if last.role == "user" and "make it" in json.dumps(message_to_json(last)):
            return tool_call_response("make", {})
        return text_response("noted")

    agent = agent_with(FunctionProvider(fn), window=8192, tools=[made("frame")])
    for i, text in enumerate(("make it", "question", "question", "question"), 1):
        agent.followup(prompt(f"{text} {i} " + "detail " * 300, f"c{i}"))
        await agent.when_idle()
    if compacted:
        await agent.compact()
        assert any(t.summary and not t.nodes for t in turns_of(agent.session) if t.turn == 1)
    assert names_made(agent.session, [1]) == ["frame", "shared"]
    assert names_made(agent.session, [2, 3]) == []
    assert names_made(agent.session, []) == []


def test_the_notice_names_the_branch_the_cuts_and_the_names() -> None:
    from dsh_kernel.kernel.rewind import Plan

    p = Plan(
        order="run",
        fork_after=1,
        replaces=2,
        dropped=({"turn": 2, "why": "rerun"}, {"turn": 3, "why": "below"}),
        left=({"turn": 1, "why": "deleted", "cellId": "x"},),
    )
    ctx = context_of(p, parent="0123456789abcdef", names=["df", "model"])
    text = rewind_notice({"kind": "user", "context": json.loads(json.dumps(ctx))})
    assert text == (
        "Re-asked from here on a new branch: turns 2–3 of the earlier branch are no longer in the "
        "model's context (kept in session 01234567). Left out of the model's context: turn 1 (its "
        "cell was deleted). Not rolled back: the namespace still holds df, model as the turns "
        "left out made them."
    )
    one = context_of(
        Plan(order="run", fork_after=0, dropped=({"turn": 1, "why": "rerun"},)),
        parent="p",
        names=[],
    )
    assert "turn 1 of the earlier branch is no longer" in (
        rewind_notice({"context": json.loads(json.dumps(one))}) or ""
    )
    assert rewind_notice({"kind": "user"}) is None


async def test_a_summary_made_after_the_re_run_point_is_not_carried_by_the_branch() -> None:
    def fn(request: GenerateRequest) -> Iterable[StreamChunk]:
        if request.purpose == "compaction":
            failure = LlmFailure(code="SERVER", message="overloaded")
            return [FinishChunk(reason=FinishError(failure=failure))]
        return text_response("noted")

    agent = agent_with(FunctionProvider(fn), window=8192)
    for i, cell in enumerate(("a", "b", "c", "d"), 1):
        agent.followup(prompt(f"question {i} " + "detail " * 300, cell))
        await agent.when_idle()
    assert await agent.compact() is not None  # a reduction of the older turns
    turns = turns_of(agent.session)
    assert any(t.summary for t in turns)
    p = plan(turns, "b")
    assert p is not None and p.fork_after == 1
    child = fork(agent.session.header, list(agent.session.events), p.fork_after, kind="rewind")
    assert not any(e.type.startswith("compaction/") for e in child.events)
    text = sent_text(child)
    assert "question 1" in text and "compacted-summary" not in text
    assert "question 2" not in text and "question 3" not in text


async def test_a_deleted_cell_inside_a_summary_stays_there_and_is_said() -> None:
    def fn(request: GenerateRequest) -> Iterable[StreamChunk]:
        if request.purpose == "compaction":
            failure = LlmFailure(code="SERVER", message="overloaded")
            return [FinishChunk(reason=FinishError(failure=failure))]
        return text_response("noted")

    agent = agent_with(FunctionProvider(fn), window=8192)
    for i, cell in enumerate(("a", "b", "c", "d"), 1):
        agent.followup(prompt(f"question {i} " + "detail " * 300, cell))
        await agent.when_idle()
    await agent.compact()
    summarized = [t.turn for t in turns_of(agent.session) if t.summary and not t.nodes]
    assert summarized, "the reduction should fold the oldest turns"
    gone = {1: "a", 2: "b", 3: "c", 4: "d"}[summarized[0]]
    p = plan(turns_of(agent.session), "e", deleted=[gone])
    assert p is not None and p.left == () and p.fork_after is None
    assert [(x["turn"], x["why"]) for x in p.summarized] == [(summarized[0], "deleted")]
    ctx = json.loads(json.dumps(context_of(p, parent=None, names=[])))
    assert ctx["left"] == [
        {"turn": summarized[0], "why": "deleted", "cellId": gone, "summary": True}
    ]
