"""Text sizes for the runtime: UTF-8 byte counts and prefixes that never materialise huge copies,
human-readable sizes, the explicit truncation markers the model and the card see, and
``clean_text`` (lone surrogates out, so every kept string can be written as UTF-8).

``fit_text(text, limit)`` keeps the head (two thirds) and tail of ``text`` around
``… [output truncated: N omitted] …`` so that the result fits in ``limit`` UTF-8 bytes (plus the
marker's own ~60 bytes, which the budget reserves).
"""

from __future__ import annotations


def format_size(n: int) -> str:
    """``532 B``, ``12.3 kB``, ``48.2 MB``, ``1.1 GB`` (decimal units)."""
    if n < 1000:
        return f"{n} B"
    value = float(n)
    for unit in ("kB", "MB", "GB"):
        value /= 1000
        if value < 1000 or unit == "GB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def truncation_marker(dropped_bytes: int) -> str:
    """The line that ends output cut after ``dropped_bytes`` more bytes."""
    return f"… [output truncated: {format_size(dropped_bytes)} more]"


def utf8_len(text: str) -> int:
    """UTF-8 size of ``text`` without materialising more than 1 MiB of it at a time."""
    if text.isascii():
        return len(text)
    step = 1 << 20
    return sum(
        len(text[i : i + step].encode("utf-8", "surrogatepass")) for i in range(0, len(text), step)
    )


def utf8_prefix(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 form fits in ``max_bytes`` (lone surrogates are
    replaced, so the result always encodes)."""
    if max_bytes <= 0:
        return ""
    if text.isascii():
        return text[:max_bytes]
    head = text[:max_bytes].encode("utf-8", "surrogatepass")[:max_bytes]
    return head.decode("utf-8", "ignore").encode("utf-8", "replace").decode("utf-8")


def clean_text(text: str) -> str:
    """``text`` as valid Unicode for a UTF-8 journal: lone surrogates (which ``print`` accepts but
    no UTF-8 file can hold) become ``?``. Free for ASCII text."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def utf8_suffix(text: str, max_bytes: int) -> str:
    """The longest suffix of ``text`` whose UTF-8 form fits in ``max_bytes``."""
    if max_bytes <= 0:
        return ""
    tail = text[-max_bytes:]
    if tail.isascii():
        return tail
    raw = tail.encode("utf-8", "surrogatepass")[-max_bytes:]
    return raw.decode("utf-8", "ignore").encode("utf-8", "replace").decode("utf-8")


def fit_text(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` UTF-8 bytes, else its head and tail around a truncation line."""
    size = utf8_len(text)
    if size <= limit:
        return text
    usable = max(limit - 80, 0)
    head = utf8_prefix(text, usable * 2 // 3)
    tail = utf8_suffix(text, usable - usable * 2 // 3)
    omitted = size - utf8_len(head) - utf8_len(tail)
    return f"{head}\n… [output truncated: {format_size(omitted)} omitted] …\n{tail}"
