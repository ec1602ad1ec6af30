"""What one row of the shared store may hold, and the marker that stands in for an event that is more.

The server refuses (migration ``0004_bounded_events``) a ``dsh_events`` row whose ``line`` is over
``MAX_LINE_BYTES`` or whose ``data``, as text, is over ``MAX_DATA_BYTES``, and a ``dsh_sessions`` row
whose ``header``, as text, is over ``MAX_HEADER_BYTES``: one row can then never cost a reader more than
that. The line bound is above the largest event a session writes — an image at the largest
``DSH_IMAGE_MAX_BYTES`` (20 MiB, 26.7 MiB as base64 in an ``image/data`` line); a prompt any
model's context window can take, a call or a result is far below it. ``data`` is ``jsonb``, whose text adds a
space after each ``:`` and ``,`` (at most half as much again as the compact line), hence twice the line
bound. A header holds ids, two paths and a few names (a few hundred bytes; a path is at most 4 kB).

An event over the bound is shipped as an *omitted marker* instead: a small, ignorable event of type
``OMITTED`` at the same ``seq`` and ``time``, whose ``data`` says what was left out::

    {"type":"shared/omitted","seq":41,"time":1767000000000,
     "data":{"type":"user/message","bytes":83886121,"limit":33554432},"ignorable":true}

so the server's ``seq``s stay gap-free, the mirror writes the marker where the event was, and every
reader of the mirrored journal skips it as an unknown ignorable event (it is a row of the ``events``
view, nothing else). The journal that shipped it still holds the event. The mirror writes the same
marker for a server row over the bound (one stored before the server checked).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.session.codec import dumps

__all__ = [
    "HEAD_BYTES",
    "MAX_DATA_BYTES",
    "MAX_HEADER_BYTES",
    "MAX_LINE_BYTES",
    "OMITTED",
    "EventHead",
    "event_head",
    "omitted_line",
    "over_bound",
]

MAX_LINE_BYTES: Final = 32 << 20
"""The most UTF-8 bytes of one ``dsh_events.line`` (32 MiB); the migration states the same number."""

MAX_DATA_BYTES: Final = 64 << 20
"""The most bytes of one ``dsh_events.data`` as text (64 MiB)."""

MAX_HEADER_BYTES: Final = 64 << 10
"""The most bytes of one ``dsh_sessions.header`` as text (64 KiB); a journal's header line over half
of it is not shipped (``jsonb`` text is at most half as long again)."""

OMITTED: Final = "shared/omitted"
"""The type of the marker that stands in for an event over ``MAX_LINE_BYTES``."""

_TYPE_BYTES: Final = 200
"""The longest omitted ``type`` a marker names (every event type is far shorter)."""

HEAD_BYTES: Final = 512
"""How much of a line's start ``event_head`` needs."""

_HEAD = re.compile(
    rb'\{"type":"([A-Za-z0-9/_.-]{1,200})","seq":(0|[1-9][0-9]{0,15}),"time":(0|[1-9][0-9]{0,15}),'
)


@dataclass(frozen=True, slots=True, kw_only=True)
class EventHead:
    """``type``, ``seq`` and ``time`` read from the start of a journal line as the kernel writes it."""

    type: str
    seq: int
    time: int


def event_head(start: bytes) -> EventHead | None:
    """The envelope at the start of a line (its first bytes suffice), or ``None`` when the line does
    not start as ``codec.encode_event`` writes one (another writer's key order, say)."""
    found = _HEAD.match(start)
    if found is None:
        return None
    return EventHead(
        type=found.group(1).decode("ascii"), seq=int(found.group(2)), time=int(found.group(3))
    )


def over_bound(size: int, bound: int = MAX_LINE_BYTES) -> str:
    """``is N bytes, over the shared store's B (32 MiB)``: the words of every message about a bound."""
    unit = f"{bound >> 20} MiB" if bound >= 1 << 20 else f"{bound >> 10} KiB"
    return f"is {size:,} bytes, over the shared store's {bound:,} ({unit})"


def omitted_line(*, seq: int, time: int, type_: str | None, size: int) -> str:
    """The marker for the event ``seq`` of ``size`` bytes (its ``type`` when known), as a line."""
    data: JsonObject = {}
    if type_ is not None:
        data["type"] = type_[:_TYPE_BYTES]
    data["bytes"] = size
    data["limit"] = MAX_LINE_BYTES
    return dumps({"type": OMITTED, "seq": seq, "time": time, "data": data, "ignorable": True})
