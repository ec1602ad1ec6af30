"""Lossless JSON and the JSONL journal line format.

``lossless_copy(value)`` is the gate every event's data passes at append: it returns a deep copy made
only of ``dict[str, …]``, ``list``, ``str``, ``int``, finite ``float`` (never ``-0.0``), ``bool`` and
``None``, and raises ``LosslessJsonError`` naming the JSON path of the first offending value (NaN,
±inf, ``-0.0``, a non-``str`` key, a tuple, set, bytes, datetime, any other object, or a cycle).
Integers beyond ±2^53 are refused too, so JavaScript readers of our logs see the same numbers, and so is
nesting deeper than 256 levels, which Python's own JSON reader could not read back.

Journal format (one UTF-8 JSON object per line):

* line 1 — the header: ``{"type": "session", "version": 0, "id", "createdAt", "cwd"?, "notebook"?,
  "parentSession"?, "parentKind"?, "seedLength"?, "user"?, "aiPolicy"?}``; any other ``version`` is refused;
* every following line — one event: ``{"type", "seq", "time", "data", "ignorable"?, "surfaceOp"?,
  "sourceEventSeqs"?}``.

``decode_event`` refuses an event whose type is not in ``known_types`` unless it is ``ignorable`` (the
reader then returns ``None`` for it, and the caller skips it).

Reading refuses what the store could not hold, with ``SessionFormatError`` naming where: a wrong
envelope shape (code ``JOURNAL_BAD_SHAPE``: not an object, no type, a seq that is not a non-negative
integer, no data object, a non-boolean ``ignorable``, a bad ``surfaceOp`` or ``sourceEventSeqs``; in the
header, a wrongly typed optional field) and an event ``time`` or a header ``createdAt`` outside
``0 ..= MAX_TIME_MS`` (code ``JOURNAL_OUT_OF_RANGE``: before 1970 or after 9999, where dates and the
store's timestamps end), and a ``seedLength`` beyond the store's 32-bit column.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from math import copysign
from typing import Final, cast

from dsh_kernel.errors import LosslessJsonError, SessionFormatError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.session.events import (
    SESSION_FORMAT_VERSION,
    ReplaceOp,
    SessionEvent,
    SessionHeader,
    SurfaceOp,
)

MAX_EXACT_INT: Final = 2**53
"""The largest magnitude of an integer the log keeps (JSON read as IEEE doubles carries whole
numbers exactly up to 2^53); a payload with a larger one is refused (``NOT_LOSSLESS_JSON``), so a
setting whose value reaches the log is held to it where it is set."""

JOURNAL_BAD_SHAPE = "JOURNAL_BAD_SHAPE"
"""``SessionFormatError.code``: a journal line whose envelope (or payload) has the wrong shape."""
JOURNAL_OUT_OF_RANGE = "JOURNAL_OUT_OF_RANGE"
"""``SessionFormatError.code``: a time or a count outside what the store can represent."""
JOURNAL_TOO_DEEP = "JOURNAL_TOO_DEEP"
"""``SessionFormatError.code``: a line nested deeper than the log allows (``MAX_DEPTH``)."""

MAX_TIME_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z in epoch milliseconds: the last instant Python dates (the journal's date
folder) and every reader of the store can represent. Times are refused outside ``0 ..= MAX_TIME_MS``."""
_MAX_INT32 = 2**31 - 1


def _path(parts: list[str | int]) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


_MAX_DEPTH = 256
"""Deeper nesting is refused: Python's own JSON reader gives up near 1000 levels, so a journal line
nested that deep could be written but never read back."""

MAX_DEPTH = _MAX_DEPTH
"""The deepest nesting of event data the log accepts (``lossless_copy``); readers refuse deeper."""

_FAST_DEPTH = 32
"""The fast path hands anything nested deeper to the checked path (which detects cycles)."""


def lossless_copy(value: object, *, what: str = "data") -> JsonValue:
    """Deep-copy ``value`` as JSON, refusing anything that would not round-trip exactly."""
    try:
        return _fast_copy(value)
    except _Unusual:
        return _copy(value, [], set(), what)


def lossless_copy_object(value: object, *, event_type: str | None = None) -> JsonObject:
    """``lossless_copy`` of a JSON object (every event's data); errors name ``<event_type> data``."""
    if type(value) is dict:
        try:
            return _fast_dict(cast("dict[str, object]", value), 0)
        except _Unusual:
            pass
    what = f"{event_type} data" if event_type else "data"
    copied = _copy(cast(object, value), [], set(), what)
    if not isinstance(copied, dict):
        raise LosslessJsonError(f"{what} must be a JSON object, not {type(copied).__name__}")
    return copied


