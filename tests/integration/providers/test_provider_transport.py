"""Bounds and teardown of one attempt: idle timeout, overall deadline, cancellation, refused connects."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from pathlib import Path

import httpx
import pytest

from dsh_kernel.errors import LlmError
from dsh_kernel.llm.providers import Timeouts
from dsh_kernel.llm.providers.transport import tls_context
from dsh_kernel.llm.types import TextDeltaChunk
from tests.support import wire_transcripts as wt
from tests.support.providers import anthropic_provider, chat_provider, collect, request
from tests.support.sse_server import (
    Frame,
    SseServer,
    comment_frame,
    data_frame,
    frames_from_sse,
    sse_reply,
    until_closed,
)


async def test_idle_timeout_when_the_server_goes_silent(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    text = wt.sse(wt.chat_chunk({"content": "so far"}))
    server.script(sse_reply(text, close="hang"))
    provider = chat_provider(server.url, client, timeouts=Timeouts(idle_s=0.3, deadline_s=30))
    seen: list[object] = []
    started = time.monotonic()
    with pytest.raises(LlmError) as info:
        async for chunk in provider.stream(request()):
            seen.append(chunk)
    assert info.value.code == "TIMEOUT"
    assert "idle" in info.value.failure.message
    assert 0.25 < time.monotonic() - started < 3
    assert TextDeltaChunk(index=0, text="so far") in seen


async def test_idle_timeout_before_the_first_byte(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.OPENAI_TEXT, first_byte_delay_ms=2000))
    provider = anthropic_provider(server.url, client, timeouts=Timeouts(idle_s=0.3, deadline_s=30))
    with pytest.raises(LlmError) as info:
        await collect(provider, request())
    assert info.value.code == "TIMEOUT"


async def test_keepalives_reset_idle_but_not_the_deadline(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    """DeepSeek queues with ``: keep-alive`` for minutes: only the overall deadline ends that."""
    frames = [comment_frame(delay_ms=50) for _ in range(100)]  # 5 s of chatter, never a token
    server.script(sse_reply(frames))
    provider = chat_provider(
        server.url, client, profile="deepseek", timeouts=Timeouts(idle_s=0.2, deadline_s=0.8)
    )
    started = time.monotonic()
    with pytest.raises(LlmError) as info:
        await collect(provider, request())
    elapsed = time.monotonic() - started
    assert info.value.code == "TIMEOUT"
    assert "deadline" in info.value.failure.message
    assert 0.7 < elapsed < 2.0
    assert 5 <= server.requests[0].frames_sent < 40  # the comments did flow (so idle never fired)


async def test_deadline_covers_a_slow_stream_of_tokens(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    frames = [data_frame(wt.chat_chunk({"content": "x"}), delay_ms=100) for _ in range(50)]
    server.script(sse_reply(frames))
    provider = chat_provider(server.url, client, timeouts=Timeouts(idle_s=5, deadline_s=0.5))
    with pytest.raises(LlmError) as info:
        await collect(provider, request())
    assert info.value.code == "TIMEOUT"


async def test_cancellation_closes_the_connection_at_once(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    frames = [data_frame(wt.chat_chunk({"content": f"t{i} "}), delay_ms=30) for i in range(200)]
    server.script(sse_reply(frames))
    provider = chat_provider(server.url, client)
    got: list[str] = []
    second = asyncio.Event()

    async def consume() -> None:
        async for chunk in provider.stream(request()):
            if isinstance(chunk, TextDeltaChunk):
                got.append(chunk.text)
                if len(got) == 2:
                    second.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(second.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    stopped_at = len(got)
    rec = server.requests[0]
    # the server notices the closed socket at its next write (≤ 30 ms away on a quiet machine)
    await until_closed(rec)
    assert rec.frames_sent < 100  # of 200: closed, never read to the end
    assert len(got) == stopped_at  # nothing is read after the cancellation


async def test_breaking_out_and_closing_the_stream_closes_the_connection(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    frames = [data_frame(wt.chat_chunk({"content": "x"}), delay_ms=20) for _ in range(200)]
    server.script(sse_reply(frames))
    stream = chat_provider(server.url, client).stream(request())
    async for chunk in stream:
        if isinstance(chunk, TextDeltaChunk):
            break
    await stream.aclose()  # type: ignore[attr-defined]
    rec = server.requests[0]
    await until_closed(rec)
    assert rec.frames_sent < 100  # of 200: closed, never read to the end


async def test_connection_refused_is_transport(client: httpx.AsyncClient) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but never listening: connects are refused
        provider = chat_provider(f"http://127.0.0.1:{port}", client)
        with pytest.raises(LlmError) as info:
            await collect(provider, request())
    assert info.value.code == "TRANSPORT"
    assert "ConnectError" in info.value.failure.message


async def test_a_lazily_created_client_is_owned_and_closed(server: SseServer) -> None:
    server.script(sse_reply(wt.OPENAI_TEXT), sse_reply(wt.ANTHROPIC_TEXT))
    chat = chat_provider(server.url, None)
    messages = anthropic_provider(server.url, None)
    assert (await collect(chat, request()))[-1].type == "finish"
    assert (await collect(messages, request()))[-1].type == "finish"
    await chat.aclose()
    await messages.aclose()


async def test_an_injected_client_is_left_open(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.OPENAI_TEXT))
    provider = chat_provider(server.url, client)
    await collect(provider, request())
    await provider.aclose()
    assert not client.is_closed


async def test_sequential_requests_reuse_the_connection(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(*(sse_reply(frames_from_sse(wt.OPENAI_TEXT)) for _ in range(3)))
    provider = chat_provider(server.url, client)
    for _ in range(3):
        await collect(provider, request())
    assert server.remaining == 0 and len(server.requests) == 3


def test_frame_helpers_round_trip() -> None:
    frames = frames_from_sse(wt.ANTHROPIC_TEXT)
    assert b"".join(f.raw for f in frames).decode() == wt.ANTHROPIC_TEXT
    assert isinstance(frames[0], Frame)


def test_clients_share_one_tls_context_per_certificate_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    first = tls_context()
    assert tls_context() is first  # built once: a new session's client no longer loads the CAs
    assert first.verify_mode is ssl.CERT_REQUIRED and first.check_hostname
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))  # as httpx reads it, at the next build
    other = tls_context()
    assert other is not first and tls_context() is other
