"""What keeps a long session cheap (issue 16): the log's indexes, its kept ``derive_messages`` fold,
and the compact storage of past turns' chunk events — each checked against a plain reading of the
same log, so an index, fold or run that went stale fails here."""

from __future__ import annotations

import json
import random

import pytest

from dsh_kernel.errors import LosslessJsonError, UsageError
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.codec import chunk_to_json
from dsh_kernel.llm.secrets import Redactor
from dsh_kernel.llm.types import (
    BlockEndChunk,
    BlockStartChunk,
    FinishChunk,
    FinishStop,
    ReasoningDeltaChunk,
    StreamChunk,
    TextBlock,
    TextDeltaChunk,
    TokenUsage,
    ToolCallDeltaChunk,
    UsageChunk,
)
from dsh_kernel.session.codec import encode_event
from dsh_kernel.session.derive import project_event
from dsh_kernel.session.events import ReplaceOp, SessionEvent
from dsh_kernel.session.log import Session
from dsh_kernel.session.log_index import INDEXED
from dsh_kernel.testing import FakeClock
from dsh_kernel.transcript.turn import find_turn, turn_end, turn_events
from tests.unit.session.scripts import (
    HEADER,
    LoopScript,
    assistant_message,
    new_session,
    scripted_log,
    user_message,
)


def record(session: Session) -> list[SessionEvent]:
    """Every event as it was appended (the objects observers receive)."""
    seen: list[SessionEvent] = list(session.events)
    session.subscribe(seen.append)
    return seen


def _delta(text: str, index: int = 0) -> dict[str, object]:
    return {"type": "text-delta", "index": index, "text": text}


def _turn(
    s: Session, turn: int, chunks: list[dict[str, object]], *, ignorable: bool = False
) -> None:
    s.append("turn/start", {"turn": turn})
    s.append("step/start", {"turn": turn, "step": 1})
    s.append("user/message", user_message(f"question {turn}"), surface_op="append")
    seqs = [
        s.append("assistant/chunk", {"turn": turn, "step": 1, "chunk": c}, ignorable=ignorable).seq
        for c in chunks
    ]
    s.append(
        "assistant/message",
        {"turn": turn, "step": 1, "message": assistant_message(f"answer {turn}")},
        surface_op="append",
        source_event_seqs=seqs,
    )
    s.append("step/end", {"turn": turn, "step": 1})
    s.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def assert_reads_as(s: Session, seen: list[SessionEvent]) -> None:
    """Every way of reading the log gives the events appended, equal down to their JSON."""
    events = s.events
    assert len(events) == len(seen)
    assert list(events) == seen
    assert [encode_event(e) for e in events] == [encode_event(e) for e in seen]
    assert list(reversed(events)) == seen[::-1]
    assert [events[i] for i in range(len(seen))] == seen
    assert [events[-i] for i in range(1, len(seen) + 1)] == seen[::-1]
    for cut in (slice(3, None), slice(None, -5), slice(2, 40, 3), slice(None, None, -7)):
        assert list(events[cut]) == seen[cut]
    assert all(type(e) is SessionEvent for e in events)


def test_chunks_are_stored_compactly_and_read_back_equal() -> None:
    s = new_session()
    seen = record(s)
    reasoning = {"type": "reasoning-delta", "index": 0, "text": "hmm"}
    block_end = {"type": "block-end", "index": 1, "block": {"type": "text", "text": "ab"}}
    chunks = [reasoning, *(_delta(f"t{i} ", 1) for i in range(30)), block_end]
    _turn(s, 1, chunks)
    assert_reads_as(s, seen)
    # a streamed delta is stored as it is appended: read back equal, not the object appended
    first_delta = next(e.seq for e in seen if e.type == "assistant/chunk")
    assert s.events[first_delta] == seen[first_delta]
    assert s.events[first_delta] is not seen[first_delta]
    # the turn's other chunks stay the objects appended until the next turn starts ...
    block_end_seq = next(e.seq for e in seen if e.data.get("chunk") == block_end)
    assert s.events[block_end_seq] is seen[block_end_seq]
    _turn(s, 2, [_delta(f"u{i}") for i in range(20)])
    assert_reads_as(s, seen)
    assert s.events[block_end_seq] == seen[block_end_seq]
    # ... and every event that is not a chunk always is
    assert all(s.events[e.seq] is e for e in seen if e.type != "assistant/chunk")
    _turn(s, 3, [_delta(t) for t in ("", "é", "🙂 ok", "", "\u0000", "naïve ", "𝔘")])
    _turn(s, 4, [_delta("v")] * 9)  # turn 3's texts are joined now: each read back as it came
    assert_reads_as(s, seen)


