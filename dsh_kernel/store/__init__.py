"""The session store: a JSONL journal per session plus a shared DuckDB database of every session.

Modules (one concept each):

* ``layout``   — where the store lives (``store_dir()``, ``Store``) and how journals are named;
* ``journal``  — ``JournalWriter`` (write-behind, durable checkpoints), ``load_session`` (crash repair),
  ``attach_journal``;
* ``db``       — short read-write / read-only opens of ``sessions.duckdb`` with lock retry;
* ``projection`` + ``sql/tables.sql``, ``sql/views.sql`` — the derived schema, versioned and rebuilt
  from the journals when its version changes; ``migrations`` — the rest (the user's ``prices``), as
  ordered migrations; ``schema_doc`` documents both;
* ``ingest/``  — incremental, columnar ingest of journal lines (``ingest``, ``set_price``);
* ``query/``   — ``run_query`` (the ``%%sql`` API) with the journal fallback, and ``safe_query``:
  one read-only statement in a capped child process (the core of the agent's ``sql`` tool);
* ``sessions`` — list, resume, fork, search, export (Parquet, Markdown), titles;
* ``replay``   — ``ReplayProvider``, answering from a recorded session.

The names below are importable from ``dsh_kernel.store`` directly (loaded lazily, so importing the
package does not import DuckDB until it is needed).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsh_kernel.store.importing import import_journal
    from dsh_kernel.store.ingest.incremental import IngestReport, JournalIssue, ingest, set_price
    from dsh_kernel.store.journal import (
        JournalWriter,
        LoadedSession,
        attach_journal,
        load_session,
        read_session,
    )
    from dsh_kernel.store.layout import Store, store_dir
    from dsh_kernel.store.query.run import QueryError, QueryResult, run_query
    from dsh_kernel.store.query.sandbox import safe_query
    from dsh_kernel.store.replay import ReplayProvider
    from dsh_kernel.store.sessions import (
        SessionSummary,
        export_markdown,
        export_parquet,
        fork,
        list_sessions,
        resolve_session_id,
        resume,
        search,
        set_title,
        title_data,
    )

_EXPORTS = {
    "import_journal": "importing",
    "IngestReport": "ingest.incremental",
    "JournalIssue": "ingest.incremental",
    "ingest": "ingest.incremental",
    "set_price": "ingest.incremental",
    "JournalWriter": "journal",
    "LoadedSession": "journal",
    "attach_journal": "journal",
    "load_session": "journal",
    "read_session": "journal",
    "Store": "layout",
    "store_dir": "layout",
    "QueryError": "query.run",
    "QueryResult": "query.run",
    "run_query": "query.run",
    "ReplayProvider": "replay",
    "SessionSummary": "sessions",
    "export_markdown": "sessions",
    "export_parquet": "sessions",
    "fork": "sessions",
    "list_sessions": "sessions",
    "resolve_session_id": "sessions",
    "resume": "sessions",
    "search": "sessions",
    "set_title": "sessions",
    "title_data": "sessions",
    "safe_query": "query.sandbox",
}

__all__ = [
    "IngestReport",
    "JournalIssue",
    "JournalWriter",
    "LoadedSession",
    "QueryError",
    "QueryResult",
    "ReplayProvider",
    "SessionSummary",
    "Store",
    "attach_journal",
    "export_markdown",
    "export_parquet",
    "fork",
    "import_journal",
    "ingest",
    "list_sessions",
    "load_session",
    "read_session",
    "resolve_session_id",
    "resume",
    "run_query",
    "safe_query",
    "search",
    "set_price",
    "set_title",
    "store_dir",
    "title_data",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dsh_kernel.store' has no attribute {name!r}")
    value: object = getattr(importlib.import_module(f"dsh_kernel.store.{module}"), name)
    return value
