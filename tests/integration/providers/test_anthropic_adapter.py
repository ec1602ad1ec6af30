"""The Messages adapter against replayed Anthropic wire bytes (WIRE §4; §6 scenarios 10–12)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import httpx
import pytest

from dsh_kernel.errors import LlmError
from dsh_kernel.ids import CallId
from dsh_kernel.llm.types import (
    BlockEndChunk,
    ContentBlock,
    FinishError,
    FinishMaxTokens,
    FinishStop,
    FinishToolCalls,
    LlmCallConfig,
    ReasoningBlock,
    StreamChunk,
    TextBlock,
    TextDeltaChunk,
    TokenUsage,
    ToolCallBlock,
    ToolCallDeltaChunk,
    UnknownBlock,
    UsageChunk,
)
from tests.support import wire_transcripts as wt
from tests.support.providers import (
    WEATHER_TOOL,
    anthropic_provider,
    assistant,
    collect,
    finish_of,
    request,
    tool_result,
    user,
)
from tests.support.sse_server import Framing, SseServer, json_reply, sse_reply

SIGNATURE = "EqQBCkgIARABGAIiQL...fake...=="
THINKING = ReasoningBlock(
    text="Need the weather; call get_weather with Paris.", signature=SIGNATURE
)
CALL = ToolCallBlock(id=CallId("toolu_01ABC"), name="get_weather", arguments='{"city": "Paris"}')
BUDGET_MODEL = "claude-haiku-4-5"
"""A model with manual (``budget_tokens``) thinking; the Claude 5.x models think adaptively."""


def blocks(chunks: Sequence[StreamChunk]) -> list[ContentBlock]:
    return [c.block for c in chunks if isinstance(c, BlockEndChunk)]


def event(name: str, obj: dict[str, object]) -> str:
    return f"event: {name}\ndata: {json.dumps(obj)}\n\n"


@pytest.mark.parametrize(
    "framing", [Framing(), Framing(split_seed=2, crlf=True, no_space=True, keepalive=True)]
)
async def test_text(server: SseServer, client: httpx.AsyncClient, framing: Framing) -> None:
    server.script(sse_reply(wt.ANTHROPIC_TEXT, framing=framing))
    chunks = await collect(anthropic_provider(server.url, client), request())
    assert [c.text for c in chunks if isinstance(c, TextDeltaChunk)] == ["Hi", " from", " E."]
    assert blocks(chunks) == [TextBlock(text="Hi from E.")]
    assert UsageChunk(usage=TokenUsage(input_tokens=11, output_tokens=6)) in chunks
    assert finish_of(chunks).reason == FinishStop()


async def test_request_shape(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(sse_reply(wt.ANTHROPIC_TEXT))
    await collect(
        anthropic_provider(server.url, client),
        request(
            user("hello"),
            model="claude-x",
            system="Be kind.",
            tools=[WEATHER_TOOL],
            temperature=0.5,
            seed=7,  # the Messages API takes no seed: never sent
            stop=("X",),
        ),
    )
    (rec,) = server.requests
    assert rec.path == "/v1/messages"
    assert rec.headers["x-api-key"] == "sk-test-0000000000000000"
    assert rec.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in rec.headers
    assert rec.json == {
        "model": "claude-x",
        "max_tokens": 32000,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
        "stream": True,
        "system": "Be kind.",
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather for a city.",
                "input_schema": WEATHER_TOOL.parameters,
            }
        ],
        "temperature": 0.5,
        "stop_sequences": ["X"],
    }


async def test_thinking_tool_use_cache_and_signature_passback(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply(wt.ANTHROPIC_THINKING_TOOL, framing=Framing(split_seed=4)),
        sse_reply(wt.anthropic_text("11°C and cloudy.")),
        checks=["anthropic-signature"],
    )
    provider = anthropic_provider(server.url, client)
    first = await collect(
        provider,
        request(
            user("weather?"),
            model=BUDGET_MODEL,
            tools=[WEATHER_TOOL],
            reasoning_effort="low",
            max_tokens=8000,
        ),
    )
    assert blocks(first) == [THINKING, TextBlock(text="Let me check."), CALL]
    deltas = [c for c in first if isinstance(c, ToolCallDeltaChunk)]
    assert deltas[0].arguments_delta == "" and deltas[0].name == "get_weather"
    assert "".join(d.arguments_delta for d in deltas) == '{"city": "Paris"}'
    assert (
        UsageChunk(
            usage=TokenUsage(
                input_tokens=42, output_tokens=88, cache_read_tokens=1800, cache_write_tokens=0
            )
        )
        in first
    )
    assert finish_of(first).reason == FinishToolCalls()
    assert server.requests[0].json["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert "temperature" not in server.requests[0].json

    history = (
        user("weather?"),
        assistant(*blocks(first)),
        tool_result("toolu_01ABC", "11°C, cloudy"),
    )
    second = await collect(
        provider,
        request(
            *history,
            model=BUDGET_MODEL,
            tools=[WEATHER_TOOL],
            reasoning_effort="low",
            max_tokens=8000,
        ),
    )
    assert blocks(second) == [TextBlock(text="11°C and cloudy.")]
    sent = server.requests[1].json["messages"]
    assert sent[1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": THINKING.text, "signature": SIGNATURE},
                {"type": "text", "text": "Let me check."},
                {
                    "type": "tool_use",
                    "id": "toolu_01ABC",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01ABC",
                    "content": "11°C, cloudy",
                    "is_error": False,
                }
            ],
        },
    ]
    assert server.requests[1].rejected is None


async def test_server_rejects_an_altered_signature(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply(wt.ANTHROPIC_THINKING_TOOL),
        sse_reply(wt.ANTHROPIC_TEXT),
        checks=["anthropic-signature"],
    )
    provider = anthropic_provider(server.url, client)
    await collect(provider, request())
    tampered = ReasoningBlock(text=THINKING.text, signature=SIGNATURE[:-3] + "xx=")
    history = (user("q"), assistant(tampered, CALL), tool_result("toolu_01ABC", "11°C"))
    with pytest.raises(LlmError) as info:
        await collect(provider, request(*history))
    assert info.value.code == "INVALID_REQUEST"
    assert "signature" in info.value.failure.message
    assert info.value.failure.request_id == "req_fake_signature"


async def test_redacted_thinking_and_unknown_blocks_round_trip(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    text = (
        event(
            "message_start",
            {
                "type": "message_start",
                "message": {"usage": {"input_tokens": 5, "output_tokens": 1}},
            },
        )
        + event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "redacted_thinking", "data": "opaque=="},
            },
        )
        + event("content_block_stop", {"type": "content_block_stop", "index": 0})
        + event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {
                    "type": "server_tool_use",
                    "id": "srv_1",
                    "name": "web_search",
                    "input": {},
                },
            },
        )
        + event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"q": "x"}'},
            },
        )
        + event("content_block_stop", {"type": "content_block_stop", "index": 1})
        + event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 2,
                "content_block": {"type": "text", "text": ""},
            },
        )
        + event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "citations_delta", "citation": {"x": 1}},
            },
        )
        + event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "text_delta", "text": "ok"},
            },
        )
        + event("content_block_stop", {"type": "content_block_stop", "index": 2})
        + event("future_event", {"type": "future_event"})
        + event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 3},
            },
        )
        + event("message_stop", {"type": "message_stop"})
    )
    server.script(sse_reply(text), sse_reply(wt.ANTHROPIC_TEXT))
    provider = anthropic_provider(server.url, client)
    chunks = await collect(provider, request())
    got = blocks(chunks)
    assert got[0] == ReasoningBlock(text="", redacted="opaque==")
    assert got[1] == UnknownBlock(
        type="server_tool_use",
        raw={"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"q": "x"}},
    )
    assert got[2] == TextBlock(text="ok")
    await collect(provider, request(user("q"), assistant(*got), user("more")))
    sent = server.requests[1].json["messages"]
    assert sent[1]["content"] == [
        {"type": "redacted_thinking", "data": "opaque=="},
        {"type": "text", "text": "ok"},
    ]


async def test_overloaded_mid_stream(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(sse_reply(wt.ANTHROPIC_OVERLOADED, close="hang"))
    chunks = await collect(anthropic_provider(server.url, client), request())
    assert [c.text for c in chunks if isinstance(c, TextDeltaChunk)] == ["Partial ans"]
    reason = finish_of(chunks).reason
    assert isinstance(reason, FinishError)
    assert reason.failure.code == "SERVER"
    assert reason.failure.message == "Anthropic stream error: Overloaded"


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (529, wt.ANTHROPIC_529, "SERVER"),
        (401, wt.ANTHROPIC_401, "AUTH"),
        (400, wt.ANTHROPIC_400_TOO_LONG, "CONTEXT_WINDOW_EXCEEDED"),
        (402, wt.ANTHROPIC_402, "QUOTA"),
        (429, wt.ANTHROPIC_429_RATE, "RATE_LIMIT"),
        (429, wt.ANTHROPIC_429_SPEND, "QUOTA"),
    ],
)
async def test_http_errors(
    server: SseServer, client: httpx.AsyncClient, status: int, body: dict[str, object], code: str
) -> None:
    server.script(json_reply(status, body, headers={"retry-after": "3"}))
    with pytest.raises(LlmError) as info:
        await collect(anthropic_provider(server.url, client), request())
    failure = info.value.failure
    assert (failure.code, failure.status, failure.provider_retry_after_ms) == (code, status, 3000)
    assert failure.request_id == body["request_id"]  # from the body when no header carries it


async def test_request_id_header_wins(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(json_reply(529, wt.ANTHROPIC_529, headers={"request-id": "req_hdr"}))
    with pytest.raises(LlmError) as info:
        await collect(anthropic_provider(server.url, client), request())
    assert info.value.failure.request_id == "req_hdr"


async def test_max_tokens_and_context_window_stop_reasons(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    def stream(stop: str) -> str:
        return wt.anthropic_text("cut").replace('"end_turn"', json.dumps(stop))

    server.script(
        sse_reply(stream("max_tokens")),
        sse_reply(stream("model_context_window_exceeded")),
        sse_reply(stream("refusal")),
    )
    provider = anthropic_provider(server.url, client)
    assert finish_of(await collect(provider, request())).reason == FinishMaxTokens()
    for code in ("CONTEXT_WINDOW_EXCEEDED", "REFUSAL"):
        reason = finish_of(await collect(provider, request())).reason
        assert isinstance(reason, FinishError) and reason.failure.code == code


async def test_empty_message_is_empty_response(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    text = (
        event(
            "message_start",
            {
                "type": "message_start",
                "message": {"usage": {"input_tokens": 5, "output_tokens": 1}},
            },
        )
        + event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 1},
            },
        )
        + event("message_stop", {"type": "message_stop"})
    )
    server.script(sse_reply(text))
    reason = finish_of(await collect(anthropic_provider(server.url, client), request())).reason
    assert isinstance(reason, FinishError) and reason.failure.code == "EMPTY_RESPONSE"
    assert reason.failure.detail == "model-stopped"


async def test_one_empty_text_block_is_empty_response_with_no_usage(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.ANTHROPIC_EMPTY_TEXT_BLOCK))
    chunks = await collect(anthropic_provider(server.url, client), request())
    reason = finish_of(chunks).reason
    assert isinstance(reason, FinishError) and reason.failure.code == "EMPTY_RESPONSE"
    assert reason.failure.detail == "model-stopped"
    assert not any(isinstance(c, UsageChunk) for c in chunks)  # 0 in, 0 out is no count


async def test_an_empty_body_is_empty_response_with_its_detail(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply([], chunked=False))
    with pytest.raises(LlmError) as info:
        await collect(anthropic_provider(server.url, client), request())
    assert info.value.code == "EMPTY_RESPONSE" and info.value.failure.detail == "empty-body"


async def test_cut_before_message_stop(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(sse_reply(wt.ANTHROPIC_TEXT.split("event: message_delta")[0], chunked=False))
    with pytest.raises(LlmError) as info:
        await collect(anthropic_provider(server.url, client), request())
    assert info.value.code == "STREAM_CLOSED"


def test_efforts_come_from_the_catalogue_and_others_are_refused() -> None:
    provider = anthropic_provider("http://127.0.0.1:9", None)

    def prepare(model: str, effort: str | None = None) -> LlmCallConfig:
        return provider.prepare_call(
            LlmCallConfig(provider="anthropic", model=model, reasoning_effort=effort)
        ).config

    unknown = prepare("claude-x")  # not in the catalogue: nothing sent, the model's own default
    assert unknown.max_tokens == 32000 and unknown.reasoning_effort is None
    assert prepare("claude-sonnet-5-5").reasoning_effort == "high"  # its documented default
    assert prepare("claude-opus-5-5").reasoning_effort == "medium"
    assert prepare("claude-sonnet-5-5", "max").reasoning_effort == "max"
    for model, effort in (
        ("claude-x", "ultra"),
        ("claude-opus-5-5", "off"),  # adaptive thinking cannot be switched off on Opus 5.5
        (BUDGET_MODEL, "max"),  # Haiku 4.5 has budget thinking: off, low, medium, high
    ):
        with pytest.raises(LlmError) as info:
            prepare(model, effort)
        assert info.value.code == "UNSUPPORTED_REASONING_EFFORT"
        assert repr(effort) in info.value.message and model in info.value.message


async def test_claude_5_thinks_adaptively_with_an_effort(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    """Claude 5.x refuses ``budget_tokens``: an effort goes as ``output_config.effort``."""
    server.script(*(sse_reply(wt.ANTHROPIC_TEXT) for _ in range(4)))
    provider = anthropic_provider(server.url, client)
    await collect(provider, request(model="claude-sonnet-5-5", reasoning_effort="low"))
    await collect(
        provider, request(model="claude-sonnet-5-5", reasoning_effort="off", temperature=0.2)
    )
    await collect(provider, request(model="claude-sonnet-5-5", purpose="session-title"))
    await collect(provider, request(model="claude-opus-5-5", purpose="session-title"))
    low, off, title, opus_title = (r.json for r in server.requests)
    assert low["thinking"] == {"type": "adaptive"} and low["output_config"] == {"effort": "low"}
    assert "temperature" not in low and "budget_tokens" not in json.dumps(low)
    assert off["thinking"] == {"type": "disabled"} and off["temperature"] == 0.2
    assert "output_config" not in off
    assert title["thinking"] == {"type": "disabled"}  # a title never thinks…
    # …unless the model cannot stop: then as little as it allows
    assert opus_title["thinking"] == {"type": "adaptive"}
    assert opus_title["output_config"] == {"effort": "low"}


async def test_budget_stays_below_max_tokens(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(sse_reply(wt.ANTHROPIC_TEXT), sse_reply(wt.ANTHROPIC_TEXT))
    provider = anthropic_provider(server.url, client)
    await collect(provider, request(model=BUDGET_MODEL, reasoning_effort="high", max_tokens=5000))
    await collect(provider, request(model=BUDGET_MODEL, reasoning_effort="high", max_tokens=1000))
    assert server.requests[0].json["thinking"] == {"type": "enabled", "budget_tokens": 4999}
    assert "thinking" not in server.requests[1].json  # no room for the 1024-token minimum
