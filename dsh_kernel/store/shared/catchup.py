"""Whole stores to and from the shared store: ``ship_store`` (catch-up) and ``mirror_store``.

``ship_store(store, target)`` is ``dsh-kernel ship``: for a kernel that crashed, or a
laptop that was offline, it ships every journal of ``store`` the server lacks. Each journal whose
writer is gone gets its crash repair first (``repair_orphan``: a torn tail is cut, an open turn
closed), exactly as an ingest would; a live journal is shipped as far as its complete lines go. The
server's ``max(seq)`` per session decides what is sent, so running it twice sends nothing twice.

Crash repair is judged from a journal's end (``repair_orphan_if_open``): one that ends with a
complete line and no open turn — nearly all — is not read in full for it. Its lines are instead held
to the journal reader's rules as they are read for sending (``JournalTail.check``: each parsed once),
and the whole journal is read before any of it is sent; at a line that cannot be vouched for, crash
repair's full read runs after all (``repair_orphan``), so a damaged journal is still skipped whole,
with the same words, and nothing of it reaches the server.

``mirror_store(target, store, since)`` is ``dsh-kernel mirror``: it pulls the shared
sessions (those active on or after ``since``) into ``store`` as ordinary journals — incrementally:
each journal gets only the events past the ones it holds, in ``seq`` order, stopping at a gap or at a
line that is not the event of its seq, as the very lines the kernel wrote — and then ingests the
store, so DuckDB's views and ``%%sql`` work over the whole class unchanged. A journal that a live
kernel holds (its lock) is left alone. Nothing here writes to the server but ``ship``.

The mirror's memory does not grow with what the server holds: the session list and each session's
event sizes are streamed (server-side cursors), the lines are fetched in pages of about
``PAGE_BYTES``, and a line over ``bounds.MAX_LINE_BYTES`` (stored before the server checked) is never
fetched — an omitted marker takes its place and one line in ``skipped`` names it — and neither is a
header over ``bounds.MAX_HEADER_BYTES`` (that session is skipped with a line).
"""

from __future__ import annotations

import json
import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from pathlib import Path

from dsh_kernel.errors import SessionFormatError, StoreError
from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.session.codec import dumps, header_from_json
from dsh_kernel.store.journal import repair_orphan, repair_orphan_if_open
from dsh_kernel.store.layout import Store
from dsh_kernel.store.shared.bounds import (
    MAX_HEADER_BYTES,
    MAX_LINE_BYTES,
    OMITTED,
    omitted_line,
    over_bound,
)
from dsh_kernel.store.shared.connection import (
    Connection,
    connect,
    driver,
    migrate,
    reason,
    server_errors,
)
from dsh_kernel.store.shared.send import (
    PIECE_BYTES,
    Batch,
    JournalTail,
    UnsoundJournal,
    resync,
    send,
)

try:
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - Windows
    _fcntl = None

__all__ = ["MirrorReport", "ShipReport", "mirror_store", "ship_store"]

_FETCH = 2000
"""Rows per fetch of the small rows (the session list, the events' sizes), and the most per page."""

PAGE_BYTES = 8 << 20
"""The lines one query of the mirror fetches: about this many bytes (8 MiB), or one line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShipReport:
    """What ``ship_store`` did."""

    journals: int
    events: int
    skipped: tuple[str, ...]
    """Journals that could not be read (damaged), each with why."""
    omitted: tuple[str, ...] = ()
    """Events over the shared store's bound, each shipped as an omitted marker (also logged)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MirrorReport:
    """What ``mirror_store`` did."""

    sessions: int
    events: int
    skipped: tuple[str, ...]
    """What was not mirrored as the server holds it, each with why: a session (a forged or
    oversized header, a live journal), the rest of a session (a gap, a line that is not its event),
    an event over the bound (its marker was written instead)."""


def ship_store(store: Store, target: str, *, name: str = "DSH_SHARED_STORE") -> ShipReport:
    """Ship every journal of ``store`` to ``target`` (module docstring); ``name`` says where the
    target came from in a refusal (a password in it, no driver)."""
    damaged: dict[Path, str] = {}  # journals crash repair found damaged: skipped whole, first
    tails: list[JournalTail] = []
    order: dict[Path, int] = {}
    for path in store.iter_journals():
        order[path] = len(order)
        try:
            clean = repair_orphan_if_open(path) is None
        except (SessionFormatError, OSError) as exc:
            damaged[path] = f"{path}: {exc}"
            continue
        tails.append(JournalTail(path=path, session_id=path.stem, check=clean))
    skipped: list[str] = []
    conn = connect(target, name=name)
    try:
        with server_errors(target):
            events = _ship_tails(conn, tails, skipped, damaged)
    finally:
        conn.close()
    shipped = [tail for tail in tails if tail.path not in damaged]
    return ShipReport(
        journals=len(shipped),
        events=events,
        # in the store's order, as if each had been found damaged before anything was sent
        skipped=tuple(damaged[p] for p in sorted(damaged, key=lambda p: order[p])) + tuple(skipped),
        omitted=tuple(why for tail in shipped for why in tail.omitted),
    )


