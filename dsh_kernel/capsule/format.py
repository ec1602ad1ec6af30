"""A turn's capsule: its events, compact and checked, for the saved notebook (issue 34).

``capsule_of(session, turn)`` builds the capsule of one turn; ``read_capsule(value, where)`` checks one
read from a notebook and returns its events. The value travels in a chat cell's saved output's
``metadata`` under ``CAPSULE_KEY`` (``docs/capsule.md``)::

    {"version": 1, "session": "<id>", "turn": 3, "header": {<the journal header>},
     "first": 41, "events": "<base64 of zlib of the JSON list of event lines>",
     "images": {"<sha256>": {"mediaType", "data"}}, "sha256": "<hex>"}

* ``events`` are the journal's lines (``session.codec.event_to_json``) of the log from the event
  after the turn before (or after the seed, for a branch's first turn) through this turn's
  ``turn/end`` — so the capsules of a conversation's cells, read in order, are its log, seq for seq.
  ``first`` is the seq of the first. A run of streamed text or reasoning deltas of one step is one
  record, ``{"run": {"turn", "step", "times": [first, +dt…], "codes": [index·4 + kind…], "text",
  "ends": [...]}}``, rebuilt into the very events it stands for (a 1,000-chunk answer is its text
  and three short integer lists, not 1,000 objects);
* an ``image/data`` event's base64 bytes move to ``images`` (by hash; the event keeps its hash and
  media type, and ``data: ""``): an image's bytes travel in the capsule of the turn that first
  showed it, and only there;
* the list is packed (zlib, then base64): a turn's text appears in its streamed run, its block's
  end and its message, and the first turn carries the request header (the system prompt and the
  tool schemas) — packed, a capsule stays under the size of the turn's rendering (issue 34's 1.5×;
  ``benchmarks/capsule.py``). It unpacks to at most ``MAX_EVENTS_CHARS`` bytes, whatever it claims;
* ``sha256`` is the SHA-256 of the canonical JSON of ``[version, session, turn, header, first,
  events, images]`` (``events`` as packed). A capsule whose content does not hash to it is *altered*
  (``CAPSULE_ALTERED``). The hash catches accidents only: whoever edits a capsule can re-hash it,
  so what is read from capsules is self-reported.

Nothing here runs or renders anything a capsule holds: it is data, decoded by the journal's own
reader (``session.codec.event_from_json``), with every size capped. What the log holds is redacted
at append (``llm.secrets``), so a capsule holds nothing the journal would not.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import zlib
from collections.abc import Sequence
from typing import Final, cast

from dsh_kernel.capsule import CAPSULE_KEY as CAPSULE_KEY
from dsh_kernel.errors import DshError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.session.check.payload import problem as payload_problem
from dsh_kernel.session.codec import (
    canonical,
    dumps,
    event_from_json,
    event_to_json,
    header_from_json,
    header_to_json,
    loads,
)
from dsh_kernel.session.events import EVENT_CATALOG, SessionEvent, SessionHeader
from dsh_kernel.session.log import Session
from dsh_kernel.session.payloads import payload_of

CAPSULE_VERSION: Final = 1
MAX_CAPSULE_CHARS: Final = 32_000_000
"""A capsule larger than this (its JSON text) is not written, and is refused when read."""
MAX_EVENTS_CHARS: Final = 256_000_000
"""The most a capsule's packed events may unpack to."""
MAX_EVENTS: Final = 200_000
"""Events one capsule may stand for (runs expanded): a turn of 200,000 streamed chunks is far past
any real one."""
MAX_NOTEBOOK_EVENTS: Final = 1_000_000
MAX_NOTEBOOK_CHARS: Final = 256_000_000
"""What all the capsules of one notebook may stand for together (``Budget``)."""

_SESSION_ID: Final = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_ADVICE: Final = (
    "; nothing of it is used — clear that cell's output or strip the capsules "
    "(`dsh-kernel strip`) to go on without them"
)


class Budget:
    """What the capsules of one notebook may still unpack to, together: a small notebook cannot
    make the kernel build millions of events or gigabytes of text."""

    __slots__ = ("chars", "events")

    def __init__(self) -> None:
        self.events = MAX_NOTEBOOK_EVENTS
        self.chars = MAX_NOTEBOOK_CHARS


CAPSULE_INVALID: Final = "CAPSULE_INVALID"
CAPSULE_ALTERED: Final = "CAPSULE_ALTERED"

