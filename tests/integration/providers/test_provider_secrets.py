"""An API key never leaks: not in failures, exception text, reprs, chunks or log records.

Every server here echoes the key back — in a 401 body, an in-stream error, a malformed payload — as
misconfigured proxies do; the adapters must redact it wherever it would surface.
"""

from __future__ import annotations

import json
import logging
import traceback

import httpx
import pytest

from dsh_kernel.errors import LlmError, error_chain
from dsh_kernel.llm.codec import chunk_to_json, failure_to_json
from dsh_kernel.llm.config import KeyStore, ProviderConfig, ProviderKind, make_provider
from dsh_kernel.llm.provider import stream_call
from dsh_kernel.llm.types import FinishChunk, FinishError
from tests.support import wire_transcripts as wt
from tests.support.providers import request
from tests.support.sse_server import SseServer, json_reply, sse_reply

CANARY = "sk-CANARY-5ecret-7f3a9c1d2e4b6a80"


def scenarios() -> list[tuple[str, object]]:
    echo = f"Incorrect API key provided: {CANARY}"
    return [
        (
            "401",
            json_reply(
                401,
                {
                    "error": {
                        "message": echo,
                        "type": "invalid_request_error",
                        "code": "invalid_api_key",
                    }
                },
            ),
        ),
        ("html", json_reply(502, f"<html>upstream rejected Bearer {CANARY}</html>".encode())),
        (
            "in-stream",
            sse_reply(
                wt.sse(
                    wt.chat_chunk({"content": "Hi"}),
                    {"error": {"message": echo, "type": "server_error"}},
                )
            ),
        ),
        ("malformed", sse_reply(wt.sse(f"{{broken {CANARY}"))),
        (
            "anthropic-event",
            sse_reply(wt.ANTHROPIC_OVERLOADED.replace('"Overloaded"', json.dumps(echo))),
        ),
        ("ok", sse_reply(wt.OPENAI_TEXT)),
    ]


@pytest.mark.parametrize("kind", ["deepseek", "anthropic"])
async def test_the_key_never_surfaces(
    server: SseServer,
    client: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    kind: ProviderKind,
) -> None:
    caplog.set_level(logging.DEBUG)
    keys = KeyStore()
    keys.set("CANARY_KEY", CANARY)
    config = ProviderConfig(
        id=kind, kind=kind, base_url=server.url, api_key_env="CANARY_KEY", model="m"
    )
    provider = make_provider(config, client, keys=keys, env={})
    written: list[str] = [repr(provider), repr(config), repr(keys)]
    for _name, reply in scenarios():
        server.push(reply, reply)  # type: ignore[arg-type]
        try:
            direct = [c async for c in provider.stream(request())]
        except LlmError as exc:
            direct = []
            written += [str(exc), repr(exc), error_chain(exc), repr(exc.failure)]
            written += [
                json.dumps(failure_to_json(exc.failure)),
                "".join(traceback.format_exception(exc)),
            ]
        folded = [c async for c in stream_call(provider, request())]
        assert isinstance(folded[-1], FinishChunk)
        for c in [*direct, *folded]:
            written += [repr(c), json.dumps(chunk_to_json(c))]
    written += [r.getMessage() for r in caplog.records] + [caplog.text]
    # The key did go over the wire (so the scan is meaningful) ...
    sent = [r.headers.get("authorization", r.headers.get("x-api-key", "")) for r in server.requests]
    assert all(CANARY in h for h in sent) and len(sent) == 2 * len(scenarios())
    # ... and the servers did echo it, yet nothing we produced contains it.
    leaks = [text for text in written if CANARY in text]
    assert leaks == []
    assert any("[redacted]" in text for text in written)


async def test_transport_errors_do_not_leak_the_key(client: httpx.AsyncClient) -> None:
    keys = KeyStore()
    keys.set("CANARY_KEY", CANARY)
    config = ProviderConfig(
        id="openai",
        kind="openai",
        base_url="http://127.0.0.1:9",
        api_key_env="CANARY_KEY",
        model="m",
    )
    chunks = [c async for c in stream_call(make_provider(config, client, keys=keys), request())]
    reason = chunks[-1].reason  # type: ignore[union-attr]
    assert isinstance(reason, FinishError) and reason.failure.code == "TRANSPORT"
    assert CANARY not in repr(chunks)