def _ship_tails(
    conn: Connection, tails: list[JournalTail], skipped: list[str], damaged: dict[Path, str]
) -> int:
    migrate(conn)
    resync(conn, tails)
    events = 0
    # A checked journal is read whole before it is sent: the next one is read on a worker thread
    # while this one is sent (the server's work and the reading overlap; at most two in memory).
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dsh-ship-read") as reader:
        reads: dict[int, Future[tuple[dict[str, JsonValue] | None, list[Batch]]]] = {}

        def read_ahead(n: int) -> None:
            if n < len(tails) and tails[n].check:
                reads[n] = reader.submit(_read_checked, tails[n])

        read_ahead(0)
        try:
            for n, tail in enumerate(tails):
                read_ahead(n + 1)
                events += _ship_tail(conn, tail, reads.pop(n, None), skipped, damaged)
        finally:
            for pending in reads.values():
                pending.cancel()
    return events


def _ship_tail(
    conn: Connection,
    tail: JournalTail,
    read: Future[tuple[dict[str, JsonValue] | None, list[Batch]]] | None,
    skipped: list[str],
    damaged: dict[Path, str],
) -> int:
    """Ship one journal (``read``: its checked read, under way); returns how many events went."""
    ahead = None
    if read is not None:
        try:
            tail.header, ahead = read.result()
        except UnsoundJournal:
            tail.check = False
            try:
                repair_orphan(tail.path)  # the full read: it raises for damage
            except (SessionFormatError, OSError) as exc:
                damaged[tail.path] = f"{tail.path}: {exc}"
                return 0
    events = 0
    try:
        events = _ship_one(conn, tail, ahead)
    except driver().DatabaseError as exc:
        if conn.closed or conn.broken:
            raise  # the server went away: the whole run stops (server_errors says why)
        # refused for this journal only (row-level security: another user's session; a
        # constraint): the transaction is rolled back, the others go on
        skipped.append(f"{tail.path}: the shared store refused it: {reason(exc)}")
        return 0
    if tail.refused is not None:
        skipped.append(tail.refused)
    elif tail.torn_at is not None:
        skipped.append(f"{tail.path}: a line at byte {tail.torn_at} is not a journal event")
    return events


def _read_checked(tail: JournalTail) -> tuple[dict[str, JsonValue] | None, list[Batch]]:
    """The header ``tail`` will read and every batch it will send, read (and checked) before any
    is sent; ``tail`` itself is left as it is. Raises ``UnsoundJournal``."""
    scratch = replace(tail, omitted=[])
    batches: list[Batch] = []
    while True:
        batch = scratch.read()
        if not batch.rows and batch.offset == scratch.offset:
            return scratch.header, batches
        batches.append(batch)
        scratch.advance(batch)


def _ship_one(conn: Connection, tail: JournalTail, ahead: list[Batch] | None = None) -> int:
    """Send ``tail``'s batches (``ahead``: those ``_read_checked`` read; else read as they go)."""
    events = 0
    pending = iter(ahead) if ahead is not None else None
    while True:
        batch = tail.read() if pending is None else next(pending, None)
        if batch is None or (not batch.rows and batch.offset == tail.offset):
            return events
        if batch.rows or tail.next_seq == 0:
            send(conn, tail, batch.rows)
        tail.advance(batch)
        events += len(batch.rows)


def _local_events(path: Path) -> tuple[int, bool]:
    """How many events ``path`` holds, and whether it ends cleanly (a torn tail: False); read in
    pieces, so a long journal costs no memory."""
    lines = 0
    last = b"\n"
    try:
        with path.open("rb") as f:
            while piece := f.read(PIECE_BYTES):
                lines += piece.count(b"\n")
                last = piece[-1:]
    except FileNotFoundError:
        return 0, True
    if lines == 0 and last == b"\n":
        return 0, True  # empty
    return max(0, lines - 1), last == b"\n"


_LIST = """
SELECT CASE WHEN octet_length(session_id) <= 256 THEN session_id END,
       CASE WHEN octet_length(header::text) <= %(header)s THEN header END,
       octet_length(header::text)
FROM dsh_sessions WHERE last_active >= %(since)s ORDER BY created, session_id
"""

_SIZES = """
SELECT seq, time, left(type, 200), octet_length(line) FROM dsh_events
WHERE session_id = %s AND seq >= %s ORDER BY seq
"""

_LINES = """
SELECT seq, line FROM dsh_events
WHERE session_id = %s AND seq BETWEEN %s AND %s AND octet_length(line) <= %s ORDER BY seq
"""


