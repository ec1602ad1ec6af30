"""``Session``: the append-only event log, the single source of truth of an agent session.

Contract:

* ``append`` is synchronous and never blocks on I/O. It validates before committing: the event type is
  a non-empty string; ``data`` is a dict and known types carry their required fields; ``data`` is
  lossless JSON (a deep copy is stored, so later mutation of the caller's dict cannot change the log);
  ``surface_op`` is present exactly on surface types and obeys the surface rules; ``source_event_seqs``
  appear only on surface types and cite distinct, earlier seqs. A refused append changes nothing (not
  even the pending ``session/end-seed`` of a seeded session).
* ``seq`` is contiguous from 0; ``time`` comes from the injected clock (epoch ms; the wall clock when
  none is injected).
* Observers (``subscribe``) run after commit, in subscription order. Their exceptions are logged and
  contained. An ``append`` made from inside an observer raises ``ReentrantAppendError`` — schedule it.
* A session built from a *seed* (resume, fork, replay) writes ``session/end-seed`` before its first
  live event unless the seed already ends with one; ``first_live_seq`` is where live writes began.
* Nothing secret is written: every appended event's data passes through the redactor
  (``dsh_kernel.llm.secrets``; injected as ``redactor``, the process-wide one by default), which
  replaces every piece of a known key or URL credential, in any escaped form, with ``[redacted]``.
  Seed events were redacted when first written and are kept as they are.
* ``derive_messages()`` folds ``project_event`` over the current surface; projections are cached per
  seq (events are immutable), the fold is kept and extended as the surface grows (rebuilt only after a
  replacement), and every call returns a fresh list. ``projection(seq)`` is one node's cached message,
  ``surface_after(seq)`` the nodes after one.
* Reading the log costs what is read, not the session's length: ``latest(type)``,
  ``seqs_of(type)`` and ``turn_at(seq)`` answer from an index kept as events are appended
  (``dsh_kernel.session.log_index``: the turn and request envelopes, warnings, answers);
  ``reversed(session.events)`` walks the list itself.
* ``prefix_kept(seq)`` says whether the history up to a node is unchanged since it was appended (the
  token meter's anchor rule); ``compaction_open`` is the live compaction lock (SPINE §7.1).
* Memory: ``assistant/chunk`` events are kept compactly (``dsh_kernel.session.chunk_runs``): a
  streamed text or reasoning delta as it is appended, the other chunks of a turn once the next turn
  starts. ``events`` rebuilds them on access as ``SessionEvent`` values equal to the ones appended
  (equal, not the same objects: the event ``append`` returned and observers saw is not kept). Only
  chunk events are stored so, so every other event (and every surface event) is the object
  appended.
* ``image_data(sha256)`` is the base64 of an ``image/data`` event, indexed as it is appended (or
  loaded), so a request can carry an image's bytes without walking the log.
"""

from __future__ import annotations

import logging
import time as _time
from collections.abc import Callable, Iterable, Mapping, Sequence

from dsh_kernel.errors import ReentrantAppendError, SurfaceError, UsageError
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.codec import chunk_to_json
from dsh_kernel.llm.secrets import REDACTOR, Redactor
from dsh_kernel.llm.types import Message, StreamChunk
from dsh_kernel.session.check.payload import problem as payload_problem
from dsh_kernel.session.check.surface import check_surface
from dsh_kernel.session.chunk_runs import (
    DELTA_KINDS,
    ChunkRun,
    EventList,
    add_delta,
    compact,
    delta_parts,
    event_at,
    plain_delta,
)
from dsh_kernel.session.codec import lossless_copy_object
from dsh_kernel.session.derive import project_event
from dsh_kernel.session.events import (
    SURFACE_TYPES,
    SessionEvent,
    SessionHeader,
    SurfaceOp,
    new_event,
)
from dsh_kernel.session.log_index import INDEXED, LogIndex
from dsh_kernel.session.payloads import payload_of

_log = logging.getLogger(__name__)

Clock = Callable[[], int]
Observer = Callable[[SessionEvent], None]


_time_ns = _time.time_ns

_BRACKETS = frozenset({"turn/start", "turn/end", "step/start", "step/end"})
_SAFE_INT = 2**53
"""The largest integer JSON carries exactly (``session.codec``'s lossless bound)."""
_TRACKED = _BRACKETS | INDEXED | {"image/data", "compaction/start", "compaction/end"}
"""Non-surface types ``_track`` follows: the turn/step brackets, the types ``log_index`` indexes, the
image bytes it indexes, and the compaction lock."""


def wall_clock_ms() -> int:
    """Epoch milliseconds: the default clock (``append`` inlines it when no clock is injected)."""
    return _time_ns() // 1_000_000


