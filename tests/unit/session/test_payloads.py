"""The event vocabulary (``dsh_kernel.session.payloads``): one payload ``TypedDict`` per event type,
from which the catalog is derived; ``payload_of`` narrows ``data`` by the tag."""

from __future__ import annotations

import pytest

from dsh_kernel.errors import UsageError
from dsh_kernel.session import payloads
from dsh_kernel.session.check import payload as payload_check
from dsh_kernel.session.events import EVENT_CATALOG, SessionEvent
from tests.unit.session.scripts import new_session


def test_every_event_type_has_one_payload_and_the_catalog_is_derived_from_it() -> None:
    assert list(EVENT_CATALOG) == list(payloads.PAYLOADS)
    assert set(payloads.PAYLOADS) == set(payloads.EventType.__args__)
    for t, spec in EVENT_CATALOG.items():
        cls = payloads.PAYLOADS[t]
        assert spec.required + spec.optional == tuple(cls.__annotations__)
        assert set(spec.required) == cls.__required_keys__
        assert spec.summary and spec.summary == " ".join((cls.__doc__ or "").split())
    assert EVENT_CATALOG["tool/call"].required == ("turn", "step", "callId", "name", "arguments")
    assert EVENT_CATALOG["tool/call"].optional == ("synthetic", "origin")


def test_a_payload_built_with_its_constructor_is_accepted_by_the_log() -> None:
    session = new_session()
    session.append("turn/start", payloads.TurnStart(turn=1))
    call = payloads.ToolCall(turn=1, step=1, callId="c1", name="python", arguments="{}")
    ev = session.append("tool/call", call)
    assert ev.data == {"turn": 1, "step": 1, "callId": "c1", "name": "python", "arguments": "{}"}


def test_a_tool_call_may_name_its_origin_as_an_object() -> None:
    session = new_session()
    session.append("turn/start", payloads.TurnStart(turn=1))
    call = payloads.ToolCall(
        turn=1,
        step=1,
        callId="c1",
        name="time__now",
        arguments="{}",
        origin={"mcp": "time", "tool": "now"},
    )
    assert session.append("tool/call", call).data["origin"] == {"mcp": "time", "tool": "now"}
    plain = {"turn": 1, "step": 1, "callId": "c2", "name": "add", "arguments": "{}"}
    assert payload_check.problem("tool/call", plain) is None  # a log written before it is read
    wrong = {**plain, "origin": "time"}
    assert payload_check.problem("tool/call", wrong) == (
        "tool/call data field 'origin' must be an object, not 'time'"
    )


def test_payload_of_narrows_by_tag_and_refuses_another_type() -> None:
    ev = SessionEvent(type="turn/start", seq=0, time=0, data={"turn": 3})
    data = payloads.payload_of(ev, "turn/start")
    assert data["turn"] == 3
    with pytest.raises(UsageError, match="'turn/start' event read as 'turn/end'"):
        payloads.payload_of(ev, "turn/end")


def test_the_log_refuses_a_payload_of_the_wrong_kinds_naming_the_key() -> None:
    session = new_session()
    with pytest.raises(
        UsageError, match="turn/start data field 'turn' must be an integer, not True"
    ):
        session.append("turn/start", {"turn": True})
    with pytest.raises(UsageError, match=r"missing data field.*callId, name"):
        session.append("tool/call", {"turn": 1, "step": 1, "arguments": "{}"})
    with pytest.raises(UsageError, match="'title' must be a string"):
        session.append("session/title", {"title": 3, "source": {"kind": "user"}})
    assert len(session.events) == 0  # nothing was appended


def test_problem_checks_kinds_and_optional_keys_only_when_present() -> None:
    ok = {"turn": 1, "step": 1, "message": {}}
    assert payload_check.problem("tool/result", ok) is None
    assert payload_check.problem("tool/result", {**ok, "meta": [1]}) is not None
    assert payload_check.problem("tool/result", {**ok, "durationMs": 5}) is None
    assert payload_check.problem("future/type", {"anything": 1}) is None
    # the hot path checks required keys only
    chunk = {"turn": "1", "step": 1, "chunk": {}}
    assert payload_check.problem("assistant/chunk", chunk, kinds=False) is None
    assert payload_check.problem("assistant/chunk", chunk) is not None


def test_a_nested_payload_is_checked_key_by_key_too() -> None:
    ok = {"turn": 1, "step": 1, "message": {}}
    assert payload_check.problem("tool/result", {**ok, "error": {"name": "E", "code": "C"}}) is None
    assert (
        payload_check.problem("tool/result", {**ok, "error": {"name": "E"}})
        == "tool/result event is missing data field(s): error.code"
    )
    assert (
        payload_check.problem("tool/result", {**ok, "error": {"name": "E", "code": 3}})
        == "tool/result data field 'error.code' must be a string, not 3"
    )
    session = new_session()
    session.append("turn/start", {"turn": 1})
    with pytest.raises(UsageError, match=r"missing data field.*error\.name"):
        session.append("tool/result", {**ok, "error": {"code": "C"}}, surface_op="append")


def test_a_turn_end_reason_is_checked_as_its_tagged_member() -> None:
    def problem(reason: object) -> str | None:
        return payload_check.problem("turn/end", {"turn": 1, "reason": reason})

    for reason in (
        {"kind": "completed"},
        {"kind": "aborted", "reason": {"kind": "user"}},
        {"kind": "aborted"},  # a hand-made log may leave the cause out, as before
        {"kind": "blocked", "message": "no"},
        {"kind": "error", "error": {"message": "m", "code": "C", "status": 500}},
        {"kind": "error"},
        {"kind": "max-steps", "limit": 3},
        {"kind": "max-tokens"},
        {"kind": "interrupted"},
    ):
        assert problem(reason) is None, reason
    assert problem("completed") == "turn/end data field 'reason' must be an object, not 'completed'"
    assert problem({"kind": "finished"}) == (
        "turn/end data field 'reason.kind' must be one of completed, aborted, blocked, error, "
        "max-steps, max-tokens, interrupted, not 'finished'"
    )
    assert problem({"limit": 3}) is not None  # no kind at all
    assert problem({"kind": "max-steps"}) == "turn/end event is missing data field(s): reason.limit"
    assert problem({"kind": "max-steps", "limit": "3"}) == (
        "turn/end data field 'reason.limit' must be an integer, not '3'"
    )
    assert problem({"kind": "error", "error": {"code": "C"}}) == (
        "turn/end event is missing data field(s): reason.error.message"
    )
    assert problem({"kind": "blocked", "message": 1}) is not None