def test_a_stream_read_while_it_grows_reads_every_event() -> None:
    s = new_session()
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    for i in range(5):
        s.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": _delta(f"{i}")})
    out: list[SessionEvent] = []
    for ev in s.events:  # the run being read grows while it is read
        out.append(ev)
        if ev.seq in (3, 5):
            s.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": _delta("more")})
    assert [e.seq for e in out] == list(range(len(s))) and len(s) == 9
    assert [e.data["chunk"] for e in out[-2:]] == [_delta("more")] * 2


def test_chunks_of_another_shape_are_kept_as_appended() -> None:
    s = new_session()
    seen = record(s)
    odd = [
        {"index": 0, "type": "text-delta", "text": "key order differs"},
        {"type": "text-delta", "index": 0, "text": "extra key", "x": 1},
        {"type": "text-delta", "index": -1, "text": "negative index"},
        {"type": "text-delta", "index": 0, "text": 5},
        {"type": ["not", "a", "tag"], "index": 0, "text": "x"},
        {"type": "text-delta", "index": True, "text": "a bool is not an index"},
    ]
    _turn(s, 1, odd * 3)
    _turn(s, 2, [_delta("ignorable")] * 10, ignorable=True)
    _turn(s, 3, [_delta("x")])
    assert_reads_as(s, seen)
    first = next(e.seq for e in seen if e.type == "assistant/chunk")
    for i in range(first, first + len(odd)):  # what cannot be rebuilt exactly was kept as it came
        assert encode_event(s.events[i]) == encode_event(seen[i])
    ignorable = [e for e in s.events if e.type == "assistant/chunk" and e.ignorable]
    assert len(ignorable) == 10


def test_short_runs_and_interleaved_events_stay_correct() -> None:
    s = new_session()
    seen = record(s)
    s.append("turn/start", {"turn": 1})
    for step in (1, 2):
        s.append("step/start", {"turn": 1, "step": step})
        for i in range(12):
            s.append("assistant/chunk", {"turn": 1, "step": step, "chunk": _delta(f"{i}")})
            if i == 5:
                s.append("llm/retry-started", {"retryId": "r", "turn": 1, "step": step, "retry": 1})
        s.append("step/end", {"turn": 1, "step": step})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    _turn(s, 2, [_delta("z")] * 3)
    assert_reads_as(s, seen)


