"""The context window in the agent loop (issue 14): where it comes from, the warning, the refusal
before sending, the output cap, the overflowed turn left out of the history, the retry of empty
answers. The provider is scripted; the log, the meter and the loop are real (dev invariants on, so
every request is also rebuilt from the log alone)."""

from __future__ import annotations

from collections.abc import Sequence

from dsh_kernel import Agent, tool
from dsh_kernel.agent.compaction.run import CompactionSettings
from dsh_kernel.agent.request.fit import DROPPED_PLUGIN, MIN_ANSWER_TOKENS, padded_tokens
from dsh_kernel.agent.request.meter import measure
from dsh_kernel.agent.request.window import ContextWindow, ContextWindows
from dsh_kernel.agent.retry import RetryPolicy
from dsh_kernel.llm.types import GenerateRequest, ModelInfo, StreamChunk, TokenUsage
from dsh_kernel.session.events import ReplaceOp, SessionEvent
from dsh_kernel.store.replay import ReplayProvider
from dsh_kernel.testing import (
    FunctionProvider,
    ScriptedProvider,
    error_response,
    max_tokens_response,
    text_response,
    tool_call_response,
)
from dsh_kernel.transcript.model import NoticeItem
from dsh_kernel.transcript.turn import fold_turn, turn_events
from dsh_kernel.views.format import end_notice
from tests.unit.agent.helpers import agent_with, of_type, run, turn_ends

LONG = "lorem ipsum dolor sit amet " * 1500  # ~40k characters: ~10k tokens by chars / 4


def error_codes(events: Sequence[SessionEvent]) -> list[str | None]:
    return [r.get("error", {}).get("code") for r in turn_ends(events)]  # type: ignore[union-attr]


def sent_texts(provider: ScriptedProvider, n: int) -> list[str]:
    return [m.text() for m in provider.requests[n].messages]


# --- where the window comes from ---------------------------------------------------------------


async def test_configured_beats_catalogue_and_catalogue_beats_nothing() -> None:
    provider = ScriptedProvider([], info=ModelInfo(context_window=32_000))
    windows = ContextWindows()
    assert await windows.resolve(provider, "m1") == ContextWindow(tokens=32_000, source="catalogue")
    windows.configured = 8192
    assert await windows.resolve(provider, "m1") == ContextWindow(tokens=8192, source="configured")
    current = windows.current(provider, "m1")
    assert current is not None and current.describe() == "8,192 tokens (configured)"
    assert await ContextWindows().resolve(ScriptedProvider([]), "m1") is None


# --- the refusal, and the next message -----------------------------------------------------------


async def test_an_over_long_message_is_not_sent_and_the_next_short_one_works() -> None:
    provider = ScriptedProvider([text_response("Hello!")])
    agent = agent_with(provider, window=4096)
    await run(agent, LONG)
    ev = agent.session.events
    assert error_codes(ev) == ["CONTEXT_WINDOW_EXCEEDED"]
    assert provider.requests == []  # nothing was sent
    assert of_type(ev, "request/header") == []
    message = turn_ends(ev)[0]["error"]["message"]  # type: ignore[index]
    assert "4,096 tokens (configured)" in message and "was not sent" in message
    # The failed turn's message is off the surface: one note replaced it (and the log kept it).
    (note,) = [e for e in of_type(ev, "user/message") if isinstance(e.surface_op, ReplaceOp)]
    assert note.data["source"]["plugin"] == DROPPED_PLUGIN  # type: ignore[index]
    assert LONG in [e.data["content"][0]["text"] for e in of_type(ev, "user/message")]  # type: ignore[index]
    await run(agent, "Say hello.")
    assert error_codes(agent.session.events) == ["CONTEXT_WINDOW_EXCEEDED", None]
    texts = sent_texts(provider, 0)
    assert "Say hello." in texts and LONG not in texts
    assert any("left out here" in t for t in texts)


