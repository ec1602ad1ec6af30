"""The turn as text (``views.text_turn``): a pure function of a real Agent's session events, with a
scripted provider; and its writer's pace."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from dsh_kernel import Agent, tool
from dsh_kernel.agent.retry import RetryPolicy
from dsh_kernel.llm.types import (
    BlockEndChunk,
    BlockStartChunk,
    FinishChunk,
    FinishStop,
    GenerateRequest,
    StreamChunk,
    TextBlock,
    TextDeltaChunk,
    TokenUsage,
    UsageChunk,
)
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.testing import (
    FunctionProvider,
    ScriptedProvider,
    error_response,
    text_response,
    tool_call_response,
)
from dsh_kernel.views.text_turn import TextStream, TextTurn, terminal_text

from .helpers import logged


@tool(read_only=True)
def lookup_city(name: str) -> str:
    """Look a city up."""
    return f"{name}: 2,100,000 people"


@tool(read_only=True)
def broken(name: str) -> str:
    """Always fails."""
    raise ValueError(f"no such thing as {name}\nsecond line")


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


async def run(agent: Agent, prompt: str) -> str:
    """The whole text of one turn, taken after every event (the most a writer could ever take)."""
    turn = TextTurn(session_id=agent.id)
    pieces: list[str] = []

    def observe(event: SessionEvent) -> None:
        turn.observe(event)
        pieces.append(turn.take())

    dispose = agent.session.subscribe(observe)
    try:
        agent.followup(prompt)
        await agent.when_idle()
    finally:
        dispose()
    pieces.append(turn.take(final=True))
    assert turn.take(final=True) == ""  # the end is written once
    return "".join(pieces)


async def test_answer_tool_outcome_and_footer_in_stream_order() -> None:
    provider = ScriptedProvider(
        [
            tool_call_response(
                "lookup_city",
                {"name": "Paris"},
                call_id="c1",
                text="Let me look.",
                reasoning="r" * 1234,
            ),
            text_response(
                "Paris has **2.1M** people.", usage=TokenUsage(input_tokens=900, output_tokens=42)
            ),
        ]
    )
    agent = Agent(provider=provider, model="m", tools=[lookup_city])
    text = await run(agent, "How big is Paris?")
    lines = text.splitlines()
    assert "(reasoning: 1,234 chars)" in lines
    assert "r" * 20 not in text  # the reasoning's length, never its text
    start = lines.index("▸ lookup_city")
    assert lines[start + 1].startswith("  ✓ lookup_city: done")
    assert lines[start + 1].endswith("→ Paris: 2,100,000 people")
    assert (
        text.index("Let me look.") < text.index("▸ lookup_city") < text.index("Paris has **2.1M**")
    )
    assert lines[-1].startswith("— ") and f"session {agent.id[:8]}" in lines[-1]


async def test_footer_has_the_widget_footers_facts() -> None:
    usage = TokenUsage(input_tokens=1500, output_tokens=42)
    agent = Agent(provider=ScriptedProvider([text_response("Hi.", usage=usage)]), model="m")
    text = await run(agent, "hi")
    footer = text.splitlines()[-1]
    assert footer.startswith("— ")
    for fact in ("in 1,500", "out 42", "total ", f"session {agent.id[:8]}"):
        assert fact in footer, (fact, footer)


async def test_failed_tool_says_code_and_first_line() -> None:
    provider = ScriptedProvider(
        [tool_call_response("broken", {"name": "x"}, call_id="c1"), text_response("Sorry.")]
    )
    agent = Agent(provider=provider, model="m", tools=[broken])
    text = await run(agent, "try")
    [line] = [ln for ln in text.splitlines() if ln.startswith("  ✗ broken failed")]
    assert "no such thing as x" in line and "second line" not in line
    assert "(" in line.split(":")[0]  # the stable code, e.g. "(TOOL_FAILED)"


async def test_denied_without_a_frontend_says_how_to_allow() -> None:
    async def nobody(request_id: object, request: object) -> str:
        return "unavailable"

    provider = ScriptedProvider(
        [
            tool_call_response("delete_file", {"path": "a.txt"}, call_id="c1"),
            text_response("I could not."),
        ]
    )
    agent = Agent(provider=provider, model="m", tools=[delete_file], answerer=nobody)
    text = await run(agent, "delete a.txt")
    [line] = [ln for ln in text.splitlines() if "✗ delete_file denied" in ln]
    assert "%agent approve auto" in line


async def test_a_failed_turn_ends_with_its_notice_and_the_footer() -> None:
    agent = Agent(
        provider=ScriptedProvider([error_response("AUTH", "bad key", status=401)]), model="m"
    )
    text = await run(agent, "hi")
    lines = text.splitlines()
    assert any(ln.startswith("AUTH: bad key") for ln in lines), lines
    assert lines[-1].startswith("— ")


async def test_escape_sequences_from_the_model_never_reach_the_terminal() -> None:
    hostile = "red \x1b[31mALERT\x1b[0m bell\x07 back\x08 csi\x9b2J ok\r\nnext\tcol"
    agent = Agent(provider=ScriptedProvider([text_response(hostile)]), model="m")
    text = await run(agent, "hi")
    for bad in ("\x1b", "\x07", "\x08", "\x9b", "\r"):
        assert bad not in text
    assert "red ␛[31mALERT␛[0m bell␇ back␈ csi�2J ok\nnext\tcol" in text


async def test_a_retry_keeps_what_was_written_notes_it_and_writes_the_new_attempt() -> None:
    provider = ScriptedProvider(
        [
            error_response("RATE_LIMIT", "slow down", status=429, partial_text="Hel"),
            text_response("Hello there", usage=TokenUsage(input_tokens=5, output_tokens=2)),
        ]
    )

    async def no_sleep(seconds: float) -> None:
        del seconds
        await asyncio.sleep(0)

    agent = Agent(provider=provider, model="m", sleep=no_sleep, retry_policy=RetryPolicy())
    lines = (await run(agent, "go")).splitlines()
    assert lines[0] == "Hel"  # a terminal cannot take it back
    assert lines[2].startswith("⚠️") and "RATE_LIMIT" in lines[2]
    assert lines[4] == "Hello there"
    assert lines[-1].startswith("— ")


def test_terminal_text_keeps_text_and_shows_controls() -> None:
    assert terminal_text("a\tb\nc ünï 🙂") == "a\tb\nc ünï 🙂"
    assert terminal_text("\x1b]0;title\x07") == "␛]0;title␇"
    assert terminal_text("\x00\x7f\x85") == "␀␡�"


def paced(n: int, delay: float) -> tuple[str, FunctionProvider]:
    pieces = [f"w{i} " for i in range(n)]
    text = "".join(pieces)

    async def stream(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        del request
        yield BlockStartChunk(index=0, block_type="text")
        for p in pieces:
            await asyncio.sleep(delay)
            yield TextDeltaChunk(index=0, text=p)
        yield BlockEndChunk(index=0, block=TextBlock(text=text))
        yield UsageChunk(usage=TokenUsage(input_tokens=10, output_tokens=n))
        yield FinishChunk(reason=FinishStop())

    return text, FunctionProvider(stream)


async def test_stream_writes_at_a_steady_rate_and_drops_nothing() -> None:
    text, provider = paced(1500, 0.0005)
    agent = Agent(provider=provider, model="m")
    written: list[str] = []
    stream = TextStream(TextTurn(session_id=agent.id), written.append)
    dispose = agent.session.subscribe(stream.observe)
    loop = asyncio.get_running_loop()
    started = loop.time()
    agent.followup("write a lot")
    await agent.when_idle()
    elapsed = loop.time() - started
    live_writes = stream.writes
    dispose()
    stream.finish()
    whole = "".join(written)
    assert whole.startswith(text.rstrip())  # every word, in order, once
    assert whole.count("w1499 ") == 1
    assert live_writes >= 3, live_writes  # it streamed
    # 1,500 chunks, and nowhere near one write per chunk: at most 20 a second
    assert live_writes <= elapsed * 20 * 1.5 + 10, (live_writes, elapsed)
    assert whole.splitlines()[-1].startswith("— ")


async def test_the_first_words_are_written_at_once_and_only_their_growth_is_paced() -> None:
    more, end = asyncio.Event(), asyncio.Event()

    async def held(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        del request
        yield BlockStartChunk(index=0, block_type="text")
        yield TextDeltaChunk(index=0, text="Hello")
        await more.wait()
        yield TextDeltaChunk(index=0, text=", world")
        await end.wait()
        yield BlockEndChunk(index=0, block=TextBlock(text="Hello, world"))
        yield FinishChunk(reason=FinishStop())

    agent = Agent(provider=FunctionProvider(held), model="m")
    written: list[str] = []
    # One paced write per 1,000 s: whatever is written during this test is written at once.
    stream = TextStream(TextTurn(session_id=agent.id), written.append, max_rate_hz=0.001)
    dispose = agent.session.subscribe(stream.observe)
    agent.followup("hi")

    async def until(predicate: Callable[[], bool]) -> None:
        async with asyncio.timeout(5):
            while not predicate():  # noqa: ASYNC110 - polling the writer is the point
                await asyncio.sleep(0.001)

    await until(lambda: written == ["Hello"])  # while the provider holds the rest
    more.set()
    await until(lambda: logged(agent, ", world"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert written == ["Hello"]  # the answer grew: that waits for the pace
    end.set()
    await agent.when_idle()
    dispose()
    stream.finish()
    assert "".join(written).startswith("Hello, world\n")
