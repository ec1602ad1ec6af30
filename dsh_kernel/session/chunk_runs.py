"""Chunk events kept compactly in memory: a streamed answer costs little per event.

Most of a long session is ``assistant/chunk`` events — a 1,000-chunk answer is 1,000 of them — and
each held as a ``SessionEvent`` with its ``data`` and ``chunk`` dicts costs ~600 bytes, though a
text delta carries a few characters. A ``ChunkRun`` holds a contiguous range of one step's chunk
events as three flat arrays: the times, a packed code (the block index and the kind: a text or
reasoning delta, or any other chunk kept as its dict), and the delta's text (or the chunk dict).
About 90 bytes per text delta, most of it the text itself.

The log's list of events holds, at each position, either the ``SessionEvent`` or a reference to the
``ChunkRun`` that stores it (one object, referenced once per position it covers):

* ``add_delta`` stores a streamed text or reasoning delta as it is appended (``Session.append``'s
  fast path): nothing of it is kept as an object but its text, so a long stream neither fills the
  memory nor gives the garbage collector two more objects to walk per token;
* ``compact(items, start, stop)`` stores, when a turn starts, every run of at least ``MIN_RUN``
  other chunk events of the turns before (block starts and ends, usage, finish, a seed's chunks).

``EventList`` is the log's read-only live view of that list (``Session.events``): it hands out
``SessionEvent`` values, rebuilding those of runs. Only events of the exact shape the log writes are
taken —
``data`` is ``{"turn": int, "step": int, "chunk": {...}}`` in that key order, no flags, no surface
operation — so that ``ChunkRun.event(seq)`` rebuilds a ``SessionEvent`` *equal* to the one appended,
down to its JSON key order (a delta's dict is ``type``, ``index``, ``text``, as ``chunk_to_json``
writes it; any other chunk is kept as the very dict that was logged). Anything else stays as it was.

This is an in-memory representation only: the journal was written from the events as they were
appended, and every reader of ``Session.events`` gets ``SessionEvent`` values (``dsh_kernel.session.log``
rebuilds them on access). What is not kept is identity: two reads of a compacted event are equal,
not the same object.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import cast, overload

from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.types import StreamChunk
from dsh_kernel.session.events import SessionEvent, new_event

MIN_RUN = 2
"""A lone chunk event is left as it is. A run's own objects cost ~270 bytes, less than one event,
but a run of one would rebuild its event on every read for little gain."""

_DICT, _TEXT, _REASONING = 0, 1, 2
DELTA_KINDS: dict[str, int] = {"text-delta": _TEXT, "reasoning-delta": _REASONING}
"""A delta's kind code: a delta at block ``index`` is stored with the code ``index * 4 + kind``."""
_DATA_KEYS = ["turn", "step", "chunk"]
_DELTA_KEYS = ["type", "index", "text"]
"""The key orders the log writes (``AssistantChunk``, ``chunk_to_json``), which a rebuilt event
keeps."""
_KIND_TYPES = ("", "text-delta", "reasoning-delta")
_SAFE_INT = 2**53
"""The largest integer JSON carries exactly (``session.codec``'s lossless bound)."""
_MAX_INDEX = 1 << 60
_INT64 = 1 << 63


