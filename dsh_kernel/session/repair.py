"""Crash repair (SPINE §6.3, extended): close a trailing open turn without dropping anything.

A process that dies mid-turn leaves a durable log whose last turn never got its ``turn/end``. The turn
can be very large and every event in it is already durable, so repair never truncates: it *appends*
closers, which keep ``seq`` contiguous and reuse the last event's ``time`` (repair invents no time):

0. **the visible prefix of a cut stream** — when the open step's last model call streamed text or
   reasoning (``assistant/chunk``) and no ``assistant/message`` followed, an ``assistant/message`` with
   ``interrupted: true`` holding those text and reasoning blocks (assembled by the one
   ``BlockAssembler``, exactly as a cancel keeps them; tool-call fragments are dropped whole), citing
   the chunks in ``source_event_seqs``. This goes beyond SPINE §6.3, which closes brackets only, on
   purpose: what the user saw stream into the cell is never lost to the model (``derive_messages``
   sends it back on resume, as it does after a Stop). A call whose stream failed (an ``error`` or
   ``aborted`` finish) keeps nothing, as the live loop does;
1. a synthetic error ``tool/result`` for each tool-call block of the open step's (not interrupted)
   ``assistant/message`` that has no result yet, in model order:

   * ``TOOL_NOT_STARTED`` (``ToolNotStartedError``) when the call's ``tool/call`` was not logged, or
     when it was but its ``approval/asked`` never got an ``approval/decided`` — the body waits for the
     click, so it never ran; the text says so and to retry if still needed. The approval case cites
     the ``tool/call`` seq in ``source_event_seqs``, the other has none;
   * ``TOOL_OUTCOME_UNKNOWN`` (error name ``ToolOutcomeUnknownError``) otherwise — the body may have
     run, so the text tells the model to retry only read-only or idempotent work and otherwise verify
     state or ask the user; the result cites the ``tool/call`` seq in ``source_event_seqs``;

   a result whose ``tool/call`` names the tool's ``origin`` (an MCP server's tool) carries it as
   ``meta.origin``, as the live pipeline's results do, so the repaired log still says whose tool it
   was; otherwise it has no ``meta``;

2. ``step/end`` if a step is open;
3. ``turn/end{turn, reason: {kind: "interrupted"}}``.

Only turn, step and tool brackets are closed, plus the stream prefix of 0. (never ``compaction/*``:
the end-seed rule handles stale brackets). A balanced or empty log needs no closers. The result
satisfies ``dsh_kernel.session.check.invariants`` for every prefix of a valid log, and the closers are
deterministic (message ids derive from the seq and call id), so repairing the same log twice gives the
same events.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dsh_kernel.errors import DshError
from dsh_kernel.ids import MessageId
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.assembler import BlockAssembler
from dsh_kernel.llm.codec import chunk_from_json, message_to_json
from dsh_kernel.llm.types import Message, ModelSource
from dsh_kernel.session.check.invariants import (
    TOOL_NOT_STARTED,
    message_tool_call_ids,
    result_call_id,
)
from dsh_kernel.session.codec import lossless_copy_object
from dsh_kernel.session.events import SessionEvent, SurfaceOp
from dsh_kernel.session.payloads import (
    AssistantMessage,
    EndInterrupted,
    StepEnd,
    ToolResult,
    ToolResultError,
    TurnEnd,
    payload_of,
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
_AWAITING_APPROVAL_TEXT = (
    "Error: the session was interrupted while this tool call was waiting for the user's approval "
    "(its tool/call is event {seq}); nobody answered, so it never ran and changed nothing. Retry it "
    "if it is still needed."
)

# Synthetic message ids are UUIDs (like every message id) but derived, so repair is deterministic.
_REPAIR_NAMESPACE = uuid.UUID("8b0c6c1e-4f3a-5d2e-9a71-2f64c0d5e3b9")


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingEvent:
    """An event to append: everything but ``seq`` and ``time``; ``data`` is the type's payload
    (``dsh_kernel.session.payloads``), as ``Session.append`` takes it."""

    type: str
    data: Mapping[str, object]
    surface_op: SurfaceOp | None = None
    source_event_seqs: tuple[int, ...] | None = None


def _synthetic_result(
    *,
    turn: int,
    step: int,
    call_id: str,
    call_seq: int | None,
    awaiting: bool,
    seq: int,
    origin: JsonObject | None,
) -> PendingEvent:
    if call_seq is not None and awaiting:
        text = _AWAITING_APPROVAL_TEXT.format(seq=call_seq)
        name, code = "ToolNotStartedError", TOOL_NOT_STARTED
    elif call_seq is not None:
        text = _OUTCOME_UNKNOWN_TEXT.format(seq=call_seq)
        name, code = "ToolOutcomeUnknownError", TOOL_OUTCOME_UNKNOWN
    else:
        text = _NOT_STARTED_TEXT
        name, code = "ToolNotStartedError", TOOL_NOT_STARTED
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
    data = ToolResult(
        turn=turn, step=step, message=message, error=ToolResultError(name=name, code=code)
    )
    if origin is not None:
        data["meta"] = {"origin": origin}
    return PendingEvent(
        type="tool/result",
        data=data,
        surface_op="append",
        source_event_seqs=(call_seq,) if call_seq is not None else None,
    )


class _Stream:
    """The chunks of the open step's latest model call that no ``assistant/message`` settled."""

    __slots__ = ("model", "provider", "seqs", "values")

    def __init__(self) -> None:
        self.seqs: list[int] = []
        self.values: list[JsonValue] = []
        self.provider = ""
        self.model = ""

    def reset(self) -> None:
        self.seqs.clear()
        self.values.clear()

    def interrupted_message(self, *, turn: int, step: int, seq: int) -> PendingEvent | None:
        """The visible prefix as an interrupted ``assistant/message``, or ``None`` if nothing shows."""
        if not self.seqs:
            return None
        assembler = BlockAssembler()
        for value in self.values:
            try:
                assembler.push(chunk_from_json(value))
            except (DshError, ValueError, TypeError):
                continue  # a chunk this version cannot read shows nothing we could keep
        visible = assembler.interrupted_blocks()
        if not visible:
            return None
        message = Message(
            id=MessageId(str(uuid.uuid5(_REPAIR_NAMESPACE, f"{seq}:interrupted"))),
            role="assistant",
            content=visible,
            source=ModelSource(provider=self.provider, model=self.model),
        )
        return PendingEvent(
            type="assistant/message",
            data=AssistantMessage(
                turn=turn, step=step, message=message_to_json(message), interrupted=True
            ),
            surface_op="append",
            source_event_seqs=tuple(self.seqs),
        )


