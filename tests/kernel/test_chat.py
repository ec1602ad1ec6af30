"""Chat cells in a real ``dsh`` kernel: streaming into the view, approvals answered by clicks sent as
comm messages, provider errors, ``$`x``` and ``&`fn``` references, a model calling a tool that does
not exist."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

from tests.kernel.conftest import Live
from tests.support import scenarios as sc
from tests.support.frontend import saved_bundle
from tests.support.sse_server import SseServer


def request_messages(server: SseServer, n: int) -> list[dict[str, Any]]:
    body = server.requests[n].json
    assert isinstance(body, dict)
    return body["messages"]


def tool_messages(server: SseServer, n: int) -> list[str]:
    """The tool results request ``n`` sends after its last assistant message (this turn's)."""
    messages = request_messages(server, n)
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    return [str(m["content"]) for m in messages[last + 1 :] if m["role"] == "tool"]


def typed_messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["data"]
        for e in events
        if e["type"] == "user/message" and e["data"]["source"]["kind"] == "user"
    ]


def last_turn_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    start = max(i for i, e in enumerate(events) if e["type"] == "turn/start")
    return events[start:]


def test_streamed_answer_arrives_as_several_view_updates(live: Live) -> None:
    live.server.script(sc.words(60, delay_ms=15))
    ex = live.fe.run("Count to sixty, slowly.")
    assert ex.status == "ok", ex.content
    full = sc.expected_words(60)
    updates = live.fe.text_updates("w0 ")
    assert len(updates) >= 4, updates  # ~0.9 s of stream at the view's 20 Hz redraw
    # Each redraw holds everything streamed so far: a growing prefix, ending with the whole answer.
    for before, after in itertools.pairwise(updates):
        assert after.startswith(before.rstrip()), (before, after)
    assert updates[-1].strip() == full.strip()
    # The saved output: only the static rendering of the finished turn (a saved notebook must read
    # the same with no kernel and no widget state), with a text/plain copy for console clients.
    final = saved_bundle(ex)
    assert "application/vnd.jupyter.widget-view+json" not in final
    assert full.strip() in final["text/plain"]
    assert full.strip() in final["text/markdown"]
    assert "w59" in final["text/html"]


def test_approval_waits_then_allow_click_runs_the_code(live: Live) -> None:
    live.server.script(sc.python_call("x_allowed = 6 * 7\nprint(x_allowed)"), sc.text("It is 42."))
    cell = live.fe.submit("Compute six times seven in Python.")
    cell.pump(lambda: bool(live.fe.buttons("Always allow")), what="the approval buttons")
    assert live.fe.buttons("Allow once") and live.fe.buttons("Deny")
    time.sleep(0.5)  # nothing moves without an answer
    assert len(live.server.requests) == 1
    assert not cell.done
    live.fe.click(live.fe.buttons("Allow once")[0])
    ex = cell.finish()
    assert ex.status == "ok", ex.content
    assert len(live.server.requests) == 2
    assert any("42" in t for t in tool_messages(live.server, 1))
    assert live.fe.python("print(x_allowed)").strip() == "42"
    events = last_turn_events(live.fe.events())
    decided = [e["data"] for e in events if e["type"] == "approval/decided"]
    assert [d["outcome"] for d in decided] == ["allowed-once"]
    assert "It is 42." in saved_bundle(ex)["text/markdown"]
    # The result carries the body's own time, and SQL's duration_ms is that time; the half second
    # spent waiting for the click lies between the call and the result but outside the body, so
    # the call-to-result span is longer.
    [call] = [e for e in events if e["type"] == "tool/call"]
    [result] = [e["data"] for e in events if e["type"] == "tool/result"]
    took = result["durationMs"]
    assert isinstance(took, int) and took >= 0
    sid = live.fe.python("print(get_ipython().kernel.host.agent.session.id)").strip()
    query = (
        "%%sql _took <<\nSELECT duration_ms, epoch_ms(ended_at) - epoch_ms(started_at) AS span "
        f"FROM tool_calls WHERE session_id = '{sid}' AND call_seq = {call['seq']}"
    )
    assert live.fe.run(query).status == "ok"
    [row] = json.loads(live.fe.python("print(_took.to_json(orient='records'))"))
    assert row["duration_ms"] == took and took < row["span"], row