_KNOWN_TYPES: Final = frozenset(EVENT_CATALOG)
_DELTAS: Final = {"text-delta": 1, "reasoning-delta": 2}
_KINDS: Final = ("", "text-delta", "reasoning-delta")


class CapsuleError(DshError):
    """A capsule that cannot be taken: ``CAPSULE_INVALID`` (malformed, oversized, another version)
    or ``CAPSULE_ALTERED`` (its content does not hash to its ``sha256``)."""


# --- writing -----------------------------------------------------------------------------------------


def turn_span(session: Session, turn: int) -> tuple[int, int] | None:
    """``(first, stop)``: the seqs a capsule of ``turn`` covers (module docstring), ``None`` when the
    turn has not ended or is a seeded copy (its capsule is the session it came from's)."""
    events = session.events
    ends = session.seqs_of("turn/end")
    stop = None
    previous = -1
    for seq in ends:
        number = payload_of(events[seq], "turn/end")["turn"]
        if number == turn:
            stop = seq + 1
            break
        previous = seq
    if stop is None:
        return None
    seed = session.header.seed_length or 0
    first = max(previous + 1, seed)
    return (first, stop) if first < stop else None


def _delta(data: JsonObject) -> tuple[int, int, int, str] | None:
    """``(turn, step, code, text)`` of a streamed delta event's data in the log's own shape."""
    if list(data) != ["turn", "step", "chunk"]:
        return None
    chunk = data["chunk"]
    turn, step = data["turn"], data["step"]
    if not isinstance(chunk, dict) or not isinstance(turn, int) or not isinstance(step, int):
        return None
    if list(chunk) != ["type", "index", "text"]:
        return None
    kind, index, text = chunk["type"], chunk["index"], chunk["text"]
    if kind not in _DELTAS or not isinstance(index, int) or not isinstance(text, str):
        return None
    return turn, step, index * 4 + _DELTAS[kind], text


class _Run:
    """A run of one step's streamed deltas being encoded (``_encode``)."""

    __slots__ = ("codes", "ends", "last", "parts", "size", "step", "times", "turn")

    def __init__(self, turn: int, step: int) -> None:
        self.turn, self.step = turn, step
        self.times: list[JsonValue] = []
        self.codes: list[JsonValue] = []
        self.ends: list[JsonValue] = []
        self.parts: list[str] = []
        self.size = 0
        self.last = 0

    def add(self, time: int, code: int, text: str) -> None:
        self.times.append(time - self.last if self.times else time)
        self.last = time
        self.codes.append(code)
        self.parts.append(text)
        self.size += len(text)
        self.ends.append(self.size)

    def to_json(self) -> JsonObject:
        return {
            "run": {
                "turn": self.turn,
                "step": self.step,
                "times": self.times,
                "codes": self.codes,
                "text": "".join(self.parts),
                "ends": self.ends,
            }
        }


def _encode(events: Sequence[SessionEvent], images: dict[str, JsonValue]) -> list[JsonValue]:
    out: list[JsonValue | _Run] = []
    run: _Run | None = None
    for ev in events:
        d = (
            _delta(ev.data)
            if ev.type == "assistant/chunk" and not ev.ignorable and ev.surface_op is None
            else None
        )
        if d is not None:
            turn, step, code, text = d
            if run is None or run.turn != turn or run.step != step:
                run = _Run(turn, step)
                out.append(run)
            run.add(ev.time, code, text)
            continue
        run = None
        line = event_to_json(ev)
        if ev.type == "image/data":
            image = payload_of(ev, "image/data")
            images[image["sha256"]] = {"mediaType": image["mediaType"], "data": image["data"]}
            line["data"] = {"sha256": image["sha256"], "mediaType": image["mediaType"], "data": ""}
        out.append(line)
    return [item.to_json() if isinstance(item, _Run) else item for item in out]


def _digest(body: Sequence[JsonValue]) -> str:
    return hashlib.sha256(canonical(list(body)).encode("utf-8")).hexdigest()


def capsule_of(session: Session, turn: int) -> JsonObject | None:
    """The capsule of ``turn`` of ``session`` (module docstring), or ``None`` when it has none
    (not ended, a seeded copy, or larger than ``MAX_CAPSULE_CHARS``)."""
    span = turn_span(session, turn)
    if span is None:
        return None
    first, stop = span
    log = session.events
    images: dict[str, JsonValue] = {}
    lines = _encode([log[s] for s in range(first, stop)], images)
    events = base64.b64encode(zlib.compress(dumps(lines).encode("utf-8"), 6)).decode("ascii")
    header = header_to_json(session.header)
    body: list[JsonValue] = [CAPSULE_VERSION, session.id, turn, header, first, events, images]
    capsule: JsonObject = {
        "version": CAPSULE_VERSION,
        "session": session.id,
        "turn": turn,
        "header": header,
        "first": first,
        "events": events,
        "images": images,
        "sha256": _digest(body),
    }
    if len(canonical(capsule)) > MAX_CAPSULE_CHARS:
        return None
    return capsule


