"""The live turn view driven by a real Agent and a scripted provider, with no frontend: widget state
is read from the widgets, traffic from the recording comm, clicks played through the comm."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator

import ipywidgets

from dsh_kernel import Agent, tool
from dsh_kernel.jsonvalue import JsonObject, JsonValue
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
from dsh_kernel.testing import (
    FunctionProvider,
    ScriptedProvider,
    error_response,
    hang,
    text_response,
    tool_call_response,
)
from dsh_kernel.tools.types import ToolContext, ToolDefinition
from dsh_kernel.views import TurnView, ViewControls, WidgetAnswerer
from dsh_kernel.views.tool_card import ToolCardWidget

from .helpers import (
    CommLog,
    answer_texts,
    attach,
    find,
    html_text,
    ignoring_result,
    logged,
    replay,
    state_of,
    wait_for,
)

MD = '<div class="dsh-md mathjax_ignore tex2jax_ignore">'
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 64).decode()


def cards(view: TurnView) -> list[ToolCardWidget]:
    return [b for b in view._blocks.values() if isinstance(b, ToolCardWidget)]


def paced_answer(n: int, delay: float) -> tuple[str, FunctionProvider]:
    """A provider streaming ``n`` text deltas, ``delay`` seconds apart."""
    pieces = [f"w{i} " + ("\n\n" if i % 40 == 39 else "") for i in range(n)]
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


async def test_streamed_answer_is_coalesced_and_complete(comms: CommLog) -> None:
    text, provider = paced_answer(2000, 0.0005)
    agent = Agent(provider=provider, model="m")
    view = TurnView(session_id=agent.id)
    attach(agent, view)
    loop = asyncio.get_running_loop()
    started = loop.time()
    agent.followup("write a lot")
    await agent.when_idle()
    elapsed = loop.time() - started
    live_flushes = view.flushes
    view.finish()

    assert " ".join(answer_texts(view.items)).split() == text.split()
    outs = find(view.items, ipywidgets.HTML)
    assert len(outs) > 1  # long answers are split into pieces; only the last one grows
    updates = sum(len(comms.updates(o, "value")) for o in outs)
    assert updates < 200, updates  # 2,000 chunks, nowhere near one update per chunk
    assert live_flushes >= 3, live_flushes  # and it did stream: several redraws while running
    assert live_flushes <= elapsed * 20 * 1.5 + 10, (live_flushes, elapsed)


async def test_reasoning_is_collapsed_with_its_length_and_answer_is_markdown(
    comms: CommLog,
) -> None:
    provider = ScriptedProvider(
        [text_response("**Bold** and `a<b`", reasoning="think <b>hard</b>", pieces=4)]
    )
    agent = Agent(provider=provider, model="m")
    view = TurnView()
    attach(agent, view)
    agent.followup("hi")
    await agent.when_idle()
    view.finish()
    acc = find(view.items, ipywidgets.Accordion)[0]
    assert acc.selected_index is None
    assert acc.titles == ("💭 Reasoning · 17 chars",)
    assert acc.children[0].value == (
        '<div class="dsh-md mathjax_ignore tex2jax_ignore"><p>think &lt;b&gt;hard&lt;/b&gt;</p></div>'
    )
    assert answer_texts(view.items) == ["Bold and a<b"]
    (piece,) = [w.value for w in find(view.items, ipywidgets.HTML) if "Bold" in w.value]
    assert "<strong>Bold</strong> and <code>a&lt;b</code>" in piece
    assert view.control_row.layout.display == "none"


async def test_reasoning_text_is_sent_only_when_opened_or_done(comms: CommLog) -> None:
    release = asyncio.Event()

    async def stream(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        del request
        yield BlockStartChunk(index=0, block_type="reasoning")
        from dsh_kernel.llm.types import ReasoningBlock, ReasoningDeltaChunk

        yield ReasoningDeltaChunk(index=0, text="step one")
        await release.wait()
        yield ReasoningDeltaChunk(index=0, text=", step two")
        yield BlockEndChunk(index=0, block=ReasoningBlock(text="step one, step two"))
        yield FinishChunk(reason=FinishStop())

    agent = Agent(provider=FunctionProvider(stream), model="m")
    view = TurnView()
    attach(agent, view)
    agent.followup("hi")
    await wait_for(lambda: find(view.items, ipywidgets.Accordion))
    acc = find(view.items, ipywidgets.Accordion)[0]
    await wait_for(lambda: "8 chars" in acc.titles[0])
    assert acc.children[0].value == ""  # collapsed and still streaming: title only
    comms.set_state(acc, selected_index=0)  # the person opens it
    assert acc.children[0].value == f"{MD}<p>step one</p></div>"
    release.set()
    await agent.when_idle()
    view.finish()
    assert acc.children[0].value == f"{MD}<p>step one, step two</p></div>"


def plot_tool() -> ToolDefinition:
    def execute(args: JsonObject, ctx: ToolContext) -> JsonValue:
        del ctx
        return {"stdout": "hello\n", "code": args.get("code")}

    def meta(args: JsonObject, value: JsonValue) -> JsonValue:
        del args, value
        return {
            "outputs": [
                {"output_type": "stream", "name": "stdout", "text": ["hel", "lo\n"]},
                {
                    "output_type": "display_data",
                    "data": {"image/png": PNG, "text/plain": "<Figure>"},
                    "metadata": {},
                },
            ]
        }

    return ToolDefinition(
        name="python",
        description="Run Python.",
        parameters={"type": "object", "properties": {"code": {"type": "string"}}},
        execute=execute,
        presentation_meta=meta,
        read_only=True,
    )


async def test_tool_card_shows_code_and_rich_outputs(comms: CommLog) -> None:
    provider = ScriptedProvider(
        [
            tool_call_response("python", {"code": "plt.plot([1, 2])"}, call_id="c1"),
            text_response("Here is the plot."),
        ]
    )
    agent = Agent(provider=provider, model="m", tools=[plot_tool()])
    view = TurnView()
    attach(agent, view)
    agent.followup("plot")
    await agent.when_idle()
    bundle = view.finish()
    (card,) = cards(view)
    assert "dsh-status-done" in card.head.value and ">done<" in card.head.value
    assert html_text(card.sections.value) == "Code" + "plt.plot([1, 2])"
    outputs = card.body.outputs
    assert outputs[0] == {"output_type": "stream", "name": "stdout", "text": "hello\n"}
    assert outputs[1]["data"]["image/png"] == PNG
    assert card.details.selected_index == 0  # rich outputs open the details
    assert card.approval_row.layout.display == "none"  # read-only: no approval asked
    assert f"data:image/png;base64,{PNG}" in bundle["text/html"]
    assert f"data:image/png;base64,{PNG}" in bundle["text/markdown"]


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


async def run_with_approval(
    comms: CommLog, button: str
) -> tuple[Agent, TurnView, list[tuple[str, str]]]:
    provider = ScriptedProvider(
        [
            tool_call_response("delete_file", {"path": "a.txt"}, call_id="c1"),
            text_response("ok"),
        ]
    )
    answerer = WidgetAnswerer()
    agent = Agent(provider=provider, model="m", tools=[delete_file], answerer=answerer)
    clicks: list[tuple[str, str]] = []

    def on_approval(approval_id: str, outcome: str) -> None:
        clicks.append((approval_id, outcome))
        answerer.resolve(approval_id, outcome)

    view = TurnView(ViewControls(on_approval=on_approval))
    attach(agent, view)
    agent.followup("delete a.txt")
    await wait_for(
        lambda: (
            answerer.pending
            and any(
                c.card is not None and c.card.status == "waiting-approval" for c in cards(view)[:1]
            )
        )
    )
    (card,) = cards(view)
    assert card.approval_row.layout.display is None  # shown
    assert [b.disabled for b in (card.allow, card.deny, card.always)] == [False, False, False]
    assert "waiting for approval" in card.head.value
    assert card.details.selected_index == 0  # the person sees what they allow
    comms.click(getattr(card, button))
    assert [b.disabled for b in (card.allow, card.deny, card.always)] == [True, True, True]
    await agent.when_idle()
    view.finish()
    return agent, view, clicks


async def test_allow_once_runs_the_tool(comms: CommLog) -> None:
    _agent, view, clicks = await run_with_approval(comms, "allow")
    (card,) = cards(view)
    assert card.card is not None and card.card.status == "done"
    assert [o for _, o in clicks] == ["allowed-once"]
    assert clicks[0][0] == card.card.approval_id
    assert card.approval_note.value == "allowed once"
    assert all(b.disabled for b in (card.allow, card.deny, card.always))
    # Decided: the buttons go, the outcome stands in their place (a view drawn later, e.g. in a
    # reopened tab, never reads as waiting).
    assert [b.layout.display for b in (card.allow, card.deny, card.always)] == ["none"] * 3
    assert card.approval_row.layout.display is None
    assert "deleted a.txt" in html_text(card.sections.value)


async def test_deny_refuses_the_tool(comms: CommLog) -> None:
    _agent, view, _clicks = await run_with_approval(comms, "deny")
    (card,) = cards(view)
    assert card.card is not None and card.card.status == "denied"
    assert "dsh-status-denied" in card.head.value
    assert card.approval_note.value == "denied"
    assert "Error (DENIED)" in html_text(card.sections.value)


async def test_always_allow_sets_the_policy(comms: CommLog) -> None:
    agent, view, clicks = await run_with_approval(comms, "always")
    assert [o for _, o in clicks] == ["allowed-always"]
    assert agent.approval_policy.mode_for("delete_file", read_only=False) == "auto"
    (card,) = cards(view)
    assert card.approval_note.value == "allowed for this session"


async def test_provider_error_is_a_readable_notice(comms: CommLog) -> None:
    provider = ScriptedProvider(
        [error_response("AUTH", "DEEPSEEK_API_KEY was rejected", status=401)]
    )
    agent = Agent(provider=provider, model="m")
    view = TurnView()
    attach(agent, view)
    agent.followup("hi")
    await agent.when_idle()
    bundle = view.finish()
    assert view.end.layout.display is None
    assert "<strong>AUTH: DEEPSEEK_API_KEY was rejected</strong>" in view.end.value
    assert "%agent key" in view.end.value
    assert "Traceback" not in view.end.value and "Traceback" not in bundle["text/html"]
    assert "AUTH: DEEPSEEK\\_API\\_KEY was rejected" in bundle["text/markdown"]


async def test_stop_button_aborts_and_keeps_the_visible_text(comms: CommLog) -> None:
    provider = ScriptedProvider([hang()])
    agent = Agent(provider=provider, model="m")
    view = TurnView(ViewControls(on_stop=agent.cancel))
    attach(agent, view)
    agent.followup("hi")
    await wait_for(lambda: answer_texts(view.items) == ["partial"])
    assert view.control_row.layout.display is None  # Stop and steer while running
    comms.click(view.stop)
    await agent.when_idle()
    view.finish()
    assert view.stop.disabled
    assert "Stopped by you." in view.end.value
    assert answer_texts(view.items) == ["partial"]
    assert view.control_row.layout.display == "none"


async def test_abort_while_waiting_for_approval(comms: CommLog) -> None:
    provider = ScriptedProvider([tool_call_response("delete_file", {"path": "x"}, call_id="c1")])
    answerer = WidgetAnswerer()
    agent = Agent(provider=provider, model="m", tools=[delete_file], answerer=answerer)
    view = TurnView(ViewControls(on_approval=ignoring_result(answerer.resolve)))
    attach(agent, view)
    agent.followup("go")
    await wait_for(lambda: answerer.pending)
    agent.cancel()
    await agent.when_idle()
    view.finish()
    (card,) = cards(view)
    assert card.card is not None and card.card.status == "aborted"
    assert all(b.disabled for b in (card.allow, card.deny, card.always))
    assert [b.layout.display for b in (card.allow, card.deny, card.always)] == ["none"] * 3
    assert card.approval_note.value == "cancelled"
    assert answerer.pending == ()


async def test_steer_box_sends_and_shows_the_message(comms: CommLog) -> None:
    gate = asyncio.Event()

    @tool(read_only=True)
    async def wait() -> str:
        """Wait."""
        await gate.wait()
        return "waited"

    provider = ScriptedProvider([tool_call_response("wait", {}, call_id="c1"), text_response("ok")])
    agent = Agent(provider=provider, model="m", tools=[wait])
    sent: list[str] = []

    def on_steer(text: str) -> None:
        sent.append(text)
        agent.steer(text)

    view = TurnView(ViewControls(on_steer=on_steer))
    attach(agent, view)
    agent.followup("go")
    await wait_for(lambda: cards(view))
    comms.set_state(view.steer, value="  use <b>bold</b>  ")
    comms.click(view.send)
    assert sent == ["use <b>bold</b>"] and view.steer.value == ""
    gate.set()
    await agent.when_idle()
    view.finish()
    steer = [h for h in find(view.items, ipywidgets.HTML) if "dsh-steer" in h.value]
    assert [h.value for h in steer] == [
        '<div class="dsh-steer">↳ <strong>You:</strong> use &lt;b&gt;bold&lt;/b&gt;</div>'
    ]


async def test_view_binds_to_its_message_only(comms: CommLog) -> None:
    provider = ScriptedProvider([text_response("first"), text_response("second")])
    agent = Agent(provider=provider, model="m")
    agent.followup("one")
    await agent.when_idle()
    msg = agent.followup("two")
    second = TurnView(message_id=msg.id)
    for ev in agent.session.events:  # the first turn, already logged, is not its turn
        second.observe(ev)
    nxt = TurnView()  # binds to whatever turn starts next
    attach(agent, second)
    attach(agent, nxt)
    await agent.when_idle()
    second.finish()
    nxt.finish()
    assert answer_texts(second.items) == ["second"]
    assert answer_texts(nxt.items) == ["second"]
    assert second.model.prompt == "two" and second.model.turn == 2


async def test_rendered_follows_the_frontend_view_count(comms: CommLog) -> None:
    view = TurnView()
    assert view.widget._view_count == 0  # tracking requested
    assert not view.rendered
    comms.set_state(view.widget, _view_count=1)
    assert view.rendered
    comms.set_state(view.widget, _view_count=0)
    assert view.rendered  # once shown, it stays true


async def test_replayed_events_draw_the_same_widgets(comms: CommLog) -> None:
    provider = ScriptedProvider(
        [
            tool_call_response(
                "delete_file", {"path": "a"}, call_id="c1", reasoning="let me <think>"
            ),
            tool_call_response("python", {"code": "1 < 2"}, call_id="c2", text="Now <plot>:"),
            text_response("Done\n\n```python\nx < 1\n```", pieces=7),
        ]
    )
    answerer = WidgetAnswerer()
    agent = Agent(provider=provider, model="m", tools=[delete_file, plot_tool()], answerer=answerer)
    live = TurnView(
        ViewControls(on_approval=ignoring_result(answerer.resolve)), session_id=agent.id
    )
    attach(agent, live)
    agent.followup("go")
    # the approval is asked at once; the card is drawn at the next (rate-limited) redraw
    await wait_for(lambda: bool(answerer.pending) and bool(cards(live)))
    comms.click(cards(live)[0].allow)
    await agent.when_idle()
    live_bundle = live.finish()

    fresh = TurnView(session_id=agent.id)
    replay_bundle = replay(list(agent.session.events), fresh)
    assert fresh.flushes == 1
    assert state_of(fresh.widget) == state_of(live.widget)
    assert replay_bundle == live_bundle
    assert "x < 1" in "".join(answer_texts(live.items))


def test_one_style_widget_is_shared_by_every_view(comms: CommLog) -> None:
    from dsh_kernel.views.style import stylesheet, stylesheet_path

    a, b = TurnView(), TurnView()
    style = a.widget.children[0]
    assert b.widget.children[0] is style
    assert stylesheet_path() is not None and ".dsh-card" in stylesheet()
    assert style.value == f"<style>{stylesheet()}</style>"
    assert style.layout.display == "none"  # a <style> applies from a hidden element too
    style.close()
    assert TurnView().widget.children[0] is not style  # made again once closed


def held_answer(first: str, rest: str, more: asyncio.Event, end: asyncio.Event) -> FunctionProvider:
    """A provider that streams ``first``, waits for ``more``, streams ``rest``, waits for ``end``."""

    async def stream(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        del request
        yield BlockStartChunk(index=0, block_type="text")
        yield TextDeltaChunk(index=0, text="")  # an empty delta shows nothing: not yet "first"
        yield TextDeltaChunk(index=0, text=first)
        await more.wait()
        yield TextDeltaChunk(index=0, text=rest)
        await end.wait()
        yield BlockEndChunk(index=0, block=TextBlock(text=first + rest))
        yield FinishChunk(reason=FinishStop())

    return FunctionProvider(stream)


async def test_the_first_words_are_drawn_at_once_and_only_their_growth_is_paced(
    comms: CommLog,
) -> None:
    more, end = asyncio.Event(), asyncio.Event()
    agent = Agent(provider=held_answer("Hello", ", world", more, end), model="m")
    # One paced redraw per 1,000 s: whatever is drawn during this test is drawn at once.
    view = TurnView(max_rate_hz=0.001)
    attach(agent, view)
    agent.followup("hi")
    await wait_for(lambda: answer_texts(view.items) == ["Hello"])  # while the provider holds
    drawn = view.flushes
    more.set()
    await wait_for(lambda: logged(agent, ", world"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert view.flushes == drawn  # the answer grew: that waits for the pace
    assert answer_texts(view.items) == ["Hello"]
    end.set()
    await agent.when_idle()  # the turn's end is drawn at once, with everything
    assert answer_texts(view.items) == ["Hello, world"]
    view.finish()
    assert answer_texts(view.items) == ["Hello, world"]
