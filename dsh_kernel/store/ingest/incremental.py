"""Incremental ingest of session journals into the typed tables of ``sessions.duckdb``.

Per journal, ``_ingest_state`` records how many bytes have been ingested (always up to a line end), the
next seq, the header line, and the little turn/step/attempt context needed to continue mid-turn. An
ingest pass:

1. *plans* in Python (``dsh_kernel.store.ingest.plan``), per journal whose size differs from its
   offset: reads the new bytes, keeps only whole lines (a torn or still-being-written last line waits
   for the next pass) and counts them; a new journal's header line is parsed and registered;
2. *loads* every planned journal in one columnar, parallel ``read_json`` (explicit columns,
   ``ignore_errors`` so a bad line becomes a row of NULLs instead of failing the batch; journals read
   from their start are read in place, continuations from a scratch copy of their new lines) — never
   row-by-row inserts. Batches hold up to ``MAX_BATCH_BYTES`` of journal text;
3. *validates* per journal in SQL: exactly the expected number of rows, seqs ``next_seq ..`` without gap
   or repeat, every envelope field present. A journal that fails is left out of the batch and recorded
   with the first bad line named (found by re-reading that journal in Python with the journal rules);
   it is retried only when its size changes. The others go on;
4. *derives*, in the same transaction, the typed rows (``t_events`` with turn/step, ``t_messages``
   with the surface fold — which replacement took a message off the model's view, folded in Python
   only for a batch that holds one, see ``surface`` —, ``t_tool_calls``, ``t_tool_results``,
   ``t_images`` and ``t_image_data`` (the bytes of an image once per hash, kept out of ``t_events``),
   ``t_attempts`` — upserted, so an attempt split across two passes merges; a call that got no chunk
   gets its row when its turn ends aborted or interrupted (``silent``) —, ``t_compaction_calls``
   (a compaction's summary call, ``calls``), with the token estimates and ``seeded`` flags, see
   ``statements``) and advances ``_ingest_state``. Everything commits together or not at all;
5. *repairs orphans*: every journal of the pass whose ingested events end inside a turn is tried with
   its advisory lock (``journal.repair_orphan``). A live kernel holds that lock from its first write
   until it closes the journal, so a journal nobody holds has lost its writer (a killed kernel): its
   crash-repair closers (``dsh_kernel.session.repair``) are committed to the journal under the lock
   and ingested at once by a second pass. The store shows a dead session as interrupted at the next
   ingest by any process, without anyone resuming it (``IngestReport.repaired`` names them).

   Why commit the repair instead of ingesting an in-memory one (SPINE §6.1 ``inspect``): the database
   is an incremental projection of the journals. Closers that exist only in the database would be rows
   no journal holds, at seqs the session's own resume would later write again — two truths, and a
   re-ingest from the journals would lose them. Committed, they are in the journal exactly as
   ``%agent resume`` writes them (repair is deterministic and idempotent), ingest stays a plain
   projection, and every reader (the journal fallback, an export, another machine) sees the same log.
   The lock keeps it safe: of two processes ingesting at once only one can hold it, and the other then
   finds the turn closed; a live writer is never touched. Where the lock cannot tell (no ``flock`` on
   the platform or filesystem) nothing is repaired and the session stays open until resumed.

A journal that shrank, or whose header line changed, is re-ingested from scratch (its rows are deleted
first). A header naming a session id already ingested from another journal is refused.

``ingest(store)`` opens the database read-write for one pass (``dsh_kernel.store.db``); when another
process holds it past the timeout it returns ``status="deferred"`` — the journals still hold the data and
the next pass (by anyone) picks it up. When no journal changed since this process's last pass (same
sizes, same database file, and every journal it left mid-turn still locked by its writer) it returns
``up-to-date`` without opening the database at all: journals are append-only, so a changed journal
always changes size. ``ingest_into(con, store)`` runs a pass on an open connection (the in-memory
journal fallback of ``dsh_kernel.store.query.run`` uses it, so it repairs orphans too).
"""

from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import duckdb

