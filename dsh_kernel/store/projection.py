"""The versioned projection: ``sessions.duckdb``'s derived tables and views, rebuilt from the journals.

Everything in the database but the user's ``prices`` is derived from the JSONL journals (imported and
mirrored sessions too: both are written to the store as journals first). So the derived schema is
not migrated: it is declared once — ``sql/tables.sql`` (the ``t_*`` tables, ``_ingest_state``,
``list_prices``) and ``sql/views.sql`` (every public view) — and versioned by
``PROJECTION_VERSION``, which ``_projection`` records. ``prepare(con)``, run by every read-write open
(``dsh_kernel.store.db``) after the migrations of what is not derived (``dsh_kernel.store.migrations``):

* a database built with this version is left alone, except that ``views.sql`` is re-applied
  (``CREATE OR REPLACE VIEW``) when its text differs from the one applied last (its sha256 is in
  ``_projection``), so an open that changes nothing writes nothing;
* a database built with another (older) version, or before there were versions (a store whose
  ``_migrations`` lists the retired ``m0001`` .. ``m0009``), is **rebuilt**: in one transaction every
  view and every table but ``prices``, ``_migrations`` and ``_projection`` is dropped, ``tables.sql``
  and ``views.sql`` applied, the version recorded and the retired migration rows deleted. With
  ``_ingest_state`` empty, the ingest pass that follows re-reads every journal (in the same open when
  that open is ``ingest``'s) — at once, not in the background, at the cost of a first ingest
  (``benchmarks/store.py``, step 5: 2,000 sessions, 145 MB of journals, 6.8 s of CPU;
  docs/architecture.md says why);
* a database built with a **newer** version is refused (``StoreError(DB_SCHEMA_NEWER)``), never
  clobbered: a newer dsh-kernel's projection may hold what this one cannot read back.

Concurrency: a read-write open holds DuckDB's file lock, which no other process can share (PLATFORM.md),
and ``open_db`` serialises the threads of one process — so one kernel rebuilds while the others' opens
retry and then defer (their ingest reports ``deferred``, a query answers from the journals); once it
commits, they find the current version and do nothing. A crash mid-rebuild rolls the transaction
back and the next open starts again; a crash mid-ingest keeps the batches committed so far.

``check_readable(con)`` is the read-only side: a database not built with this version answers
``DB_SCHEMA_NEWER`` (newer) or ``DB_OUTDATED`` (older: the next read-write open rebuilds it; callers
fall back to the journals meanwhile). To change the derived schema, edit ``tables.sql`` or
``views.sql`` (or ingest) and bump ``PROJECTION_VERSION`` — never add a migration for it.
"""

from __future__ import annotations

import hashlib
import logging

import duckdb

from dsh_kernel.errors import StoreError
from dsh_kernel.store.migrations import RETIRED, migrate, sql_text

__all__ = [
    "DURABLE_TABLES",
    "PROJECTION_VERSION",
    "built_version",
    "check_readable",
    "prepare",
    "rebuild",
]

PROJECTION_VERSION = 5
"""The version of ``tables.sql``, ``views.sql`` and ingest's derivation: bump it with any change to
them that rows already ingested would not show."""

DURABLE_TABLES = frozenset({"prices", "_migrations", "_projection"})
"""The tables a rebuild keeps: what the journals cannot give back, and the bookkeeping of both."""

_log = logging.getLogger(__name__)


def _views_sha256() -> str:
    return hashlib.sha256(sql_text("views.sql").encode("utf-8")).hexdigest()


def _has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    row = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' AND table_name = ? "
        "AND NOT temporary",
        [name],
    ).fetchone()
    return bool(row and row[0])


def built_version(con: duckdb.DuckDBPyConnection) -> tuple[int, str] | None:
    """The projection version and views hash ``con``'s database was built with; ``None`` when it was
    never built (empty, or made before there were projection versions)."""
    if not _has_table(con, "_projection"):
        return None
    row = con.execute("SELECT version, views_sha256 FROM _projection").fetchone()
    return None if row is None else (int(row[0]), str(row[1]))


def _refuse_newer(version: int) -> StoreError:
    return StoreError(
        f"the store database holds projection version {version}, newer than this dsh-kernel's "
        f"{PROJECTION_VERSION}; upgrade dsh-kernel to use it",
        code="DB_SCHEMA_NEWER",
    )


def check_readable(con: duckdb.DuckDBPyConnection) -> None:
    """Raise unless ``con``'s database was built with ``PROJECTION_VERSION`` (read-only opens)."""
    built = built_version(con)
    if built is not None and built[0] > PROJECTION_VERSION:
        raise _refuse_newer(built[0])
    if built is None or built[0] != PROJECTION_VERSION:
        raise StoreError(
            "the store database was built by an older dsh-kernel; the next ingest rebuilds it "
            "from the journals",
            code="DB_OUTDATED",
        )


def prepare(con: duckdb.DuckDBPyConnection) -> bool:
    """Migrate what is not derived, then build or rebuild the projection if its version differs (see
    the module docstring). Returns whether it was (re)built — its tables are then empty."""
    migrate(con)
    built = built_version(con)
    if built is not None and built[0] > PROJECTION_VERSION:
        raise _refuse_newer(built[0])
    if built is None or built[0] != PROJECTION_VERSION:
        rebuild(con, was=None if built is None else built[0])
        return True
    views = _views_sha256()
    if built[1] != views:
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(sql_text("views.sql"))
            con.execute("UPDATE _projection SET views_sha256 = ?", [views])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return False


def rebuild(con: duckdb.DuckDBPyConnection, *, was: int | None = None) -> None:
    """Drop every derived table and view and create them empty at ``PROJECTION_VERSION``, in one
    transaction (``prices`` and the migrations record stay). ``was``: the version replaced, logged."""
    con.execute("BEGIN TRANSACTION")
    try:
        views = con.execute(
            "SELECT view_name FROM duckdb_views() WHERE schema_name = 'main' AND NOT internal "
            "AND NOT temporary"
        ).fetchall()
        for (name,) in views:
            con.execute(f'DROP VIEW IF EXISTS "{name}"')
        tables = con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' AND NOT temporary"
        ).fetchall()
        dropped = [str(t) for (t,) in tables if str(t) not in DURABLE_TABLES]
        for name in dropped:
            con.execute(f'DROP TABLE "{name}"')
        con.execute(sql_text("tables.sql"))
        con.execute(sql_text("views.sql"))
        con.execute("DELETE FROM _projection")
        con.execute(
            "INSERT INTO _projection VALUES (?, now()::TIMESTAMP, ?)",
            [PROJECTION_VERSION, _views_sha256()],
        )
        con.execute(
            "DELETE FROM _migrations WHERE name IN (SELECT unnest($1::VARCHAR[]))",
            [sorted(RETIRED)],
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    if dropped:
        _log.info(
            "store projection %s -> %d: derived tables dropped (%s); the next ingest re-reads "
            "every journal",
            "unversioned" if was is None else was,
            PROJECTION_VERSION,
            ", ".join(dropped),
        )
