"""run_query: bound parameters, DataFrame joins, DuckDB's errors, limits, the live session, and lock
contention with other processes (ingest defers, queries fall back to the journals)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import pandas as pd
import pytest

from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import QueryError, run_query
from dsh_kernel.testing import text_response

from .conftest import PY, chat, make_agent, record_rich_session, usage


@contextmanager
def db_held_by_another_process(store: Store) -> Iterator[int]:
    """A child process holding sessions.duckdb read-write until released."""
    code = (
        "import duckdb, sys\n"
        f"c = duckdb.connect({str(store.db_path)!r})\n"
        "print('locked', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    with subprocess.Popen(
        [PY, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "locked"
            yield child.pid
        finally:
            assert child.stdin is not None
            child.stdin.write("\n")
            child.stdin.flush()
            child.wait(timeout=10)


async def test_parameters_are_bound_never_pasted(store: Store) -> None:
    agent, writer = await record_rich_session(store)
    sneaky = "x' OR '1'='1"
    assert run_query(store, "SELECT count(*) FROM messages WHERE text = ?", [sneaky]).rows == (
        (0,),
    )
    named = run_query(
        store,
        "SELECT count(*) FROM messages WHERE session_id = $sid AND source = $src",
        {"sid": agent.id, "src": "user"},
    )
    assert named.rows == ((2,),)
    writer.close()


async def test_namespace_dataframes_join_by_name(store: Store) -> None:
    agent, writer = await record_rich_session(store)
    owners = pd.DataFrame(
        {"tool": ["add", "lookup", "python"], "team": ["math", "data", "notebook"]}
    )
    events = pd.DataFrame({"x": [1]})  # same name as a store view: the view wins, with a notice
    result = run_query(
        store,
        "SELECT o.team, count(*) AS calls FROM tool_calls t JOIN owners o ON o.tool = t.name "
        "GROUP BY o.team ORDER BY o.team",
        namespace={"owners": owners, "events": events, "unused": owners, "n": 3},
    )
    assert result.rows == (("data", 1), ("math", 1), ("notebook", 2))
    shadowed = run_query(store, "SELECT count(*) FROM events", namespace={"events": events})
    assert shadowed.rows[0][0] == len(agent.session)
    assert any("hidden by the store's 'events'" in n for n in shadowed.notices)
    frame = result.frame()
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == ["team", "calls"]
    writer.close()


async def test_errors_keep_duckdbs_message_and_position(store: Store) -> None:
    agent, writer = await record_rich_session(store)
    with pytest.raises(QueryError) as err:
        run_query(store, "SELECT count(*) FRM events")
    assert (
        err.value.code == "SQL_SYNTAX"
        and "LINE 1" in err.value.message
        and "^" in err.value.message
    )
    with pytest.raises(QueryError) as err:
        run_query(store, "SELECT * FROM no_such_view")
    assert (
        err.value.code == "SQL_CATALOG"
        and "no_such_view" in err.value.message
        and "LINE 1" in err.value.message
    )
    for write in (
        "DELETE FROM t_events",
        "INSERT INTO prices VALUES ('a','b',1,1,1,1)",
        "DROP VIEW events",
    ):
        with pytest.raises(QueryError) as err:
            run_query(store, write)
        assert err.value.code == "SQL_READ_ONLY", write
    assert run_query(store, "SELECT count(*) FROM events").rows[0][0] == len(agent.session)
    writer.close()


def test_row_limit_and_time_limit(store: Store) -> None:
    ingest(store)
    r = run_query(store, "SELECT * FROM range(100)", max_rows=10)
    assert r.row_count == 10 and r.truncated and "truncated" in r.summary()
    assert r.summary().endswith(" ms")
    assert replace(r, timed=False).summary() == "10 rows (truncated: more rows exist)"
    assert not run_query(store, "SELECT * FROM range(10)", max_rows=10).truncated
    with pytest.raises(QueryError) as err:
        run_query(store, "SELECT count(*) FROM range(100000000000) a, range(10) b", timeout_s=0.2)
    assert err.value.code == "SQL_TIMEOUT"


async def test_the_current_session_is_always_up_to_date(store: Store) -> None:
    agent, _, writer = make_agent(
        store, [text_response("one", usage=usage()), text_response("two", usage=usage())]
    )
    writer.window_s = 60.0  # nothing reaches the file but checkpoints and explicit flushes
    await chat(agent, "first")
    assert run_query(store, "SELECT count(*) FROM turns", live=[writer]).rows == ((1,),)
    agent.session.append("session/title", {"title": "named just now", "source": {"kind": "user"}})
    assert writer.pending == 1
    r = run_query(store, "SELECT title FROM sessions", live=[writer])
    assert r.rows == (("named just now",),)
    await chat(agent, "second")
    assert run_query(store, "SELECT count(*) FROM turns", live=[writer]).rows == ((2,),)
    writer.close()


async def test_a_locked_database_defers_ingest_and_queries_fall_back_to_journals(
    store: Store,
) -> None:
    agent, writer = await record_rich_session(store)
    ingest(store)
    await chat_more(agent)
    writer.flush()
    with db_held_by_another_process(store) as pid:
        report = ingest(store, timeout_s=0.3)
        assert report.status == "deferred" and report.notice is not None
        assert "lock" in report.notice and str(pid) in report.notice
        r = run_query(store, "SELECT count(*) FROM events", live=[writer], lock_timeout_s=0.3)
        assert r.source == "journals"
        assert r.rows[0][0] == len(agent.session)  # the latest events are in the answer
        assert any("answered from the journals" in n for n in r.notices)
        views = run_query(store, "SELECT count(*) FROM turns", lock_timeout_s=0.3)
        assert views.rows == ((3,),) and views.source == "journals"
    after = run_query(store, "SELECT count(*) FROM events")
    assert after.source == "database" and after.rows[0][0] == len(agent.session)
    writer.close()


async def chat_more(agent: object) -> None:
    provider = agent.provider  # type: ignore[attr-defined]
    provider.push(text_response("more", usage=usage()))
    await chat(agent, "one more")  # type: ignore[arg-type]


async def test_plain_duckdb_in_another_process_reads_the_views(store: Store) -> None:
    agent, writer = await record_rich_session(store)
    writer.close()
    ingest(store)
    code = (
        "import duckdb, json, sys\n"
        f"c = duckdb.connect({str(store.db_path)!r}, read_only=True)\n"
        "out = {v: c.execute(f'SELECT count(*) FROM {v}').fetchone()[0] for v in "
        "['sessions','turns','messages','events','tool_calls','requests','usage','approvals','code_runs','errors']}\n"
        "out['title'] = c.execute('SELECT title FROM sessions').fetchone()[0]\n"
        "print(json.dumps(out))\n"
    )
    run = await asyncio.to_thread(
        subprocess.run, [PY, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["events"] == len(agent.session) and got["sessions"] == 1 and got["turns"] == 2
    assert (
        got["tool_calls"] == 4
        and got["requests"] == 7
        and got["code_runs"] == 2
        and got["errors"] == 3
    )
    assert got["title"] == "What is 2+3? Use the tools."


def test_queries_on_an_empty_store(store: Store) -> None:
    r = run_query(store, "SELECT count(*) FROM sessions")
    assert r.rows == ((0,),) and r.source == "database"
