"""Crash repair: the closers of SPINE §6.3, and repair of every prefix of a valid log."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_kernel.session.check.invariants import check_invariants
from dsh_kernel.session.codec import encode_event
from dsh_kernel.session.events import ReplaceOp, SessionEvent
from dsh_kernel.session.log import Session
from dsh_kernel.session.repair import (
    TOOL_NOT_STARTED,
    TOOL_OUTCOME_UNKNOWN,
    PendingEvent,
    closers,
    repair,
)
from tests.unit.session.scripts import (
    assistant_message,
    chunk,
    new_session,
    scripted_log,
    tool_result_data,
    user_message,
)


def assert_every_prefix_repairs(log: list[SessionEvent]) -> None:
    assert check_invariants(log) == []
    for cut in range(len(log) + 1):
        prefix = log[:cut]
        assert check_invariants(prefix) == [], f"prefix of {cut} events is not valid"
        repaired = repair(prefix)
        assert repaired[:cut] == prefix, "repair changed an event of the prefix"
        violations = check_invariants(repaired)
        assert violations == [], f"repair of the first {cut} events: {violations}"
        assert repair(repaired) == repaired, "a repaired log needs no more closers"
        # The repaired log seeds a Session (surface rules) and encodes as lossless JSON.
        session = new_session(repaired)
        assert len(session) == len(repaired)
        assert session.open_turn is None
        for ev in repaired[cut:]:
            encode_event(ev)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_prefix_of_a_scripted_log_repairs_to_a_valid_log(data: st.DataObject) -> None:
    log = scripted_log(lambda n: data.draw(st.integers(0, n - 1)), turns=3)
    assert_every_prefix_repairs(log)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_prefix_of_a_resumed_log_repairs_to_a_valid_log(data: st.DataObject) -> None:
    log = scripted_log(lambda n: data.draw(st.integers(0, n - 1)), turns=2, resumes=2)
    assert_every_prefix_repairs(log)


def test_many_seeded_scripts() -> None:
    # A wider sweep than hypothesis' budget, deterministic, cheap.
    for seed in range(40):
        rng = random.Random(seed)
        assert_every_prefix_repairs(scripted_log(rng.randrange, turns=4, resumes=seed % 3))


# --- hand-built logs ---------------------------------------------------------------------------------


def open_tool_session() -> tuple[Session, int]:
    """turn 1, step 1: an assistant message asking for c1, c2, c3; c1 answered, c2 started."""
    s = new_session()
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    s.append("user/message", user_message(), surface_op="append")
    c = s.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk()})
    s.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": assistant_message("go", ("c1", "c2", "c3"))},
        surface_op="append",
        source_event_seqs=[c.seq],
    )
    call1 = s.append(
        "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "echo", "arguments": "{}"}
    )
    s.append(
        "tool/result",
        tool_result_data(1, 1, "c1"),
        surface_op="append",
        source_event_seqs=[call1.seq],
    )
    call2 = s.append(
        "tool/call", {"turn": 1, "step": 1, "callId": "c2", "name": "echo", "arguments": "{}"}
    )
    return s, call2.seq


def open_tool_step() -> tuple[list[SessionEvent], int]:
    s, call2_seq = open_tool_session()
    return list(s.events), call2_seq


def test_closers_answer_unanswered_calls_in_model_order_then_close_step_and_turn() -> None:
    log, call2_seq = open_tool_step()
    out = closers(log)
    assert [p.type for p in out] == ["tool/result", "tool/result", "step/end", "turn/end"]
    unknown, not_started, step_end, turn_end = out

    assert unknown.surface_op == "append"
    assert unknown.source_event_seqs == (call2_seq,)
    assert unknown.data["error"] == {
        "name": "ToolOutcomeUnknownError",
        "code": TOOL_OUTCOME_UNKNOWN,
    }
    msg: Any = unknown.data["message"]  # decoded JSON, read as the test asserts it
    assert isinstance(msg, dict)
    assert msg["role"] == "user"
    assert msg["source"] == {"kind": "tool", "callId": "c2"}
    [block] = msg["content"]
    assert block["type"] == "tool-result"
    assert block["toolCallId"] == "c2"
    assert block["isError"] is True
    text = block["content"][0]["text"]
    assert text.startswith("Error: ")
    assert "read-only or idempotent" in text
    assert "verify" in text
    assert "ask the user" in text
    assert str(call2_seq) in text

    assert not_started.source_event_seqs is None
    assert not_started.data["error"] == {"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED}
    ns_block = not_started.data["message"]["content"][0]  # type: ignore[index]
    assert ns_block["toolCallId"] == "c3"
    assert "retry it if it is still needed" in ns_block["content"][0]["text"].lower()

    assert step_end == PendingEvent(type="step/end", data={"turn": 1, "step": 1})
    assert turn_end == PendingEvent(
        type="turn/end", data={"turn": 1, "reason": {"kind": "interrupted"}}
    )


def test_repair_continues_seq_and_reuses_the_last_time() -> None:
    log, _ = open_tool_step()
    repaired = repair(log)
    assert repaired[: len(log)] == log
    added = repaired[len(log) :]
    assert [e.seq for e in added] == list(range(len(log), len(log) + 4))
    assert {e.time for e in added} == {log[-1].time}
    assert check_invariants(repaired) == []


def test_repair_is_deterministic() -> None:
    log, _ = open_tool_step()
    assert repair(log) == repair(log)
    ids = [p.data["message"]["id"] for p in closers(log)[:2]]  # type: ignore[index]
    assert len(set(ids)) == 2


def test_open_turn_without_step_gets_only_turn_end() -> None:
    s = new_session()
    s.append("turn/start", {"turn": 1})
    assert closers(list(s.events)) == [
        PendingEvent(type="turn/end", data={"turn": 1, "reason": {"kind": "interrupted"}})
    ]


def test_open_turn_after_a_closed_step_needs_no_step_end() -> None:
    s = new_session()
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    s.append("step/end", {"turn": 1, "step": 1})
    assert [p.type for p in closers(list(s.events))] == ["turn/end"]


def test_balanced_and_empty_logs_need_nothing() -> None:
    assert closers([]) == []
    assert repair([]) == []
    s = new_session()
    s.append("turn/start", {"turn": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    s.append("session/title", {"title": "x", "source": "user"})
    assert closers(list(s.events)) == []
    assert repair(list(s.events)) == list(s.events)


def test_interrupted_message_calls_are_not_closed() -> None:
    # An interrupted message owes nothing (it is the visible prefix of an aborted stream).
    s = new_session()
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    s.append(
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "message": assistant_message("partial", ("c9",)),
            "interrupted": True,
        },
        surface_op="append",
    )
    assert [p.type for p in closers(list(s.events))] == ["step/end", "turn/end"]


def test_calls_of_an_earlier_closed_step_are_not_closed_again() -> None:
    log, _ = open_tool_step()
    s = new_session(repair(log))
    # The seeded session writes session/end-seed first, then a new turn opens and stays open.
    s.append("turn/start", {"turn": 2})
    s.append("step/start", {"turn": 2, "step": 1})
    out = closers(list(s.events))
    assert [p.type for p in out] == ["step/end", "turn/end"]
    assert out[-1].data["turn"] == 2
    assert check_invariants(repair(list(s.events))) == []


def test_a_pruned_result_does_not_count_as_an_answer() -> None:
    # A replacement is not a second execution: it neither answers nor re-opens a call.
    s, _ = open_tool_session()
    c1_result = next(e for e in s.events if e.type == "tool/result")
    pruned = tool_result_data(1, 1, "c1", "[pruned]")
    pruned["message"]["id"] = c1_result.data["message"]["id"]  # type: ignore[index]
    s.append(
        "tool/result",
        pruned,
        surface_op=ReplaceOp(start=c1_result.seq, end=c1_result.seq),
        source_event_seqs=[c1_result.seq],
    )
    out = closers(list(s.events))
    answered = [p.data["message"]["source"]["callId"] for p in out if p.type == "tool/result"]  # type: ignore[index]
    assert answered == ["c2", "c3"]
    assert check_invariants(repair(list(s.events))) == []


TIME = {"mcp": "time", "tool": "get_current_time"}
FILES = {"mcp": "files", "tool": "write_file"}


def test_a_closer_for_a_call_whose_tool_call_names_an_origin_carries_it_as_meta() -> None:
    # c1 running (an MCP tool), c2 waiting for its approval (an MCP tool), c3 never logged,
    # c4 the kernel's own tool running: only the logged calls that name an origin repeat it
    s = new_session()
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    s.append("user/message", user_message(), surface_op="append")
    s.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": assistant_message("go", ("c1", "c2", "c3", "c4"))},
        surface_op="append",
    )
    call = {"turn": 1, "step": 1, "arguments": "{}"}
    s.append("tool/call", {**call, "callId": "c1", "name": "time__now", "origin": TIME})
    s.append("tool/call", {**call, "callId": "c2", "name": "files__write", "origin": FILES})
    s.append("approval/asked", {"id": "ap2", "toolName": "files__write", "callId": "c2"})
    s.append("tool/call", {**call, "callId": "c4", "name": "echo"})
    log = list(s.events)
    out = [p for p in closers(log) if p.type == "tool/result"]
    codes = [p.data["error"]["code"] for p in out]  # type: ignore[index]
    assert codes == [TOOL_OUTCOME_UNKNOWN, TOOL_NOT_STARTED, TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN]
    assert [p.data.get("meta") for p in out] == [
        {"origin": TIME},
        {"origin": FILES},
        None,  # no tool/call: whose tool it was is not in the log
        None,  # the kernel's own
    ]
    repaired = repair(log)
    assert check_invariants(repaired) == []
    assert repair(repaired) == repaired
    assert repaired[len(log)].data["meta"] == {"origin": TIME}  # a copy, as it is logged
    assert new_session(repaired).events[len(log)].data["meta"] == {"origin": TIME}


def test_an_origin_of_an_earlier_step_is_not_taken_by_a_later_call_with_the_same_id() -> None:
    # some providers number call ids per message: call_0 again in step 2, now the kernel's own tool
    s = new_session()
    s.append("turn/start", {"turn": 1})
    for step, name, origin in ((1, "time__now", TIME), (2, "echo", None)):
        s.append("step/start", {"turn": 1, "step": step})
        s.append(
            "assistant/message",
            {"turn": 1, "step": step, "message": assistant_message("", ("call_0",))},
            surface_op="append",
        )
        data: dict[str, Any] = {
            "turn": 1,
            "step": step,
            "callId": "call_0",
            "name": name,
            "arguments": "{}",
        }
        if origin is not None:
            data["origin"] = origin
        c = s.append("tool/call", data)
        if step == 1:
            s.append(
                "tool/result",
                tool_result_data(1, 1, "call_0"),
                surface_op="append",
                source_event_seqs=[c.seq],
            )
            s.append("step/end", {"turn": 1, "step": 1})
    [result] = [p for p in closers(list(s.events)) if p.type == "tool/result"]
    assert result.data["error"]["code"] == TOOL_OUTCOME_UNKNOWN  # type: ignore[index]
    assert "meta" not in result.data
