"""Crash repair says exactly what happened (issue 12, item 8): the text a cut stream showed is kept as
an interrupted answer, and a call that waited for an approval click never ran."""

from __future__ import annotations

from typing import Any

from dsh_kernel.llm.codec import message_from_json
from dsh_kernel.session.check.invariants import TOOL_NOT_STARTED, check_invariants
from dsh_kernel.session.derive import project_event
from dsh_kernel.session.log import Session
from dsh_kernel.session.repair import TOOL_OUTCOME_UNKNOWN, closers, repair
from tests.unit.session.scripts import assistant_message, new_session, user_message


def _stream(s: Session, *pieces: str, finish: str | None = None) -> list[int]:
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    s.append("user/message", user_message(), surface_op="append")
    s.append("request/context", {"provider": "deepseek", "model": "deepseek-flash"})
    seqs = [
        s.append(
            "assistant/chunk",
            {"turn": 1, "step": 1, "chunk": {"type": "reasoning-delta", "index": 0, "text": "hm"}},
        ).seq
    ]
    for p in pieces:
        chunk = {"type": "text-delta", "index": 1, "text": p}
        seqs.append(s.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk}).seq)
    call = {
        "type": "tool-call-delta",
        "index": 2,
        "id": "c1",
        "name": "python",
        "argumentsDelta": "{",
    }
    seqs.append(s.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": call}).seq)
    if finish is not None:
        reason = {"kind": finish}
        if finish == "error":
            reason["failure"] = {"code": "SERVER", "message": "boom"}  # type: ignore[assignment]
        chunk = {"type": "finish", "reason": reason}
        seqs.append(s.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk}).seq)
    return seqs


def test_the_text_of_a_cut_stream_is_kept_as_an_interrupted_answer() -> None:
    s = new_session()
    seqs = _stream(s, "The answer ", "so far")
    out = closers(list(s.events))
    assert [p.type for p in out] == ["assistant/message", "step/end", "turn/end"]
    kept = out[0]
    assert kept.data["interrupted"] is True and kept.surface_op == "append"
    assert kept.source_event_seqs == tuple(seqs)
    message = message_from_json(kept.data["message"])  # type: ignore[arg-type]
    # text and reasoning as a cancel keeps them; the half tool call is dropped whole
    assert [b.type for b in message.content] == ["reasoning", "text"]
    assert message.text() == "The answer so far"
    assert message.source.kind == "model" and message.source.model == "deepseek-flash"  # type: ignore[union-attr]
    repaired = repair(list(s.events))
    assert check_invariants(repaired) == [] and repair(repaired) == repaired
    assert repair(list(s.events)) == repaired  # deterministic
    # what the user saw goes back to the model on resume
    sent = [project_event(e) for e in repaired]
    assert any(m is not None and m.text() == "The answer so far" for m in sent)
    # a failed stream keeps nothing (the loop drops it too), nor does blank text
    s = new_session()
    _stream(s, "partial", finish="error")
    assert [p.type for p in closers(list(s.events))] == ["step/end", "turn/end"]
    s = new_session()
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    blank = {"type": "text-delta", "index": 0, "text": "   "}
    s.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": blank})
    assert [p.type for p in closers(list(s.events))] == ["step/end", "turn/end"]


def _waiting_call(s: Session, *, decided: str | None) -> int:
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    s.append("user/message", user_message(), surface_op="append")
    c = s.append(
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}},
    )
    s.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": assistant_message("running it", ("c1",))},
        surface_op="append",
        source_event_seqs=[c.seq],
    )
    call = s.append(
        "tool/call",
        {"turn": 1, "step": 1, "callId": "c1", "name": "python", "arguments": "{}"},
    )
    s.append("approval/asked", {"id": "ap1", "toolName": "python", "callId": "c1"})
    if decided is not None:
        s.append("approval/decided", {"id": "ap1", "outcome": decided})
    return call.seq


def test_a_call_waiting_for_its_approval_never_ran() -> None:
    s = new_session()
    call_seq = _waiting_call(s, decided=None)
    result, step_end, turn_end = closers(list(s.events))
    assert result.data["error"] == {"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED}
    message: Any = result.data["message"]
    text = message["content"][0]["content"][0]["text"]
    assert "waiting for the user's approval" in text and "never ran" in text
    assert "may have" not in text and "unknown" not in text
    assert result.source_event_seqs == (call_seq,)
    assert (step_end.type, turn_end.type) == ("step/end", "turn/end")
    assert check_invariants(repair(list(s.events))) == []
    # once the click allowed it, the body may have run before the crash
    s = new_session()
    _waiting_call(s, decided="allowed-once")
    result = closers(list(s.events))[0]
    assert result.data["error"]["code"] == TOOL_OUTCOME_UNKNOWN  # type: ignore[index]
