"""Messages API event stream: SSE payloads → event objects.

Anthropic names each event twice — in the SSE ``event:`` field and in the JSON ``type`` — and we
dispatch on the JSON, as the official SDK does, so the SSE name is ignored by the shared decoder.
There is no ``[DONE]``: the stream ends after ``message_stop`` (``translate.py`` decides what an end
of body before it means). A payload that is not a JSON object raises ``MALFORMED_RESPONSE``.
"""

from __future__ import annotations

from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.providers.sse import SseDecoder, payload_object


class MessagesEventReader:
    """One response's event objects. ``bytes_seen`` tells an empty body from a cut one."""

    __slots__ = ("_decoder", "_provider", "_secret", "bytes_seen")

    def __init__(self, *, provider: str, secret: str | None) -> None:
        self._decoder = SseDecoder()
        self._provider = provider
        self._secret = secret
        self.bytes_seen = 0

    def feed(self, data: bytes) -> list[JsonObject]:
        self.bytes_seen += len(data)
        out: list[JsonObject] = []
        for payload in self._decoder.feed(data):
            out.append(payload_object(payload, self._provider, self._secret))
        return out