class ChunkRun:
    """The ``assistant/chunk`` events ``start`` .. ``stop - 1`` of one step, stored compactly."""

    __slots__ = ("_codes", "_ends", "_items", "_text", "_times", "start", "step", "stop", "turn")

    def __init__(self, start: int, turn: int, step: int) -> None:
        self.start = start
        self.stop = start
        self.turn = turn
        self.step = step
        self._times = array("q")
        self._codes = array("q")
        self._items: list[str | JsonObject] = []
        self._text: str = ""
        """Once sealed: the deltas' texts joined (one string, not one object each)."""
        self._ends: array[int] | None = None
        """Once sealed: where each delta's text ends in ``_text``."""

    def append(self, time: int, code: int, item: str | JsonObject) -> None:
        """Take the next event's time, packed code and text or dict (not once sealed)."""
        assert self._ends is None, "a sealed run takes no more events"
        self._times.append(time)
        self._codes.append(code)
        self._items.append(item)
        self.stop += 1

    def seal(self) -> None:
        """No more events will come: join a run of deltas' texts into one string (a run that
        holds other chunks too keeps its items)."""
        if self._ends is not None:
            return
        texts = [i for i in self._items if isinstance(i, str)]
        if len(texts) != len(self._items):
            return
        ends: array[int] = array("q")
        end = 0
        for text in texts:
            end += len(text)
            ends.append(end)
        self._text = "".join(texts)
        self._ends = ends
        self._items = []

    def _chunk(self, k: int) -> JsonObject:
        code = self._codes[k]
        kind = code & 3
        ends = self._ends
        if ends is not None:
            text = self._text[ends[k - 1] if k else 0 : ends[k]]
            return {"type": _KIND_TYPES[kind], "index": code >> 2, "text": text}
        item = self._items[k]
        if kind == _DICT:
            assert isinstance(item, dict)
            return item
        return {"type": _KIND_TYPES[kind], "index": code >> 2, "text": item}

    def event(self, seq: int) -> SessionEvent:
        """The event at ``seq`` (``start <= seq < stop``), equal to the one that was appended."""
        k = seq - self.start
        data: JsonObject = {"turn": self.turn, "step": self.step, "chunk": self._chunk(k)}
        return new_event("assistant/chunk", seq, self._times[k], data)


def _entry(ev: SessionEvent) -> tuple[int, int, int, int, str | JsonObject] | None:
    """``(turn, step, time, code, item)`` of an event a run can hold, else ``None``."""
    time = ev.time
    if (
        ev.type != "assistant/chunk"
        or ev.ignorable
        or ev.surface_op is not None
        or ev.source_event_seqs is not None
        or type(time) is not int  # exactly: a bool is not kept as an int
        or not -_INT64 <= time < _INT64
    ):
        return None
    data = ev.data
    if list(data) != _DATA_KEYS:
        return None
    turn, step, chunk = data["turn"], data["step"], data["chunk"]
    if type(turn) is not int or type(step) is not int or type(chunk) is not dict:
        return None
    if list(chunk) == _DELTA_KEYS:
        tag, index, text = chunk["type"], chunk["index"], chunk["text"]
        kind = DELTA_KINDS.get(tag) if type(tag) is str else None
        if (
            kind is not None
            and type(index) is int
            and 0 <= index < _MAX_INDEX
            and type(text) is str
        ):
            return turn, step, time, index * 4 + kind, text
    return turn, step, time, _DICT, chunk


def plain_delta(data: dict[str, object]) -> tuple[int, int, str, int, str] | None:
    """``(turn, step, type, index, text)`` of a text or reasoning delta's ``assistant/chunk`` data
    of the plain shape the agent writes — ``{"turn": int, "step": int, "chunk": {"type", "index":
    int, "text": str}}``, in that key order, every integer one JSON carries exactly — else ``None``
    (the log's general path then checks and copies it)."""
    if len(data) != 3:
        return None
    keys = iter(data)
    if next(keys) != "turn" or next(keys) != "step":
        return None
    turn, step, raw = data.get("turn"), data.get("step"), data.get("chunk")
    if type(raw) is not dict or type(turn) is not int or type(step) is not int:
        return None
    chunk = cast("dict[str, object]", raw)
    if len(chunk) != 3:
        return None
    keys = iter(chunk)
    if next(keys) != "type" or next(keys) != "index":
        return None
    return _parts(turn, step, chunk.get("type"), chunk.get("index"), chunk.get("text"))


def delta_parts(turn: int, step: int, chunk: StreamChunk) -> tuple[int, int, str, int, str] | None:
    """``plain_delta``'s parts of a streamed chunk of ``turn`` and ``step``, when it is a text or
    reasoning delta whose values JSON carries exactly; else ``None``."""
    if chunk.type != "text-delta" and chunk.type != "reasoning-delta":
        return None
    return _parts(turn, step, chunk.type, chunk.index, chunk.text)


def _parts(
    turn: object, step: object, kind: object, index: object, text: object
) -> tuple[int, int, str, int, str] | None:
    """``(turn, step, kind, index, text)`` when they are a text or reasoning delta's, every
    integer one JSON carries exactly; else ``None``."""
    if (
        (kind != "text-delta" and kind != "reasoning-delta")
        or type(turn) is not int
        or type(step) is not int
        or type(index) is not int
        or type(text) is not str
        or not (-_SAFE_INT <= turn <= _SAFE_INT)
        or not (-_SAFE_INT <= step <= _SAFE_INT)
        or not (-_SAFE_INT <= index <= _SAFE_INT)
    ):
        return None
    return turn, step, "text-delta" if kind == "text-delta" else "reasoning-delta", index, text


