"""MCP calls are queryable: ``tool_calls.server`` names the server of every MCP call that has a result
(NULL for the kernel's own tools), and ``mcp_calls`` has one row per such call — the server, the
server's own name for the tool, how it ended, its structured content and resources — whatever the
outcome (done, failed by the server, refused by the schema, timed out, denied). A store built by
the previous projection version is rebuilt by the next query and answers the same."""

from __future__ import annotations

import json

import duckdb
import pytest

from dsh_kernel.errors import StoreError
from dsh_kernel.store.db import open_db
from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.layout import Store
from dsh_kernel.store.projection import PROJECTION_VERSION
from dsh_kernel.store.query.run import run_query

from .mcp_session import (
    CONVERT_STRUCTURED,
    NOTES_URI,
    READ_FILE,
    TIME_STRUCTURED,
    WRITE_FILE,
    record_mcp_session,
)


def rows(store: Store, sql: str) -> list[tuple[object, ...]]:
    return list(run_query(store, sql).rows)


def loads(value: object) -> object:
    return None if value is None else json.loads(str(value))


async def test_tool_calls_name_the_server_of_each_mcp_call(store: Store) -> None:
    await record_mcp_session(store)
    # the server's name made fit for the providers (with a short hash); the column keeps it whole
    assert READ_FILE.startswith("my_files__read_file_")
    assert rows(
        store, "SELECT call_id, name, server, status FROM tool_calls ORDER BY call_seq"
    ) == [
        ("m-time", "time__get_current_time", "time", "done"),
        ("m-bad", "time__get_current_time", "time", "failed"),
        ("m-convert", "time__convert_time", "time", "failed"),
        ("m-read", READ_FILE, "my.files", "done"),
        ("m-write", WRITE_FILE, "my.files", "denied"),
        ("m-query", "db__query", "db", "failed"),
        ("c-own", "add", None, "done"),
    ]


async def test_mcp_calls_has_one_row_per_mcp_call_whatever_its_outcome(store: Store) -> None:
    _, (time, files, db) = await record_mcp_session(store)
    got = rows(
        store,
        "SELECT call_id, name, server, tool, status, is_error, error_code, structured_content, "
        "resources FROM mcp_calls ORDER BY call_seq",
    )
    assert [(*r[:7], loads(r[7]), r[8]) for r in got] == [
        ("m-time", "time__get_current_time", "time", "get_current_time", "done", False, None,
         TIME_STRUCTURED, None),
        ("m-bad", "time__get_current_time", "time", "get_current_time", "failed", True,
         "INVALID_ARGS", None, None),
        ("m-convert", "time__convert_time", "time", "convert_time", "failed", True,
         "MCP_TOOL_ERROR", CONVERT_STRUCTURED, None),
        ("m-read", READ_FILE, "my.files", "read_file", "done", False, None, None,
         [NOTES_URI]),
        ("m-write", WRITE_FILE, "my.files", "write_file", "denied", True, "DENIED",
         None, None),
        ("m-query", "db__query", "db", "query", "failed", True, "MCP_TIMEOUT", None, None),
    ]  # fmt: skip
    # only the calls that passed the schema and the approval reached a server
    assert [c for c, _ in time.calls] == ["get_current_time", "convert_time"]
    assert files.calls == [("read_file", {"path": "notes.txt"})]
    assert db.calls == [("query", {"sql": "SELECT 1"})]
    # a denied call's meta is the origin alone; the server's words are the result the model saw
    [(meta, result)] = rows(store, "SELECT meta, result FROM tool_calls WHERE call_id = 'm-write'")
    assert loads(meta) == {"origin": {"mcp": "my.files", "tool": "write_file"}}
    assert isinstance(result, str) and result.startswith("Error:")
    [(text,)] = rows(store, "SELECT result FROM mcp_calls WHERE call_id = 'm-convert'")
    assert text == "Error: unknown timezone: Mars/Base"


async def test_mcp_calls_agree_with_tool_calls(store: Store) -> None:
    await record_mcp_session(store)
    shared = (
        "session_id, turn, step, call_id, name, server, arguments, started_at, ended_at, "
        "duration_ms, status, is_error, error_code, error_name, result, call_seq, result_seq, seeded"
    )
    mcp = rows(store, f"SELECT {shared} FROM mcp_calls ORDER BY call_seq")
    assert len(mcp) == 6
    assert mcp == rows(
        store, f"SELECT {shared} FROM tool_calls WHERE server IS NOT NULL ORDER BY call_seq"
    )
    assert all(r[3] != "c-own" for r in mcp)
    assert rows(store, "SELECT DISTINCT turn, step IS NOT NULL FROM mcp_calls") == [(1, True)]
    assert rows(store, "SELECT count(*) FROM mcp_calls WHERE duration_ms IS NULL") == [(0,)]


async def test_a_store_of_the_previous_projection_is_rebuilt_by_the_next_query(
    store: Store,
) -> None:
    await record_mcp_session(store)
    ingest(store)
    want = rows(store, "SELECT * FROM mcp_calls ORDER BY call_seq")
    assert len(want) == 6
    with open_db(store, read_only=False) as con:
        # as the previous version left it: no mcp_calls, a tool_calls without server
        con.execute("UPDATE _projection SET version = ?", [PROJECTION_VERSION - 1])
        con.execute("DROP VIEW mcp_calls")
        con.execute(
            "CREATE OR REPLACE VIEW tool_calls AS SELECT session_id, call_id FROM t_tool_calls"
        )
    with pytest.raises(StoreError) as err, open_db(store, read_only=True):
        pass
    assert err.value.code == "DB_OUTDATED"
    answered = run_query(
        store, "SELECT server, count(*) FROM mcp_calls GROUP BY server ORDER BY server"
    )
    assert answered.source == "database"  # its ingest rebuilt the projection first
    assert answered.rows == (("db", 1), ("my.files", 2), ("time", 3))
    assert rows(store, "SELECT * FROM mcp_calls ORDER BY call_seq") == want
    con = duckdb.connect(str(store.db_path), read_only=True)
    try:
        assert con.execute("SELECT version FROM _projection").fetchall() == [(PROJECTION_VERSION,)]
    finally:
        con.close()
