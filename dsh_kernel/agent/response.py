"""The model's answer to one request, written to the log as it streams (SPINE §1.4, §3.2).

``stream_response`` logs every chunk as ``assistant/chunk`` the moment it arrives (the chunks of one
network read in one call, each its own event) and feeds it to one ``BlockAssembler``. When the
stream is cancelled because the turn was aborted, what the user already saw is kept: the assembler's
visible blocks become an ``assistant/message`` marked ``interrupted`` (nothing when nothing was
visible), and the cancellation propagates. ``append_response`` logs the assembled message of a
stream that finished, with its usage; both messages point at their chunks (``source_event_seqs``).
Neither decides what a finish means (retry, max tokens, tools): the step loop does.

A ``HeldText`` note from the provider (answer text held back while it may be a tool call written as
text) is logged as the informational ``assistant/held`` event: not a chunk, not assembled, never in
a message. Held text is not shown, so a stream cancelled while text is held keeps none of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from dsh_kernel.abort import AbortSignal
from dsh_kernel.ids import new_message_id
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.assembler import BlockAssembler
from dsh_kernel.llm.codec import message_to_json, usage_to_json
from dsh_kernel.llm.provider import Provider, stream_call_reads
from dsh_kernel.llm.types import GenerateRequest, HeldText, Message, ModelSource
from dsh_kernel.session.log import Session
from dsh_kernel.session.payloads import AssistantHeld, AssistantMessage


@dataclass(slots=True)
class Streamed:
    """A finished stream: its assembler (finish, usage, blocks) and the seqs of its chunks."""

    assembler: BlockAssembler = field(default_factory=BlockAssembler)
    chunk_seqs: list[int] = field(default_factory=list[int])


async def stream_response(
    session: Session,
    provider: Provider,
    request: GenerateRequest,
    *,
    turn: int,
    step: int,
    signal: AbortSignal,
) -> Streamed:
    """Stream ``request`` from ``provider`` into the log (module docstring)."""
    out = Streamed()
    # The hot path: one pass per network read (``stream_call_reads``), whose chunks the log writes
    # as one ``assistant/chunk`` event each in one call (``Session.append_chunks``: a delta's JSON
    # is never built to be read back), then the assembler takes them. A provider that hands its
    # chunks over one by one takes the one-chunk writer straight.
    append_chunk, append_chunks = session.append_chunk, session.append_chunks
    push, seqs = out.assembler.push, out.chunk_seqs
    try:
        async for chunks in stream_call_reads(provider, request):
            if isinstance(chunks, HeldText):
                held = AssistantHeld(turn=turn, step=step, chars=chunks.chars)
                session.append("assistant/held", held, ignorable=True)
                continue
            if len(chunks) == 1:
                chunk = chunks[0]
                seqs.append(append_chunk(turn, step, chunk).seq)
                push(chunk)
                continue
            append_chunks(turn, step, chunks, seqs)
            for chunk in chunks:
                push(chunk)
    except asyncio.CancelledError:
        if signal.aborted:
            visible = out.assembler.interrupted_blocks()
            if visible:
                msg = Message(
                    id=new_message_id(),
                    role="assistant",
                    content=visible,
                    source=ModelSource(provider=request.provider, model=request.model),
                )
                session.append(
                    "assistant/message",
                    AssistantMessage(
                        turn=turn, step=step, message=message_to_json(msg), interrupted=True
                    ),
                    surface_op="append",
                    source_event_seqs=out.chunk_seqs,
                )
        raise
    return out


def append_response(
    session: Session,
    streamed: Streamed,
    request: GenerateRequest,
    *,
    turn: int,
    step: int,
    usage_origin: Callable[[JsonObject], str | None] | None = None,
) -> Message:
    """Log the assembled ``assistant/message`` of a finished stream; returns the message.
    ``usage_origin`` judges its usage (``"proxy"``: a proxy's own count, logged as
    ``usageOrigin``; ``llm.calibration``)."""
    assembler = streamed.assembler
    source = ModelSource(
        provider=request.provider, model=request.model, replay_state=assembler.replay_state
    )
    message = assembler.message(source)
    data = AssistantMessage(turn=turn, step=step, message=message_to_json(message))
    if assembler.usage is not None:
        usage = data["usage"] = usage_to_json(assembler.usage)
        origin = usage_origin(usage) if usage_origin is not None else None
        if origin is not None:
            data["usageOrigin"] = origin
    session.append(
        "assistant/message", data, surface_op="append", source_event_seqs=streamed.chunk_seqs
    )
    return message