class _Unusual(Exception):
    """Raised by the fast path on anything it does not accept outright; the checked path decides."""


# The fast path copies the common case (plain JSON, shallow) without tracking a path or a cycle set;
# on anything unusual — a refusal, a non-finite or negative-zero float, deep nesting — it gives up
# and the checked path below redoes the copy and names the offending JSON path. Refusals are rare,
# so the double walk costs nothing in practice.


def _fast_copy(value: object) -> JsonValue:
    t = type(value)
    if t is dict:
        return _fast_dict(value, 0)  # type: ignore[arg-type]
    if t is list:
        return _fast_list(value, 0)  # type: ignore[arg-type]
    if t is str or value is None or t is bool:
        return value  # type: ignore[return-value]
    raise _Unusual


def _fast_dict(d: dict[str, object], depth: int) -> JsonObject:
    if depth > _FAST_DEPTH:
        raise _Unusual
    out: JsonObject = {}
    for k, v in d.items():
        if type(k) is not str:
            raise _Unusual
        t = type(v)
        if t is str:
            out[k] = v  # type: ignore[assignment]
        elif t is int:
            if -MAX_EXACT_INT <= v <= MAX_EXACT_INT:  # type: ignore[operator]
                out[k] = v  # type: ignore[assignment]
            else:
                raise _Unusual
        elif t is dict:
            out[k] = _fast_dict(v, depth + 1)  # type: ignore[arg-type]
        elif v is None or t is bool:
            out[k] = v  # type: ignore[assignment]
        elif t is list:
            out[k] = _fast_list(v, depth + 1)  # type: ignore[arg-type]
        elif t is float:
            # ``v - v`` is NaN for NaN and ±inf; zero is fine unless its sign bit is set.
            if v - v != 0.0 or (v == 0.0 and copysign(1.0, v) < 0):  # type: ignore[operator, arg-type]
                raise _Unusual
            out[k] = v  # type: ignore[assignment]
        else:
            raise _Unusual
    return out


def _fast_list(items: list[object], depth: int) -> list[JsonValue]:
    if depth > _FAST_DEPTH:
        raise _Unusual
    out: list[JsonValue] = []
    append = out.append
    for v in items:
        t = type(v)
        if t is str:
            append(v)  # type: ignore[arg-type]
        elif t is int:
            if -MAX_EXACT_INT <= v <= MAX_EXACT_INT:  # type: ignore[operator]
                append(v)  # type: ignore[arg-type]
            else:
                raise _Unusual
        elif t is dict:
            append(_fast_dict(v, depth + 1))  # type: ignore[arg-type]
        elif v is None or t is bool:
            append(v)  # type: ignore[arg-type]
        elif t is list:
            append(_fast_list(v, depth + 1))  # type: ignore[arg-type]
        elif t is float:
            if v - v != 0.0 or (v == 0.0 and copysign(1.0, v) < 0):  # type: ignore[operator, arg-type]
                raise _Unusual
            append(v)  # type: ignore[arg-type]
        else:
            raise _Unusual
    return out


def _copy(value: object, path: list[str | int], active: set[int], what: str) -> JsonValue:
    # The checked path: exact types first, the JSON path kept for the error message.
    if len(path) > _MAX_DEPTH:
        raise LosslessJsonError(
            f"{what} is not lossless JSON at {_path(path)}: nested deeper than {_MAX_DEPTH} levels"
        )
    t = type(value)
    if t is str or value is None or t is bool:
        return value  # type: ignore[return-value]
    if t is int:
        if -MAX_EXACT_INT <= value <= MAX_EXACT_INT:  # type: ignore[operator]
            return value  # type: ignore[return-value]
        raise LosslessJsonError(
            f"{what} is not lossless JSON at {_path(path)}: integer {value} is beyond ±2^53"
        )
    if t is float:
        f: float = value  # type: ignore[assignment]
        if not math.isfinite(f):
            raise LosslessJsonError(
                f"{what} is not lossless JSON at {_path(path)}: {f} is not finite"
            )
        if f == 0.0 and math.copysign(1.0, f) < 0:
            raise LosslessJsonError(f"{what} is not lossless JSON at {_path(path)}: -0.0")
        return f
    if t is dict:
        key = id(value)
        if key in active:
            raise LosslessJsonError(f"{what} is not lossless JSON at {_path(path)}: a cycle")
        active.add(key)
        out: dict[str, JsonValue] = {}
        for k, v in cast("dict[object, object]", value).items():
            if type(k) is not str:
                raise LosslessJsonError(
                    f"{what} is not lossless JSON at {_path(path)}: key {k!r} is not a string"
                )
            path.append(k)
            out[k] = _copy(v, path, active, what)
            path.pop()
        active.discard(key)
        return out
    if t is list:
        key = id(value)
        if key in active:
            raise LosslessJsonError(f"{what} is not lossless JSON at {_path(path)}: a cycle")
        active.add(key)
        items: list[JsonValue] = []
        for i, v in enumerate(cast("list[object]", value)):
            path.append(i)
            items.append(_copy(v, path, active, what))
            path.pop()
        active.discard(key)
        return items
    raise LosslessJsonError(
        f"{what} is not lossless JSON at {_path(path)}: {t.__name__} values are not allowed "
        "(use dict, list, str, int, finite float, bool or None)"
    )


