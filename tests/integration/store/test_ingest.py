"""Incremental ingest: by byte offset, torn tails, damaged journals, resets, attempts split across
batches, duplicate ids."""

from __future__ import annotations

import fcntl
import shutil
from pathlib import Path
from typing import Any, cast

from dsh_kernel.llm.codec import chunk_to_json
from dsh_kernel.llm.types import TokenUsage
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.log import Session
from dsh_kernel.session.usage import streamed_tokens, usage_totals
from dsh_kernel.store.db import open_db
from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.journal import attach_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.testing import error_response, text_response


def _header(n: int) -> SessionHeader:
    return SessionHeader(
        id=f"{n:08d}-0000-4000-8000-000000000000", created_at=1_767_225_600_000 + n
    )


def _user(s: Session, text: str) -> None:
    s.append(
        "user/message",
        {
            "id": f"u{len(s)}",
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
        },
        surface_op="append",
    )


def _turn(s: Session, turn: int, text: str = "hello") -> None:
    s.append("turn/start", {"turn": turn})
    s.append("step/start", {"turn": turn, "step": 1})
    _user(s, text)
    seqs = [
        s.append("assistant/chunk", {"turn": turn, "step": 1, "chunk": chunk_to_json(c)}).seq
        for c in text_response("ok")
    ]
    s.append(
        "assistant/message",
        {
            "turn": turn,
            "step": 1,
            "message": {
                "id": f"a{turn}",
                "role": "assistant",
                "content": [{"type": "text", "text": "ok"}],
                "source": {"kind": "model", "provider": "p", "model": "m"},
            },
        },
        surface_op="append",
        source_event_seqs=seqs,
    )
    s.append("step/end", {"turn": turn, "step": 1})
    s.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def _q(store: Store, sql: str) -> list[tuple[object, ...]]:
    with open_db(store, read_only=True) as con:
        return con.execute(sql).fetchall()


def test_ingest_is_incremental_by_byte_offset(store: Store) -> None:
    s = Session(header=_header(1))
    w = attach_journal(s, store)
    _turn(s, 1)
    w.flush()
    r1 = ingest(store)
    assert (r1.status, r1.events, r1.journals) == ("ingested", len(s), 1)
    first = len(s)
    _turn(s, 2, "again")
    w.flush()
    r2 = ingest(store)
    assert (r2.status, r2.events) == ("ingested", len(s) - first)  # only the new lines
    assert ingest(store).status == "up-to-date"
    n, distinct, hi = _q(store, "SELECT count(*), count(DISTINCT seq), max(seq) FROM events")[0]
    assert n == distinct == len(s) and hi == len(s) - 1
    offset, next_seq = _q(store, "SELECT byte_offset, next_seq FROM _ingest_state")[0]
    assert offset == w.path.stat().st_size and next_seq == len(s)
    assert _q(store, "SELECT turn, prompt, end_reason FROM turns ORDER BY turn") == [
        (1, "hello", "completed"),
        (2, "again", "completed"),
    ]
    w.close()


def test_a_torn_last_line_waits_for_its_end(store: Store) -> None:
    s = Session(header=_header(2))
    w = attach_journal(s, store)
    _turn(s, 1)
    w.close()
    full = w.path.read_bytes()
    _turn(s, 2)
    extra = b"".join((line + "\n").encode() for line in _lines(s)[len(full.splitlines()) :])
    # a live writer (it holds the journal's lock, so ingest leaves its open turn alone) mid-line
    with open(w.path, "ab") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        f.write(extra[:-20])
        f.flush()
        r = ingest(store)
        complete_lines = full.count(b"\n") - 1 + extra[:-20].count(b"\n")
        assert r.issues == () and r.events == complete_lines < len(s) and r.repaired == ()
        assert _q(store, "SELECT count(*) FROM events")[0][0] == complete_lines
        f.write(extra[-20:])  # the writer finishes the line
        f.flush()
        ingest(store)
    assert _q(store, "SELECT count(*) FROM events")[0][0] == len(s)


def _lines(s: Session) -> list[str]:
    from dsh_kernel.session.codec import dumps, encode_event, header_to_json

    return [dumps(header_to_json(s.header))] + [encode_event(e) for e in s.events]


def test_a_damaged_journal_is_refused_naming_its_line_and_the_rest_goes_on(store: Store) -> None:
    good, bad = Session(header=_header(3)), Session(header=_header(4))
    for s in (good, bad):
        w = attach_journal(s, store)
        _turn(s, 1)
        w.close()
    path = store.journal_path(bad.header)
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[2] = lines[2].replace('"seq":1', '"seq":"one"')
    path.write_text("\n".join(lines), encoding="utf-8")
    r = ingest(store)
    assert r.journals == 1 and r.events == len(good)
    [issue] = r.issues
    assert issue.journal == store.relative(path)
    assert f"{store.relative(path)}:3:" in issue.message and "damaged" in issue.message
    assert _q(store, "SELECT DISTINCT session_id FROM events") == [(good.id,)]
    # the damage is remembered (not re-read) until the file changes
    again = ingest(store)
    assert again.status == "up-to-date" and [i.message for i in again.issues] == [issue.message]
    lines[2] = lines[2].replace('"seq":"one"', '"seq":1')
    path.write_text("\n".join(lines), encoding="utf-8")
    fixed = ingest(store)
    assert fixed.issues == () and fixed.events == len(bad)
    assert _q(store, f"SELECT error FROM _ingest_state WHERE session_id = '{bad.id}'") == [(None,)]


