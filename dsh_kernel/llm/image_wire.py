"""An image block on the wire: sent as an image, or as its text stand-in — the one place that says which.

A request sends its image blocks as images only when its route takes them (``GenerateRequest.images``,
from the model catalogue or ``DSH_VISION``), the block carries its bytes (``ImageBlock.data``, filled
from the log by ``session.log_images.attach_image_data``) and its media type is one the providers accept
(``SENT_MEDIA_TYPES``). Every other image goes as its **stand-in**: one bracketed line naming the
media type and size, the reason it is not shown when there is one, and the description logged at
capture (``[image image/png 1024x768 (withheld: this model takes no images): Figure "sales" …]``).
So a text-only model (DeepSeek, an unknown server), a model switch in the middle of a session and a
journal whose bytes were lost all get text, never an image part the server would refuse.

- ``withheld_reason(image, images)``: ``None`` when ``image`` goes as an image, else why not;
- ``stand_in(image, reason)``: the text line (``reason=None``: no reason, as views and exports show it);
- ``data_url(image)``: ``data:<media type>;base64,<data>`` (Chat Completions' ``image_url``);
- ``joined_text(content, image_text, sep)``: text blocks and images (through ``image_text``) as one
  string, each image on a line of its own — how a text-only wire carries a message or a tool result.

Both adapters (``providers.anthropic.serialize``, ``providers.openai_compat.serialize``) use these,
and nothing else decides whether an image is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from dsh_kernel.llm.types import ContentBlock, ImageBlock, TextBlock

SENT_MEDIA_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""What both the Messages API and Chat Completions take as image input."""

WITHHELD: Final = "withheld: this model takes no images"
MISSING: Final = "not sent: its bytes are not in the session log"
UNSUPPORTED: Final = "not sent: models take PNG, JPEG, GIF or WebP images only"


def withheld_reason(image: ImageBlock, images: bool) -> str | None:
    """``None`` when ``image`` goes to a route that takes images (``images``) as an image; else the
    reason its stand-in gives."""
    if not images:
        return WITHHELD
    if not image.data:
        return MISSING
    if image.media_type not in SENT_MEDIA_TYPES:
        return UNSUPPORTED
    return None


def stand_in(image: ImageBlock, reason: str | None = None) -> str:
    """The one-line text an image is replaced by: media type and size, ``reason``, description."""
    head = f"image {image.media_type} {image.width}x{image.height}"
    if reason:
        head += f" ({reason})"
    description = " ".join(image.description.split())
    return f"[{head}: {description}]" if description else f"[{head}]"


def data_url(image: ImageBlock) -> str:
    """The image as a ``data:`` URL; ``image.data`` must be set (``withheld_reason`` says so)."""
    assert image.data, "data_url needs the image's bytes"
    return f"data:{image.media_type};base64,{image.data}"


def joined_text(
    content: Iterable[ContentBlock], image_text: Callable[[ImageBlock], str], sep: str = ""
) -> str:
    """Text blocks joined by ``sep``, and each image as ``image_text(image)`` on a line of its own;
    other blocks are left out."""
    out = ""
    previous_image = False
    for block in content:
        if isinstance(block, TextBlock):
            piece, is_image = block.text, False
        elif isinstance(block, ImageBlock):
            piece, is_image = image_text(block), True
        else:
            continue
        if out:
            glue = sep
            if is_image or previous_image:  # an image on a line of its own, text as it was
                glue = "" if out.endswith("\n") or piece.startswith("\n") else "\n"
            out += glue
        out += piece
        previous_image = is_image
    return out