# --- reading -----------------------------------------------------------------------------------------


class Capsule:
    """A capsule read and checked (``read_capsule``): its session's header, turn and events."""

    __slots__ = ("events", "first", "header", "images", "session", "turn")

    def __init__(
        self,
        *,
        session: str,
        turn: int,
        header: SessionHeader,
        first: int,
        events: list[SessionEvent],
        images: dict[str, tuple[str, str]],
    ) -> None:
        self.session = session
        self.turn = turn
        self.header = header
        self.first = first
        self.events = events
        self.images = images
        """``sha256 → (media type, base64)`` of the images whose bytes this capsule carries."""

    @property
    def stop(self) -> int:
        return self.first + len(self.events)


def _bad(where: str, why: str) -> CapsuleError:
    return CapsuleError(f"{where}: its session capsule {why}{_ADVICE}", code=CAPSULE_INVALID)


def _int(obj: JsonObject, key: str, where: str) -> int:
    v = obj.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise _bad(where, f"has no valid {key!r}")
    return v


def _expand_run(raw: JsonValue, at: int, where: str) -> list[JsonObject]:
    if not isinstance(raw, dict):
        raise _bad(where, "has a run that is not an object")
    turn, step = raw.get("turn"), raw.get("step")
    times, codes, ends, text = raw.get("times"), raw.get("codes"), raw.get("ends"), raw.get("text")
    if not (
        isinstance(turn, int)
        and isinstance(step, int)
        and isinstance(times, list)
        and isinstance(codes, list)
        and isinstance(ends, list)
        and isinstance(text, str)
        and len(times) == len(codes) == len(ends)
    ):
        raise _bad(where, "has a malformed run of streamed text")
    out: list[JsonObject] = []
    time = 0
    start = 0
    for k, (dt, code, end) in enumerate(zip(times, codes, ends, strict=True)):
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (dt, code, end)):
            raise _bad(where, "has a malformed run of streamed text")
        dt, code, end = cast("int", dt), cast("int", code), cast("int", end)
        if not (0 <= start <= end <= len(text)) or code & 3 not in (1, 2) or code < 0:
            raise _bad(where, "has a malformed run of streamed text")
        time = dt if k == 0 else time + dt
        chunk: JsonObject = {"type": _KINDS[code & 3], "index": code >> 2, "text": text[start:end]}
        out.append(
            {
                "type": "assistant/chunk",
                "seq": at + k,
                "time": time,
                "data": {"turn": turn, "step": step, "chunk": chunk},
            }
        )
        start = end
    return out


def read_capsule(value: JsonValue, where: str, budget: Budget | None = None) -> Capsule:
    """Check the capsule ``value`` read from ``where`` (e.g. "cell 4 (id ab12…)") and return it;
    ``CapsuleError`` with one line naming ``where`` otherwise. Nothing of it is run or rendered."""
    if not isinstance(value, dict):
        raise _bad(where, "is not a JSON object")
    if len(canonical(value)) > MAX_CAPSULE_CHARS:
        raise _bad(where, f"is larger than {MAX_CAPSULE_CHARS:,} characters")
    if value.get("version") != CAPSULE_VERSION:
        raise _bad(
            where,
            f"has version {value.get('version')!r}; this dsh-kernel reads version "
            f"{CAPSULE_VERSION} (upgrade dsh-kernel if the notebook is newer)",
        )
    session = value.get("session")
    if not isinstance(session, str) or not _SESSION_ID.match(session) or session in (".", ".."):
        raise _bad(where, "names no session, or one no session id can be")
    turn = _int(value, "turn", where)
    first = _int(value, "first", where)
    raw_header, packed, images = value.get("header"), value.get("events"), value.get("images")
    if not isinstance(packed, str) or not isinstance(images, dict):
        raise _bad(where, "has no events or images")
    body: list[JsonValue] = [CAPSULE_VERSION, session, turn, raw_header, first, packed, images]
    if value.get("sha256") != _digest(body):
        raise CapsuleError(
            f"{where}: its session capsule was altered (its content does not hash to the sha256 "
            f"it carries){_ADVICE}",
            code=CAPSULE_ALTERED,
        )
    try:
        header = header_from_json(raw_header, where=f"{where}: capsule header")
    except DshError as exc:
        raise _bad(where, f"has a bad header ({_without(exc.message, where)})") from exc
    if header.id != session:
        raise _bad(where, "has a header of another session")
    budget = budget or Budget()
    pictures = _images(images, where)
    out = _events(_unpack(packed, where, budget), first, pictures, where, budget)
    return Capsule(
        session=session, turn=turn, header=header, first=first, events=out, images=pictures
    )


