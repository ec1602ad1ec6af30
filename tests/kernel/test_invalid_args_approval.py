"""Malformed tool arguments are refused before anyone is asked, in a real ``dsh`` kernel.

The model (the loopback server) calls ``python`` with arguments that are not JSON and with JSON that
does not match the parameters, under the default ``ask`` policy. No approval card is shown (no
``approval/asked`` in the log), the model is told ``INVALID_ARGS``, and the same holds for a
headless client; a valid call in the same message is still asked. The same for a notebook function
offered with &`fn`: everything its signature says (a ``dict[str, int]`` value, a pydantic
``Field(gt=0)``) is checked before anyone is asked, and the schema the model is sent says it.
"""

from __future__ import annotations

from typing import Any

from tests.kernel.conftest import Live
from tests.support import scenarios as sc
from tests.support.frontend import RunningCell
from tests.support.sse_server import Reply, sse_reply
from tests.support.wire_transcripts import chat_chunk, sse

NOT_JSON = '{"code": "x_not_json = 1",, }'
WRONG_SHAPE = '{"code": 42, "cmd": "x_wrong_shape = 1"}'


def raw_calls(*arguments: str, name: str = "python") -> Reply:
    """One assistant message calling ``name`` once per raw (unparsed) ``arguments`` string."""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    for i, raw in enumerate(arguments):
        function = {"name": name, "arguments": raw}
        deltas.append(
            {
                "tool_calls": [
                    {"index": i, "id": f"call_{i}", "type": "function", "function": function}
                ]
            }
        )
    chunks = [chat_chunk(d) for d in deltas] + [chat_chunk({}, finish_reason="tool_calls")]
    return sse_reply(sse(*chunks, "[DONE]"))


def turn_events(live: Live) -> list[dict[str, Any]]:
    events = live.fe.events()
    start = max(i for i, e in enumerate(events) if e["type"] == "turn/start")
    return events[start:]


def settle(live: Live, cell: RunningCell) -> int:
    """Run the cell to its end, denying every approval it shows; returns how many were shown."""
    denied = 0
    while not cell.done:
        cell.pump(lambda: cell.done or bool(live.fe.buttons("Deny")), what="the end", timeout=60)
        buttons = live.fe.buttons("Deny")
        if buttons:
            live.fe.click(buttons[0])
            denied += 1
            cell.pump(lambda: cell.done or not live.fe.buttons("Deny"), what="the click taken")
    return denied


def results_by_call(events: list[dict[str, Any]]) -> dict[str, str]:
    return {
        e["data"]["message"]["source"]["callId"]: e["data"]["error"]["code"]
        for e in events
        if e["type"] == "tool/result" and "error" in e["data"]
    }


def this_turn_tool_messages(live: Live) -> dict[str, str]:
    """The tool results the second request sends after its last assistant message, by call id."""
    messages = live.server.requests[1].json["messages"]
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    return {
        m["tool_call_id"]: str(m["content"]) for m in messages[last + 1 :] if m["role"] == "tool"
    }


def test_only_a_valid_call_is_shown_for_approval(live: Live) -> None:
    live.server.script(
        raw_calls(NOT_JSON, WRONG_SHAPE, '{"code": "x_valid = 1"}'), sc.text("Noted.")
    )
    cell = live.fe.submit("Set three variables.")
    shown = settle(live, cell)
    ex = cell.finish()
    assert ex.status == "ok", ex.content
    events = turn_events(live)
    asked = [e["data"] for e in events if e["type"] == "approval/asked"]
    assert [a.get("callId") for a in asked] == ["call_2"], asked
    assert shown == 1
    assert results_by_call(events) == {
        "call_0": "INVALID_ARGS",
        "call_1": "INVALID_ARGS",
        "call_2": "DENIED",
    }
    by_id = this_turn_tool_messages(live)
    assert "not valid JSON" in by_id["call_0"]
    assert "$.code: expected string" in by_id["call_1"] and "'cmd'" in by_id["call_1"]
    assert "x_not_json" not in live.fe.python("print(sorted(globals()))")


def test_headless_malformed_calls_are_invalid_args_not_denied(live: Live) -> None:
    live.server.script(raw_calls(NOT_JSON, WRONG_SHAPE), sc.text("I will fix the arguments."))
    live.fe.render_views = False
    try:
        cell = live.fe.submit("Set two variables, headless.")
        shown = settle(live, cell)
        ex = cell.finish()
    finally:
        live.fe.render_views = True
    assert ex.status == "ok", ex.content
    assert shown == 0
    events = turn_events(live)
    assert [e for e in events if e["type"] == "approval/asked"] == []
    assert results_by_call(events) == {"call_0": "INVALID_ARGS", "call_1": "INVALID_ARGS"}
    tool_texts = list(this_turn_tool_messages(live).values())
    assert len(tool_texts) == 2 and all("invalid arguments" in t for t in tool_texts), tool_texts
    assert not any("denied" in t or "approval" in t for t in tool_texts), tool_texts


SCALE = """
from typing import Annotated
from pydantic import Field

def scale(counts: dict[str, int], factor: Annotated[int, Field(gt=0)] = 1) -> int:
    \"\"\"Scale the counts by a positive factor.\"\"\"
    global scaled
    scaled = sum(counts.values()) * factor
    return scaled
"""


def test_a_notebook_functions_signature_is_checked_before_anyone_is_asked(live: Live) -> None:
    live.fe.python(SCALE)
    live.server.script(
        raw_calls(
            '{"counts": {"a": "many"}}',
            '{"counts": {"a": 1}, "factor": 0}',
            '{"counts": {"a": 1}, "factor": 2}',
            name="scale",
        ),
        sc.text("Noted."),
    )
    cell = live.fe.submit("Scale my counts with &`scale`.")
    shown = settle(live, cell)
    ex = cell.finish()
    assert ex.status == "ok", ex.content
    (offered,) = [
        t["function"]
        for t in live.server.requests[0].json["tools"]
        if t["function"]["name"] == "scale"
    ]
    counts = offered["parameters"]["properties"]["counts"]
    assert counts["additionalProperties"] == {"type": "integer"}  # the value type is sent
    events = turn_events(live)
    asked = [e["data"].get("callId") for e in events if e["type"] == "approval/asked"]
    assert asked == ["call_2"] and shown == 1
    assert results_by_call(events) == {
        "call_0": "INVALID_ARGS",
        "call_1": "INVALID_ARGS",
        "call_2": "DENIED",
    }
    by_id = this_turn_tool_messages(live)
    assert "$.counts.a: expected integer, got string" in by_id["call_0"]
    assert "$.factor: Input should be greater than 0" in by_id["call_1"]
    assert "scaled" not in live.fe.python("print(sorted(globals()))")
