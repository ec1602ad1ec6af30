"""Against the real APIs: run only when the provider's key is in the environment (``-m live``)."""

from __future__ import annotations

import os

import pytest

from dsh_kernel.llm.config import BUILTIN_PROVIDERS, ProviderConfig, make_provider
from dsh_kernel.llm.types import (
    BlockEndChunk,
    FinishStop,
    FinishToolCalls,
    TextBlock,
    ToolCallBlock,
    UsageChunk,
)
from tests.support.providers import (
    WEATHER_TOOL,
    assistant,
    collect,
    finish_of,
    request,
    tool_result,
    user,
)

pytestmark = pytest.mark.live

PROVIDERS = ["deepseek", "openai", "anthropic"]


def live_config(provider_id: str) -> ProviderConfig:
    config = BUILTIN_PROVIDERS[provider_id]
    if not os.environ.get(config.api_key_env or ""):
        pytest.skip(f"{config.api_key_env} is not set")
    return config


@pytest.mark.parametrize("provider_id", PROVIDERS)
async def test_live_text(provider_id: str) -> None:
    config = live_config(provider_id)
    provider = make_provider(config)
    try:
        chunks = await collect(
            provider,  # type: ignore[arg-type]
            request(
                user("Reply with exactly one word: pong"),
                provider=config.id,
                model=config.model,
                max_tokens=2000,
            ),
        )
    finally:
        await provider.aclose()
    text = "".join(
        c.block.text
        for c in chunks
        if isinstance(c, BlockEndChunk) and isinstance(c.block, TextBlock)
    )
    assert "pong" in text.lower()
    assert any(isinstance(c, UsageChunk) for c in chunks)
    assert finish_of(chunks).reason == FinishStop()


@pytest.mark.parametrize("provider_id", PROVIDERS)
async def test_live_tool_round_trip(provider_id: str) -> None:
    """Two steps: the real API validates our passback (DeepSeek reasoning, Anthropic signatures)."""
    config = live_config(provider_id)
    provider = make_provider(config)
    ask = user("What is the weather in Paris? Use the tool.")
    try:
        first = await collect(
            provider,  # type: ignore[arg-type]
            request(
                ask, provider=config.id, model=config.model, tools=[WEATHER_TOOL], max_tokens=4000
            ),
        )
        assert finish_of(first).reason == FinishToolCalls()
        done = [c.block for c in first if isinstance(c, BlockEndChunk)]
        call = next(b for b in done if isinstance(b, ToolCallBlock))
        second = await collect(
            provider,  # type: ignore[arg-type]
            request(
                ask,
                assistant(*done),
                tool_result(call.id, "11°C, cloudy"),
                provider=config.id,
                model=config.model,
                tools=[WEATHER_TOOL],
                max_tokens=4000,
            ),
        )
    finally:
        await provider.aclose()
    assert finish_of(second).reason == FinishStop()
