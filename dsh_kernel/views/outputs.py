"""Rich nbformat outputs that came from outside this kernel, reduced to what cannot be markup.

A ``python`` tool run that executed live in this kernel shows its outputs as a notebook cell's
would (that code already ran with the user's rights). The same outputs read back from a journal
(``%agent replay``'s recording, an imported session, a saved notebook) or sent by any server are
data: ``reduced`` keeps only raster images whose payload is strict base64 and a text rendering, so
no HTML, JavaScript, SVG, Markdown or LaTeX from them reaches the page. ``image_of`` and
``plain_text`` are the same reading for the saved rendering (``views.render``), which embeds only
those two.
"""

from __future__ import annotations

import re
from typing import Final

from dsh_kernel.jsonvalue import JsonObject, JsonValue

IMAGE_MIMES: Final = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""The image types shown from outside text: rasters (an SVG is a document that can hold script)."""
_TEXT_MIMES: Final = ("text/plain", "text/markdown", "text/latex")
_BASE64: Final = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_ANSI: Final = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _str(value: JsonValue) -> str:
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return value if isinstance(value, str) else ""


def image_of(output: JsonObject) -> tuple[str, str | None] | None:
    """``(mime, base64)`` of the first raster image in a display output, if any; the base64 is
    ``None`` when the data is not strict base64 (then it must not go into a tag at all)."""
    data = output.get("data")
    if not isinstance(data, dict):
        return None
    for mime in IMAGE_MIMES:
        value = _str(data.get(mime))
        if value:
            b64 = "".join(value.split())
            ok = len(b64) % 4 == 0 and _BASE64.fullmatch(b64) is not None
            return mime, b64 if ok else None
    return None


def plain_text(output: JsonObject) -> str:
    """The text a person reads of an output: a stream's text, an error's traceback (without
    colour codes), else a display's ``text/plain`` (or its Markdown or LaTeX *source*)."""
    match output.get("output_type"):
        case "stream":
            return _str(output.get("text"))
        case "error":
            tb = output.get("traceback")
            lines = (
                [_ANSI.sub("", t) for t in tb if isinstance(t, str)] if isinstance(tb, list) else []
            )
            head = f"{_str(output.get('ename'))}: {_str(output.get('evalue'))}"
            return "\n".join(lines) if lines else head
        case _:
            data = output.get("data")
            if isinstance(data, dict):
                for mime in _TEXT_MIMES:
                    text = _str(data.get(mime))
                    if text:
                        return text
            return ""


def reduced(output: JsonObject) -> JsonObject:
    """``output`` as a stream, an error (its strings only), or a display of at most one checked
    raster image and ``text/plain``."""
    kind = output.get("output_type")
    if kind == "stream":
        name = "stderr" if output.get("name") == "stderr" else "stdout"
        return {"output_type": "stream", "name": name, "text": plain_text(output)}
    if kind == "error":  # drawn as text by every frontend (colour codes become classes)
        tb = output.get("traceback")
        return {
            "output_type": "error",
            "ename": _str(output.get("ename")),
            "evalue": _str(output.get("evalue")),
            "traceback": [t for t in tb if isinstance(t, str)] if isinstance(tb, list) else [],
        }
    data: JsonObject = {}
    image = image_of(output) if kind in ("display_data", "execute_result") else None
    if image is not None and image[1] is not None:
        data[image[0]] = image[1]
    text = plain_text(output)
    if text or not data:
        data["text/plain"] = text
    return {"output_type": "display_data", "data": data, "metadata": {}}
