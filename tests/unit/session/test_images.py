"""Image blocks in the log: the block's JSON, the bytes stored once, a request carrying them."""

from __future__ import annotations

import base64
import hashlib
import json

from dsh_kernel.ids import CallId, MessageId
from dsh_kernel.llm.codec import block_from_json, block_to_json, message_to_json
from dsh_kernel.llm.types import (
    GenerateRequest,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolSource,
    UserSource,
)
from dsh_kernel.session.codec import decode_event, encode_event
from dsh_kernel.session.log import Session
from dsh_kernel.session.log_images import attach_image_data, image_blocks, record_images
from tests.unit.session.scripts import new_session

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nnot-really-a-png").decode()
SHA = hashlib.sha256(base64.b64decode(PNG)).hexdigest()


def image(*, data: str | None = PNG) -> ImageBlock:
    return ImageBlock(
        sha256=SHA,
        media_type="image/png",
        width=640,
        height=480,
        size=24,
        description="Figure: 1 axes; 'loss' line",
        reduction="1280x960 → 640x480",
        data=data,
    )


def test_block_json_carries_the_reference_never_the_bytes() -> None:
    js = block_to_json(image())
    assert js == {
        "type": "image",
        "sha256": SHA,
        "mediaType": "image/png",
        "width": 640,
        "height": 480,
        "bytes": 24,
        "description": "Figure: 1 axes; 'loss' line",
        "reduction": "1280x960 → 640x480",
    }
    back = block_from_json(js)
    assert isinstance(back, ImageBlock) and back.data is None
    assert back == image()  # equality is by hash and metadata, not by whether bytes are attached


def _tool_message(*blocks: ImageBlock | TextBlock) -> Message:
    return Message(
        id=MessageId("m1"),
        role="user",
        content=(ToolResultBlock(tool_call_id=CallId("c1"), content=blocks),),
        source=ToolSource(call_id=CallId("c1")),
    )


def test_bytes_are_recorded_once_and_indexed() -> None:
    s: Session = new_session()
    msg = _tool_message(TextBlock(text="plotted"), image(), image())
    assert [b.sha256 for b in image_blocks(msg.content)] == [SHA, SHA]
    record_images(s, msg.content)
    record_images(s, msg.content)  # a second message with the same image adds nothing
    stored = [e for e in s.events if e.type == "image/data"]
    assert len(stored) == 1 and stored[0].data == {
        "sha256": SHA,
        "mediaType": "image/png",
        "data": PNG,
    }
    assert s.image_data(SHA) == PNG
    # a block without bytes (as read back from the log) records nothing
    other = new_session()
    record_images(other, (image(data=None),))
    assert len(other.events) == 0 and other.image_data(SHA) is None


def test_a_session_built_from_a_journal_knows_its_images() -> None:
    s = new_session()
    record_images(s, (image(),))
    reloaded = Session(
        header=s.header,
        seed=[ev for e in s.events if (ev := decode_event(encode_event(e), None)) is not None],
    )
    assert reloaded.image_data(SHA) == PNG


def test_a_request_carries_the_bytes_only_when_the_route_takes_images() -> None:
    s = new_session()
    record_images(s, (image(),))
    logged = Message(
        id=MessageId("u1"),
        role="user",
        content=(TextBlock(text="what is wrong here?"), image(data=None)),
        source=UserSource(),
    )
    tool = _tool_message(image(data=None))
    base = GenerateRequest(provider="p", model="m", messages=(logged, tool))
    assert attach_image_data(base, s) is base  # text-only: nothing attached

    sent = attach_image_data(
        GenerateRequest(provider="p", model="m", messages=(logged, tool), images=True), s
    )
    attached = list(image_blocks(b for m in sent.messages for b in m.content))
    assert [b.data for b in attached] == [PNG, PNG]
    # the message JSON (what the log keeps) is unchanged by attaching
    assert json.dumps(message_to_json(sent.messages[0])) == json.dumps(message_to_json(logged))
