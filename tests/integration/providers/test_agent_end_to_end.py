"""The real adapters under the real ``Agent``, against the loopback server (issue 3, deliverable 4).

Only the network peer and the clock are fake: the server replays wire bytes (and validates passback
statefully, as the real APIs do) and retry sleeps go to ``dsh_kernel.testing.FakeClock``, which
records them, so ``Retry-After`` is checked exactly without waiting.
"""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest

from dsh_kernel import Agent, tool
from dsh_kernel.agent.retry import RetryPolicy
from dsh_kernel.ids import CallId
from dsh_kernel.llm.config import KeyStore, ProviderConfig, ProviderKind, make_provider
from dsh_kernel.llm.types import ReasoningBlock, ToolCallBlock
from dsh_kernel.session.codec import encode_event
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.testing import FakeClock
from tests.support import wire_transcripts as wt
from tests.support.sse_server import SseServer, data_frame, json_reply, sse_reply, until_closed

KEY = "sk-e2e-0000000000000000"


@tool(read_only=True)
def get_weather(city: str) -> str:
    """Weather for a city.

    Args:
        city: the city name
    """
    return "11°C, cloudy" if city == "Paris" else "unknown"


def agent_for(
    server: SseServer,
    client: httpx.AsyncClient,
    kind: ProviderKind = "deepseek",
    *,
    clock: FakeClock | None = None,
    retry: RetryPolicy | None = None,
    keys: KeyStore | None = None,
) -> Agent:
    config = ProviderConfig(
        id=kind, kind=kind, base_url=server.url, api_key_env="E2E_KEY", model="m"
    )
    if keys is None:
        keys = KeyStore()
        keys.set("E2E_KEY", KEY)
    provider = make_provider(config, client, keys=keys, env={})
    return Agent(
        provider=provider,
        model={"deepseek": "deepseek-flash", "anthropic": "claude-x"}.get(kind, "gpt-x"),
        tools=[get_weather],
        sleep=clock.sleep if clock else None,
        retry_policy=retry,
        check_invariants=True,
    )


async def run(agent: Agent, text: str) -> list[SessionEvent]:
    agent.followup(text)
    await asyncio.wait_for(agent.when_idle(), 20)
    return list(agent.session.events)


def of_type(events: list[SessionEvent], type_: str) -> list[SessionEvent]:
    return [e for e in events if e.type == type_]


def turn_end(events: list[SessionEvent]) -> dict[str, object]:
    return dict(of_type(events, "turn/end")[-1].data["reason"])  # type: ignore[arg-type]


async def test_deepseek_tool_turn_with_reasoning_passback(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply(wt.DEEPSEEK_THINKING_TOOL),
        sse_reply(wt.deepseek_thinking_text("Report it.", "It is 11°C and cloudy in Paris.")),
        checks=["deepseek-reasoning"],
    )
    agent = agent_for(server, client)
    events = await run(agent, "Weather in Paris?")
    assert turn_end(events) == {"kind": "completed"}
    assert [r.rejected for r in server.requests] == [None, None]
    messages = agent.session.derive_messages()
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[1].content == (
        ReasoningBlock(text="The user asks for Paris weather. I should call get_weather."),
        ToolCallBlock(id=CallId("call_00_x1"), name="get_weather", arguments='{"city": "Paris"}'),
    )
    assert messages[3].text() == "It is 11°C and cloudy in Paris."
    # The adapter's defaults were logged in the request header and sent on the wire.
    header = of_type(events, "request/header")[0].data["header"]
    assert header["config"]["reasoningEffort"] == "high"  # type: ignore[index]
    first, second = (r.json for r in server.requests)
    assert (first["thinking"], first["reasoning_effort"], first["max_tokens"]) == (
        {"type": "enabled"},
        "high",
        256000,
    )
    assert first["tools"][0]["function"]["name"] == "get_weather"
    assert (
        second["messages"][-2]["reasoning_content"]
        == "The user asks for Paris weather. I should call get_weather."
    )
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_00_x1",
        "content": "11°C, cloudy",
    }
    usage = [e.data["usage"] for e in of_type(events, "assistant/message")]
    assert usage[0] == {
        "inputTokens": 54,
        "outputTokens": 42,
        "cacheReadTokens": 256,
        "reasoningTokens": 17,
    }


