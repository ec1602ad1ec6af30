"""A real PNG for display tests, made without any imaging library."""

from __future__ import annotations

import struct
import zlib


def make_png(width: int, height: int) -> bytes:
    """A real (tiny, grey) PNG of the given size."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    raw = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def make_bomb_png(width: int, height: int, *, rgba: bool = True) -> bytes:
    """A real PNG of ``width`` x ``height`` (all zero pixels) built row by row, so a 50-megapixel
    image is a few hundred kB of file and never a 200 MB buffer here."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    channels, color = (4, 6) if rgba else (1, 0)
    row = b"\x00" + b"\x00" * (width * channels)
    packer = zlib.compressobj(1)
    body = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body) + chunk(b"IEND", b"")