def _refuse_constant(name: str) -> JsonValue:
    raise LosslessJsonError(f"{name} is not JSON (non-finite numbers are not lossless)")


def loads(text: str) -> JsonValue:
    """Parse JSON text strictly: ``NaN``/``Infinity`` (which ``json.loads`` accepts) raise
    ``LosslessJsonError``; malformed text raises ``json.JSONDecodeError``."""
    return json.loads(text, parse_constant=_refuse_constant)


def dumps(value: JsonValue) -> str:
    """Compact, deterministic-enough JSON text (insertion order kept; no NaN)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def canonical(value: JsonValue) -> str:
    """Canonical JSON (sorted keys) for equality and hashing."""
    return json.dumps(
        value, ensure_ascii=False, allow_nan=False, separators=(",", ":"), sort_keys=True
    )


# --- envelope <-> JSON ----------------------------------------------------------------------------


def surface_op_to_json(op: SurfaceOp) -> JsonValue:
    if isinstance(op, ReplaceOp):
        return {"op": "replace", "start": op.start, "end": op.end}
    return "append"


def surface_op_from_json(value: JsonValue) -> SurfaceOp:
    if value == "append":
        return "append"
    if isinstance(value, dict) and value.get("op") == "replace":
        start, end = value.get("start"), value.get("end")
        if isinstance(start, int) and isinstance(end, int):
            return ReplaceOp(start=start, end=end)
    raise ValueError(f"invalid surfaceOp {value!r}")


def event_to_json(event: SessionEvent) -> JsonObject:
    out: JsonObject = {"type": event.type, "seq": event.seq, "time": event.time, "data": event.data}
    if event.ignorable:
        out["ignorable"] = True
    if event.surface_op is not None:
        out["surfaceOp"] = surface_op_to_json(event.surface_op)
    if event.source_event_seqs is not None:
        out["sourceEventSeqs"] = list(event.source_event_seqs)
    return out


def encode_event(event: SessionEvent) -> str:
    return dumps(event_to_json(event))


def _shape(message: str) -> SessionFormatError:
    return SessionFormatError(message, code=JOURNAL_BAD_SHAPE)


def _time_ok(value: int) -> bool:
    return 0 <= value <= MAX_TIME_MS


def event_from_json(
    obj: JsonValue, known_types: Collection[str] | None, *, where: str
) -> SessionEvent | None:
    """Build an event from its JSON; ``None`` means an unknown but ignorable event (skip it)."""
    if not isinstance(obj, dict):
        raise _shape(f"{where}: an event must be a JSON object, not {_json_kind(obj)}")
    etype, seq, time, data = obj.get("type"), obj.get("seq"), obj.get("time"), obj.get("data")
    if not isinstance(etype, str) or not etype:
        raise _shape(f"{where}: event has no type")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise _shape(f"{where}: event {etype!r} has no valid seq")
    if not isinstance(time, int) or isinstance(time, bool):
        raise _shape(f"{where}: event {etype!r} (seq {seq}) has no valid time")
    if not _time_ok(time):
        raise SessionFormatError(
            f"{where}: event {etype!r} (seq {seq}) has time {time}, outside 0..{MAX_TIME_MS} "
            "(epoch milliseconds from 1970 to the end of 9999)",
            code=JOURNAL_OUT_OF_RANGE,
        )
    if not isinstance(data, dict):
        raise _shape(f"{where}: event {etype!r} (seq {seq}) has no data object")
    flag = obj.get("ignorable")
    if flag is not None and not isinstance(flag, bool):
        raise _shape(f"{where}: event {etype!r} (seq {seq}): ignorable must be true or false")
    ignorable = flag is True
    if known_types is not None and etype not in known_types:
        if ignorable:
            return None
        raise SessionFormatError(
            f"{where}: unknown event type {etype!r} at seq {seq} is not marked ignorable; this "
            "journal was written by a newer or different version — upgrade dsh-kernel to read it",
            code="UNKNOWN_EVENT_TYPE",
        )
    try:
        op_json = obj.get("surfaceOp")
        op = surface_op_from_json(op_json) if op_json is not None else None
    except ValueError as exc:
        raise _shape(f"{where}: event {etype!r} (seq {seq}): {exc}") from exc
    src = obj.get("sourceEventSeqs")
    seqs: tuple[int, ...] | None = None
    if src is not None:
        if not isinstance(src, list) or not all(
            isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= _MAX_INT32 for s in src
        ):
            raise _shape(f"{where}: event {etype!r} (seq {seq}): bad sourceEventSeqs")
        seqs = tuple(s for s in src if isinstance(s, int))
    return SessionEvent(
        type=etype,
        seq=seq,
        time=time,
        data=data,
        ignorable=ignorable,
        surface_op=op,
        source_event_seqs=seqs,
    )


def _json_kind(value: JsonValue) -> str:
    match value:
        case dict():
            return "an object"
        case list():
            return "an array"
        case str():
            return "a string"
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case _:
            return "null"


def decode_event(
    line: str, known_types: Collection[str] | None, *, where: str = "journal"
) -> SessionEvent | None:
    try:
        obj = loads(line)
    except json.JSONDecodeError as exc:
        raise SessionFormatError(
            f"{where}: not valid JSON ({exc.msg} at column {exc.colno})"
        ) from exc
    except LosslessJsonError as exc:
        raise SessionFormatError(f"{where}: {exc}") from exc
    except RecursionError as exc:
        raise SessionFormatError(
            f"{where}: nested too deeply to read (the log allows {MAX_DEPTH} levels)",
            code=JOURNAL_TOO_DEEP,
        ) from exc
    return event_from_json(obj, known_types, where=where)


def header_to_json(header: SessionHeader) -> JsonObject:
    out: JsonObject = {
        "type": "session",
        "version": header.version,
        "id": header.id,
        "createdAt": header.created_at,
    }
    if header.cwd is not None:
        out["cwd"] = header.cwd
    if header.notebook is not None:
        out["notebook"] = header.notebook
    if header.parent_session is not None:
        out["parentSession"] = header.parent_session
    if header.parent_kind is not None:
        out["parentKind"] = header.parent_kind
    if header.seed_length is not None:
        out["seedLength"] = header.seed_length
    if header.user is not None:
        out["user"] = header.user
    if header.ai_policy is not None:
        out["aiPolicy"] = header.ai_policy
    return out


def header_from_json(obj: JsonValue, *, where: str = "journal header") -> SessionHeader:
    if not isinstance(obj, dict) or obj.get("type") != "session":
        raise _shape(f"{where}: the first line is not a session header")
    version = obj.get("version")
    if version != SESSION_FORMAT_VERSION:
        raise SessionFormatError(
            f"{where}: session format version {version!r} is not supported (this dsh-kernel reads "
            f"version {SESSION_FORMAT_VERSION}); upgrade dsh-kernel if the journal is newer",
            code="SESSION_FORMAT_UNSUPPORTED",
        )
    sid, created = obj.get("id"), obj.get("createdAt")
    if not isinstance(sid, str) or not sid:
        raise _shape(f"{where}: header has no id")
    if type(created) is not int:
        raise _shape(f"{where}: header has no integer createdAt")
    if not _time_ok(created):
        raise SessionFormatError(
            f"{where}: header createdAt {created} is outside 0..{MAX_TIME_MS} (epoch milliseconds "
            "from 1970 to the end of 9999)",
            code=JOURNAL_OUT_OF_RANGE,
        )

    def opt_str(k: str) -> str | None:
        v = obj.get(k)
        if v is None or isinstance(v, str):
            return v
        raise _shape(f"{where}: header field {k} must be a string, not {_json_kind(v)}")

    seed = obj.get("seedLength")
    if seed is not None and (type(seed) is not int or not 0 <= seed <= _MAX_INT32):
        raise SessionFormatError(
            f"{where}: header seedLength {seed!r} is not a count of events (0..{_MAX_INT32})",
            code=JOURNAL_OUT_OF_RANGE if type(seed) is int else JOURNAL_BAD_SHAPE,
        )
    return SessionHeader(
        id=sid,
        created_at=created,
        cwd=opt_str("cwd"),
        notebook=opt_str("notebook"),
        parent_session=opt_str("parentSession"),
        parent_kind=opt_str("parentKind"),
        seed_length=seed,
        user=opt_str("user"),
        ai_policy=opt_str("aiPolicy"),
    )
