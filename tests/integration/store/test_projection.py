"""``sessions.duckdb`` is a versioned projection of the journals: a store the previous code left, or
one built with an older projection version, is rebuilt on its next read-write open and answers as a
fresh one does, the user's prices kept; a newer version is refused, read-write and read-only; a
changed views file is re-applied without a rebuild; two processes opening an old store at once
rebuild it once."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import duckdb
import pytest

from dsh_kernel.errors import StoreError
from dsh_kernel.store.db import open_db
from dsh_kernel.store.ingest.incremental import ingest, read_prices, set_price
from dsh_kernel.store.layout import Store
from dsh_kernel.store.migrations import MIGRATIONS
from dsh_kernel.store.projection import PROJECTION_VERSION, built_version
from dsh_kernel.store.query.run import run_query

from .conftest import PY, as_before_projection_versions, record_rich_session

VIEWS = (
    "sessions",
    "turns",
    "messages",
    "events",
    "tool_calls",
    "requests",
    "usage",
    "compactions",
    "approvals",
    "code_runs",
    "errors",
    "price_book",
)


def answers(store: Store) -> dict[str, list[tuple[object, ...]]]:
    with open_db(store, read_only=True) as con:
        return {v: con.execute(f"SELECT * FROM {v} ORDER BY ALL").fetchall() for v in VIEWS}


def raw(store: Store, sql: str) -> list[tuple[object, ...]]:
    """``sql`` on the database file as it is, without the store's checks (nothing rebuilt)."""
    con = duckdb.connect(str(store.db_path), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


async def fresh(store: Store) -> dict[str, list[tuple[object, ...]]]:
    """A recorded session, ingested, with a user price for its model; the views' answers."""
    _, writer = await record_rich_session(store)
    writer.close()
    set_price(store, provider="scripted", model="m1", input_per_mtok=1.0, output_per_mtok=2.0)
    ingest(store)
    want = answers(store)
    with open_db(store, read_only=True) as con:  # priced by the user
        assert con.execute("SELECT DISTINCT price_source FROM usage").fetchall() == [("user",)]
    return want


async def test_a_store_the_previous_code_left_is_rebuilt_and_answers_the_same(store: Store) -> None:
    want = await fresh(store)
    with open_db(store, read_only=False) as con:
        # what the previous code could hold and this one must not trust: its own views and columns,
        # a table it no longer has, rows it derived otherwise
        con.execute("CREATE OR REPLACE VIEW usage AS SELECT 1 AS stale")
        con.execute("ALTER TABLE t_attempts DROP COLUMN streamed_chars")
        con.execute("CREATE TABLE t_obsolete AS SELECT 1 AS x")
        con.execute("UPDATE t_messages SET text = 'stale'")
        as_before_projection_versions(con)
    # read-only, it is refused as outdated; %%sql answers from the journals meanwhile
    with pytest.raises(StoreError) as err, open_db(store, read_only=True):
        pass
    assert err.value.code == "DB_OUTDATED"
    assert read_prices(store)  # the durable prices are readable all along
    rebuilt = run_query(store, "SELECT count(*) FROM messages WHERE text = 'stale'")
    assert rebuilt.source == "database" and rebuilt.rows == ((0,),)  # its ingest rebuilt it
    assert answers(store) == want
    assert raw(store, "SELECT name FROM _migrations") == [(m.__name__,) for m in MIGRATIONS]
    assert raw(store, "SELECT version FROM _projection") == [(PROJECTION_VERSION,)]
    assert raw(store, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 't_obsolete'") == [
        (0,)
    ]
    assert read_prices(store)[("scripted", "m1")].output_per_mtok == 2.0


async def test_an_older_projection_version_is_rebuilt(store: Store) -> None:
    want = await fresh(store)
    with open_db(store, read_only=False) as con:
        con.execute("UPDATE _projection SET version = ?", [PROJECTION_VERSION - 1])
        con.execute("DELETE FROM t_events")  # an old derivation that lost rows
    report = ingest(store)
    assert report.status == "ingested" and report.journals == 1  # read again from its start
    assert answers(store) == want


async def test_a_newer_projection_version_is_refused_never_rebuilt(store: Store) -> None:
    await fresh(store)
    events = raw(store, "SELECT count(*) FROM t_events")
    with open_db(store, read_only=False) as con:
        con.execute("UPDATE _projection SET version = ?", [PROJECTION_VERSION + 1])
    for read_only in (False, True):
        with pytest.raises(StoreError) as err, open_db(store, read_only=read_only):
            pass
        assert err.value.code == "DB_SCHEMA_NEWER", read_only
        assert f"projection version {PROJECTION_VERSION + 1}" in err.value.message
    with pytest.raises(StoreError) as err:
        ingest(store)
    assert err.value.code == "DB_SCHEMA_NEWER"
    assert raw(store, "SELECT count(*) FROM t_events") == events  # untouched


async def test_a_changed_views_file_is_reapplied_without_a_rebuild(store: Store) -> None:
    want = await fresh(store)
    with open_db(store, read_only=False) as con:
        con.execute("CREATE OR REPLACE VIEW sessions AS SELECT 1 AS stale")
        con.execute("UPDATE _projection SET views_sha256 = 'an older views.sql'")
        con.execute("UPDATE t_tool_results SET error_name = 'kept'")  # a rebuild would re-derive it
    with open_db(store, read_only=False) as con:
        built = built_version(con)
    assert built is not None and built[0] == PROJECTION_VERSION and built[1] != "an older views.sql"
    got = answers(store)
    assert got["sessions"] == want["sessions"]
    assert raw(store, "SELECT DISTINCT error_name FROM t_tool_results") == [("kept",)]


def test_an_open_of_a_current_database_writes_nothing(store: Store) -> None:
    with open_db(store, read_only=False):
        pass
    before = raw(store, "SELECT built_at FROM _projection")
    stat = store.db_path.stat()
    with open_db(store, read_only=False):
        pass
    assert raw(store, "SELECT built_at FROM _projection") == before
    assert (store.db_path.stat().st_size, store.db_path.stat().st_mtime_ns) == (
        stat.st_size,
        stat.st_mtime_ns,
    )


OPENER = """
import json, logging, sys, time
from pathlib import Path
from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.layout import Store
logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
store, go = Store.at(sys.argv[1]), float(sys.argv[2])
time.sleep(max(0.0, go - time.time()))
report = ingest(store, timeout_s=120)
print(json.dumps({"status": report.status, "events": report.events}), flush=True)
"""


async def test_two_processes_opening_an_old_store_at_once_rebuild_it_once(store: Store) -> None:
    want = await fresh(store)
    with open_db(store, read_only=False) as con:
        con.execute("UPDATE t_messages SET text = 'stale'")
        as_before_projection_versions(con)
    results, rebuilds = _race(store)
    assert rebuilds == 1, results
    # one rebuilt and re-ingested; the other waited for the lock and then found it done
    assert sorted(str(r["status"]) for r in results) == ["ingested", "up-to-date"], results
    assert answers(store) == want


def _race(store: Store) -> tuple[list[dict[str, object]], int]:
    """Two processes ingest ``store`` at the same moment; their reports and how many rebuilt."""
    go = str(time.time() + 1.5)  # both start together, however long each takes to import
    procs = [
        subprocess.Popen(
            [PY, "-c", OPENER, str(store.root), go],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results: list[dict[str, object]] = []
    rebuilds = 0
    for p in procs:
        with p:
            out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        results.append(json.loads(out))
        rebuilds += err.count("derived tables dropped")
    return results, rebuilds


def test_the_sql_files_are_the_only_schema(tmp_path: Path) -> None:
    """No migration SQL beside them: the derived schema is tables.sql and views.sql alone."""
    sql = Path(__file__).resolve().parents[3] / "dsh_kernel" / "store" / "sql"
    names = sorted(p.name for p in sql.glob("*.sql"))
    assert names == ["0010_projection.sql", "tables.sql", "views.sql"]
    text = (sql / "views.sql").read_text(encoding="utf-8")
    assert "CREATE VIEW" not in text  # every view is CREATE OR REPLACE: re-applied in place
    assert "CREATE TABLE" not in text and "UPDATE " not in text
