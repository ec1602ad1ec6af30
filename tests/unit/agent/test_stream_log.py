"""The answer as it streams into the log (``agent.response``): every chunk is logged as the codec
writes it, down to its JSON key order, whichever path the loop takes for it."""

from __future__ import annotations

import json

from dsh_kernel import Agent
from dsh_kernel.llm.codec import chunk_to_json
from dsh_kernel.llm.types import ReasoningDeltaChunk, StreamChunk, TokenUsage
from dsh_kernel.testing import ScriptedProvider, text_response, tool_calls_response


async def test_every_streamed_chunk_is_logged_as_the_codec_writes_it() -> None:
    usage = TokenUsage(input_tokens=12, output_tokens=30, cache_read_tokens=4)
    answer: list[StreamChunk] = [
        ReasoningDeltaChunk(index=0, text="first, "),
        *text_response("Hello there, world.", reasoning="think", usage=usage, pieces=5),
    ]
    calls = tool_calls_response([("lookup", {"q": "a"}, "call-1")], text="Looking.")
    provider = ScriptedProvider([calls, answer])
    agent = Agent(provider=provider, model="m", check_invariants=True)
    agent.followup("hi")
    await agent.when_idle()
    logged = [e.data for e in agent.session.events if e.type == "assistant/chunk"]
    expected = [chunk_to_json(c) for c in [*calls, *answer]]
    assert [json.dumps(d["chunk"]) for d in logged] == [json.dumps(c) for c in expected]
    assert [(d["turn"], d["step"]) for d in logged] == [(1, 1)] * len(calls) + [(1, 2)] * len(
        answer
    )
