"""What local models answer, read as it is meant, through a real kernel (issue 14, answer shapes).

The loopback server plays llama-cpp-python's wire (a role-only first delta, ``finish_reason:
stop``, no usage chunk): a Qwen-style tool call written as ``content`` runs the ``python`` tool in
the notebook namespace behind the usual approval, draws a card marked "recovered from text" (live
and saved), is a row of ``tool_calls``, and goes back to the server as native ``tool_calls``;
``<think>`` folds away as reasoning — also replaying the real llama-cpp-python recordings of
``tests/support/llamacpp`` (Qwen2.5-Coder-0.5B); DeepSeek behind a proxy that wants ``reasoning_content`` on every
assistant message gets it after one retry, and from then on at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dsh_kernel.llm.providers.openai_compat.text_tools import MAX_HELD_CHARS
from tests.kernel.conftest import Live, provider_env
from tests.support import llamacpp
from tests.support import wire_transcripts as wt
from tests.support.frontend import html_text, last_turn, saved_bundle, sql_rows
from tests.support.kernel import Kernel, start_kernel
from tests.support.sse_server import Reply, SseServer, frames_from_sse, sse_reply


def test_a_text_tool_call_runs_python_with_a_card_and_goes_back_as_tool_use(live: Live) -> None:
    code = "x_text_call = 17 * 23\nprint(x_text_call)"
    call = json.dumps({"name": "python", "arguments": {"code": code, "description": "Multiply"}})
    live.server.script(
        sse_reply(wt.local_stream(wt.tokens(call))),
        sse_reply(wt.local_stream(wt.tokens("17 × 23 = 391."))),
    )
    cell = live.fe.submit("Compute 17*23 with python.")
    cell.pump(
        lambda: bool(live.fe.buttons("Allow once")), what="the approval of the recovered call"
    )
    assert not live.fe.text_updates('{"name"')  # the JSON was never drawn as the answer
    heads = [str(m.state.get("value")) for m in live.fe.models.values() if m.name == "HTMLModel"]
    assert any("dsh-card-note" in h and "recovered from text" in h for h in heads)  # the live card
    live.fe.click(live.fe.buttons("Allow once")[0])
    ex = cell.finish()
    assert ex.status == "ok", ex.content
    assert live.fe.python("print(x_text_call)").strip() == "391"  # ran in the namespace

    saved = saved_bundle(ex)
    for mime in ("text/markdown", "text/html"):
        assert "recovered from text" in saved[mime], mime
        assert "x_text_call = 17 * 23" in html_text(saved[mime])
        assert '{"name": "python"' not in saved[mime]
    assert "17 × 23 = 391." in saved["text/markdown"]

    events = last_turn(live.fe.events())
    (called,) = [e["data"] for e in events if e["type"] == "tool/call"]
    assert called["name"] == "python" and json.loads(called["arguments"])["code"] == code
    ended = [
        e["data"]["chunk"]["block"]
        for e in events
        if e["type"] == "assistant/chunk" and e["data"]["chunk"]["type"] == "block-end"
    ]
    assert ended[0]["recoveredFrom"] == call  # the raw text, in the chunk log
    answer = next(e["data"]["message"] for e in events if e["type"] == "assistant/message")
    assert answer["content"][0]["recoveredFrom"] == call  # and on the message

    follow_up = live.server.requests[1].json["messages"]
    mine = max(i for i, m in enumerate(follow_up) if m["role"] == "assistant")
    assert follow_up[mine]["content"] == ""
    assert follow_up[mine]["tool_calls"][0]["id"] == called["callId"]
    assert follow_up[mine]["tool_calls"][0]["function"]["name"] == "python"
    assert follow_up[mine + 1]["role"] == "tool" and "391" in follow_up[mine + 1]["content"]

    rows = sql_rows(
        live.fe,
        f"SELECT name, status, arguments FROM tool_calls WHERE call_id = '{called['callId']}'",
    )
    assert [(r["name"], r["status"]) for r in rows] == [("python", "done")]


def test_the_real_qwen_recording_runs_python_and_its_second_answer_is_text(live: Live) -> None:
    """Replays llama-cpp-python's real answers (``tests/support/llamacpp``, recorded by the live
    tier): the call as pretty-printed ``content`` after 72 s of ``: ping`` comments, then — after
    the tool ran — the call once more as one JSON line (``arguments`` as a string) followed by an
    invented ``{"response": …}``: two objects, so text, and the turn ends."""
    first, second = llamacpp.load("qwen_tool_call_stream"), llamacpp.load("qwen_tool_result_stream")
    live.fe.python("x = 17")
    live.server.script(first.reply(), second.reply())
    cell = live.fe.submit(
        "The notebook already has a variable x. Run the python code `x * 23` with the python tool "
        "and tell me the result."
    )
    cell.pump(lambda: bool(live.fe.buttons("Allow once")), what="the approval of the recorded call")
    live.fe.click(live.fe.buttons("Allow once")[0])
    ex = cell.finish()
    assert ex.status == "ok", ex.content
    events = last_turn(live.fe.events())
    (called,) = [e["data"] for e in events if e["type"] == "tool/call"]
    assert (called["name"], json.loads(called["arguments"])) == ("python", {"code": "x * 23"})
    (result,) = [e["data"] for e in events if e["type"] == "tool/result"]
    assert "391" in json.dumps(result["message"]["content"])
    sent = live.server.requests[1].json["messages"]
    mine = max(i for i, m in enumerate(sent) if m["role"] == "assistant")
    assert sent[mine]["tool_calls"][0]["function"]["arguments"] == '{"code": "x * 23"}'
    assert sent[mine]["content"] == ""
    saved = saved_bundle(ex)["text/markdown"]
    assert "recovered from text" in saved
    assert second.content().splitlines()[1] in saved  # the second answer, shown as it came
    assert [e["data"]["reason"]["kind"] for e in events if e["type"] == "turn/end"] == ["completed"]
    # The real server streams no usage: both requests' counts are estimates, marked so, cost unknown.
    sid = live.fe.python("print(get_ipython().kernel.host.agent.session.id)").strip()
    rows = sql_rows(
        live.fe,
        "SELECT estimated, input_tokens, output_tokens FROM requests "
        f"WHERE session_id = '{sid}' ORDER BY request DESC LIMIT 2",
    )
    assert [r["estimated"] for r in rows] == [True, True], rows
    assert all(r["input_tokens"] > 0 and r["output_tokens"] > 0 for r in rows), rows
    (total,) = sql_rows(live.fe, f"SELECT estimated, cost FROM sessions WHERE session_id = '{sid}'")
    assert total == {"estimated": True, "cost": None}, total


def test_the_real_qwen_think_recording_folds_away(live: Live) -> None:
    live.server.script(llamacpp.load("qwen_think_stream").reply())
    ex = live.fe.run("How many legs do three spiders have?")
    assert ex.status == "ok", ex.content
    message = next(
        e["data"]["message"]
        for e in last_turn(live.fe.events())
        if e["type"] == "assistant/message"
    )
    assert message["content"] == [{"type": "reasoning", "text": "Three spiders have 3 legs."}]
    saved = saved_bundle(ex)["text/markdown"]
    assert "Three spiders have 3 legs." in saved.split("</details>")[0]
    assert "think>" not in saved


def test_think_folds_away_as_reasoning_and_is_not_sent_back(live: Live) -> None:
    thinking = "The user asks for 2+2; that is 4."
    live.server.script(
        sse_reply(wt.local_stream(wt.tokens(f"<think>\n{thinking}\n</think>\n\nThe answer is 4."))),
        sse_reply(wt.local_stream(["Yes, 4."])),
    )
    ex = live.fe.run("What is 2+2?")
    assert ex.status == "ok", ex.content
    saved = saved_bundle(ex)["text/markdown"]
    assert "<think>" not in saved and "think&gt;" not in saved
    fold, answer = saved.split("</details>", 1)
    assert "💭 Reasoning" in fold and thinking in fold
    assert "The answer is 4." in answer and thinking not in answer

    events = last_turn(live.fe.events())
    message = next(e["data"]["message"] for e in events if e["type"] == "assistant/message")
    assert [b["type"] for b in message["content"]] == ["reasoning", "text"]
    mid = message["id"]
    rows = sql_rows(live.fe, f"SELECT text, reasoning FROM messages WHERE message_id = '{mid}'")
    assert rows == [{"text": "The answer is 4.", "reasoning": thinking + "\n"}]

    assert live.fe.run("Sure?").status == "ok"
    sent = [m for m in live.server.requests[1].json["messages"] if m["role"] == "assistant"][-1]
    assert sent == {"role": "assistant", "content": "The answer is 4."}


def test_reasoning_never_closed_is_the_answer_with_a_note_and_goes_back_as_text(
    live: Live,
) -> None:
    said = "Three spiders have eight legs each, so 24 legs."
    live.server.script(
        sse_reply(wt.local_stream(wt.tokens(f"<think>\n{said}"))),
        sse_reply(wt.local_stream(["Yes."])),
    )
    ex = live.fe.run("How many legs do three spiders have?")
    assert ex.status == "ok", ex.content
    saved = saved_bundle(ex)["text/markdown"]
    assert "never closed its reasoning" in saved
    assert said in saved and "<details>" not in saved  # the answer, not a fold
    message = next(
        e["data"]["message"]
        for e in last_turn(live.fe.events())
        if e["type"] == "assistant/message"
    )
    assert message["content"] == [
        {"type": "reasoning", "text": ""},
        {"type": "text", "text": said, "unclosedReasoning": True},
    ]
    assert live.fe.run("Sure?").status == "ok"
    sent = [m for m in live.server.requests[1].json["messages"] if m["role"] == "assistant"][-1]
    assert sent == {"role": "assistant", "content": said}


LOOP = '{"name": "python", "arguments": {"code": "' + "print(1)\\n" * 600
"""A model looping inside an unclosed JSON string (as Qwen2.5-Coder-0.5B did): never a call."""


def test_held_text_shows_progress_then_streams_as_text_once_released(live: Live) -> None:
    pieces = wt.tokens(LOOP, 256)
    frames = list(frames_from_sse(wt.local_stream(pieces), delay_ms=20))
    # a pause before the piece that passes the character bound, so the progress is drawn while
    # the text is held (frame 0 is the role-only delta)
    crossing = MAX_HELD_CHARS // 256 + 1
    frames[crossing] = replace(frames[crossing], delay_ms=2_000)
    live.server.script(Reply(frames=tuple(frames)))
    before = {m.comm_id: len(m.updates) for m in live.fe.models.values()}

    def drawn(fragment: str) -> list[str]:
        """This cell's HTML updates holding ``fragment`` (the kernel is shared with other tests)."""
        return [
            text
            for m in list(live.fe.models.values())
            if m.name == "HTMLModel"
            for d in m.updates[before.get(m.comm_id, 0) :]
            if fragment in (text := html_text(d.get("value")))
        ]

    cell = live.fe.submit("Write some code.")
    cell.pump(lambda: bool(drawn("writing a tool call…")), what="the held progress")
    assert not drawn('{"name": "python"')  # held: not drawn as the answer yet
    ex = cell.finish()
    assert ex.status == "ok", ex.content
    progress = drawn("writing a tool call…")
    assert all(re.search(r"\(\d[\d,]* characters?\)", p) for p in progress), progress
    assert drawn('{"name": "python"')  # released: drawn as text
    saved = saved_bundle(ex)["text/markdown"]
    assert "writing a tool call" not in saved and "print(1)" in saved

    events = last_turn(live.fe.events())
    held = [e["data"]["chars"] for e in events if e["type"] == "assistant/held"]
    growing = held[:-1]
    assert growing and growing == sorted(growing) and 0 < growing[-1] <= MAX_HELD_CHARS
    assert held[-1] == 0  # released: nothing held any more
    deltas = [
        e["data"]["chunk"]["text"]
        for e in events
        if e["type"] == "assistant/chunk" and e["data"]["chunk"]["type"] == "text-delta"
    ]
    assert "".join(deltas) == LOOP  # what was shown is every character, once
    message = next(e["data"]["message"] for e in events if e["type"] == "assistant/message")
    assert message["content"] == [{"type": "text", "text": LOOP}]
    assert not [e for e in events if e["type"] == "tool/call"]


