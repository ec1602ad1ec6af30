"""The shared store's bounds without a server: the numbers are the migration's, the journal is read
in bounded pieces (every line found, none held past the bound), an event over the bound becomes a
marker at its own seq that every journal reader skips, and a line out of order stops the read."""

from __future__ import annotations

import io
import json
import random
import re
from pathlib import Path

import pytest

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.session.codec import dumps
from dsh_kernel.session.journal_io import read_journal
from dsh_kernel.store.shared import send
from dsh_kernel.store.shared.bounds import (
    HEAD_BYTES,
    MAX_DATA_BYTES,
    MAX_HEADER_BYTES,
    MAX_LINE_BYTES,
    OMITTED,
    event_head,
    omitted_line,
)
from dsh_kernel.store.shared.send import JournalTail

MIGRATION = (Path(send.__file__).parent / "migrations" / "0004_bounded_events.sql").read_text(
    encoding="utf-8"
)

HEADER: JsonObject = {"type": "session", "version": 0, "id": "s1", "createdAt": 1_700_000_000_000}


def test_the_bounds_are_the_migrations() -> None:
    def bound(expr: str) -> int:
        (found,) = re.findall(re.escape(expr) + r" <= (\d+)", MIGRATION)
        return int(found)

    assert bound("octet_length(line)") == MAX_LINE_BYTES == 32 << 20
    assert bound("octet_length(data::text)") == MAX_DATA_BYTES
    assert bound("octet_length(header::text)") == MAX_HEADER_BYTES
    assert re.findall(r"octet_length\(line\) > (\d+)", MIGRATION) == [str(MAX_LINE_BYTES)]


@pytest.mark.parametrize("seed", range(20))
def test_lines_are_read_in_pieces_and_none_is_held_past_the_bound(seed: int) -> None:
    rng = random.Random(seed)
    piece, limit = rng.choice([1, 3, 7, 64]), rng.choice([0, 5, 40, 700])
    lines = [
        bytes(rng.choice(b"ab{}") for _ in range(rng.choice([0, 1, limit, limit + 1, 2000])))
        for _ in range(30)
    ]
    tail = b"unterminated" if seed % 2 else b""
    data = b"".join(line + b"\n" for line in lines) + tail
    start = rng.randrange(0, 3)
    got = list(send._lines(io.BytesIO(data[start:]), start, piece=piece, limit=limit))
    expected = data[start:].split(b"\n")[:-1]  # the unterminated tail is never a line
    assert [g.size for g in got] == [len(e) for e in expected]
    assert [g.start for g in got] == [
        start + sum(len(e) + 1 for e in expected[:n]) for n in range(len(expected))
    ]
    for g, e in zip(got, expected, strict=True):
        assert g.text == (e if len(e) <= limit else None)
        assert g.head == e[:HEAD_BYTES]


def _event(seq: int, **data: JsonValue) -> JsonObject:
    return {
        "type": "session/title",
        "seq": seq,
        "time": 1_700_000_000_000 + seq,
        "data": {"title": "t", "source": {"kind": "user"}, **data},
    }


def _write(path: Path, *lines: str) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def test_an_event_over_the_bound_is_a_marker_at_its_seq_and_the_rest_follow(tmp_path: Path) -> None:
    journal = tmp_path / "s1.jsonl"
    big = dumps(_event(1, pad="x" * MAX_LINE_BYTES))
    # another writer's key order: the seq is the line's place, the time the event's before it
    other = json.dumps(
        {"data": {"pad": "y" * MAX_LINE_BYTES}, "seq": 2, "type": "x", "time": 5},
        separators=(",", ":"),
    )
    _write(journal, dumps(HEADER), dumps(_event(0)), big, other, dumps(_event(3)))
    tail = JournalTail(path=journal, session_id="s1")
    batch = tail.read()
    assert [r.seq for r in batch.rows] == [0, 1, 2, 3]
    assert [r.type for r in batch.rows] == ["session/title", OMITTED, OMITTED, "session/title"]
    assert batch.rows[1].line == omitted_line(
        seq=1, time=1_700_000_000_001, type_="session/title", size=len(big)
    )
    assert batch.rows[2].line == omitted_line(
        seq=2, time=1_700_000_000_001, type_=None, size=len(other)
    )
    assert json.loads(batch.rows[2].line)["data"] == {"bytes": len(other), "limit": MAX_LINE_BYTES}
    assert batch.offset == journal.stat().st_size and batch.seq == 4
    tail.advance(batch)
    assert len(tail.omitted) == 2 and "event 1 (session/title) is 33,554," in tail.omitted[0]
    # the markers are ignorable events any journal reader keeps at their seq and skips
    loaded = read_journal([dumps(HEADER), *(r.line for r in batch.rows)], name="mirror")
    assert loaded.unknown_ignorable_seqs == (1, 2)
    assert [e.seq for e in loaded.events] == [0, 1, 2, 3]


def test_a_line_whose_seq_is_not_due_stops_the_read(tmp_path: Path) -> None:
    journal = tmp_path / "s1.jsonl"
    big = dumps(_event(5, pad="x" * MAX_LINE_BYTES))
    _write(journal, dumps(HEADER), dumps(_event(0)), dumps(_event(2)), dumps(_event(3)))
    tail = JournalTail(path=journal, session_id="s1")
    assert [r.seq for r in tail.read().rows] == [0]
    assert tail.torn_at == len(dumps(HEADER)) + len(dumps(_event(0))) + 2
    _write(journal, dumps(HEADER), dumps(_event(0)), big)
    tail = JournalTail(path=journal, session_id="s1")
    assert [r.seq for r in tail.read().rows] == [0]  # not a marker at the wrong seq


def test_a_header_line_over_the_bound_is_refused(tmp_path: Path) -> None:
    journal = tmp_path / "s1.jsonl"
    _write(journal, dumps({**HEADER, "cwd": "/" + "d" * MAX_HEADER_BYTES}), dumps(_event(0)))
    tail = JournalTail(path=journal, session_id="s1")
    assert tail.read().rows == []
    assert tail.refused is not None and "its header line is 65," in tail.refused
    assert tail.refused.endswith("over the shared store's 32,768 (32 KiB); not shipped")


def test_event_head() -> None:
    head = event_head(dumps(_event(12))[:HEAD_BYTES].encode())
    assert head is not None and (head.type, head.seq, head.time) == (
        "session/title",
        12,
        1_700_000_000_012,
    )
    assert event_head(b'{"seq":1,"type":"x","time":1,') is None
    assert event_head(b'{"type":"x","seq":01,"time":1,') is None
