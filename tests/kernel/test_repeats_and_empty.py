"""A small model's loops and silences, through a real kernel and the loopback server replaying
llama-cpp-python's wire (Qwen writes its calls as text; no usage chunk).

* After a tool step, an answer that is nothing (the model's first token end-of-turn) leaves the cell
  ``ok``: the tool's result stands on its card, one line says the model ended without a reply, the
  log ends the turn ``completed`` with ``note: no-reply`` and the ``turns`` view says so.
* The same call with the same result twice in a row: the third is not run (the namespace shows it),
  the model is told so in that call's result, the cell shows a notice; asked once more, the turn
  ends cleanly (``note: repeated-call``), the cell ``ok``, after four requests — not at the step bound.
* ``EMPTY_RESPONSE``'s advice follows what was empty: a 0-byte body blames the server, a model
  that chose to stop does not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.kernel.conftest import Live
from tests.support import wire_transcripts as wt
from tests.support.frontend import Frontend, html_text, last_turn, saved_bundle, sql_rows
from tests.support.sse_server import sse_reply


def qwen_python(code: str, n: int) -> str:
    """Qwen's ``python`` call written as text, as llama-cpp-python streams it."""
    call = json.dumps({"name": "python", "arguments": {"code": code}})
    return wt.local_stream(wt.tokens(call), rid=f"chatcmpl-{n:08d}-1111-2222-3333-444444444444")


@pytest.fixture
def auto_python(live: Live) -> Iterator[None]:
    """The ``python`` tool runs without asking, for this test only (the kernel is shared)."""
    assert live.fe.run("%agent approve auto python").status == "ok"
    yield
    assert live.fe.run("%agent approve ask python").status == "ok"


def session_id(fe: Frontend) -> str:
    return fe.python("print(get_ipython().kernel.host.agent.session.id)").strip()


@pytest.mark.usefixtures("auto_python")
def test_an_empty_answer_after_a_tool_step_is_no_red_cell(live: Live) -> None:
    live.fe.python("hits_empty = []")
    live.server.script(
        sse_reply(qwen_python("hits_empty.append(1); print(17 * 23)", 1)),
        sse_reply(wt.LOCAL_EMPTY_ANSWER),
    )
    ex = live.fe.run("Compute 17*23 with python.", timeout=120)
    assert ex.status == "ok", ex.content  # not EMPTY_RESPONSE
    assert len(live.server.requests) == 2  # the empty answer was not retried
    assert live.fe.python("print(len(hits_empty))").strip() == "1"
    saved = saved_bundle(ex)["text/markdown"]
    assert "The model ended without a reply; the tool results above stand" in saved
    assert "391" in html_text(saved)  # the result, on its card
    events = last_turn(live.fe.events())
    assert [e["data"]["reason"] for e in events if e["type"] == "turn/end"] == [
        {"kind": "completed", "note": "no-reply"}
    ]
    (result,) = [e["data"] for e in events if e["type"] == "tool/result"]
    assert "error" not in result and "391" in json.dumps(result["message"])
    finish = [
        e["data"]["chunk"]["reason"]
        for e in events
        if e["type"] == "assistant/chunk" and e["data"]["chunk"]["type"] == "finish"
    ]
    assert finish[-1]["failure"]["detail"] == "model-stopped"  # the log says why
    sid = session_id(live.fe)
    (turn,) = sql_rows(
        live.fe,
        "SELECT end_reason, end_note, error_code, tool_calls FROM turns "
        f"WHERE session_id = '{sid}' ORDER BY turn DESC LIMIT 1",
    )
    assert turn == {
        "end_reason": "completed",
        "end_note": "no-reply",
        "error_code": None,
        "tool_calls": 1,
    }


@pytest.mark.usefixtures("auto_python")
def test_a_repeated_call_is_stopped_after_two(live: Live) -> None:
    live.fe.python("hits_loop = []")
    code = "hits_loop.append(1); print(391)"  # prints the same each time
    live.server.script(*(sse_reply(qwen_python(code, n)) for n in range(1, 5)))
    ex = live.fe.run("Print 391 with python.", timeout=120)
    assert ex.status == "ok", ex.content
    assert live.fe.python("print(len(hits_loop))").strip() == "2"  # the 3rd and 4th never ran
    requests = live.server.requests
    assert len(requests) == 4  # the fourth answer ended the turn: no fifth request
    told = requests[3].json["messages"][-1]
    assert told["role"] == "tool" and "not run" in told["content"]
    events = last_turn(live.fe.events())
    codes = [e["data"].get("error", {}).get("code") for e in events if e["type"] == "tool/result"]
    assert codes == [None, None, "REPEATED_CALL", "REPEATED_CALL"]
    assert [e["data"]["reason"] for e in events if e["type"] == "turn/end"] == [
        {"kind": "completed", "note": "repeated-call"}
    ]
    saved = saved_bundle(ex)["text/markdown"]
    assert "not run again" in saved  # the notice of the refused call
    assert "Stopped: the model kept repeating a tool call" in saved
    sid = session_id(live.fe)
    rows = sql_rows(
        live.fe,
        f"SELECT error_code FROM tool_calls WHERE session_id = '{sid}' ORDER BY result_seq DESC "
        "LIMIT 4",
    )
    assert [r["error_code"] for r in rows] == ["REPEATED_CALL", "REPEATED_CALL", None, None]


def test_the_empty_response_hint_follows_what_was_empty(live: Live) -> None:
    # A model that chose to stop, to the prompt itself: still EMPTY_RESPONSE, retried once.
    live.server.script(sse_reply(wt.LOCAL_EMPTY_ANSWER, sticky=True))
    ex = live.fe.run("Say nothing.", timeout=120)
    assert ex.status == "error" and ex.content["ename"] == "EMPTY_RESPONSE"
    stopped = ex.content["evalue"]
    assert "chose to end its turn" in stopped and "server's log" not in stopped, stopped
    # A server that sent not one byte: the server's log, an over-long request.
    live.server.script(sse_reply([], chunked=False, sticky=True))
    ex = live.fe.run("Say something.", timeout=120)
    assert ex.status == "error" and ex.content["ename"] == "EMPTY_RESPONSE"
    empty = ex.content["evalue"]
    assert "empty body" in empty and "server's log" in empty, empty
    assert "chose to end its turn" not in empty
