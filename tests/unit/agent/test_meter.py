"""The token meter: anchored on real usage, estimated after it, estimated from scratch without it."""

from __future__ import annotations

from dsh_kernel import Agent
from dsh_kernel.agent.request.meter import measure
from dsh_kernel.agent.system_prompt import PromptSection
from dsh_kernel.llm.estimate import message_tokens
from dsh_kernel.llm.types import TokenUsage
from dsh_kernel.testing import ScriptedProvider, text_response
from dsh_kernel.transcript.turn import fold_turn, turn_events


async def test_no_usage_means_a_full_estimate() -> None:
    agent = Agent(provider=ScriptedProvider([text_response("a" * 400)]), model="m")
    agent.followup("b" * 40)
    await agent.when_idle()
    m = measure(agent.session, context_window=1000)
    assert m.baseline == "estimated"
    # user: 40 chars -> 10 + 4 + 4; answer: 400 chars -> 100 + 4 + 4; plus the system prompt
    assert m.surface_delta_tokens == 18 + 108
    assert m.baseline_tokens > 0
    assert m.fraction is not None and 0 < m.fraction < 1


async def test_usage_anchors_and_later_messages_are_added() -> None:
    usage = TokenUsage(input_tokens=500, output_tokens=50, cache_read_tokens=1500)
    agent = Agent(
        provider=ScriptedProvider([text_response("x", usage=usage), text_response("y")]), model="m"
    )
    agent.followup("first")
    await agent.when_idle()
    m1 = measure(agent.session, context_window=100_000)
    assert (m1.baseline, m1.total_tokens) == ("usage", 2050)
    agent.inject("c" * 80)  # queued, not yet in the history
    assert measure(agent.session).total_tokens == 2050
    agent.followup("second")
    await agent.when_idle()
    m2 = measure(agent.session)
    # The second call reported no usage: the anchor stays on the first answer and everything the
    # history gained after it is estimated on top.
    messages = agent.session.derive_messages()[2:]
    assert m2.baseline == "usage"
    assert m2.total_tokens == 2050 + sum(message_tokens(m) for m in messages)
    assert "2,0" in m1.describe() and "%" in m1.describe()


async def test_a_changed_system_prompt_drops_the_anchor() -> None:
    usage = TokenUsage(input_tokens=500, output_tokens=50)
    agent = Agent(
        provider=ScriptedProvider([text_response("x", usage=usage), text_response("y")]), model="m"
    )
    agent.followup("first")
    await agent.when_idle()
    agent.system_prompt.add(PromptSection(name="extra", order=10, text="Be brief. " * 50))
    agent.followup("second")
    await agent.when_idle()
    assert measure(agent.session).baseline == "estimated"


async def test_a_zero_usage_is_never_the_anchor() -> None:
    # A log written before the adapters dropped a 0-in/0-out usage (or by a provider that reports
    # one): it measures nothing, so the meter keeps the last real anchor and estimates past it.
    real = TokenUsage(input_tokens=500, output_tokens=50)
    zero = TokenUsage(input_tokens=0, output_tokens=0)
    agent = Agent(
        provider=ScriptedProvider(
            [text_response("x", usage=real), text_response("y" * 40, usage=zero)]
        ),
        model="m",
    )
    agent.followup("first")
    await agent.when_idle()
    agent.followup("second")
    await agent.when_idle()
    m = measure(agent.session)
    messages = agent.session.derive_messages()[2:]
    assert m.baseline == "usage" and m.baseline_tokens == 550
    # what came after it is estimated (calibrated by what the real count taught)
    assert m.total_tokens == 550 + m.calibration.delta(sum(message_tokens(x) for x in messages))
    # The footer's context is the last real count too, not 0.
    footer = fold_turn(turn_events(agent.session.events, 2)).usage
    assert footer.context_tokens is None  # turn 2 reported nothing real
    assert fold_turn(turn_events(agent.session.events, 1)).usage.context_tokens == 550


async def test_a_zero_usage_alone_leaves_the_estimate() -> None:
    zero = TokenUsage(input_tokens=0, output_tokens=0)
    agent = Agent(provider=ScriptedProvider([text_response("x", usage=zero)]), model="m")
    agent.followup("first")
    await agent.when_idle()
    assert measure(agent.session).baseline == "estimated"
