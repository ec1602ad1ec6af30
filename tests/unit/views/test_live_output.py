"""The live output of a running ``python`` call (``views.live_output``): shown in the card before
the code ends, pushed at the view's rate without losing text, capped to a tail, and gone once the
result is drawn."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import ipywidgets
import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from dsh_kernel import Agent
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.kernel.toolbox.python import python_tool
from dsh_kernel.runtime.runner import CodeRunner
from dsh_kernel.testing import ScriptedProvider, text_response, tool_call_response
from dsh_kernel.views import TurnView
from dsh_kernel.views._ipw import children, is_open, outputs, visible
from dsh_kernel.views.live_output import LiveOutput
from dsh_kernel.views.tool_card import ToolCardWidget

from .helpers import CommLog, attach, html_text

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


class Clock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def shown(live: LiveOutput) -> list[dict[str, Any]]:
    """The outputs the live area shows now, in order (the note excluded)."""
    return [o for w in children(live._area) if isinstance(w, ipywidgets.Output) for o in outputs(w)]


def shown_text(live: LiveOutput) -> str:
    return "".join(str(o.get("text", "")) for o in shown(live) if o["output_type"] == "stream")


def note(live: LiveOutput) -> str:
    return html_text(live.note.value) if live.note in children(live._area) else ""


def wait_until(cond: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"{what} not reached in {timeout} s"
        time.sleep(0.005)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def live(comms: CommLog, clock: Clock) -> Iterator[LiveOutput]:
    out = LiveOutput(whole=True, interval_s=0.05, clock=clock)
    yield out
    out.dispose()


# -- the rate -----------------------------------------------------------------------------------


def test_writes_within_one_interval_are_pushed_once_and_none_is_lost(
    live: LiveOutput, clock: Clock
) -> None:
    for i in range(1000):
        live.stream("stdout", f"line {i}\n")
    assert live.pushes == 1  # the first write, at once; the rest wait for the interval
    assert shown_text(live) == "line 0\n"
    assert visible(live.widget)
    clock.now += 0.05  # the interval passes with the code quiet: the ticker pushes what is pending
    wait_until(lambda: live.pushes == 2, "the trailing push")
    assert shown_text(live) == "".join(f"line {i}\n" for i in range(1000))


def test_a_write_after_the_interval_pushes_from_the_write_path(
    live: LiveOutput, clock: Clock
) -> None:
    live.stream("stdout", "a")
    pushed_by: list[str] = []
    original = live._draw

    def draw() -> None:
        pushed_by.append(threading.current_thread().name)
        original()

    live._draw = draw
    clock.now += 1
    live.stream("stdout", "b")
    assert pushed_by == [threading.current_thread().name]
    assert shown_text(live) == "ab"


def test_closed_live_output_pushes_nothing_more(live: LiveOutput, clock: Clock) -> None:
    live.stream("stdout", "a")
    live.stream("stdout", "b")  # pending
    live.close()
    ticker = live._ticker
    assert ticker is not None
    ticker.join(20)
    assert not ticker.is_alive()  # the ticker ends with the run
    clock.now += 10
    live.stream("stdout", "c")
    assert live.pushes == 1
    assert shown_text(live) == "a"


# -- the cap --------------------------------------------------------------------------------------


def test_the_text_shown_is_a_capped_tail_with_a_note(comms: CommLog, clock: Clock) -> None:
    live = LiveOutput(whole=True, interval_s=0.05, clock=clock, tail_chars=1000)
    lines = [f"step {i:05d}\n" for i in range(10_000)]  # 11 characters each
    for i, line in enumerate(lines):
        if i % 100 == 0:
            clock.now += 1
        live.stream("stdout", line)
    clock.now += 1
    live.stream("stdout", "done\n")
    text = shown_text(live)
    assert text.endswith("step 09999\ndone\n")
    assert len(text) <= 2 * 1000
    assert text.startswith("step ")  # the tail starts at a line
    cut = sum(len(x) for x in lines) + len("done\n") - len(text)
    assert note(live) == (
        f"… {cut:,} characters of earlier output not shown while the code runs (the card shows "
        "the run's output when it ends)"
    )
    live.dispose()


def test_outputs_beyond_the_last_few_are_dropped_and_their_widgets_closed(
    comms: CommLog, clock: Clock
) -> None:
    live = LiveOutput(whole=True, interval_s=0.05, clock=clock, max_outputs=3)
    made: list[ipywidgets.Output] = []
    for i in range(10):
        clock.now += 1
        live.display({"text/plain": f"plot {i}"}, {}, display_id=None, update=False, output_type="")
        made += [
            w for w in children(live._area) if isinstance(w, ipywidgets.Output) and w not in made
        ]
    assert [o["data"]["text/plain"] for o in shown(live)] == ["plot 7", "plot 8", "plot 9"]
    assert "7 outputs of earlier output" in note(live)
    assert sum(1 for w in made if w.comm is not None) == 3  # the others were closed
    live.dispose()
    assert all(w.comm is None for w in made)


def test_each_push_sends_only_the_outputs_that_changed(
    live: LiveOutput, clock: Clock, comms: CommLog
) -> None:
    image: JsonObject = {"image/png": "iVBORw0KGgo=" * 1000, "text/plain": "<Figure>"}
    live.display(image, {}, display_id=None, update=False, output_type="display_data")
    mark = len(comms.sent)
    for i in range(5):
        clock.now += 1
        live.stream("stdout", f"epoch {i}\n")
    sent = comms.since(mark)
    assert "iVBORw0KGgo=" not in str([s.data for s in sent])  # the image went once
    assert shown_text(live) == "".join(f"epoch {i}\n" for i in range(5))


def test_display_updates_and_clear_output(live: LiveOutput, clock: Clock) -> None:
    live.display({"text/plain": "0%"}, {}, display_id="d1", update=False, output_type="")
    clock.now += 1
    live.display({"text/plain": "50%"}, {}, display_id="d1", update=True, output_type="")
    assert [o["data"] for o in shown(live)] == [{"text/plain": "50%"}]
    clock.now += 1
    live.clear(wait=True)
    clock.now += 1
    live.stream("stdout", "fresh\n")
    assert shown(live) == [{"output_type": "stream", "name": "stdout", "text": "fresh\n"}]


# -- what is drawn ---------------------------------------------------------------------------------


def test_a_widget_view_is_shown_as_the_widget_only_in_a_live_card(
    comms: CommLog, clock: Clock
) -> None:
    bar = ipywidgets.IntProgress(max=10)
    bundle = cast(JsonObject, bar._repr_mimebundle_())
    for whole in (True, False):
        live = LiveOutput(whole=whole, interval_s=0.05, clock=clock)
        live.display(bundle, {}, display_id=None, update=False, output_type="display_data")
        (output,) = shown(live)
        if whole:
            assert output["data"][WIDGET_VIEW]["model_id"] == bar.model_id
        else:  # a replayed or imported run's outputs are data: reduced to text
            assert set(output["data"]) == {"text/plain"}
        live.dispose()


# -- in a card, under a turn view ----------------------------------------------------------------------


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    config = Config()
    config.HistoryManager.enabled = False
    sh = InteractiveShell.instance(config=config)
    try:
        yield sh
    finally:
        InteractiveShell.clear_instance()


async def test_prints_are_in_the_card_before_the_code_ends(
    comms: CommLog, shell: InteractiveShell
) -> None:
    release = threading.Event()
    seen: list[str] = []
    views: list[TurnView] = []

    def cards() -> list[ToolCardWidget]:
        return [b for b in list(views[0]._blocks.values()) if isinstance(b, ToolCardWidget)]

    def printed() -> bool:
        live = next((c._live for c in cards() if c._live is not None), None)
        return live is not None and "epoch 1\n" in shown_text(live)

    def watch() -> None:
        # Another thread reads the card while the code holds this one, then lets the code go on.
        try:
            wait_until(printed, "the first print in the card")
            card = cards()[0].card
            seen.append(card.status if card is not None else "")
        finally:
            release.set()

    shell.user_ns["release"] = release
    code = "print('epoch 1')\nreleased = release.wait(60)\nprint('epoch 2')\n"
    tool = python_tool(
        CodeRunner(shell.user_ns, shell=shell), live_output=lambda cid: views[0].live_output(cid)
    )
    provider = ScriptedProvider(
        [tool_call_response("python", {"code": code}, call_id="c1"), text_response("done")]
    )
    agent = Agent(provider=provider, model="m", tools=[tool])
    agent.set_approval("auto", "python")
    views.append(TurnView(tools=agent.registry.get, live_outputs=True))
    attach(agent, views[0])
    watcher = threading.Thread(target=watch)
    watcher.start()
    agent.followup("go")
    await agent.when_idle()
    watcher.join(10)

    assert shell.user_ns["released"] is True  # the watcher saw the print, then released the code
    assert seen == ["running"]
    views[0].finish()
    (c,) = cards()
    assert children(c.live_slot) == ()  # the live area is gone once the result is drawn
    live = c._live
    assert live is not None and live.pushes >= 1
    # ... and its widgets are closed (a saved widget state does not keep them)
    assert not any(is_open(w) for w in (live.widget, live._area, live.note))
    assert outputs(c.body) == (
        {"output_type": "stream", "name": "stdout", "text": "epoch 1\nepoch 2\n"},
    )
