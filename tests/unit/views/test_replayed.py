"""A replayed turn draws the same widgets and saved rendering on every run, whatever its clock said;
a live turn still shows its times, durations and session id; the log keeps the real times.

The clock is the faked edge: each run of the agent gets a clock that steps by a different amount, so
every time in its log differs from the other run's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import cast

from dsh_kernel import Agent, tool
from dsh_kernel.llm.provider import REPLAY_PROVIDER_ID
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.session.log import Clock
from dsh_kernel.store.replay import ReplayProvider
from dsh_kernel.testing import ScriptedProvider, text_response, tool_call_response
from dsh_kernel.transcript.turn import fold_turn
from dsh_kernel.views import TurnView
from dsh_kernel.views.format import footer_parts
from dsh_kernel.views.replayed import as_drawn, replayed
from tests.support.frontend import markdown_footer

from .helpers import CommLog, attach, state_of

START = 1_700_000_000_000


@tool(read_only=True)
def count_words(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


def stepping(step_ms: int) -> Clock:
    """A clock that moves ``step_ms`` every time it is read."""
    now = START

    def clock() -> int:
        nonlocal now
        now += step_ms
        return now

    return clock


def script() -> ScriptedProvider:
    return ScriptedProvider(
        [
            tool_call_response("count_words", {"text": "a b c"}, call_id="c1", reasoning="count"),
            text_response("There are **3** words."),
        ]
    )


async def run(provider: ScriptedProvider | ReplayProvider, step_ms: int) -> tuple[Agent, TurnView]:
    agent = Agent(provider=provider, model="m", tools=[count_words], clock=stepping(step_ms))
    view = TurnView(session_id=agent.id)
    attach(agent, view)
    agent.followup("How many words are in 'a b c'?")
    await agent.when_idle()
    return agent, view


def times(events: Sequence[SessionEvent]) -> list[int]:
    return [e.time for e in events]


async def test_two_replays_with_different_clocks_draw_the_same(comms: CommLog) -> None:
    del comms
    recording, _ = await run(script(), step_ms=5)
    recorded = list(recording.session.events)

    first, first_view = await run(ReplayProvider(recorded), step_ms=7)
    second, second_view = await run(ReplayProvider(recorded), step_ms=13)
    a, b = first_view.finish(), second_view.finish()

    assert a == b
    assert state_of(first_view.widget) == state_of(second_view.widget)
    footer = markdown_footer(a["text/markdown"])
    assert footer.endswith(" · replayed</sub>"), footer
    for text in (a["text/markdown"], a["text/html"], first_view.footer.value):
        assert "first token" not in text and "total " not in text
        assert first.id[:8] not in text and "session " not in text
        assert not re.search(r"\d+ ms\b", text), text
    assert "<b>count_words</b> — done</summary>" in a["text/markdown"]
    # Only the drawing changed: each replay's log has its own, real times and ids.
    assert first.id != second.id
    assert times(first.session.events) != times(second.session.events)
    assert {
        cast(str | None, e.data.get("provider"))
        for e in first.session.events
        if e.type == "request/header"
    } <= {
        None,
        REPLAY_PROVIDER_ID,
    }


async def test_a_live_turn_still_shows_times_durations_and_its_session(comms: CommLog) -> None:
    del comms
    agent, view = await run(script(), step_ms=5)
    bundle = view.finish()
    footer = markdown_footer(bundle["text/markdown"])
    assert "first token " in footer and "total " in footer
    assert f"session {agent.id[:8]}" in footer and "replayed" not in footer
    assert re.search(r"<b>count_words</b> — done · \d+ ms</summary>", bundle["text/markdown"])


async def test_replayed_is_read_from_the_turns_own_events(comms: CommLog) -> None:
    del comms
    recording, _ = await run(script(), step_ms=5)
    replay, _ = await run(ReplayProvider(list(recording.session.events)), step_ms=5)
    live_model = fold_turn(recording.session.events)
    replay_model = fold_turn(replay.session.events)
    assert not replayed(live_model) and replayed(replay_model)
    assert as_drawn(live_model) is live_model
    [card] = replay_model.cards
    assert card.duration_ms is not None  # the fold keeps what the log says
    assert [c.duration_ms for c in as_drawn(replay_model).cards] == [None]
    assert footer_parts(replay_model, session_id=replay.id)[-1] == "replayed"
