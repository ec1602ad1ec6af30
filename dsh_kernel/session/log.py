"""``Session``: the append-only event log, the single source of truth of an agent session.

Contract:

* ``append`` is synchronous and never blocks on I/O. It validates before committing: the event type is
  a non-empty string; known types carry their required data fields; ``data`` is lossless JSON (a deep
  copy is stored, so later mutation of the caller's dict cannot change the log); ``surface_op`` is
  present exactly on surface types and obeys the surface rules; ``source_event_seqs`` cite distinct,
  earlier seqs. A refused append changes nothing.
* ``seq`` is contiguous from 0; ``time`` comes from the injected clock (epoch ms).
* Observers (``subscribe``) run after commit, in subscription order. Their exceptions are logged and
  contained. An ``append`` made from inside an observer raises ``ReentrantAppendError`` — schedule it.
* A session built from a *seed* (resume, fork, replay) writes ``session/end-seed`` before its first
  live event unless the seed already ends with one; ``first_live_seq`` is where live writes began.
* ``derive_messages()`` folds ``project_event`` over the current surface; projections are cached per
  seq (events are immutable) and every call returns a fresh list.
"""

from __future__ import annotations

import logging
import time as _time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import overload

from dsh_kernel.errors import ReentrantAppendError, SurfaceError, UsageError
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.types import Message
from dsh_kernel.session.codec import lossless_copy
from dsh_kernel.session.derive import project_event
from dsh_kernel.session.events import (
    EVENT_CATALOG,
    SURFACE_TYPES,
    ReplaceOp,
    SessionEvent,
    SessionHeader,
    SurfaceOp,
)

_log = logging.getLogger(__name__)

Clock = Callable[[], int]
Observer = Callable[[SessionEvent], None]


def wall_clock_ms() -> int:
    return _time.time_ns() // 1_000_000


class EventList(Sequence[SessionEvent]):
    """A read-only live view of the log (no copy)."""

    __slots__ = ("_items",)

    def __init__(self, items: list[SessionEvent]) -> None:
        self._items = items

    @overload
    def __getitem__(self, index: int) -> SessionEvent: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[SessionEvent]: ...
    def __getitem__(self, index: int | slice) -> SessionEvent | Sequence[SessionEvent]:
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[SessionEvent]:
        return iter(self._items)

    def __repr__(self) -> str:
        return f"<EventList of {len(self._items)} events>"