async def test_the_agent_takes_the_configured_model(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.ANTHROPIC_TEXT))
    keys = KeyStore()
    keys.set("E2E_KEY", KEY)
    config = ProviderConfig(
        id="anthropic",
        kind="anthropic",
        base_url=server.url,
        api_key_env="E2E_KEY",
        model="claude-configured",
    )
    agent = Agent(provider=make_provider(config, client, keys=keys, env={}))
    await run(agent, "hi")
    assert server.requests[0].json["model"] == "claude-configured"
    assert agent.session.derive_messages()[-1].text() == "Hi from E."


async def test_anthropic_tool_turn_with_signature_passback(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply(wt.ANTHROPIC_THINKING_TOOL),
        sse_reply(wt.anthropic_text("11°C and cloudy.")),
        checks=["anthropic-signature"],
    )
    agent = agent_for(server, client, "anthropic")
    events = await run(agent, "Weather in Paris?")
    assert turn_end(events) == {"kind": "completed"}
    assert [r.rejected for r in server.requests] == [None, None]
    echoed = server.requests[1].json["messages"][1]["content"][0]
    assert echoed == {
        "type": "thinking",
        "thinking": "Need the weather; call get_weather with Paris.",
        "signature": "EqQBCkgIARABGAIiQL...fake...==",
    }
    assert agent.session.derive_messages()[-1].text() == "11°C and cloudy."


async def test_429_retry_after_is_honoured_on_a_fake_clock(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        json_reply(429, wt.OPENAI_429_RATE, headers={"retry-after": "2", "x-request-id": "req_rl"}),
        sse_reply(wt.OPENAI_TEXT),
    )
    clock = FakeClock()
    agent = agent_for(server, client, "openai", clock=clock)
    events = await run(agent, "hi")
    assert clock.slept == [2.0]
    (retry,) = of_type(events, "llm/retry")
    assert retry.data["delayMs"] == 2000
    assert retry.data["failure"] == {
        "message": retry.data["failure"]["message"],  # type: ignore[index]
        "code": "RATE_LIMIT",
        "status": 429,
        "providerRetryAfterMs": 2000,
        "requestId": "req_rl",
    }
    assert len(of_type(events, "llm/retry-started")) == 1
    assert turn_end(events) == {"kind": "completed"}
    assert agent.session.derive_messages()[-1].text() == "Hello there!"
    assert len(server.requests) == 2


async def test_503_503_200(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(
        json_reply(503, wt.DEEPSEEK_503),
        json_reply(503, wt.DEEPSEEK_503),
        sse_reply(wt.DEEPSEEK_MINIMAL),
    )
    clock = FakeClock()
    agent = agent_for(server, client, clock=clock)
    events = await run(agent, "hi")
    assert [r.data["retry"] for r in of_type(events, "llm/retry")] == [1, 2]
    assert 0.45 <= clock.slept[0] <= 0.55 and 0.9 <= clock.slept[1] <= 1.1  # backoff with jitter
    assert turn_end(events) == {"kind": "completed"}
    assert len(of_type(events, "step/start")) == 1  # retried within the step
    assert agent.session.derive_messages()[-1].text() == "hello"


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (json_reply(402, wt.DEEPSEEK_402), "QUOTA"),
        (json_reply(429, wt.OPENAI_429_QUOTA, headers={"retry-after": "1"}), "QUOTA"),
        (json_reply(429, wt.OPENAI_429_RATE, headers={"retry-after": "999"}), "RATE_LIMIT"),
        (json_reply(401, wt.OPENAI_401), "AUTH"),
    ],
    ids=["402-balance", "429-quota", "429-retry-after-999", "401"],
)
async def test_failures_that_are_not_retried(
    server: SseServer, client: httpx.AsyncClient, reply: object, code: str
) -> None:
    server.script(reply)  # type: ignore[arg-type]
    clock = FakeClock()
    agent = agent_for(server, client, clock=clock)
    events = await run(agent, "hi")
    assert of_type(events, "llm/retry") == [] and clock.slept == []
    assert turn_end(events)["error"]["code"] == code  # type: ignore[index]
    assert len(server.requests) == 1


