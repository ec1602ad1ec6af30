"""Image blocks on each dialect's wire, request bodies checked exactly (issue 15, item 3).

Anthropic takes images inside a ``tool_result`` and in a user turn; Chat Completions takes them in a
user message only, so the tool message stays text and the step's images follow after its last tool
message; DeepSeek takes none. A route that takes no images, and an image whose bytes are not there,
get the stand-in line with the description logged at capture. The images are real PNGs, their
blocks built as a capture builds them (base64 bytes, their sha256).
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import httpx

from dsh_kernel.ids import CallId, new_message_id
from dsh_kernel.llm.types import (
    ContentBlock,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSource,
    UserSource,
)
from tests.support import wire_transcripts as wt
from tests.support.image_blocks import B64, WITHHELD, image_block
from tests.support.providers import (
    anthropic_provider,
    assistant,
    chat_provider,
    collect,
    request,
    user,
)
from tests.support.sse_server import SseServer, sse_reply
from tests.unit.runtime.images import make_png

PNG2 = make_png(2, 2)
B64_2 = base64.b64encode(PNG2).decode()


def results(*pairs: tuple[str, tuple[ContentBlock, ...]]) -> Message:
    """One user message carrying the tool results ``(call id, content)``."""
    return Message(
        id=new_message_id(),
        role="user",
        content=tuple(ToolResultBlock(tool_call_id=CallId(c), content=b) for c, b in pairs),
        source=ToolSource(call_id=CallId(pairs[0][0])),
    )


def user_with(*blocks: ContentBlock) -> Message:
    return Message(id=new_message_id(), role="user", content=blocks, source=UserSource())


def call(call_id: str, name: str = "python") -> ToolCallBlock:
    return ToolCallBlock(id=CallId(call_id), name=name, arguments='{"code": "plot()"}')


def no_image_part(body: Any) -> bool:
    text = json.dumps(body)
    return '"image_url"' not in text and '"type": "image"' not in text and B64 not in text


MISSING = (
    '[image image/png 4x3 (not sent: its bytes are not in the session log): Figure "loss": '
    '1 axes; x "epoch" 0–10, y "loss" 0–1; 1 line ("train")]'
)
PYTHON_TURN = (
    user("Plot the loss."),
    assistant(call("call_1")),
    results(("call_1", (TextBlock(text="plotted"), image_block()))),
)

# --- Anthropic -------------------------------------------------------------------------------------


async def test_anthropic_puts_the_image_inside_the_tool_result(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.ANTHROPIC_TEXT))
    provider = anthropic_provider(server.url, client)
    await collect(provider, request(*PYTHON_TURN, model="claude-sonnet-5-5", images=True))
    assert server.requests[0].json == {
        "model": "claude-sonnet-5-5",
        "max_tokens": 32000,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Plot the loss."}]},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "call_1",
                        "name": "python",
                        "input": {"code": "plot()"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_1",
                        "content": [
                            {"type": "text", "text": "plotted"},
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": B64,
                                },
                            },
                        ],
                        "is_error": False,
                    }
                ],
            },
        ],
        "stream": True,
    }
    assert (
        hashlib.sha256(base64.b64decode(B64)).hexdigest() == image_block().sha256
    )  # a real capture's


async def test_anthropic_user_message_with_an_image(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.ANTHROPIC_TEXT))
    message = user_with(TextBlock(text="What looks wrong here?"), image_block())
    await collect(
        anthropic_provider(server.url, client),
        request(message, model="claude-sonnet-5-5", images=True),
    )
    assert server.requests[0].json["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What looks wrong here?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": B64},
                },
            ],
        }
    ]


async def test_anthropic_without_images_sends_the_stand_ins(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.ANTHROPIC_TEXT))
    history = (*PYTHON_TURN, user_with(TextBlock(text="And this one?"), image_block()))
    await collect(
        anthropic_provider(server.url, client),
        request(*history, model="claude-sonnet-5-5", images=False),
    )
    body = server.requests[0].json
    assert no_image_part(body)
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "call_1",
                "content": f"plotted\n{WITHHELD}",
                "is_error": False,
            },
            {"type": "text", "text": "And this one?"},
            {"type": "text", "text": WITHHELD},
        ],
    }


async def test_anthropic_image_without_its_bytes_is_its_stand_in(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.ANTHROPIC_TEXT))
    history = (
        user("Plot the loss."),
        assistant(call("call_1")),
        results(("call_1", (TextBlock(text="plotted"), image_block(with_data=False)))),
    )
    await collect(
        anthropic_provider(server.url, client),
        request(*history, model="claude-sonnet-5-5", images=True),
    )
    body = server.requests[0].json
    assert no_image_part(body)
    assert body["messages"][2]["content"][0]["content"] == [
        {"type": "text", "text": "plotted"},
        {"type": "text", "text": MISSING},
    ]


# --- OpenAI Chat Completions ----------------------------------------------------------------------


async def test_openai_two_calls_with_images_then_one_user_message_after_both(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.OPENAI_TEXT))
    history = (
        user("Plot both."),
        assistant(call("call_a"), call("call_b", "render")),
        results(("call_a", (TextBlock(text="first"), image_block()))),
        results(("call_b", (image_block(PNG2, description="two"), image_block()))),
        user("Compare them."),
    )
    await collect(
        chat_provider(server.url, client, profile="openai"),
        request(*history, model="gpt-6-luna", images=True),
    )
    follows = "follows in the next user message"
    assert server.requests[0].json["messages"][2:] == [
        {
            "role": "tool",
            "tool_call_id": "call_a",
            "content": f"first\n[image 1 of this result: {follows}]",
        },
        {
            "role": "tool",
            "tool_call_id": "call_b",
            "content": f"[image 1 of this result: {follows}]\n[image 2 of this result: {follows}]",
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[image 1 of the result of tool call call_a (python)]"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
                {"type": "text", "text": "[image 1 of the result of tool call call_b (render)]"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64_2}"}},
                {"type": "text", "text": "[image 2 of the result of tool call call_b (render)]"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
            ],
        },
        {"role": "user", "content": "Compare them."},
    ]


async def test_openai_user_message_with_an_image_and_one_without_bytes(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.OPENAI_TEXT))
    message = user_with(
        TextBlock(text="What looks wrong?"), image_block(), image_block(with_data=False)
    )
    await collect(
        chat_provider(server.url, client, profile="openai"),
        request(message, model="gpt-6-luna", images=True),
    )
    assert server.requests[0].json["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What looks wrong?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}},
                {"type": "text", "text": MISSING},
            ],
        }
    ]


async def test_openai_without_images_keeps_every_message_text(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.OPENAI_TEXT))
    history = (*PYTHON_TURN, user_with(TextBlock(text="And this?"), image_block()))
    await collect(
        chat_provider(server.url, client, profile="generic"),
        request(*history, model="some-local-model"),
    )
    body = server.requests[0].json
    assert no_image_part(body)
    assert body["messages"][2:] == [
        {"role": "tool", "tool_call_id": "call_1", "content": f"plotted\n{WITHHELD}"},
        {"role": "user", "content": f"And this?\n{WITHHELD}"},
    ]


# --- DeepSeek --------------------------------------------------------------------------------------


async def test_deepseek_gets_no_image_part_and_the_description(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    """Even a request that asks for images (``images=True``): DeepSeek answers an image part with
    400 ``unknown variant image_url``, so its profile never sends one."""
    server.script(sse_reply(wt.OPENAI_TEXT), sse_reply(wt.OPENAI_TEXT))
    history = (*PYTHON_TURN, user_with(TextBlock(text="Is it converging?"), image_block()))
    for images in (False, True):
        await collect(
            chat_provider(server.url, client, profile="deepseek"),
            request(*history, model="deepseek-flash", images=images),
        )
        body = server.requests[-1].json
        assert no_image_part(body)
        assert body["messages"] == [
            {"role": "user", "content": "Plot the loss."},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "python", "arguments": '{"code": "plot()"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": f"plotted\n{WITHHELD}"},
            {"role": "user", "content": f"Is it converging?\n{WITHHELD}"},
        ]