from dsh_kernel.errors import SessionFormatError, StoreError
from dsh_kernel.store.db import DEFAULT_TIMEOUT_S, DatabaseBusy, open_db
from dsh_kernel.store.ingest import calls
from dsh_kernel.store.ingest import statements as q
from dsh_kernel.store.ingest.image_rows import IMAGES, IMAGES_NEEDED, store_image_data
from dsh_kernel.store.ingest.plan import (
    ErrorRecord,
    JournalIssue,
    Plan,
    file_size,
    load_states,
    locate_damage,
    plan_journal,
)
from dsh_kernel.store.ingest.silent import SILENT, SILENT_NEEDED
from dsh_kernel.store.ingest.surface import fold_batch
from dsh_kernel.store.journal import repair_orphan, writer_gone
from dsh_kernel.store.layout import Store
from dsh_kernel.store.prices import UserPrice, bump

__all__ = ["MAX_BATCH_BYTES", "IngestReport", "JournalIssue", "ingest", "ingest_into", "set_price"]

MAX_BATCH_BYTES = 256 << 20

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestReport:
    """What one ingest did: its status, how much it read, the journals it could not, and a notice."""

    status: Literal["ingested", "up-to-date", "deferred"]
    events: int = 0
    journals: int = 0
    elapsed_s: float = 0.0
    issues: tuple[JournalIssue, ...] = ()
    notice: str | None = None
    """Why the pass was deferred (DuckDB's lock message, naming the holder's PID)."""
    repaired: tuple[str, ...] = ()
    """Journals whose writer was gone mid-turn: crash repair was committed to them in this pass."""


@dataclass(frozen=True, slots=True)
class _Seen:
    """What this process last ingested into one database file: journal sizes (``-1``: a partial
    line remained) and the known damage. Lets a pass with nothing to do skip opening the database."""

    db_file: tuple[int, int, int]
    sizes: dict[str, int]
    issues: tuple[JournalIssue, ...]
    still_open: tuple[Path, ...]
    """Journals that ended inside a turn: if one's writer is gone since, there is repair to do."""


_seen: dict[Path, _Seen] = {}


def _db_identity(store: Store) -> tuple[int, int, int] | None:
    """The database file's identity and last change: a replaced (or otherwise written) file differs."""
    try:
        st = store.db_path.stat()
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns)


def _nothing_new(store: Store) -> _Seen | None:
    seen = _seen.get(store.db_path)
    if seen is None or _db_identity(store) != seen.db_file:
        return None
    count = 0
    for path in store.iter_journals():
        count += 1
        known = seen.sizes.get(store.relative(path), -1)
        if known < 0 or file_size(path) != known:
            return None
    if count != len(seen.sizes) or any(writer_gone(p) for p in seen.still_open):
        return None
    return seen


def ingest(
    store: Store, *, timeout_s: float = DEFAULT_TIMEOUT_S, journals: list[Path] | None = None
) -> IngestReport:
    """One ingest pass over ``journals`` (default: every journal in the store); see the module
    docstring. Returns ``status="deferred"`` when the database stays locked by another process.

    When no journal changed since this process's last full pass, the database is not even opened."""
    started = time.perf_counter()
    if journals is None:
        unchanged = _nothing_new(store)
        if unchanged is not None:
            return IngestReport(
                status="up-to-date",
                elapsed_s=time.perf_counter() - started,
                issues=unchanged.issues,
            )
    try:
        with open_db(store, read_only=False, timeout_s=timeout_s) as con:
            sizes: dict[str, int] = {}
            still_open: list[Path] = []
            report = ingest_into(con, store, journals, sizes=sizes, still_open=still_open)
        identity = _db_identity(store)
        if journals is None and identity is not None:
            _seen[store.db_path] = _Seen(
                db_file=identity,
                sizes=sizes,
                issues=report.issues,
                still_open=tuple(still_open),
            )
        return report
    except DatabaseBusy as exc:
        return IngestReport(
            status="deferred", elapsed_s=time.perf_counter() - started, notice=exc.message
        )


