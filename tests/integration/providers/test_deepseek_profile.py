"""DeepSeek as a profile of the Chat Completions adapter (WIRE §3; §6 scenarios 7–9)."""

from __future__ import annotations

from collections.abc import Sequence

import httpx
import pytest

from dsh_kernel.errors import LlmError
from dsh_kernel.ids import CallId
from dsh_kernel.llm.providers import ProviderDefaults
from dsh_kernel.llm.types import (
    BlockEndChunk,
    BlockStartChunk,
    ContentBlock,
    FinishError,
    FinishToolCalls,
    LlmCallConfig,
    ReasoningBlock,
    ReasoningDeltaChunk,
    StreamChunk,
    TextBlock,
    TokenUsage,
    ToolCallBlock,
    UsageChunk,
)
from tests.support import wire_transcripts as wt
from tests.support.providers import (
    WEATHER_TOOL,
    assistant,
    chat_provider,
    collect,
    finish_of,
    request,
    tool_result,
    user,
)
from tests.support.sse_server import Framing, SseServer, json_reply, sse_reply

REASONING = "The user asks for Paris weather. I should call get_weather."
CALL = ToolCallBlock(id=CallId("call_00_x1"), name="get_weather", arguments='{"city": "Paris"}')


def blocks(chunks: Sequence[StreamChunk]) -> list[ContentBlock]:
    return [c.block for c in chunks if isinstance(c, BlockEndChunk)]


async def test_keepalive_thinking_tool_call_and_cache_usage(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.DEEPSEEK_THINKING_TOOL, framing=Framing(split_seed=1, crlf=True)))
    chunks = await collect(
        chat_provider(server.url, client, profile="deepseek"), request(tools=[WEATHER_TOOL])
    )
    # The empty first thinking chunk opens nothing: the reasoning block starts with real text.
    first_start = next(c for c in chunks if isinstance(c, BlockStartChunk))
    assert first_start == BlockStartChunk(index=0, block_type="reasoning")
    assert [c.text for c in chunks if isinstance(c, ReasoningDeltaChunk)] == [
        "The user asks for Paris weather.",
        " I should call get_weather.",
    ]
    assert blocks(chunks) == [ReasoningBlock(text=REASONING), CALL]
    # Disjoint counts: cache hits out of input, reasoning inside output.
    assert (
        UsageChunk(
            usage=TokenUsage(
                input_tokens=54, output_tokens=42, cache_read_tokens=256, reasoning_tokens=17
            )
        )
        in chunks
    )
    assert finish_of(chunks).reason == FinishToolCalls()


async def test_minimal_payloads_without_ids_or_indexes(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.DEEPSEEK_MINIMAL))
    chunks = await collect(chat_provider(server.url, client, profile="deepseek"), request())
    assert blocks(chunks) == [TextBlock(text="hello")]
    assert UsageChunk(usage=TokenUsage(input_tokens=3, output_tokens=1)) in chunks


