"""A network read at a time: ``stream_call_reads`` hands over exactly ``stream_call``'s chunks, grouped
as they arrived, and the agent logs a read's chunks in one call with the very events, seqs, times
and journal lines it wrote one chunk at a time."""

from __future__ import annotations

import httpx
import pytest

from dsh_kernel import Agent
from dsh_kernel.errors import UsageError
from dsh_kernel.llm.provider import Provider, StreamsReads, stream_call, stream_call_reads
from dsh_kernel.llm.types import (
    FinishChunk,
    FinishError,
    GenerateRequest,
    HeldText,
    StreamChunk,
    TextDeltaChunk,
)
from dsh_kernel.session.codec import encode_event
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.testing import FakeClock, ScriptedProvider, text_response
from tests.support import wire_transcripts as wt
from tests.support.providers import anthropic_provider, chat_provider, request
from tests.support.sse_server import Framing, Reply, SseServer, sse_reply


def _many_deltas(n: int) -> str:
    frames = [wt.chat_chunk({"role": "assistant", "content": ""})]
    frames += [wt.chat_chunk({"content": f"tok{i} " if i % 7 else f"née{i} "}) for i in range(n)]
    frames.append(wt.chat_chunk({}, finish_reason="stop"))
    return wt.sse(*frames, "[DONE]")


SCENARIOS: dict[str, tuple[str, Reply]] = {
    "text": ("openai", sse_reply(wt.OPENAI_TEXT)),
    "text, split reads": ("openai", sse_reply(wt.OPENAI_TEXT, framing=Framing(split_seed=3))),
    "many deltas, coalesced": ("openai", sse_reply(_many_deltas(300), coalesce=True)),
    "think tags, coalesced": (
        "generic",
        sse_reply(
            wt.sse(
                wt.chat_chunk({"content": "<think>hm"}),
                wt.chat_chunk({"content": "m</think>"}),
                *[wt.chat_chunk({"content": f"w{i} "}) for i in range(50)],
                wt.chat_chunk({"content": "</think> late"}),
                wt.chat_chunk({}, finish_reason="stop"),
                "[DONE]",
            ),
            coalesce=True,
        ),
    ),
    "parallel tools": ("openai", sse_reply(wt.OPENAI_PARALLEL_TOOLS, coalesce=True)),
    "reasoning and a tool": ("deepseek", sse_reply(wt.DEEPSEEK_THINKING_TOOL, coalesce=True)),
    "in-stream error": ("openai", sse_reply(wt.OPENAI_INSTREAM_ERROR, coalesce=True)),
    "cut mid-frame": ("openai", sse_reply(wt.OPENAI_TEXT, close="abort")),
}


ANTHROPIC_SCENARIOS: dict[str, Reply] = {
    "text": sse_reply(wt.ANTHROPIC_TEXT),
    "thinking and a tool, coalesced": sse_reply(wt.ANTHROPIC_THINKING_TOOL, coalesce=True),
    "overloaded mid-stream": sse_reply(wt.ANTHROPIC_OVERLOADED, coalesce=True),
    "cut mid-frame": sse_reply(wt.ANTHROPIC_TEXT, close="abort"),
}


@pytest.mark.parametrize("name", ANTHROPIC_SCENARIOS)
async def test_anthropic_reads_flatten_to_the_chunks_of_stream_call(
    server: SseServer, client: httpx.AsyncClient, name: str
) -> None:
    reply = ANTHROPIC_SCENARIOS[name]
    server.script(reply, reply)
    provider = anthropic_provider(server.url, client)
    assert isinstance(provider, StreamsReads)
    one = [c async for c in stream_call(provider, request(model="claude-x"))]
    reads = await chunk_reads(provider, request(model="claude-x"))
    assert all(reads)
    assert [c for r in reads for c in r] == one
    assert isinstance(one[-1], FinishChunk)
    if "coalesced" in name:
        assert max(len(r) for r in reads) > 3


async def chunk_reads(provider: Provider, req: GenerateRequest) -> list[list[StreamChunk]]:
    """The reads of ``req``, each as a list; these answers hold nothing back (no held-text note)."""
    reads = [r async for r in stream_call_reads(provider, req)]
    assert not [r for r in reads if isinstance(r, HeldText)]
    return [list(r) for r in reads if not isinstance(r, HeldText)]


@pytest.mark.parametrize("name", SCENARIOS)
async def test_reads_flatten_to_the_chunks_of_stream_call(
    server: SseServer, client: httpx.AsyncClient, name: str
) -> None:
    profile, reply = SCENARIOS[name]
    server.script(reply, reply)
    provider = chat_provider(server.url, client, profile=profile)
    assert isinstance(provider, StreamsReads)
    one = [c async for c in stream_call(provider, request())]
    reads = await chunk_reads(provider, request())
    assert all(reads)  # never an empty read
    assert [c for r in reads for c in r] == one
    assert isinstance(one[-1], FinishChunk)
    if name == "cut mid-frame":  # the raised failure, folded: alone in the last group
        assert len(reads[-1]) == 1 and isinstance(one[-1].reason, FinishError)
    if "coalesced" in name:  # many chunks came in one read
        assert max(len(r) for r in reads) > 10


async def test_a_provider_without_reads_is_grouped_one_chunk_at_a_time() -> None:
    chunks = text_response("hello there")
    provider = ScriptedProvider([chunks])
    assert not isinstance(provider, StreamsReads)
    assert await chunk_reads(provider, request()) == [[c] for c in chunks]
    with pytest.raises(UsageError):  # a test's own bug is never folded into a finish
        [r async for r in stream_call_reads(provider, request())]


async def test_an_early_stop_closes_the_stream(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(_many_deltas(50), framing=Framing(split_seed=5)))
    reads = stream_call_reads(chat_provider(server.url, client), request())
    async for _ in reads:
        break
    await reads.aclose()  # the HTTP stream is closed with it: the next request is served
    server.script(sse_reply(wt.OPENAI_TEXT))
    assert [c async for c in stream_call(chat_provider(server.url, client), request())]


async def test_an_agent_logs_a_read_in_one_call_as_it_logged_each_chunk(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    """The same answer through the adapter (hundreds of chunks a read) and through a scripted
    provider (one chunk at a time): the same chunk events, seqs, times and journal lines, seen by
    an observer in the same order."""
    server.script(sse_reply(_many_deltas(400), coalesce=True))
    provider = chat_provider(server.url, client)
    chunks = [c async for c in provider.stream(request())]
    assert sum(isinstance(c, TextDeltaChunk) for c in chunks) == 400
    server.script(sse_reply(_many_deltas(400), coalesce=True))

    async def run(p: object) -> tuple[list[str], Agent]:
        agent = Agent(provider=p, model="gpt-x", clock=FakeClock(), check_invariants=True)  # type: ignore[arg-type]
        lines: list[str] = []

        def observe(event: SessionEvent) -> None:
            if event.type == "assistant/chunk":
                lines.append(encode_event(event))

        agent.session.subscribe(observe)
        agent.followup("go")
        await agent.when_idle()
        assert agent.last_error is None
        return lines, agent

    by_read, agent = await run(provider)
    by_chunk, scripted = await run(ScriptedProvider([chunks], id="openai"))
    assert len(by_read) == len(chunks)
    assert by_read == by_chunk
    logged = [encode_event(e) for e in agent.session.events if e.type == "assistant/chunk"]
    assert logged == by_read  # the log rebuilds what its observers saw
    assert (
        agent.session.derive_messages()[-1].text() == scripted.session.derive_messages()[-1].text()
    )