def ingest_into(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    journals: list[Path] | None = None,
    *,
    sizes: dict[str, int] | None = None,
    still_open: list[Path] | None = None,
) -> IngestReport:
    """One pass on an open connection, then the crash repair of orphaned journals (see the module
    docstring). ``sizes`` (if given) receives, per journal, the size now fully accounted for (``-1``
    when a partial line remains); ``still_open`` receives the journals whose last turn is still open
    (live sessions mid-turn)."""
    started = time.perf_counter()
    seen: dict[str, int] = {} if sizes is None else sizes
    # Rows are keyed by (session_id, seq), never by position: let DuckDB load and insert in parallel.
    con.execute("SET preserve_insertion_order = false")
    issues: list[JournalIssue] = []
    paths = list(store.iter_journals()) if journals is None else journals
    touched: set[str] = set()
    events = _pass(con, store, paths, seen, issues, touched)
    repaired = _repair_orphans(con, store, paths)
    if repaired:
        events += _pass(con, store, repaired, seen, issues, touched)
    if still_open is not None:
        still_open.extend(_open_journals(con, store, paths))
    status: Literal["ingested", "up-to-date"] = "ingested" if touched else "up-to-date"
    return IngestReport(
        status=status,
        events=events,
        journals=len(touched),
        elapsed_s=time.perf_counter() - started,
        issues=tuple(issues),
        repaired=tuple(store.relative(p) for p in repaired),
    )


def _pass(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    paths: list[Path],
    seen: dict[str, int],
    issues: list[JournalIssue],
    touched: set[str],
) -> int:
    """Plan, load and commit ``paths`` in batches; returns the events ingested and adds the journals
    that took events to ``touched``."""
    states = load_states(con)
    errors: list[ErrorRecord] = []  # plan, journal, message, size, sid
    events = 0
    with tempfile.TemporaryDirectory(prefix="dsh-ingest-") as tmp:
        batch: list[Plan] = []
        batch_bytes = 0
        for path in paths:
            plan = plan_journal(store, path, states, Path(tmp), len(batch), issues, errors, seen)
            if plan is None:
                continue
            batch.append(plan)
            batch_bytes += plan.new_offset - plan.body_start
            if batch_bytes >= MAX_BATCH_BYTES:
                events += _run_batch(con, batch, issues, errors, touched)
                _account(batch, seen)
                batch, batch_bytes = [], 0
                _clear_scratch(Path(tmp))
        if batch or errors:
            events += _run_batch(con, batch, issues, errors, touched)
            _account(batch, seen)
    return events


def _open_journals(con: duckdb.DuckDBPyConnection, store: Store, paths: list[Path]) -> list[Path]:
    """The journals of ``paths`` whose ingested events end inside a turn (healthy ones only)."""
    rows = con.execute(
        "SELECT journal FROM _ingest_state WHERE open_turn IS NOT NULL AND error IS NULL"
    ).fetchall()
    names = {str(r[0]) for r in rows}
    return [p for p in paths if store.relative(p) in names]


def _repair_orphans(con: duckdb.DuckDBPyConnection, store: Store, paths: list[Path]) -> list[Path]:
    """Commit crash repair to every journal of ``paths`` that ends inside a turn while nobody holds
    its lock: its writer died. A live writer's lock makes ``repair_orphan`` leave it alone."""
    repaired: list[Path] = []
    for path in _open_journals(con, store, paths):
        try:
            if repair_orphan(path):
                repaired.append(path)
                _log.info("%s: its writer is gone; crash repair closed its open turn", path)
        except (SessionFormatError, OSError) as exc:
            # Damage is reported by ingest itself; a read-only store cannot be repaired from here.
            _log.warning("%s: could not commit crash repair: %s", path, exc)
    return repaired


def _account(batch: list[Plan], seen: dict[str, int]) -> None:
    for p in batch:  # ingested, or refused and recorded at this size: settled either way
        seen[p.journal] = p.size if p.new_offset == p.size else -1


def _clear_scratch(tmp: Path) -> None:
    for f in tmp.iterdir():
        f.unlink()


