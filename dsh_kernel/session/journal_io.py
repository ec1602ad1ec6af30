"""Reading a JSONL journal's text into a header and events: the rules the store's loader relies on.

Pure: the caller hands over the journal's lines (an iterable of lines, e.g. an open text file, or the
whole text); nothing here opens a file. ``read_journal(lines, name=...)`` returns a ``LoadedJournal``
or raises ``SessionFormatError`` whose message starts with ``<name>:<line number>``.

Rules:

* Line 1 must be the session header (``codec.header_from_json``); an unknown ``version`` is refused
  (code ``SESSION_FORMAT_UNSUPPORTED``). An empty journal, or a first line that is not JSON, is refused.
* Every later line is one event (``codec.event_from_json`` with the catalog's types as known types).
* An unknown event type not marked ``ignorable`` is refused (code ``UNKNOWN_EVENT_TYPE``; the message
  names the type, the seq and the line). An unknown *ignorable* event is skipped by every consumer —
  derivation, invariants and repair act only on types they know — but it is **kept** in ``events``:
  it owns its seq, and dropping it would leave a hole that the next live append would fill with a
  second event of the same seq. ``unknown_ignorable_seqs`` lists them.
* Every known event's data is its type's payload (``payload_check.problem``: required keys present, each
  of its JSON kind), else the journal is refused (code ``JOURNAL_BAD_SHAPE``, naming the line and
  the key), so readers may trust the kinds of the keys they find.
* Seqs run 0, 1, 2, … over all event lines; a gap or a repeat is damage (code ``JOURNAL_DAMAGED``).
* Only a *torn final line* — invalid JSON on the last line, as a crash mid-write leaves it (no
  trailing newline, cut mid-object) — is tolerated: it is dropped and ``torn_tail`` is set. Invalid
  JSON on any other line is damage. A complete but invalid last event (bad envelope, unknown type,
  ``NaN``) is damage too, never a tear.
* A line nested too deeply for Python's JSON reader is refused (code ``JOURNAL_TOO_DEEP``); the
  reader's ``RecursionError`` never escapes. Envelope shapes and ranges are the codec's
  (``JOURNAL_BAD_SHAPE``, ``JOURNAL_OUT_OF_RANGE``).

``split_journal_bytes(data, name=...)`` turns a journal file's bytes into the lines ``read_journal``
takes: every ``\n``-terminated line must be UTF-8 (else ``JOURNAL_NOT_UTF8`` naming the line); an
unterminated last line is kept as a line when it is UTF-8 (``read_journal`` then decides whether it is a
tear) and left out when it is not (a cut inside a character is a tear for sure).

Lines are split on ``"\\n"`` only: the journal is written with ``ensure_ascii=False``, so JSON strings may
hold U+2028 and other characters that ``str.splitlines`` would treat as line breaks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from dsh_kernel.errors import LosslessJsonError, SessionFormatError
from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.session.check.payload import problem as payload_problem
from dsh_kernel.session.codec import (
    JOURNAL_BAD_SHAPE,
    JOURNAL_TOO_DEEP,
    MAX_DEPTH,
    event_from_json,
    header_from_json,
    loads,
)
from dsh_kernel.session.events import EVENT_CATALOG, SessionEvent, SessionHeader

JOURNAL_DAMAGED = "JOURNAL_DAMAGED"
"""``SessionFormatError.code`` for a journal whose committed lines are broken (not merely torn)."""
JOURNAL_NOT_UTF8 = "JOURNAL_NOT_UTF8"
"""``SessionFormatError.code`` for a committed journal line that is not UTF-8 text."""

_KNOWN_TYPES = frozenset(EVENT_CATALOG)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedJournal:
    """A journal as read: its header, its events in seq order, and whether a torn tail was dropped."""

    header: SessionHeader
    events: tuple[SessionEvent, ...]
    torn_tail: bool = False
    unknown_ignorable_seqs: tuple[int, ...] = ()


def _split(text: str) -> Iterator[str]:
    pieces = text.split("\n")
    if pieces[-1] == "":  # the terminator of the last complete line, not a line
        pieces.pop()
    yield from pieces


def _strip(line: str) -> str:
    return line[:-1] if line.endswith("\n") else line


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalLines:
    """A journal file's bytes cut into lines (see ``split_journal_bytes``)."""

    lines: list[str]
    committed: int
    """Bytes up to and including the last ``\n``."""
    tail_kept: bool
    """True when an unterminated last line was UTF-8 and is the last of ``lines``."""


