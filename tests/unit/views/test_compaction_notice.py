"""A compaction inside a turn, as the turn shows it: one ``info`` line in the live view and the saved
rendering (``transcript.compaction_notes``), a deterministic reduction saying why, a stopped or failed
compaction as a warning, and the compaction's model-only copies changing nothing the user saw.
A real Agent and log with dev invariants on; the model is a function of the request."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence

import ipywidgets

from dsh_kernel import Agent, tool
from dsh_kernel.agent.request.window import ContextWindows
from dsh_kernel.llm.providers.offline import OfflineProvider
from dsh_kernel.llm.types import GenerateRequest, StreamChunk
from dsh_kernel.session.events import SessionEvent, SessionHeader
from dsh_kernel.session.log import Session
from dsh_kernel.testing import FunctionProvider, text_response, tool_call_response
from dsh_kernel.transcript.markdown import export_markdown
from dsh_kernel.transcript.model import NoticeItem, ToolItem
from dsh_kernel.transcript.turn import TurnFold
from dsh_kernel.views import TurnView, fold_turn, turn_events

from .helpers import CommLog, attach, find

ANSWER = "The answer goes on at length about the data. " * 90  # ~1k tokens


SUMMARY = (  # a summary that passes the substance check (agent.compaction.substance)
    "## Goal\n- Answer the user's questions about the data, one per turn.\n## Done so far\n"
    "- Each question asked about the data; each answer went on at length about the data, "
    "repeating the same plain description of it many times over.\n## Open questions and next "
    "step\n- Wait for the next question about the data and answer it in the same way."
)


def summarising(request: GenerateRequest) -> Iterable[StreamChunk]:
    if request.purpose == "compaction":
        return text_response(SUMMARY)
    return text_response(ANSWER)


def small_window(provider: FunctionProvider | OfflineProvider, **kw: object) -> Agent:
    return Agent(
        provider=provider,
        model="m1",
        context_windows=ContextWindows(configured=4096),
        check_invariants=True,
        **kw,  # type: ignore[arg-type]
    )


def of_type(events: Sequence[SessionEvent], kind: str) -> list[SessionEvent]:
    return [e for e in events if e.type == kind]


def notices(events: Sequence[SessionEvent], turn: int) -> list[NoticeItem]:
    model = fold_turn(turn_events(events, turn))
    return [i for i in model.items if isinstance(i, NoticeItem) and i.key.startswith("compaction")]


async def test_a_compaction_is_one_line_in_the_live_view_and_the_saved_rendering(
    comms: CommLog,
) -> None:
    agent = small_window(FunctionProvider(summarising))
    views: list[TurnView] = []
    for i in range(1, 6):
        view = TurnView()
        detach = attach(agent, view)
        agent.followup(f"Question {i}: tell me about the data.")
        await agent.when_idle()
        detach()
        views.append(view)
    ev = agent.session.events
    (start,) = of_type(
        ev, "compaction/start"
    )  # one compaction, in the turn whose request filled up
    (summary,) = of_type(ev, "compaction/summary")
    turn = start.data["turn"]
    assert isinstance(turn, int)
    view = views[turn - 1]
    bundle = view.finish()
    before = start.data["tokens"]
    assert isinstance(before, int)
    shadowed, kept = summary.data["shadowedTokenCount"], summary.data["summaryTokenCount"]
    assert isinstance(shadowed, int) and isinstance(kept, int)
    n = turn - 1
    line = (
        f"Compacted {n} earlier turns (~{before:,} → ~{before - shadowed + kept:,} tokens) "
        "by a model summary"
    )
    (note,) = notices(ev, turn)
    assert note.text == line and note.level == "info"
    # where it happened: after the prompt, before the answer
    assert [i.type for i in view.model.items] == ["notice", "text"]
    drawn = [w.value for w in find(view.widget, ipywidgets.HTML) if "Compacted" in w.value]
    assert drawn == [f'<div class="dsh-notice dsh-info">ℹ️ {line}</div>']
    assert (
        f"ℹ️ {line}" in bundle["text/html"] and 'class="dsh-notice dsh-info"' in bundle["text/html"]
    )
    assert "border-left-color: #0288d1" in bundle["text/html"]
    assert "ℹ️ Compacted" in bundle["text/markdown"]
    # the other turns show no such line, and the transcript (which leaves notices out) every prompt
    assert [bool(notices(ev, t)) for t in range(1, 6)] == [t == turn for t in range(1, 6)]
    transcript = export_markdown(list(ev), agent.session.header)
    assert all(f"Question {i}:" in transcript for i in range(1, 6))
    assert "compacted-summary" not in transcript  # the checkpoint is for the model only


async def test_the_offline_model_compacts_by_a_deterministic_reduction_and_says_why() -> None:
    agent = small_window(OfflineProvider())
    question = "Please look at this: " + "numbers and words " * 160  # ~750 tokens
    for i in range(1, 7):
        agent.followup(f"{i}. {question}")
        await agent.when_idle()
    ev = agent.session.events
    summaries = of_type(ev, "compaction/summary")
    assert summaries and {str(s.data["method"]) for s in summaries} == {"reduction"}
    assert "failure" not in summaries[0].data  # never asked: the offline model writes none
    turn = of_type(ev, "compaction/start")[0].data["turn"]
    assert isinstance(turn, int)
    (note,) = notices(ev, turn)
    assert note.text.startswith("Compacted ")
    assert note.text.endswith(" by a deterministic reduction (this model does not write summaries)")


async def test_a_stopped_compaction_is_a_warning_and_changes_nothing() -> None:
    asked = asyncio.Event()

    async def stream(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        if request.purpose == "compaction":
            asked.set()
            await asyncio.get_running_loop().create_future()  # the summary never comes
        for chunk in text_response(ANSWER):
            yield chunk

    agent = small_window(FunctionProvider(stream))
    for i in range(1, 6):
        agent.followup(f"Question {i}: tell me about the data.")
        done = asyncio.ensure_future(agent.when_idle())
        await asyncio.wait(
            [done, asyncio.ensure_future(asked.wait())], return_when="FIRST_COMPLETED"
        )
        if asked.is_set():
            break
        await done
    assert asked.is_set()
    surface = agent.session.surface
    agent.cancel()
    await agent.when_idle()
    ev = agent.session.events
    end = of_type(ev, "compaction/end")[-1]
    assert end.data["error"] == {"code": "ABORTED", "message": "the compaction was cancelled"}
    assert set(surface) <= set(agent.session.surface)  # nothing was replaced
    turn = of_type(ev, "compaction/start")[-1].data["turn"]
    assert isinstance(turn, int)
    (note,) = notices(ev, turn)
    assert note.text == "Compaction stopped; the history is unchanged"
    assert note.level == "warning"


def test_a_compaction_notice_while_it_runs_then_a_failure() -> None:
    session = Session(header=SessionHeader(id="s1", created_at=0))
    session.append("turn/start", {"turn": 1})
    fold = TurnFold()
    for ev in session.events:
        fold.apply(ev)
    start = session.append(
        "compaction/start",
        {
            "compactionId": "c1",
            "turn": 1,
            "trigger": "pressure",
            "tokens": 3500,
            "contextWindow": 4096,
        },
    )
    fold.apply(start)
    (note,) = fold.snapshot().items
    assert isinstance(note, NoticeItem) and note.level == "info"
    assert note.text == "Compacting the history (~3,500 tokens of the 4,096-token window)…"
    end = session.append(
        "compaction/end",
        {"compactionId": "c1", "turn": 1, "error": {"code": "UNKNOWN", "message": "it broke"}},
    )
    fold.apply(end)
    (note,) = fold.snapshot().items
    assert isinstance(note, NoticeItem) and note.key == f"compaction-{start.seq}"
    assert note.text == "Compaction failed (UNKNOWN: it broke); the history is unchanged"
    assert note.level == "warning"


async def test_a_cut_tool_output_stays_whole_on_its_card() -> None:
    output = "row of the table, " * 800  # ~3.6k tokens: cut to its head and tail for the model

    @tool(read_only=True)
    def table() -> str:
        """The whole table."""
        return output

    def answer(request: GenerateRequest) -> Iterable[StreamChunk]:
        if request.purpose == "compaction":
            return text_response("- the user asked for the table")
        if request.messages[-1].role == "user" and any(
            getattr(b, "tool_call_id", None) for b in request.messages[-1].content
        ):
            return text_response("That is the table.")
        return tool_call_response("table", {}, call_id="c1")

    agent = small_window(FunctionProvider(answer), tools=[table])
    agent.followup("Show me the table.")
    await agent.when_idle()
    ev = agent.session.events
    (prune,) = of_type(ev, "compaction/prune")
    cut = [e for e in of_type(ev, "tool/result") if e.surface_op != "append"]
    assert len(cut) == 1 and prune.seq < cut[0].seq
    model = fold_turn(turn_events(ev, 1))
    (card,) = [i.card for i in model.items if isinstance(i, ToolItem)]
    assert card.result_text == output  # what the tool returned, not the model's cut copy
    assert card.status == "done"
    assert not [c for c in model.context if "compacted-summary" in c.text]
    (note,) = [i for i in model.items if isinstance(i, NoticeItem)]
    assert note.level == "info"
    assert note.text.startswith(("Cut 1 long tool output (~", "Compacted the start of this turn"))
