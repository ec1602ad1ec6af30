"""``Session.append_chunks`` (one call per network read) writes exactly what ``append_chunk`` writes,
one chunk at a time: the same events, seqs, times and journal lines, observers notified of each in
the same order, the same compact storage once the turn is over."""

from __future__ import annotations

import random
from collections.abc import Callable

from dsh_kernel.ids import CallId
from dsh_kernel.llm.secrets import Redactor
from dsh_kernel.llm.types import (
    BlockEndChunk,
    BlockStartChunk,
    FinishChunk,
    FinishStop,
    ReasoningBlock,
    ReasoningDeltaChunk,
    StreamChunk,
    TextBlock,
    TextDeltaChunk,
    TokenUsage,
    ToolCallDeltaChunk,
    UsageChunk,
)
from dsh_kernel.session.codec import encode_event
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.session.log import Session
from dsh_kernel.testing import FakeClock
from tests.unit.session.scripts import HEADER

SECRET = "sk-live-0123456789abcdef"


def _stream(rng: random.Random) -> list[StreamChunk]:
    """A step's chunks: reasoning, text (some with a secret, some empty or exotic), a tool call."""
    texts = ["tok ", "é 🙂", "", f"see {SECRET}!", "text-delta", "\x00\n"]
    out: list[StreamChunk] = [BlockStartChunk(index=0, block_type="reasoning")]
    out += [ReasoningDeltaChunk(index=0, text=rng.choice(texts)) for _ in range(rng.randrange(5))]
    out += [
        BlockEndChunk(index=0, block=ReasoningBlock(text="r")),
        BlockStartChunk(index=1, block_type="text"),
    ]
    out += [TextDeltaChunk(index=1, text=rng.choice(texts)) for _ in range(rng.randrange(40))]
    out.append(TextDeltaChunk(index=2**53, text="the largest index JSON carries"))
    out.append(TextDeltaChunk(index=-1, text="a negative index: kept as an event"))
    out.append(ToolCallDeltaChunk(index=2, id=CallId("c1"), name="f", arguments_delta='{"a"'))
    out += [
        BlockEndChunk(index=1, block=TextBlock(text="t")),
        UsageChunk(usage=TokenUsage(input_tokens=3, output_tokens=4)),
    ]
    out.append(FinishChunk(reason=FinishStop(), replay_state={"k": [1, None]}))
    return out


def _reads(chunks: list[StreamChunk], rng: random.Random) -> list[list[StreamChunk]]:
    """``chunks`` cut into network reads of random sizes."""
    out: list[list[StreamChunk]] = []
    i = 0
    while i < len(chunks):
        n = rng.randrange(1, 12)
        out.append(chunks[i : i + n])
        i += n
    return out


def _session(clock: bool, seed: list[SessionEvent] | None = None) -> Session:
    redactor = Redactor(environ={})
    redactor.add(SECRET)
    return Session(
        header=HEADER, seed=seed or (), clock=FakeClock() if clock else None, redactor=redactor
    )


def _write(
    session: Session, steps: list[list[list[StreamChunk]]], batch: bool
) -> tuple[list[int], list[SessionEvent]]:
    seen: list[SessionEvent] = []
    session.subscribe(seen.append)
    seqs: list[int] = []
    for n, reads in enumerate(steps, start=1):
        turn = (n + 1) // 2
        if n % 2:
            session.append("turn/start", {"turn": turn})
        for read in reads:
            if batch:
                session.append_chunks(turn, n, read, seqs)
            else:
                seqs += [session.append_chunk(turn, n, c).seq for c in read]
    return seqs, seen


def _same(
    make: Callable[[], Session], steps: list[list[list[StreamChunk]]], *, wall_clock: bool
) -> None:
    one, many = make(), make()
    seqs_one, seen_one = _write(one, steps, batch=False)
    seqs_many, seen_many = _write(many, steps, batch=True)
    assert seqs_many == seqs_one
    for s, seen in ((one, seen_one), (many, seen_many)):
        assert list(s.events)[s.seed_length :] == seen  # the log holds what its observers saw
    if wall_clock:  # times differ from run to run: compare all else
        seen_one = [SessionEvent(**{**_fields(e), "time": 0}) for e in seen_one]
        seen_many = [SessionEvent(**{**_fields(e), "time": 0}) for e in seen_many]
    assert seen_many == seen_one  # observers: the same events, in the same order
    assert [encode_event(e) for e in seen_many] == [encode_event(e) for e in seen_one]
    if not wall_clock:
        assert list(many.events) == list(one.events)
    assert SECRET not in "".join(encode_event(e) for e in seen_many)


def _fields(event: SessionEvent) -> dict[str, object]:
    return {
        "type": event.type,
        "seq": event.seq,
        "time": event.time,
        "data": event.data,
        "ignorable": event.ignorable,
        "surface_op": event.surface_op,
        "source_event_seqs": event.source_event_seqs,
    }


def test_append_chunks_writes_what_append_chunk_writes() -> None:
    for seed in range(12):
        rng = random.Random(seed)
        steps = [_reads(_stream(rng), rng) for _ in range(4)]
        _same(lambda: _session(clock=True), steps, wall_clock=False)
        _same(lambda: _session(clock=False), steps, wall_clock=True)


def test_append_chunks_of_a_seeded_session_writes_end_seed_first() -> None:
    seed_log = _session(clock=True)
    seed_log.append("turn/start", {"turn": 1})
    seed_log.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    rng = random.Random(7)
    steps = [_reads(_stream(rng), rng) for _ in range(2)]
    _same(lambda: _session(clock=True, seed=list(seed_log.events)), steps, wall_clock=False)
    s = _session(clock=True, seed=list(seed_log.events))
    seqs: list[int] = []
    s.append_chunks(
        1, 1, [TextDeltaChunk(index=0, text="a"), TextDeltaChunk(index=0, text="b")], seqs
    )
    assert [e.type for e in s.events][2:] == [
        "session/end-seed",
        "assistant/chunk",
        "assistant/chunk",
    ]
    assert seqs == [3, 4]


def test_append_chunks_with_a_turn_json_cannot_carry_takes_the_general_path() -> None:
    for turn in (True, 2**53 + 1):
        one, many = _session(clock=True), _session(clock=True)
        chunks: list[StreamChunk] = [
            TextDeltaChunk(index=0, text="x"),
            TextDeltaChunk(index=0, text="y"),
        ]
        errors: list[str] = []
        for s, batch in ((one, False), (many, True)):
            seqs: list[int] = []
            try:
                if batch:
                    s.append_chunks(turn, 1, chunks, seqs)
                else:
                    seqs += [s.append_chunk(turn, 1, c).seq for c in chunks]
            except Exception as exc:
                errors.append(type(exc).__name__)
        assert list(many.events) == list(one.events)
        assert errors in ([], ["LosslessJsonError", "LosslessJsonError"])