def _type_name(value: object) -> str:
    return type(value).__name__


class Session:
    """The log. See the module docstring for the contract."""

    def __init__(
        self,
        *,
        header: SessionHeader,
        seed: Iterable[SessionEvent] = (),
        clock: Clock | None = None,
        redactor: Redactor = REDACTOR,
    ) -> None:
        self.header = header
        self._clock: Clock | None = clock
        self._redactor = redactor
        self._events: list[SessionEvent | ChunkRun] = []
        self._compacted_upto = 0
        self._open_run: ChunkRun | None = None
        """The run the latest streamed delta went to (the next one may continue it)."""
        """Events before this seq are past turns whose chunk events were compacted."""
        self._surface: list[int] = []
        self._surface_index: dict[int, int] | None = {}
        self._projections: dict[int, Message | None] = {}
        self._derived: list[Message] = []
        """``derive_messages()`` of the surface up to ``_derived_upto`` nodes, under
        ``_derived_generation`` (a replacement makes it stale)."""
        self._derived_upto = 0
        self._derived_generation = 0
        self._index = LogIndex()
        self._images: dict[str, str] = {}
        self.replace_generation = 0
        self._replaced: list[tuple[int, int]] = []
        """``(seq, surface position of its start)`` of every surface replacement, in log order."""
        self._compaction_start: int | None = None
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
        self._needs_end_seed = bool(self._events) and self.events[-1].type != "session/end-seed"
        self.first_live_seq: int | None = None if self._needs_end_seed else len(self._events)

    # --- reading -----------------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self.header.id

    @property
    def events(self) -> EventList:
        return EventList(self._events)

    def __bool__(self) -> bool:
        # A session is a value even with no events yet: ``session or default`` must keep it.
        return True

    def __len__(self) -> int:
        return len(self._events)

    @property
    def surface(self) -> tuple[int, ...]:
        return tuple(self._surface)

    def prefix_kept(self, seq: int) -> bool:
        """Whether the surface up to and including node ``seq`` is still what it was when ``seq``
        was appended: ``seq`` is a current node and no later replacement started at or before its
        position (a compaction did; dropping a later overflowed turn did not)."""
        index = self._index_of(seq)
        if index is None:
            return False
        for replaced, start in reversed(self._replaced):
            if replaced < seq:
                break
            if start <= index:
                return False
        return True

    @property
    def compaction_open(self) -> int | None:
        """The seq of a live ``compaction/start`` with no ``compaction/end`` yet (the lock), else
        ``None``. One before the session's first live write (a seed's orphan: a crash mid-compaction
        in an earlier lifecycle) is stale and does not count (SPINE §1.12)."""
        start = self._compaction_start
        live = self.first_live_seq
        if start is None or live is None or start < live:
            return None
        return start

    def latest(self, type: str) -> SessionEvent | None:
        """The latest event of ``type`` (one of ``INDEXED``), or ``None``: without a walk."""
        seqs = self._index.seqs(type)
        return self._event(seqs[-1]) if seqs else None

    def seqs_of(self, type: str, start: int = 0) -> list[int]:
        """The seqs of the events of ``type`` (one of ``INDEXED``) in log order, from the
        ``start``-th one on."""
        return self._index.seqs(type)[start:]

    def turn_at(self, seq: int) -> int | None:
        """The turn open just before event ``seq``, else ``None`` (between turns): no walk."""
        return self._index.turn_at(seq)

    def surface_after(self, seq: int | None) -> tuple[int, ...]:
        """The surface nodes after node ``seq`` (every node for ``None``). Raises ``UsageError``
        when ``seq`` is not a current node."""
        if seq is None:
            return tuple(self._surface)
        index = self._index_of(seq)
        if index is None:
            raise UsageError(f"seq {seq} is not a node of the current surface")
        return tuple(self._surface[index + 1 :])

    def projection(self, seq: int) -> Message | None:
        """The model message event ``seq`` stands for (``project_event``, cached), or ``None``."""
        cache = self._projections
        if seq in cache:
            return cache[seq]
        msg = cache[seq] = project_event(self._event(seq))
        return msg

    def image_data(self, sha256: str) -> str | None:
        """The base64 bytes of the image ``sha256`` (its ``image/data`` event), or ``None``."""
        return self._images.get(sha256)

    def derive_messages(self) -> list[Message]:
        if self._derived_generation != self.replace_generation:
            self._derived = []
            self._derived_upto = 0
            self._derived_generation = self.replace_generation
        surface = self._surface
        if self._derived_upto < len(surface):
            out = self._derived
            projection = self.projection
            for seq in surface[self._derived_upto :]:
                msg = projection(seq)
                if msg is not None:
                    out.append(msg)
            self._derived_upto = len(surface)
        return list(self._derived)

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
        data: Mapping[str, object],
        *,
        surface_op: SurfaceOp | None = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
    ) -> SessionEvent:
        """Append one event. ``data`` is its payload — a plain dict, or the type's payload
        ``TypedDict`` from ``dsh_kernel.session.payloads`` — copied losslessly (what the log keeps
        is the copy); its keys are checked against the payload type first
        (``payload_check.problem``: required keys present, each of its JSON kind)."""
        if (
            type == "assistant/chunk"
            and surface_op is None
            and source_event_seqs is None
            and not ignorable
            and not self._needs_end_seed
            and not self._notifying
        ):
            parts = plain_delta(data) if isinstance(data, dict) else None
            event = self._append_delta(*parts) if parts is not None else None
            if event is not None:  # the hot path: one event per streamed token
                return event
        if self._notifying:
            raise ReentrantAppendError(
                f"Session.append({type!r}) called from inside a session observer; schedule the "
                "write (e.g. loop.call_soon) instead"
            )
        if not type or not isinstance(type, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UsageError("event type must be a non-empty string")
        if not isinstance(data, dict):
            raise UsageError(f"{type} data must be a dict, not {_type_name(data)}")
        wrong = payload_problem(type, data, kinds=type != "assistant/chunk")
        if wrong is not None:
            raise UsageError(wrong)
        copied = lossless_copy_object(data, event_type=type)
        redactor = self._redactor
        if type != "assistant/chunk":  # not on the hot path (chunks are scrubbed all the same)
            redactor.refresh()  # learn a key set in the environment since the last event
        redactor.scrub(copied)
        seqs = tuple(source_event_seqs) if source_event_seqs is not None else None
        events = self._events
        seq = len(events)
        # A seeded session's first live write is preceded by session/end-seed. Everything is
        # validated before either event commits, so a refused append changes nothing.
        end_seed_first = self._needs_end_seed and type != "session/end-seed"
        if end_seed_first:
            seq += 1
        if surface_op is not None or seqs is not None or type in SURFACE_TYPES:
            self._check_surface(type, surface_op, seqs, copied, seq)
        clock = self._clock
        now = _time_ns() // 1_000_000 if clock is None else clock()
        if end_seed_first:
            self._needs_end_seed = False
            self._write(new_event("session/end-seed", seq - 1, now, {}))
            self.first_live_seq = seq
        elif type == "session/end-seed":
            self._needs_end_seed = False
            self.first_live_seq = seq + 1
        elif self.first_live_seq is None:
            self.first_live_seq = seq
        event = new_event(type, seq, now, copied, ignorable, surface_op, seqs)
        events.append(event)  # _write, inlined: the common path
        if surface_op is not None or type in _TRACKED:
            self._track(event)
        if self._observers:
            self._notify(event)
        return event

    def append_chunk(self, turn: int, step: int, chunk: StreamChunk) -> SessionEvent:
        """Append one streamed chunk of step ``step`` of turn ``turn``: the event ``append`` makes
        of ``{"turn", "step", "chunk": chunk_to_json(chunk)}``, without building a delta's JSON to
        read it back (the agent's answer loop: one call per token)."""
        parts = delta_parts(turn, step, chunk)
        if parts is not None and not self._needs_end_seed and not self._notifying:
            event = self._append_delta(*parts)
            if event is not None:
                return event
        data = {"turn": turn, "step": step, "chunk": chunk_to_json(chunk)}
        return self.append("assistant/chunk", data)

    def append_chunks(
        self, turn: int, step: int, chunks: Sequence[StreamChunk], seqs: list[int]
    ) -> None:
        """Append the chunks of step ``step`` of turn ``turn`` one by one, in order, each the very
        event ``append_chunk`` appends (observers notified of each in turn), and add their seqs to
        ``seqs``: the agent's answer loop, one call per network read. A text or reasoning delta's
        ``SessionEvent`` is built only for the observers (the log keeps the delta compactly)."""
        if (
            self._needs_end_seed
            or self._notifying
            or type(turn) is not int
            or type(step) is not int
            or not -_SAFE_INT <= turn <= _SAFE_INT
            or not -_SAFE_INT <= step <= _SAFE_INT
        ):
            for chunk in chunks:
                seqs.append(self.append_chunk(turn, step, chunk).seq)
            return
        redact = self._redactor.redact
        # What the redactor's walk of a delta's shape reads: the kind and the text (every key is
        # too short). A kind a secret's piece is in (absurd, but the general path's) goes that way.
        kinds = {k: c for k, c in DELTA_KINDS.items() if redact(k) is k}
        events, clock, observers = self._events, self._clock, self._observers
        for chunk in chunks:
            if chunk.type != "text-delta" and chunk.type != "reasoning-delta":
                seqs.append(self.append_chunk(turn, step, chunk).seq)
                continue
            kind, index, text = chunk.type, chunk.index, chunk.text
            code = kinds.get(kind)
            if (
                code is None
                or type(index) is not int
                or type(text) is not str
                or not 0 <= index <= _SAFE_INT
            ):  # not what the log packs as it is: the general path's checks and copy
                seqs.append(self.append_chunk(turn, step, chunk).seq)
                continue
            text = redact(text)
            seq = len(events)
            run = self._open_run
            if (
                clock is None  # the wall clock's time: an int64 ``add_delta`` need not check
                and run is not None
                and run.stop == seq
                and run.turn == turn
                and run.step == step
            ):  # ``add_delta``'s common case, inlined: the previous delta's run goes on
                now = _time_ns() // 1_000_000
                run.append(now, index * 4 + code, text)
                events.append(run)
            else:
                now = _time_ns() // 1_000_000 if clock is None else clock()
                run = self._open_run = add_delta(
                    events, run, seq, now, turn, step, kind, index, text
                )
            seqs.append(seq)
            if run is not None and not observers:
                continue
            event = new_event(
                "assistant/chunk",
                seq,
                now,
                {"turn": turn, "step": step, "chunk": {"type": kind, "index": index, "text": text}},
            )
            if run is None:
                events.append(event)
            if observers:
                self._notify(event)

    def _append_delta(
        self, turn: int, step: int, kind: str, index: int, text: str
    ) -> SessionEvent | None:
        """The append of a text or reasoning delta whose parts were checked (``chunk_runs.
        plain_delta``, ``append_chunk``): the same copy and scrub as the general path, and the delta
        stored compactly at once (``chunk_runs.add_delta``), the event handed out the caller's and
        the observers' only. ``None``: the general path must write it."""
        # What the redactor's walk of this shape reads: its two strings (every key is too short).
        redact = self._redactor.redact
        if redact(kind) is not kind:
            return None  # a secret's piece in the kind itself: the general path writes that
        text = redact(text)
        events = self._events
        seq = len(events)
        clock = self._clock
        now = _time_ns() // 1_000_000 if clock is None else clock()
        chunk: JsonObject = {"type": kind, "index": index, "text": text}
        event = new_event("assistant/chunk", seq, now, {"turn": turn, "step": step, "chunk": chunk})
        run = self._open_run = add_delta(
            events, self._open_run, seq, now, turn, step, kind, index, text
        )
        if run is None:
            events.append(event)
        if self._observers:
            self._notify(event)
        return event

    def _write(self, event: SessionEvent) -> None:
        self._commit(event)
        if self._observers:
            self._notify(event)

    def _notify(self, event: SessionEvent) -> None:
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
        self._track(event)

    def _track(self, event: SessionEvent) -> None:
        """Update the surface and the open turn/step after ``event`` was appended."""
        op = event.surface_op
        if op is not None:
            if event.type == "assistant/message":
                self._index.add("assistant/message", event.seq)
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
                self._replaced.append((event.seq, i))
            return
        t = event.type
        if t not in _TRACKED:
            return
        if t != "turn/start":
            self._index.add(t, event.seq)
        if t == "image/data":
            image = payload_of(event, "image/data")
            self._images.setdefault(image["sha256"], image["data"])
        elif t == "compaction/start":
            self._compaction_start = event.seq
        elif t == "compaction/end":
            self._compaction_start = None
        elif t == "turn/start":
            turn = payload_of(event, "turn/start")["turn"]
            self._index.add(t, event.seq, turn)
            self.open_turn = turn
            self.last_turn = max(self.last_turn, turn)
            self.open_step = None
            # The turns before this one are over: keep their chunk events compactly.
            if self._open_run is not None:
                self._open_run.seal()
                self._open_run = None
            compact(self._events, self._compacted_upto, event.seq)
            self._compacted_upto = event.seq
        elif t == "turn/end":
            self.open_turn = None
            self.open_step = None
        elif t == "step/start":
            self.open_step = payload_of(event, "step/start")["step"]
        elif t == "step/end":
            self.open_step = None

    def _event(self, seq: int) -> SessionEvent:
        return event_at(self._events, seq)

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
        check_surface(
            type,
            op,
            seqs,
            data,
            seq,
            surface=self._surface,
            index_of=self._index_of,
            event_at=self._event,
        )
