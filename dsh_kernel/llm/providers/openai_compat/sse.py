"""Chat Completions event stream: SSE payloads → chunk objects, up to the ``[DONE]`` sentinel.

``ChatEventReader.feed(bytes)`` returns the JSON objects completed by one network read and sets
``done`` when ``data: [DONE]`` arrives (anything after it is ignored). A payload that is not a JSON
object raises ``LlmError(MALFORMED_RESPONSE)`` quoting its start (with the API key redacted).

What end-of-stream without ``[DONE]`` means is the translator's call (``translate.py``): a soft end
after a finish reason (ik_llama.cpp never sends ``[DONE]``), ``STREAM_CLOSED`` before one.
"""

from __future__ import annotations

from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.providers.sse import SseDecoder, payload_object

DONE = b"[DONE]"


class ChatEventReader:
    """One response's chunk objects. ``bytes_seen`` tells an empty body from a cut one."""

    __slots__ = ("_decoder", "_provider", "_secret", "bytes_seen", "done")

    def __init__(self, *, provider: str, secret: str | None) -> None:
        self._decoder = SseDecoder()
        self._provider = provider
        self._secret = secret
        self.done = False
        self.bytes_seen = 0

    def feed(self, data: bytes) -> list[JsonObject]:
        self.bytes_seen += len(data)
        out: list[JsonObject] = []
        for payload in self._decoder.feed(data):
            if payload[:1] == b"[" and payload.strip() == DONE:
                self.done = True
                break
            out.append(payload_object(payload, self._provider, self._secret))
        return out
