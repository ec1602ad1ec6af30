"""An empty database is prepared with every public view; the migrations of what is not derived are
recorded, run once, and refuse a newer DB; the generated schema doc matches the SQL files."""

from __future__ import annotations

import subprocess
from pathlib import Path

import duckdb
import pytest

from dsh_kernel.errors import StoreError
from dsh_kernel.store import schema_doc
from dsh_kernel.store.db import connect_memory, open_db
from dsh_kernel.store.layout import Store
from dsh_kernel.store.migrations import MIGRATIONS, applied, migrate, pending
from dsh_kernel.store.projection import prepare

from .conftest import PY

PUBLIC = (
    "sessions",
    "turns",
    "messages",
    "events",
    "tool_calls",
    "requests",
    "usage",
    "approvals",
    "code_runs",
    "errors",
)
REPO = Path(__file__).resolve().parents[3]


def test_an_empty_database_is_prepared_with_every_public_view() -> None:
    con = connect_memory()
    assert applied(con) == []
    assert pending(con) == [m.__name__ for m in MIGRATIONS]
    assert prepare(con) is True  # built
    assert applied(con) == [m.__name__ for m in MIGRATIONS]
    assert prepare(con) is False  # and then left alone
    views = {
        r[0]
        for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    }
    assert set(PUBLIC) <= views
    for v in PUBLIC:
        assert con.execute(f"SELECT count(*) FROM {v}").fetchone() == (0,)
    # the public names are views, not tables: the t_ tables are separate
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert not (set(PUBLIC) & tables)
    assert {
        "t_events",
        "t_sessions",
        "prices",
        "_ingest_state",
        "_migrations",
        "_projection",
    } <= tables


def test_migrate_twice_is_a_no_op_and_order_is_recorded(store: Store) -> None:
    with open_db(store, read_only=False) as con:
        first = con.execute("SELECT name FROM _migrations ORDER BY name").fetchall()
        assert migrate(con) == []
    with open_db(store, read_only=False) as con:
        assert con.execute("SELECT name FROM _migrations ORDER BY name").fetchall() == first
    assert [r[0] for r in first] == sorted(m.__name__ for m in MIGRATIONS)


def test_a_database_from_a_newer_version_is_refused(store: Store) -> None:
    with open_db(store, read_only=False) as con:
        con.execute("INSERT INTO _migrations VALUES ('m9999_from_the_future', now()::TIMESTAMP)")
    with pytest.raises(StoreError) as err, open_db(store, read_only=False):
        pass
    assert err.value.code == "DB_SCHEMA_NEWER"
    assert "m9999_from_the_future" in err.value.message


def test_a_failing_migration_rolls_back_and_is_not_recorded() -> None:
    con = connect_memory()
    migrate(con)

    def m9000_broken(c: duckdb.DuckDBPyConnection) -> None:
        c.execute("CREATE TABLE half_done (x INTEGER)")
        c.execute("SELECT * FROM no_such_table")

    MIGRATIONS.append(m9000_broken)
    try:
        with pytest.raises(duckdb.CatalogException):
            migrate(con)
        assert "m9000_broken" not in applied(con)
        assert con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'half_done'"
        ).fetchone() == (0,)
    finally:
        MIGRATIONS.remove(m9000_broken)


def test_schema_doc_is_current() -> None:
    path = REPO / "docs" / "store-schema.md"
    assert path.read_text(encoding="utf-8") == schema_doc.render(), (
        "docs/store-schema.md is stale: run python -m dsh_kernel.store.schema_doc"
    )
    for v in PUBLIC:
        assert f"### `{v}`" in path.read_text(encoding="utf-8")


def test_schema_doc_check_mode_fails_on_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "schema.md"
    stale.write_text("# old\n", encoding="utf-8")
    run = subprocess.run(
        [PY, "-m", "dsh_kernel.store.schema_doc", "--check", str(stale)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and "stale" in run.stderr
    assert schema_doc.main([str(stale)]) == 0
    assert schema_doc.main(["--check", str(stale)]) == 0
