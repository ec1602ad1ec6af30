"""Forks are counted once, lineage is queryable, and estimated usage is the token meter's.

* A fork's copy of its parent changes no documented cross-session answer (``docs/queries.md`` filters
  ``NOT seeded``), and every view with copied rows marks them ``seeded``.
* The estimate columns ingest fills are the same whether a journal is ingested in one pass or many,
  and a store the previous code left is rebuilt into exactly what ingest computes.
* For a server that reports no usage, the estimated counts of ``requests``/``usage`` equal
  ``usage_totals`` (``%agent cost``) and the token meter's estimate of what was sent and received.
"""

from __future__ import annotations

import asyncio
import shutil

from dsh_kernel.agent.request.meter import header_tokens
from dsh_kernel.llm.codec import message_from_json
from dsh_kernel.llm.estimate import message_tokens
from dsh_kernel.session.derive import EpochHeader
from dsh_kernel.session.usage import usage_totals
from dsh_kernel.store.db import open_db
from dsh_kernel.store.ingest.incremental import ingest, set_price
from dsh_kernel.store.journal import attach_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import QueryResult, run_query
from dsh_kernel.store.sessions import fork
from dsh_kernel.testing import hang, text_response, tool_call_response

from .conftest import as_before_projection_versions, chat, make_agent
from .test_queries_doc import doc_queries, owners, record_documented_sessions

SEEDED_VIEWS = ("events", "messages", "tool_calls", "approvals", "code_runs", "errors", "requests")
SEEDED_VIEWS += ("usage", "turns", "images", "notebook_edits", "mcp_calls")


async def _record(store: Store) -> None:
    sessions = await record_documented_sessions(store)
    set_price(store, provider="scripted", model="m1", input_per_mtok=0.5, output_per_mtok=2.0)
    # a fork of each session, copying everything and adding nothing: a second copy of every row
    for a in sessions:
        events = list(a.session.events)
        last = max(int(str(e.data["turn"])) for e in events if e.type == "turn/end")
        child = fork(a.session.header, events, last)
        attach_journal(child, store).close()


def _answers(store: Store) -> dict[str, list[QueryResult]]:
    out: dict[str, list[QueryResult]] = {}
    for heading, sql in doc_queries():
        if "last_active" in sql or "FROM sessions" in sql:
            continue  # about one session, or one row per session: a fork is a session of its own
        if heading == "Branches: re-run chat cells":
            continue  # about forks and rewinds themselves, over sessions the doc test adds
        out.setdefault(heading, []).append(run_query(store, sql, namespace={"owners": owners()}))
    return out


async def test_a_fork_changes_no_documented_cross_session_answer(store: Store) -> None:
    await _record(store)
    with_forks = _answers(store)
    forks = run_query(store, "SELECT journal FROM sessions WHERE parent_session IS NOT NULL").rows
    assert len(forks) == 6  # one per documented session
    for (journal,) in forks:
        (store.root / str(journal)).unlink()
    store.db_path.unlink()  # rebuilt from the journals left: the parents alone
    set_price(store, provider="scripted", model="m1", input_per_mtok=0.5, output_per_mtok=2.0)
    alone = _answers(store)
    assert len(alone) >= 10
    for heading, results in alone.items():
        assert all(r.row_count > 0 for r in results), heading
        got = [sorted(map(repr, r.rows)) for r in with_forks[heading]]
        assert got == [sorted(map(repr, r.rows)) for r in results], heading


async def test_every_view_with_copied_rows_marks_them_seeded(store: Store) -> None:
    await _record(store)
    for view in SEEDED_VIEWS:
        rows = run_query(
            store,
            f"SELECT s.parent_session IS NOT NULL AS fork, count(*) FILTER (WHERE v.seeded) AS seeded, "
            f"count(*) FILTER (WHERE NOT v.seeded) AS own FROM {view} v "
            "JOIN sessions s USING (session_id) GROUP BY ALL ORDER BY fork",
        ).rows
        (_, p_seeded, p_own), (_, f_seeded, f_own) = rows
        # the parents own every row; a fork's rows (it added nothing) are all copies of them
        assert (p_seeded, f_own) == (0, 0) and f_seeded == p_own, (view, rows)
        assert isinstance(p_own, int) and p_own > 0, (view, rows)


async def test_code_runs_list_added_changed_and_removed_names(store: Store) -> None:
    await _record(store)
    rows = run_query(
        store,
        "SELECT call_id, names_added, names_changed, names_removed FROM code_runs "
        "WHERE NOT seeded ORDER BY call_seq",
    ).rows
    assert rows == (("c-py1", ["df"], [], []), ("c-py2", None, None, None))


def _derived(store: Store) -> tuple[list[tuple[object, ...]], ...]:
    """What ingest derives beyond 0002: estimates, seeded flags, the rows of calls with no chunk."""
    with open_db(store, read_only=True) as con:
        return tuple(
            con.execute(sql).fetchall()
            for sql in (
                "SELECT session_id, seq, est_tokens, seeded FROM t_messages ORDER BY 1, 2",
                "SELECT * FROM t_attempts ORDER BY 1, 2, 3, 4",
                "SELECT journal, message_tokens FROM _ingest_state ORDER BY 1",
                "SELECT session_id, seq FROM t_events WHERE seeded ORDER BY 1, 2",
                "SELECT session_id, seq FROM t_tool_calls WHERE seeded ORDER BY 1, 2",
            )
        )


