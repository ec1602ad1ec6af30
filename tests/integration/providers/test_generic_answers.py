"""The generic OpenAI-compatible profile reads what local servers leave in ``content`` (issue 14):
tool calls written as text become tool calls, ``<think>`` becomes reasoning — against replayed
llama-cpp-python-shaped wire bytes, under adversarial framing. The native profiles never do."""

from __future__ import annotations

import json
from collections.abc import Sequence

import httpx
import pytest

from dsh_kernel.llm.assembler import BlockAssembler
from dsh_kernel.llm.provider import stream_call_reads
from dsh_kernel.llm.providers.openai_compat.text_tools import MAX_HELD_CHARS
from dsh_kernel.llm.types import (
    BlockEndChunk,
    BlockStartChunk,
    ContentBlock,
    FinishMaxTokens,
    FinishStop,
    FinishToolCalls,
    HeldText,
    ReasoningBlock,
    StreamChunk,
    TextBlock,
    TextDeltaChunk,
    ToolCallBlock,
    ToolSchema,
)
from tests.support import wire_transcripts as wt
from tests.support.providers import WEATHER_TOOL, chat_provider, collect, finish_of, request, user
from tests.support.sse_server import (
    Framing,
    Reply,
    SseServer,
    frames_from_sse,
    json_reply,
    sse_reply,
)

PYTHON_TOOL = ToolSchema(
    name="python",
    description="Run Python.",
    parameters={"type": "object", "properties": {"code": {"type": "string"}}},
)
TOOLS = (PYTHON_TOOL, WEATHER_TOOL)
FRAMINGS = {
    "plain": Framing(),
    "split": Framing(split_seed=3),
    "all": Framing(split_seed=5, crlf=True, no_space=True, keepalive=True, omit_done=True),
}


def ends(chunks: Sequence[StreamChunk]) -> list[ContentBlock]:
    return [c.block for c in chunks if isinstance(c, BlockEndChunk)]


def assembled(chunks: Sequence[StreamChunk]) -> tuple[ContentBlock, ...]:
    asm = BlockAssembler()
    for c in chunks:
        asm.push(c)
    return asm.blocks()


async def answer(
    server: SseServer,
    client: httpx.AsyncClient,
    pieces: list[str],
    *,
    profile: str = "generic",
    framing: Framing | None = None,
    finish_reason: str = "stop",
    history: int = 1,
) -> list[StreamChunk]:
    server.script(
        sse_reply(
            wt.local_stream(pieces, finish_reason=finish_reason), framing=framing or Framing()
        )
    )
    messages = tuple(user(f"message {n}") for n in range(history))
    return await collect(
        chat_provider(server.url, client, profile=profile), request(*messages, tools=TOOLS)
    )


@pytest.mark.parametrize("framing", FRAMINGS.values(), ids=FRAMINGS.keys())
async def test_a_qwen_text_call_is_a_tool_call(
    server: SseServer, client: httpx.AsyncClient, framing: Framing
) -> None:
    chunks = await answer(server, client, wt.tokens(wt.QWEN_TEXT_CALL), framing=framing)
    assert not any(isinstance(c, TextDeltaChunk) for c in chunks)  # no wall of JSON
    (block,) = ends(chunks)
    assert isinstance(block, ToolCallBlock)
    assert block.name == "python" and block.recovered_from == wt.QWEN_TEXT_CALL
    assert json.loads(block.arguments)["code"] == "17 * 23"
    assert [type(c).__name__ for c in chunks] == [
        "BlockStartChunk",
        "ToolCallDeltaChunk",
        "BlockEndChunk",
        "FinishChunk",
    ]
    assert finish_of(chunks).reason == FinishToolCalls()
    assert assembled(chunks) == (block,)


@pytest.mark.parametrize("profile", ["openai", "deepseek"])
async def test_native_profiles_leave_the_text_as_it_is(
    server: SseServer, client: httpx.AsyncClient, profile: str
) -> None:
    think = "<think>hm</think>" + wt.QWEN_TEXT_CALL
    chunks = await answer(server, client, wt.tokens(think), profile=profile)
    assert ends(chunks) == [TextBlock(text=think)]
    assert finish_of(chunks).reason == FinishStop()


