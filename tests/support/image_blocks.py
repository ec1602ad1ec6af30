"""Image blocks as a capture makes them, from real PNG bytes: base64 data and its sha256."""

from __future__ import annotations

import base64
import hashlib

from dsh_kernel.llm.types import ImageBlock
from tests.unit.runtime.images import make_png

PNG = make_png(4, 3)
B64 = base64.b64encode(PNG).decode()
DESCRIPTION = 'Figure "loss": 1 axes; x "epoch" 0–10, y "loss" 0–1; 1 line ("train")'
WITHHELD = (
    '[image image/png 4x3 (withheld: this model takes no images): Figure "loss": 1 axes; '
    'x "epoch" 0–10, y "loss" 0–1; 1 line ("train")]'
)
"""``PNG``'s stand-in on a route that takes no images, spelled out."""


def image_block(
    png: bytes = PNG, *, description: str = DESCRIPTION, with_data: bool = True
) -> ImageBlock:
    """``png`` as an image block; its bytes attached (``data``) unless ``with_data`` is false."""
    width, height = int.from_bytes(png[16:20]), int.from_bytes(png[20:24])  # from the IHDR chunk
    return ImageBlock(
        sha256=hashlib.sha256(png).hexdigest(),
        media_type="image/png",
        width=width,
        height=height,
        size=len(png),
        description=description,
        data=base64.b64encode(png).decode() if with_data else None,
    )
