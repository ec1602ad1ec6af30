"""The scenario server itself: scripts, framing switches, close modes, checks, and the CLI mode."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from tests.support import wire_transcripts as wt
from tests.support.sse_server import (
    Framing,
    SseServer,
    data_frame,
    json_reply,
    reply_from_json,
    reply_to_json,
    sse_reply,
)


async def test_split_framing_really_splits_frames(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    text = wt.chat_text_stream(["héllo wörld ☀️"])
    server.script(sse_reply(text, framing=Framing(split_seed=9)), sse_reply(text))
    reads_split: list[bytes] = []
    reads_plain: list[bytes] = []
    for reads in (reads_split, reads_plain):
        async with client.stream("POST", server.url + "/chat/completions", json={}) as resp:
            reads.extend([chunk async for chunk in resp.aiter_raw()])
    assert b"".join(reads_split) == b"".join(reads_plain) == text.encode()
    assert len(reads_split) >= 2 * len(reads_plain) - 1
    # At least one read boundary falls inside a multi-byte UTF-8 character.
    assert any(0x80 <= r[0] <= 0xBF for r in reads_split)


async def test_crlf_no_space_keepalive_and_omit_done(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply(
            wt.OPENAI_LENGTH,
            framing=Framing(crlf=True, no_space=True, keepalive=True, omit_done=True),
        )
    )
    async with client.stream("POST", server.url + "/x") as resp:
        body = (await resp.aread()).decode()
    assert "\r\n\r\n: keep-alive\r\n\r\ndata:{" in body
    assert "data: " not in body and "[DONE]" not in body
    assert body.startswith("data:{") and "\n\n" not in body.replace("\r\n", "")


async def test_script_sequence_records_and_exhaustion(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        json_reply(503, wt.OPENAI_503), json_reply(503, wt.OPENAI_503), sse_reply(wt.OPENAI_TEXT)
    )
    statuses = [
        (await client.post(server.url + "/chat/completions", json={"n": n})).status_code
        for n in range(4)
    ]
    assert statuses == [503, 503, 200, 500]
    assert [r.json for r in server.requests] == [{"n": 0}, {"n": 1}, {"n": 2}, {"n": 3}]
    assert server.requests[0].headers["content-type"] == "application/json"


def test_json_form_round_trips() -> None:
    reply = sse_reply(
        wt.OPENAI_TEXT,
        framing=Framing(split_seed=1, crlf=True),
        close="abort",
        first_byte_delay_ms=5,
    )
    assert reply_from_json(json.loads(json.dumps(reply_to_json(reply)))) == reply
    error = json_reply(429, wt.OPENAI_429_RATE, headers={"retry-after": "1"})
    assert reply_from_json(json.loads(json.dumps(reply_to_json(error)))) == error
    built = reply_from_json(
        {
            "frames": [
                {"comment": "keep-alive"},
                {"data": {"a": 1}, "event": "e"},
                {"data": "[DONE]"},
            ]
        }
    )
    assert (
        b"".join(f.raw for f in built.frames)
        == b': keep-alive\n\nevent: e\ndata: {"a": 1}\n\ndata: [DONE]\n\n'
    )


def test_cli_mode_serves_a_script_file_to_another_process(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps({"replies": [{"sse": wt.DEEPSEEK_MINIMAL}], "checks": ["deepseek-reasoning"]})
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.sse_server", str(script)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        with httpx.Client() as c:
            body = c.post(url + "/chat/completions", json={"messages": []}).text
            assert '"hello"' in body and body.endswith("data: [DONE]\n\n")
            bad = {"messages": [{"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]}]}
            assert c.post(url + "/chat/completions", json=bad).status_code == 400
            replaced = {
                "replies": [reply_to_json(json_reply(418, {"error": {"message": "teapot"}}))]
            }
            assert c.post(url + "/_dsh/script", json=replaced).json() == {"ok": True}
            assert c.post(url + "/chat/completions", json={}).status_code == 418
            recorded = c.get(url + "/_dsh/requests").json()
            assert [r["json"] for r in recorded] == [{}]
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
        assert proc.stdout is not None
        proc.stdout.close()


@pytest.mark.parametrize("close", ["abort", "hang"])
async def test_close_modes(server: SseServer, client: httpx.AsyncClient, close: str) -> None:
    server.script(sse_reply(wt.OPENAI_TEXT, close=close))
    timeout = httpx.Timeout(5, read=0.5)
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadTimeout)):
        async with client.stream("POST", server.url + "/x", timeout=timeout) as resp:
            async for _ in resp.aiter_raw():
                pass


async def test_a_gated_frame_waits_for_its_release(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    frames = [data_frame({"n": 1}), replace(data_frame({"n": 2}), gate="second")]
    server.script(sse_reply(frames, coalesce=True))
    assert reply_from_json(reply_to_json(sse_reply(frames))).frames[1].gate == "second"
    async with client.stream("POST", server.url + "/chat/completions", json={}) as resp:
        lines = resp.aiter_lines()
        assert await anext(lines) == 'data: {"n": 1}'
        server.release("second")
        assert [line async for line in lines if line] == ['data: {"n": 2}']
