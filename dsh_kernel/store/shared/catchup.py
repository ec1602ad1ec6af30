"""Whole stores to and from the shared store: ``ship_store`` (catch-up) and ``mirror_store``.

``ship_store(store, target)`` is ``python -m dsh_kernel ship``: for a kernel that crashed, or a
laptop that was offline, it ships every journal of ``store`` the server lacks. Each journal whose
writer is gone gets its crash repair first (``repair_orphan``: a torn tail is cut, an open turn
closed), exactly as an ingest would; a live journal is shipped as far as its complete lines go. The
server's ``max(seq)`` per session decides what is sent, so running it twice sends nothing twice.

``mirror_store(target, store, since)`` is ``python -m dsh_kernel mirror``: it pulls the shared
sessions (those active on or after ``since``) into ``store`` as ordinary journals — incrementally:
each journal gets only the events past the ones it holds, in ``seq`` order, stopping at a gap, as the
very lines the kernel wrote — and
then ingests the store, so DuckDB's views and ``%%sql`` work over the whole class unchanged. A journal
that a live kernel holds (its lock) is left alone. Nothing here writes to the server but ``ship``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

from dsh_kernel.errors import SessionFormatError, StoreError
from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.session.codec import dumps, header_from_json
from dsh_kernel.store.journal import repair_orphan
from dsh_kernel.store.layout import Store
from dsh_kernel.store.shared.connection import (
    Connection,
    connect,
    driver,
    migrate,
    reason,
    server_errors,
)
from dsh_kernel.store.shared.send import JournalTail, resync, send

try:
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - Windows
    _fcntl = None

__all__ = ["MirrorReport", "ShipReport", "mirror_store", "ship_store"]

_FETCH = 2000


@dataclass(frozen=True, slots=True, kw_only=True)
class ShipReport:
    """What ``ship_store`` did."""

    journals: int
    events: int
    skipped: tuple[str, ...]
    """Journals that could not be read (damaged), each with why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MirrorReport:
    """What ``mirror_store`` did."""

    sessions: int
    events: int
    skipped: tuple[str, ...]


def ship_store(store: Store, target: str) -> ShipReport:
    """Ship every journal of ``store`` to ``target`` (module docstring)."""
    skipped: list[str] = []
    tails: list[JournalTail] = []
    for path in store.iter_journals():
        try:
            repair_orphan(path)
        except (SessionFormatError, OSError) as exc:
            skipped.append(f"{path}: {exc}")
            continue
        tails.append(JournalTail(path=path, session_id=path.stem))
    conn = connect(target)
    try:
        with server_errors(target):
            events = _ship_tails(conn, tails, skipped)
    finally:
        conn.close()
    return ShipReport(journals=len(tails), events=events, skipped=tuple(skipped))


def _ship_tails(conn: Connection, tails: list[JournalTail], skipped: list[str]) -> int:
    migrate(conn)
    resync(conn, tails)
    events = 0
    for tail in tails:
        try:
            events += _ship_one(conn, tail)
        except driver().DatabaseError as exc:
            if conn.closed or conn.broken:
                raise  # the server went away: the whole run stops (server_errors says why)
            # refused for this journal only (row-level security: another user's session; a
            # constraint): the transaction is rolled back, the others go on
            skipped.append(f"{tail.path}: the shared store refused it: {reason(exc)}")
            continue
        if tail.refused is not None:
            skipped.append(tail.refused)
        elif tail.torn_at is not None:
            skipped.append(f"{tail.path}: a line at byte {tail.torn_at} is not a journal event")
    return events


def _ship_one(conn: Connection, tail: JournalTail) -> int:
    events = 0
    while True:
        rows, offset = tail.read()
        if not rows and offset == tail.offset:
            return events
        if rows or tail.next_seq == 0:
            send(conn, tail, rows)
        tail.advance(rows, offset)
        events += len(rows)


def _local_events(path: Path) -> tuple[int, bool]:
    """How many events ``path`` holds, and whether it ends cleanly (a torn tail: False)."""
    if not path.exists():
        return 0, True
    data = path.read_bytes()
    if not data:
        return 0, True
    return max(0, data.count(b"\n") - 1), data.endswith(b"\n")


def mirror_store(target: str, store: Store, since: date | None = None) -> MirrorReport:
    """Pull the shared sessions into ``store`` (module docstring); ingest is the caller's."""
    since_ms = (
        0
        if since is None
        else int(datetime(since.year, since.month, since.day, tzinfo=UTC).timestamp() * 1000)
    )
    conn = connect(target, name="the mirror's DSN")
    skipped: list[str] = []
    sessions = events = 0
    try:
        with server_errors(target):
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT session_id, header FROM dsh_sessions WHERE last_active >= %s "
                    "ORDER BY created, session_id",
                    (since_ms,),
                )
                listed = cur.fetchall()
            conn.commit()
            for sid, header_obj in listed:
                try:
                    header = header_from_json(header_obj, where=f"shared session {sid}")
                    if header.id != sid:
                        skipped.append(
                            f"{sid}: its header names another session ({header.id}); "
                            "not mirrored (a forged or damaged session row)"
                        )
                        continue
                    # named by the server's session_id (the key its events are stored under),
                    # never by anything else a student wrote
                    path = store.journal_path(header)
                except (SessionFormatError, StoreError) as exc:
                    skipped.append(f"{sid}: {exc}")
                    continue
                added = _mirror_one(conn, path, str(sid), header_obj, skipped)
                events += added
                sessions += added > 0
    finally:
        conn.close()
    return MirrorReport(sessions=sessions, events=events, skipped=tuple(skipped))


def _mirror_one(
    conn: Connection, path: Path, sid: str, header_obj: JsonValue, skipped: list[str]
) -> int:
    have, clean = _local_events(path)
    if not clean:
        skipped.append(f"{path}: ends with a torn line (ingest repairs it; mirror again after)")
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if _fcntl is not None:
            try:
                _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
            except BlockingIOError:
                skipped.append(f"{path}: a live kernel writes it here; left alone")
                return 0
        added = 0
        if os.fstat(fd).st_size == 0:
            _write_all(fd, dumps(header_obj) + "\n")
        with conn.cursor(name=f"dsh_mirror_{os.getpid()}") as cur:
            cur.itersize = _FETCH
            cur.execute(
                "SELECT seq, line FROM dsh_events WHERE session_id = %s AND seq >= %s ORDER BY seq",
                (sid, have),
            )
            chunk: list[str] = []
            for seq, line in cur:
                if seq != have + added + len(chunk):
                    skipped.append(f"{sid}: the server lacks event {have + added + len(chunk)}")
                    break
                chunk.append(f"{line}\n")
                if len(chunk) >= _FETCH:
                    _write_all(fd, "".join(chunk))
                    added += len(chunk)
                    chunk.clear()
            if chunk:
                _write_all(fd, "".join(chunk))
                added += len(chunk)
        conn.commit()
        os.fsync(fd)
        return added
    finally:
        os.close(fd)


def _write_all(fd: int, text: str) -> None:
    view = memoryview(text.encode("utf-8"))
    while view:
        view = view[os.write(fd, view) :]