# --- the SQL batch ------------------------------------------------------------------------------------


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _exec(
    con: duckdb.DuckDBPyConnection, label: str, sql: str, params: list[object] | None = None
) -> duckdb.DuckDBPyConnection:
    """``con.execute`` with the step's time logged at DEBUG (where ingest time goes)."""
    started = time.perf_counter()
    result = con.execute(sql, params) if params is not None else con.execute(sql)
    _log.debug("ingest %s: %.3f s", label, time.perf_counter() - started)
    return result


def _run_batch(
    con: duckdb.DuckDBPyConnection,
    batch: list[Plan],
    issues: list[JournalIssue],
    errors: list[ErrorRecord],
    touched: set[str],
) -> int:
    """Load, validate, derive and commit one batch. Returns the events ingested; adds the journals
    that took events to ``touched`` once committed."""
    con.execute("BEGIN TRANSACTION")
    try:
        good = _load_and_validate(con, batch, issues, errors) if batch else []
        events = 0
        if good:
            if any(p.reset for p in good):
                _exec(con, "reset", q.RESET_SESSIONS)
            _exec(con, "sessions", q.INSERT_SESSIONS)
            for label, stmt in q.DERIVE_MESSAGES:
                _exec(con, label, stmt)
            started = time.perf_counter()
            folded = fold_batch(con)
            _log.debug("ingest surface fold (%d): %.3f s", folded, time.perf_counter() - started)
            for label, stmt in q.DERIVE:
                _exec(con, label, stmt)
            if _exec(con, "images?", IMAGES_NEEDED).fetchone() != (0, 0):
                _exec(con, "images", IMAGES)
                started = time.perf_counter()
                added = store_image_data(con)
                _log.debug("ingest image data (%d): %.3f s", added, time.perf_counter() - started)
            if _exec(con, "silent?", SILENT_NEEDED).fetchone() != (0,):
                _exec(con, "silent calls", SILENT)
            if _exec(con, "summary calls?", calls.NEEDED).fetchone() != (0,):
                _exec(con, "summary calls", calls.INSERT)
            _exec(con, "state", q.UPDATE_STATE)
            events = sum(p.lines for p in good)
        if errors:
            _record_errors(con, errors)
        _exec(con, "commit", "COMMIT")
    except duckdb.Error as exc:
        con.execute("ROLLBACK")
        raise StoreError(f"ingest failed: {exc}", code="INGEST_FAILED") from exc
    except BaseException:
        con.execute("ROLLBACK")
        raise
    errors.clear()
    touched.update(p.journal for p in good)
    return events


def _load_and_validate(
    con: duckdb.DuckDBPyConnection,
    batch: list[Plan],
    issues: list[JournalIssue],
    errors: list[ErrorRecord],
) -> list[Plan]:
    seen: dict[str, Plan] = {}
    plans: list[Plan] = []
    for p in batch:
        if p.session_id in seen:
            msg = f"{p.journal}:1: session id {p.session_id} is also the id of {seen[p.session_id].journal}"
            errors.append((p, p.journal, msg, p.size, p.session_id))
            issues.append(JournalIssue(journal=p.journal, message=msg))
            continue
        seen[p.session_id] = p
        plans.append(p)
    _create_files(con, plans)
    for sid, journal in con.execute(q.DUPLICATE_SESSIONS).fetchall():
        p = seen[str(sid)]
        msg = f"{p.journal}:1: session id {sid} was already ingested from {journal}"
        errors.append((p, p.journal, msg, p.size, p.session_id))
        issues.append(JournalIssue(journal=p.journal, message=msg))
    files = "[" + ", ".join(_sql_str(p.fname) for p in plans) + "]"
    # The reader allocates its buffers by this size: big enough for the longest line, no bigger.
    longest = max((p.new_offset - p.body_start for p in plans), default=0)
    max_object = max(16 << 20, 1 << longest.bit_length())
    _exec(
        con, "load", q.LOAD_RAW.replace("{files}", files).replace("{max_object}", str(max_object))
    )
    bad: set[str] = {p.session_id for p, *_ in errors if p is not None}
    for row in _exec(con, "validate", q.VALIDATE).fetchall():
        sid = str(row[0])
        p = seen[sid]
        msg = locate_damage(p)
        errors.append((p, p.journal, msg, p.size, p.session_id))
        issues.append(JournalIssue(journal=p.journal, message=msg))
        bad.add(sid)
    if bad:
        con.execute(
            "DELETE FROM _raw WHERE session_id IN (SELECT unnest($1::VARCHAR[]))", [sorted(bad)]
        )
        con.execute(
            "DELETE FROM _files WHERE session_id IN (SELECT unnest($1::VARCHAR[]))", [sorted(bad)]
        )
    return [p for p in plans if p.session_id not in bad]


