"""Image bytes in the log: stored once, referenced by hash, attached to a request only when sent.

An ``image`` block (``llm.types.ImageBlock``) names its bytes by ``sha256``; the bytes themselves are
one ``image/data`` event per session and hash. Keeping them in the journal (rather than in a blob
directory beside it) keeps the journal the interchange: an export, an ``import_journal``, a fork or a
replay carries the images with everything else, and nothing outside the file can go missing. Keeping
them out of the blocks keeps every later event light: a message, a request header or a replaced
surface range refers to an image by its hash, never repeats its bytes.

- ``record_images(session, blocks)`` appends the ``image/data`` of every block that carries fresh
  bytes (``data``) the session does not hold yet — call it before appending the event whose message
  holds the blocks, so the bytes are durable no later than the reference;
- ``attach_image_data(request, session)`` returns the request with each image block's ``data`` filled
  from the log when the route takes images (``GenerateRequest.images``), unchanged otherwise;
- ``image_blocks(blocks)`` walks blocks, into tool results.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace

from dsh_kernel.llm.types import ContentBlock, GenerateRequest, ImageBlock, Message, ToolResultBlock
from dsh_kernel.session.log import Session
from dsh_kernel.session.payloads import ImageData


def image_blocks(blocks: Iterable[ContentBlock]) -> Iterator[ImageBlock]:
    """The image blocks among ``blocks`` and inside their tool results, in order."""
    for block in blocks:
        if isinstance(block, ImageBlock):
            yield block
        elif isinstance(block, ToolResultBlock):
            yield from image_blocks(block.content)


def record_images(session: Session, blocks: Iterable[ContentBlock]) -> None:
    """Append ``image/data`` for each image among ``blocks`` whose bytes the session lacks."""
    for image in image_blocks(blocks):
        if image.data is not None and session.image_data(image.sha256) is None:
            session.append(
                "image/data",
                ImageData(sha256=image.sha256, mediaType=image.media_type, data=image.data),
            )


def attach_image_data(request: GenerateRequest, session: Session) -> GenerateRequest:
    """``request`` with its image blocks' bytes filled in from the log, when the route takes images.

    A block whose bytes the log does not hold (a journal edited by hand) stays without them; the
    adapters send its description then."""
    if not request.images or not any(
        True for m in request.messages for _ in image_blocks(m.content)
    ):
        return request
    return replace(request, messages=tuple(_attach(m, session) for m in request.messages))


def _attach(message: Message, session: Session) -> Message:
    # always rebuilt: blocks compare equal with or without their bytes
    return replace(message, content=tuple(_attach_block(b, session) for b in message.content))


def _attach_block(block: ContentBlock, session: Session) -> ContentBlock:
    if isinstance(block, ImageBlock):
        data = block.data or session.image_data(block.sha256)
        return block if data is block.data else replace(block, data=data)
    if isinstance(block, ToolResultBlock):
        content = tuple(_attach_block(b, session) for b in block.content)
        return replace(block, content=content)
    return block
