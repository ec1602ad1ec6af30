"""Images through the real ``Agent`` to the loopback server: which route gets what (issue 15).

The image bytes go the real way: a tool's render (or a user message) carries them, the log stores
them once (``image/data``), the derived history refers to them by hash, and the request to a route
that takes images gets them back from the log. ``Agent.images`` is what ``DSH_VISION`` sets: ``on``
sends images to a server the catalogue does not know, ``off`` keeps them from a vision model, and a
switch to DeepSeek in the middle of a session sends their descriptions — never an image part it
would answer with 400 ``unknown variant image_url``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import httpx

from dsh_kernel import Agent, tool
from dsh_kernel.ids import new_message_id
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.config import KeyStore, ProviderConfig, ProviderKind, make_provider
from dsh_kernel.llm.provider import Provider
from dsh_kernel.llm.types import ContentBlock, Message, TextBlock, UserSource
from dsh_kernel.session.events import SessionEvent
from tests.support import wire_transcripts as wt
from tests.support.image_blocks import B64, WITHHELD, image_block
from tests.support.sse_server import SseServer, sse_reply
from tests.unit.runtime.images import make_png

KEY = "sk-img-0000000000000000"
PNG_B = make_png(2, 2)
IMAGE_B = image_block(PNG_B, description="a 2x2 grey square")
URL_A = f"data:image/png;base64,{B64}"
URL_B = f"data:image/png;base64,{IMAGE_B.data}"


def _plot(name: str, image: ContentBlock) -> Any:
    @tool(name=name, read_only=True)
    def body(city: str = "", tz: str = "") -> str:
        """Draws a figure.

        Args:
            city: a city
            tz: a time zone
        """
        return f"{name} drawn"

    def render(args: JsonObject, value: JsonValue) -> tuple[ContentBlock, ...]:
        return (TextBlock(text=str(value)), image)

    return dataclasses.replace(body.tool_definition, render=render)


def provider(server: SseServer, client: httpx.AsyncClient, kind: ProviderKind) -> Provider:
    keys = KeyStore()
    keys.set("IMG_KEY", KEY)
    config = ProviderConfig(
        id=kind, kind=kind, base_url=server.url, api_key_env="IMG_KEY", model="m"
    )
    return make_provider(config, client, keys=keys, env={})


def agent_for(
    server: SseServer,
    client: httpx.AsyncClient,
    kind: ProviderKind,
    model: str,
    images: bool | None = None,
) -> Agent:
    agent = Agent(
        provider=provider(server, client, kind),
        model=model,
        tools=[_plot("get_weather", image_block()), _plot("get_time", IMAGE_B)],
        check_invariants=True,  # every request equals the one rebuilt from the log alone
    )
    agent.images = images
    return agent


def with_image(text: str) -> Message:
    return Message(
        id=new_message_id(),
        role="user",
        content=(TextBlock(text=text), image_block()),
        source=UserSource(),
    )


async def run(agent: Agent, message: str | Message) -> list[SessionEvent]:
    agent.followup(message)
    await asyncio.wait_for(agent.when_idle(), 20)
    return list(agent.session.events)


def configs(events: list[SessionEvent]) -> list[Any]:
    return [e.data["header"] for e in events if e.type == "request/header"]


def no_image_part(body: Any) -> bool:
    text = json.dumps(body)
    return '"image_url"' not in text and '"type": "image"' not in text and B64 not in text


async def test_the_images_of_two_calls_follow_both_tool_messages_in_one_user_message(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.OPENAI_PARALLEL_TOOLS), sse_reply(wt.OPENAI_TEXT))
    agent = agent_for(server, client, "openai", "gpt-6-luna")  # the catalogue: takes images
    events = await run(agent, "Draw both.")
    assert [e.data["sha256"] for e in events if e.type == "image/data"] == [
        image_block().sha256,
        IMAGE_B.sha256,
    ]  # the bytes, once each, in the log
    follows = "[image 1 of this result: follows in the next user message]"
    sent = server.requests[1].json["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert sent[3:] == [
        {"role": "tool", "tool_call_id": "call_aaa111", "content": f"get_weather drawn\n{follows}"},
        {"role": "tool", "tool_call_id": "call_bbb222", "content": f"get_time drawn\n{follows}"},
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "[image 1 of the result of tool call call_aaa111 (get_weather)]",
                },
                {"type": "image_url", "image_url": {"url": URL_A}},
                {
                    "type": "text",
                    "text": "[image 1 of the result of tool call call_bbb222 (get_time)]",
                },
                {"type": "image_url", "image_url": {"url": URL_B}},
            ],
        },
    ]
    (header,) = configs(events)
    assert header["config"]["images"] is True and header["adapterDefaults"]["images"] is True


async def test_vision_off_keeps_images_from_a_vision_model(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.OPENAI_TEXT))
    agent = agent_for(server, client, "openai", "gpt-6-luna", images=False)
    events = await run(agent, with_image("What is wrong with it?"))
    body = server.requests[0].json
    assert no_image_part(body)
    assert body["messages"][-1] == {
        "role": "user",
        "content": f"What is wrong with it?\n{WITHHELD}",
    }
    assert configs(events)[0]["config"]["images"] is False


async def test_vision_on_sends_images_to_a_server_the_catalogue_does_not_know(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.OPENAI_TEXT), sse_reply(wt.OPENAI_TEXT))
    agent = agent_for(server, client, "openai-compatible", "llava-local")
    await run(agent, with_image("Describe it."))  # not known to take images: its description
    assert server.requests[0].json["messages"][-1] == {
        "role": "user",
        "content": f"Describe it.\n{WITHHELD}",
    }
    agent.images = True  # DSH_VISION=on
    await run(agent, "And now?")
    sent = server.requests[1].json["messages"]
    assert sent[1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Describe it."},
            {"type": "image_url", "image_url": {"url": URL_A}},
        ],
    }  # the same history message, its bytes read back from the log


async def test_a_switch_to_deepseek_sends_the_descriptions_of_earlier_images(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.ANTHROPIC_TEXT), sse_reply(wt.OPENAI_TEXT))
    agent = agent_for(server, client, "anthropic", "claude-sonnet-5-5", images=True)
    await run(agent, with_image("Look."))
    assert server.requests[0].json["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": B64},
    }
    agent.set_route(provider=provider(server, client, "deepseek"), model="deepseek-flash")
    events = await run(agent, "And what does it show?")  # DSH_VISION=on still: DeepSeek refuses
    body = server.requests[1].json
    assert no_image_part(body)
    assert body["messages"][1] == {"role": "user", "content": f"Look.\n{WITHHELD}"}
    ends = [e.data["reason"] for e in events if e.type == "turn/end"]
    assert ends == [{"kind": "completed"}, {"kind": "completed"}]  # no 400, no error
    last = configs(events)[-1]
    assert last["config"]["images"] is False and last["adapterDefaults"]["images"] is True
