"""Ordered schema migrations for ``sessions.duckdb``, recorded in the ``_migrations`` table.

Rules (the simonw/llm discipline):

* a migration is a function registered with ``@migration``; the registration order is the apply order
  and the function name is its permanent identity;
* a shipped migration is never edited, renamed or removed — change the schema by adding a migration
  (views: ``CREATE OR REPLACE VIEW``);
* ``migrate(con)`` applies, each in its own transaction, every registered migration whose name is not in
  ``_migrations`` yet, and records it; a database with a migration this code does not know was written by
  a newer dsh-kernel and is refused (``StoreError(DB_SCHEMA_NEWER)``) rather than written to.

Migrations that are plain DDL live as ``sql/<name>.sql`` beside this module and are run by
``run_sql_file``; the generated ``docs/store-schema.md`` (``dsh_kernel.store.schema_doc``) documents the
result, so the doc test fails whenever a migration changes the schema without regenerating it.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources

import duckdb

from dsh_kernel.errors import StoreError
from dsh_kernel.store.ingest import surface as ingest_surface

Migration = Callable[[duckdb.DuckDBPyConnection], None]

MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next migration (its ``__name__`` is recorded in ``_migrations``)."""
    if any(m.__name__ == fn.__name__ for m in MIGRATIONS):
        raise ValueError(f"duplicate migration name {fn.__name__}")
    MIGRATIONS.append(fn)
    return fn


def run_sql_file(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Execute the packaged ``store/sql/<name>`` on ``con``."""
    sql = resources.files("dsh_kernel.store").joinpath("sql", name).read_text(encoding="utf-8")
    con.execute(sql)


def applied(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Names recorded in ``_migrations`` (empty when the table does not exist)."""
    exists = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = '_migrations' AND NOT temporary"
    ).fetchone()
    if not exists or not exists[0]:
        return []
    return [
        str(r[0])
        for r in con.execute("SELECT name FROM _migrations ORDER BY applied_at, name").fetchall()
    ]


def pending(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Names of the migrations not yet applied to ``con``, in order."""
    done = set(applied(con))
    return [m.__name__ for m in MIGRATIONS if m.__name__ not in done]


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply pending migrations; returns the names applied now."""
    done = set(applied(con))
    unknown = done - {m.__name__ for m in MIGRATIONS}
    if unknown:
        raise StoreError(
            f"the store database was migrated by a newer dsh-kernel (unknown migrations: "
            f"{', '.join(sorted(unknown))}); upgrade dsh-kernel to write to it",
            code="DB_SCHEMA_NEWER",
        )
    todo = [m for m in MIGRATIONS if m.__name__ not in done]
    if not todo:
        return []
    con.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP NOT NULL)"
    )
    ran: list[str] = []
    for fn in todo:
        con.execute("BEGIN TRANSACTION")
        try:
            fn(con)
            con.execute(
                "INSERT INTO _migrations VALUES (?, now()::TIMESTAMP)",
                [fn.__name__],
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        ran.append(fn.__name__)
    return ran


# --- the migrations, in order. Never edit one that has shipped. --------------------------------------


@migration
def m0001_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Typed tables fed by ingest, the prices table, and ingest bookkeeping."""
    run_sql_file(con, "0001_tables.sql")


@migration
def m0002_views(con: duckdb.DuckDBPyConnection) -> None:
    """The public views: sessions, turns, messages, events, tool_calls, requests, usage, approvals,
    code_runs, errors."""
    run_sql_file(con, "0002_views.sql")


@migration
def m0003_precision(con: duckdb.DuckDBPyConnection) -> None:
    """Views that say exactly what happened: `seeded` on every view with rows a fork copied;
    `code_runs.names_added`, `names_changed` and `names_removed`; `waiting` and `interrupted` tool-call
    statuses; requests cut before their first chunk; estimated token counts (and unknown costs) where
    the server sent no usage, with the estimates backfilled for rows ingested before."""
    run_sql_file(con, "0003_precision.sql")
    run_sql_file(con, "0003_backfill.sql")


@migration
def m0004_list_prices(con: duckdb.DuckDBPyConnection) -> None:
    """One price source: the `list_prices` table (the model catalogue, refreshed by the kernel), the
    `price_book` view (the user's price, else the list price) and `usage.cost` and
    `usage.price_source` from it."""
    run_sql_file(con, "0004_list_prices.sql")


@migration
def m0005_images(con: duckdb.DuckDBPyConnection) -> None:
    """Images (issue 15): the `images` view (one row per image a tool result or a user message
    carried: hash, media type, size, description, reduction, whether the model was sent it) and the
    `image_data` view (the bytes, once per hash); the base64 of `image/data` events is kept out of
    `events.data`; rows ingested before are backfilled."""
    run_sql_file(con, "0005_images.sql")
    run_sql_file(con, "0005_backfill.sql")


@migration
def m0006_compaction(con: duckdb.DuckDBPyConnection) -> None:
    """Compaction (issue 16): the `compactions` view (one row per compaction attempt: trigger,
    status done / failed / orphaned / stale, method, what it replaced, its summary call); `purpose`
    on `requests` and `usage` (a summary call is a request like any other, priced and numbered with
    the agent's); `messages.replaced_by` and `messages.surface_key`, the surface fold ingest keeps, so
    `requests.message_count` and the estimated input tokens count what was actually sent; rows
    ingested before are folded the same way."""
    run_sql_file(con, "0006_compaction.sql")
    ingest_surface.backfill(con)
    run_sql_file(con, "0006_backfill.sql")


@migration
def m0007_course(con: duckdb.DuckDBPyConnection) -> None:
    """A course (issue 17): `sessions.user` (who the session is for: `JUPYTERHUB_USER`, else `USER`)
    and `sessions.ai_policy` (the AI policy it was created under), from the session header."""
    run_sql_file(con, "0007_course.sql")


@migration
def m0008_notebook_edits(con: duckdb.DuckDBPyConnection) -> None:
    """The notebook (issue 18): the `notebook_edits` view, one row per cell the agent inserted with
    `notebook_insert` (notebook, anchor, source and its sha256, how it was applied, the new cell's
    id), read from the `notebook/insert` events already in `t_events` (no backfill needed)."""
    run_sql_file(con, "0008_notebook_edits.sql")


@migration
def m0009_failed_attempts(con: duckdb.DuckDBPyConnection) -> None:
    """What a failed attempt cost (issue 28): `t_attempts.streamed_chars` (what its deltas streamed,
    backfilled for the rows ingested before); `requests` estimates an attempt that streamed something
    and then failed without usage (input the history and header sent, output what streamed), as the
    budgets count it."""
    run_sql_file(con, "0009_failed_attempts.sql")
