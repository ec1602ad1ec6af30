"""What a view says of the images a message carried to the model: a line per image, a thumbnail
where the model saw it.

A pure function of one ``MessageImages`` (``views.shown_images``), shared by the live card
(``views.tool_card``), the live turn (``views.turn``: the prompt, steers) and the static rendering
(``views.render``), so all of them say the same:

* sent as images — ``Sent to the model: 1 image, 1024x768 PNG, 88 kB (reduced from 2000x1500 PNG
  412 kB)`` beside a small thumbnail of the bytes the model got (several images: a count line, then
  one line and thumbnail each);
* sent as text to a text-only route — ``Not sent to the model (text-only model): described as: …``,
  with no thumbnail (the card's own outputs still show the original);
* sent on an image route but with no bytes in the log (a journal edited by hand: the adapters sent
  the description) — ``Sent to the model as text (its bytes are not in the session log): described
  as: …``;
* not sent yet (drawn before the next request) — ``Goes to the model with the next request: …``,
  worded by the header in force now, which says it is not yet known for sure;
* no request header known at all (a turn read without its session) — says both possibilities.

A prompt's or steer's images (``attached=True``) read ``Attached, sent to the model: …`` and keep
their thumbnail even when withheld: nothing else in the cell shows what was attached.

The thumbnail is the stored (already reduced) image itself, drawn small: a data URI of a raster
type whose payload is strict base64 (anything else is described, never put in a tag), at most
``MAX_THUMBNAIL_CHARS``. The Markdown rendering has the lines only: the saved notebook already
holds the original in the card's outputs, and the Markdown is saved twice (as ``text/plain`` too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from dsh_kernel.llm.types import ImageBlock
from dsh_kernel.markup.safe_html import escape, inline_markdown_text
from dsh_kernel.markup.static_style import attrs
from dsh_kernel.runtime.text import format_size
from dsh_kernel.views.shown_images import MessageImages

MAX_THUMBNAIL_CHARS: Final = 1_000_000
"""Largest base64 image drawn as a thumbnail (as ``render.MAX_INLINE_IMAGE`` for outputs)."""
MAX_DESCRIPTION_CHARS: Final = 600
"""Characters of a description a line shows (the whole text is the thumbnail's ``title``)."""
_THUMBNAIL_MIMES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_BASE64: Final = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_NO_BYTES: Final = "as text (its bytes are not in the session log)"


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageLine:
    """One line of the note: its text, and the image drawn small beside it (``None``: none)."""

    text: str
    thumbnail: ImageBlock | None = None


def format_name(media_type: str) -> str:
    """``image/png`` → ``PNG``, ``image/svg+xml`` → ``SVG``."""
    return media_type.rpartition("/")[2].partition("+")[0].upper() or media_type


def what(image: ImageBlock) -> str:
    """``1024x768 PNG, 88 kB (reduced from 2000x1500 PNG 412 kB)``."""
    text = (
        f"{image.width}x{image.height} {format_name(image.media_type)}, {format_size(image.size)}"
    )
    reduction = image.reduction
    if reduction:
        before, arrow, _ = reduction.partition("→")
        text += (
            f" (reduced from {before.strip()})" if arrow and before.strip() else f" ({reduction})"
        )
    return text


def _description(image: ImageBlock) -> str:
    text = " ".join(image.description.split()) or "(no description)"
    if len(text) > MAX_DESCRIPTION_CHARS:
        text = text[:MAX_DESCRIPTION_CHARS].rstrip() + "…"
    return text


def thumbnail_b64(image: ImageBlock) -> str | None:
    """The base64 to draw ``image`` from, or ``None`` when it must not be put in a tag."""
    data = image.data
    if data is None or image.media_type not in _THUMBNAIL_MIMES:
        return None
    b64 = "".join(data.split())
    if len(b64) > MAX_THUMBNAIL_CHARS or len(b64) % 4 or _BASE64.fullmatch(b64) is None:
        return None
    return b64


def _count(n: int) -> str:
    return "1 image" if n == 1 else f"{n} images"


def _lead(m: MessageImages) -> str:
    match (m.as_images, m.pending):
        case (True, False):
            return "sent to the model"
        case (True, True):
            return "goes to the model with the next request"
        case (False, False):
            return "not sent to the model (text-only model)"
        case (False, True):
            return (
                "goes to the model as text with the next request (the current model is text-only)"
            )
        case (None, True):
            return (
                "goes to the model with the next request, as an image if the model takes images, "
                "else as text"
            )
        case _:
            return "sent to the model (as an image if the model took images, else as text)"


def _part(m: MessageImages, image: ImageBlock, *, many: bool) -> str:
    """What a line says of ``image``: with several images, each line names its image first."""
    desc = _description(image)
    if m.as_images is False:
        return f"{what(image)}: {desc}" if many else f"described as: {desc}"
    if m.as_images is True and image.data is None:
        return f"{what(image)}, {_NO_BYTES}: described as: {desc}"
    if m.as_images is None:
        return f"{what(image)}; described as: {desc}"
    return what(image)


def _thumbnail(m: MessageImages, image: ImageBlock, *, attached: bool) -> ImageBlock | None:
    """``image`` when its line draws it: the model saw it (or may), or it was attached."""
    shown = attached or m.as_images is not False
    return image if shown and thumbnail_b64(image) is not None else None


def image_lines(m: MessageImages | None, *, attached: bool = False) -> tuple[ImageLine, ...]:
    """The note's lines for ``m`` (module docstring); empty for no images."""
    if m is None or not m.images:
        return ()
    lead = ("attached, " if attached else "") + _lead(m)
    lead = lead[0].upper() + lead[1:]
    images = m.images
    if len(images) == 1:
        image = images[0]
        if m.as_images is True and image.data is None:
            text = f"{lead} {_NO_BYTES}: described as: {_description(image)}"
        elif m.as_images is False:
            text = f"{lead}: {_part(m, image, many=False)}"
        else:
            text = f"{lead}: 1 image, {_part(m, image, many=False)}"
        return (ImageLine(text=text, thumbnail=_thumbnail(m, image, attached=attached)),)
    head = f"{lead}: {_count(len(images))}" + (", described as:" if m.as_images is False else "")
    rows = (
        ImageLine(text=_part(m, i, many=True), thumbnail=_thumbnail(m, i, attached=attached))
        for i in images
    )
    return (ImageLine(text=head), *rows)


# --- drawing ---------------------------------------------------------------------------------------


def _cls(name: str, static: bool) -> str:
    return attrs(name) if static else f' class="{name}"'


def images_html(m: MessageImages | None, *, attached: bool = False, static: bool = False) -> str:
    """The note as HTML: ``<div class="dsh-images">`` of ``dsh-image-line`` rows, each with its
    thumbnail (``img.dsh-thumb``); the classes' rules are inline when ``static`` (the saved
    rendering, ``markup.static_style``), from ``dsh.css`` otherwise. Empty for no images."""
    lines = image_lines(m, attached=attached)
    if not lines:
        return ""
    icon = "📎" if attached else "🖼️"
    rows: list[str] = []
    for i, line in enumerate(lines):
        img = ""
        b64 = thumbnail_b64(line.thumbnail) if line.thumbnail is not None else None
        if line.thumbnail is not None and b64 is not None:
            desc = escape(line.thumbnail.description)
            img = (
                f'<img{_cls("dsh-thumb", static)} src="data:{escape(line.thumbnail.media_type)};'
                f'base64,{escape(b64)}" alt="{desc}" title="{desc}">'
            )
        mark = f'<span class="dsh-images-icon">{icon}</span> ' if i == 0 else ""
        rows.append(
            f"<div{_cls('dsh-image-line', static)}>{mark}{img}"
            f'<span class="dsh-images-text">{escape(line.text)}</span></div>'
        )
    return f"<div{_cls('dsh-images', static)}>{''.join(rows)}</div>"


def images_markdown(m: MessageImages | None, *, attached: bool = False) -> str:
    """The note as Markdown lines (no thumbnails: module docstring); empty for no images."""
    lines = image_lines(m, attached=attached)
    if not lines:
        return ""
    icon = "📎" if attached else "🖼️"
    head, *rest = lines
    out = [f"{icon} *{inline_markdown_text(head.text)}*"]
    if rest:
        out += ["", *(f"- {inline_markdown_text(line.text)}" for line in rest)]
    return "\n".join(out)
