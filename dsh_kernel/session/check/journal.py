"""The gate a journal from elsewhere passes before a store takes it: could this log have been written
by ``Session`` and be read by everything that reads a log?

``check_journal(loaded, name=...)`` takes a ``LoadedJournal`` (``read_journal`` has already checked the
header, each line's JSON and envelope, times in range, and seq continuity) and raises
``SessionFormatError`` naming ``<name>:<line>`` — event ``seq`` is on line ``seq + 2`` — for the first
event that fails, in this order:

1. nesting deeper than the log allows (code ``JOURNAL_TOO_DEEP``; measured without recursion, so a
   hostile line cannot exhaust the stack);
2. the log's own append rules, by appending every event again to a fresh ``Session`` whose clock
   gives back the event's time: the data fields of known types (required ones present, each of its
   JSON kind: ``payload_check.problem``, which ``read_journal`` also applied), lossless JSON (no integer
   beyond ±2^53, no ``-0.0``), ``surfaceOp`` exactly on surface events, replacements of current
   surface nodes, ``sourceEventSeqs`` citing distinct earlier events (code ``JOURNAL_BAD_SHAPE``);
3. the nested payload shapes the readers decode (code ``JOURNAL_BAD_SHAPE``): messages of surface
   events, the chunk of ``assistant/chunk``, the usage of ``assistant/message``, the request header,
   the failure of ``llm/retry``, and ``turn``/``step`` numbers the store keeps as 32-bit integers —
   each with the project's own decoder (``dsh_kernel.llm.codec``), so "valid" means what the
   consumers mean by it;
4. the structural invariants (``dsh_kernel.session.check.invariants``; code ``JOURNAL_INVALID``): turns and
   steps that open and close in order, tool results that answer their calls. The checker is
   prefix-closed, so a journal cut short by a crash (an open turn) passes: the store's crash repair
   closes it on load.

Unknown event types (which ``read_journal`` keeps only when marked ``ignorable``) are held to 1 and 2
only. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from dsh_kernel.errors import SessionError, SessionFormatError, UsageError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.codec import (
    chunk_from_json,
    failure_from_json,
    message_from_json,
    usage_from_json,
)
from dsh_kernel.session.check.invariants import check_invariants
from dsh_kernel.session.codec import JOURNAL_BAD_SHAPE, JOURNAL_TOO_DEEP, MAX_DEPTH
from dsh_kernel.session.derive import EpochHeader
from dsh_kernel.session.events import EVENT_CATALOG, SessionEvent
from dsh_kernel.session.journal_io import LoadedJournal
from dsh_kernel.session.log import Session
from dsh_kernel.session.payloads import payload_of

JOURNAL_INVALID: Final = "JOURNAL_INVALID"
"""``SessionFormatError.code``: the events break the log's structural invariants."""

_MAX_INT32: Final = 2**31 - 1


def _line(event: SessionEvent) -> int:
    return event.seq + 2


def _depth(value: JsonValue) -> int:
    """The nesting depth of ``value`` (a scalar is 0), iteratively; stops counting past the limit."""
    deepest = 0
    stack: list[tuple[JsonValue, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: list[JsonValue] = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level + 1)
        if deepest > MAX_DEPTH + 1:
            return deepest
        stack.extend((c, level + 1) for c in children)
    return deepest


# --- payload shapes -----------------------------------------------------------------------------
# The keys and their JSON kinds were checked by ``payload_check.problem``; these decode what is inside.


def _assistant_message(ev: SessionEvent) -> None:
    answer = payload_of(ev, "assistant/message")
    message_from_json(answer["message"])
    usage = answer.get("usage")
    if usage is not None:
        usage_from_json(usage)


_DECODERS: Final[dict[str, Callable[[SessionEvent], object]]] = {
    "user/message": lambda ev: message_from_json(ev.data),
    "assistant/message": _assistant_message,
    "tool/result": lambda ev: message_from_json(payload_of(ev, "tool/result")["message"]),
    "assistant/chunk": lambda ev: chunk_from_json(payload_of(ev, "assistant/chunk")["chunk"]),
    "request/header": lambda ev: EpochHeader.from_json(payload_of(ev, "request/header")["header"]),
    "llm/retry": lambda ev: failure_from_json(payload_of(ev, "llm/retry")["failure"]),
}


def _numbers(data: JsonObject) -> None:
    for field in ("turn", "step"):
        if field in data:
            v = data[field]
            if type(v) is not int or not 0 <= v <= _MAX_INT32:
                raise ValueError(f"{field}: expected a number from 0 to {_MAX_INT32}, got {v!r}")


def _payload(event: SessionEvent) -> None:
    _numbers(event.data)
    decode = _DECODERS.get(event.type)
    if decode is not None:
        decode(event)


# --- the check ----------------------------------------------------------------------------------


def check_journal(loaded: LoadedJournal, *, name: str) -> None:
    """Raise ``SessionFormatError`` for the first event the log or its readers could not use; see
    the module docstring."""
    clock_time = 0

    def clock() -> int:
        return clock_time

    again = Session(header=loaded.header, clock=clock)
    for ev in loaded.events:
        where = f"{name}:{_line(ev)}: event {ev.type!r} (seq {ev.seq})"
        if _depth(ev.data) > MAX_DEPTH + 1:  # the data object itself is one level
            raise SessionFormatError(
                f"{where}: data nested deeper than the {MAX_DEPTH} levels the log allows",
                code=JOURNAL_TOO_DEEP,
            )
        clock_time = ev.time
        try:
            again.append(
                ev.type,
                ev.data,
                surface_op=ev.surface_op,
                source_event_seqs=ev.source_event_seqs,
                ignorable=ev.ignorable,
            )
        except (UsageError, SessionError) as exc:
            raise SessionFormatError(f"{where}: {exc}", code=JOURNAL_BAD_SHAPE) from exc
        if ev.type in EVENT_CATALOG:
            try:
                _payload(ev)
            except ValueError as exc:
                raise SessionFormatError(f"{where}: {exc}", code=JOURNAL_BAD_SHAPE) from exc
    violations = check_invariants(loaded.events)
    if violations:
        first = violations[0]
        more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
        raise SessionFormatError(
            f"{name}:{first.seq + 2}: {first}{more}: the events do not form a valid session log",
            code=JOURNAL_INVALID,
        )
