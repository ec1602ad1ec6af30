"""MIME bundles: formatting values as IPython would, making bundles lossless JSON, and one-line
summaries of outputs for the model.

``format_value(value, shell)`` uses the shell's ``display_formatter``, or without a shell a
standalone IPython ``DisplayFormatter`` (falling back to ``repr`` when IPython is not importable);
it raises what the value's own repr methods raise. ``json_bundle`` turns a bundle into lossless
JSON: binary payloads (bytes) become base64, textual bytes are decoded, anything else that is not
JSON becomes its ``str``. ``summarize_output`` gives stream text as is, an image as
``[image/png 640x480]`` (the size from the output's metadata or the PNG header; otherwise the
decoded byte size), and otherwise the ``text/plain`` form.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable, Mapping
from typing import Final, cast

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.runtime.text import clean_text, format_size, utf8_len

_TEXTUAL_PREFIXES: Final = ("text/", "application/json", "application/javascript")


def to_json_value(value: object, depth: int = 0) -> JsonValue:
    """A lossless-JSON rendering of an arbitrary display payload (never fails)."""
    if isinstance(value, str):
        return clean_text(value)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return 0.0 if value == 0.0 else value
    if depth > 50:
        return str(value)
    if isinstance(value, Mapping):
        items = cast(Mapping[object, object], value)
        return {str(k): to_json_value(v, depth + 1) for k, v in items.items()}
    if isinstance(value, list | tuple):
        seq = cast(list[object] | tuple[object, ...], value)
        return [to_json_value(v, depth + 1) for v in seq]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    return str(value)


def json_bundle(data: Mapping[str, object]) -> JsonObject:
    """A MIME bundle as JSON: binary payloads base64, textual bytes decoded."""
    out: JsonObject = {}
    for mime, payload in data.items():
        if isinstance(payload, bytes) and mime.startswith(_TEXTUAL_PREFIXES):
            out[str(mime)] = clean_text(payload.decode("utf-8", "replace"))
        else:
            out[str(mime)] = to_json_value(payload)
    return out


def payload_size(payload: JsonValue) -> int:
    """Size of a display payload: UTF-8 bytes of a string, else the length of its JSON."""
    if isinstance(payload, str):
        return utf8_len(payload)
    return len(json.dumps(payload, ensure_ascii=False))


def png_size(b64: str) -> tuple[int, int] | None:
    """Width and height from a base64 PNG's IHDR chunk (decodes 32 bytes only)."""
    try:
        head = base64.b64decode(b64[:44])
    except (binascii.Error, ValueError):
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def summarize_output(output: Mapping[str, JsonValue]) -> str:
    """One output as text for the model: stream text as is; an image as ``[image/png 640x480]``;
    otherwise its ``text/plain`` (or ``[text/html 2.1 kB]`` when there is none)."""
    if output.get("output_type") == "stream":
        text = output.get("text")
        return text if isinstance(text, str) else ""
    data = output.get("data")
    if not isinstance(data, dict):
        return ""
    metadata = output.get("metadata")
    parts: list[str] = []
    for mime in ("image/png", "image/jpeg", "image/gif", "image/svg+xml"):
        payload = data.get(mime)
        if payload is None:
            continue
        dims = _image_dims(mime, payload, metadata)
        if dims is None:
            encoded = payload_size(payload)
            # binary images are stored as base64: report the decoded size
            dims = format_size(encoded if mime == "image/svg+xml" else encoded * 3 // 4)
        parts.append(f"[{mime} {dims}]")
    plain = data.get("text/plain")
    if parts:
        return " ".join(parts)
    if isinstance(plain, str):
        return plain
    if data:
        mime, payload = next(iter(data.items()))
        return f"[{mime} {format_size(payload_size(payload))}]"
    return ""


def _image_dims(mime: str, payload: JsonValue, metadata: JsonValue) -> str | None:
    if isinstance(metadata, dict):
        meta = metadata.get(mime)
        if isinstance(meta, dict):
            w, h = meta.get("width"), meta.get("height")
            if isinstance(w, int | float) and isinstance(h, int | float):
                return f"{int(w)}x{int(h)}"
    if mime == "image/png" and isinstance(payload, str):
        size = png_size(payload)
        if size is not None:
            return f"{size[0]}x{size[1]}"
    return None


_standalone_formatter: object | None = None


def format_value(value: object, shell: object | None = None) -> tuple[JsonObject, JsonObject]:
    """The MIME bundle and metadata of ``value`` (as IPython would display it). Raises what the
    value's own repr methods raise."""
    formatter = getattr(shell, "display_formatter", None) if shell is not None else None
    if formatter is None:
        formatter = _plain_formatter()
    fmt = getattr(formatter, "format", None) if formatter is not None else None
    if callable(fmt):
        pair = cast(Callable[[object], object], fmt)(value)
        if isinstance(pair, tuple) and len(cast(tuple[object, ...], pair)) == 2:
            data, md = cast(tuple[object, object], pair)
            if isinstance(data, Mapping) and data:
                metadata = (
                    to_json_value(cast(Mapping[str, object], md)) if isinstance(md, Mapping) else {}
                )
                bundle = json_bundle(cast(Mapping[str, object], data))
                if "text/plain" not in bundle:
                    bundle["text/plain"] = repr(value)
                return bundle, metadata if isinstance(metadata, dict) else {}
    return {"text/plain": repr(value)}, {}


def _plain_formatter() -> object | None:
    global _standalone_formatter
    if _standalone_formatter is None:
        try:
            from IPython.core.formatters import DisplayFormatter
        except ImportError:  # IPython is optional for plain-Python use
            return None
        _standalone_formatter = DisplayFormatter()
    return _standalone_formatter