async def test_a_turn_that_overflows_after_a_tool_is_left_out_whole() -> None:
    @tool(read_only=True)
    def dump() -> str:
        """Prints a lot."""
        return LONG

    provider = ScriptedProvider([tool_call_response("dump", {}, call_id="c1"), text_response("ok")])
    # compaction off: with it on, the huge result would be cut instead (test_compaction.py)
    agent = agent_with(
        provider, window=6000, tools=[dump], compaction=CompactionSettings(auto=False)
    )
    await run(agent, "Dump it.")
    ev = agent.session.events
    assert error_codes(ev) == ["CONTEXT_WINDOW_EXCEEDED"]
    assert len(provider.requests) == 1  # the step after the tool was refused before sending
    await run(agent, "Just say ok.")
    roles = [m.role for m in provider.requests[1].messages]
    assert "assistant" not in roles  # the tool call and its result left together
    assert all(LONG not in t for t in sent_texts(provider, 1))
    assert turn_ends(agent.session.events)[-1] == {"kind": "completed"}


async def test_an_overflow_the_server_reports_is_not_retried_and_is_left_out() -> None:
    provider = ScriptedProvider(
        [
            error_response("CONTEXT_WINDOW_EXCEEDED", "maximum context length is 4096", status=400),
            text_response("Hi."),
        ]
    )
    agent = agent_with(provider)  # no window known: only the server can say
    await run(agent, "x" * 3000)
    assert len(provider.requests) == 1 and of_type(agent.session.events, "llm/retry") == []
    await run(agent, "Say hi.")
    assert "x" * 3000 not in sent_texts(provider, 1)


async def test_other_failures_keep_the_turn_in_the_history() -> None:
    provider = ScriptedProvider([error_response("INVALID_REQUEST", "no"), text_response("ok")])
    agent = agent_with(provider)
    await run(agent, "first", "second")
    assert sent_texts(provider, 1)[:1] == ["first"]


# --- the output cap and the warning --------------------------------------------------------------


async def test_a_known_window_caps_the_output_to_the_room_left() -> None:
    provider = ScriptedProvider([text_response("a"), text_response("b")])
    agent = agent_with(provider, window=8192)
    await run(agent, "first")
    cap = provider.requests[0].max_tokens
    assert cap is not None and MIN_ANSWER_TOKENS <= cap < 8192
    header = of_type(agent.session.events, "request/header")[-1].data["header"]
    assert header["config"]["maxTokens"] == cap  # type: ignore[index]
    assert header["adapterDefaults"] == {"maxTokens": True}  # type: ignore[index]
    await run(agent, "second " * 200)
    second = provider.requests[1].max_tokens
    assert second is not None and second < cap  # the history grew: less room


async def test_the_cap_never_exceeds_one_set_nor_is_sent_for_a_catalogue_window() -> None:
    capped = ScriptedProvider([text_response("a")])
    agent = agent_with(capped, window=8192, max_tokens=100)
    await run(agent, "hi")
    assert capped.requests[0].max_tokens == 100
    header = of_type(agent.session.events, "request/header")[-1].data["header"]
    assert isinstance(header, dict) and "adapterDefaults" not in header  # the caller's own cap
    assumed = ScriptedProvider([text_response("a")], info=ModelInfo(context_window=8192))
    await run(agent_with(assumed), "hi")
    assert assumed.requests[0].max_tokens is None  # a catalogue window keeps its defaults


async def test_the_cap_is_the_room_the_padded_estimate_leaves() -> None:
    seen: list[tuple[int | None, int, int]] = []

    def answer(request: GenerateRequest) -> list[StreamChunk]:
        m = measure(agent.session)  # the request as logged, before its answer
        seen.append((request.max_tokens, m.total_tokens, padded_tokens(m)))
        return text_response("a")

    agent = Agent(
        provider=FunctionProvider(answer),
        model="m1",
        context_windows=ContextWindows(configured=8192),
        check_invariants=True,
    )
    await run(agent, "y" * 4000)
    ((cap, plain, padded),) = seen
    assert cap == 8192 - padded and padded > plain > 1000


async def test_a_request_filling_most_of_the_window_warns_once_per_turn() -> None:
    @tool(read_only=True)
    def more() -> str:
        """Adds a little."""
        return "z" * 400

    provider = ScriptedProvider(
        [tool_call_response("more", {}, call_id="c1"), text_response("done")]
    )
    agent = agent_with(provider, window=4096, tools=[more])
    await run(agent, "w" * 13_500)  # ~3.4k tokens: over 80% of 4,096, under 4,096 - 256
    ev = agent.session.events
    (warning,) = of_type(ev, "context/warning")
    assert warning.ignorable and warning.data["contextWindow"] == 4096
    assert warning.data["source"] == "configured" and warning.data["measured"] is False
    assert warning.seq < of_type(ev, "request/header")[0].seq
    model = fold_turn(turn_events(ev, 1))
    (notice,) = [i for i in model.items if isinstance(i, NoticeItem) and i.level == "warning"]
    assert "% of a 4,096-token context window:" in notice.text and "%agent new" in notice.text
    assert turn_ends(ev) == [{"kind": "completed"}]


