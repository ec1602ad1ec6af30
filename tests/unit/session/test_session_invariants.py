"""The structural checker: each rule broken once, prefix-closure, and speed."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_kernel.errors import InvariantError
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.session.check.invariants import (
    SessionInvariantError,
    Violation,
    assert_invariants,
    check_invariants,
)
from dsh_kernel.session.events import ReplaceOp, SessionEvent, SurfaceOp
from tests.unit.session.scripts import (
    assistant_message,
    chunk,
    scripted_log,
    tool_result_data,
    user_message,
)


class Log:
    """Hand-built events (no Session validation), seq assigned in order."""

    def __init__(self) -> None:
        self.events: list[SessionEvent] = []

    def add(
        self,
        type: str,
        data: JsonObject,
        *,
        op: SurfaceOp | None = None,
        seqs: tuple[int, ...] | None = None,
        seq: int | None = None,
    ) -> int:
        s = len(self.events) if seq is None else seq
        self.events.append(
            SessionEvent(type=type, seq=s, time=1, data=data, surface_op=op, source_event_seqs=seqs)
        )
        return s

    def turn(self, turn: int = 1) -> Log:
        self.add("turn/start", {"turn": turn})
        return self

    def step(self, turn: int = 1, step: int = 1) -> Log:
        self.add("step/start", {"turn": turn, "step": step})
        return self

    def end_step(self, turn: int = 1, step: int = 1) -> Log:
        self.add("step/end", {"turn": turn, "step": step})
        return self

    def end_turn(self, turn: int = 1, kind: str = "completed") -> Log:
        self.add("turn/end", {"turn": turn, "reason": {"kind": kind}})
        return self

    def message(self, *calls: str, turn: int = 1, step: int = 1, interrupted: bool = False) -> int:
        data: JsonObject = {
            "turn": turn,
            "step": step,
            "message": assistant_message("x", tuple(calls)),
        }
        if interrupted:
            data["interrupted"] = True
        return self.add("assistant/message", data, op="append", seqs=())

    def call(self, cid: str, turn: int = 1, step: int = 1) -> int:
        return self.add(
            "tool/call", {"turn": turn, "step": step, "callId": cid, "name": "e", "arguments": "{}"}
        )

    def result(self, cid: str, turn: int = 1, step: int = 1, *, code: str | None = None) -> int:
        return self.add(
            "tool/result", tool_result_data(turn, step, cid, error_code=code), op="append"
        )

    def answered(self, *cids: str) -> Log:
        for c in cids:
            self.call(c)
            self.result(c)
        return self


def rules(events: list[SessionEvent]) -> list[str]:
    return [v.rule for v in check_invariants(events)]


def one(events: list[SessionEvent]) -> Violation:
    found = check_invariants(events)
    assert len(found) == 1, found
    return found[0]


def test_a_typical_log_is_valid() -> None:
    log = Log().turn().step()
    log.add("user/message", user_message(), op="append")
    log.add("request/header", {"header": {}, "reason": "initial"})
    log.add("request/context", {"provider": "p", "model": "m"})
    log.add("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk()})
    log.message("c1", "c2")
    log.call("c1")
    log.add("approval/asked", {"id": "a", "toolName": "e"})
    log.add("approval/decided", {"id": "a", "outcome": "allowed-once"})
    log.add("todo/write", {"todos": []})
    log.result("c1")
    log.answered("c2")
    log.end_step().step(step=2)
    log.message(step=2)
    log.end_step(step=2).end_turn()
    log.add("session/title", {"title": "t", "source": "user"})
    log.turn(2).end_turn(2, "blocked")
    assert check_invariants(log.events) == []
    assert_invariants(log.events)


def test_seq_contiguous() -> None:
    log = Log().turn()
    log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}}, seq=5)
    v = one(log.events)
    assert (v.rule, v.seq, v.type) == ("seq-contiguous", 5, "turn/end")


def test_seq_must_start_at_zero() -> None:
    log = Log()
    log.add("session/title", {"title": "t", "source": "user"}, seq=1)
    assert rules(log.events) == ["seq-contiguous"]


def test_turn_number_from_one() -> None:
    assert rules(Log().turn(2).events) == ["turn-number"]


def test_turn_number_one_at_a_time() -> None:
    assert rules(Log().turn(1).end_turn(1).turn(3).events) == ["turn-number"]


def test_turn_overlap() -> None:
    log = Log().turn(1).turn(2)
    v = one(log.events)
    assert (v.rule, v.seq) == ("turn-overlap", 1)


def test_turn_end_mismatch() -> None:
    assert rules(Log().turn(1).end_turn(2).events) == ["turn-end-mismatch"]
    assert rules(Log().end_turn(1).events) == ["turn-end-mismatch"]


def test_turn_end_reason() -> None:
    log = Log().turn()
    log.add("turn/end", {"turn": 1, "reason": "completed"})
    assert rules(log.events) == ["turn-end-reason"]


def test_step_open_at_turn_end() -> None:
    v = one(Log().turn().step().end_turn().events)
    assert (v.rule, v.type) == ("step-open-at-turn-end", "turn/end")


def test_step_start_outside_turn() -> None:
    assert rules(Log().step().events) == ["step-start-mismatch"]


def test_step_start_naming_another_turn() -> None:
    assert rules(Log().turn(1).step(turn=2).events) == ["step-start-mismatch"]


def test_step_overlap() -> None:
    assert rules(Log().turn().step(step=1).step(step=2).events) == ["step-overlap"]


def test_step_number_from_one() -> None:
    assert rules(Log().turn().step(step=2).events) == ["step-number"]


def test_step_number_one_at_a_time() -> None:
    log = Log().turn().step(step=1).end_step(step=1).step(step=3)
    assert rules(log.events) == ["step-number"]


def test_steps_restart_in_each_turn() -> None:
    log = Log().turn(1).step(1, 1).end_step(1, 1).end_turn(1).turn(2).step(2, 1)
    assert rules(log.events) == []


@pytest.mark.parametrize("kind", ["chunk", "message", "call", "result", "step-end"])
def test_open_step_naming(kind: str) -> None:
    log = Log().turn().step()
    match kind:
        case "chunk":
            log.add("assistant/chunk", {"turn": 1, "step": 2, "chunk": chunk()})
        case "message":
            log.message(turn=2)
        case "call":
            log.call("c1", step=3)
        case "result":
            log.result("c1", turn=1, step=2, code="TOOL_NOT_STARTED")
        case _:
            log.add("step/end", {"turn": 1, "step": 2})
    v = one(log.events)
    assert v.rule == "open-step"
    assert v.seq == 2


def test_chunk_outside_a_step() -> None:
    log = Log().turn()
    log.add("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk()})
    assert rules(log.events) == ["open-step"]


def test_result_without_call() -> None:
    log = Log().turn().step()
    log.message("c1")
    log.result("c1")
    v = one(log.events)
    assert (v.rule, v.type) == ("result-without-call", "tool/result")


def test_result_needs_the_call_in_the_same_step() -> None:
    log = Log().turn().step()
    log.message("c1")
    log.call("c1")
    log.end_step().step(step=2)
    log.message("c1", step=2)
    log.result("c1", step=2)
    log.end_step(step=2)
    # Step 1 left c1 unanswered; step 2 answers a call started in step 1.
    assert rules(log.events) == ["pairing-unanswered", "result-without-call"]


def test_tool_not_started_result_needs_no_call() -> None:
    log = Log().turn().step()
    log.message("c1")
    log.result("c1", code="TOOL_NOT_STARTED")
    log.end_step().end_turn()
    assert rules(log.events) == []


def test_not_started_exemption_needs_an_error_result() -> None:
    log = Log().turn().step()
    log.message("c1")
    data = tool_result_data(1, 1, "c1")
    data["error"] = {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}  # isError missing
    log.add("tool/result", data, op="append")
    assert rules(log.events) == ["result-without-call"]


@pytest.mark.parametrize(
    ("type", "data"),
    [
        ("request/header", {"header": {}, "reason": "initial"}),
        ("request/context", {"provider": "p", "model": "m"}),
        ("todo/write", {"todos": []}),
        ("approval/asked", {"id": "a", "toolName": "e"}),
        ("approval/decided", {"id": "a", "outcome": "rejected"}),
        ("llm/retry", {"retryId": "r", "turn": 1, "step": 1, "retry": 1}),
        ("llm/retry-started", {"retryId": "r", "turn": 1, "step": 1, "retry": 1}),
    ],
)
def test_in_turn_events_outside_a_turn(type: str, data: JsonObject) -> None:
    log = Log()
    log.add(type, data)
    v = one(log.events)
    assert (v.rule, v.type, v.seq) == ("in-turn", type, 0)
    inside = Log().turn()
    inside.add(type, data)
    assert rules(inside.events) == []


def test_retry_naming_another_turn() -> None:
    log = Log().turn(1)
    log.add("llm/retry-started", {"retryId": "r", "turn": 2, "step": 1, "retry": 1})
    assert rules(log.events) == ["in-turn"]


def test_replacement_needs_only_an_open_turn() -> None:
    log = Log().turn().step()
    log.message("c1")
    first = log.result("c1", code="TOOL_NOT_STARTED")
    log.end_step().end_turn()
    log.turn(2)  # open turn, no step: a replacement is fine here
    replace = ReplaceOp(start=first, end=first)
    log.add("tool/result", tool_result_data(1, 1, "c1"), op=replace, seqs=(first,))
    log.end_turn(2)
    assert rules(log.events) == []
    log.add("tool/result", tool_result_data(1, 1, "c1"), op=replace, seqs=(first,))
    assert rules(log.events) == ["replace-outside-turn"]


def test_pairing_order() -> None:
    log = Log().turn().step()
    log.message("c1", "c2")
    log.call("c1")
    log.call("c2")
    log.result("c2")
    log.result("c1")
    log.end_step()
    v = one(log.events)
    assert (v.rule, v.seq) == ("pairing-order", 5)
    assert "'c2'" in v.message
    assert "'c1'" in v.message


def test_pairing_duplicate() -> None:
    log = Log().turn().step()
    log.message("c1")
    log.call("c1")
    log.result("c1")
    log.result("c1", code="TOOL_NOT_STARTED")
    assert rules(log.events) == ["pairing-duplicate"]


def test_pairing_orphan() -> None:
    log = Log().turn().step()
    log.message("c1")
    log.answered("c1")
    log.call("zz")
    log.result("zz")
    assert rules(log.events) == ["pairing-orphan"]


def test_pairing_unanswered_at_step_end() -> None:
    log = Log().turn().step()
    m = log.message("c1", "c2")
    log.answered("c1")
    log.end_step()
    v = one(log.events)
    assert (v.rule, v.type) == ("pairing-unanswered", "step/end")
    assert "'c2'" in v.message
    assert f"seq {m}" in v.message


def test_pairing_unanswered_at_turn_end_with_the_step_open() -> None:
    log = Log().turn().step()
    log.message("c1")
    log.end_turn()
    assert rules(log.events) == ["step-open-at-turn-end", "pairing-unanswered"]


def test_unanswered_calls_of_a_still_open_step_are_not_yet_a_violation() -> None:
    log = Log().turn().step()
    log.message("c1", "c2")
    log.answered("c1")
    assert rules(log.events) == []


def test_interrupted_messages_owe_nothing() -> None:
    log = Log().turn().step()
    log.message("c1", interrupted=True)
    log.end_step().end_turn(kind="aborted")
    assert rules(log.events) == []


def test_end_seed_in_open_turn() -> None:
    log = Log().turn()
    log.add("session/end-seed", {})
    v = one(log.events)
    assert (v.rule, v.type) == ("end-seed-in-open-turn", "session/end-seed")


def test_end_seed_after_a_repaired_turn_is_fine() -> None:
    log = Log().turn().step().end_step().end_turn(kind="interrupted")
    log.add("session/end-seed", {})
    log.turn(2).end_turn(2)
    assert rules(log.events) == []


@pytest.mark.parametrize(
    ("type", "data"),
    [
        ("turn/start", {"turn": "1"}),
        ("step/start", {"turn": 1}),
        ("tool/call", {"turn": 1, "step": 1, "name": "e", "arguments": "{}"}),
        ("assistant/message", {"turn": 1, "step": 1, "message": {"content": "x"}}),
        ("tool/result", {"turn": 1, "step": 1, "message": {"content": []}}),
    ],
)
def test_malformed(type: str, data: JsonObject) -> None:
    log = Log().turn().step(step=1) if type != "turn/start" else Log()
    op: SurfaceOp | None = "append" if type in ("assistant/message", "tool/result") else None
    log.add(type, data, op=op)
    assert "malformed" in rules(log.events)


def test_assert_invariants_lists_every_violation() -> None:
    log = Log().turn(2).step(2, 3)
    with pytest.raises(InvariantError) as info:
        assert_invariants(log.events)
    assert isinstance(info.value, SessionInvariantError)
    assert [v.rule for v in info.value.violations] == ["turn-number", "step-number"]
    text = str(info.value)
    assert "seq 0 turn/start [turn-number]" in text
    assert "seq 1 step/start [step-number]" in text
    assert info.value.code == "INVARIANT"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_scripted_logs_and_their_prefixes_are_valid(data: st.DataObject) -> None:
    log = scripted_log(lambda n: data.draw(st.integers(0, n - 1)), turns=3, resumes=1)
    for cut in range(len(log) + 1):
        assert check_invariants(log[:cut]) == []


def test_checker_is_linear() -> None:
    # A long log with long steps: any per-event rescan of the log or the step would take minutes.
    log = Log()
    for turn in range(1, 201):
        log.turn(turn).step(turn)
        for _ in range(200):
            log.add("assistant/chunk", {"turn": turn, "step": 1, "chunk": chunk()})
        calls = [f"c{turn}-{i}" for i in range(50)]
        log.message(*calls, turn=turn)
        for c in calls:
            log.call(c, turn=turn)
            log.result(c, turn=turn)
        log.end_step(turn).end_turn(turn)
    assert len(log.events) > 60_000
    t0 = time.perf_counter()
    assert check_invariants(log.events) == []
    elapsed = time.perf_counter() - t0
    assert elapsed < 2.0, f"{len(log.events)} events took {elapsed:.2f}s"