def test_a_gap_in_seq_is_damage(store: Store) -> None:
    s = Session(header=_header(5))
    w = attach_journal(s, store)
    _turn(s, 1)
    w.close()
    lines = w.path.read_text(encoding="utf-8").split("\n")
    del lines[3]
    w.path.write_text("\n".join(lines), encoding="utf-8")
    [issue] = ingest(store).issues
    assert ":4:" in issue.message and "has seq 3 but seq 2 was expected" in issue.message


def test_a_replaced_or_shrunk_journal_is_reingested_from_scratch(
    store: Store, tmp_path: Path
) -> None:
    s = Session(header=_header(6))
    w = attach_journal(s, store)
    _turn(s, 1)
    _turn(s, 2)
    w.close()
    ingest(store)
    backup = tmp_path / "backup.jsonl"
    shutil.copy(w.path, backup)
    shorter = Session(header=_header(6))
    _turn(shorter, 1, "different")
    w.path.write_text("\n".join(_lines(shorter)) + "\n", encoding="utf-8")
    r = ingest(store)
    assert r.events == len(shorter)
    assert _q(store, "SELECT count(*) FROM events")[0][0] == len(shorter)
    assert _q(store, "SELECT prompt FROM turns") == [("different",)]
    assert _q(store, "SELECT count(*) FROM sessions")[0][0] == 1


def test_a_duplicate_session_id_is_refused(store: Store) -> None:
    s = Session(header=_header(7))
    w = attach_journal(s, store)
    _turn(s, 1)
    w.close()
    ingest(store)
    copy = w.path.parent / "copy-of-it.jsonl"
    shutil.copy(w.path, copy)
    [issue] = ingest(store).issues
    assert "already ingested from" in issue.message and store.relative(w.path) in issue.message
    assert _q(store, "SELECT count(*) FROM events")[0][0] == len(s)


def test_an_attempt_split_across_two_passes_merges(store: Store) -> None:
    s = Session(header=_header(8))
    w = attach_journal(s, store)
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    _user(s, "go")
    failed = error_response("RATE_LIMIT", "slow down", partial_text="par")
    for c in failed:
        s.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk_to_json(c)})
    ok = text_response("a fine answer", pieces=4, usage=TokenUsage(input_tokens=7, output_tokens=5))
    half = len(ok) // 2
    seqs = [
        s.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk_to_json(c)}).seq
        for c in ok[:half]
    ]
    w.flush()
    assert ingest(store).events == len(s)
    mid = _q(store, "SELECT attempt, chunks, finish FROM t_attempts ORDER BY attempt")
    assert mid == [(1, len(failed), "error"), (2, half, None)]
    seqs += [
        s.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk_to_json(c)}).seq
        for c in ok[half:]
    ]
    s.append(
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "message": {
                "id": "a",
                "role": "assistant",
                "content": [{"type": "text", "text": "a fine answer"}],
                "source": {"kind": "model", "provider": "p", "model": "m"},
            },
        },
        surface_op="append",
        source_event_seqs=seqs,
    )
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    w.close()
    ingest(store)
    rows = _q(
        store,
        "SELECT attempt, chunks, finish, error_code, input_tokens, output_tokens FROM requests ORDER BY attempt",
    )
    # the failed attempt streamed "par": the server had read it, so it counts at its estimate
    # (the history "go", and what streamed), as the budgets' reading counts it
    assert rows == [
        (1, len(failed), "error", "RATE_LIMIT", 9, streamed_tokens(len("par"))),
        (2, len(ok), "stop", None, 7, 5),
    ]
    py = usage_totals(s.events)
    assert (py.input_tokens, py.output_tokens) == (9 + 7, streamed_tokens(3) + 5)
    # events that do not name their turn got it from context, even across the split
    assert _q(store, "SELECT turn, step FROM events WHERE type = 'user/message'") == [(1, 1)]
    assert _q(store, "SELECT count(*) FROM events WHERE turn IS NULL") == [(0,)]


def test_a_request_whose_first_chunk_starts_a_batch_keeps_its_start(store: Store) -> None:
    s = Session(header=_header(9), clock=iter(range(1000, 100_000, 10)).__next__)
    w = attach_journal(s, store)
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    _user(s, "go")
    sent_at = s.events[-1].time
    w.flush()
    ingest(
        store
    )  # the batch ends right before the first chunk (as a before-request flush leaves it)
    for c in text_response("answer", usage=TokenUsage(input_tokens=3, output_tokens=2)):
        s.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk_to_json(c)})
    w.close()
    ingest(store)
    [(started, ttft, count)] = _q(
        store, "SELECT epoch_ms(started_at), ttft_ms, message_count FROM requests"
    )
    first_delta = next(
        e.time
        for e in s.events
        if e.type == "assistant/chunk" and cast(Any, e.data["chunk"])["type"] == "text-delta"
    )
    assert started == sent_at and ttft == first_delta - sent_at and count == 1


def test_a_deleted_database_is_rebuilt_from_the_journals(store: Store) -> None:
    s = Session(header=_header(10))
    w = attach_journal(s, store)
    _turn(s, 1)
    w.close()
    assert ingest(store).events == len(s)
    assert ingest(store).status == "up-to-date"
    store.db_path.unlink()
    again = ingest(store)
    assert (again.status, again.events) == ("ingested", len(s))
    assert _q(store, "SELECT count(*) FROM events") == [(len(s),)]
