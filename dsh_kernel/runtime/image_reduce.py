"""Reducing one image before a model sees it: decode, downscale, re-encode, cap — or withhold.

``reduce_image(raw, media_type, caps)`` returns a ``ReducedImage`` (the bytes to send, their media
type, size, sha256 and a ``reduction`` text such as ``"2000x1500 PNG 412.3 kB → 1024x768 PNG
88.1 kB"``, ``None`` when sent as captured) or a ``WithheldImage`` whose ``reason`` is one line. It
never raises for bad bytes and never decodes an image too large to hold:

1. **Decode** with Pillow: PNG, JPEG, and what else Pillow reads (GIF and WebP are sent as their first
   frame, re-encoded). SVG is never rasterised (``image/svg+xml`` is withheld, saying so). Corrupt or
   truncated data is withheld with the decoder's complaint.
2. **Bombs**: the header's size is read first (``Image.open`` is lazy). A JPEG is decoded at 1/2,
   1/4 or 1/8 scale when that still covers ``max_side`` (``Image.draft``), so a 50-megapixel photo
   costs a few megapixels; any other image over ``MAX_DECODE_PIXELS`` is withheld before a byte of
   pixels is allocated (Pillow's own ``DecompressionBombError`` is caught too).
3. **Downscale** to a long side of at most ``caps.max_side`` (Lanczos).
4. **Re-encode** when it pays: a downscaled image (or a GIF/WebP/other) becomes PNG, or JPEG
   (quality 85) when the image has no transparency and the JPEG is at most half the PNG. An image that
   needed no downscale keeps its own bytes, unless a JPEG of it is at most half their size (an opaque
   PNG photo) — or they are over the byte cap.
5. **Cap** bytes at ``caps.max_bytes``: over it, the image is downscaled further (up to three times,
   each by the square root of the ratio); still over it, it is withheld.

Without Pillow importable every image is withheld with one line saying so. ``ImageCaps`` holds the
three configurable limits (``kernel.configuration`` reads them from ``DSH_IMAGE_MAX_SIDE``,
``DSH_IMAGES_PER_CALL``, ``DSH_IMAGE_MAX_BYTES`` and the kernel's traitlets); out-of-range values are a
``UsageError`` naming the setting and the range.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeAlias

from dsh_kernel.errors import UsageError
from dsh_kernel.runtime.text import format_size

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

KIB: Final = 1024

MAX_DECODE_PIXELS: Final = 36_000_000
"""Images with more pixels than this (e.g. 8000x4500) are not decoded at full size: ~144 MB as RGBA."""

SENT_TYPES: Final = ("image/png", "image/jpeg")
"""What a reduced image is sent as."""

READ_TYPES: Final = (*SENT_TYPES, "image/gif", "image/webp")
"""Display-output types reduced into a sent image (anything Pillow reads is accepted as raw bytes)."""

SVG_REASON: Final = "SVG is not sent to the model (it is not rasterised); show it as a PNG"

_JPEG_QUALITY: Final = 85
_JPEG_GAIN: Final = 0.5
"""JPEG is chosen only when it is at most this fraction of the PNG: plots stay crisp PNGs."""
_FURTHER_DOWNSCALES: Final = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageCaps:
    """Limits on the images a model is sent: ``max_side`` px (long side), ``per_call`` images per
    tool call or chat message, ``max_bytes`` per image after reduction."""

    max_side: int = 1024
    per_call: int = 4
    max_bytes: int = 512 * KIB

    def __post_init__(self) -> None:
        check_image_setting("max_side", self.max_side)
        check_image_setting("per_call", self.per_call)
        check_image_setting("max_bytes", self.max_bytes)


IMAGE_SETTINGS: Final = {
    "max_side": (64, 8192, "the longest side in pixels"),
    "per_call": (0, 50, "the number of images per call"),
    "max_bytes": (8 * KIB, 20 * 1024 * KIB, "the bytes per image"),
}
"""Each ``ImageCaps`` field: its accepted range (inclusive) and what it counts."""


def check_image_setting(field: str, value: int, where: str = "", given: str | None = None) -> int:
    """``value`` when it is in ``IMAGE_SETTINGS[field]``'s range, else a ``UsageError`` that starts
    with ``where`` (e.g. ``"DSH_IMAGE_MAX_SIDE="``; empty: ``ImageCaps.<field>=``) and ``given``
    (the text it was read from; default: ``repr(value)``)."""
    lo, hi, what = IMAGE_SETTINGS[field]
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:  # pyright: ignore[reportUnnecessaryIsInstance]
        label = where or f"ImageCaps.{field}="
        raise UsageError(
            f"{label}{given if given is not None else repr(value)} is out of range: give {what}, "
            f"a whole number from {lo:,} to {hi:,}"
        )
    return value


DEFAULT_IMAGE_CAPS: Final = ImageCaps()


@dataclass(frozen=True, slots=True, kw_only=True)
class ReducedImage:
    """An image ready to send: ``data`` are the bytes, ``sha256`` their hex digest."""

    data: bytes = field(repr=False)
    media_type: str
    width: int
    height: int
    sha256: str
    reduction: str | None
    """How the original was reduced; ``None`` when these are its own bytes."""
    mode: str
    """The decoded image's Pillow mode (``RGB``, ``RGBA``, ``L`` …), for a fallback description."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WithheldImage:
    """An image that is not sent; ``reason`` is one line (``"corrupt PNG data (…)"``)."""

    reason: str


ImageOutcome: TypeAlias = ReducedImage | WithheldImage