def mirror_store(
    target: str, store: Store, since: date | None = None, *, name: str = "the mirror's DSN"
) -> MirrorReport:
    """Pull the shared sessions into ``store`` (module docstring); ingest is the caller's. ``name``
    says where the target came from in a refusal (a password in it, no driver)."""
    since_ms = (
        0
        if since is None
        else int(datetime(since.year, since.month, since.day, tzinfo=UTC).timestamp() * 1000)
    )
    conn = connect(target, name=name)
    skipped: list[str] = []
    sessions = events = 0
    try:
        with server_errors(target):
            # one snapshot per session: the sizes read first are the lines read after them
            conn.isolation_level = driver().IsolationLevel.REPEATABLE_READ
            # held across each session's commit; streamed, so a class of any size costs no memory
            with conn.cursor(name=f"dsh_mirror_sessions_{os.getpid()}", withhold=True) as listing:
                listing.itersize = _FETCH
                listing.execute(_LIST, {"header": MAX_HEADER_BYTES, "since": since_ms})
                conn.commit()
                for sid, header_obj, header_bytes in listing:
                    if sid is None:
                        skipped.append("a session row whose id is over 256 bytes; not mirrored")
                        continue
                    if header_obj is None:
                        skipped.append(
                            f"{sid}: its header {over_bound(int(header_bytes), MAX_HEADER_BYTES)}; "
                            "not mirrored"
                        )
                        continue
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
        if os.fstat(fd).st_size == 0:
            _write_all(fd, (dumps(header_obj) + "\n").encode("utf-8"))
        added = _copy_events(conn, fd, sid, have, skipped)
        conn.commit()
        os.fsync(fd)
        return added
    finally:
        os.close(fd)


def _copy_events(conn: Connection, fd: int, sid: str, have: int, skipped: list[str]) -> int:
    """Append ``sid``'s events from ``seq`` ``have`` on to ``fd``, in seq order, stopping at a gap or
    at a line that is not its event; returns how many. The sizes come first (small rows, streamed);
    the lines then in pages of about ``PAGE_BYTES``, and a line over ``MAX_LINE_BYTES`` is never
    fetched: its marker takes its place, with a line in ``skipped``."""
    added = 0
    page: list[_Sized] = []
    page_bytes = 0
    with conn.cursor(name=f"dsh_mirror_events_{os.getpid()}") as sizes:
        sizes.itersize = _FETCH
        sizes.execute(_SIZES, (sid, have))
        for seq, time, type_, size in sizes:
            due = have + added + len(page)
            if seq != due:
                written = _write_page(conn, fd, sid, page, skipped)
                if written == len(page):
                    skipped.append(f"{sid}: the server lacks event {due}")
                return added + written
            page.append(_Sized(seq=int(seq), time=int(time), type=type_, size=int(size)))
            if size <= MAX_LINE_BYTES:
                page_bytes += int(size)
            if page_bytes >= PAGE_BYTES or len(page) >= _FETCH:
                written = _write_page(conn, fd, sid, page, skipped)
                added += written
                if written < len(page):
                    return added
                page, page_bytes = [], 0
    return added + _write_page(conn, fd, sid, page, skipped)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Sized:
    """One server event as the mirror first reads it: without its line."""

    seq: int
    time: int
    type: str | None
    size: int
    """``octet_length(line)``: PostgreSQL knows it without decompressing the line."""


def _write_page(conn: Connection, fd: int, sid: str, page: list[_Sized], skipped: list[str]) -> int:
    """Fetch and append ``page``'s lines (a marker for one over ``MAX_LINE_BYTES``); returns how many
    were written — fewer than the page when a line is not the event of its seq (stored before the
    server checked), which stops the session there with a line in ``skipped``."""
    wanted = [r.seq for r in page if r.size <= MAX_LINE_BYTES]
    lines: dict[int, str] = {}
    if wanted:
        with conn.cursor() as cur:
            cur.execute(_LINES, (sid, wanted[0], wanted[-1], MAX_LINE_BYTES))
            lines = {int(seq): str(line) for seq, line in cur}
    out = bytearray()
    for n, r in enumerate(page):
        if r.size > MAX_LINE_BYTES:
            what = f"event {r.seq}" + (f" ({r.type})" if r.type else "")
            skipped.append(f"{sid}: {what} {over_bound(r.size)}; mirrored as a {OMITTED} marker")
            text = omitted_line(seq=r.seq, time=r.time, type_=r.type, size=r.size)
        else:
            text = lines.pop(r.seq, None)
            if text is None or not _is_event_line(text, r.seq):
                _write_all(fd, out)
                skipped.append(
                    f"{sid}: event {r.seq} on the server is not a journal event of that seq; "
                    "not mirrored from there"
                )
                return n
        out += text.encode("utf-8")
        out += b"\n"
        if len(out) >= PIECE_BYTES:
            _write_all(fd, out)
            out.clear()
    _write_all(fd, out)
    return len(page)


def _is_event_line(text: str, seq: int) -> bool:
    """Whether ``text`` is one JSON object whose ``seq`` is ``seq``."""
    try:
        obj: JsonValue = json.loads(text)
    except (ValueError, RecursionError):
        return False
    if not isinstance(obj, dict):
        return False
    found = obj.get("seq")
    return type(found) is int and found == seq


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
