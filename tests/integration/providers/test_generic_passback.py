"""What goes back to a generic server (issue 14): recovered calls as proper ``tool_calls``, reasoning
per the server's dialect — and the dialect learned from a 400, retried once, logged and kept."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from dsh_kernel import Agent, tool
from dsh_kernel.ids import CallId, new_message_id
from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.llm.config import KeyStore, ProviderConfig, make_provider
from dsh_kernel.llm.providers import DEEPSEEK, GENERIC, OPENAI, ChatProfile, ProviderDefaults
from dsh_kernel.llm.providers.openai_compat.profiles import passback_for
from dsh_kernel.llm.providers.openai_compat.serialize import serialize_request
from dsh_kernel.llm.types import (
    LlmFailure,
    Message,
    ModelSource,
    ReasoningBlock,
    ReasoningPassback,
    TextBlock,
    ToolCallBlock,
)
from dsh_kernel.session.events import SessionEvent
from tests.support import wire_transcripts as wt
from tests.support.providers import chat_provider, request, tool_result, user
from tests.support.sse_server import (
    SseServer,
    extra_field_error,
    missing_reasoning_error,
    sse_reply,
)


def said(*blocks: TextBlock | ReasoningBlock | ToolCallBlock, field: str | None = None) -> Message:
    state: JsonValue = {"reasoningField": field} if field else None
    return Message(
        id=new_message_id(),
        role="assistant",
        content=blocks,
        source=ModelSource(provider="openai-compatible", model="m", replay_state=state),
    )


CALL = ToolCallBlock(
    id=CallId("call_1"), name="python", arguments='{"code": "1"}', recovered_from='{"name": …}'
)
THOUGHT = ReasoningBlock(text="I should run it.")


def wire(
    *messages: Message, dialect: ReasoningPassback | None = None, profile: ChatProfile = GENERIC
) -> list[dict[str, Any]]:
    """The assistant messages of the request body for ``messages``."""
    body = serialize_request(
        request(*messages, reasoning_passback=dialect), profile, ProviderDefaults()
    )
    return [dict(m) for m in body["messages"] if m["role"] == "assistant"]


def test_a_recovered_call_goes_back_as_a_proper_tool_call() -> None:
    (sent,) = wire(user("go"), said(CALL), tool_result("call_1", "1"))
    assert sent == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "python", "arguments": '{"code": "1"}'},
            }
        ],
    }


def test_unlearned_the_reasoning_a_server_streamed_goes_back_on_its_tool_call_turn_only() -> None:
    streamed_call = said(THOUGHT, CALL, field="reasoning_content")
    streamed_text = said(THOUGHT, TextBlock(text="Done."), field="reasoning_content")
    from_tags = said(THOUGHT, CALL)  # <think> tags: no field
    other_field = said(THOUGHT, CALL, field="reasoning")
    sent = wire(user("a"), streamed_call, user("b"), streamed_text, from_tags, other_field)
    assert [m.get("reasoning_content") for m in sent] == ["I should run it.", None, None, None]
    assert all("<think>" not in m["content"] for m in sent)


def test_a_learned_dialect_sends_it_everywhere_or_nowhere() -> None:
    history = (user("a"), said(THOUGHT, CALL), said(TextBlock(text="plain")))
    assert [m.get("reasoning_content") for m in wire(*history, dialect="send")] == [
        "I should run it.",
        "",
    ]
    omitted = wire(*history[:1], said(THOUGHT, CALL, field="reasoning_content"), dialect="omit")
    assert "reasoning_content" not in omitted[0]


def test_the_native_profiles_keep_their_own_rules() -> None:
    history = (user("a"), said(THOUGHT, CALL), said(TextBlock(text="plain")))
    dialects: tuple[ReasoningPassback | None, ...] = (None, "send", "omit")
    for dialect in dialects:
        deepseek = wire(*history, dialect=dialect, profile=DEEPSEEK)
        assert [m.get("reasoning_content") for m in deepseek] == ["I should run it.", None]
        openai = wire(*history, dialect=dialect, profile=OPENAI)
        assert [m.get("reasoning_content") for m in openai] == [None, None]


@pytest.mark.parametrize(
    ("message", "status", "dialect"),
    [
        (missing_reasoning_error(2)["error"]["message"], 400, "send"),
        (
            "The `reasoning_content` in the thinking mode must be passed back to the API.",
            400,
            "send",
        ),
        (
            "litellm.BadRequestError: OpenAIException - messages[51]: assistant message with "
            "tool_calls must include reasoning_content.",
            400,
            "send",
        ),
        (extra_field_error(3)["error"]["message"], 400, "omit"),
        ("Unrecognized request argument supplied: reasoning_content", 400, "omit"),
        ("Extra inputs are not permitted, field: 'messages[8].reasoning'", 400, None),
        ("Missing `model` field", 400, None),
        ("Missing `reasoning_content` field", 500, None),
    ],
)
def test_which_400s_name_the_field_and_which_way(
    message: str, status: int, dialect: str | None
) -> None:
    code = "INVALID_REQUEST" if status == 400 else "SERVER"
    failure = LlmFailure(
        code=code, message=f"server API error (HTTP {status}): {message}", status=status
    )
    assert passback_for(failure) == dialect


def test_only_the_generic_profile_learns(server: SseServer) -> None:
    failure = LlmFailure(
        code="INVALID_REQUEST", message=missing_reasoning_error(1)["error"]["message"], status=400
    )
    for profile, wanted in (("generic", "send"), ("openai", None), ("deepseek", None)):
        provider = chat_provider(server.url, None, profile=profile)
        assert provider.passback_retry(failure, None) == wanted
    generic = chat_provider(server.url, None, profile="generic")
    assert generic.passback_retry(failure, "send") is None  # nothing else to try


# --- through the agent --------------------------------------------------------------------------------

KEY = "sk-generic-0000000000000000"


@tool(read_only=True)
def get_weather(city: str) -> str:
    """Weather for a city.

    Args:
        city: the city name
    """
    return "11°C, cloudy" if city == "Paris" else "unknown"


def agent_for(server: SseServer, client: httpx.AsyncClient) -> Agent:
    config = ProviderConfig(
        id="openai-compatible",
        kind="openai-compatible",
        base_url=server.url,
        api_key_env="E2E_KEY",
        model="m",
    )
    keys = KeyStore()
    keys.set("E2E_KEY", KEY)
    return Agent(
        provider=make_provider(config, client, keys=keys, env={}),
        model="deepseek-v4-flash",
        tools=[get_weather],
        check_invariants=True,  # every request is rebuilt from the log and compared
    )


async def run(agent: Agent, text: str) -> list[SessionEvent]:
    agent.followup(text)
    await asyncio.wait_for(agent.when_idle(), 20)
    return list(agent.session.events)


def of_type(events: list[SessionEvent], type_: str) -> list[SessionEvent]:
    return [e for e in events if e.type == type_]


def weather_call(reasoning: str) -> str:
    return wt.sse(
        wt.chat_chunk({"role": "assistant", "content": None, "reasoning_content": reasoning}),
        wt.chat_chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_w1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ]
            }
        ),
        wt.chat_chunk({}, finish_reason="tool_calls"),
        "[DONE]",
    )


async def test_a_text_call_runs_through_the_agent_and_goes_back_as_tool_use(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    call = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    server.script(
        sse_reply(wt.local_stream(wt.tokens(call))), sse_reply(wt.local_stream(["11°C in Paris."]))
    )
    agent = agent_for(server, client)
    events = await run(agent, "Weather in Paris?")
    assert of_type(events, "turn/end")[-1].data["reason"] == {"kind": "completed"}
    (called,) = of_type(events, "tool/call")
    assert called.data["name"] == "get_weather"
    (result,) = of_type(events, "tool/result")
    assert result.data["message"]["content"][0]["content"][0]["text"] == "11°C, cloudy"  # type: ignore[index]
    block = of_type(events, "assistant/message")[0].data["message"]["content"][0]  # type: ignore[index]
    assert block["recoveredFrom"] == call  # type: ignore[index]
    second = server.requests[1].json["messages"]
    assert second[-2]["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    }
    assert second[-2]["content"] == ""  # the JSON text is not in the history
    assert second[-1] == {
        "role": "tool",
        "tool_call_id": called.data["callId"],
        "content": "11°C, cloudy",
    }


async def test_missing_reasoning_is_sent_after_one_retry_and_from_then_on(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    """DeepSeek behind a proxy: every assistant message must carry ``reasoning_content``."""
    server.script(
        sse_reply(wt.local_stream(["Hello."])),
        sse_reply(weather_call("Need the weather.")),
        sse_reply(wt.local_stream(["11°C."])),
        sse_reply(wt.local_stream(["Bye."])),
        checks=["reasoning-every-assistant"],
    )
    agent = agent_for(server, client)
    await run(agent, "Hi")
    events = await run(agent, "Weather in Paris?")
    # turn 2: its first request carries the plain turn-1 answer without reasoning → 400 → retried
    assert [r.rejected for r in server.requests] == [None, "reasoning-every-assistant", None, None]
    (retry,) = of_type(events, "llm/retry")
    assert retry.data["policyKey"] == "reasoning-passback" and retry.data["turn"] == 2
    assert retry.data["failure"]["code"] == "INVALID_REQUEST"  # type: ignore[index]
    headers = [e.data for e in of_type(events, "request/header")]
    assert [h["reason"] for h in headers] == ["initial", "change"]
    assert headers[-1]["header"]["config"]["reasoningPassback"] == "send"  # type: ignore[index]
    assert headers[-1]["header"]["adapterDefaults"] == {"reasoningPassback": True}  # type: ignore[index]
    assert "adapterDefaults" not in headers[0]["header"]  # type: ignore[operator]
    retried = server.requests[2].json["messages"]
    assert [m.get("reasoning_content") for m in retried if m["role"] == "assistant"] == [""]
    events = await run(agent, "Thanks")
    assert [r.rejected for r in server.requests[4:]] == [None]  # remembered: sent at once
    assert len(of_type(events, "llm/retry")) == 1
    assert of_type(events, "turn/end")[-1].data["reason"] == {"kind": "completed"}


async def test_a_refused_field_is_left_out_after_one_retry(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply(weather_call("Need the weather.")),
        sse_reply(wt.local_stream(["11°C."])),
        checks=["no-reasoning-field"],
    )
    agent = agent_for(server, client)
    events = await run(agent, "Weather in Paris?")
    # step 2 sends back the streamed reasoning on its tool-call turn; this server refuses it
    assert [r.rejected for r in server.requests] == [None, "no-reasoning-field", None]
    assert "reasoning_content" in server.requests[1].json["messages"][2]
    assert all("reasoning_content" not in m for m in server.requests[2].json["messages"])
    header = of_type(events, "request/header")[-1].data["header"]
    assert header["config"]["reasoningPassback"] == "omit"  # type: ignore[index]
    assert of_type(events, "turn/end")[-1].data["reason"] == {"kind": "completed"}


async def test_one_retry_per_step_even_when_both_ways_fail(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply(wt.local_stream(["Hello."])),
        checks=["reasoning-every-assistant", "no-reasoning-field"],
    )
    agent = agent_for(server, client)
    await run(agent, "Hi")
    events = await run(agent, "Again")
    assert [r.rejected for r in server.requests] == [
        None,
        "reasoning-every-assistant",
        "no-reasoning-field",
    ]
    end = of_type(events, "turn/end")[-1].data["reason"]
    assert end["kind"] == "error" and end["error"]["code"] == "INVALID_REQUEST"  # type: ignore[index]
    assert len(of_type(events, "llm/retry")) == 1


async def test_a_resumed_session_keeps_the_dialect(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply(wt.local_stream(["Hello."])),
        sse_reply(wt.local_stream(["Again."])),
        sse_reply(wt.local_stream(["Third."])),
        checks=["reasoning-every-assistant"],
    )
    agent = agent_for(server, client)
    await run(agent, "Hi")
    await run(agent, "Again")
    assert agent.passback.dialect_for("openai-compatible") == "send"
    assert agent.passback.dialect_for("deepseek") is None  # another server knows nothing of it
    resumed = Agent(
        provider=agent.provider, model=agent.model, session=agent.session, check_invariants=True
    )
    assert resumed.passback.dialect_for("openai-compatible") == "send"
    await run(resumed, "Third")
    assert server.requests[-1].rejected is None
