"""Lossless JSON (fast and checked paths agree with an independent oracle) and the JSONL event codec."""

from __future__ import annotations

import json
import math
import random
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_kernel.errors import LosslessJsonError, SessionFormatError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.session.codec import (
    MAX_TIME_MS,
    decode_event,
    dumps,
    encode_event,
    event_from_json,
    event_to_json,
    header_from_json,
    header_to_json,
    loads,
    lossless_copy,
    lossless_copy_object,
)
from dsh_kernel.session.events import (
    EVENT_CATALOG,
    ReplaceOp,
    SessionEvent,
    SessionHeader,
    new_event,
)
from tests.unit.session.scripts import scripted_log

KNOWN = frozenset(EVENT_CATALOG)

# --- lossless JSON -----------------------------------------------------------------------------------


def is_lossless(value: object, depth: int = 0, active: frozenset[int] = frozenset()) -> bool:
    """The oracle: what SPINE §0 allows, written independently of the codec."""
    if depth > 256:
        return False
    if value is None or isinstance(value, bool) or type(value) is str:
        return True
    if type(value) is int:
        return abs(cast(int, value)) <= 2**53
    if type(value) is float:
        f = cast(float, value)
        return math.isfinite(f) and not (f == 0.0 and math.copysign(1.0, f) < 0)
    if type(value) in (list, dict):
        if id(value) in active:
            return False
        inner = active | {id(value)}
        if type(value) is list:
            return all(is_lossless(v, depth + 1, inner) for v in cast(list[object], value))
        d = cast(dict[object, object], value)
        return all(type(k) is str for k in d) and all(
            is_lossless(v, depth + 1, inner) for v in d.values()
        )
    return False


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=5),
    st.integers(min_value=-(2**54), max_value=2**54),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 2**53, -(2**53), 2**53 + 1]),
)
odd = st.one_of(
    st.tuples(st.integers()),
    st.frozensets(st.integers(), max_size=2),
    st.binary(max_size=3),
)
values = st.recursive(
    st.one_of(scalars, odd),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=3), inner, max_size=4),
        st.dictionaries(st.integers(0, 3), inner, min_size=1, max_size=2),
    ),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(values)
def test_lossless_copy_agrees_with_the_oracle(value: object) -> None:
    if is_lossless(value):
        copied = lossless_copy(value)
        assert copied == value
        assert json.loads(dumps(copied)) == value
        # A deep copy: no container is shared with the input.
        if isinstance(value, dict | list):
            assert copied is not value
    else:
        with pytest.raises(LosslessJsonError, match=r"at \$"):
            lossless_copy(value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=3), values, max_size=4))
def test_lossless_copy_object_agrees_with_the_oracle(value: dict[str, object]) -> None:
    if is_lossless(value):
        assert lossless_copy_object(value, event_type="x/y") == value
    else:
        with pytest.raises(LosslessJsonError, match=r"x/y data is not lossless JSON at \$"):
            lossless_copy_object(value, event_type="x/y")


def test_deep_but_legal_nesting_is_copied() -> None:
    # Past the fast path's depth, the checked path takes over and still accepts it.
    value: JsonValue = "leaf"
    for i in range(200):
        value = {"k": value} if i % 2 else [value]
    assert lossless_copy(value) == value


def test_a_shared_subtree_is_not_a_cycle() -> None:
    shared: JsonObject = {"x": 1}
    value: JsonObject = {"a": shared, "b": [shared, shared]}
    copied = lossless_copy(value)
    assert copied == value


def test_lossless_copy_object_refuses_a_non_object() -> None:
    with pytest.raises(LosslessJsonError, match="must be a JSON object"):
        lossless_copy_object([1, 2])


def test_loads_refuses_non_finite_constants() -> None:
    for text in ('{"x": NaN}', "[Infinity]", "-Infinity"):
        with pytest.raises(LosslessJsonError):
            loads(text)
    with pytest.raises(json.JSONDecodeError):
        loads('{"x": ')


# --- new_event ---------------------------------------------------------------------------------------


def test_new_event_equals_the_keyword_constructor() -> None:
    op = ReplaceOp(start=1, end=2)
    fast = new_event("tool/result", 3, 4, {"a": 1}, True, op, (1, 2))
    slow = SessionEvent(
        type="tool/result",
        seq=3,
        time=4,
        data={"a": 1},
        ignorable=True,
        surface_op=op,
        source_event_seqs=(1, 2),
    )
    assert type(fast) is SessionEvent
    assert fast == slow
    assert repr(fast) == repr(slow)
    with pytest.raises(AttributeError):
        fast.seq = 9  # type: ignore[misc]
    assert new_event("a/b", 0, 1, {}) == SessionEvent(type="a/b", seq=0, time=1, data={})


# --- the event codec ---------------------------------------------------------------------------------


def test_every_scripted_event_round_trips() -> None:
    for seed in range(10):
        rng = random.Random(seed)
        for ev in scripted_log(rng.randrange, turns=3, resumes=1):
            line = encode_event(ev)
            assert "\n" not in line
            assert decode_event(line, KNOWN) == ev


