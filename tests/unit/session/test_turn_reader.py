"""The one reading of a turn (issue 13, item 2): the turn reader below ``store/`` and ``views/`` reads
blocks with the canonical assembler, usage with the one usage reader, and a message's turn end;
the views' names are the reader's."""

from __future__ import annotations

from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.session.log import Session
from dsh_kernel.session.usage import usage_totals
from dsh_kernel.transcript.turn import fold_turn, turn_end
from tests.unit.session.scripts import assistant_message, new_session, user_message


def _chunk(c: JsonObject) -> JsonObject:
    return {"turn": 1, "step": 1, "chunk": c}


def _turn(s: Session, prompt: JsonObject) -> None:
    s.append("turn/start", {"turn": 1})
    s.append("user/message", prompt, surface_op="append")
    s.append("step/start", {"turn": 1, "step": 1})


def test_a_block_closed_by_block_end_is_the_assembler_s_the_first_close_wins() -> None:
    s = new_session()
    _turn(s, user_message())
    s.append("assistant/chunk", _chunk({"type": "text-delta", "index": 0, "text": "Hel"}))
    block_end = {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Hello."}}
    s.append("assistant/chunk", _chunk(block_end))
    # a misbehaving adapter keeps streaming into the closed block: the message has "Hello."
    s.append("assistant/chunk", _chunk({"type": "text-delta", "index": 0, "text": " junk"}))
    [item] = fold_turn(s.events).items
    assert item.type == "text" and item.text == "Hello." and item.done


def test_the_footer_reads_usage_as_agent_cost_does_the_last_usage_chunk_wins() -> None:
    s = new_session()
    _turn(s, user_message())
    for n in (10, 40):  # the stream grammar allows several usage chunks: the last one wins
        usage: JsonObject = {"inputTokens": n, "outputTokens": n // 10}
        s.append("assistant/chunk", _chunk({"type": "usage", "usage": usage}))
    s.append("assistant/chunk", _chunk({"type": "text-delta", "index": 0, "text": "ok"}))
    s.append("assistant/chunk", _chunk({"type": "finish", "reason": {"kind": "stop"}}))
    s.append(
        "assistant/message",
        {"turn": 1, "step": 1, "message": assistant_message("ok")},
        surface_op="append",
    )
    summary = fold_turn(s.events).usage
    totals = usage_totals(s.events)
    assert (summary.requests, summary.input_tokens, summary.output_tokens) == (1, 40, 4)
    assert (totals.requests, totals.input_tokens, totals.output_tokens) == (1, 40, 4)
    assert summary.context_tokens == 44


def test_turn_end_is_the_end_of_the_turn_that_carried_the_message() -> None:
    s = new_session()
    first, second = user_message("one"), user_message("two")
    _turn(s, first)
    s.append("turn/end", {"turn": 1, "reason": {"kind": "aborted"}})
    s.append("turn/start", {"turn": 2})
    s.append("user/message", second, surface_op="append")
    assert turn_end(s.events, str(first["id"])) == {"kind": "aborted"}
    assert turn_end(s.events, str(second["id"])) is None  # still running
    s.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    assert turn_end(s.events, str(second["id"])) == {"kind": "completed"}
    assert turn_end(s.events, "never-sent") is None


def test_the_views_names_are_the_reader_s() -> None:
    from dsh_kernel import views
    from dsh_kernel.transcript import model as turn_model
    from dsh_kernel.transcript import turn

    assert views.TurnFold is turn.TurnFold
    assert views.fold_turn is turn.fold_turn and views.find_turn is turn.find_turn
    assert views.turn_events is turn.turn_events
    assert views.TurnModel is turn_model.TurnModel


def test_a_call_recovered_from_text_is_a_card_marked_recovered_and_an_answer_is_not() -> None:
    s = new_session()
    _turn(s, user_message())
    raw = '{"name": "python", "arguments": {"code": "1"}}'
    delta: JsonObject = {"type": "tool-call-delta", "index": 0, "id": "call_r", "name": "python"}
    s.append("assistant/chunk", _chunk({**delta, "argumentsDelta": '{"code": "1"}'}))
    assert not fold_turn(s.events).cards[0].recovered  # nothing says so while it streams
    block: JsonObject = {"type": "tool-call", "id": "call_r", "name": "python", "arguments": "{}"}
    s.append(
        "assistant/chunk",
        _chunk({"type": "block-end", "index": 0, "block": {**block, "recoveredFrom": raw}}),
    )
    s.append(
        "assistant/chunk", _chunk({"type": "block-start", "index": 1, "blockType": "tool-call"})
    )
    native: JsonObject = {"type": "tool-call", "id": "call_n", "name": "sql", "arguments": "{}"}
    s.append("assistant/chunk", _chunk({"type": "block-end", "index": 1, "block": native}))
    recovered, other = fold_turn(s.events).cards
    assert (recovered.call_id, recovered.recovered) == ("call_r", True)
    assert (other.call_id, other.recovered) == ("call_n", False)
