"""Small helpers for driving real provider adapters against the loopback ``SseServer``."""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from dsh_kernel.ids import CallId, new_message_id
from dsh_kernel.llm.invariants import checked
from dsh_kernel.llm.providers import (
    DEEPSEEK,
    GENERIC,
    OPENAI,
    ChatCompletionsProvider,
    MessagesProvider,
    ProviderDefaults,
    Timeouts,
)
from dsh_kernel.llm.types import (
    ContentBlock,
    FinishChunk,
    GenerateRequest,
    Message,
    ModelSource,
    StreamChunk,
    TextBlock,
    ToolResultBlock,
    ToolSchema,
    ToolSource,
    UserSource,
)

FAKE_KEY = "sk-test-0000000000000000"

WEATHER_TOOL = ToolSchema(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def user(text: str) -> Message:
    return Message(
        id=new_message_id(), role="user", content=(TextBlock(text=text),), source=UserSource()
    )


def assistant(*blocks: ContentBlock, provider: str = "p", model: str = "m") -> Message:
    return Message(
        id=new_message_id(),
        role="assistant",
        content=blocks,
        source=ModelSource(provider=provider, model=model),
    )


def tool_result(call_id: str, text: str, *, is_error: bool = False) -> Message:
    return Message(
        id=new_message_id(),
        role="user",
        content=(
            ToolResultBlock(
                tool_call_id=CallId(call_id), content=(TextBlock(text=text),), is_error=is_error
            ),
        ),
        source=ToolSource(call_id=CallId(call_id)),
    )


def request(
    *messages: Message,
    provider: str = "p",
    model: str = "m",
    system: str | None = None,
    tools: Sequence[ToolSchema] = (),
    **kw: object,
) -> GenerateRequest:
    return GenerateRequest(
        provider=provider,
        model=model,
        messages=messages or (user("hi"),),
        system=system,
        tools=tuple(tools),
        **kw,  # type: ignore[arg-type]
    )


def chat_provider(
    url: str,
    client: httpx.AsyncClient | None,
    *,
    profile: str = "openai",
    key: str = FAKE_KEY,
    timeouts: Timeouts | None = None,
    defaults: ProviderDefaults | None = None,
) -> ChatCompletionsProvider:
    return ChatCompletionsProvider(
        id=profile,
        base_url=url,
        profile={"openai": OPENAI, "deepseek": DEEPSEEK, "generic": GENERIC}[profile],
        api_key=lambda: key,
        client=client,
        timeouts=timeouts,
        defaults=defaults,
    )


def anthropic_provider(
    url: str,
    client: httpx.AsyncClient | None,
    *,
    key: str = FAKE_KEY,
    timeouts: Timeouts | None = None,
    defaults: ProviderDefaults | None = None,
) -> MessagesProvider:
    return MessagesProvider(
        id="anthropic",
        base_url=url,
        api_key=lambda: key,
        client=client,
        timeouts=timeouts,
        defaults=defaults,
    )


async def collect(
    provider: ChatCompletionsProvider | MessagesProvider, req: GenerateRequest
) -> list[StreamChunk]:
    """Every chunk of one attempt, checked against the shared stream grammar as it arrives."""
    chunks = [c async for c in checked(provider.stream(req))]
    assert isinstance(chunks[-1], FinishChunk)
    return chunks


def finish_of(chunks: Sequence[StreamChunk]) -> FinishChunk:
    last = chunks[-1]
    assert isinstance(last, FinishChunk)
    return last
