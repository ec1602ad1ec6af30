"""Size caps for text the kernel hands back to a model, shared by every layer.

Text the model controls can be arbitrarily large — a 5 MB tool name, a 10 MB error message, 10,000
unexpected argument names — and anything echoed into a tool result is resent on every later request.
So every such echo goes through one of two helpers, and a cut always says how much was cut:

* ``cap_text(text, max_bytes)`` — for result and error texts: at most ``max_bytes`` UTF-8 bytes,
  marker included. A cut keeps the head (two thirds) and the tail, around
  ``… [N characters cut] …`` on a line of its own, so both the start of an error and its end survive.
* ``cap_echo(text, max_chars)`` — for names and values quoted inside a message (a tool name, an
  argument key): at most ``max_chars`` characters, then ``… [N characters cut]``; always one line
  (line breaks are shown as ``\\n``).

Both return ``text`` itself when it fits, and ``cap_echo`` leaves its own earlier cut alone, so
capping twice keeps the first count; the common case costs nothing.
This module imports nothing from the package, so the lowest layer (``llm``) can use it.
"""

from __future__ import annotations

import re
from typing import Final

ECHO_CHARS: Final = 100
"""How much of a name or value a message quotes."""


_ECHO_CUT = re.compile(r"… \[\d+ characters cut\]\Z")


def _marker(cut: int) -> str:
    return f"[{cut} characters cut]"


def cap_text(text: str, max_bytes: int) -> str:
    """``text`` in at most ``max_bytes`` UTF-8 bytes: unchanged when it fits, else head and tail
    around a marker saying how many characters were cut (``max_bytes`` must leave room: >= 100)."""
    if len(text) * 4 <= max_bytes:  # fits whatever it is made of; no encoding needed
        return text
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text
    room = max(max_bytes - 60, 0)  # the marker and its line breaks fit in 60 bytes
    head = raw[: room * 2 // 3].decode("utf-8", "ignore")
    tail_bytes = room - len(head.encode("utf-8", "surrogatepass"))
    tail = raw[len(raw) - tail_bytes :].decode("utf-8", "ignore") if tail_bytes > 0 else ""
    cut = len(text) - len(head) - len(tail)
    return f"{head}\n… {_marker(cut)} …\n{tail}"


def cap_echo(text: str, max_chars: int = ECHO_CHARS) -> str:
    """``text`` as one line of at most ``max_chars`` characters (plus the marker when cut)."""
    if len(text) > max_chars and not _already_cut(text, max_chars):
        cut = len(text) - max_chars
        text = f"{text[:max_chars]}… {_marker(cut)}"
    if "\n" in text or "\r" in text:
        text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text


def _already_cut(text: str, max_chars: int) -> bool:
    """Whether ``text`` is an earlier ``cap_echo`` of at most ``max_chars`` (so the count survives)."""
    m = _ECHO_CUT.search(text)
    return m is not None and m.start() <= max_chars
