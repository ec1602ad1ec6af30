"""The agent's read-only sql tool: refusals, no file access, limits, and use from a real agent turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh_kernel.kernel.toolbox.sql import render_markdown, sql_tool
from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.journal import JournalWriter
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.readonly import check_read_only
from dsh_kernel.store.query.run import QueryError
from dsh_kernel.store.query.sandbox import safe_query
from dsh_kernel.testing import text_response, tool_call_response

from .conftest import chat, make_agent, record_rich_session, usage

REFUSED = [
    "INSERT INTO prices VALUES ('p', 'm', 1, 1, 1, 1)",
    "UPDATE t_events SET type = 'x'",
    "DELETE FROM t_events",
    "CREATE TABLE x AS SELECT 1",
    "CREATE TEMP TABLE x AS SELECT 1",
    "DROP VIEW events",
    "ALTER TABLE prices ADD COLUMN x INTEGER",
    "ATTACH '/tmp/other.duckdb' AS other",
    "DETACH other",
    "COPY (SELECT * FROM events) TO '/tmp/out.csv'",
    "COPY prices FROM '/tmp/in.csv'",
    "EXPORT DATABASE '/tmp/dump'",
    "IMPORT DATABASE '/tmp/dump'",
    "INSTALL fts",
    "LOAD fts",
    "PRAGMA enable_profiling",
    "SET threads = 1",
    "RESET threads",
    "CALL pragma_version()",
    "CHECKPOINT",
    "VACUUM",
    "BEGIN TRANSACTION",
    "USE memory",
    "SELECT 1; SELECT 2",
]


@pytest.mark.parametrize("sql", REFUSED)
def test_anything_but_one_select_is_refused(sql: str) -> None:
    with pytest.raises(QueryError) as err:
        check_read_only(sql)
    assert err.value.code == "SQL_REFUSED"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1",
        "WITH x AS (SELECT 1) SELECT * FROM x",
        "FROM events",
        "SHOW TABLES",
        "DESCRIBE events",
        "EXPLAIN SELECT 1",
    ],
)
def test_reads_are_allowed(sql: str) -> None:
    check_read_only(sql)


def test_refusal_happens_before_anything_runs(store: Store) -> None:
    with pytest.raises(QueryError) as err:
        safe_query(store, "CREATE TABLE evil AS SELECT 1")
    assert err.value.code == "SQL_REFUSED"
    assert not store.db_path.exists()  # refused before even ingesting


def test_no_file_access_from_a_select(store: Store, tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n42\n")
    ingest(store)
    with pytest.raises(QueryError) as err:
        safe_query(store, f"SELECT * FROM read_csv('{secret}')")
    assert "disabled" in err.value.message or "Permission" in err.value.message


def test_row_limits(store: Store) -> None:
    ingest(store)
    r = safe_query(store, "SELECT * FROM range(50)", max_rows=5)
    assert r.row_count == 5 and r.truncated
    assert safe_query(store, "SELECT * FROM range(5000)", max_rows=10_000).row_count == 1000
    text = render_markdown({"columns": ["a"], "rows": [[1], [2]], "truncated": True, "notices": []})
    assert (
        text.splitlines()[:4] == ["| a |", "|---|", "| 1 |", "| 2 |"] and "more rows exist" in text
    )


async def test_the_model_queries_its_own_history_mid_turn(store: Store) -> None:
    writers: list[JournalWriter] = []
    tool = sql_tool(store, live=lambda: writers)
    agent, provider, writer = make_agent(
        store,
        [
            tool_call_response(
                "sql",
                {"sql": "SELECT turn, prompt FROM turns ORDER BY turn"},
                call_id="q1",
                usage=usage(),
            ),
            tool_call_response("sql", {"sql": "DELETE FROM t_events"}, call_id="q2", usage=usage()),
            text_response("I looked.", usage=usage()),
        ],
        extra_tools=[tool],
    )
    writers.append(writer)
    await chat(agent, "what did I ask so far?")
    provider.assert_consumed()
    results = [e for e in agent.session.events if e.type == "tool/result"]
    message: Any = results[0].data["message"]
    first = message["content"][0]["content"][0]["text"]
    assert (
        "| turn | prompt |" in first and "| 1 | what did I ask so far? |" in first
    )  # the open turn is there
    assert results[0].data["meta"]["rowCount"] == 1  # type: ignore[index]
    second = results[1].data
    assert second["error"]["code"] == "SQL_REFUSED"  # type: ignore[index]
    writer.close()


async def test_sql_tool_sees_other_sessions(store: Store) -> None:
    _, first = await record_rich_session(store)
    first.close()
    r = safe_query(store, "SELECT count(*) FROM sessions")
    assert r.rows == ((1,),)