def _unpack(packed: str, where: str, budget: Budget) -> list[JsonValue]:
    """The event lines a capsule's ``events`` packs (base64 of zlib of JSON), decompressed to at
    most ``MAX_EVENTS_CHARS`` and what the notebook's budget has left (a small capsule cannot
    unpack into a huge one)."""
    limit = min(MAX_EVENTS_CHARS, budget.chars)
    try:
        raw = base64.b64decode(packed, validate=True)
        inflate = zlib.decompressobj()
        text = inflate.decompress(raw, limit + 1)
        if len(text) > limit or inflate.unconsumed_tail:
            raise _bad(where, f"unpacks to more than {limit:,} bytes")
        budget.chars -= len(text)
        lines = loads(text.decode("utf-8"))
    except RecursionError as exc:
        raise _bad(where, "has events nested too deep") from exc
    except (binascii.Error, zlib.error, UnicodeDecodeError, ValueError) as exc:
        raise _bad(where, f"has events that cannot be unpacked ({type(exc).__name__})") from exc
    if not isinstance(lines, list):
        raise _bad(where, "has events that are not a list")
    return lines


def _images(images: JsonObject, where: str) -> dict[str, tuple[str, str]]:
    pictures: dict[str, tuple[str, str]] = {}
    for sha, item in images.items():
        media = item.get("mediaType") if isinstance(item, dict) else None
        data = item.get("data") if isinstance(item, dict) else None
        if not isinstance(media, str) or not isinstance(data, str):
            raise _bad(where, "has a malformed image")
        pictures[sha] = (media, data)
    return pictures


def _events(
    events: list[JsonValue],
    first: int,
    pictures: dict[str, tuple[str, str]],
    where: str,
    budget: Budget,
) -> list[SessionEvent]:
    out: list[SessionEvent] = []
    limit = min(MAX_EVENTS, budget.events)
    for raw in events:
        at = first + len(out)
        run = raw.get("run") if isinstance(raw, dict) else None
        size = _run_size(run) if run is not None else 1
        if len(out) + size > limit:
            raise _bad(where, f"stands for more than {limit:,} events")
        lines: list[JsonValue] = list(_expand_run(run, at, where)) if run is not None else [raw]
        for line in lines:
            if isinstance(line, dict) and line.get("type") == "image/data":
                line = _with_image(line, pictures)
            ev = _event(line, where)
            if ev.seq != first + len(out):
                raise _bad(where, f"skips from seq {first + len(out)} to {ev.seq}")
            out.append(ev)
    if not out or out[-1].type != "turn/end":
        raise _bad(where, "does not end with its turn's end")
    budget.events -= len(out)
    return out


def _run_size(run: JsonValue) -> int:
    """How many events a run record claims to stand for, before it is expanded."""
    times = run.get("times") if isinstance(run, dict) else None
    return len(times) if isinstance(times, list) else 1


def _event(line: JsonValue, where: str) -> SessionEvent:
    try:
        ev = event_from_json(line, _KNOWN_TYPES, where=where)
        if ev is None:  # unknown but ignorable (a newer kernel's): kept, it owns its seq
            ev = event_from_json(line, None, where=where)
    except DshError as exc:
        raise _bad(where, f"holds a bad event ({_without(exc.message, where)})") from exc
    assert ev is not None
    wrong = payload_problem(ev.type, ev.data)
    if wrong is not None:
        raise _bad(where, f"holds a bad event ({wrong})")
    return ev


def _without(message: str, where: str) -> str:
    """``message`` without a leading ``where: `` (the reader names the place too)."""
    return message.removeprefix(f"{where}: ")


def _with_image(line: JsonObject, pictures: dict[str, tuple[str, str]]) -> JsonObject:
    data = line.get("data")
    if not isinstance(data, dict):
        return line
    sha = data.get("sha256")
    if isinstance(sha, str) and sha in pictures:
        return {**line, "data": {**data, "data": pictures[sha][1]}}
    return line