async def test_derived_columns_are_the_same_in_one_pass_in_many_and_after_a_rebuild(
    store: Store,
) -> None:
    agent, provider, writer = make_agent(
        store,
        [
            tool_call_response("add", {"a": 2, "b": 3}, call_id="e1", text="Adding."),
            text_response("It is 5.", reasoning="2 and 3", pieces=3),
            tool_call_response("lookup", {"key": "known"}, call_id="e2"),
            text_response("Found it."),
            hang(prefix=()),  # turn 3: cancelled before the first chunk
        ],
    )
    await chat(agent, "add 2 and 3")
    writer.flush()
    ingest(store)  # a first pass after turn 1, then more: context carried across passes
    await chat(agent, "look it up")
    writer.flush()
    ingest(store)
    agent.followup("and now slowly")
    while len(provider.requests) < 5:  # noqa: ASYNC110 - polling the provider is the point
        await asyncio.sleep(0.01)
    agent.cancel()
    await agent.when_idle()
    writer.close()
    child = fork(agent.session.header, list(agent.session.events), 2)
    fork_agent, _, w2 = make_agent(store, [text_response("Forked.")], session=child)
    await chat(fork_agent, "in the fork")
    w2.close()
    ingest(store)
    many = _derived(store)
    silent = [r for r in many[1] if r[9] == 0]  # chunks
    assert len(silent) == 1 and silent[0][1:4] == (3, 1, 1), many[1]
    assert many[3] and many[4]  # the fork's copies are seeded
    assert all(r[2] is not None for r in many[0])
    one = Store.at(store.root.parent / "one")
    shutil.copytree(store.journals_dir, one.journals_dir)
    ingest(one)
    assert _derived(one) == many
    # a store the previous code left (no estimates, nothing seeded, no row for the call that got no
    # chunk, no streamed_chars column) is rebuilt from the journals into the same
    with open_db(store, read_only=False) as con:
        con.execute("UPDATE t_messages SET est_tokens = NULL, seeded = false")
        con.execute("UPDATE t_attempts SET est_input_tokens = NULL, est_output_tokens = NULL")
        con.execute("DELETE FROM t_attempts WHERE chunks = 0")
        con.execute("ALTER TABLE t_attempts DROP COLUMN streamed_chars")
        con.execute("UPDATE _ingest_state SET message_tokens = NULL")
        con.execute("UPDATE t_events SET seeded = false")
        con.execute("UPDATE t_tool_calls SET seeded = false")
        as_before_projection_versions(con)
    ingest(store)
    assert _derived(store) == many


async def test_usage_without_a_report_is_the_meters_estimate(store: Store) -> None:
    agent, provider, writer = make_agent(
        store,
        [
            tool_call_response("add", {"a": 2, "b": 3}, call_id="u1", text="Let me add."),
            text_response("The sum is 5.", reasoning="two plus three", pieces=2),
        ],
        system="Be brief.",
    )
    await chat(agent, "What is 2 + 3?")
    writer.close()
    rows = run_query(
        store,
        "SELECT r.request, r.estimated, r.input_tokens, r.output_tokens, a.est_input_tokens "
        "FROM requests r JOIN t_attempts a USING (session_id, turn, step, attempt) ORDER BY request",
    ).rows
    answers = [e for e in agent.session.events if e.type == "assistant/message"]
    assert len(rows) == len(answers) == len(provider.requests) == 2
    [logged_header] = [e for e in agent.session.events if e.type == "request/header"]
    header = header_tokens(EpochHeader.from_json(logged_header.data["header"]))
    assert header > 0
    for (_, estimated, inp, out, history), answer, sent in zip(
        rows, answers, provider.requests, strict=True
    ):
        assert estimated is True
        assert out == message_tokens(message_from_json(answer.data["message"]))
        assert history == sum(message_tokens(m) for m in sent.messages)
        assert isinstance(history, int)
        assert inp == history + header  # plus the system prompt and the tools, as the meter
    totals = usage_totals(agent.session.events)
    [(inp, out, n, cost)] = run_query(
        store,
        "SELECT sum(input_tokens), sum(output_tokens), count(*) FILTER (WHERE estimated), "
        "sum(cost) FROM usage",
    ).rows
    assert (inp, out, n) == (totals.input_tokens, totals.output_tokens, 2)
    assert totals.estimated_requests == 2 and cost is None
    # unknown stays unknown with a price; an all-zero price (a local server) is known to be free
    set_price(store, provider="scripted", model="m1", input_per_mtok=1.0, output_per_mtok=1.0)
    assert run_query(store, "SELECT cost_complete, estimated FROM sessions").rows == (
        (False, True),
    )
    set_price(store, provider="scripted", model="m1", input_per_mtok=0.0, output_per_mtok=0.0)
    assert run_query(store, "SELECT cost, cost_complete FROM sessions").rows == ((0.0, True),)
