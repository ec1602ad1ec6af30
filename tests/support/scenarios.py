"""Chat-completions replies for the loopback server, as the kernel tier and its benchmark need them.

Each builder returns an ``sse_server.Reply`` for an OpenAI-compatible ``/chat/completions`` request:
a streamed answer (optionally paced, optionally left hanging), a tool call, a provider error, and
the four states an interrupt must handle (no first token yet, mid-stream, approval, tool code).
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.sse_server import (
    Frame,
    Reply,
    data_frame,
    frames_from_sse,
    json_reply,
    sse_reply,
)
from tests.support.wire_transcripts import OPENAI_401, chat_chunk, chat_text_stream, sse


def text(
    *pieces: str, delay_ms: float = 0.0, coalesce: bool = False, sticky: bool = False
) -> Reply:
    """An answer streamed as one chunk per piece, each after ``delay_ms`` (``coalesce``: written in
    64 KiB pieces; ``sticky``: served to every request)."""
    return sse_reply(
        frames_from_sse(chat_text_stream(list(pieces)), delay_ms=delay_ms),
        coalesce=coalesce,
        sticky=sticky,
    )


def words(
    n: int,
    *,
    prefix: str = "w",
    delay_ms: float = 0.0,
    coalesce: bool = False,
    sticky: bool = False,
) -> Reply:
    """``n`` chunks ``"<prefix>0 "``, ``"<prefix>1 "``, …: one paragraph, easy to check for loss."""
    pieces = (f"{prefix}{i} " for i in range(n))
    return text(*pieces, delay_ms=delay_ms, coalesce=coalesce, sticky=sticky)


def expected_words(n: int, *, prefix: str = "w") -> str:
    return "".join(f"{prefix}{i} " for i in range(n))


def tool_calls(*calls: tuple[str, dict[str, Any]], say: str = "") -> Reply:
    """One assistant message calling ``calls`` (name, arguments) in order."""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": say}]
    for i, (name, args) in enumerate(calls):
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": f"call_{i}_{name}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ]
            }
        )
    return sse_reply(
        sse(
            *(chat_chunk(d) for d in deltas),
            chat_chunk({}, finish_reason="tool_calls"),
            {
                "id": "chatcmpl-X",
                "choices": [],
                "usage": {"prompt_tokens": 20, "completion_tokens": 5},
            },
            "[DONE]",
        )
    )


def text_then_call(
    pieces: list[str], name: str, args: dict[str, Any], *, delay_ms: float = 0.0
) -> Reply:
    """Streamed text (one chunk per piece, paced), then one tool call, in the same message."""
    frames: list[Frame] = [data_frame(chat_chunk({"role": "assistant", "content": ""}))]
    frames += [data_frame(chat_chunk({"content": p}), delay_ms=delay_ms) for p in pieces]
    call = {"index": 0, "id": f"call_0_{name}", "type": "function"}
    call["function"] = {"name": name, "arguments": json.dumps(args)}
    frames.append(data_frame(chat_chunk({"tool_calls": [call]}), delay_ms=delay_ms))
    frames.append(data_frame(chat_chunk({}, finish_reason="tool_calls")))
    frames.append(data_frame("[DONE]"))
    return sse_reply(frames)


def python_call(code: str) -> Reply:
    return tool_calls(("python", {"code": code}))


def auth_error() -> Reply:
    return json_reply(401, OPENAI_401)


def hang_before_first_token() -> Reply:
    """Headers, then nothing: the request is in flight and no token has come."""
    return sse_reply((), close="hang")


def hang_mid_stream(n: int = 10, *, delay_ms: float = 20.0) -> Reply:
    """``n`` paced text chunks, then the stream stays open with nothing more."""
    frames: list[Frame] = [data_frame(chat_chunk({"role": "assistant", "content": ""}))]
    frames += [data_frame(chat_chunk({"content": f"s{i} "}), delay_ms=delay_ms) for i in range(n)]
    return sse_reply(frames, close="hang")