@settings(max_examples=200, deadline=None)
@given(
    data=st.dictionaries(
        st.text(max_size=4),
        st.recursive(
            st.one_of(
                st.none(),
                st.booleans(),
                st.text(),
                st.integers(-(2**53), 2**53),
                st.floats(allow_nan=False, allow_infinity=False).filter(
                    lambda f: not (f == 0 and math.copysign(1, f) < 0)
                ),
            ),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=3), inner, max_size=3)
            ),
            max_leaves=10,
        ),
        max_size=5,
    ),
    seq=st.integers(0, 10**6),
    time=st.integers(0, MAX_TIME_MS),
    op=st.sampled_from([None, "append", ReplaceOp(start=1, end=4)]),
    sources=st.one_of(st.none(), st.lists(st.integers(0, 100), max_size=3).map(tuple)),
    ignorable=st.booleans(),
)
def test_arbitrary_events_round_trip(
    data: JsonObject,
    seq: int,
    time: int,
    op: object,
    sources: tuple[int, ...] | None,
    ignorable: bool,
) -> None:
    ev = SessionEvent(
        type="plugin/x",
        seq=seq,
        time=time,
        data=data,
        ignorable=ignorable,
        surface_op=op,  # type: ignore[arg-type]
        source_event_seqs=sources,
    )
    assert decode_event(encode_event(ev), None) == ev


def test_event_json_shape() -> None:
    ev = SessionEvent(
        type="tool/result",
        seq=7,
        time=8,
        data={"x": 1},
        surface_op=ReplaceOp(start=2, end=3),
        source_event_seqs=(2, 3),
    )
    assert event_to_json(ev) == {
        "type": "tool/result",
        "seq": 7,
        "time": 8,
        "data": {"x": 1},
        "surfaceOp": {"op": "replace", "start": 2, "end": 3},
        "sourceEventSeqs": [2, 3],
    }
    plain = SessionEvent(type="turn/start", seq=0, time=1, data={"turn": 1})
    assert encode_event(plain) == '{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}'
    flagged = SessionEvent(type="x/y", seq=0, time=1, data={}, ignorable=True)
    assert event_to_json(flagged)["ignorable"] is True


@pytest.mark.parametrize(
    ("obj", "words"),
    [
        ([], "must be a JSON object"),
        ({"seq": 0, "time": 1, "data": {}}, "no type"),
        ({"type": "x/y", "seq": -1, "time": 1, "data": {}}, "no valid seq"),
        ({"type": "x/y", "seq": True, "time": 1, "data": {}}, "no valid seq"),
        ({"type": "x/y", "seq": 0, "time": "1", "data": {}}, "no valid time"),
        ({"type": "x/y", "seq": 0, "time": 1, "data": []}, "no data object"),
        ({"type": "x/y", "seq": 0, "time": 1, "data": {}, "surfaceOp": "prepend"}, "surfaceOp"),
        (
            {"type": "x/y", "seq": 0, "time": 1, "data": {}, "sourceEventSeqs": ["1"]},
            "sourceEventSeqs",
        ),
    ],
)
def test_malformed_envelopes_are_refused(obj: JsonValue, words: str) -> None:
    with pytest.raises(SessionFormatError, match=words) as info:
        event_from_json(obj, None, where="j:3")
    assert str(info.value).startswith("j:3: ")


def test_unknown_types_need_the_ignorable_flag() -> None:
    line = '{"type":"future/thing","seq":4,"time":1,"data":{}}'
    with pytest.raises(SessionFormatError) as info:
        decode_event(line, KNOWN, where="j:6")
    assert info.value.code == "UNKNOWN_EVENT_TYPE"
    assert "'future/thing'" in str(info.value)
    assert "seq 4" in str(info.value)
    ignorable = '{"type":"future/thing","seq":4,"time":1,"data":{},"ignorable":true}'
    assert decode_event(ignorable, KNOWN) is None
    assert decode_event(ignorable, None) is not None


def test_decode_refuses_invalid_json_and_nan() -> None:
    with pytest.raises(SessionFormatError, match="not valid JSON"):
        decode_event('{"type":', KNOWN)
    with pytest.raises(SessionFormatError, match=r"not finite|non-finite"):
        decode_event('{"type":"x/y","seq":0,"time":1,"data":{"v":NaN}}', None)


# --- the header --------------------------------------------------------------------------------------


def test_header_round_trips() -> None:
    full = SessionHeader(
        id="s1", created_at=5, cwd="/w", notebook="n.ipynb", parent_session="s0", seed_length=3
    )
    assert header_from_json(header_to_json(full)) == full
    bare = SessionHeader(id="s2", created_at=6)
    assert header_to_json(bare) == {"type": "session", "version": 0, "id": "s2", "createdAt": 6}
    assert header_from_json(loads(dumps(header_to_json(bare)))) == bare


def test_header_refusals() -> None:
    with pytest.raises(SessionFormatError, match="not a session header"):
        header_from_json({"type": "turn/start"})
    with pytest.raises(SessionFormatError) as info:
        header_from_json({"type": "session", "version": 1, "id": "s", "createdAt": 1})
    assert info.value.code == "SESSION_FORMAT_UNSUPPORTED"
    assert "upgrade" in str(info.value)
    with pytest.raises(SessionFormatError, match="id"):
        header_from_json({"type": "session", "version": 0, "id": "", "createdAt": 1})
    with pytest.raises(SessionFormatError, match="createdAt"):
        header_from_json({"type": "session", "version": 0, "id": "s", "createdAt": True})
