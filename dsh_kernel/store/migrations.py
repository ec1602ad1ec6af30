"""Ordered migrations of what ``sessions.duckdb`` holds that the journals do not, in ``_migrations``.

Almost everything in the database is a projection of the journals, rebuilt whenever its version
changes (``dsh_kernel.store.projection``); migrations are only for the rest: the user's ``prices``
(``set_price``) and the ``_projection`` record itself. Rules (the simonw/llm discipline):

* a migration is a function registered with ``@migration``; the registration order is the apply order
  and the function name is its permanent identity;
* a shipped migration is never edited, renamed or removed — change a durable table by adding one;
* ``migrate(con)`` applies, each in its own transaction, every registered migration whose name is not in
  ``_migrations`` yet, and records it; a database with a migration this code does not know was written by
  a newer dsh-kernel and is refused (``StoreError(DB_SCHEMA_NEWER)``) rather than written to.

``RETIRED`` names the migrations of the time the whole schema was migrated (``m0001_tables`` ..
``m0009_failed_attempts``): a store made then still lists them until its projection is rebuilt, which
drops their rows. Plain-DDL migrations live as ``sql/<name>.sql`` beside this module (``run_sql_file``).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources

import duckdb

from dsh_kernel.errors import StoreError

Migration = Callable[[duckdb.DuckDBPyConnection], None]

MIGRATIONS: list[Migration] = []

RETIRED = frozenset(
    {
        "m0001_tables",
        "m0002_views",
        "m0003_precision",
        "m0004_list_prices",
        "m0005_images",
        "m0006_compaction",
        "m0007_course",
        "m0008_notebook_edits",
        "m0009_failed_attempts",
    }
)
"""Migrations that built the derived schema before it was a versioned projection. Known (a store that
lists them is not newer), never run; ``projection.rebuild`` deletes their rows."""


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next migration (its ``__name__`` is recorded in ``_migrations``)."""
    if any(m.__name__ == fn.__name__ for m in MIGRATIONS) or fn.__name__ in RETIRED:
        raise ValueError(f"duplicate migration name {fn.__name__}")
    MIGRATIONS.append(fn)
    return fn


def sql_text(name: str) -> str:
    """The packaged ``store/sql/<name>``."""
    return resources.files("dsh_kernel.store").joinpath("sql", name).read_text(encoding="utf-8")


def run_sql_file(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Execute the packaged ``store/sql/<name>`` on ``con``."""
    con.execute(sql_text(name))


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


def check_not_newer(done: set[str]) -> None:
    """Refuse (``DB_SCHEMA_NEWER``) a database that lists a migration this code does not know."""
    unknown = done - {m.__name__ for m in MIGRATIONS} - RETIRED
    if unknown:
        raise StoreError(
            f"the store database was migrated by a newer dsh-kernel (unknown migrations: "
            f"{', '.join(sorted(unknown))}); upgrade dsh-kernel to write to it",
            code="DB_SCHEMA_NEWER",
        )


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply pending migrations; returns the names applied now."""
    done = set(applied(con))
    check_not_newer(done)
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
def m0010_projection(con: duckdb.DuckDBPyConnection) -> None:
    """What the journals do not hold: the user's `prices` (kept as they are in a store that has them)
    and `_projection`, the version of the derived tables and views the database was built with."""
    run_sql_file(con, "0010_projection.sql")
