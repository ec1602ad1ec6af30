"""Crash repair (SPINE §6.3): close a trailing open turn without dropping anything.

A process that dies mid-turn leaves a durable log whose last turn never got its ``turn/end``. The turn
can be very large and every event in it is already durable, so repair never truncates: it *appends*
closers, which keep ``seq`` contiguous and reuse the last event's ``time`` (repair invents no time):

1. a synthetic error ``tool/result`` for each tool-call block of the open step's (not interrupted)
   ``assistant/message`` that has no result yet, in model order:

   * ``TOOL_OUTCOME_UNKNOWN`` (error name ``ToolOutcomeUnknownError``) when the call's ``tool/call`` was
     logged — the body may have run, so the text tells the model to retry only read-only or
     idempotent work and otherwise verify state or ask the user; the result cites the ``tool/call``
     seq in ``source_event_seqs``;
   * ``TOOL_NOT_STARTED`` (``ToolNotStartedError``) when it was not — nothing ran, retry if still
     needed; no ``source_event_seqs``;

2. ``step/end`` if a step is open;
3. ``turn/end{turn, reason: {kind: "interrupted"}}``.

Only turn, step and tool brackets are closed (never ``compaction/*``: the end-seed rule handles stale
brackets). A balanced or empty log needs no closers. The result satisfies
``dsh_kernel.session.invariants`` for every prefix of a valid log, and the closers are deterministic
(message ids derive from the seq and call id), so repairing the same log twice gives the same events.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.session.events import SessionEvent, SurfaceOp
from dsh_kernel.session.invariants import (
    TOOL_NOT_STARTED,
    message_tool_call_ids,
    result_call_id,
)

TOOL_OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN"
"""A logged call whose result never became durable: the body may or may not have run."""

__all__ = [
    "TOOL_NOT_STARTED",
    "TOOL_OUTCOME_UNKNOWN",
    "PendingEvent",
    "closers",
    "repair",
]

_OUTCOME_UNKNOWN_TEXT = (
    "Error: the session was interrupted while this tool call was running (its tool/call is event "
    "{seq}), and no result was recorded, so whether it took effect is unknown. Retry it only if it is "
    "read-only or idempotent; if it may have changed anything, first verify the current state or ask "
    "the user before doing it again."
)
_NOT_STARTED_TEXT = (
    "Error: the session was interrupted before this tool call started, so it did not run. Retry it "
    "if it is still needed."
)

# Synthetic message ids are UUIDs (like every message id) but derived, so repair is deterministic.
_REPAIR_NAMESPACE = uuid.UUID("8b0c6c1e-4f3a-5d2e-9a71-2f64c0d5e3b9")


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingEvent:
    """An event to append: everything but ``seq`` and ``time``."""

    type: str
    data: JsonObject
    surface_op: SurfaceOp | None = None
    source_event_seqs: tuple[int, ...] | None = None


def _synthetic_result(
    *, turn: int, step: int, call_id: str, call_seq: int | None, seq: int
) -> PendingEvent:
    started = call_seq is not None
    text = _OUTCOME_UNKNOWN_TEXT.format(seq=call_seq) if started else _NOT_STARTED_TEXT
    name, code = (
        ("ToolOutcomeUnknownError", TOOL_OUTCOME_UNKNOWN)
        if started
        else ("ToolNotStartedError", TOOL_NOT_STARTED)
    )
    message: JsonObject = {
        "id": str(uuid.uuid5(_REPAIR_NAMESPACE, f"{seq}:{call_id}")),
        "role": "user",
        "content": [
            {
                "type": "tool-result",
                "toolCallId": call_id,
                "content": [{"type": "text", "text": text}],
                "isError": True,
            }
        ],
        "source": {"kind": "tool", "callId": call_id},
    }
    return PendingEvent(
        type="tool/result",
        data={
            "turn": turn,
            "step": step,
            "message": message,
            "error": {"name": name, "code": code},
        },
        surface_op="append",
        source_event_seqs=(call_seq,) if call_seq is not None else None,
    )


def closers(events: Sequence[SessionEvent]) -> list[PendingEvent]:
    """The events that close a trailing open turn of ``events``, in append order (``[]`` if none).

    The first closer's seq will be ``events[-1].seq + 1``; synthetic message ids depend on it.
    """
    open_turn: int | None = None
    open_step: int | None = None
    # Tool-call blocks of the open step awaiting a result: call id -> seq of its tool/call (if any).
    # Insertion order is model order.
    owed: dict[str, int | None] = {}
    for ev in events:
        t = ev.type
        if t == "assistant/chunk":
            continue
        data = ev.data
        if t == "turn/start":
            turn = data.get("turn")
            open_turn = turn if type(turn) is int else open_turn
            open_step = None
            owed.clear()
        elif t == "turn/end":
            open_turn = open_step = None
            owed.clear()
        elif t == "step/start":
            step = data.get("step")
            open_step = step if type(step) is int else None
            owed.clear()
        elif t == "step/end":
            open_step = None
            owed.clear()
        elif t == "assistant/message":
            if open_step is not None and data.get("interrupted") is not True:
                for cid in message_tool_call_ids(data) or ():
                    owed.setdefault(cid, None)
        elif t == "tool/call":
            cid = data.get("callId")
            if isinstance(cid, str) and cid in owed and owed[cid] is None:
                owed[cid] = ev.seq
        elif t == "tool/result" and ev.surface_op == "append":
            cid = result_call_id(data)
            if cid is not None:
                owed.pop(cid, None)

    if open_turn is None or not events:
        return []
    next_seq = events[-1].seq + 1
    out: list[PendingEvent] = []
    if open_step is not None:
        for cid, call_seq in owed.items():
            out.append(
                _synthetic_result(
                    turn=open_turn,
                    step=open_step,
                    call_id=cid,
                    call_seq=call_seq,
                    seq=next_seq + len(out),
                )
            )
        out.append(PendingEvent(type="step/end", data={"turn": open_turn, "step": open_step}))
    out.append(
        PendingEvent(type="turn/end", data={"turn": open_turn, "reason": {"kind": "interrupted"}})
    )
    return out


def repair(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """``events`` unchanged, followed by their ``closers`` as events (continuing seq, last time)."""
    out = list(events)
    pending = closers(events)
    if not pending:
        return out
    last = events[-1]
    for i, p in enumerate(pending, start=last.seq + 1):
        out.append(
            SessionEvent(
                type=p.type,
                seq=i,
                time=last.time,
                data=p.data,
                surface_op=p.surface_op,
                source_event_seqs=p.source_event_seqs,
            )
        )
    return out