def _create_files(con: duckdb.DuckDBPyConnection, plans: list[Plan]) -> None:
    st = [p.state for p in plans]
    h = [p.header for p in plans]
    con.execute(
        q.CREATE_FILES,
        [
            [p.fname for p in plans],
            [p.journal for p in plans],
            [p.session_id for p in plans],
            [p.next_seq for p in plans],
            [p.lines for p in plans],
            [p.new_offset for p in plans],
            [p.size for p in plans],
            [p.header_text for p in plans],
            [p.reset for p in plans],
            [s.open_turn if s else None for s in st],
            [s.open_step if s else None for s in st],
            [s.chunk_turn if s else None for s in st],
            [s.chunk_step if s else None for s in st],
            [s.chunk_finishes if s else None for s in st],
            [x is not None for x in h],
            [x.version if x else None for x in h],
            [x.created_at if x else None for x in h],
            [x.cwd if x else None for x in h],
            [x.notebook if x else None for x in h],
            [x.parent_session if x else None for x in h],
            [x.seed_length if x else None for x in h],
            [s.last_ms if s else None for s in st],
            [s.messages if s else None for s in st],
            [s.message_tokens if s else None for s in st],
            [x.user if x else None for x in h],
            [x.ai_policy if x else None for x in h],
            [x.parent_kind if x else None for x in h],
        ],
    )


def _record_errors(con: duckdb.DuckDBPyConnection, errors: list[ErrorRecord]) -> None:
    con.execute(
        q.RECORD_ERRORS,
        [
            [e[1] for e in errors],
            [e[4] for e in errors],
            [e[2] for e in errors],
            [e[3] for e in errors],
        ],
    )


def set_price(
    store: Store,
    *,
    provider: str,
    model: str,
    input_per_mtok: float | None,
    output_per_mtok: float | None,
    cached_input_per_mtok: float | None = None,
    cache_write_per_mtok: float | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> None:
    """Record (or replace) a model's prices per million tokens; ``usage.cost``, the footer and
    ``%agent cost`` use them in place of the catalogue's list price (``0, 0`` is a real price)."""
    with open_db(store, read_only=False, timeout_s=timeout_s) as con:
        con.execute(
            "INSERT OR REPLACE INTO prices VALUES (?, ?, ?, ?, ?, ?)",
            [
                provider,
                model,
                input_per_mtok,
                cached_input_per_mtok,
                cache_write_per_mtok,
                output_per_mtok,
            ],
        )
    bump()


def read_prices(store: Store, *, timeout_s: float = 2.0) -> dict[tuple[str, str], UserPrice]:
    """Every ``prices`` row (what ``set_price`` wrote) by ``(provider, model)``; empty when the
    database does not exist yet."""
    if not store.db_path.exists():
        return {}
    with open_db(store, read_only=True, timeout_s=timeout_s, durable_only=True) as con:
        rows = con.execute(
            "SELECT provider, model, input_per_mtok, cached_input_per_mtok, "
            "cache_write_per_mtok, output_per_mtok FROM prices"
        ).fetchall()
    return {
        (str(r[0]), str(r[1])): UserPrice(
            input_per_mtok=r[2],
            cached_input_per_mtok=r[3],
            cache_write_per_mtok=r[4],
            output_per_mtok=r[5],
        )
        for r in rows
    }
