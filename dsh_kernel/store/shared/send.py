"""One journal's unshipped lines, and sending them to the shared store in one transaction.

``JournalTail`` is what a shipper remembers of one journal: the byte offset up to which its lines
were shipped, the ``seq`` of the line there, and the next ``seq`` the server lacks. ``read()`` returns
a ``Batch``: the complete lines past the offset as rows, at most ``MAX_BATCH`` of them and about
``MAX_BATCH_BYTES`` of lines. It reads the file in pieces of ``PIECE_BYTES`` and never holds more of
one line than ``bounds.MAX_LINE_BYTES``: a longer line is counted to its end, not kept, and shipped as
an omitted marker (``bounds``: same ``seq`` and ``time``, the type and size of what was left out; the
journal keeps the event, and the warning is logged once). A journal whose header ``id`` is not its
session id (the file's stem), or whose header line is over half ``bounds.MAX_HEADER_BYTES``, is refused
once (``refused``, logged) and never read — the server and the mirror name a session by its id, so a
header naming another's session must not reach them. It returns the rows — never a torn tail: only
newline-terminated lines are read, and a line that does not parse as a journal event, or whose ``seq``
is not the one due there (seqs run 0, 1, 2, … in a journal), stops the read there (it is logged once
and never shipped; the crash repair of ``load_session``/``repair_orphan`` is what turns such a journal
into one that ships again). With ``durable`` (the live writer's ``committed``), lines past the events
the writer has committed are left for later, so a write the journal is about to take back is never
shipped.

With ``check`` (``ship_store`` sets it on a journal whose writer is gone and whose end shows it needs
no crash repair: ``journal.repair_orphan_if_open``), every line read is also held to the journal
reader's rules (``read_journal``: UTF-8, strict JSON, the event envelope and its type's payload, the
header) — each line parsed once for both — and the first one this cannot vouch for (one it breaks,
one over the bound, a torn tail) raises ``UnsoundJournal`` before anything changes, so the caller
runs the crash repair's full read, which says what is wrong, as it did before sending.

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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Final, cast

from dsh_kernel.errors import LosslessJsonError, SessionFormatError
from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.session.check.payload import problem as payload_problem
from dsh_kernel.session.codec import event_from_json, header_from_json
from dsh_kernel.session.events import EVENT_CATALOG
from dsh_kernel.store.shared.bounds import (
    HEAD_BYTES,
    MAX_HEADER_BYTES,
    MAX_LINE_BYTES,
    OMITTED,
    event_head,
    omitted_line,
    over_bound,
)
from dsh_kernel.store.shared.connection import Connection

__all__ = [
    "MAX_BATCH",
    "MAX_BATCH_BYTES",
    "PIECE_BYTES",
    "Batch",
    "JournalTail",
    "Row",
    "UnsoundJournal",
    "resync",
    "send",
]

_log = logging.getLogger(__name__)

MAX_BATCH = 5000
"""The most events one transaction carries (a long offline journal goes in several)."""

MAX_BATCH_BYTES: Final = 16 << 20
"""A batch ends with the line that brings its lines to this many bytes (16 MiB)."""

PIECE_BYTES: Final = 1 << 20
"""How much of a journal one read of the file takes (1 MiB)."""

_KNOWN_TYPES: Final = frozenset(EVENT_CATALOG)


class UnsoundJournal(Exception):
    """A ``check``-ed read met a line it cannot vouch for (module docstring); nothing was changed."""


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
    omitted: str | None = None
    """For an omitted marker: what it stands in for, as the line the shipper logs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    """What one ``JournalTail.read`` found."""

    rows: list[Row]
    offset: int
    """Just past the last line read."""
    seq: int
    """The ``seq`` of the event line that starts at ``offset``."""


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
    offset_seq: int = 0
    """The ``seq`` of the event line at ``offset`` (at 0, the one after the header)."""
    next_seq: int = 0
    """The first event the server does not hold."""
    last_time: int = 0
    omitted: list[str] = field(default_factory=list[str], repr=False)
    """Each event shipped as an omitted marker, as the line logged about it."""
    torn_at: int | None = field(default=None, repr=False)
    """The offset of a line that did not parse (warned about once)."""
    refused: str | None = field(default=None, repr=False)
    """Why this journal is never shipped (its header names another session), logged once."""
    check: bool = False
    """Hold every line to the journal reader's rules as it is read (module docstring)."""

    def behind(self) -> int:
        """Durable events not shipped yet (for a journal nobody writes: 0 once it is read)."""
        if self.durable is None:
            return 0
        return max(0, self.durable() - self.next_seq)

    def read(self, limit: int = MAX_BATCH) -> Batch:
        """Up to ``limit`` rows past ``next_seq`` (module docstring). Changes nothing:
        ``advance`` does, once the rows are on the server. With ``check``, raises
        ``UnsoundJournal`` at a line it cannot vouch for."""
        nothing = Batch(rows=[], offset=self.offset, seq=self.offset_seq)
        if self.refused is not None:
            return nothing
        cap = self.durable() if self.durable is not None else None
        try:
            f = self.path.open("rb")
        except FileNotFoundError:
            return nothing
        rows: list[Row] = []
        size = 0
        check = self.check
        offset, seq, time = self.offset, self.offset_seq, self.last_time
        with f:
            f.seek(offset)
            for line in _lines(f, offset):
                if line.start == 0:
                    if not self._take_header(line):
                        return nothing
                    offset, seq = line.end, 0
                    continue
                if cap is not None and seq >= cap:
                    break
                if seq < self.next_seq:  # on the server already (a tail rewound by resync)
                    if check:
                        _checked(line.text, seq)
                    offset, seq = line.end, seq + 1
                    continue
                if check:
                    obj, text = _checked(line.text, seq)
                    row = _row(obj, text)
                    size += line.size
                elif line.text is None:
                    head = event_head(line.head)
                    if head is not None and head.seq != seq:
                        self._torn(line.start, f"has seq {head.seq} where {seq} is due")
                        break
                    if head is None:
                        row = self._marker(line, seq, None, time)  # the time of the one before
                    else:
                        row = self._marker(line, seq, head.type, head.time)
                else:
                    obj, text = _parse_event(line.text)
                    if obj is None or not _is_event(obj):
                        self._torn(line.start)
                        break
                    if obj["seq"] != seq:
                        self._torn(line.start, f"has seq {obj['seq']} where {seq} is due")
                        break
                    row = _row(obj, line.text.decode("utf-8") if text is None else text)
                    size += line.size
                rows.append(row)
                time = max(time, row.time)
                offset, seq = line.end, seq + 1
                if len(rows) >= limit or size >= MAX_BATCH_BYTES:
                    break
            else:
                if check and f.tell() != offset:
                    raise UnsoundJournal  # an unterminated last line (crash repair's business)
        return Batch(rows=rows, offset=offset, seq=seq)

    def advance(self, batch: Batch) -> None:
        """Record ``batch`` (its rows now on the server) as shipped and read."""
        self.offset = batch.offset
        self.offset_seq = batch.seq
        for row in batch.rows:
            if row.omitted is not None:
                self.omitted.append(row.omitted)
                _log.warning("dsh: %s", row.omitted)
        if batch.rows:
            self.next_seq = batch.rows[-1].seq + 1
            self.last_time = max(self.last_time, batch.rows[-1].time)

    def _take_header(self, line: _Line) -> bool:
        """Read the header line ``line``; False (and ``refused``) when it may not be shipped."""
        if self.check:
            self.header = _checked_header(line, self.session_id)
            return True
        if line.text is None or line.size > MAX_HEADER_BYTES // 2:
            self._refuse(f"its header line {over_bound(line.size, MAX_HEADER_BYTES // 2)}")
            return False
        obj = _parse(line.text)
        if obj is None or obj.get("type") != "session":
            self._torn(0)
            return False
        if obj.get("id") != self.session_id:
            self._refuse(
                f"its header's id {json.dumps(obj.get('id'))} is not its session id "
                f"{self.session_id!r} (the file's name)"
            )
            return False
        self.header = obj
        return True

    def _marker(self, line: _Line, seq: int, type_: str | None, time: int) -> Row:
        what = f"event {seq}" + (f" ({type_})" if type_ else "")
        return Row(
            seq=seq,
            type=OMITTED,
            time=time,
            line=omitted_line(seq=seq, time=time, type_=type_, size=line.size),
            omitted=(
                f"{self.path}: {what} {over_bound(line.size)}; shipped as a {OMITTED} marker "
                "(the journal keeps it)"
            ),
        )

    def _refuse(self, why: str) -> None:
        self.refused = f"{self.path}: {why}; not shipped"
        _log.warning("dsh: %s", self.refused)

    def _torn(self, at: int, why: str = "is not a complete journal event") -> None:
        if self.torn_at != at:
            self.torn_at = at
            _log.warning(
                "%s: the line at byte %d %s; it is not shipped "
                "(a torn tail is cut by crash repair: python -m dsh_kernel ship)",
                self.path,
                at,
                why,
            )


