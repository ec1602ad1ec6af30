"""Compaction in the store (issue 16): the ``compactions`` view (done, failed, orphaned, then stale),
the summary calls as ``requests``/``usage`` rows (purpose ``compaction``, priced, numbered in log
order), ``message_count`` counting what was actually sent, every original message kept with what
replaced it, incremental ingest agreeing with one pass, the transcript note, the Parquet export, and
the rebuild of a store made by the previous schema."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

import duckdb
import pytest

from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.log import Session
from dsh_kernel.session.usage import usage_totals
from dsh_kernel.store.db import open_db
from dsh_kernel.store.ingest.incremental import ingest, set_price
from dsh_kernel.store.journal import attach_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.store.sessions import export_parquet
from dsh_kernel.testing import error_response, text_response, tool_call_response
from dsh_kernel.transcript.markdown import export_markdown

from .compaction_session import (
    BIG,
    HEADER,
    MODEL,
    PROVIDER,
    SID,
    SUMMARY_1,
    SUMMARY_USAGE,
    Recorded,
    clock,
    record_compacted_session,
    resume_after_crash,
    usage,
)
from .conftest import as_before_projection_versions


def q(store: Store, sql: str, params: object = None) -> list[tuple[object, ...]]:
    with open_db(store, read_only=True) as con:
        return con.execute(sql, params).fetchall()


@pytest.fixture
def recorded(store: Store) -> Recorded:
    """The session ingested, the kernel dead in turn 5."""
    r = record_compacted_session(store)
    ingest(store)  # the writer is gone: crash repair closes turn 5 (never the compaction)
    return r


COMPACTIONS = (
    "SELECT compaction_id, turn, step, trigger, status, method, failure_code, error_code, turns, "
    "pruned, provider, input_tokens, cache_read_tokens, output_tokens, summary IS NOT NULL "
    "FROM compactions ORDER BY start_seq"
)


def test_one_row_per_compaction_attempt_and_an_orphan_goes_stale_on_resume(
    store: Store, recorded: Recorded
) -> None:
    u = SUMMARY_USAGE
    rows = [
        ("cmp-p", 3, 1, "pressure", "done", "model", None, None, [1, 2], 1, PROVIDER,
         u.input_tokens, u.cache_read_tokens, u.output_tokens, True),
        ("cmp-m", None, None, "manual", "done", "reduction", "RATE_LIMIT", None, [1, 2, 3], 0,
         PROVIDER, None, None, None, True),
        ("cmp-f", 4, 1, "overflow", "failed", None, None, "ABORTED", None, 0, None,
         None, None, None, False),
        ("cmp-o", 5, 1, "pressure", "orphaned", None, None, None, None, 0, None, None, None, None,
         False),
    ]  # fmt: skip
    assert q(store, COMPACTIONS) == rows
    s, seqs = recorded.session, recorded.seqs
    [(start, summary, message, end, shadowed, before, after, context, window, text)] = q(
        store,
        "SELECT start_seq, summary_seq, message_seq, end_seq, shadowed_seqs, tokens_before, "
        "tokens_after, context_tokens, context_window, summary FROM compactions "
        "WHERE compaction_id = 'cmp-p'",
    )
    event = s.events[summary]  # type: ignore[index]
    assert event.type == "compaction/summary" and text == SUMMARY_1
    assert (message, shadowed) == (seqs["s1"], event.data["shadowedSeqs"])
    assert (before, after) == (event.data["shadowedTokenCount"], event.data["summaryTokenCount"])
    assert s.events[start].type == "compaction/start" and s.events[end].type == "compaction/end"  # type: ignore[index]
    assert (context, window) == (s.events[start].data["tokens"], 4096)  # type: ignore[index]
    assert q(store, "SELECT end_seq, duration_ms FROM compactions WHERE status = 'orphaned'") == [
        (None, None)
    ]

    resume_after_crash(store, recorded)  # session/end-seed, then turn 6
    ingest(store)
    assert q(store, "SELECT compaction_id, status FROM compactions ORDER BY start_seq") == [
        ("cmp-p", "done"),
        ("cmp-m", "done"),
        ("cmp-f", "failed"),
        ("cmp-o", "stale"),
    ]


def test_summary_calls_are_requests_and_message_count_is_what_was_sent(
    store: Store, recorded: Recorded
) -> None:
    resumed = resume_after_crash(store, recorded)
    ingest(store)
    rows = q(
        store,
        "SELECT request, turn, step, attempt, purpose, compaction_id, finish, error_code, "
        "message_count, input_tokens, cache_read_tokens, output_tokens, estimated "
        "FROM requests ORDER BY request",
    )
    u = SUMMARY_USAGE
    assert rows == [
        (1, 1, 1, 1, "agent", None, "tool-calls", None, 1, 100, None, 10, False),
        (2, 1, 2, 1, "agent", None, "stop", None, 3, 2000, None, 12, False),
        (3, 2, 1, 1, "agent", None, "stop", None, 5, 2100, None, 9, False),
        # the summary of turns 1-2 (six messages) and its instruction, before turn 3's request
        (4, 3, 1, None, "compaction", "cmp-p", "stop", None, 7, u.input_tokens,
         u.cache_read_tokens, u.output_tokens, False),
        (5, 3, 1, 1, "agent", None, "stop", None, 2, 300, None, 20, False),
        # %agent compact between turns: the call failed without usage, a reduction stood in
        (6, None, None, None, "compaction", "cmp-m", "error", "RATE_LIMIT", 3, None, None, None,
         False),
        (7, 4, 1, 1, "agent", None, "error", "CONTEXT_WINDOW_EXCEEDED", 3, None, None, None, False),
        # turn 5 made no call (the kernel died inside its compaction); turn 6 after the resume
        (8, 6, 1, 1, "agent", None, "stop", None, 5, 150, None, 3, False),
    ]  # fmt: skip
    # what the log itself derives at each agent request: count and the meter's estimate
    agent = q(
        store,
        "SELECT r.message_count, a.est_input_tokens FROM requests r JOIN t_attempts a "
        "USING (session_id, turn, step, attempt) WHERE r.purpose = 'agent' ORDER BY r.request",
    )
    assert agent == resumed.sent
    [(provider, model, config, header)] = q(
        store,
        "SELECT provider, model, config, header_seq FROM requests WHERE compaction_id = 'cmp-p'",
    )
    assert (provider, model, header) == (PROVIDER, MODEL, 0)
    assert json.loads(str(config)) == {"provider": PROVIDER, "model": MODEL, "maxTokens": 512}
    assert q(store, "SELECT source, code FROM errors WHERE seq = (SELECT first_seq FROM requests WHERE compaction_id = 'cmp-m')") == [("request", "RATE_LIMIT")]  # fmt: skip


def test_a_session_cost_includes_its_compactions(store: Store, recorded: Recorded) -> None:
    set_price(
        store,
        provider=PROVIDER,
        model=MODEL,
        input_per_mtok=1.0,
        output_per_mtok=4.0,
        cached_input_per_mtok=0.1,
    )
    ingest(store)
    u = SUMMARY_USAGE
    want = (u.input_tokens * 1.0 + (u.cache_read_tokens or 0) * 0.1 + u.output_tokens * 4.0) / 1e6
    [(purpose, cost, source)] = q(
        store,
        "SELECT purpose, cost, price_source FROM usage WHERE request = 4 AND session_id = ?",
        [SID],
    )
    assert (purpose, source) == ("compaction", "user") and cost == pytest.approx(want)
    # the failed summary call reported no usage: no usage row, as a failed attempt without usage
    assert q(store, "SELECT count(*) FROM usage WHERE request = 6") == [(0,)]
    [(total, by_purpose)] = q(
        store,
        "SELECT (SELECT cost FROM sessions), (SELECT sum(cost) FROM usage)",
    )
    assert total == pytest.approx(by_purpose)
    assert q(store, "SELECT purpose, count(*) FROM usage GROUP BY ALL ORDER BY ALL") == [
        ("agent", 4),  # turn 4's failed attempt reported no usage either
        ("compaction", 1),
    ]
    [(requests, turn_cost)] = q(store, "SELECT requests, cost FROM turns WHERE turn = 3")
    agent_cost = (300 * 1.0 + 20 * 4.0) / 1e6
    assert requests == 2 and turn_cost == pytest.approx(want + agent_cost)
    # ``%agent cost`` reads the log the same way: the summary call's tokens are in its totals
    totals = usage_totals(recorded.session.events)
    [(inp, out)] = q(store, "SELECT sum(input_tokens), sum(output_tokens) FROM usage")
    assert (totals.input_tokens, totals.output_tokens) == (inp, out)
    in_turn = usage_totals(recorded.session.events, turn=3)
    assert in_turn.requests == 2 and in_turn.output_tokens == 20 + u.output_tokens


def test_every_original_message_stays_and_says_what_replaced_it(
    store: Store, recorded: Recorded
) -> None:
    resumed = resume_after_crash(store, recorded)
    ingest(store)
    s, seqs = resumed.session, resumed.seqs
    assert q(store, "SELECT count(*), max(seq) FROM events") == [(len(s), len(s) - 1)]
    every = [e.seq for e in s.events if e.surface_op is not None]
    assert [r[0] for r in q(store, "SELECT seq FROM messages ORDER BY seq")] == every
    replaced = {
        r[0]: r[1]
        for r in q(store, "SELECT seq, replaced_by FROM messages WHERE replaced_by IS NOT NULL")
    }
    s1, s2, pruned = seqs["s1"], seqs["s2"], seqs["r1-pruned"]
    assert replaced == {
        seqs["u1"]: s1,
        seqs["a1"]: s1,
        seqs["r1"]: pruned,  # the huge result, by its pruned copy, which the summary replaced
        pruned: s1,
        seqs["a1b"]: s1,
        seqs["u2"]: s1,
        seqs["a2"]: s1,
        s1: s2,
        seqs["u3"]: s2,
    }
    # the model's view now, in order, is the session's own surface
    on_surface = q(
        store,
        "SELECT seq FROM messages WHERE replaced_by IS NULL ORDER BY surface_key",
    )
    assert [r[0] for r in on_surface] == list(s.surface)
    # ...and the documented formula gives the history of any request: here turn 3's
    [(first,)] = q(store, "SELECT first_seq FROM requests WHERE turn = 3 AND purpose = 'agent'")
    sent3 = q(
        store,
        "SELECT seq FROM messages WHERE seq < ? AND has_content "
        "AND (replaced_by IS NULL OR replaced_by > ?) ORDER BY surface_key",
        [first, first],
    )
    assert [r[0] for r in sent3] == [s1, seqs["u3"]]
    # tool_calls keeps the call with its original result, not the pruned copy
    assert q(store, "SELECT call_id, status, result FROM tool_calls") == [("c1", "done", BIG)]
    assert q(store, "SELECT count(*) FROM turns") == [(6,)]


def test_one_pass_and_passes_cut_inside_compactions_agree(
    store: Store, recorded: Recorded, tmp_path: Path
) -> None:
    resumed = resume_after_crash(store, recorded)
    ingest(store)
    s, seqs = resumed.session, resumed.seqs
    # each pass ends after one of these events (line = seq + 1, after the header): a prune before
    # its rewrite, the rewrite (it carries its original's turn 1 inside turn 3), a summary before its
    # message, a message before its compaction's end; a replacement then shadows nodes ingested by
    # earlier passes
    prune = next(e.seq for e in s.events if e.type == "compaction/prune")
    cuts = [prune, prune + 1, seqs["s1-event"], seqs["s1"], seqs["s2-event"], seqs["s2"], len(s)]
    source = resumed.writer.path
    lines = source.read_bytes().splitlines(keepends=True)
    other = Store.at(tmp_path / "other")
    copy = other.root / source.relative_to(store.root)
    copy.parent.mkdir(parents=True)
    copy.write_bytes(b"")
    done = 0
    with open(copy, "ab") as f:  # held like a live writer's lock: nothing repairs the copy
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        for cut in cuts:
            f.write(b"".join(lines[done : cut + 2]))
            f.flush()
            done = cut + 2
            assert ingest(other).issues == ()
            assert q(other, "SELECT max(seq) FROM events") == [(min(cut, len(s) - 1),)]
    for view in ("messages", "requests", "compactions", "t_attempts", "_ingest_state"):
        cols = "* EXCLUDE (updated_at, journal)" if view == "_ingest_state" else "*"
        sql = f"SELECT {cols} FROM {view} ORDER BY ALL"
        assert q(other, sql) == q(store, sql), view


def test_the_transcript_notes_each_compaction_and_keeps_every_turn(recorded: Recorded) -> None:
    text = export_markdown(recorded.session.events, recorded.session.header)
    s = recorded.session
    [p] = [e for e in s.events if e.type == "compaction/summary" and e.data["method"] == "model"]
    del p
    note = "*Compacted 2 earlier turns (~"  # the line the cell showed (transcript.compaction_notes)
    assert text.count(note) == 1
    # in turn 3, after its prompt and before the answer that followed the compaction
    assert text.index("now plot it") < text.index(note) < text.index("Here is the plot.")
    assert "Compacted 3 earlier turns" in text and "by a deterministic reduction" in text
    assert text.index("Here is the plot.") < text.index("Compacted 3 earlier turns")
    assert text.index("Compacted 3 earlier turns") < text.index("## Turn 4")
    # the huge result as the user saw it, never the pruned copy; no summary as a message
    assert BIG in text and "[… cut …]" not in text and "<compacted-summary>" not in text
    assert [f"## Turn {n}" in text for n in range(1, 6)] == [True] * 5


def test_the_parquet_export_holds_the_compactions(
    store: Store, recorded: Recorded, tmp_path: Path
) -> None:
    out = export_parquet(store, tmp_path / "export")
    with duckdb.connect() as con:
        rows = con.execute(
            f"SELECT compaction_id, status FROM '{out}/compactions.parquet' ORDER BY start_seq"
        ).fetchall()
    assert rows == [
        ("cmp-p", "done"),
        ("cmp-m", "done"),
        ("cmp-f", "failed"),
        ("cmp-o", "orphaned"),
    ]


def test_a_store_from_the_previous_schema_is_rebuilt(store: Store, recorded: Recorded) -> None:
    resume_after_crash(store, recorded)
    ingest(store)
    views = {
        v: q(store, f"SELECT * FROM {v} ORDER BY ALL")
        for v in ("messages", "requests", "usage", "compactions", "turns", "sessions")
    }
    state = q(store, "SELECT messages, message_tokens FROM _ingest_state")
    with open_db(store, read_only=False) as con:
        # the database as the code before m0006 left it: no fold, no summary calls, the history
        # counted without replacements
        con.execute(
            "DROP VIEW compactions; DROP VIEW messages; DROP TABLE t_compaction_calls; "
            "ALTER TABLE t_messages DROP COLUMN surface_key; "
            "ALTER TABLE t_messages DROP COLUMN replaced_by"
        )
        con.execute(
            """
            UPDATE t_attempts SET message_count = x.n, est_input_tokens = x.tokens FROM (
                SELECT a.session_id, a.turn, a.step, a.attempt, count(m.seq) AS n,
                       coalesce(sum(m.est_tokens), 0) AS tokens
                FROM t_attempts a LEFT JOIN t_messages m ON m.session_id = a.session_id
                 AND m.seq < a.first_seq AND m.has_content AND m.surface_op = 'append'
                GROUP BY ALL) x
            WHERE t_attempts.session_id = x.session_id AND t_attempts.turn = x.turn
              AND t_attempts.step = x.step AND t_attempts.attempt = x.attempt;
            UPDATE _ingest_state SET messages = x.n, message_tokens = x.tokens FROM (
                SELECT session_id, count(*) AS n, sum(est_tokens) AS tokens FROM t_messages
                WHERE has_content AND surface_op = 'append' GROUP BY ALL) x
            WHERE _ingest_state.session_id = x.session_id
            """
        )
        assert con.execute("SELECT message_count FROM t_attempts WHERE turn = 3").fetchall() == [
            (7,)
        ]  # turn 3's request counted turns 1-2 as if still sent
        as_before_projection_versions(con)
    assert ingest(store).events > 0  # rebuilt: every journal read again
    for v, want in views.items():
        assert q(store, f"SELECT * FROM {v} ORDER BY ALL") == want, v
    assert q(store, "SELECT messages, message_tokens FROM _ingest_state") == state


def _overflowing(store: Store, sid: str, *, server: bool) -> Recorded:
    """Turn 1, then turn 2 overflows — reported by the server (a failed call first) or found before
    sending — and its compaction replaces turn 1; then the turn is cancelled: before the retry's
    first chunk (server), or during the tool its one call asked for (before sending)."""
    s = Session(header=SessionHeader(id=sid, created_at=1_767_225_600_000), clock=clock())
    r = Recorded(session=s, writer=attach_journal(s, store))
    s.append("request/header", {"header": HEADER, "reason": "initial"})
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    r.user("u1", "hello " * 200)
    r.call("a1", 1, 1, text_response("hi " * 200, usage=usage(10, 5)))
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    s.append("turn/start", {"turn": 2})
    s.append("step/start", {"turn": 2, "step": 1})
    r.user("u2", "more")
    if server:
        r.call("a2", 2, 1, error_response("CONTEXT_WINDOW_EXCEEDED", "too long", status=400))
    s.append("compaction/start", {"compactionId": "c", "turn": 2, "trigger": "overflow"})
    nodes = [r.seqs["u1"], r.seqs["a1"]]
    r.summarise("c", "s", nodes, "turn 1: greetings", [1], method="reduction", call={})
    s.append("compaction/end", {"compactionId": "c", "turn": 2})
    if not server:
        r.call("a2", 2, 1, tool_call_response("python", {"code": "1"}, call_id="c2"))
        s.append(
            "tool/call",
            {"turn": 2, "step": 1, "callId": "c2", "name": "python", "arguments": '{"code": "1"}'},
        )
        r.tool("r2", 2, 1, "c2", "1", "cancelled", "python")
    s.append("step/end", {"turn": 2, "step": 1})
    s.append("turn/end", {"turn": 2, "reason": {"kind": "aborted", "reason": {"kind": "user"}}})
    r.writer.close()
    return r


def test_a_call_cut_before_its_first_chunk_is_counted_around_an_overflow_compaction(
    store: Store,
) -> None:
    retried = _overflowing(store, "00000016-0000-4000-8000-000000000001", server=True)
    _overflowing(store, "00000016-0000-4000-8000-000000000002", server=False)
    ingest(store)
    rows = q(
        store,
        "SELECT right(session_id, 1), turn, step, attempt, chunks > 0, finish, message_count "
        "FROM requests WHERE turn = 2 ORDER BY ALL",
    )
    assert rows == [
        # the server refused the first call; the compaction replaced turn 1; the retry was cut
        # before its first chunk, and sent the summary and the prompt
        ("1", 2, 1, 1, True, "error", 3),
        ("1", 2, 1, 2, False, None, 2),
        # found too big before sending: the one call was made after the compaction
        ("2", 2, 1, 1, True, "tool-calls", 2),
    ]
    s = retried.session
    assert [m.id for m in s.derive_messages()] == ["s-s", "u-u2"]