async def test_an_assumed_window_warns_but_never_refuses() -> None:
    provider = ScriptedProvider([text_response("fine")], info=ModelInfo(context_window=1024))
    agent = agent_with(provider)
    await run(agent, LONG)
    assert turn_ends(agent.session.events) == [{"kind": "completed"}]
    assert of_type(agent.session.events, "context/warning")


async def test_the_meter_anchors_across_changing_output_caps() -> None:
    usage = TokenUsage(input_tokens=900, output_tokens=10)
    provider = ScriptedProvider([text_response("a", usage=usage), text_response("b")])
    agent = agent_with(provider, window=8192)
    await run(agent, "first", "second " * 100)
    caps = [r.max_tokens for r in provider.requests]
    assert caps[0] != caps[1]  # each request had its own cap (two headers)
    assert measure(agent.session).baseline == "usage"


async def test_the_window_and_its_source_are_logged_each_turn() -> None:
    provider = ScriptedProvider([text_response("a"), text_response("b")])
    agent = agent_with(provider, window=8192)
    await run(agent, "first", "second")
    contexts = [e.data for e in of_type(agent.session.events, "request/context")]
    assert (
        contexts
        == [
            {
                "provider": "scripted",
                "model": "m1",
                "contextWindow": 8192,
                "contextWindowSource": "configured",
            }
        ]
        * 2
    )
    assert fold_turn(turn_events(agent.session.events, 2)).context_window_source == "configured"


# --- retries of empty answers ---------------------------------------------------------------------


async def test_an_empty_answer_is_retried_once_not_five_times() -> None:
    empty = error_response("EMPTY_RESPONSE", "the model returned nothing")
    provider = ScriptedProvider([empty, empty, empty])
    agent = agent_with(provider)
    await run(agent, "Say nothing.")
    assert len(provider.requests) == 2
    assert error_codes(agent.session.events) == ["EMPTY_RESPONSE"]
    (retry,) = of_type(agent.session.events, "llm/retry")
    assert retry.data["maxRetries"] == 1
    other = RetryPolicy(code_max_retries={})
    assert other.retries_for("EMPTY_RESPONSE") == 5 and other.key != RetryPolicy().key


async def test_a_cut_off_answer_on_a_known_window_says_the_window_is_probably_full() -> None:
    provider = ScriptedProvider([max_tokens_response("1 2 3 4")])
    agent = agent_with(provider, window=4096)
    await run(agent, "Count.")
    notice = end_notice(fold_turn(turn_events(agent.session.events, 1)))
    assert notice is not None and notice.hint is not None
    assert "(4,096 tokens) is probably full" in notice.hint and "%agent new" in notice.hint
    catalogue = ScriptedProvider([max_tokens_response("1 2")], info=ModelInfo(context_window=9000))
    agent = agent_with(catalogue)
    await run(agent, "Count.")
    notice = end_notice(fold_turn(turn_events(agent.session.events, 1)))
    assert notice is not None and notice.hint == "Ask the agent to continue."


async def test_a_replay_of_an_overflowed_session_agrees_with_the_recording() -> None:
    provider = ScriptedProvider(
        [
            error_response("CONTEXT_WINDOW_EXCEEDED", "maximum context length is 4096", status=400),
            text_response("Hi."),
        ]
    )
    recorded = agent_with(provider)
    await run(recorded, LONG, "Say hi.")
    replay = ReplayProvider(list(recorded.session.events))
    again = agent_with(ScriptedProvider([]))
    again.set_route(provider=replay, model="m1")
    await run(again, LONG, "Say hi.")
    replay.assert_consumed()
    assert error_codes(again.session.events) == ["CONTEXT_WINDOW_EXCEEDED", None]
    assert again.session.derive_messages()[-1].text() == "Hi."
