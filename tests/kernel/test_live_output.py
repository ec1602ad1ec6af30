"""The agent's running code shows its output in its card as it runs (a real kernel, read as a
frontend reads it: the widget state on iopub).

The code prints, then waits for a file the test writes only once it has seen the print in the
card's live area: the print reaches the frontend while the code still holds the main thread. A
progress bar the code displays is shown as that widget, and its later values arrive through its own
comm. When the code ends the live area goes and the card shows the run's output as before; the model
receives what it received before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.kernel.conftest import Live
from tests.kernel.test_chat import last_turn_events, tool_messages
from tests.kernel.test_stop_during_code import _allow_then
from tests.support import scenarios as sc
from tests.support.frontend import WIDGET_VIEW, Model


def _wait_for(path: Path) -> str:
    """Code that waits (up to a minute) for ``path`` to exist."""
    return (
        "import os as _os, time as _time\n"
        "_t = _time.monotonic()\n"
        f"while not _os.path.exists({str(path)!r}) and _time.monotonic() - _t < 60:\n"
        "    _time.sleep(0.02)\n"
    )


def _live_outputs(live: Live) -> list[Model]:
    """The ``Output`` widgets shown in a card's live area (class ``dsh-live``) now."""
    areas = [
        m
        for m in live.fe.models.values()
        if "dsh-live" in (m.state.get("_dom_classes") or ()) and live.fe.visible(m)
    ]
    inner = [
        live.fe.models[str(c).removeprefix("IPY_MODEL_")]
        for a in areas
        for c in a.state.get("children") or ()
    ]
    out = [
        live.fe.models[str(c).removeprefix("IPY_MODEL_")]
        for box in inner
        for c in box.state.get("children") or ()
    ]
    return [m for m in out if m.name == "OutputModel" and m.open]


def _live_text(live: Live) -> str:
    return "".join(
        str(o.get("text", ""))
        for m in _live_outputs(live)
        for o in m.state.get("outputs") or ()
        if o.get("output_type") == "stream"
    )


def _live_widgets(live: Live) -> list[Model]:
    """The widget models whose views the live area shows."""
    found: list[Model] = []
    for m in _live_outputs(live):
        for o in m.state.get("outputs") or ():
            view: Any = (o.get("data") or {}).get(WIDGET_VIEW)
            if isinstance(view, dict) and view.get("model_id") in live.fe.models:
                found.append(live.fe.models[view["model_id"]])
    return found


def test_prints_reach_the_card_while_the_code_runs(live: Live) -> None:
    release = live.tmp / "live-release"
    release.unlink(missing_ok=True)
    code = "print('epoch 1: loss 0.5')\n" + _wait_for(release) + "print('epoch 2: loss 0.25')\n"
    live.server.script(sc.python_call(code), sc.text("Trained."))
    before = set(live.fe.models)  # the kernel is shared: earlier tests' cards are still open
    cell = live.fe.submit("Train for two epochs.")
    cell.pump(
        # the newline is a write of its own, pushed once the interval has passed (the code is quiet)
        _allow_then(live, lambda: "epoch 1: loss 0.5\n" in _live_text(live)),
        timeout=60,
        what="the first print in the card's live area",
    )
    assert not cell.done and not release.exists()  # the code is still waiting for us
    assert "epoch 2" not in _live_text(live)
    release.write_text("go")
    ex = cell.finish(timeout=90)
    assert ex.status == "ok", ex.content

    # The live area is gone; the card's Details show the run's output as before.
    assert _live_outputs(live) == []
    finals = [
        o
        for key, m in live.fe.models.items()
        if key not in before
        and m.name == "OutputModel"
        and m.open
        and live.fe.visible(m, drawn=False)
        for o in m.state.get("outputs") or ()
    ]
    whole = "epoch 1: loss 0.5\nepoch 2: loss 0.25\n"
    assert finals == [{"output_type": "stream", "name": "stdout", "text": whole}]
    # What the model received is the result at the end, as before: one message with both lines.
    assert tool_messages(live.server, -1) == [
        "epoch 1: loss 0.5\nepoch 2: loss 0.25\n(namespace: added _os, _t, _time)"
    ]
    results = [e for e in last_turn_events(live.fe.events()) if e["type"] == "tool/result"]
    assert len(results) == 1  # and the log has no event per print


def test_a_progress_bar_the_code_displays_is_a_live_widget(live: Live) -> None:
    release = live.tmp / "bar-release"
    release.unlink(missing_ok=True)
    code = (
        "from ipywidgets import IntProgress\n"
        "from IPython.display import display\n"
        "bar = IntProgress(min=0, max=10, description='work')\n"
        "display(bar)\n"
        "for _i in range(1, 4):\n"
        "    bar.value = _i\n" + _wait_for(release) + "bar.value = 10\n"
    )
    live.server.script(sc.python_call(code), sc.text("Done."))
    cell = live.fe.submit("Show a progress bar.")

    def bar_at_three() -> bool:
        return any(
            m.name == "IntProgressModel" and m.state.get("value") == 3 for m in _live_widgets(live)
        )

    cell.pump(_allow_then(live, bar_at_three), timeout=60, what="the bar at 3 in the live area")
    assert not cell.done
    release.write_text("go")
    ex = cell.finish(timeout=90)
    assert ex.status == "ok", ex.content
    (bar,) = [m for m in live.fe.models.values() if m.name == "IntProgressModel"][-1:]
    assert bar.state["value"] == 10  # its later updates came through its own comm