@dataclass(frozen=True, slots=True)
class _Line:
    """One newline-terminated line of a journal file."""

    start: int
    """Its offset in the file."""
    size: int
    """Its bytes, without the newline."""
    text: bytes | None
    """Its bytes; ``None`` for a line over ``MAX_LINE_BYTES`` (only counted)."""
    head: bytes
    """Its first ``HEAD_BYTES``."""

    @property
    def end(self) -> int:
        return self.start + self.size + 1


def _lines(
    f: BinaryIO, offset: int, *, piece: int = PIECE_BYTES, limit: int = MAX_LINE_BYTES
) -> Iterator[_Line]:
    """The complete lines of ``f`` from ``offset`` (where it is positioned), read ``piece`` bytes at
    a time; of a line over ``limit`` bytes only the size and the head are kept. An unterminated last
    line is never yielded."""
    buf = bytearray()  # the line so far; once it is over ``limit``, only its head
    size = 0
    over = False
    start = offset
    while data := f.read(piece):
        pos = 0
        while True:
            nl = data.find(b"\n", pos)
            if size == 0 and 0 <= nl - pos <= limit:  # a whole line in this piece: one copy
                text = data[pos:nl]
                yield _Line(start=start, size=nl - pos, text=text, head=text[:HEAD_BYTES])
                start = nl + 1 + start - pos
                pos = nl + 1
                continue
            end = len(data) if nl < 0 else nl
            if not over and size + (end - pos) > limit:
                over = True
                buf = bytearray(buf[:HEAD_BYTES])  # the rest is let go
            if not over:
                buf += data[pos:end]
            elif len(buf) < HEAD_BYTES:
                buf += data[pos : min(end, pos + HEAD_BYTES - len(buf))]
            size += end - pos
            if nl < 0:
                break
            text = bytes(buf)
            if over:
                yield _Line(start=start, size=size, text=None, head=text)
            else:
                yield _Line(start=start, size=size, text=text, head=text[:HEAD_BYTES])
            start += size + 1
            size = 0
            over = False
            buf = bytearray()
            pos = nl + 1


