"""One journal's unshipped lines, and sending them to the shared store in one transaction.

``JournalTail`` is what a shipper remembers of one journal: the byte offset up to which its lines
were shipped and the next ``seq`` the server lacks. ``read()`` returns the complete lines past the
offset as rows; a journal whose header ``id`` is not its session id (the file's stem) is refused
once (``refused``, logged) and never read — the server and the mirror name a session by its id, so a
header naming another's session must not reach them. It returns the rows — never a torn tail: only
newline-terminated lines are read, and a line that does not parse as a journal event stops the read
there (it is logged once and never shipped; the crash repair
of ``load_session``/``repair_orphan`` is what turns such a journal into one that ships again). With
``durable`` (the live writer's ``committed``), lines past the events the writer has committed are left
for later, so a write the journal is about to take back is never shipped.

``send(conn, tail, rows)`` is one transaction: the session row is upserted (header, user, notebook,
created, last active, event count), the rows are ``COPY``'d into a temporary table (the lines as
written: the server parses each one's ``data`` into ``jsonb``, so the kernel does not), then
``INSERT … ON CONFLICT (session_id, seq) DO NOTHING`` — so a batch sent twice, or resent after a
commit whose answer was lost, changes nothing. ``resync(conn, tails)`` asks the server for each
session's ``max(seq)`` (after a reconnect) and rewinds a tail to resend from there.

JSON ``\\u0000`` cannot be stored in ``jsonb``: such a character is U+FFFD in ``data``; ``line``, the
journal line as written, keeps it (and the key order ``jsonb`` does not), so a mirror is exact.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.store.shared.connection import Connection

__all__ = ["MAX_BATCH", "JournalTail", "Row", "resync", "send"]

_log = logging.getLogger(__name__)

MAX_BATCH = 5000
"""The most events one transaction carries (a long offline journal goes in several)."""


@dataclass(frozen=True, slots=True)
class Row:
    """One event as ``dsh_events`` stores it (JSON columns as text)."""

    seq: int
    type: str
    time: int
    line: str
    """The journal line as written (no newline); the server takes ``data`` from it."""
    data: str | None = None
    """``data`` as JSON text, only when the line holds a ``\\u0000`` (which ``jsonb`` refuses)."""


@dataclass(slots=True, kw_only=True)
class JournalTail:
    """The shipping state of one journal (see the module docstring)."""

    path: Path
    session_id: str
    header: dict[str, JsonValue] | None = None
    """The journal's header line, once read (or given by the live writer)."""
    durable: Callable[[], int] | None = None
    """How many events the live writer has committed; ``None`` for a journal nobody writes."""
    offset: int = 0
    """Bytes of the file already shipped (0: the header line too is still to be read)."""
    next_seq: int = 0
    """The first event the server does not hold."""
    last_time: int = 0
    torn_at: int | None = field(default=None, repr=False)
    """The offset of a line that did not parse (warned about once)."""
    refused: str | None = field(default=None, repr=False)
    """Why this journal is never shipped (its header names another session), logged once."""

    def behind(self) -> int:
        """Durable events not shipped yet (for a journal nobody writes: 0 once it is read)."""
        if self.durable is None:
            return 0
        return max(0, self.durable() - self.next_seq)

    def read(self, limit: int = MAX_BATCH) -> tuple[list[Row], int]:
        """Up to ``limit`` rows past ``next_seq`` and the offset just past the last line read.
        Changes nothing: ``advance`` does, once the rows are on the server."""
        if self.refused is not None:
            return [], self.offset
        cap = self.durable() if self.durable is not None else None
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return [], self.offset
        end = data.rfind(b"\n") + 1  # an unterminated tail is never read
        rows: list[Row] = []
        pos = 0
        offset = self.offset
        while pos < end and len(rows) < limit:
            nl = data.index(b"\n", pos)
            line = data[pos:nl]
            obj = _parse(line)
            if offset + pos == 0:
                if obj is None or obj.get("type") != "session":
                    self._torn(0)
                    break
                if obj.get("id") != self.session_id:
                    self._refuse(obj.get("id"))
                    return [], self.offset
                self.header = obj
                pos = nl + 1
                continue
            if obj is None or not _is_event(obj):
                self._torn(offset + pos)
                break
            seq = obj["seq"]
            assert isinstance(seq, int)
            if cap is not None and seq >= cap:
                break
            if seq >= self.next_seq:
                rows.append(_row(obj, line))
            pos = nl + 1
        return rows, offset + pos

    def advance(self, rows: Sequence[Row], offset: int) -> None:
        """Record ``rows`` as shipped and ``offset`` as read."""
        self.offset = offset
        if rows:
            self.next_seq = rows[-1].seq + 1
            self.last_time = max(self.last_time, rows[-1].time)

    def _refuse(self, header_id: JsonValue) -> None:
        self.refused = (
            f"{self.path}: its header's id {json.dumps(header_id)} is not its session id "
            f"{self.session_id!r} (the file's name); not shipped"
        )
        _log.warning("dsh: %s", self.refused)

    def _torn(self, at: int) -> None:
        if self.torn_at != at:
            self.torn_at = at
            _log.warning(
                "%s: the line at byte %d is not a complete journal event; it is not shipped "
                "(a torn tail is cut by crash repair: python -m dsh_kernel ship)",
                self.path,
                at,
            )