def _route(ev: SessionEvent, stream: _Stream) -> None:
    """Remember the provider and model in force (``request/context``, else the header's config)."""
    if ev.type == "request/context":
        route = payload_of(ev, "request/context")
        stream.provider, stream.model = route["provider"], route["model"]
        return
    config = payload_of(ev, "request/header")["header"].get("config")
    provider = config.get("provider") if isinstance(config, dict) else None
    model = config.get("model") if isinstance(config, dict) else None
    if isinstance(provider, str) and isinstance(model, str):
        stream.provider, stream.model = provider, model


def _failed_finish(chunk: JsonValue) -> bool:
    """Whether ``chunk`` is an ``error`` or ``aborted`` finish. Any value is read: the log checks
    an ``assistant/chunk``'s keys on append but not their kinds (the hot path)."""
    if not isinstance(chunk, dict) or chunk.get("type") != "finish":
        return False
    reason = chunk.get("reason")
    return isinstance(reason, dict) and reason.get("kind") in ("error", "aborted")


# Complexity (C901): one fold over the log, one branch per event type.
def closers(events: Sequence[SessionEvent]) -> list[PendingEvent]:  # noqa: C901
    """The events that close a trailing open turn of ``events``, in append order (``[]`` if none).

    The first closer's seq will be ``events[-1].seq + 1``; synthetic message ids depend on it.
    """
    open_turn: int | None = None
    open_step: int | None = None
    # Tool-call blocks of the open step awaiting a result: call id -> seq of its tool/call (if any).
    # Insertion order is model order.
    owed: dict[str, int | None] = {}
    origins: dict[str, JsonObject] = {}  # call id -> its tool/call's origin, when it names one
    asked: dict[str, str] = {}  # approval id -> call id, for approvals not decided yet
    stream = _Stream()
    for ev in events:
        t = ev.type
        if t == "assistant/chunk":
            chunk = payload_of(ev, "assistant/chunk")["chunk"]
            if _failed_finish(chunk):
                stream.reset()  # a failed call keeps nothing (the loop retries or fails)
                continue
            if open_step is not None:
                stream.seqs.append(ev.seq)
                stream.values.append(chunk)
            continue
        if t == "turn/start":
            open_turn = payload_of(ev, "turn/start")["turn"]
            open_step = None
            owed.clear()
            asked.clear()
            stream.reset()
        elif t == "turn/end":
            open_turn = open_step = None
            owed.clear()
            asked.clear()
            stream.reset()
        elif t == "step/start":
            open_step = payload_of(ev, "step/start")["step"]
            owed.clear()
            stream.reset()
        elif t == "step/end":
            open_step = None
            owed.clear()
            stream.reset()
        elif t in ("llm/retry", "llm/retry-started"):
            stream.reset()
        elif t in ("request/context", "request/header"):
            _route(ev, stream)
        elif t == "assistant/message":
            stream.reset()
            answer = payload_of(ev, "assistant/message")
            if open_step is not None and not answer.get("interrupted", False):
                for cid in message_tool_call_ids(ev.data) or ():
                    owed.setdefault(cid, None)
        elif t == "tool/call":
            call = payload_of(ev, "tool/call")
            cid = call["callId"]
            if cid in owed and owed[cid] is None:
                owed[cid] = ev.seq
                origin = call.get("origin")
                if origin is not None:
                    origins[cid] = origin
                else:  # a call id may come again in a later step (some providers number them)
                    origins.pop(cid, None)
        elif t == "approval/asked":
            question = payload_of(ev, "approval/asked")
            cid = question.get("callId")
            if cid is not None:
                asked[question["id"]] = cid
        elif t == "approval/decided":
            asked.pop(payload_of(ev, "approval/decided")["id"], None)
        elif t == "tool/result" and ev.surface_op == "append":
            cid = result_call_id(ev.data)
            if cid is not None:
                owed.pop(cid, None)

    if open_turn is None or not events:
        return []
    next_seq = events[-1].seq + 1
    awaiting = set(asked.values())
    out: list[PendingEvent] = []
    if open_step is not None:
        prefix = stream.interrupted_message(turn=open_turn, step=open_step, seq=next_seq)
        if prefix is not None:
            out.append(prefix)
        for cid, call_seq in owed.items():
            out.append(
                _synthetic_result(
                    turn=open_turn,
                    step=open_step,
                    call_id=cid,
                    call_seq=call_seq,
                    awaiting=cid in awaiting,
                    seq=next_seq + len(out),
                    origin=origins.get(cid) if call_seq is not None else None,
                )
            )
        out.append(PendingEvent(type="step/end", data=StepEnd(turn=open_turn, step=open_step)))
    interrupted = TurnEnd(turn=open_turn, reason=EndInterrupted(kind="interrupted"))
    out.append(PendingEvent(type="turn/end", data=interrupted))
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
                data=lossless_copy_object(p.data, event_type=p.type),
                surface_op=p.surface_op,
                source_event_seqs=p.source_event_seqs,
            )
        )
    return out
