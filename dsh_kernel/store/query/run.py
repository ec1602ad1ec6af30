"""Running SQL over the store: the Python API behind ``%%sql`` cells (and the ``sql`` tool's core).

``run_query(store, sql, params, namespace=..., live=...)``:

1. flushes the journals of the live sessions in ``live`` (the current session's latest events must be
   in the answer);
2. runs an ingest pass (``dsh_kernel.store.ingest.incremental``) — if another process holds the database past the
   lock timeout the pass is deferred;
3. runs the query on a **read-only** connection. Parameters are bound (``?``/``$1`` with a sequence,
   ``$name`` with a mapping), never pasted into the SQL. DataFrames of ``namespace`` (pandas, polars,
   pyarrow) whose names occur in the SQL are registered under those names, so they join with the views
   (a store view of the same name wins, with a notice);
4. falls back to the journals — an in-memory DuckDB built from every journal with the same tables,
   views and ingest, so the same views answer — when the database cannot be opened read-only in time, or when
   ingest was deferred while a live session still had un-ingested lines; the result then carries a
   notice saying so.

Steps 1–2 are ``prepare`` and steps 3–4 ``answer``, so the ``sql`` tool can run them in two processes
(``dsh_kernel.store.query.sandbox``): ``answer`` also takes the extra DuckDB settings of that process
(a ``Confinement``: extra DuckDB settings — its memory, temp and thread caps; the configuration is
then locked before the query runs, so no statement can lift them —, a hook called on each new
connection, and its own way to fetch rows). Without one it is exactly the ``%%sql`` path.

A DuckDB error becomes ``QueryError`` (a ``StoreError``) whose message is DuckDB's own, position and
caret included, and whose ``code`` classifies it (``SQL_SYNTAX``, ``SQL_CATALOG``, ``SQL_BINDER``,
``SQL_READ_ONLY``, ``SQL_TIMEOUT``, ``SQL_INTERRUPTED`` — a SIGINT mid-query —, ``SQL_MEMORY`` — over
the memory or temp-directory limit —, ``SQL_ERROR``).
``timeout_s`` interrupts a long query, and so does calling a ``QueryInterrupt`` passed as
``interrupt`` (from any thread: the ``%%sql`` cell runs the query on a worker thread and calls it on
SIGINT, because DuckDB notices a signal only between tasks of the calling thread, and not at all while
that thread waits for its workers). At most ``max_rows`` rows are fetched; ``truncated`` says more
existed.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, TypeAlias

import duckdb

from dsh_kernel.errors import StoreError
from dsh_kernel.markup.safe_html import NO_MATH, escape, sanitize
from dsh_kernel.store.db import (
    DEFAULT_TIMEOUT_S,
    DatabaseBusy,
    Setting,
    connect_memory,
    open_db,
)
from dsh_kernel.store.ingest.incremental import IngestReport, ingest, ingest_into
from dsh_kernel.store.journal import JournalWriter
from dsh_kernel.store.layout import Store
from dsh_kernel.store.projection import prepare as prepare_projection

Params: TypeAlias = Sequence[object] | Mapping[str, object] | None
Source: TypeAlias = Literal["database", "journals"]
Row: TypeAlias = tuple[object, ...]
Fetch: TypeAlias = Callable[[duckdb.DuckDBPyConnection, int, list[str]], tuple[list[Row], bool]]
"""``fetch(cursor, max_rows, notices)`` → (at most ``max_rows`` rows, whether more existed)."""

DEFAULT_MAX_ROWS = 10_000

_FRAME_TYPES = {
    ("pandas", "DataFrame"),
    ("polars", "DataFrame"),
    ("polars", "LazyFrame"),
    ("pyarrow", "Table"),
    ("pyarrow", "RecordBatch"),
}
_CATALOG_NAMES = (
    "SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name FROM duckdb_views()"
)
_IDENT = re.compile(r'"((?:[^"]|"")+)"|([A-Za-z_][A-Za-z0-9_]*)')


class QueryError(StoreError):
    """A query DuckDB refused or could not finish; the message is DuckDB's."""

    code = "SQL_ERROR"


