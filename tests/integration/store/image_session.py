"""A session with images, recorded by a real ``Agent`` (the provider is the only fake): a user
message carrying an image, a ``plot`` tool whose results carry images, routes that take images and
one that does not, and a last image no request followed.

The PNGs are real (built here from raw pixels with ``zlib``), so a reader that decodes them — an
image viewer on an exported file, ``PIL.Image.open`` — sees what the test wrote.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import struct
import zlib
from dataclasses import dataclass

from dsh_kernel import Agent
from dsh_kernel.agent.hooks import Next, RequestPayload
from dsh_kernel.ids import new_message_id
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import ImageBlock, LlmCallConfig, Message, TextBlock, UserSource
from dsh_kernel.store.journal import JournalWriter
from dsh_kernel.store.layout import Store
from dsh_kernel.testing import ScriptEntry, text_response, tool_call_response
from dsh_kernel.tools.types import ToolContext, ToolDefinition

from .conftest import TOOLS, chat, make_agent, usage


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A valid RGB PNG of one colour."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def image_block(
    raw: bytes, width: int, height: int, description: str, reduction: str | None = None
) -> ImageBlock:
    """The block a capture makes of ``raw``: its hash, size and description, the bytes attached."""
    return ImageBlock(
        sha256=hashlib.sha256(raw).hexdigest(),
        media_type="image/png",
        width=width,
        height=height,
        size=len(raw),
        description=description,
        reduction=reduction,
        data=base64.b64encode(raw).decode("ascii"),
    )


RED = png(4, 3, (255, 0, 0))
GREEN = png(2, 2, (0, 160, 0))
BLUE = png(3, 1, (0, 0, 255))
PHOTO = png(5, 5, (250, 200, 10))

PLOTS: dict[str, ImageBlock] = {
    "red": image_block(RED, 4, 3, "Figure: 1 axes; title 'loss'; 1 line", "8x6 PNG → 4x3 PNG"),
    "green": image_block(GREEN, 2, 2, "Figure: 1 axes; bar chart of 2 bars"),
    "blue": image_block(BLUE, 3, 1, "Figure: a blue strip"),
}
USER_IMAGE = image_block(PHOTO, 5, 5, "A yellow square the user attached")


def _plot_run(args: JsonObject, ctx: ToolContext) -> JsonValue:
    if args.get("last"):
        ctx.conclude_turn()  # the turn ends with this result: no request follows it
    return str(args.get("name", ""))


def _plot_render(args: JsonObject, value: JsonValue) -> tuple[TextBlock | ImageBlock, ...]:
    del args
    name = str(value)
    return (TextBlock(text=f"drew {name}"), PLOTS[name])


plot_tool = ToolDefinition(
    name="plot",
    description="Draw a named plot.",
    parameters={
        "type": "object",
        "properties": {"name": {"type": "string"}, "last": {"type": "boolean"}},
        "required": ["name"],
    },
    execute=_plot_run,
    render=_plot_render,
    read_only=True,
)

PROMPT_1 = "What is in this picture? Then plot red."
PROMPT_2 = "Now plot green and blue (I switched to a text-only model)."
PROMPT_3 = "Plot red once more, and stop there."


def script(*, reported: bool = True) -> tuple[ScriptEntry, ...]:
    """The model's side; ``reported=False``: the server sends no usage (the store estimates it)."""
    u = usage() if reported else None
    return (
        # turn 1 (a route that takes images): the user's image, then a plot
        tool_call_response("plot", {"name": "red"}, call_id="c-red", usage=u),
        text_response("A yellow square; the plot is red.", usage=u),
        # turn 2 (text-only): two plots, one step each
        tool_call_response("plot", {"name": "green"}, call_id="c-green", usage=u),
        tool_call_response("plot", {"name": "blue"}, call_id="c-blue", usage=u),
        text_response("Green and blue, as described.", usage=u),
        # turn 3 (images again): the plot concludes the turn, no request follows it
        tool_call_response("plot", {"name": "red", "last": True}, call_id="c-last", usage=u),
    )


@dataclass(slots=True)
class Vision:
    """The route's ``images`` flag, switched between turns (a model switch in the session)."""

    on: bool = True

    async def __call__(self, payload: RequestPayload, nxt: Next[LlmCallConfig]) -> LlmCallConfig:
        config = await nxt()
        # a text-only route leaves the flag unset, as the catalogue does
        return dataclasses.replace(config, images=True if self.on else None)


def user_message(text: str, *images: ImageBlock) -> Message:
    return Message(
        id=new_message_id(),
        role="user",
        content=(TextBlock(text=text), *images),
        source=UserSource(),
    )


async def record_image_session(
    store: Store, *, reported: bool = True
) -> tuple[Agent, JournalWriter]:
    """Three turns: (1, vision) a prompt with the user's image and a red plot; (2, text-only) green
    and blue plots; (3, vision) red again, concluding the turn. The writer is flushed, not closed."""
    agent, provider, writer = make_agent(
        store, script(reported=reported), tools=(*TOOLS, plot_tool)
    )
    vision = Vision()
    agent.hooks.request.on(vision)
    agent.followup(user_message(PROMPT_1, USER_IMAGE))
    await agent.when_idle()
    vision.on = False
    await chat(agent, PROMPT_2)
    vision.on = True
    await chat(agent, PROMPT_3)
    provider.assert_consumed()
    writer.flush()
    return agent, writer


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def sha(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()
