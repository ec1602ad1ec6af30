"""The session event envelope, the session header, and the event catalog.

A session is an append-only list of ``SessionEvent``s; ``seq`` is the 0-based position and ``time`` is
epoch milliseconds. ``data`` is lossless JSON (checked at append by ``dsh_kernel.session.codec``).

Surface events (``user/message``, ``assistant/message``, ``tool/result``) carry ``surface_op`` — required on
them and forbidden on every other type — and optionally ``source_event_seqs``. The surface is the ordered
list of message-bearing events the model sees (see ``dsh_kernel.session.log``).

``ignorable`` marks purely informational records: a reader that does not know an event's type may skip
it only when this flag is set, otherwise it must refuse the whole log.

``EVENT_CATALOG`` documents every event type this package writes or understands, with the data fields
each carries; ``docs/session-events.md`` is generated from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from dsh_kernel.jsonvalue import JsonObject

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
    seed_length: int | None = None


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


def _spec(
    type: str,
    summary: str,
    required: tuple[str, ...] = (),
    optional: tuple[str, ...] = (),
    *,
    in_turn: bool = False,
    standalone: bool = False,
) -> EventSpec:
    return EventSpec(
        type=type,
        summary=summary,
        required=required,
        optional=optional,
        in_turn=in_turn,
        standalone=standalone,
    )


EVENT_CATALOG: dict[str, EventSpec] = {
    s.type: s
    for s in (
        _spec("turn/start", "A turn opens, before any input is claimed.", ("turn",)),
        _spec(
            "turn/end",
            "A turn closes; always written (completed, aborted, blocked, error, max-tokens, "
            "interrupted by crash repair).",
            ("turn", "reason"),
        ),
        _spec("step/start", "One model call plus the tools it asked for begins.", ("turn", "step")),
        _spec("step/end", "The step closes.", ("turn", "step")),
        _spec(
            "user/message",
            "Surface. A user-role message: the prompt, injected context, steering, runtime-context "
            "snapshots. `data` is the message itself; `source` tells them apart.",
            ("id", "role", "content", "source"),
            ("inserted",),
        ),
        _spec(
            "assistant/chunk",
            "One raw stream chunk, for replay and live views; never derived into messages.",
            ("turn", "step", "chunk"),
            in_turn=True,
        ),
        _spec(
            "assistant/message",
            "Surface. The assembled answer of one successful call (or the visible prefix of an "
            "interrupted one, with `interrupted: true`).",
            ("turn", "step", "message"),
            ("usage", "interrupted"),
            in_turn=True,
        ),
        _spec(
            "tool/call",
            "A tool call starts; `arguments` is the model's raw JSON text.",
            ("turn", "step", "callId", "name", "arguments"),
            ("synthetic",),
            in_turn=True,
        ),
        _spec(
            "tool/result",
            "Surface. The result of one tool call; `meta` is the tool's presentation payload.",
            ("turn", "step", "message"),
            ("error", "meta", "durationMs"),
            in_turn=True,
        ),
        _spec("todo/write", "A whole-list todo snapshot.", ("todos",), in_turn=True),
        _spec(
            "request/header",
            "The full request envelope snapshot (config, adapter defaults, system prompt, tools).",
            ("header", "reason"),
            in_turn=True,
        ),
        _spec(
            "request/context",
            "The route changed: provider, model, context window.",
            ("provider", "model"),
            ("contextWindow",),
            in_turn=True,
        ),
        _spec("session/end-seed", "Marks the end of a seed copied from another session.", ()),
        _spec(
            "agent/inbox/spliced",
            "A durable inbox mutation (insert, claim, cancel).",
            ("target", "start", "inserted"),
            ("removedCount", "outcome"),
        ),
        _spec(
            "approval/asked",
            "A tool call waits for the user's approval.",
            ("id", "toolName"),
            ("callId", "reason"),
            in_turn=True,
        ),
        _spec(
            "approval/decided",
            "The approval was answered (allowed-once, allowed-always, rejected, cancelled, "
            "unavailable, timeout).",
            ("id", "outcome"),
            in_turn=True,
        ),
        _spec(
            "approval/policy",
            "The approval policy changed; the latest event wins.",
            ("policy",),
            ("source",),
        ),
        _spec(
            "llm/retry",
            "A failed model call will be retried after `delayMs`.",
            (
                "retryId",
                "turn",
                "step",
                "provider",
                "mode",
                "policyKey",
                "retry",
                "delayMs",
                "failure",
            ),
            ("maxRetries",),
            in_turn=True,
        ),
        _spec(
            "llm/retry-started",
            "The retry delay elapsed and the call is re-issued.",
            ("retryId", "turn", "step", "retry"),
            in_turn=True,
        ),
        _spec(
            "tool/code-dispatch-start",
            "A nested tool call made from inside code starts.",
            ("rootCallId", "parentCallId", "subCallId", "name", "arguments"),
        ),
        _spec(
            "tool/code-dispatch",
            "A nested tool call made from inside code settled.",
            ("rootCallId", "parentCallId", "subCallId", "name", "isError", "content"),
        ),
        _spec(
            "session/title",
            "The session's title; the latest wins.",
            ("title", "source"),
            ("messageSeqs",),
            standalone=True,
        ),
        _spec(
            "command/run",
            "A human command (a `%agent` subcommand) ran; never sent to the model.",
            ("commandId", "name"),
            ("args", "source"),
            standalone=True,
        ),
        _spec(
            "command/done",
            "A human command finished.",
            ("commandId", "kind"),
            ("text", "sourceEventSeq"),
            standalone=True,
        ),
    )
}