async def test_recovered_ids_are_stable_for_one_history_and_differ_for_another(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    text = (
        '<tool_call>\n{"name": "python", "arguments": {"code": "a = 1"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    )

    async def ids(history: int) -> list[str]:
        chunks = await answer(server, client, wt.tokens(text, 2), history=history)
        blocks = [b for b in ends(chunks) if isinstance(b, ToolCallBlock)]
        assert [b.name for b in blocks] == ["python", "get_weather"]
        assert all(b.recovered_from and b.recovered_from.startswith("<tool_call>") for b in blocks)
        return [b.id for b in blocks]

    first = await ids(1)
    assert len(set(first)) == 2
    assert await ids(1) == first
    assert set(await ids(3)).isdisjoint(first)


async def test_prose_streams_at_once_and_a_quoted_call_stays_text(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    text = 'You could call {"name": "python", "arguments": {"code": "1"}} yourself.'
    pieces = wt.tokens(text, 4)
    chunks = await answer(server, client, pieces)
    deltas = [c.text for c in chunks if isinstance(c, TextDeltaChunk)]
    assert deltas == pieces  # one delta per piece: nothing held
    assert ends(chunks) == [TextBlock(text=text)]


@pytest.mark.parametrize(
    "text",
    [
        '{"answer": 42, "unit": "none"}',
        wt.QWEN_TEXT_CALL + "\nThat is the call I would make.",
        '{"name": "shell", "arguments": {"cmd": "ls"}}',
        '{"name": "python", "arguments": "print(1)"}',
        "```python\nprint(17 * 23)\n```",
    ],
    ids=["plain-json", "prose-after", "not-offered", "args-not-json", "python-fence"],
)
async def test_answers_that_are_not_calls_arrive_whole_as_text(
    server: SseServer, client: httpx.AsyncClient, text: str
) -> None:
    chunks = await answer(server, client, wt.tokens(text), framing=Framing(split_seed=9))
    assert ends(chunks) == [TextBlock(text=text)]
    assert finish_of(chunks).reason == FinishStop()


async def test_a_call_cut_by_the_length_limit_is_text(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    chunks = await answer(server, client, wt.tokens(wt.QWEN_TEXT_CALL), finish_reason="length")
    assert ends(chunks) == [TextBlock(text=wt.QWEN_TEXT_CALL)]
    assert finish_of(chunks).reason == FinishMaxTokens()


async def test_held_text_goes_first_when_the_server_sends_a_call_of_its_own(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    rid = "chatcmpl-native"
    server.script(
        sse_reply(
            wt.sse(
                wt.local_chunk({"role": "assistant", "content": "  {"}, rid=rid),
                wt.local_chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_native",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                            }
                        ]
                    },
                    rid=rid,
                ),
                wt.local_chunk({}, finish_reason="tool_calls", rid=rid),
                "[DONE]",
            )
        )
    )
    chunks = await collect(
        chat_provider(server.url, client, profile="generic"), request(tools=TOOLS)
    )
    assert ends(chunks) == [
        TextBlock(text="  {"),
        ToolCallBlock(id="call_native", name="get_weather", arguments='{"city":"Oslo"}'),  # type: ignore[arg-type]
    ]
    assert finish_of(chunks).reason == FinishToolCalls()


async def test_no_tools_offered_no_recovery(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(sse_reply(wt.local_stream(wt.tokens(wt.QWEN_TEXT_CALL))))
    chunks = await collect(chat_provider(server.url, client, profile="generic"), request())
    assert ends(chunks) == [TextBlock(text=wt.QWEN_TEXT_CALL)]


async def test_a_whole_json_completion_is_read_the_same(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    body = {
        "id": "chatcmpl-whole",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": wt.QWEN_TEXT_CALL},
                "finish_reason": "stop",
            }
        ],
    }
    server.script(json_reply(200, body))
    chunks = await collect(
        chat_provider(server.url, client, profile="generic"), request(tools=TOOLS)
    )
    (block,) = ends(chunks)
    assert isinstance(block, ToolCallBlock) and block.recovered_from == wt.QWEN_TEXT_CALL
    assert finish_of(chunks).reason == FinishToolCalls()


# --- <think> ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("framing", FRAMINGS.values(), ids=FRAMINGS.keys())
async def test_think_tags_become_reasoning(
    server: SseServer, client: httpx.AsyncClient, framing: Framing
) -> None:
    text = "<think>\nThe user asks 2+2. That is 4.\n</think>\n\nThe answer is 4."
    chunks = await answer(server, client, wt.tokens(text, 2), framing=framing)
    assert ends(chunks) == [
        ReasoningBlock(text="The user asks 2+2. That is 4.\n"),
        TextBlock(text="The answer is 4."),
    ]
    assert not any("<think>" in c.text for c in chunks if isinstance(c, TextDeltaChunk))
    assert finish_of(chunks).replay_state is None  # nothing streamed in a reasoning field


async def test_a_bare_closing_tag_folds_the_answer_so_far_into_reasoning(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    text = "Okay, the user wants 2+2.</think>\n\nIt is 4."
    chunks = await answer(server, client, wt.tokens(text, 3))
    # streamed as answer first (nothing said otherwise), then closed empty and re-sent as reasoning
    assert isinstance(chunks[0], BlockStartChunk) and chunks[0].block_type == "text"
    assert ends(chunks) == [
        TextBlock(text=""),
        ReasoningBlock(text="Okay, the user wants 2+2."),
        TextBlock(text="It is 4."),
    ]
    assert [b for b in assembled(chunks) if b != TextBlock(text="")] == ends(chunks)[1:]


async def test_a_think_block_after_a_word_keeps_the_word_and_the_order(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    text = "Sure.\n<think>Three spiders, eight legs each.</think>\n24 legs."
    chunks = await answer(server, client, wt.tokens(text, 3))
    assert ends(chunks) == [
        TextBlock(text="Sure.\n"),
        ReasoningBlock(text="Three spiders, eight legs each."),
        TextBlock(text="24 legs."),
    ]
    assert assembled(chunks) == tuple(ends(chunks))


async def test_reasoning_then_a_text_call(server: SseServer, client: httpx.AsyncClient) -> None:
    text = "<think>I should use python.</think>\n" + wt.QWEN_TEXT_CALL
    chunks = await answer(server, client, wt.tokens(text, 5))
    reasoning, call = ends(chunks)
    assert reasoning == ReasoningBlock(text="I should use python.")
    assert isinstance(call, ToolCallBlock) and call.name == "python"
    assert finish_of(chunks).reason == FinishToolCalls()


async def test_the_reasoning_field_is_recorded_for_the_generic_profile_only(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    for profile, expected in (
        ("generic", {"reasoningField": "reasoning_content"}),
        ("openai", None),
    ):
        server.script(
            sse_reply(
                wt.sse(
                    wt.local_chunk(
                        {"role": "assistant", "reasoning_content": "Let me think."}, rid="r"
                    ),
                    wt.local_chunk({"content": "Done."}, rid="r"),
                    wt.local_chunk({}, finish_reason="stop", rid="r"),
                    "[DONE]",
                )
            )
        )
        chunks = await collect(chat_provider(server.url, client, profile=profile), request())
        assert finish_of(chunks).replay_state == expected
    server.script(sse_reply(wt.LOCAL_REASONING_FIELD))
    chunks = await collect(chat_provider(server.url, client, profile="generic"), request())
    assert finish_of(chunks).replay_state == {"reasoningField": "reasoning"}


# --- a <think> never closed -----------------------------------------------------------------------


@pytest.mark.parametrize("framing", FRAMINGS.values(), ids=FRAMINGS.keys())
async def test_reasoning_never_closed_with_no_answer_is_the_answer_flagged(
    server: SseServer, client: httpx.AsyncClient, framing: Framing
) -> None:
    text = "<think>\nThree spiders have eight legs each, so 24 legs."
    chunks = await answer(server, client, wt.tokens(text, 2), framing=framing)
    said = "Three spiders have eight legs each, so 24 legs."
    # shown folded while it streamed, then closed empty and re-sent as the answer, marked
    assert ends(chunks) == [
        ReasoningBlock(text=""),
        TextBlock(text=said, unclosed_reasoning=True),
    ]
    streamed = "".join(c.text for c in chunks if isinstance(c, TextDeltaChunk))
    assert streamed == said  # the answer's chunks are exactly the message's text, once
    assert assembled(chunks) == tuple(ends(chunks))
    assert finish_of(chunks).reason == FinishStop()


async def test_reasoning_never_closed_after_an_answer_stays_reasoning(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    text = "Sure.\n<think>Three spiders, eight legs each"
    chunks = await answer(server, client, wt.tokens(text, 3))
    assert ends(chunks) == [
        TextBlock(text="Sure.\n"),
        ReasoningBlock(text="Three spiders, eight legs each"),
    ]


async def test_reasoning_never_closed_and_cut_by_the_limit_stays_reasoning(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    chunks = await answer(
        server, client, wt.tokens("<think>Still thinking about it"), finish_reason="length"
    )
    assert ends(chunks) == [ReasoningBlock(text="Still thinking about it")]
    assert finish_of(chunks).reason == FinishMaxTokens()


async def test_an_empty_think_never_closed_is_still_an_empty_answer(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    chunks = await answer(server, client, ["<think>", "\n  "])
    assert ends(chunks) == []
    reason = finish_of(chunks).reason
    assert reason.kind == "error" and reason.failure.code == "EMPTY_RESPONSE"  # type: ignore[union-attr]


# --- held text: reported between reads, released whole -------------------------------------------


async def reads_of(
    server: SseServer, client: httpx.AsyncClient, pieces: list[str], *, delay_ms: float
) -> list[list[StreamChunk] | HeldText]:
    """The reads of one generic answer whose pieces arrive ``delay_ms`` apart (one write each)."""
    server.script(Reply(frames=frames_from_sse(wt.local_stream(pieces), delay_ms=delay_ms)))
    provider = chat_provider(server.url, client, profile="generic")
    return [
        r if isinstance(r, HeldText) else list(r)
        async for r in stream_call_reads(provider, request(tools=TOOLS))
    ]


LOOP = '{"name": "python", "arguments": {"code": "' + "print(1)\\n" * 600
"""A model looping inside an unclosed JSON string: never a call, ~6 kB."""


async def test_held_text_is_reported_as_it_grows_and_released_whole_at_the_bound(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    reads = await reads_of(server, client, wt.tokens(LOOP, 256), delay_ms=30)
    notes = [r.chars for r in reads if isinstance(r, HeldText)]
    chunks = [c for r in reads if not isinstance(r, HeldText) for c in r]
    growing = notes[:-1]
    assert growing and growing == sorted(set(growing)) and 0 not in growing
    assert growing[-1] <= MAX_HELD_CHARS + 256
    assert notes[-1] == 0  # released: nothing held any more
    first_text = next(
        n
        for n, r in enumerate(reads)
        if not isinstance(r, HeldText) and any(isinstance(c, TextDeltaChunk) for c in r)
    )
    after = [r.chars for r in reads[first_text:] if isinstance(r, HeldText)]
    assert after == [0]  # once released, only the note that nothing is held
    deltas = [c.text for c in chunks if isinstance(c, TextDeltaChunk)]
    assert MAX_HELD_CHARS < len(deltas[0]) <= MAX_HELD_CHARS + 256  # all held, in one delta
    assert "".join(deltas) == LOOP  # every character once, in order
    assert ends(chunks) == [TextBlock(text=LOOP)] == list(assembled(chunks))


async def test_a_call_that_closes_within_the_bound_is_reported_then_recovered(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    reads = await reads_of(server, client, wt.tokens(wt.QWEN_TEXT_CALL, 16), delay_ms=30)
    notes = [r.chars for r in reads if isinstance(r, HeldText)]
    chunks = [c for r in reads if not isinstance(r, HeldText) for c in r]
    assert notes and notes[0] <= 16 and notes[-1] <= len(wt.QWEN_TEXT_CALL)
    assert not any(isinstance(c, TextDeltaChunk) for c in chunks)  # never shown as text
    (block,) = ends(chunks)
    assert isinstance(block, ToolCallBlock) and block.recovered_from == wt.QWEN_TEXT_CALL
    assert finish_of(chunks).reason == FinishToolCalls()