def _parse(line: bytes) -> dict[str, JsonValue] | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return cast("dict[str, JsonValue]", obj) if isinstance(obj, dict) else None


def _is_event(obj: dict[str, JsonValue]) -> bool:
    return (
        isinstance(obj.get("type"), str)
        and type(obj.get("seq")) is int
        and type(obj.get("time")) is int
        and isinstance(obj.get("data"), dict)
    )


def _no_nul(value: JsonValue) -> JsonValue:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, list):
        return [_no_nul(v) for v in value]
    if isinstance(value, dict):
        return {k.replace("\x00", "\ufffd"): _no_nul(v) for k, v in value.items()}
    return value


def _row(obj: dict[str, JsonValue], line: bytes) -> Row:
    seq, time, kind = obj["seq"], obj["time"], obj["type"]
    assert isinstance(seq, int) and isinstance(time, int) and isinstance(kind, str)
    data = None
    if b"\\u0000" in line:
        data = json.dumps(_no_nul(obj["data"]), ensure_ascii=False, separators=(",", ":"))
    return Row(seq=seq, type=kind, time=time, line=line.decode("utf-8"), data=data)


_UPSERT_SESSION = """
INSERT INTO dsh_sessions AS s (session_id, "user", notebook, created, last_active, events, header)
VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb)
ON CONFLICT (session_id) DO UPDATE SET
    "user" = EXCLUDED."user",
    notebook = EXCLUDED.notebook,
    header = EXCLUDED.header,
    last_active = GREATEST(s.last_active, EXCLUDED.last_active),
    events = GREATEST(s.events, EXCLUDED.events)
"""

_INCOMING = """
CREATE TEMPORARY TABLE IF NOT EXISTS dsh_incoming (
    session_id text, seq bigint, type text, time bigint, data jsonb, line text
) ON COMMIT DELETE ROWS
"""

_MOVE = """
INSERT INTO dsh_events (session_id, seq, type, time, data, line)
SELECT session_id, seq, type, time, COALESCE(data, (line::jsonb)->'data'), line FROM dsh_incoming
ON CONFLICT (session_id, seq) DO NOTHING
"""


def send(conn: Connection, tail: JournalTail, rows: Sequence[Row]) -> None:
    """Ship ``rows`` of ``tail``'s session in one transaction (module docstring). Raises the
    driver's error when the server fails; nothing is half-written then."""
    header = tail.header or {}
    created = header.get("createdAt")
    created_ms = created if isinstance(created, int) else 0
    last = max([tail.last_time, created_ms, *(r.time for r in rows)])
    events = rows[-1].seq + 1 if rows else tail.next_seq
    user, notebook = header.get("user"), header.get("notebook")
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(
            _UPSERT_SESSION,
            (
                tail.session_id,
                user if isinstance(user, str) else None,
                notebook if isinstance(notebook, str) else None,
                created_ms,
                last,
                events,
                json.dumps(header, ensure_ascii=False),
            ),
        )
        if rows:
            cur.execute(_INCOMING)
            with cur.copy(
                "COPY dsh_incoming (session_id, seq, type, time, data, line) FROM STDIN"
            ) as copy:
                for r in rows:
                    copy.write_row((tail.session_id, r.seq, r.type, r.time, r.data, r.line))
            cur.execute(_MOVE)


def resync(conn: Connection, tails: Sequence[JournalTail]) -> None:
    """Set each tail's ``next_seq`` to the server's ``max(seq) + 1`` for its session; a tail the
    server is behind (or ahead of) is rewound to read its journal from the start."""
    if not tails:
        return
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(
            "SELECT session_id, max(seq) FROM dsh_events WHERE session_id = ANY(%s) "
            "GROUP BY session_id",
            ([t.session_id for t in tails],),
        )
        held = {str(sid): int(top) for sid, top in cur.fetchall()}
    for tail in tails:
        server_next = held.get(tail.session_id, -1) + 1
        if server_next != tail.next_seq or tail.header is None:
            tail.next_seq = server_next
            tail.offset = 0