def split_journal_bytes(data: bytes, *, name: str) -> JournalLines:
    """Decode a journal file's bytes into lines; see the module docstring."""
    cut = data.rfind(b"\n") + 1
    try:
        text = data[:cut].decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SessionFormatError(
            f"{name}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at column {column}); "
            "a journal is UTF-8 JSON, one object per line",
            code=JOURNAL_NOT_UTF8,
        ) from exc
    lines = text.split("\n")[:-1]
    tail = data[cut:]
    if not tail:
        return JournalLines(lines=lines, committed=cut, tail_kept=False)
    try:
        lines.append(tail.decode("utf-8"))
    except UnicodeDecodeError:
        return JournalLines(lines=lines, committed=cut, tail_kept=False)
    return JournalLines(lines=lines, committed=cut, tail_kept=True)


def read_journal(lines: Iterable[str] | str, *, name: str) -> LoadedJournal:
    """Decode a journal; see the module docstring for the rules. ``name`` labels error messages."""
    it = iter(_split(lines) if isinstance(lines, str) else lines)
    first = next(it, None)
    if first is None:
        raise SessionFormatError(
            f"{name}:1: empty journal (no session header)", code=JOURNAL_DAMAGED
        )
    header = header_from_json(_parse(_strip(first), f"{name}:1"), where=f"{name}:1")

    events: list[SessionEvent] = []
    unknown: list[int] = []
    torn = False
    lineno = 1
    pending = next(it, None)
    while pending is not None:
        line = _strip(pending)
        pending = next(it, None)
        lineno += 1
        where = f"{name}:{lineno}"
        try:
            obj = _parse(line, where)
        except SessionFormatError as exc:
            # Only the last line may be torn (a crash mid-write); only invalid JSON is a tear.
            if pending is None and isinstance(exc.__cause__, json.JSONDecodeError):
                torn = True
                break
            raise
        event = event_from_json(obj, _KNOWN_TYPES, where=where)
        if event is None:  # unknown but ignorable: keep it, it owns its seq
            event = event_from_json(obj, None, where=where)
            assert event is not None
            unknown.append(event.seq)
        wrong = payload_problem(event.type, event.data)
        if wrong is not None:
            raise SessionFormatError(f"{where}: {wrong}", code=JOURNAL_BAD_SHAPE)
        if event.seq != len(events):
            raise SessionFormatError(
                f"{where}: event {event.type!r} has seq {event.seq} but seq {len(events)} was "
                "expected (a gap or a repeat): the journal is damaged",
                code=JOURNAL_DAMAGED,
            )
        events.append(event)
    return LoadedJournal(
        header=header,
        events=tuple(events),
        torn_tail=torn,
        unknown_ignorable_seqs=tuple(unknown),
    )


def _parse(line: str, where: str) -> JsonValue:
    try:
        return loads(line)
    except json.JSONDecodeError as exc:
        raise SessionFormatError(
            f"{where}: not valid JSON ({exc.msg} at column {exc.colno}) and not a torn last line: "
            "the journal is damaged",
            code=JOURNAL_DAMAGED,
        ) from exc
    except LosslessJsonError as exc:
        raise SessionFormatError(f"{where}: {exc}", code=JOURNAL_DAMAGED) from exc
    except RecursionError as exc:
        raise SessionFormatError(
            f"{where}: nested too deeply to read (the log allows {MAX_DEPTH} levels of event data)",
            code=JOURNAL_TOO_DEEP,
        ) from exc