def _parse(line: bytes) -> dict[str, JsonValue] | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return cast("dict[str, JsonValue]", obj) if isinstance(obj, dict) else None


def _parse_event(line: bytes) -> tuple[dict[str, JsonValue] | None, str | None]:
    """``_parse(line)``, and the line as text when it is UTF-8 — decoded once for both. A line that
    starts with ``{`` and no NUL after it is one ``json.loads`` reads as UTF-8 (its encoding sniffing
    picks UTF-8 then), so parsing the text is parsing the bytes; any other line goes the bytes' way."""
    if line[:1] != b"{" or line[1:2] == b"\x00":
        return _parse(line), None
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return _parse(line), None
    try:
        obj = json.loads(text)
    except ValueError:
        return None, text
    return (cast("dict[str, JsonValue]", obj) if isinstance(obj, dict) else None), text


def _refuse_constant(name: str) -> JsonValue:
    raise ValueError(f"{name} is not JSON")


_STRICT: Final = json.JSONDecoder(parse_constant=_refuse_constant)
"""``codec.loads``'s reading (no ``NaN``/``Infinity``), made once."""


def _strict(line: bytes | None) -> tuple[dict[str, JsonValue], str]:
    """``line`` as ``read_journal`` parses it, and as text; ``UnsoundJournal`` if it would not."""
    if line is None or line[:1] != b"{":
        raise UnsoundJournal  # over the bound, or not an object as written (the full read decides)
    try:
        text = line.decode("utf-8")
        obj = _STRICT.decode(text)
    except (ValueError, RecursionError) as exc:
        raise UnsoundJournal from exc
    if not isinstance(obj, dict):
        raise UnsoundJournal
    return cast("dict[str, JsonValue]", obj), text


def _checked(line: bytes | None, seq: int) -> tuple[dict[str, JsonValue], str]:
    """The event line ``line`` at ``seq``, held to ``read_journal``'s rules (``UnsoundJournal`` if
    it breaks one): strict JSON, the envelope, a known type's payload (or an ignorable unknown)."""
    obj, text = _strict(line)
    try:
        event = event_from_json(obj, _KNOWN_TYPES, where="")
        if event is None:  # unknown but ignorable: the envelope is all there is to check
            event = event_from_json(obj, None, where="")
        elif payload_problem(event.type, event.data) is not None:
            raise UnsoundJournal
    except (SessionFormatError, LosslessJsonError) as exc:
        raise UnsoundJournal from exc
    if event is None or event.seq != seq:
        raise UnsoundJournal
    return obj, text


def _checked_header(line: _Line, session_id: str) -> dict[str, JsonValue]:
    """The header line, held to ``read_journal``'s rules and to being shipped as it is."""
    if line.size > MAX_HEADER_BYTES // 2:
        raise UnsoundJournal
    obj, _ = _strict(line.text)
    try:
        header_from_json(obj, where="")
    except (SessionFormatError, LosslessJsonError) as exc:
        raise UnsoundJournal from exc
    if obj.get("id") != session_id:
        raise UnsoundJournal  # refused by the ordinary read, once crash repair has had its say
    return obj


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


def _row(obj: dict[str, JsonValue], line: str) -> Row:
    """The row of the event ``obj`` parsed from ``line``."""
    seq, time, kind = obj["seq"], obj["time"], obj["type"]
    assert isinstance(seq, int) and isinstance(time, int) and isinstance(kind, str)
    data = None
    if "\\u0000" in line:
        data = json.dumps(_no_nul(obj["data"]), ensure_ascii=False, separators=(",", ":"))
    return Row(seq=seq, type=kind, time=time, line=line, data=data)


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
            tail.offset = tail.offset_seq = 0