class QueryInterrupt:
    """Call it (from any thread) to stop the query of the ``run_query`` it was passed to; a query
    that has not started yet is refused. Either way ``run_query`` raises ``SQL_INTERRUPTED``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self.requested = False

    def __call__(self) -> None:
        with self._lock:
            self.requested = True
            if self._con is not None:
                self._con.interrupt()

    @contextlib.contextmanager
    def watching(self, con: duckdb.DuckDBPyConnection) -> Generator[None, None, None]:
        with self._lock:
            if self.requested:
                raise QueryError("the query was interrupted", code="SQL_INTERRUPTED")
            self._con = con
        try:
            yield
        finally:
            with self._lock:
                self._con = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryResult:
    """What a query returned. ``rows`` holds at most ``max_rows`` rows; ``truncated`` says more existed."""

    columns: tuple[str, ...]
    types: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]
    truncated: bool
    elapsed_s: float
    source: Source = "database"
    notices: tuple[str, ...] = ()
    timed: bool = True
    """Whether ``summary`` says how long the query took (a replayed notebook's cells leave it out)."""

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list[object]:
        i = self.columns.index(name)
        return [r[i] for r in self.rows]

    def records(self) -> list[dict[str, object]]:
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]

    def frame(self) -> object:
        """The rows as a pandas DataFrame (pandas is imported here, not at start-up)."""
        pd = importlib.import_module("pandas")
        frame: object = pd.DataFrame.from_records(list(self.rows), columns=list(self.columns))
        return frame

    def summary(self) -> str:
        more = " (truncated: more rows exist)" if self.truncated else ""
        src = " from the journals" if self.source == "journals" else ""
        took = f" in {self.elapsed_s * 1000:.0f} ms" if self.timed else ""
        return f"{self.row_count} row{'s' if self.row_count != 1 else ''}{more}{took}{src}"

    def to_text(self, limit: int = 50) -> str:
        """A plain-text table of the first ``limit`` rows, then the summary and notices."""
        shown = [tuple(_cell(v) for v in r) for r in self.rows[:limit]]
        widths = [len(c) for c in self.columns]
        for r in shown:
            widths = [max(w, len(v)) for w, v in zip(widths, r, strict=True)]
        lines = [" | ".join(c.ljust(w) for c, w in zip(self.columns, widths, strict=True))]
        lines.append("-+-".join("-" * w for w in widths))
        lines += [" | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in shown]
        if self.row_count > limit:
            lines.append(f"… {self.row_count - limit} more rows")
        lines.append(self.summary())
        lines += [f"note: {n}" for n in self.notices]
        return "\n".join(lines)

    def _repr_html_(self, limit: int = 200) -> str:
        """The rows as a table of text (``markup.safe_html``: what the session logged is outside
        text; nothing of it is markup or typeset math)."""
        head = "".join(f"<th>{escape(c)}</th>" for c in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{escape(_cell(v))}</td>" for v in r) + "</tr>"
            for r in self.rows[:limit]
        )
        notes = "".join(f"<p><em>{escape(n)}</em></p>" for n in self.notices)
        return sanitize(
            f'<div class="{NO_MATH}"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
            f"</table><p>{escape(self.summary())}</p>{notes}</div>"
        )

    def __repr__(self) -> str:
        return self.to_text(limit=20)


def _cell(v: object) -> str:
    text = "NULL" if v is None else str(v).replace("\n", "\\n")
    return text if len(text) <= 200 else text[:199] + "…"


def _is_frame(value: object) -> bool:
    t = type(value)
    return (t.__module__.split(".")[0], t.__name__) in _FRAME_TYPES


def frames_in(sql: str, namespace: Mapping[str, object] | None) -> dict[str, object]:
    """The DataFrame-like values of ``namespace`` whose names appear as identifiers in ``sql``."""
    if not namespace:
        return {}
    names = {
        m.group(1).replace('""', '"') if m.group(1) else m.group(2) for m in _IDENT.finditer(sql)
    }
    return {n: namespace[n] for n in names if n in namespace and _is_frame(namespace[n])}


def classify(exc: duckdb.Error) -> str:
    """The stable ``SQL_*`` code for a DuckDB error."""
    if isinstance(exc, duckdb.ParserException):
        return "SQL_SYNTAX"
    if isinstance(exc, duckdb.CatalogException):
        return "SQL_CATALOG"
    if isinstance(exc, duckdb.BinderException):
        return "SQL_BINDER"
    if isinstance(exc, duckdb.InterruptException):
        return "SQL_TIMEOUT"
    if isinstance(exc, duckdb.OutOfMemoryException):
        return "SQL_MEMORY"
    text = str(exc)
    if "read-only" in text or "read only" in text:
        return "SQL_READ_ONLY"
    return "SQL_ERROR"


def execute(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    params: Params = None,
    *,
    namespace: Mapping[str, object] | None = None,
    max_rows: int = DEFAULT_MAX_ROWS,
    timeout_s: float | None = None,
    interrupt: QueryInterrupt | None = None,
    fetch: Fetch | None = None,
) -> tuple[QueryResult, list[str]]:
    """Run ``sql`` on an open connection: register frames, bind parameters, fetch at most ``max_rows``
    (through ``fetch`` when given). Returns the result (source ``database``, no notices) and the
    notices about registration (and whatever ``fetch`` added)."""
    notices: list[str] = []
    existing = {str(r[0]) for r in con.execute(_CATALOG_NAMES).fetchall()}
    for name, frame in frames_in(sql, namespace).items():
        if name in existing:
            notices.append(f"the namespace DataFrame {name!r} is hidden by the store's {name!r}")
            continue
        con.register(name, frame)
    timer: threading.Timer | None = None
    if timeout_s is not None:
        timer = threading.Timer(timeout_s, con.interrupt)
        timer.daemon = True
    started = time.perf_counter()
    watch = interrupt.watching(con) if interrupt is not None else contextlib.nullcontext()
    try:
        if timer is not None:
            timer.start()
        with watch:
            cur = con.execute(sql, params) if params is not None else con.execute(sql)
            desc = cur.description or []
            if not desc:
                rows: list[Row] = []
                truncated = False
            elif fetch is None:
                fetched = cur.fetchmany(max_rows + 1)
                rows, truncated = [tuple(r) for r in fetched[:max_rows]], len(fetched) > max_rows
            else:
                rows, truncated = fetch(cur, max_rows, notices)
    except duckdb.Error as exc:
        if interrupt is not None and interrupt.requested:
            raise QueryError("the query was interrupted", code="SQL_INTERRUPTED") from exc
        code = classify(exc)
        if code == "SQL_TIMEOUT" and timeout_s is not None:
            raise QueryError(
                f"the query ran longer than {timeout_s:g} s and was stopped", code=code
            ) from exc
        raise QueryError(str(exc), code=code) from exc
    except RuntimeError as exc:
        # DuckDB turns a SIGINT that arrives mid-query (the Jupyter interrupt) into this plain
        # RuntimeError; left alone it escapes the %%sql cell, which then never gets a reply.
        if "interrupted" not in str(exc).lower():
            raise
        raise QueryError("the query was interrupted", code="SQL_INTERRUPTED") from exc
    finally:
        if timer is not None:
            timer.cancel()
    elapsed = time.perf_counter() - started
    result = QueryResult(
        columns=tuple(str(d[0]) for d in desc),
        types=tuple(str(d[1]) for d in desc),
        rows=tuple(rows),
        truncated=truncated,
        elapsed_s=elapsed,
    )
    return result, notices


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    """What ``prepare`` did: its notices, and whether the database lacks a live session's events
    (ingest was deferred while the database was busy), so the journals must answer."""

    notices: tuple[str, ...] = ()
    stale: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Confinement:
    """What the ``sql`` tool's process adds to ``answer`` (see the module docstring)."""

    settings: Mapping[str, Setting]
    """Extra DuckDB settings for the connection; the configuration is locked before the query."""
    on_connect: Callable[[duckdb.DuckDBPyConnection], None] | None = None
    fetch: Fetch | None = None


def prepare(
    store: Store, live: Sequence[JournalWriter] = (), lock_timeout_s: float = DEFAULT_TIMEOUT_S
) -> Prepared:
    """Flush the live journals and run an ingest pass (steps 1–2 of the module docstring)."""
    notices: list[str] = []
    for writer in live:
        try:
            writer.flush()
        except StoreError as exc:
            notices.append(f"the current session's latest events may be missing: {exc.message}")
    report = _try_ingest(store, lock_timeout_s, notices)
    stale = (
        report is not None
        and report.status == "deferred"
        and _live_pending(store, live, lock_timeout_s)
    )
    return Prepared(notices=tuple(notices), stale=stale)


def run_query(
    store: Store,
    sql: str,
    params: Params = None,
    *,
    namespace: Mapping[str, object] | None = None,
    max_rows: int = DEFAULT_MAX_ROWS,
    timeout_s: float | None = None,
    live: Sequence[JournalWriter] = (),
    lock_timeout_s: float = DEFAULT_TIMEOUT_S,
    external_access: bool = True,
    interrupt: QueryInterrupt | None = None,
) -> QueryResult:
    """Ingest what is pending, then run ``sql`` read-only (see the module docstring). With
    ``external_access=False`` the query cannot read or write any file."""
    return answer(
        store,
        sql,
        params,
        prepared=prepare(store, live, lock_timeout_s),
        namespace=namespace,
        max_rows=max_rows,
        timeout_s=timeout_s,
        lock_timeout_s=lock_timeout_s,
        external_access=external_access,
        interrupt=interrupt,
    )


def answer(
    store: Store,
    sql: str,
    params: Params = None,
    *,
    prepared: Prepared,
    namespace: Mapping[str, object] | None = None,
    max_rows: int = DEFAULT_MAX_ROWS,
    timeout_s: float | None = None,
    lock_timeout_s: float = DEFAULT_TIMEOUT_S,
    external_access: bool = True,
    interrupt: QueryInterrupt | None = None,
    confined: Confinement | None = None,
) -> QueryResult:
    """Run ``sql`` on a read-only connection, or on the journals (steps 3–4)."""
    notices = list(prepared.notices)
    extra = confined.settings if confined is not None else None

    def run(con: duckdb.DuckDBPyConnection) -> tuple[QueryResult, list[str]]:
        if confined is not None:
            con.execute("SET lock_configuration = true")
        return execute(
            con,
            sql,
            params,
            namespace=namespace,
            max_rows=max_rows,
            timeout_s=timeout_s,
            interrupt=interrupt,
            fetch=confined.fetch if confined is not None else None,
        )

    if not prepared.stale:
        try:
            with open_db(
                store,
                read_only=True,
                timeout_s=lock_timeout_s,
                external_access=external_access,
                extra=extra,
            ) as con:
                if confined is not None and confined.on_connect is not None:
                    confined.on_connect(con)
                result, more = run(con)
            return _with(result, "database", notices + more)
        except DatabaseBusy as exc:
            why = exc.message
        except StoreError as exc:
            if exc.code == "DB_MISSING":
                why = "the database does not exist yet"
            elif exc.code == "DB_OUTDATED":
                why = "the database is being rebuilt for this dsh-kernel"
            else:
                raise
    else:
        why = "the database is busy and the current session has events it does not hold yet"
    on_connect = confined.on_connect if confined is not None else None
    con, built = fallback_connection(store, extra=extra, on_connect=on_connect)
    notices += [i.message for i in built.issues if i.message not in notices]
    try:
        if not external_access:
            con.execute("SET enable_external_access = false")
        result, more = run(con)
    finally:
        con.close()
    notices.append(f"answered from the journals ({why})")
    return _with(result, "journals", notices + more)


def _with(result: QueryResult, source: Source, notices: list[str]) -> QueryResult:
    return replace(result, source=source, notices=tuple(notices))


def _try_ingest(store: Store, timeout_s: float, notices: list[str]) -> IngestReport | None:
    try:
        report = ingest(store, timeout_s=timeout_s)
    except StoreError as exc:
        notices.append(f"ingest failed: {exc.message}")
        return None
    for issue in report.issues:
        notices.append(issue.message)
    return report


def _live_pending(store: Store, live: Sequence[JournalWriter], timeout_s: float) -> bool:
    """Whether a live journal has bytes the database has not ingested (read from ``_ingest_state``)."""
    if not live:
        return False
    try:
        with open_db(store, read_only=True, timeout_s=timeout_s) as con:
            rows = dict(con.execute("SELECT journal, byte_offset FROM _ingest_state").fetchall())
    except StoreError:
        return True
    for w in live:
        if not w.path.exists():
            continue
        done = rows.get(store.relative(w.path))
        if done is None or int(str(done)) < w.path.stat().st_size:
            return True
    return False


def fallback_connection(
    store: Store,
    *,
    extra: Mapping[str, Setting] | None = None,
    on_connect: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
) -> tuple[duckdb.DuckDBPyConnection, IngestReport]:
    """An in-memory database holding every journal of ``store``, with the same tables and views
    (and the report of loading them: damaged journals are named there)."""
    con = connect_memory(extra=extra)
    try:
        if on_connect is not None:
            on_connect(con)
        prepare_projection(con)
        report = ingest_into(con, store)
    except BaseException:
        con.close()
        raise
    return con, report