class Session:
    """The log. See the module docstring for the contract."""

    def __init__(
        self,
        *,
        header: SessionHeader,
        seed: Iterable[SessionEvent] = (),
        clock: Clock | None = None,
    ) -> None:
        self.header = header
        self._clock: Clock = clock or wall_clock_ms
        self._events: list[SessionEvent] = []
        self._surface: list[int] = []
        self._surface_index: dict[int, int] | None = {}
        self._projections: dict[int, Message | None] = {}
        self.replace_generation = 0
        self._observers: list[Observer] = []
        self._notifying = False
        self.open_turn: int | None = None
        self.open_step: int | None = None
        self.last_turn = 0
        for ev in seed:
            if ev.seq != len(self._events):
                raise SurfaceError(
                    f"seed is not contiguous: expected seq {len(self._events)}, got {ev.seq}"
                )
            self._check_surface(ev.type, ev.surface_op, ev.source_event_seqs, ev.data, ev.seq)
            self._commit(ev)
        self.seed_length = len(self._events)
        self._needs_end_seed = bool(self._events) and self._events[-1].type != "session/end-seed"
        self.first_live_seq: int | None = None if self._needs_end_seed else len(self._events)

    # --- reading -----------------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self.header.id

    @property
    def events(self) -> EventList:
        return EventList(self._events)

    def __len__(self) -> int:
        return len(self._events)

    @property
    def surface(self) -> tuple[int, ...]:
        return tuple(self._surface)

    def derive_messages(self) -> list[Message]:
        out: list[Message] = []
        cache = self._projections
        events = self._events
        for seq in self._surface:
            if seq in cache:
                msg = cache[seq]
            else:
                msg = cache[seq] = project_event(events[seq])
            if msg is not None:
                out.append(msg)
        return out

    # --- observers ---------------------------------------------------------------------------------

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        self._observers.append(observer)

        def dispose() -> None:
            if observer in self._observers:
                self._observers.remove(observer)

        return dispose

    # --- writing -----------------------------------------------------------------------------------

    def append(
        self,
        type: str,
        data: JsonObject,
        *,
        surface_op: SurfaceOp | None = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
    ) -> SessionEvent:
        if self._notifying:
            raise ReentrantAppendError(
                f"Session.append({type!r}) called from inside a session observer; schedule the "
                "write (e.g. loop.call_soon) instead"
            )
        if self._needs_end_seed and type != "session/end-seed":
            self._needs_end_seed = False
            self.append("session/end-seed", {})
        if not type or not isinstance(type, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UsageError("event type must be a non-empty string")
        spec = EVENT_CATALOG.get(type)
        if spec is not None and spec.required:
            missing = [k for k in spec.required if k not in data]
            if missing:
                raise UsageError(f"{type} event is missing data field(s): {', '.join(missing)}")
        copied = lossless_copy(data, what=f"{type} data")
        assert isinstance(copied, dict)
        seq = len(self._events)
        seqs = tuple(source_event_seqs) if source_event_seqs is not None else None
        self._check_surface(type, surface_op, seqs, copied, seq)
        event = SessionEvent(
            type=type,
            seq=seq,
            time=self._clock(),
            data=copied,
            ignorable=ignorable,
            surface_op=surface_op,
            source_event_seqs=seqs,
        )
        if type == "session/end-seed":
            self._needs_end_seed = False
            self.first_live_seq = seq + 1
        elif self.first_live_seq is None:
            self.first_live_seq = seq
        self._commit(event)
        self._notify(event)
        return event

    def _notify(self, event: SessionEvent) -> None:
        if not self._observers:
            return
        self._notifying = True
        try:
            for observer in tuple(self._observers):
                try:
                    observer(event)
                except Exception:
                    _log.exception("session observer failed on %s (seq %d)", event.type, event.seq)
        finally:
            self._notifying = False

    def _commit(self, event: SessionEvent) -> None:
        self._events.append(event)
        t = event.type
        op = event.surface_op
        if op is not None:
            if op == "append":
                self._surface.append(event.seq)
                if self._surface_index is not None:
                    self._surface_index[event.seq] = len(self._surface) - 1
            else:
                i = self._surface.index(op.start)
                j = self._surface.index(op.end)
                self._surface[i : j + 1] = [event.seq]
                self._surface_index = None
                self.replace_generation += 1
        elif t == "turn/start":
            turn = event.data.get("turn")
            if isinstance(turn, int):
                self.open_turn = turn
                self.last_turn = max(self.last_turn, turn)
            self.open_step = None
        elif t == "turn/end":
            self.open_turn = None
            self.open_step = None
        elif t == "step/start":
            step = event.data.get("step")
            self.open_step = step if isinstance(step, int) else None
        elif t == "step/end":
            self.open_step = None

    def _index_of(self, seq: int) -> int | None:
        if self._surface_index is None:
            self._surface_index = {s: i for i, s in enumerate(self._surface)}
        return self._surface_index.get(seq)

    def _check_surface(
        self,
        type: str,
        op: SurfaceOp | None,
        seqs: tuple[int, ...] | None,
        data: JsonObject,
        seq: int,
    ) -> None:
        is_surface = type in SURFACE_TYPES
        if is_surface and op is None:
            raise SurfaceError(f"{type} is a surface event and needs a surface_op")
        if not is_surface and op is not None:
            raise SurfaceError(f"{type} is not a surface event; surface_op is forbidden on it")
        if seqs is not None:
            if not seqs and type != "assistant/message":
                raise SurfaceError(f"{type}: sourceEventSeqs must be non-empty when present")
            if len(set(seqs)) != len(seqs):
                raise SurfaceError(f"{type}: sourceEventSeqs must be distinct")
            for s in seqs:
                if not 0 <= s < seq:
                    raise SurfaceError(f"{type}: sourceEventSeqs cites {s}, not an earlier seq")
        if not isinstance(op, ReplaceOp):
            return
        i, j = self._index_of(op.start), self._index_of(op.end)
        if i is None or j is None or i > j:
            raise SurfaceError(
                f"{type}: replace range {op.start}..{op.end} is not a range of current surface nodes"
            )
        shadowed = self._surface[i : j + 1]
        if seqs is None or not set(shadowed) <= set(seqs):
            raise SurfaceError(f"{type}: a replacement must cite every node it shadows {shadowed}")
        if type == "tool/result":
            old = self._events[shadowed[0]]
            if len(shadowed) != 1 or old.type != "tool/result":
                raise SurfaceError("a tool/result replacement shadows exactly one tool/result")
            if not _same_but_content(old.data, data):
                raise SurfaceError("a tool/result replacement may change only the nested content")


def _same_but_content(old: JsonObject, new: JsonObject) -> bool:
    def strip(d: JsonObject) -> JsonObject:
        msg = d.get("message")
        out = {k: v for k, v in d.items() if k != "message"}
        if isinstance(msg, dict):
            m = {k: v for k, v in msg.items() if k != "content"}
            content = msg.get("content")
            if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict):
                m["block"] = {k: v for k, v in content[0].items() if k != "content"}
            out["message"] = m
        return out

    return strip(old) == strip(new)
