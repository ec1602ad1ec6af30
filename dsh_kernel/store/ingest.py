"""Incremental ingest of session journals into the typed tables of ``sessions.duckdb``.

Per journal, ``_ingest_state`` records how many bytes have been ingested (always up to a line end), the
next seq, the header line, and the little turn/step/attempt context needed to continue mid-turn. An
ingest pass:

1. *plans* in Python, per journal whose size differs from its offset: reads the new bytes, keeps only
   whole lines (a torn or still-being-written last line waits for the next pass), counts them, and
   copies them to a scratch file (the header line of a new journal is parsed here and registered);
2. *loads* every planned file in one columnar ``read_json`` (explicit columns, ``ignore_errors`` so a bad
   line becomes a row of NULLs instead of failing the batch) — never row-by-row inserts;
3. *validates* per journal in SQL: exactly the expected number of rows, seqs ``next_seq ..`` without gap
   or repeat, every envelope field present. A journal that fails is left out of the batch and recorded
   with the first bad line named (found by re-reading that journal in Python with the journal rules);
   it is retried only when its size changes. The others go on;
4. *derives*, in the same transaction, the typed rows (``t_events`` with turn/step, ``t_messages``,
   ``t_tool_calls``, ``t_tool_results``, ``t_attempts`` — upserted, so an attempt split across two passes
   merges) and advances ``_ingest_state``. Everything commits together or not at all.

A journal that shrank, or whose header line changed, is re-ingested from scratch (its rows are deleted
first). A header naming a session id already ingested from another journal is refused.

``ingest(store)`` opens the database read-write for one pass (``dsh_kernel.store.db``); when another
process holds it past the timeout it returns ``status="deferred"`` — the journals still hold the data and
the next pass (by anyone) picks it up. ``ingest_into(con, store)`` runs a pass on an open connection (the
in-memory journal fallback of ``dsh_kernel.store.query`` uses it).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import duckdb

from dsh_kernel.errors import SessionFormatError, StoreError
from dsh_kernel.session.codec import event_from_json, header_from_json, loads
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.store import ingest_sql as q
from dsh_kernel.store.db import DEFAULT_TIMEOUT_S, DatabaseBusy, open_db
from dsh_kernel.store.layout import Store

MAX_BATCH_BYTES = 128 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalIssue:
    """A journal that could not be ingested, and why (its first bad line is named)."""

    journal: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestReport:
    status: Literal["ingested", "up-to-date", "deferred"]
    events: int = 0
    journals: int = 0
    elapsed_s: float = 0.0
    issues: tuple[JournalIssue, ...] = ()
    notice: str | None = None
    """Why the pass was deferred (DuckDB's lock message, naming the holder's PID)."""


@dataclass(slots=True)
class _State:
    session_id: str
    byte_offset: int
    next_seq: int
    header: str
    open_turn: int | None
    open_step: int | None
    chunk_turn: int | None
    chunk_step: int | None
    chunk_finishes: int | None
    error: str | None
    checked_size: int | None


@dataclass(slots=True)
class _Plan:
    journal: str
    path: Path
    fname: str
    session_id: str
    header_text: str
    header: SessionHeader | None  # set for a journal ingested from its start
    reset: bool
    start: int
    body_start: int  # offset in the file of the first event line of this batch
    new_offset: int
    next_seq: int
    lines: int
    size: int
    state: _State | None


@dataclass(frozen=True, slots=True)
class _Seen:
    """What this process last ingested into one database file: journal sizes (``-1``: a partial
    line remained) and the known damage. Lets a pass with nothing to do skip opening the database."""

    db_file: tuple[int, int]
    sizes: dict[str, int]
    issues: tuple[JournalIssue, ...]


_seen: dict[Path, _Seen] = {}


def _db_identity(store: Store) -> tuple[int, int] | None:
    try:
        st = store.db_path.stat()
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


def _nothing_new(store: Store) -> _Seen | None:
    seen = _seen.get(store.db_path)
    if seen is None or _db_identity(store) != seen.db_file:
        return None
    count = 0
    for path in store.iter_journals():
        count += 1
        known = seen.sizes.get(store.relative(path), -1)
        if known < 0 or _size(path) != known:
            return None
    return seen if count == len(seen.sizes) else None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return -1


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
            report = ingest_into(con, store, journals, sizes=sizes)
        identity = _db_identity(store)
        if journals is None and identity is not None:
            _seen[store.db_path] = _Seen(db_file=identity, sizes=sizes, issues=report.issues)
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
) -> IngestReport:
    """One pass on an open connection. ``sizes`` (if given) receives, per journal, the size now
    fully accounted for (``-1`` when a partial line remains)."""
    started = time.perf_counter()
    seen: dict[str, int] = {} if sizes is None else sizes
    states = _load_states(con)
    issues: list[JournalIssue] = []
    errors: list[tuple[_Plan | None, str, str, int, str]] = []  # plan, journal, message, size, sid
    events = touched = 0
    paths = list(store.iter_journals()) if journals is None else journals
    with tempfile.TemporaryDirectory(prefix="dsh-ingest-") as tmp:
        batch: list[_Plan] = []
        batch_bytes = 0
        for path in paths:
            plan = _plan(store, path, states, Path(tmp), len(batch), issues, errors, seen)
            if plan is None:
                continue
            batch.append(plan)
            batch_bytes += plan.new_offset - plan.body_start
            if batch_bytes >= MAX_BATCH_BYTES:
                n, t = _run_batch(con, batch, issues, errors)
                events, touched = events + n, touched + t
                _account(batch, seen)
                batch, batch_bytes = [], 0
                _clear_scratch(Path(tmp))
        if batch or errors:
            n, t = _run_batch(con, batch, issues, errors)
            events, touched = events + n, touched + t
            _account(batch, seen)
    status: Literal["ingested", "up-to-date"] = "ingested" if touched else "up-to-date"
    return IngestReport(
        status=status,
        events=events,
        journals=touched,
        elapsed_s=time.perf_counter() - started,
        issues=tuple(issues),
    )


def _account(batch: list[_Plan], seen: dict[str, int]) -> None:
    for p in batch:  # ingested, or refused and recorded at this size: settled either way
        seen[p.journal] = p.size if p.new_offset == p.size else -1


def _clear_scratch(tmp: Path) -> None:
    for f in tmp.iterdir():
        f.unlink()


def _load_states(con: duckdb.DuckDBPyConnection) -> dict[str, _State]:
    rows = con.execute(q.LOAD_STATES).fetchall()
    return {
        str(r[0]): _State(
            session_id=str(r[1]),
            byte_offset=int(r[2]),
            next_seq=int(r[3]),
            header=str(r[4]),
            open_turn=r[5],
            open_step=r[6],
            chunk_turn=r[7],
            chunk_step=r[8],
            chunk_finishes=r[9],
            error=r[10],
            checked_size=r[11],
        )
        for r in rows
    }


# --- planning (Python: bytes, lines, headers) ------------------------------------------------------------


def _plan(
    store: Store,
    path: Path,
    states: dict[str, _State],
    tmp: Path,
    index: int,
    issues: list[JournalIssue],
    errors: list[tuple[_Plan | None, str, str, int, str]],
    seen: dict[str, int],
) -> _Plan | None:
    journal = store.relative(path)
    size = _size(path)
    if size < 0:
        return None
    seen[journal] = -1  # until proven complete
    prev = states.get(journal)
    if prev is not None and prev.error is not None and prev.checked_size == size:
        issues.append(JournalIssue(journal=journal, message=prev.error))
        seen[journal] = size
        return None
    reset = False
    start = prev.byte_offset if prev is not None else 0
    if prev is not None and size < prev.byte_offset:
        reset, start = True, 0
    if prev is not None and size == start and not reset:
        seen[journal] = size
        return None
    with open(path, "rb") as f:
        first = f.readline()
        if (
            prev is not None
            and start > 0
            and first.rstrip(b"\n").decode("utf-8", "replace") != prev.header
        ):
            reset, start = True, 0
        f.seek(start)
        data = f.read(size - start)
    header: SessionHeader | None = None
    body_start = 0
    header_text = prev.header if prev is not None and not reset else ""
    sid = prev.session_id if prev is not None and not reset else path.stem
    if start == 0:
        nl = data.find(b"\n")
        if nl < 0:
            return None  # not even a whole header line yet
        header_text = data[:nl].decode("utf-8", "replace")
        try:
            header = header_from_json(loads(header_text), where=f"{journal}:1")
        except (ValueError, SessionFormatError) as exc:
            message = str(exc) if isinstance(exc, SessionFormatError) else f"{journal}:1: {exc}"
            errors.append((None, journal, message, size, sid))
            issues.append(JournalIssue(journal=journal, message=message))
            seen[journal] = size
            return None
        sid = header.id
        body_start = nl + 1
    cut = data.rfind(b"\n") + 1
    body = data[body_start:cut]
    lines = body.count(b"\n")
    if lines == 0 and header is None:
        return None
    del seen[journal]  # settled once its batch commits (``_account``)
    fname = str(tmp / f"{index}.jsonl")
    with open(fname, "wb") as out:
        out.write(body)
    return _Plan(
        journal=journal,
        path=path,
        fname=fname,
        session_id=sid,
        header_text=header_text,
        header=header,
        reset=reset or (prev is not None and start == 0),
        start=start,
        body_start=start + body_start,
        new_offset=start + cut,
        next_seq=0 if start == 0 else (prev.next_seq if prev is not None else 0),
        lines=lines,
        size=size,
        state=None if start == 0 else prev,
    )


def _locate_damage(plan: _Plan) -> str:
    """Re-read the planned lines with the journal rules and name the first bad one."""
    with open(plan.path, "rb") as f:
        first_line = 1 + f.read(plan.body_start).count(b"\n")
        body = f.read(plan.new_offset - plan.body_start)
    expected = plan.next_seq
    for i, raw in enumerate(body.split(b"\n")[: plan.lines]):
        where = f"{plan.journal}:{first_line + i}"
        try:
            obj = loads(raw.decode("utf-8"))
            event = event_from_json(obj, None, where=where)
        except (ValueError, SessionFormatError) as exc:
            text = str(exc)
            if isinstance(exc, json.JSONDecodeError):
                text = f"{where}: not valid JSON ({exc.msg} at column {exc.colno})"
            elif not text.startswith(where):
                text = f"{where}: {text}"
            return f"{text}: the journal is damaged and was not ingested"
        assert event is not None
        if event.seq != expected:
            return (
                f"{where}: event {event.type!r} has seq {event.seq} but seq {expected} was expected "
                "(a gap or a repeat): the journal is damaged and was not ingested"
            )
        expected += 1
    return (
        f"{plan.journal}: the new lines could not be read as events; the journal was not ingested"
    )


# --- the SQL batch ------------------------------------------------------------------------------------


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _run_batch(
    con: duckdb.DuckDBPyConnection,
    batch: list[_Plan],
    issues: list[JournalIssue],
    errors: list[tuple[_Plan | None, str, str, int, str]],
) -> tuple[int, int]:
    """Load, validate, derive and commit one batch. Returns (events ingested, journals touched)."""
    con.execute("BEGIN TRANSACTION")
    try:
        good = _load_and_validate(con, batch, issues, errors) if batch else []
        events = 0
        if good:
            if any(p.reset for p in good):
                con.execute(q.RESET_SESSIONS)
            con.execute(q.INSERT_SESSIONS)
            for stmt in q.DERIVE:
                con.execute(stmt)
            con.execute(q.UPDATE_STATE)
            events = sum(p.lines for p in good)
        if errors:
            _record_errors(con, errors)
        con.execute("COMMIT")
    except duckdb.Error as exc:
        con.execute("ROLLBACK")
        raise StoreError(f"ingest failed: {exc}", code="INGEST_FAILED") from exc
    except BaseException:
        con.execute("ROLLBACK")
        raise
    errors.clear()
    return events, len(good) if batch else 0


def _load_and_validate(
    con: duckdb.DuckDBPyConnection,
    batch: list[_Plan],
    issues: list[JournalIssue],
    errors: list[tuple[_Plan | None, str, str, int, str]],
) -> list[_Plan]:
    seen: dict[str, _Plan] = {}
    plans: list[_Plan] = []
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
    con.execute(q.LOAD_RAW.replace("{files}", files))
    bad: set[str] = {p.session_id for p, *_ in errors if p is not None}
    for row in con.execute(q.VALIDATE).fetchall():
        sid = str(row[0])
        p = seen[sid]
        msg = _locate_damage(p)
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


def _create_files(con: duckdb.DuckDBPyConnection, plans: list[_Plan]) -> None:
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
        ],
    )


def _record_errors(
    con: duckdb.DuckDBPyConnection, errors: list[tuple[_Plan | None, str, str, int, str]]
) -> None:
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
    """Record (or replace) a model's prices per million tokens; ``usage.cost`` uses them."""
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


def journal_size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0
