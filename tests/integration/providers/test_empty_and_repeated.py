"""Empty answers and repeated calls through the real adapters, the real ``Agent`` and the loopback
server replaying the wire shapes of llama-cpp-python and of the ``anthropic`` route (LiteLLM).

* llama-cpp-python: Qwen writes a ``python``-style call as text, the tool runs, and the model's next
  answer is empty (its first token end-of-turn): the turn completes without a reply, the tool result
  stands, and the server gets no retry. The same call three times in a row: the third is not run.
* ``anthropic``: an answer that is one empty text block, with usage 0 in / 0 out, is
  ``EMPTY_RESPONSE`` (``model-stopped``) — retried once as the prompt's answer; after a tool step it
  completes the turn without a reply — and never a count: nothing logs 0/0, the meter stays on the
  real anchor.
"""

from __future__ import annotations

import asyncio
import json

import httpx

from dsh_kernel import Agent, tool
from dsh_kernel.agent.request.meter import measure
from dsh_kernel.llm.config import KeyStore, ProviderConfig, ProviderKind, make_provider
from dsh_kernel.session.events import SessionEvent
from tests.support import wire_transcripts as wt
from tests.support.sse_server import SseServer, sse_reply

RAN: list[str] = []


@tool(read_only=True)
def get_weather(city: str) -> str:
    """Weather for a city.

    Args:
        city: the city name
    """
    RAN.append(city)
    return "11°C, cloudy" if city == "Paris" else "unknown"


def agent_for(server: SseServer, client: httpx.AsyncClient, kind: ProviderKind) -> Agent:
    config = ProviderConfig(
        id=kind, kind=kind, base_url=server.url, api_key_env="E2E_KEY", model="m"
    )
    keys = KeyStore()
    keys.set("E2E_KEY", "sk-e2e-0000000000000000")
    provider = make_provider(config, client, keys=keys, env={})
    return Agent(
        provider=provider,
        model="claude-x" if kind == "anthropic" else "local",
        tools=[get_weather],
        check_invariants=True,  # every request rebuilt from the log; the log's structure checked
    )


async def run(agent: Agent, text: str) -> list[SessionEvent]:
    RAN.clear()
    agent.followup(text)
    await asyncio.wait_for(agent.when_idle(), 30)
    return list(agent.session.events)


def of_type(events: list[SessionEvent], type_: str) -> list[SessionEvent]:
    return [e for e in events if e.type == type_]


def ends(events: list[SessionEvent]) -> list[object]:
    return [e.data["reason"] for e in of_type(events, "turn/end")]


def finishes(events: list[SessionEvent]) -> list[object]:
    return [
        e.data["chunk"]["reason"]  # type: ignore[index]
        for e in of_type(events, "assistant/chunk")
        if e.data["chunk"]["type"] == "finish"  # type: ignore[index]
    ]


TEXT_CALL = json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})


def qwen_call(n: int) -> str:
    """Qwen's call written as text, as llama-cpp-python streams it (one response id per answer)."""
    return wt.local_stream(
        wt.tokens(TEXT_CALL), rid=f"chatcmpl-{n:08d}-0000-0000-0000-000000000000"
    )


async def test_llama_cpp_empty_answer_after_a_tool_completes_without_a_reply(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply(qwen_call(1)),
        sse_reply(wt.LOCAL_EMPTY_ANSWER),
        sse_reply(wt.local_stream(wt.tokens("It is 11°C and cloudy."))),
    )
    agent = agent_for(server, client, "openai-compatible")
    events = await run(agent, "Weather in Paris?")
    assert RAN == ["Paris"]
    assert len(server.requests) == 2  # no retry of the empty answer
    assert ends(events) == [{"kind": "completed", "note": "no-reply"}]
    assert agent.last_error is None
    (result,) = of_type(events, "tool/result")
    assert "11°C, cloudy" in json.dumps(result.data["message"], ensure_ascii=False)
    last = finishes(events)[-1]
    assert last["failure"]["detail"] == "model-stopped"  # type: ignore[index]
    assert server.requests[1].json["messages"][-1]["role"] == "tool"
    # The next turn goes on from the tool result, which stays in the history.
    events = await run(agent, "So?")
    roles = [m["role"] for m in server.requests[2].json["messages"]]
    assert roles[-2:] == ["tool", "user"], roles
    assert ends(events)[-1] == {"kind": "completed"}


async def test_llama_cpp_same_call_three_times_the_third_is_not_run(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply(qwen_call(1)),
        sse_reply(qwen_call(2)),
        sse_reply(qwen_call(3)),
        sse_reply(qwen_call(4)),
    )
    agent = agent_for(server, client, "openai-compatible")
    events = await run(agent, "Weather in Paris?")
    assert RAN == ["Paris", "Paris"]  # two ran; the third and fourth did not
    assert len(server.requests) == 4  # not 100: the fourth identical call ended the turn
    codes = [e.data.get("error", {}).get("code") for e in of_type(events, "tool/result")]  # type: ignore[union-attr]
    assert codes == [None, None, "REPEATED_CALL", "REPEATED_CALL"]
    # The fourth request told the model, in the third call's result, that it has the answer.
    told = server.requests[3].json["messages"][-1]
    assert told["role"] == "tool" and "not run" in told["content"]
    assert "use that result" in told["content"]
    assert ends(events) == [{"kind": "completed", "note": "repeated-call"}]


async def test_anthropic_empty_text_block_is_empty_response_and_no_count(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply(wt.anthropic_text("Hello.", input_tokens=40, output_tokens=3)),
        sse_reply(wt.ANTHROPIC_EMPTY_TEXT_BLOCK),
        sse_reply(wt.ANTHROPIC_EMPTY_TEXT_BLOCK),
    )
    agent = agent_for(server, client, "anthropic")
    await run(agent, "hi")
    events = await run(agent, "say nothing")
    assert len(server.requests) == 3  # the empty answer was retried once, as on the other route
    (end,) = ends(events)[1:]
    assert end["kind"] == "error"  # type: ignore[index]
    assert end["error"]["code"] == "EMPTY_RESPONSE"  # type: ignore[index]
    assert end["error"]["detail"] == "model-stopped"  # type: ignore[index]
    # Nothing logged a 0/0 usage, so the meter is still anchored on the first answer's real one.
    usages = [e.data["chunk"] for e in of_type(events, "assistant/chunk")]
    assert [u["usage"] for u in usages if u["type"] == "usage"] == [  # type: ignore[index]
        {"inputTokens": 40, "outputTokens": 3}
    ]
    m = measure(agent.session)
    assert m.baseline == "usage" and m.baseline_tokens == 43


async def test_anthropic_empty_text_block_after_a_tool_completes_without_a_reply(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.ANTHROPIC_THINKING_TOOL), sse_reply(wt.ANTHROPIC_EMPTY_TEXT_BLOCK))
    agent = agent_for(server, client, "anthropic")
    events = await run(agent, "Weather in Paris?")
    assert RAN == ["Paris"] and len(server.requests) == 2
    assert ends(events) == [{"kind": "completed", "note": "no-reply"}]
    assert len(of_type(events, "assistant/message")) == 1  # no empty message to send back