# --- DeepSeek behind a proxy: a kernel of its own (the dialect is the session's) --------------------


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kernel, SseServer]]:
    tmp: Path = tmp_path_factory.mktemp("proxy")
    with SseServer() as server:
        env = provider_env(server, tmp, DSH_MODEL="deepseek/deepseek-v4-flash")
        with start_kernel(tmp, "dsh", env=env) as kernel:
            yield kernel, server


def deepseek_answer(reasoning: str, text: str) -> Any:
    return sse_reply(
        wt.sse(
            wt.chat_chunk({"role": "assistant", "content": "", "reasoning_content": reasoning}),
            wt.chat_chunk({"content": text}),
            wt.chat_chunk({}, finish_reason="stop"),
            "[DONE]",
        )
    )


def test_a_missing_reasoning_400_is_retried_once_with_it_and_remembered(
    proxy: tuple[Kernel, SseServer],
) -> None:
    k, server = proxy
    server.script(
        sse_reply(wt.local_stream(["Hello."])),
        deepseek_answer("They ask about the weather.", "I cannot look it up."),
        deepseek_answer("Polite close.", "You are welcome."),
        checks=["reasoning-every-assistant"],
    )
    assert k.execute("Hi").status == "ok"
    ex = k.execute("What is the weather?")
    assert ex.status == "ok", ex.content
    assert "I cannot look it up." in ex.data("text/markdown")[-1]
    assert [r.rejected for r in server.requests] == [None, "reasoning-every-assistant", None]
    retried = server.requests[2].json["messages"]
    assert [m["reasoning_content"] for m in retried if m["role"] == "assistant"] == [""]

    events = last_turn(k.events())
    (retry,) = [e["data"] for e in events if e["type"] == "llm/retry"]
    assert retry["policyKey"] == "reasoning-passback" and retry["failure"]["status"] == 400
    (header,) = [e["data"] for e in events if e["type"] == "request/header"]
    assert header["reason"] == "change"
    assert header["header"]["config"]["reasoningPassback"] == "send"
    assert header["header"]["adapterDefaults"]["reasoningPassback"] is True  # not the user's

    assert k.execute("Thanks!").status == "ok"
    assert [r.rejected for r in server.requests[3:]] == [None]  # remembered: right at once
    sent = [m for m in server.requests[3].json["messages"] if m["role"] == "assistant"]
    assert [m["reasoning_content"] for m in sent] == ["", "They ask about the weather."]
    assert not [e for e in last_turn(k.events()) if e["type"] == "llm/retry"]