def reduce_image(raw: bytes, media_type: str, caps: ImageCaps = DEFAULT_IMAGE_CAPS) -> ImageOutcome:
    """See the module docstring. Never raises for the image's content."""
    label = _label(media_type)
    if media_type == "image/svg+xml":
        return WithheldImage(reason=SVG_REASON)
    try:
        from PIL import Image
    except ImportError:
        return WithheldImage(
            reason="the image library Pillow is not importable (pip install pillow)"
        )
    try:
        with warnings.catch_warnings():
            # the pixel count is checked here, below Pillow's limit, after a JPEG's draft
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            return _reduce(raw, label, caps)
    except Image.UnidentifiedImageError:
        return WithheldImage(reason=f"corrupt {label} data (not an image Pillow can read)")
    except Image.DecompressionBombError as exc:
        return WithheldImage(reason=f"{label} is too large to decode safely ({exc})")
    except MemoryError:
        return WithheldImage(reason=f"{label} is too large to decode (out of memory)")
    except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError … for bad data
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return WithheldImage(reason=f"corrupt {label} data ({detail[:120]})")


def _label(media_type: str) -> str:
    sub = media_type.partition("/")[2] or media_type
    return {"svg+xml": "SVG", "jpeg": "JPEG"}.get(sub, sub.upper())


def _reduce(raw: bytes, label: str, caps: ImageCaps) -> ImageOutcome:
    from PIL import Image

    img = Image.open(io.BytesIO(raw))
    width, height = img.size
    fmt = img.format or label
    if width <= 0 or height <= 0:
        return WithheldImage(reason=f"{label} has no pixels ({width}x{height})")
    if fmt == "JPEG" and max(width, height) > caps.max_side:
        img.draft("RGB", _draft_target(width, height, caps.max_side))
    if img.size[0] * img.size[1] > MAX_DECODE_PIXELS:
        mp = width * height / 1e6
        return WithheldImage(
            reason=f"{width}x{height} {fmt} is {mp:.1f} megapixels, over the "
            f"{MAX_DECODE_PIXELS / 1e6:.0f}-megapixel limit for reduction"
        )
    img.load()
    original = f"{width}x{height} {fmt} {format_size(len(raw))}"
    frames = getattr(img, "n_frames", 1)
    suffix = " (first frame)" if isinstance(frames, int) and frames > 1 else ""
    img = _normalised(img)
    keep_raw = fmt in ("PNG", "JPEG") and max(width, height) <= caps.max_side
    side = min(caps.max_side, max(width, height))
    for _ in range(_FURTHER_DOWNSCALES + 2):
        scaled = _scaled(img, side)
        data, media = _encode(scaled, raw if keep_raw else None, fmt)
        if len(data) <= caps.max_bytes:
            w, h = scaled.size
            reduction = None
            if data is not raw:
                reduction = f"{original} → {w}x{h} {_label(media)} {format_size(len(data))}{suffix}"
            return ReducedImage(
                data=data,
                media_type=media,
                width=w,
                height=h,
                sha256=hashlib.sha256(data).hexdigest(),
                reduction=reduction,
                mode=scaled.mode,
            )
        if keep_raw:  # its own bytes are too big: re-encode at the same size first
            keep_raw = False
            continue
        side = max(16, int(max(scaled.size) * (caps.max_bytes / len(data)) ** 0.5 * 0.9))
    return WithheldImage(
        reason=f"{original} is over {format_size(caps.max_bytes)} per image even at "
        f"{side}px (DSH_IMAGE_MAX_BYTES)"
    )


def _draft_target(width: int, height: int, max_side: int) -> tuple[int, int]:
    """The size a JPEG draft may shrink to and still cover ``max_side`` on the long side."""
    scale = max_side / max(width, height)
    return max(1, int(width * scale)), max(1, int(height * scale))


def _normalised(img: PILImage) -> PILImage:
    """A mode every encoder here takes: palette with transparency → RGBA, CMYK/16-bit/float → RGB
    or L."""
    if img.mode in ("RGB", "RGBA", "L", "LA"):
        return img
    if img.mode == "P" or img.mode == "PA":
        return img.convert("RGBA" if "transparency" in img.info or img.mode == "PA" else "RGB")
    if img.mode.startswith("I"):  # 16-bit grey: keep the top 8 bits
        return img.convert("I").point(lambda v: v / 256).convert("L")
    if img.mode == "1":
        return img.convert("L")
    return img.convert("RGBA" if "A" in img.getbands() else "RGB")


def _scaled(img: PILImage, side: int) -> PILImage:
    from PIL import Image

    width, height = img.size
    if max(width, height) <= side:
        return img
    scale = side / max(width, height)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return img.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)


def _opaque(img: PILImage) -> bool:
    if "A" not in img.getbands():
        return True
    low, _high = img.getchannel("A").getextrema()
    return low == 255


def _encode(img: PILImage, raw: bytes | None, fmt: str) -> tuple[bytes, str]:
    """The smallest acceptable encoding (see the module docstring); ``raw`` (the original bytes,
    when the image was not scaled) is returned as is when nothing beats it."""
    jpeg = _jpeg(img) if _opaque(img) else None
    if raw is not None:
        media = "image/jpeg" if fmt == "JPEG" else "image/png"
        if jpeg is not None and media == "image/png" and len(jpeg) <= len(raw) * _JPEG_GAIN:
            return jpeg, "image/jpeg"
        return raw, media
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False, compress_level=7)
    png = buf.getvalue()
    if jpeg is not None and len(jpeg) <= len(png) * _JPEG_GAIN:
        return jpeg, "image/jpeg"
    return png, "image/png"


def _jpeg(img: PILImage) -> bytes:
    buf = io.BytesIO()
    rgb = img if img.mode in ("RGB", "L") else img.convert("RGB")
    rgb.save(buf, format="JPEG", quality=_JPEG_QUALITY, optimize=True)
    return buf.getvalue()
