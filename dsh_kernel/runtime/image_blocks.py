"""Image blocks for the model, from a run's display outputs or a live object, with their notes.

``output_image_blocks(outputs, caps)`` walks display outputs (nbformat JSON) in order and returns
``(blocks, notes)``: one ``ImageBlock`` (``data`` = base64 of the reduced bytes, ``runtime.image_reduce``)
per output holding a PNG, JPEG, GIF or WebP, up to ``caps.per_call``; its ``description`` is the one
the capture put in the output's metadata (``runtime.figures.DESCRIPTION_KEY``), else the image's
size and mode. Every image not sent is named in one ``notes`` line — an SVG, corrupt data, a bomb,
one over the byte cap, one whose bytes the run's output cap dropped, those over the per-call limit
(counted without being decoded) — with images of the same reason on one line
(``"[images 2, 3 not sent: corrupt PNG data (…)]"``). Nothing here raises for an output's content.

``object_image_block(obj, caps)`` is the same for a live figure, PIL image or
``IPython.display.Image`` (`` $`fig` `` in a chat message): an ``ImageBlock`` or a one-line reason.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from typing import Final

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import ImageBlock
from dsh_kernel.runtime.figures import (
    DESCRIPTION_KEY,
    describe_image_object,
    image_payload,
    is_image_object,
)
from dsh_kernel.runtime.image_reduce import (
    READ_TYPES,
    SVG_REASON,
    ImageCaps,
    ReducedImage,
    WithheldImage,
    reduce_image,
)

_IMAGE_PREFERENCE: Final = READ_TYPES
"""The first of these an output holds is the one sent (a bundle may carry PNG and JPEG both)."""


def to_block(reduced: ReducedImage, description: str | None) -> ImageBlock:
    """The block for a reduced image; without a description, its size and mode."""
    text = description or f"an image ({reduced.width}x{reduced.height}, mode {reduced.mode})"
    return ImageBlock(
        sha256=reduced.sha256,
        media_type=reduced.media_type,
        width=reduced.width,
        height=reduced.height,
        size=len(reduced.data),
        description=text,
        reduction=reduced.reduction,
        data=base64.b64encode(reduced.data).decode("ascii"),
    )


def output_image_blocks(
    outputs: Iterable[Mapping[str, JsonValue]], caps: ImageCaps
) -> tuple[tuple[ImageBlock, ...], tuple[str, ...]]:
    """See the module docstring."""
    blocks: list[ImageBlock] = []
    withheld: dict[str, list[int]] = {}
    over_limit = 0
    index = 0
    for output in outputs:
        found = _image_of(output)
        if found is None:
            continue
        index += 1
        if isinstance(found, str):
            withheld.setdefault(found, []).append(index)
            continue
        if len(blocks) >= caps.per_call:
            over_limit += 1
            continue
        mime, payload, description = found
        try:
            raw = base64.b64decode(payload, validate=False)
        except (binascii.Error, ValueError):
            withheld.setdefault(f"its {mime} data is not base64", []).append(index)
            continue
        outcome = reduce_image(raw, mime, caps)
        if isinstance(outcome, WithheldImage):
            withheld.setdefault(outcome.reason, []).append(index)
        else:
            blocks.append(to_block(outcome, description))
    notes = [_withheld_note(reason, numbers) for reason, numbers in withheld.items()]
    if over_limit:
        more = " more" if blocks else ""
        notes.append(
            f"[{over_limit}{more} image{'s' if over_limit != 1 else ''} not sent: the limit is "
            f"{caps.per_call} per call (DSH_IMAGES_PER_CALL)]"
        )
    return tuple(blocks), tuple(notes)


def _withheld_note(reason: str, numbers: list[int]) -> str:
    if len(numbers) == 1:
        return f"[image {numbers[0]} not sent: {reason}]"
    shown = ", ".join(str(n) for n in numbers[:10])
    more = f" and {len(numbers) - 10} more" if len(numbers) > 10 else ""
    return f"[images {shown}{more} not sent: {reason}]"


def _image_of(output: Mapping[str, JsonValue]) -> tuple[str, str, str | None] | str | None:
    """``(mime, base64, description)`` of the image an output holds; a reason when it holds one
    that cannot be sent; ``None`` when it holds none."""
    data = output.get("data")
    if not isinstance(data, dict):
        return None
    metadata = output.get("metadata")
    meta: JsonObject = metadata if isinstance(metadata, dict) else {}
    description = meta.get(DESCRIPTION_KEY)
    for mime in _IMAGE_PREFERENCE:
        payload = data.get(mime)
        if isinstance(payload, str) and payload:
            return mime, payload, description if isinstance(description, str) else None
    if "image/svg+xml" in data:
        return SVG_REASON
    note = meta.get("dsh")
    dropped = note.get("droppedMimeTypes") if isinstance(note, dict) else None
    if isinstance(dropped, list) and any(
        isinstance(m, str) and m in _IMAGE_PREFERENCE for m in dropped
    ):
        return "the run's output went over its size cap, so the image was not kept"
    return None


def object_image_block(obj: object, caps: ImageCaps) -> ImageBlock | str | None:
    """An image block for a live image object (see the module docstring), a one-line reason it
    cannot be one, or ``None`` when ``obj`` is no image object."""
    try:
        payload = image_payload(obj)
    except Exception as exc:
        return f"it could not be drawn ({type(exc).__name__}: {exc})"
    if payload is None:
        return "it holds no image bytes (an image by URL)" if is_image_object(obj) else None
    raw, mime = payload
    outcome = reduce_image(raw, mime, caps)
    if isinstance(outcome, WithheldImage):
        return outcome.reason
    return to_block(outcome, describe_image_object(obj))
