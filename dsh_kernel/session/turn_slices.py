"""Slicing a log by turn: the events of one turn, the turn of a message, how that turn ended.

Re-exported by ``dsh_kernel.session.turn`` (the one reading of a turn, whose helpers these are).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.session.payloads import payload_of


def turn_events(events: Iterable[SessionEvent], turn: int) -> list[SessionEvent]:
    """The events of turn ``turn``: from its ``turn/start`` through its ``turn/end`` (or the end of
    the log while it is open). Turns never overlap, so everything between the brackets belongs."""
    out: list[SessionEvent] = []
    inside = False
    for ev in events:
        if ev.type == "turn/start":
            inside = payload_of(ev, "turn/start")["turn"] == turn
        if inside:
            out.append(ev)
            if ev.type == "turn/end":
                break
    return out


def find_turn(events: Iterable[SessionEvent], message_id: str) -> int | None:
    """The turn whose ``user/message`` has id ``message_id`` (``None`` if it is in no turn)."""
    current: int | None = None
    for ev in events:
        if ev.type == "turn/start":
            current = payload_of(ev, "turn/start")["turn"]
        elif ev.type == "turn/end":
            current = None
        elif ev.type == "user/message" and payload_of(ev, "user/message")["id"] == message_id:
            return current
    return None


def turn_end(events: Sequence[SessionEvent], message_id: str) -> JsonObject | None:
    """The ``turn/end`` reason of the turn that carried ``message_id`` (``None`` if it never ran or
    has not ended).

    One read from the end of the log (message ids are unique): the kernel asks about the turn that
    just ran, so this reads that turn, not the session."""
    reason: JsonObject | None = None  # of the first turn/end after the message, in its turn
    found = False
    for ev in reversed(events):
        kind = ev.type
        if not found:
            if kind == "turn/end":
                reason = payload_of(ev, "turn/end")["reason"]
            elif kind == "turn/start":
                reason = None  # that end belongs to a turn that started after the message
            elif kind == "user/message" and payload_of(ev, "user/message")["id"] == message_id:
                found = True
        elif kind == "turn/start":
            return reason
        elif kind == "turn/end":
            return None  # the message came between turns
    return None
