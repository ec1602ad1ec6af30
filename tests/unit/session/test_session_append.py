"""``Session.append`` validation: types and fields, lossless JSON, surface ops, sourceEventSeqs, replace.

Every refusal must leave the log exactly as it was (events, surface, observers not called).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable

import pytest

from dsh_kernel.errors import LosslessJsonError, SessionError, SurfaceError, UsageError
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.session.events import ReplaceOp, SessionEvent
from dsh_kernel.session.log import Session
from dsh_kernel.testing import FakeClock
from tests.unit.session.scripts import (
    assistant_message,
    chunk,
    new_session,
    tool_result_data,
    user_message,
)


def snapshot(s: Session) -> tuple[list[SessionEvent], tuple[int, ...], int, int | None, int | None]:
    return (list(s.events), s.surface, s.replace_generation, s.open_turn, s.open_step)


def refused(
    s: Session, exc: type[Exception], call: Callable[[], object], match: str | None = None
) -> None:
    """``call`` raises ``exc`` and changes nothing (no event, no surface change, no notification)."""
    seen: list[SessionEvent] = []
    dispose = s.subscribe(seen.append)
    before = snapshot(s)
    with pytest.raises(exc, match=match):
        call()
    dispose()
    assert snapshot(s) == before
    assert seen == []


def tool_session() -> tuple[Session, int, int]:
    """An open step with one answered call; returns (session, call seq, result seq)."""
    s = new_session()
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    s.append("user/message", user_message(), surface_op="append")
    s.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": assistant_message("", ("c1",))},
        surface_op="append",
        source_event_seqs=[],
    )
    call = s.append(
        "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "e", "arguments": "{}"}
    )
    result = s.append(
        "tool/result",
        tool_result_data(1, 1, "c1"),
        surface_op="append",
        source_event_seqs=[call.seq],
    )
    return s, call.seq, result.seq


# --- envelope ----------------------------------------------------------------------------------------


def test_append_assigns_contiguous_seq_and_clock_time() -> None:
    clock = FakeClock(start=100)
    s = Session(header=new_session().header, clock=clock)
    a = s.append("session/title", {"title": "a", "source": "user"})
    b = s.append("session/title", {"title": "b", "source": "user"})
    assert (a.seq, a.time, b.seq, b.time) == (0, 101, 1, 102)
    assert list(s.events) == [a, b]
    assert len(s) == 2


def test_default_clock_is_epoch_milliseconds() -> None:
    s = Session(header=new_session().header)
    before = math.floor(datetime.datetime.now(datetime.UTC).timestamp() * 1000)
    ev = s.append("session/title", {"title": "a", "source": "user"})
    after = math.ceil(datetime.datetime.now(datetime.UTC).timestamp() * 1000)
    assert before <= ev.time <= after


def test_the_log_keeps_a_copy_of_the_data() -> None:
    s = new_session()
    data: JsonObject = {"title": "a", "source": "user", "extra": {"nested": [1, 2]}}
    ev = s.append("session/title", data)
    data["title"] = "changed"
    data["extra"]["nested"].append(3)  # type: ignore[index, union-attr]
    assert ev.data == {"title": "a", "source": "user", "extra": {"nested": [1, 2]}}
    assert s.events[0].data["title"] == "a"


def test_events_are_frozen() -> None:
    ev = new_session().append("session/title", {"title": "a", "source": "user"})
    with pytest.raises(AttributeError):
        ev.seq = 5  # type: ignore[misc]


@pytest.mark.parametrize("bad_type", ["", 5, None])
def test_type_must_be_a_non_empty_string(bad_type: object) -> None:
    s = new_session()
    refused(s, UsageError, lambda: s.append(bad_type, {}))  # type: ignore[arg-type]


@pytest.mark.parametrize("bad_data", [[1], "x", None, (("a", 1),)])
def test_data_must_be_a_dict(bad_data: object) -> None:
    s = new_session()
    refused(s, UsageError, lambda: s.append("session/title", bad_data), "must be a dict")  # type: ignore[arg-type]


def test_known_types_need_their_required_fields() -> None:
    s = new_session()
    refused(s, UsageError, lambda: s.append("turn/end", {"turn": 1}), "reason")
    refused(s, UsageError, lambda: s.append("tool/call", {"turn": 1}), "step, callId, name")


def test_unknown_types_are_accepted_as_plugin_events() -> None:
    s = new_session()
    ev = s.append("plugin/thing", {"anything": [1, "two"]}, ignorable=True)
    assert (ev.type, ev.ignorable) == ("plugin/thing", True)


# --- lossless JSON -----------------------------------------------------------------------------------


class Opaque:
    pass


def cyclic() -> JsonObject:
    d: JsonObject = {"a": []}
    d["a"].append(d)  # type: ignore[union-attr]
    return d


@pytest.mark.parametrize(
    ("value", "path", "words"),
    [
        (math.nan, "$.v", "not finite"),
        (math.inf, "$.v", "not finite"),
        (-math.inf, "$.v", "not finite"),
        (-0.0, "$.v", "-0.0"),
        ((1, 2), "$.v", "tuple"),
        ({1, 2}, "$.v", "set"),
        (b"x", "$.v", "bytes"),
        (datetime.datetime(2026, 1, 1), "$.v", "datetime"),
        (Opaque(), "$.v", "Opaque"),
        ({1: "x"}, "$.v", "key 1 is not a string"),
        (2**53 + 1, "$.v", "beyond"),
        (-(2**53) - 1, "$.v", "beyond"),
        ({"deep": [0, {"x": math.nan}]}, "$.v.deep[1].x", "not finite"),
        ([[0.5, -0.0]], "$.v[0][1]", "-0.0"),
    ],
)
def test_lossless_rejections_name_the_path(value: object, path: str, words: str) -> None:
    s = new_session()
    data = {"title": "t", "source": "user", "v": value}
    with pytest.raises(LosslessJsonError) as info:
        s.append("session/title", data)
    assert f"at {path}:" in str(info.value)
    assert words in str(info.value)
    assert "session/title data" in str(info.value)
    assert info.value.code == "NOT_LOSSLESS_JSON"
    refused(s, LosslessJsonError, lambda: s.append("session/title", data))


def test_cycle_is_rejected_with_its_path() -> None:
    s = new_session()
    with pytest.raises(LosslessJsonError, match=r"at \$\.a\[0\]: a cycle"):
        s.append("plugin/x", cyclic())
    assert len(s) == 0


def test_too_deep_nesting_is_rejected() -> None:
    value: JsonObject = {}
    cur = value
    for _ in range(300):
        nxt: JsonObject = {}
        cur["n"] = nxt
        cur = nxt
    s = new_session()
    refused(s, LosslessJsonError, lambda: s.append("plugin/x", value), "deeper than")


def test_edge_values_that_are_lossless_are_kept() -> None:
    data: JsonObject = {
        "zero": 0.0,
        "tiny": 5e-324,
        "big": 1.7976931348623157e308,
        "max_int": 2**53,
        "min_int": -(2**53),
        "flag": False,
        "none": None,
        "unicode": "\u2028 \U0001f600",
        "empty": {"list": [], "obj": {}},
    }
    ev = new_session().append("plugin/x", data)
    assert ev.data == data
    assert math.copysign(1.0, ev.data["zero"]) == 1.0  # type: ignore[arg-type]


# --- surface ops -------------------------------------------------------------------------------------


def test_surface_types_need_a_surface_op() -> None:
    s = new_session()
    refused(s, SurfaceError, lambda: s.append("user/message", user_message()), "needs a surface_op")


def test_surface_op_is_forbidden_on_other_types() -> None:
    s = new_session()
    refused(
        s,
        SurfaceError,
        lambda: s.append("session/title", {"title": "t", "source": "u"}, surface_op="append"),
        "forbidden",
    )


def test_surface_op_must_be_append_or_replace() -> None:
    s = new_session()
    refused(
        s,
        SurfaceError,
        lambda: s.append("user/message", user_message(), surface_op="replace"),  # type: ignore[arg-type]
    )


def test_append_pushes_onto_the_surface() -> None:
    s = new_session()
    a = s.append("user/message", user_message("a"), surface_op="append")
    s.append("session/title", {"title": "t", "source": "u"})
    b = s.append("user/message", user_message("b"), surface_op="append")
    assert s.surface == (a.seq, b.seq)


# --- sourceEventSeqs ---------------------------------------------------------------------------------


def test_source_seqs_must_cite_distinct_earlier_seqs() -> None:
    s = new_session()
    s.append("user/message", user_message(), surface_op="append")
    s.append("session/title", {"title": "t", "source": "u"})

    def cite(seqs: list[int]) -> Callable[[], object]:
        return lambda: s.append(
            "user/message", user_message(), surface_op="append", source_event_seqs=seqs
        )

    refused(s, SurfaceError, cite([2]), "not an earlier seq")  # its own seq
    refused(s, SurfaceError, cite([7]), "not an earlier seq")
    refused(s, SurfaceError, cite([-1]), "not an earlier seq")
    refused(s, SurfaceError, cite([0, 0]), "distinct")
    refused(s, SurfaceError, cite([]), "non-empty")
    refused(s, SurfaceError, cite([1.0]), "not an earlier seq")  # type: ignore[list-item]
    ev = cite([1, 0])()
    assert isinstance(ev, SessionEvent)
    assert ev.source_event_seqs == (1, 0)


def test_an_empty_source_list_means_an_empty_stream_on_assistant_messages_only() -> None:
    s = new_session()
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    ev = s.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": assistant_message("hi")},
        surface_op="append",
        source_event_seqs=[],
    )
    assert ev.source_event_seqs == ()
    absent = s.append("user/message", user_message(), surface_op="append", source_event_seqs=None)
    assert absent.source_event_seqs is None


def test_source_seqs_are_forbidden_on_non_surface_events() -> None:
    s = new_session()
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    refused(
        s,
        SurfaceError,
        lambda: s.append(
            "assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk()}, source_event_seqs=[0]
        ),
        "sourceEventSeqs is forbidden",
    )


# --- replace -----------------------------------------------------------------------------------------


def compaction_session() -> tuple[Session, list[int]]:
    s = new_session()
    seqs = [
        s.append("user/message", user_message(str(i)), surface_op="append").seq for i in range(4)
    ]
    return s, seqs


def test_replace_splices_a_range_and_counts_generations() -> None:
    s, (a, b, c, d) = compaction_session()
    summary = s.append(
        "user/message",
        user_message("summary"),
        surface_op=ReplaceOp(start=b, end=c),
        source_event_seqs=[b, c],
    )
    assert s.surface == (a, summary.seq, d)
    assert s.replace_generation == 1
    texts = [m.text() for m in s.derive_messages()]
    assert texts == ["0", "summary", "3"]


def test_replace_range_must_be_current_nodes_in_order() -> None:
    s, (a, b, c, _) = compaction_session()

    def replace(start: int, end: int, seqs: list[int]) -> Callable[[], object]:
        return lambda: s.append(
            "user/message",
            user_message(),
            surface_op=ReplaceOp(start=start, end=end),
            source_event_seqs=seqs,
        )

    refused(s, SurfaceError, replace(c, a, [a, b, c]), "not a range")
    refused(s, SurfaceError, replace(a, 99, [a]), "not a range")
    s.append(
        "user/message",
        user_message("s"),
        surface_op=ReplaceOp(start=b, end=b),
        source_event_seqs=[b],
    )
    refused(s, SurfaceError, replace(b, b, [b]), "not a range")  # b is shadowed now


def test_replace_must_cite_every_shadowed_node() -> None:
    s, (a, b, c, _) = compaction_session()
    for seqs in ([a, c], None):
        refused(
            s,
            SurfaceError,
            lambda seqs=seqs: s.append(
                "user/message",
                user_message(),
                surface_op=ReplaceOp(start=a, end=c),
                source_event_seqs=seqs,
            ),
            "cite every node",
        )
    assert b not in (a, c)


def test_tool_result_replacement_may_change_only_the_nested_content() -> None:
    s, _, result = tool_session()
    old = s.events[result].data

    def pruned(
        *,
        block: JsonObject | None = None,
        msg: JsonObject | None = None,
        top: JsonObject | None = None,
    ) -> JsonObject:
        """The old data with new nested content, plus the given changes at each level."""
        old_msg = old["message"]
        assert isinstance(old_msg, dict)
        old_block = old_msg["content"][0]  # type: ignore[index]
        assert isinstance(old_block, dict)
        new_block: JsonObject = {
            **old_block,
            "content": [{"type": "text", "text": "[pruned]"}],
            **(block or {}),
        }
        new_msg: JsonObject = {**old_msg, "content": [new_block], **(msg or {})}
        return {**old, "message": new_msg, **(top or {})}

    def replace(data: JsonObject) -> Callable[[], object]:
        return lambda: s.append(
            "tool/result",
            data,
            surface_op=ReplaceOp(start=result, end=result),
            source_event_seqs=[result],
        )

    for changed in (
        pruned(block={"toolCallId": "other"}),
        pruned(block={"isError": True}),
        pruned(msg={"id": "other-id"}),
        pruned(msg={"source": {"kind": "tool", "callId": "other"}}),
        pruned(top={"meta": {"x": 1}}),
        pruned(top={"step": 2}),
    ):
        refused(s, SurfaceError, replace(changed), "only the nested content")
    two_blocks = pruned()
    two_blocks["message"]["content"] = two_blocks["message"]["content"] * 2  # type: ignore[index]
    refused(s, SurfaceError, replace(two_blocks), "only the nested content")

    ok = s.events[-1].seq + 1
    ev = replace(pruned())()
    assert isinstance(ev, SessionEvent)
    assert ev.seq == ok
    assert s.surface[-1] == ok
    assert s.derive_messages()[-1].content[0].content[0].text == "[pruned]"  # type: ignore[union-attr]


def test_tool_result_replacement_shadows_exactly_one_tool_result() -> None:
    s, _, result = tool_session()
    user = s.surface[0]
    refused(
        s,
        SurfaceError,
        lambda: s.append(
            "tool/result",
            tool_result_data(1, 1, "c1"),
            surface_op=ReplaceOp(start=user, end=result),
            source_event_seqs=list(s.surface),
        ),
        "exactly one tool/result",
    )


def test_every_refusal_is_a_session_error() -> None:
    assert issubclass(SurfaceError, SessionError)
    assert issubclass(LosslessJsonError, SessionError)