async def test_reasoning_passback_satisfies_the_stateful_server(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply(wt.DEEPSEEK_THINKING_TOOL),
        sse_reply(wt.deepseek_thinking_text("Easy.", "It is 11°C in Paris.")),
        checks=["deepseek-reasoning"],
    )
    provider = chat_provider(server.url, client, profile="deepseek")
    first = await collect(provider, request(user("weather in Paris?"), tools=[WEATHER_TOOL]))
    history = (
        user("weather in Paris?"),
        assistant(*blocks(first)),
        tool_result("call_00_x1", "11°C, cloudy"),
    )
    second = await collect(provider, request(*history, tools=[WEATHER_TOOL]))
    assert blocks(second) == [ReasoningBlock(text="Easy."), TextBlock(text="It is 11°C in Paris.")]
    sent = server.requests[1].json["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": "",
        "reasoning_content": REASONING,
        "tool_calls": [
            {
                "id": "call_00_x1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
    assert sent[2] == {"role": "tool", "tool_call_id": "call_00_x1", "content": "11°C, cloudy"}
    assert all(r.rejected is None for r in server.requests)


async def test_server_rejects_a_history_without_reasoning(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    """Scenario 8: the fake validates history as DeepSeek does; a non-passback profile trips it."""
    server.script(
        sse_reply(wt.DEEPSEEK_THINKING_TOOL),
        sse_reply(wt.OPENAI_TEXT),
        checks=["deepseek-reasoning"],
    )
    first = await collect(chat_provider(server.url, client, profile="deepseek"), request())
    history = (user("q"), assistant(*blocks(first)), tool_result("call_00_x1", "11°C"))
    with pytest.raises(LlmError) as info:
        await collect(chat_provider(server.url, client, profile="generic"), request(*history))
    assert info.value.code == "INVALID_REQUEST"
    assert "reasoning_content" in info.value.failure.message
    assert server.requests[1].rejected == "deepseek-reasoning"


async def test_empty_reasoning_is_passed_back_as_empty_string(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.OPENAI_TEXT), checks=["deepseek-reasoning"])
    history = (
        user("q"),
        assistant(CALL),
        tool_result("call_00_x1", "ok"),
        assistant(TextBlock(text="done")),
        user("again"),
    )
    await collect(chat_provider(server.url, client, profile="deepseek"), request(*history))
    sent = server.requests[0].json["messages"]
    assert sent[1]["reasoning_content"] == ""
    assert sent[3] == {
        "role": "assistant",
        "content": "done",
    }  # no tool calls, no reasoning: omitted
    assert server.requests[0].rejected is None


@pytest.mark.parametrize(
    ("effort", "purpose", "expected"),
    [
        ("high", None, {"thinking": {"type": "enabled"}, "reasoning_effort": "high"}),
        ("max", None, {"thinking": {"type": "enabled"}, "reasoning_effort": "max"}),
        ("off", None, {"thinking": {"type": "disabled"}}),
        ("high", "session-title", {"thinking": {"type": "disabled"}}),
        (None, None, {}),
    ],
)
async def test_thinking_controls_on_the_wire(
    server: SseServer,
    client: httpx.AsyncClient,
    effort: str | None,
    purpose: str | None,
    expected: dict[str, object],
) -> None:
    server.script(sse_reply(wt.OPENAI_TEXT))
    await collect(
        chat_provider(server.url, client, profile="deepseek"),
        request(reasoning_effort=effort, purpose=purpose, max_tokens=64),
    )
    body = server.requests[0].json
    assert {k: body[k] for k in ("thinking", "reasoning_effort") if k in body} == expected
    assert body["max_tokens"] == 64


def test_prepare_call_fills_catalogue_defaults_and_rejects_unknown_efforts() -> None:
    provider = chat_provider("http://127.0.0.1:9", None, profile="deepseek")
    prepared = provider.prepare_call(LlmCallConfig(provider="deepseek", model="deepseek-flash"))
    assert prepared.config.reasoning_effort == "high"
    assert prepared.config.max_tokens == 256_000
    assert prepared.adapter_defaults == frozenset({"reasoningEffort", "maxTokens"})
    assert provider.model_info("deepseek-v4-pro").context_window == 1_000_000
    with pytest.raises(LlmError) as info:
        provider.prepare_call(
            LlmCallConfig(provider="deepseek", model="deepseek-flash", reasoning_effort="medium")
        )
    assert info.value.code == "UNSUPPORTED_REASONING_EFFORT"
    configured = chat_provider(
        "http://127.0.0.1:9",
        None,
        profile="deepseek",
        defaults=ProviderDefaults(reasoning_effort="off", max_tokens=1000),
    )
    prepared = configured.prepare_call(LlmCallConfig(provider="deepseek", model="deepseek-flash"))
    assert (prepared.config.reasoning_effort, prepared.config.max_tokens) == ("off", 1000)


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (402, wt.DEEPSEEK_402, "QUOTA"),
        (422, wt.DEEPSEEK_422, "INVALID_REQUEST"),
        (503, wt.DEEPSEEK_503, "SERVER"),
        (
            429,
            {"error": {"message": "Rate Limit Reached", "type": "rate_limit_error"}},
            "RATE_LIMIT",
        ),
    ],
)
async def test_deepseek_errors(
    server: SseServer, client: httpx.AsyncClient, status: int, body: object, code: str
) -> None:
    server.script(json_reply(status, body, headers={"x-deepseek-request-id": "ds-req-9"}))
    with pytest.raises(LlmError) as info:
        await collect(chat_provider(server.url, client, profile="deepseek"), request())
    assert (info.value.code, info.value.failure.request_id) == (code, "ds-req-9")
    assert info.value.failure.message.startswith(f"DeepSeek API error (HTTP {status})")


async def test_insufficient_system_resource_is_a_retryable_server_fault(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply(
            wt.sse(
                wt.chat_chunk({"content": "Half"}),
                wt.chat_chunk({}, finish_reason="insufficient_system_resource"),
                "[DONE]",
            )
        )
    )
    chunks = await collect(chat_provider(server.url, client, profile="deepseek"), request())
    reason = finish_of(chunks).reason
    assert isinstance(reason, FinishError)
    assert reason.failure.code == "SERVER"
    assert "insufficient_system_resource" in reason.failure.message
