"""The session event envelope, the session header, and the event catalog.

A session is an append-only list of ``SessionEvent``s; ``seq`` is the 0-based position and ``time`` is
epoch milliseconds. ``data`` is lossless JSON (checked at append by ``dsh_kernel.session.codec``).

Surface events (``user/message``, ``assistant/message``, ``tool/result``) carry ``surface_op`` — required on
them and forbidden on every other type — and optionally ``source_event_seqs``. The surface is the ordered
list of message-bearing events the model sees (see ``dsh_kernel.session.log``).

``ignorable`` marks purely informational records: a reader that does not know an event's type may skip
it only when this flag is set, otherwise it must refuse the whole log.

``EVENT_CATALOG`` documents every event type this package writes or understands, with the data fields
each carries; it is derived from the payload types of ``dsh_kernel.session.payloads`` (the one event
vocabulary), and ``docs/session-events.md`` is generated from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.session import payloads

SESSION_FORMAT_VERSION = 0
"""The journal format version. A header with any other version is refused."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplaceOp:
    """Replace the inclusive surface range ``start..end`` (both current nodes) with this event."""

    op: Literal["replace"] = "replace"
    start: int
    end: int


SurfaceOp: TypeAlias = Literal["append"] | ReplaceOp


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEvent:
    """One log entry. Treat ``data`` as immutable: the log hands out the copy it validated."""

    type: str
    seq: int
    time: int
    data: JsonObject
    ignorable: bool = False
    surface_op: SurfaceOp | None = None
    source_event_seqs: tuple[int, ...] | None = None


class _EventTwin:
    """``SessionEvent``'s slot layout without the frozen-dataclass ``__init__``.

    A frozen dataclass sets each field through ``object.__setattr__``, which made building the event
    the single largest cost of ``Session.append`` (~4x a plain slotted ``__init__``). ``new_event``
    fills a twin with plain attribute stores and then re-classes it as a ``SessionEvent``; CPython
    allows that because both classes have the same slots, in the same order, on the same base. The
    result is an ordinary, frozen ``SessionEvent`` (equality, ``repr``, ``dataclasses.replace`` all as
    usual).
    """

    # The order is SessionEvent's field order, which the layout check below relies on.
    __slots__ = ("type", "seq", "time", "data", "ignorable", "surface_op", "source_event_seqs")  # noqa: RUF023

    def __init__(
        self,
        type: str,
        seq: int,
        time: int,
        data: JsonObject,
        ignorable: bool,
        surface_op: SurfaceOp | None,
        source_event_seqs: tuple[int, ...] | None,
    ) -> None:
        self.type = type
        self.seq = seq
        self.time = time
        self.data = data
        self.ignorable = ignorable
        self.surface_op = surface_op
        self.source_event_seqs = source_event_seqs


if (
    _EventTwin.__slots__ != SessionEvent.__slots__
):  # pragma: no cover - a field was added to one only
    raise TypeError("_EventTwin.__slots__ must list SessionEvent's fields in order")


def new_event(
    type: str,
    seq: int,
    time: int,
    data: JsonObject,
    ignorable: bool = False,
    surface_op: SurfaceOp | None = None,
    source_event_seqs: tuple[int, ...] | None = None,
) -> SessionEvent:
    """Build a ``SessionEvent`` positionally, about 4x faster than its keyword constructor.

    Same value as ``SessionEvent(type=..., ...)``; no validation (the log validates before it builds).
    """
    twin = _EventTwin(type, seq, time, data, ignorable, surface_op, source_event_seqs)
    twin.__class__ = SessionEvent  # type: ignore[assignment]  # same layout, see _EventTwin
    return twin  # type: ignore[return-value]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionHeader:
    """Stored beside the log (the journal's first line)."""

    version: int = SESSION_FORMAT_VERSION
    id: str
    created_at: int
    cwd: str | None = None
    notebook: str | None = None
    parent_session: str | None = None
    parent_kind: str | None = None
    """How this session came from ``parent_session``: ``fork`` (``%agent fork``), ``rewind`` (a chat
    cell re-run above the end of the conversation: ``kernel.rewind``), ``policy`` (the course's AI
    policy changed); later ``import`` and ``subagent``. ``None`` with a parent: a session written
    before this field, a fork."""
    seed_length: int | None = None
    user: str | None = None
    """Who the session is for: ``JUPYTERHUB_USER``, else ``USER``, else the account's name (a
    course's reports are per student, and a budget counts per user)."""
    ai_policy: str | None = None
    """The course's AI policy in force when the session was created (``full``, ``explain`` or
    ``off``; ``kernel.course.policy``)."""


SURFACE_TYPES: frozenset[str] = frozenset({"user/message", "assistant/message", "tool/result"})


@dataclass(frozen=True, slots=True, kw_only=True)
class EventSpec:
    """Catalog entry: what an event means and the data fields it must carry."""

    type: str
    summary: str
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    in_turn: bool = False
    """True when the event may only appear inside an open turn."""
    standalone: bool = False
    """True when the event is written between turns (takes a seq but no turn number)."""


EVENT_CATALOG: dict[str, EventSpec] = {
    t: EventSpec(
        type=t,
        summary=payloads.summary(t),
        required=payloads.fields(t)[0],
        optional=payloads.fields(t)[1],
        in_turn=t in payloads.IN_TURN,
        standalone=t in payloads.STANDALONE,
    )
    for t in payloads.PAYLOADS
}
"""Derived from ``dsh_kernel.session.payloads`` (one ``TypedDict`` per type): the fields, the
meaning (the payload's docstring) and where the event may appear."""