async def test_mid_stream_error_after_partial_text_is_retried_and_never_seen_by_the_model(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.OPENAI_INSTREAM_ERROR, close="hang"), sse_reply(wt.OPENAI_TEXT))
    agent = agent_for(server, client, "openai", clock=FakeClock())
    events = await run(agent, "hi")
    chunks = [e.data["chunk"] for e in of_type(events, "assistant/chunk")]
    assert {"type": "text-delta", "index": 0, "text": "Par"} in chunks  # the user saw it streaming
    (retry,) = of_type(events, "llm/retry")
    assert retry.data["failure"]["code"] == "SERVER"  # type: ignore[index]
    assert turn_end(events) == {"kind": "completed"}
    assert [m.text() for m in agent.session.derive_messages()] == ["hi", "Hello there!"]


async def test_mid_stream_error_without_retry_ends_the_turn(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.ANTHROPIC_OVERLOADED, close="hang"))
    agent = agent_for(server, client, "anthropic", retry=RetryPolicy(mode="off"))
    events = await run(agent, "hi")
    assert turn_end(events)["error"]["code"] == "SERVER"  # type: ignore[index]
    assert of_type(events, "assistant/message") == []
    assert [m.text() for m in agent.session.derive_messages()] == ["hi"]


async def test_truncated_stream_ends_the_turn_with_stream_closed(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.OPENAI_TEXT, close="abort"))
    agent = agent_for(server, client, "openai", clock=FakeClock())
    events = await run(agent, "hi")
    error = turn_end(events)["error"]
    assert error["code"] == "STREAM_CLOSED"  # type: ignore[index]
    assert of_type(events, "llm/retry") == []  # not in the default retryable codes
    assert any(e.data["chunk"]["type"] == "text-delta" for e in of_type(events, "assistant/chunk"))  # type: ignore[index]


async def test_cancel_mid_stream_closes_the_connection(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    frames = [data_frame(wt.chat_chunk({"content": f"w{i} "}), delay_ms=30) for i in range(300)]
    server.script(sse_reply(frames))
    agent = agent_for(server, client, "openai")
    agent.followup("write a lot")
    for _ in range(200):
        if len(of_type(list(agent.session.events), "assistant/chunk")) >= 4:
            break
        await asyncio.sleep(0.01)
    agent.cancel()
    await asyncio.wait_for(agent.when_idle(), 30)
    events = list(agent.session.events)
    assert turn_end(events)["kind"] == "aborted"
    (message,) = of_type(events, "assistant/message")
    assert message.data["interrupted"] is True
    seen = len(of_type(events, "assistant/chunk"))
    rec = server.requests[0]
    await until_closed(rec)
    assert rec.frames_sent < 150  # of 300: closed, never read to the end
    await asyncio.sleep(0.1)
    assert len(of_type(list(agent.session.events), "assistant/chunk")) == seen


async def test_a_session_never_records_the_key(
    server: SseServer, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    canary = "sk-CANARY-agent-9d8c7b6a5f4e3d2c"
    keys = KeyStore()
    keys.set("E2E_KEY", canary)
    echo = {
        "error": {
            "message": f"Incorrect API key provided: {canary}",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }
    server.script(
        json_reply(401, echo),
        sse_reply(
            wt.sse(
                wt.chat_chunk({"content": "Hi"}),
                {"error": {"message": f"bad key {canary}", "type": "server_error"}},
            )
        ),
        sse_reply(wt.DEEPSEEK_THINKING_TOOL),
        sse_reply(wt.deepseek_thinking_text("ok", "done")),
    )
    agent = agent_for(server, client, keys=keys, retry=RetryPolicy(mode="off"))
    await run(agent, "one")
    await run(agent, "two")
    events = await run(agent, "three")
    assert [turn_end([e])["kind"] for e in of_type(events, "turn/end")] == [
        "error",
        "error",
        "completed",
    ]
    assert all(canary in (r.headers.get("authorization") or "") for r in server.requests)
    journal = "\n".join(encode_event(e) for e in events)
    written = [
        journal,
        repr(agent.last_error),
        str(agent.last_error),
        caplog.text,
        repr(agent.provider),
    ]
    assert all(canary not in text for text in written)
    assert "[redacted]" in journal
    assert json.loads(journal.splitlines()[0])  # the journal lines are the JSON the store ingests
