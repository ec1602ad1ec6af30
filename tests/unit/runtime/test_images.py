"""Reducing one image (``runtime.image_reduce``): dimensions, re-encoding, the byte cap, bombs, corrupt
data, SVG, GIF/WebP and a missing Pillow — each a defined outcome, never an exception."""

from __future__ import annotations

import hashlib
import io
import re
import sys

import pytest
from PIL import Image, ImageDraw

from dsh_kernel.errors import UsageError
from dsh_kernel.runtime.image_reduce import (
    MAX_DECODE_PIXELS,
    SVG_REASON,
    ImageCaps,
    ReducedImage,
    WithheldImage,
    reduce_image,
)

from .images import make_bomb_png, make_png


def encode(img: Image.Image, fmt: str = "PNG", **kw: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def plot_like(width: int, height: int, mode: str = "RGB") -> Image.Image:
    """Flat colours and thin lines: what a chart looks like to an encoder."""
    img = Image.new(mode, (width, height), "white")
    draw = ImageDraw.Draw(img)
    for i in range(0, width, max(1, width // 12)):
        draw.line((i, height, i + width // 24, height // 3), fill="blue", width=3)
    draw.rectangle((width // 10, height // 10, width // 5, height // 5), fill="orange")
    return img


def photo_like(width: int, height: int) -> Image.Image:
    """Noise: what a photograph looks like to an encoder (PNG is poor at it, JPEG good)."""
    return Image.effect_noise((width, height), 40).convert("RGB")


def reduced(outcome: object) -> ReducedImage:
    assert isinstance(outcome, ReducedImage), outcome
    return outcome


def decoded(r: ReducedImage) -> Image.Image:
    img = Image.open(io.BytesIO(r.data))
    img.load()
    return img


def test_a_small_png_is_sent_as_captured() -> None:
    raw = make_png(640, 480)
    r = reduced(reduce_image(raw, "image/png"))
    assert r.data == raw
    assert (r.media_type, r.width, r.height, r.reduction) == ("image/png", 640, 480, None)
    assert r.sha256 == hashlib.sha256(raw).hexdigest()


def test_a_large_png_is_downscaled_to_a_long_side_of_1024() -> None:
    raw = encode(plot_like(2000, 1500))
    r = reduced(reduce_image(raw, "image/png"))
    assert (r.width, r.height) == (1024, 768)
    assert decoded(r).size == (1024, 768)
    assert r.media_type == "image/png"  # a chart stays a crisp PNG
    assert r.reduction is not None
    assert re.fullmatch(r"2000x1500 PNG [\d.]+ kB → 1024x768 PNG [\d.]+ kB", r.reduction)
    assert r.sha256 == hashlib.sha256(r.data).hexdigest()


def test_the_long_side_is_configurable_and_portrait_images_keep_their_shape() -> None:
    raw = encode(plot_like(1500, 3000))
    r = reduced(reduce_image(raw, "image/png", ImageCaps(max_side=256)))
    assert (r.width, r.height) == (128, 256)
    assert decoded(r).size == (128, 256)


def test_an_opaque_photo_becomes_a_jpeg_when_that_is_much_smaller() -> None:
    raw = encode(photo_like(1200, 900))
    r = reduced(reduce_image(raw, "image/png", ImageCaps(max_bytes=20 * 1024 * 1024)))
    assert r.media_type == "image/jpeg"
    assert decoded(r).format == "JPEG"
    assert len(r.data) * 2 <= len(encode(decoded(r).convert("RGB")))
    assert r.reduction is not None and "→ 1024x768 JPEG" in r.reduction


def test_an_unscaled_photo_png_is_re_encoded_only_because_it_gets_smaller() -> None:
    raw = encode(photo_like(800, 600))
    r = reduced(reduce_image(raw, "image/png", ImageCaps(max_bytes=20 * 1024 * 1024)))
    assert (r.width, r.height, r.media_type) == (800, 600, "image/jpeg")
    assert len(r.data) <= len(raw) // 2


def test_transparency_keeps_png() -> None:
    img = photo_like(1200, 900).convert("RGBA")
    img.putalpha(Image.linear_gradient("L").resize((1200, 900)))
    r = reduced(reduce_image(encode(img), "image/png", ImageCaps(max_bytes=20 * 1024 * 1024)))
    assert r.media_type == "image/png"
    assert decoded(r).mode == "RGBA"


def test_an_image_over_the_byte_cap_is_downscaled_further_until_it_fits() -> None:
    img = photo_like(1024, 1024).convert("RGBA")  # noise with alpha: PNG, and big
    img.putalpha(200)
    caps = ImageCaps(max_bytes=64 * 1024)
    r = reduced(reduce_image(encode(img), "image/png", caps))
    assert len(r.data) <= caps.max_bytes
    assert max(r.width, r.height) < 1024
    assert decoded(r).size == (r.width, r.height)
    assert r.reduction is not None and r.reduction.startswith("1024x1024 PNG")


def test_a_fifty_megapixel_png_is_withheld_before_it_is_decoded() -> None:
    raw = make_bomb_png(8000, 6250)  # 200 MB as RGBA; under 1 MB of file
    outcome = reduce_image(raw, "image/png")
    assert isinstance(outcome, WithheldImage)
    assert outcome.reason == (
        f"8000x6250 PNG is 50.0 megapixels, over the {MAX_DECODE_PIXELS // 1_000_000}-megapixel "
        "limit for reduction"
    )


def test_a_fifty_megapixel_jpeg_is_decoded_at_a_fraction_of_its_size() -> None:
    raw = encode(Image.new("L", (8000, 6250), 128), "JPEG", quality=50)
    r = reduced(reduce_image(raw, "image/jpeg"))
    assert (r.width, r.height) == (1024, 800)
    assert r.reduction is not None and r.reduction.startswith("8000x6250 JPEG")


def test_a_pixel_count_over_pillows_own_bomb_limit_is_a_withheld_image_not_an_error() -> None:
    raw = make_bomb_png(20_000, 10_000, rgba=False)  # 200 megapixels: Pillow refuses to open it
    outcome = reduce_image(raw, "image/png")
    assert isinstance(outcome, WithheldImage)
    assert "too large to decode safely" in outcome.reason or "megapixels" in outcome.reason


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        (b"\x89PNG\r\n\x1a\n" + b"garbage" * 20, "truncated file read"),
        (make_png(300, 200)[:60], "truncated"),
        (b"", "not an image pillow can read"),
    ],
    ids=["garbage", "truncated", "empty"],
)
def test_corrupt_png_data_is_withheld_with_a_note(raw: bytes, detail: str) -> None:
    outcome = reduce_image(raw, "image/png")
    assert isinstance(outcome, WithheldImage)
    assert outcome.reason.startswith("corrupt PNG data (")
    assert detail in outcome.reason.lower()
    assert "\n" not in outcome.reason and "0x" not in outcome.reason


def test_a_png_with_a_broken_chunk_crc_is_withheld() -> None:
    raw = bytearray(make_png(64, 64))
    raw[29] ^= 0xFF  # the IHDR chunk's CRC
    outcome = reduce_image(bytes(raw), "image/png")
    assert isinstance(outcome, WithheldImage) and outcome.reason.startswith("corrupt PNG data")


def test_svg_is_not_rasterised() -> None:
    outcome = reduce_image(b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/svg+xml")
    assert outcome == WithheldImage(reason=SVG_REASON)


def test_an_animated_gif_is_sent_as_its_first_frame() -> None:
    frames = [Image.new("RGB", (320, 240), (i * 80, 0, 0)) for i in range(3)]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:])
    r = reduced(reduce_image(buf.getvalue(), "image/gif"))
    assert r.media_type in ("image/png", "image/jpeg")
    assert (r.width, r.height) == (320, 240)
    assert r.reduction is not None and r.reduction.endswith("(first frame)")
    assert r.reduction.startswith("320x240 GIF")


def test_webp_and_unusual_modes_are_re_encoded() -> None:
    webp = reduced(reduce_image(encode(plot_like(400, 300), "WEBP"), "image/webp"))
    assert webp.media_type in ("image/png", "image/jpeg") and webp.reduction is not None
    grey16 = Image.linear_gradient("L").resize((300, 200)).convert("I;16")
    r16 = reduced(reduce_image(encode(grey16), "image/png"))
    assert (r16.width, r16.height) == (300, 200)
    cmyk = reduced(reduce_image(encode(plot_like(1200, 800).convert("CMYK"), "JPEG"), "image/jpeg"))
    assert decoded(cmyk).mode in ("RGB", "L") and cmyk.width == 1024
    palette = plot_like(2000, 1000).convert("P")
    palette.info["transparency"] = 0
    rp = reduced(reduce_image(encode(palette, transparency=0), "image/png"))
    assert rp.width == 1024 and decoded(rp).mode == "RGBA"


def test_without_pillow_images_are_withheld_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "PIL", None)  # ``from PIL import Image`` now fails
    outcome = reduce_image(make_png(10, 10), "image/png")
    assert outcome == WithheldImage(
        reason="the image library Pillow is not importable (pip install pillow)"
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_side", 10), ("max_side", 100_000), ("per_call", -1), ("per_call", 51), ("max_bytes", 5)],
)
def test_caps_out_of_range_name_the_field_and_the_range(field: str, value: int) -> None:
    with pytest.raises(UsageError) as raised:
        ImageCaps(**{field: value})
    message = str(raised.value)
    assert message.startswith(f"ImageCaps.{field}={value!r} is out of range: give ")
    assert "a whole number from " in message and "\n" not in message