def add_delta(
    items: list[SessionEvent | ChunkRun],
    run: ChunkRun | None,
    seq: int,
    time: int,
    turn: int,
    step: int,
    kind: str,
    index: int,
    text: str,
) -> ChunkRun | None:
    """Store the delta (``plain_delta``'s parts, its text as the log keeps it) appended at ``seq``,
    the end of ``items``: in ``run`` when it continues it, else in a new run. Returns the run, or
    ``None`` when the delta cannot be packed (nothing stored: the caller keeps the event)."""
    if not 0 <= index < _MAX_INDEX or type(time) is not int or not -_INT64 <= time < _INT64:
        return None
    if run is None or run.stop != seq or run.turn != turn or run.step != step:
        if run is not None:
            run.seal()
        run = ChunkRun(seq, turn, step)
    run.append(time, index * 4 + DELTA_KINDS[kind], text)
    items.append(run)
    return run


def compact(items: list[SessionEvent | ChunkRun], start: int, stop: int) -> None:
    """Store the chunk events of ``items[start:stop]`` as runs, in place (module docstring)."""
    run: ChunkRun | None = None

    def close(run: ChunkRun | None) -> None:
        if run is not None and run.stop - run.start >= MIN_RUN:
            run.seal()
            items[run.start : run.stop] = [run] * (run.stop - run.start)

    for seq in range(start, stop):
        ev = items[seq]
        entry = _entry(ev) if isinstance(ev, SessionEvent) else None  # a run: compacted already
        if entry is None:
            close(run)
            run = None
            continue
        turn, step, time, code, item = entry
        if run is None or run.turn != turn or run.step != step:
            close(run)
            run = ChunkRun(seq, turn, step)
        run.append(time, code, item)
    close(run)


class EventList(Sequence[SessionEvent]):
    """A read-only live view of the log (no copy). Chunk events a finished turn stored compactly
    (``chunk_runs``) are rebuilt as equal ``SessionEvent`` values as they are read."""

    __slots__ = ("_items",)

    def __init__(self, items: list[SessionEvent | ChunkRun]) -> None:
        self._items = items

    @overload
    def __getitem__(self, index: int) -> SessionEvent: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[SessionEvent]: ...
    def __getitem__(self, index: int | slice) -> SessionEvent | Sequence[SessionEvent]:
        items = self._items
        if isinstance(index, slice):
            return [event_at(items, seq) for seq in range(len(items))[index]]
        item = items[index]
        if item.__class__ is SessionEvent:
            return item  # type: ignore[return-value]
        return event_at(items, index if index >= 0 else index + len(items))

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[SessionEvent]:
        # Every item's class is checked as it is reached (not once up front): a turn that starts
        # while the caller is iterating compacts the turn before it in place.
        items = self._items
        seq = 0
        while seq < len(items):
            item = items[seq]
            if item.__class__ is SessionEvent:
                yield item  # type: ignore[misc]
                seq += 1
            else:
                assert isinstance(item, ChunkRun)
                stop = item.stop  # a run still growing is read on at the next pass
                while seq < stop:
                    yield item.event(seq)
                    seq += 1

    def __reversed__(self) -> Iterator[SessionEvent]:
        # Sequence's default goes through __getitem__ one position at a time (~3x slower).
        items = self._items
        seq = len(items) - 1
        while seq >= 0:
            item = items[seq]
            if item.__class__ is SessionEvent:
                yield item  # type: ignore[misc]
            else:
                assert isinstance(item, ChunkRun)
                yield item.event(seq)
            seq -= 1

    def __repr__(self) -> str:
        return f"<EventList of {len(self._items)} events>"


def event_at(items: list[SessionEvent | ChunkRun], seq: int) -> SessionEvent:
    """The event at ``seq`` of a log's list, rebuilt if it is stored in a run."""
    item = items[seq]
    return item if isinstance(item, SessionEvent) else item.event(seq)