def test_deny_click_stops_the_call(live: Live) -> None:
    live.server.script(sc.python_call("x_denied = 1"), sc.text("Understood, I did not run it."))
    cell = live.fe.submit("Set x_denied.")
    cell.pump(lambda: bool(live.fe.buttons("Deny")), what="the approval buttons")
    live.fe.click(live.fe.buttons("Deny")[0])
    ex = cell.finish()
    assert ex.status == "ok", ex.content
    assert "x_denied" not in live.fe.python("print(sorted(globals()))")
    events = last_turn_events(live.fe.events())
    assert [e["data"]["outcome"] for e in events if e["type"] == "approval/decided"] == ["rejected"]
    results = [e["data"] for e in events if e["type"] == "tool/result"]
    assert len(results) == 1
    assert results[0]["error"]["code"] == "DENIED"
    assert results[0]["message"]["content"][0]["isError"] is True
    assert any("rejected" in t for t in tool_messages(live.server, 1))
    static = saved_bundle(ex)["text/markdown"]
    assert "denied" in static


def test_provider_error_shows_its_code(live: Live) -> None:
    live.server.script(sc.auth_error())
    ex = live.fe.run("Hello?")
    assert ex.status == "error"
    assert ex.content["ename"] == "AUTH"
    assert "AUTH" not in ex.content["evalue"]  # the code shows once, in the traceback line
    assert "%agent key" in ex.content["evalue"]  # what to do
    errors = ex.of_type("error")
    assert len(errors) == 1
    assert errors[0]["content"]["traceback"] == [f"AUTH: {ex.content['evalue']}"]
    assert "Traceback" not in json.dumps([m["content"] for m in ex.messages])
    assert "AUTH" in saved_bundle(ex)["text/markdown"]


def test_dollar_reference_puts_the_description_in_the_logged_message(live: Live) -> None:
    live.fe.python(
        "import pandas as pd\ndf = pd.DataFrame({'city': ['Oslo', 'Lima'], 'temp_c': [4.5, 19.0]})"
    )
    live.server.script(sc.text("Two cities."))
    ex = live.fe.run("What is in $`df`? The price is $5.")
    assert ex.status == "ok", ex.content
    events = last_turn_events(live.fe.events())
    (message,) = typed_messages(events)
    text = message["content"][0]["text"]
    assert '<value of="df">' in text
    for fragment in ("city", "temp_c", "Oslo", "19.0", "$5"):
        assert fragment in text, fragment
    cell = message["source"]["cell"]
    assert cell["raw"] == "What is in $`df`? The price is $5."
    assert [(i["expr"], i["type"]) for i in cell["inserted"]] == [("df", "DataFrame")]
    # What was logged is what the model was sent.
    sent = [m["content"] for m in request_messages(live.server, 0) if m["role"] == "user"]
    assert text in sent


def test_function_reference_is_offered_as_a_tool(live: Live) -> None:
    live.fe.python("def double(n: int) -> int:\n    'Double a number.'\n    return n * 2\n")
    live.server.script(sc.tool_calls(("double", {"n": 21})), sc.text("Doubled: 42."))
    cell = live.fe.submit("Use &`double` on 21.")
    cell.pump(
        lambda: cell.done or bool(live.fe.buttons("Allow once")), what="the call or its approval"
    )
    if live.fe.buttons("Allow once"):
        live.fe.click(live.fe.buttons("Allow once")[0])
    ex = cell.finish()
    assert ex.status == "ok", ex.content
    first = live.server.requests[0].json
    assert "double" in [t["function"]["name"] for t in first["tools"]]
    assert any("42" in t for t in tool_messages(live.server, 1))
    # Offered for that message only.
    live.server.script(sc.text("ok"))
    assert live.fe.run("And now?").status == "ok"
    assert "double" not in [t["function"]["name"] for t in live.server.requests[0].json["tools"]]


def test_model_calling_an_unknown_tool_gets_an_error_result(live: Live) -> None:
    live.server.script(
        sc.tool_calls(("launch_rockets", {"count": 3})), sc.text("That tool does not exist.")
    )
    ex = live.fe.run("Launch the rockets.")
    assert ex.status == "ok", ex.content
    (tool_text,) = tool_messages(live.server, 1)
    assert "launch_rockets" in tool_text and "unknown tool" in tool_text
    static = saved_bundle(ex)["text/markdown"]
    assert "launch_rockets" in static and "That tool does not exist." in static


def test_a_click_as_soon_as_the_buttons_show_is_not_lost(live: Live) -> None:
    """The frontend draws the view late (the approval is already asked, the kernel is waiting for
    a frontend) and the click follows at once: it must still answer the approval."""
    live.server.script(sc.python_call("x_quick = 5"), sc.text("Done quickly."))
    live.fe.render_views = False
    try:
        cell = live.fe.submit("Quick, set x_quick.")
        cell.pump(lambda: bool(live.fe.buttons("Always allow", drawn=False)), what="the buttons")
        live.fe.render(cell.views[0])
        live.fe.click(live.fe.buttons("Allow once", drawn=False)[0])
        ex = cell.finish(timeout=20)
    finally:
        live.fe.render_views = True
    assert ex.status == "ok", ex.content
    assert live.fe.python("print(x_quick)").strip() == "5"
