"""Planning an ingest pass, in Python: which journals have new whole lines, and where they start.

``plan_journal`` compares a journal's size with its ``_ingest_state`` row and reads only what is new: a
journal never ingested is read from its start (its header line parsed and kept for ``t_sessions``), a
journal that shrank or whose header line changed is planned again from scratch (``reset``), and a
torn or still-being-written last line is left for the next pass. A journal recorded as damaged is
skipped (its issue reported again) until its size changes. Journals read from their start are loaded by
DuckDB in place; for a continuation only the new lines are copied to a scratch file.

``locate_damage`` re-reads a refused plan's lines with the journal rules and names the first bad line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import duckdb

from dsh_kernel.errors import SessionFormatError
from dsh_kernel.session.codec import event_from_json, header_from_json, loads
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.store.ingest import statements as q
from dsh_kernel.store.layout import Store


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalIssue:
    """A journal that could not be ingested, and why (its first bad line is named)."""

    journal: str
    message: str


@dataclass(slots=True)
class JournalState:
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
    last_ms: int | None
    messages: int | None
    message_tokens: int | None


@dataclass(slots=True)
class Plan:
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
    state: JournalState | None


ErrorRecord = tuple["Plan | None", str, str, int, str]
"""A refused journal: its plan (``None`` for a bad header), journal, message, size, session id."""


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return -1


def load_states(con: duckdb.DuckDBPyConnection) -> dict[str, JournalState]:
    rows = con.execute(q.LOAD_STATES).fetchall()
    return {
        str(r[0]): JournalState(
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
            last_ms=r[12],
            messages=r[13],
            message_tokens=r[14],
        )
        for r in rows
    }


def plan_journal(
    store: Store,
    path: Path,
    states: dict[str, JournalState],
    tmp: Path,
    index: int,
    issues: list[JournalIssue],
    errors: list[ErrorRecord],
    seen: dict[str, int],
) -> Plan | None:
    journal = store.relative(path)
    size = file_size(path)
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
    if start == 0:
        fname = str(path)  # read in place: rows outside the planned seq range are dropped
    else:
        fname = str(tmp / f"{index}.jsonl")  # only the new lines, never the whole file again
        with open(fname, "wb") as out:
            out.write(body)
    return Plan(
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


def locate_damage(plan: Plan) -> str:
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
