"""The sql tool's bounds (issue 11, items 8 and 9): its own process and DuckDB instance with memory,
temp, thread and address-space caps, a byte cap on the result, one-line refusals of ``EXPLAIN
ANALYZE`` of anything but a read and of statements DuckDB's Python enum cannot name."""

from __future__ import annotations

import threading

import pytest

from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.readonly import check_read_only
from dsh_kernel.store.query.run import QueryError
from dsh_kernel.store.query.sandbox import SandboxLimits, child_env, safe_query

REFUSED = {
    "EXPLAIN ANALYZE DELETE FROM t_events": "DELETE",
    "EXPLAIN ANALYZE SET memory_limit = '100GB'": "SET",
    "EXPLAIN /* c */ ANALYZE (FORMAT json) INSERT INTO t_events SELECT * FROM t_events": "INSERT",
    "explain analyse copy (select 1) to '/tmp/x.csv'": "COPY",
    "EXPLAIN DELETE FROM t_events": "DELETE",
    "UPDATE EXTENSIONS": "UPDATE EXTENSIONS",
    "update /* c */ extensions (json)": "UPDATE EXTENSIONS",
}


@pytest.mark.parametrize("sql", list(REFUSED))
def test_explain_of_a_write_and_unnamed_statement_types_are_refused_in_one_line(sql: str) -> None:
    with pytest.raises(QueryError) as err:
        check_read_only(sql)
    assert err.value.code == "SQL_REFUSED"
    message = err.value.message
    assert "\n" not in message and "ValueError" not in message
    assert message.startswith("the sql tool is read-only: ")
    assert f"{REFUSED[sql]} statements are not allowed" in message


@pytest.mark.parametrize(
    "sql",
    [
        "EXPLAIN ANALYZE SELECT 1",
        "EXPLAIN (SELECT 1)",
        "EXPLAIN /* é */ ANALYZE (FORMAT json) SELECT 'é'",
        "explain analyse with x as (select 1) select * from x",
    ],
)
def test_explain_of_a_read_is_allowed(sql: str) -> None:
    check_read_only(sql)


def test_more_than_100k_characters_of_sql_are_refused() -> None:
    with pytest.raises(QueryError, match="at most 100,000 characters") as err:
        check_read_only("SELECT 1 --" + "x" * 100_000)
    assert err.value.code == "SQL_REFUSED"


def test_the_query_runs_in_its_own_locked_instance_with_the_caps(store: Store) -> None:
    ingest(store)
    r = safe_query(
        store,
        "SELECT current_setting('memory_limit'), current_setting('threads'), "
        "current_setting('max_temp_directory_size'), current_setting('lock_configuration'), "
        "current_setting('enable_external_access')",
    )
    assert r.rows == (("244.1 MiB", 1, "488.2 MiB", True, False),)
    assert not list(store.root.glob(".sql-tool-*")), "the call's directory was left behind"


def test_a_one_gigabyte_cell_is_a_clear_memory_error(store: Store) -> None:
    ingest(store)
    with pytest.raises(QueryError) as err:
        safe_query(store, "SELECT repeat('x', 1000000000) AS s")
    assert err.value.code == "SQL_MEMORY"
    assert err.value.message.startswith("the query needs more memory than the sql tool allows")
    assert "\n" not in err.value.message


def test_the_temp_directory_is_capped(store: Store) -> None:
    ingest(store)
    small = SandboxLimits(memory_mb=64, temp_mb=8)
    with pytest.raises(QueryError) as err:
        safe_query(
            store,
            "SELECT range, repeat('x', 200) AS s FROM range(1000000) ORDER BY s DESC, range",
            limits=small,
        )
    assert err.value.code == "SQL_MEMORY"
    assert "8 MB of temp files" in err.value.message and "offload" in err.value.message


def test_rows_stop_at_the_byte_cap_and_cells_are_cut(store: Store) -> None:
    ingest(store)
    limits = SandboxLimits(result_bytes=20_000, cell_chars=500)
    r = safe_query(
        store, "SELECT range AS i, repeat('x', 5000) AS s FROM range(100)", limits=limits
    )
    assert r.truncated and 0 < r.row_count < 100
    assert r.rows[0] == (0, "x" * 500 + "… [4500 characters cut]")
    assert any("20,000-byte cap" in n for n in r.notices), r.notices


def test_a_stopped_query_ends_its_process(store: Store) -> None:
    ingest(store)
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    with pytest.raises(QueryError) as err:
        safe_query(store, "SELECT sum(hash(range)) FROM range(50000000000)", stop=stop)
    assert err.value.code == "SQL_INTERRUPTED"


def test_the_query_process_gets_no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-the-child")
    monkeypatch.setenv("DSH_API_KEY", "sk-test-not-for-the-child")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    env = child_env()
    assert "sk-test-not-for-the-child" not in env.values()
    assert env["LC_ALL"] == "C.UTF-8" and "PATH" in env
