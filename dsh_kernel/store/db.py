"""Opening ``sessions.duckdb``: short read-write opens, read-only opens, and lock contention.

DuckDB lets one process hold a database file read-write; while it does, every open of that file from any
other process — read-write *or* read-only — fails at once with "Could not set lock on file …"
(PLATFORM.md). Several read-only processes may share the file. Inside one process, a read-only and a
read-write connection to the same file cannot coexist.

So every open here:

* is serialised inside this process by one lock per database path (a thread that cannot get it within
  the timeout counts as contention too);
* retries a lock conflict with exponential backoff (10 ms doubling to 200 ms) until ``timeout_s``
  (default 1 s), then raises ``DatabaseBusy`` (``StoreError`` code ``DB_BUSY``) carrying DuckDB's
  message, which names the holder's PID;
* never installs extensions: ``autoinstall_known_extensions=false`` (json, parquet and icu are built
  in) and Python replacement scans are off (DataFrames are registered explicitly by name); no progress
  bar (in a kernel it is a widget drawn from inside the query, where an interrupt gets lost);
* for read-write opens, runs the pending migrations of what is not derived and builds or rebuilds
  the projection when its version differs (``dsh_kernel.store.projection.prepare``), then refreshes
  ``list_prices``; a read-only open refuses a database not built with this projection version
  (``DB_OUTDATED``, or ``DB_SCHEMA_NEWER`` for a newer one) unless it reads only the durable tables.

``extra`` adds DuckDB settings to an open (the ``sql`` tool's process passes its memory, temp and
thread limits). Settings belong to the database *instance*, and a second connection to a path that
this process already has open joins that instance — with different settings DuckDB refuses it — so
only a process that holds nothing else of the store may pass them (``dsh_kernel.store.query.sandbox``).

Connections are context managers that close on exit: nothing holds the file between operations.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Generator, Mapping
from pathlib import Path

import duckdb

from dsh_kernel.errors import StoreError
from dsh_kernel.store.layout import Store
from dsh_kernel.store.prices import refresh_list_prices
from dsh_kernel.store.projection import check_readable, prepare

Setting = str | bool | int | float | list[str]
BASE_CONFIG: dict[str, Setting] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": True,
}
SESSION_SETTINGS = "SET python_enable_replacements = false; SET enable_progress_bar = false"
"""Per connection. In a kernel DuckDB would draw an ipywidgets progress bar from inside the query; a
Jupyter interrupt landing in that callback is swallowed or garbled instead of stopping the query."""

DEFAULT_TIMEOUT_S = 1.0

_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


class DatabaseBusy(StoreError):
    """Another process (or another thread of this one) holds the database; try again later."""

    code = "DB_BUSY"


def _lock_for(path: Path) -> threading.Lock:
    with _locks_guard:
        lock = _locks.get(path)
        if lock is None:
            lock = _locks[path] = threading.Lock()
        return lock


def is_lock_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is DuckDB refusing a database file that another process holds."""
    return isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower()


def _config(external: bool, extra: Mapping[str, Setting] | None) -> dict[str, Setting]:
    config = dict(BASE_CONFIG)
    if not external:
        # First: DuckDB 2.0.1 refuses a temp_directory given *before* enable_external_access=false
        # ("Modifying the temp_directory has been disabled"), and accepts it after.
        config["enable_external_access"] = False
    config.update(extra or {})
    return config


def connect_memory(
    *, external_access: bool = True, extra: Mapping[str, Setting] | None = None
) -> duckdb.DuckDBPyConnection:
    """An in-memory database with the store's settings (the journal fallback, the schema doc)."""
    config = _config(external_access, extra)
    con = duckdb.connect(":memory:", config=config)
    con.execute(SESSION_SETTINGS)
    return con


@contextlib.contextmanager
def open_db(
    store: Store,
    *,
    read_only: bool,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    external_access: bool = True,
    extra: Mapping[str, Setting] | None = None,
    durable_only: bool = False,
) -> Generator[duckdb.DuckDBPyConnection, None, None]:
    """A connection to ``store``'s database, closed (and the in-process lock released) on exit.

    A read-write open creates the store directory and database if needed, migrates it and (re)builds
    its projection. A read-only open of a database that does not exist yet raises
    ``StoreError(DB_MISSING)``; of one built by another projection version, ``DB_OUTDATED`` or
    ``DB_SCHEMA_NEWER`` — unless ``durable_only`` (the caller reads ``prices`` alone). Lock contention
    that outlasts ``timeout_s`` raises ``DatabaseBusy``.
    """
    path = store.db_path
    lock = _lock_for(path)
    deadline = time.monotonic() + timeout_s
    if not lock.acquire(timeout=max(timeout_s, 0.0)):
        raise DatabaseBusy(f"{path} is in use by another thread of this process")
    try:
        if read_only and not path.exists():
            raise StoreError(f"{path} does not exist yet (nothing ingested)", code="DB_MISSING")
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        con = _connect_with_retry(
            path, read_only=read_only, deadline=deadline, external=external_access, extra=extra
        )
        try:
            if not read_only:
                prepare(con)
                refresh_list_prices(con)
            elif not durable_only:
                check_readable(con)
            yield con
        finally:
            con.close()
    finally:
        lock.release()


def _connect_with_retry(
    path: Path,
    *,
    read_only: bool,
    deadline: float,
    external: bool,
    extra: Mapping[str, Setting] | None,
) -> duckdb.DuckDBPyConnection:
    config = _config(external, extra)
    delay = 0.01
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only, config=config)
        except duckdb.Error as exc:
            if not is_lock_conflict(exc):
                raise StoreError(f"cannot open {path}: {exc}", code="DB_OPEN_FAILED") from exc
            now = time.monotonic()
            if now >= deadline:
                raise DatabaseBusy(f"{path} is busy: {exc}") from exc
            time.sleep(min(delay, deadline - now))
            delay = min(delay * 2, 0.2)
            continue
        con.execute(SESSION_SETTINGS)
        return con
