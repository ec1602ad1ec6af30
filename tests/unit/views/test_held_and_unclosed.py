"""What a turn shows while answer text is held as a possible tool call (``assistant/held``), and
of reasoning never closed that was made the answer (``TextBlock.unclosed_reasoning``): the one turn
reader, and the text frontend's lines."""

from __future__ import annotations

from collections.abc import Iterator

from dsh_kernel.ids import CallId
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.codec import chunk_to_json
from dsh_kernel.llm.types import (
    BlockEndChunk,
    BlockStartChunk,
    FinishChunk,
    FinishStop,
    FinishToolCalls,
    ReasoningBlock,
    StreamChunk,
    TextBlock,
    ToolCallBlock,
    ToolCallDeltaChunk,
    reasoning_delta,
    text_delta,
)
from dsh_kernel.session.events import SessionEvent, new_event
from dsh_kernel.transcript.model import HeldItem, NoticeItem, TextItem, ToolItem
from dsh_kernel.transcript.turn import UNCLOSED_NOTE, TurnFold
from dsh_kernel.views.format import held_note
from dsh_kernel.views.text_turn import TextTurn


class Log:
    """One turn's events, built by hand in log order."""

    def __init__(self) -> None:
        self.seq = 0
        self.events: list[SessionEvent] = []
        self.add("turn/start", {"turn": 1})
        self.add("step/start", {"turn": 1, "step": 1})

    def add(self, type_: str, data: JsonObject, *, ignorable: bool = False) -> SessionEvent:
        ev = new_event(type_, self.seq, 1_000 + self.seq, data, ignorable)
        self.seq += 1
        self.events.append(ev)
        return ev

    def chunk(self, chunk: StreamChunk) -> SessionEvent:
        return self.add("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk_to_json(chunk)})

    def held(self, chars: int) -> SessionEvent:
        return self.add("assistant/held", {"turn": 1, "step": 1, "chars": chars}, ignorable=True)

    def __iter__(self) -> Iterator[SessionEvent]:
        return iter(self.events)


def items(fold: TurnFold) -> list[str]:
    out: list[str] = []
    for item in fold.snapshot().items:
        match item:
            case HeldItem():
                out.append(f"held {item.chars}")
            case TextItem():
                out.append(f"text {item.text!r}")
            case ToolItem():
                out.append(f"tool {item.card.name}")
            case NoticeItem():
                out.append(f"notice {item.text}")
            case _:
                out.append(item.type)
    return out


def test_held_text_shows_its_count_until_it_is_released_as_text() -> None:
    log, fold = Log(), TurnFold()
    for ev in log:
        fold.apply(ev)
    fold.apply(log.chunk(reasoning_delta(0, "hm")))
    fold.apply(log.held(1))
    assert items(fold) == ["reasoning", "held 1"]
    fold.apply(log.held(4_000))
    assert items(fold) == ["reasoning", "held 4000"]  # one item, its count updated
    fold.apply(log.chunk(BlockStartChunk(index=1, block_type="text")))
    fold.apply(log.chunk(text_delta(1, '{"name": "python", …')))
    assert items(fold) == ["reasoning", """text '{"name": "python", …'"""]


def test_held_text_gives_way_to_the_recovered_call() -> None:
    log, fold = Log(), TurnFold()
    log.held(80)
    call = ToolCallBlock(
        id=CallId("call_1"), name="python", arguments="{}", recovered_from='{"name": "python"}'
    )
    log.chunk(BlockStartChunk(index=0, block_type="tool-call"))
    for ev in log:
        fold.apply(ev)
        if ev.type == "assistant/held":
            assert items(fold) == ["held 80"]
    fold.apply(log.chunk(ToolCallDeltaChunk(index=0, id=call.id, name="python")))
    fold.apply(log.chunk(BlockEndChunk(index=0, block=call)))
    assert items(fold) == ["tool python"]


def test_held_text_never_outlives_its_attempt_or_the_turn() -> None:
    log, fold = Log(), TurnFold()
    log.held(10)
    log.chunk(FinishChunk(reason=FinishToolCalls()))
    for ev in log:
        fold.apply(ev)
    assert items(fold) == []  # the attempt finished: nothing is held any more
    log2, fold2 = Log(), TurnFold()
    log2.held(10)
    log2.add("turn/end", {"turn": 1, "reason": {"kind": "aborted"}})
    for ev in log2:
        fold2.apply(ev)
    assert items(fold2) == []


def test_a_note_of_nothing_held_ends_the_progress() -> None:
    # e.g. a bare </think> made the held text reasoning: no text or call follows at once
    log, fold = Log(), TurnFold()
    for ev in log:
        fold.apply(ev)
    fold.apply(log.held(40))
    assert items(fold) == ["held 40"]
    fold.apply(log.held(0))
    fold.apply(log.chunk(reasoning_delta(1, "so it was thinking")))
    assert items(fold) == ["reasoning"]
    fold.apply(log.held(9))  # held again afterwards: a new line, where the answer now goes
    assert items(fold) == ["reasoning", "held 9"]


def test_reasoning_made_the_answer_is_flagged_once_before_it_and_the_empty_fold_is_gone() -> None:
    log, fold = Log(), TurnFold()
    said = "Three spiders have 24 legs."
    log.chunk(BlockStartChunk(index=0, block_type="reasoning"))
    log.chunk(reasoning_delta(0, said))
    log.chunk(BlockEndChunk(index=0, block=ReasoningBlock(text="")))
    log.chunk(BlockStartChunk(index=1, block_type="text"))
    log.chunk(text_delta(1, said))
    log.chunk(BlockEndChunk(index=1, block=TextBlock(text=said, unclosed_reasoning=True)))
    log.chunk(FinishChunk(reason=FinishStop()))
    for ev in log:
        fold.apply(ev)
    assert items(fold) == [f"notice {UNCLOSED_NOTE}", f"text {said!r}"]
    assert fold.snapshot().answer == said


def test_the_text_frontend_writes_one_held_line_then_the_text() -> None:
    log = Log()
    turn = TextTurn()
    for ev in log:
        turn.observe(ev)
    turn.observe(log.held(3))
    first = turn.take()
    assert first == "✍️ writing a tool call…\n"
    turn.observe(log.held(300))
    assert turn.take() == ""  # a terminal cannot redraw a count: the line is written once
    turn.observe(log.chunk(text_delta(0, "not a call after all")))
    assert turn.take().endswith("not a call after all")


def test_the_held_note_counts_characters() -> None:
    assert held_note(1) == "writing a tool call… (1 character)"
    assert held_note(4_096) == "writing a tool call… (4,096 characters)"