def test_a_seeded_session_compacts_and_reads_its_seed_back() -> None:
    for seed in range(6):
        rng = random.Random(seed)
        events = scripted_log(rng.randrange, turns=5, resumes=1)
        s = Session(header=HEADER, seed=events, clock=FakeClock())
        assert_reads_as(s, events)
        fork = Session(header=HEADER, seed=list(s.events)[: len(events) // 2])
        assert_reads_as(fork, events[: len(events) // 2])
        assert fork.derive_messages() == [
            m for seq in fork.surface if (m := project_event(events[seq])) is not None
        ]


def test_reading_while_a_turn_starts_yields_only_events() -> None:
    s = new_session()
    _turn(s, 1, [_delta(f"{i}") for i in range(20)])
    out: list[SessionEvent] = []
    for ev in s.events:  # turn 2 starts (and compacts turn 1) in the middle of this loop
        out.append(ev)
        if ev.seq == 4:
            _turn(s, 2, [_delta("x")])
    assert all(type(e) is SessionEvent for e in out)
    assert [e.seq for e in out] == list(range(len(s)))


def test_the_indexes_answer_as_a_scan_of_the_log() -> None:
    for seed in range(8):
        rng = random.Random(seed)
        s = LoopScript(rng.randrange, Session(header=HEADER, clock=FakeClock())).session
        script = LoopScript(rng.randrange, s)
        for _ in range(5):
            script.run(1)
            events = list(s.events)
            for t in INDEXED:
                seqs = [e.seq for e in events if e.type == t]
                assert s.seqs_of(t) == seqs
                assert s.seqs_of(t, 1) == seqs[1:]
                latest = s.latest(t)
                assert (latest.seq if latest is not None else None) == (seqs[-1] if seqs else None)
    with pytest.raises(UsageError, match="indexes only"):
        new_session().latest("assistant/chunk")


def test_the_kept_fold_is_the_fold_of_the_surface() -> None:
    for seed in range(8):
        rng = random.Random(seed)
        s = Session(header=HEADER, clock=FakeClock())
        script = LoopScript(rng.randrange, s)
        for _ in range(5):
            script.run(1)  # appends, and pruning replacements
            first = s.derive_messages()
            expected = [m for q in s.surface if (m := project_event(s.events[q])) is not None]
            assert first == expected
            first.clear()  # a fresh list: the caller's to change
            assert s.derive_messages() == expected


def test_a_replacement_rebuilds_the_fold_and_surface_after_reads_the_new_surface() -> None:
    s = new_session()
    a = s.append("user/message", user_message("one"), surface_op="append").seq
    b = s.append("user/message", user_message("two"), surface_op="append").seq
    c = s.append("user/message", user_message("three"), surface_op="append").seq
    assert [m.text() for m in s.derive_messages()] == ["one", "two", "three"]
    assert s.surface_after(a) == (b, c) and s.surface_after(None) == (a, b, c)
    note = s.append(
        "user/message",
        user_message("one and two"),
        surface_op=ReplaceOp(start=a, end=b),
        source_event_seqs=[a, b],
    ).seq
    assert [m.text() for m in s.derive_messages()] == ["one and two", "three"]
    assert s.surface_after(note) == (c,)
    with pytest.raises(UsageError, match="not a node"):
        s.surface_after(a)
    assert s.projection(a) is not None and s.projection(a) == project_event(s.events[a])


def _turn_end_by_a_forward_read(events: list[SessionEvent], message_id: str) -> object:
    turn = find_turn(events, message_id)
    if turn is None:
        return None
    ends = [e.data["reason"] for e in turn_events(events, turn) if e.type == "turn/end"]
    return ends[0] if ends else None


def test_turn_end_reads_back_from_the_end_as_a_forward_read_does() -> None:
    for seed in range(8):
        rng = random.Random(seed)
        s = LoopScript(rng.randrange, Session(header=HEADER, clock=FakeClock())).run(4)
        s.append("user/message", user_message("between turns"), surface_op="append")
        blocked = s.last_turn + 1
        s.append("turn/start", {"turn": blocked})
        s.append("user/message", user_message("its turn ends at once"), surface_op="append")
        s.append("turn/end", {"turn": blocked, "reason": {"kind": "blocked"}})
        s.append("turn/start", {"turn": blocked + 1})
        s.append("user/message", user_message("its turn never ends"), surface_op="append")
        s.append("turn/start", {"turn": blocked + 2})  # a log no repair has closed yet
        s.append("turn/end", {"turn": blocked + 2, "reason": {"kind": "completed"}})
        s.append("turn/start", {"turn": blocked + 3})
        s.append("user/message", user_message("in the open turn"), surface_op="append")
        events = list(s.events)
        ids = [str(e.data["id"]) for e in events if e.type == "user/message"]
        for mid in [*ids, "no-such-message"]:
            assert turn_end(s.events, mid) == _turn_end_by_a_forward_read(events, mid)
        assert turn_end(s.events, ids[-1]) is None  # its turn has not ended
        assert (
            turn_end(s.events, ids[-2]) is None
        )  # nor has this one: the next turn's end is not its
        assert turn_end(s.events, ids[-3]) == {"kind": "blocked"}
        assert turn_end(s.events, ids[-4]) is None  # it came between turns


def test_a_streamed_delta_is_checked_and_copied_as_any_event_is() -> None:
    redactor = Redactor(environ={})
    redactor.add("sk-live-0123456789abcdef")
    s = Session(header=HEADER, clock=FakeClock(), redactor=redactor)
    chunk = {"type": "text-delta", "index": 2**53, "text": "key sk-live-0123456789abcdef!"}
    data: dict[str, object] = {"chunk": chunk, "turn": 1, "step": 1}  # any key order is kept
    ev = s.append("assistant/chunk", data)
    assert list(ev.data) == ["chunk", "turn", "step"]
    assert ev.data["chunk"] == {"type": "text-delta", "index": 2**53, "text": "key [redacted]!"}
    chunk["text"], data["turn"] = "changed", 7  # the log holds a copy
    assert s.events[ev.seq].data == {
        "chunk": {"type": "text-delta", "index": 2**53, "text": "key [redacted]!"},
        "turn": 1,
        "step": 1,
    }
    for bad in (2**53 + 1, -(2**53) - 1):  # beyond what JSON carries exactly: refused
        with pytest.raises(LosslessJsonError):
            s.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": _delta("x", bad)})
    with pytest.raises(UsageError, match="missing"):
        s.append("assistant/chunk", {"turn": 1, "chunk": _delta("x")})
    n = len(s)
    with pytest.raises(LosslessJsonError):
        s.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": _delta("x"), "x": float("nan")})
    assert len(s) == n  # a refused append changes nothing
    odd = s.append("assistant/chunk", {"turn": True, "step": 1, "chunk": _delta("x")})
    assert odd.data["turn"] is True  # not a plain delta: the general path keeps it as it is
    plain = s.append(
        "assistant/chunk", {"turn": 1, "step": 1, "chunk": _delta("sk-live-0123456789abcdef")}
    )
    assert plain.data["chunk"] == _delta("[redacted]")  # the delta's own path scrubs as well
    assert s.events[plain.seq] == plain


def test_a_delta_scrubs_as_the_redactor_would_scrub_its_data() -> None:
    for secret in ("my-text-delta-key", "text-delta-0123456"):  # the second begins as the kind
        redactor = Redactor(environ={})
        redactor.add(secret)
        s = Session(header=HEADER, clock=FakeClock(), redactor=redactor)
        ev = s.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": _delta(f"see {secret}")})
        expected: JsonObject = {"turn": 1, "step": 1, "chunk": {**_delta(f"see {secret}")}}  # type: ignore[dict-item]
        redactor.scrub(expected)
        assert ev.data == expected and s.events[ev.seq] == ev
        assert secret not in json.dumps(ev.data)


def test_turn_at_answers_as_a_read_back_does() -> None:
    for seed in range(8):
        rng = random.Random(seed)
        s = LoopScript(rng.randrange, Session(header=HEADER, clock=FakeClock())).run(4)
        s.append("user/message", user_message("between turns"), surface_op="append")
        s.append("turn/start", {"turn": s.last_turn + 1})
        s.append("user/message", user_message("in the open turn"), surface_op="append")
        events = list(s.events)
        for seq in range(len(events) + 1):
            expected = None
            for before in reversed(events[:seq]):
                if before.type in ("turn/start", "turn/end"):
                    expected = before.data["turn"] if before.type == "turn/start" else None
                    break
            assert s.turn_at(seq) == expected, seq


def test_append_chunk_writes_the_event_append_writes() -> None:
    from dsh_kernel.ids import CallId

    chunks: list[StreamChunk] = [
        BlockStartChunk(index=0, block_type="reasoning"),
        ReasoningDeltaChunk(index=0, text="thinking"),
        TextDeltaChunk(index=1, text="é 🙂"),
        TextDeltaChunk(index=1, text=""),
        TextDeltaChunk(index=2**53, text="the largest index JSON carries"),
        ToolCallDeltaChunk(index=2, id=CallId("c1"), name="f", arguments_delta='{"a"'),
        BlockEndChunk(index=1, block=TextBlock(text="é 🙂")),
        UsageChunk(usage=TokenUsage(input_tokens=3, output_tokens=4)),
        FinishChunk(reason=FinishStop(), replay_state={"k": [1, None]}),
    ]
    by_chunk, by_append = new_session(), new_session()
    for turn, step in ((1, 1), (True, 2)):  # a bool turn is no plain delta: the general path
        for c in chunks:
            a = by_chunk.append_chunk(turn, step, c)
            b = by_append.append(
                "assistant/chunk", {"turn": turn, "step": step, "chunk": chunk_to_json(c)}
            )
            assert a == b and encode_event(a) == encode_event(b)
    by_chunk.append("turn/start", {"turn": 2})  # the runs of turn 1 are sealed now
    by_append.append("turn/start", {"turn": 2})
    assert list(by_chunk.events) == list(by_append.events)
    with pytest.raises(LosslessJsonError):
        by_chunk.append_chunk(2, 1, TextDeltaChunk(index=2**53 + 1, text="x"))
