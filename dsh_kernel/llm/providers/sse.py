"""Server-Sent Events framing, decoded incrementally from raw bytes (WIRE.md §1).

``SseDecoder.feed(bytes)`` returns the ``data`` payloads of every event completed by those bytes, as
``bytes`` (``json.loads`` takes them directly). The rules it implements:

- lines end in ``\\n``, ``\\r\\n`` or a bare ``\\r``; a ``\\r`` that ends a read ends its line at
  once, and a ``\\n`` opening the next read is then taken as the rest of that ``\\r\\n``;
- an event is dispatched only at a blank line; its ``data:`` lines are joined with ``\\n``; an event
  with no data is not dispatched;
- one optional space after ``data:`` is stripped (``data:{…}`` from local servers is accepted);
- lines starting with ``:`` are comments (keep-alives) and ``event:``/``id:``/``retry:`` fields are
  ignored — every dialect we speak repeats the event type inside its JSON.

Working on bytes rather than text keeps the hot path cheap: line terminators are ASCII, so a split
never lands inside a multi-byte UTF-8 sequence, and no incremental text decoder is needed.

``truncated`` reports an event begun but never dispatched; at end of stream that is a cut, not data.

``payload_object`` decodes one payload as a JSON object, or raises ``MALFORMED_RESPONSE``.
"""

from __future__ import annotations

import json

from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.providers.transport import malformed

_CR = b"\r"


class SseDecoder:
    """Incremental SSE decoder. Not thread-safe; one per response."""

    __slots__ = ("_data", "_skip_lf", "_tail", "comments")

    def __init__(self) -> None:
        self._tail = b""
        self._skip_lf = False
        self._data: list[bytes] = []
        self.comments = 0
        """Comment lines seen so far (keep-alives); informational."""

    def feed(self, chunk: bytes) -> list[bytes]:
        """Consume one read; return the payloads of the events it completed, in order."""
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buf = self._tail + chunk if self._tail else chunk
        if _CR in buf:
            # A CR ending this read ends its line now; an LF opening the next read belongs to it.
            self._skip_lf = buf[-1:] == _CR
            buf = buf.replace(b"\r\n", b"\n").replace(_CR, b"\n")
        lines = buf.split(b"\n")
        self._tail = lines.pop()
        out: list[bytes] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    payload = data[0] if len(data) == 1 else b"\n".join(data)
                    data.clear()
                    if payload:
                        out.append(payload)
            elif line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value[:1] == b" " else value)
            elif line[0] == 0x3A:  # ":" — a comment
                self.comments += 1
            # other fields (event, id, retry) and malformed lines are ignored by the spec
        return out

    @property
    def truncated(self) -> bool:
        """True when an event was started but not completed by a blank line."""
        return bool(self._data) or bool(self._tail.strip())


# ``raw_decode`` on text skips ``json.loads``'s encoding sniffing and wrapper — measurably cheaper
# per token — but rejects leading whitespace, hence the strip for the rare padded payload.
_raw_decode = json.JSONDecoder().raw_decode


def payload_object(payload: bytes, provider: str, secret: str | None) -> JsonObject:
    """One ``data`` payload as a JSON object; ``LlmError(MALFORMED_RESPONSE)`` for anything else."""
    if payload[:1] in (b" ", b"\t"):
        payload = payload.strip()
    try:
        text = payload.decode()
        obj, end = _raw_decode(text)
    except ValueError:  # UnicodeDecodeError and JSONDecodeError alike
        raise malformed(payload, provider, secret, "not JSON") from None
    except RecursionError:  # a hostile server's absurd nesting is malformed, not our failure
        raise malformed(payload, provider, secret, "nested too deeply") from None
    if end != len(text) and text[end:].strip():
        raise malformed(payload, provider, secret, "trailing data")
    if type(obj) is not dict:
        raise malformed(payload, provider, secret, "not an object")
    return obj  # pyright: ignore[reportUnknownVariableType]
