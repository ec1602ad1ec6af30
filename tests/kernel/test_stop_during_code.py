"""Stop and the steer box while the agent's ``python`` code runs (issue 12, item 1).

The code blocks the kernel's main thread, so the view's Stop and Send clicks cannot reach their
callbacks until it ends. ``dsh_kernel.kernel.host.busy`` hears them on ipykernel's shell channel thread
instead: Stop interrupts the code as the Jupyter interrupt does (the call's result is ``ABORTED``
with the output printed before the click), and a steer sent meanwhile reaches the very next model
request. The clicks are sent as a browser sends them (comm messages on the shell channel).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.kernel.conftest import Live, provider_env
from tests.kernel.test_chat import last_turn_events, request_messages
from tests.support import scenarios as sc
from tests.support.frontend import Frontend, Model, saved_bundle
from tests.support.kernel import start_kernel
from tests.support.sse_server import SseServer

SLEEP_S = 20


def _allow_then(live: Live, started: Any) -> Any:
    """A ``pump`` condition that clicks Allow once when the approval shows, then waits for
    ``started()``."""
    clicked: list[bool] = []

    def reached() -> bool:
        if not clicked and live.fe.buttons("Allow once"):
            live.fe.click(live.fe.buttons("Allow once")[0])
            clicked.append(True)
        return bool(started())

    return reached


def _steer_box(live: Live) -> Model:
    boxes = [
        m
        for m in live.fe.models.values()
        if m.name == "TextModel"
        and m.state.get("placeholder", "").startswith("Tell the agent")
        and live.fe.visible(m)
    ]
    assert boxes, "no steer box is shown"
    return boxes[-1]


def test_stop_click_interrupts_running_code(live: Live) -> None:
    started, after = live.tmp / "stop-started", live.tmp / "stop-after-sleep"
    for marker in (started, after):
        marker.unlink(missing_ok=True)
    code = (
        "print('before the sleep', flush=True)\n"
        f"open({str(started)!r}, 'w').close()\n"
        "import time\n"
        f"time.sleep({SLEEP_S})\n"
        f"open({str(after)!r}, 'w').close()\n"
        "stop_side_effect = 1\n"
    )
    live.server.script(sc.python_call(code), sc.text("unreachable"))
    cell = live.fe.submit("Sleep for a while in Python.")
    cell.pump(_allow_then(live, started.exists), what="the code to start")
    began = time.monotonic()
    # Four seconds into the run, as a person would click; the view's Stop is still shown.
    cell.pump(lambda: time.monotonic() - began >= 4, timeout=10, what="four seconds")
    stops = live.fe.buttons("Stop")
    assert stops, "no Stop button while the code runs"
    live.fe.click(stops[-1])
    ex = cell.finish(timeout=SLEEP_S + 30)
    ended = time.monotonic() - began

    assert ended < SLEEP_S - 5, f"the cell ran on for {ended:.1f} s: the sleep was not stopped"
    assert not after.exists(), "the code ran on after Stop"
    assert "stop_side_effect" not in live.fe.python("print(sorted(globals()))")
    assert ex.status == "error"
    assert ex.content["ename"] == "ABORTED", ex.content
    assert "stopped" in ex.content["evalue"]

    events = last_turn_events(live.fe.events())
    results = [e["data"] for e in events if e["type"] == "tool/result"]
    assert len(results) == 1, results
    assert results[0]["error"]["code"] == "ABORTED", results[0]
    assert "before the sleep" in results[0]["meta"]["stdout"]  # the partial output is kept
    assert [e["data"]["reason"]["kind"] for e in events if e["type"] == "turn/end"] == ["aborted"]
    assert len(live.server.requests) == 1  # nothing went back to the model after Stop
    assert "before the sleep" in saved_bundle(ex)["text/markdown"]

    # The kernel is healthy: Python, then a chat turn.
    assert live.fe.python("print(6 * 7)").strip() == "42"
    live.server.script(sc.text("Still ", "here."))
    again = live.fe.run("Are you still there?")
    assert again.status == "ok", again.content


@pytest.fixture(scope="module")
def in_memory(server: SseServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A kernel whose store cannot be written: the session lives in memory, so no journal flush
    gives the loop a chance to read the clicks between the tool's end and the next request."""
    tmp = tmp_path_factory.mktemp("steer-in-memory")
    blocker = tmp / "a-file"
    blocker.write_text("not a directory")
    env = provider_env(server, tmp, DSH_STORE=str(blocker / "store"))
    with start_kernel(tmp, "dsh", env=env) as kernel:
        yield Live(kernel=kernel, fe=Frontend(kernel), server=server, tmp=tmp)


@pytest.mark.parametrize("store", ["journal", "in-memory"])
def test_steer_sent_while_code_runs_reaches_the_next_request(
    store: str, request: pytest.FixtureRequest
) -> None:
    live: Live = request.getfixturevalue("live" if store == "journal" else "in_memory")
    live.server.script()
    started = live.tmp / "steer-started"
    release = live.tmp / "steer-release"
    for marker in (started, release):
        marker.unlink(missing_ok=True)
    # The code waits (bounded) until the test has typed and clicked, so the steer is sent while
    # it runs on every machine, however slow.
    code = (
        f"open({str(started)!r}, 'w').close()\n"
        "import os, time\n"
        "for _ in range(400):\n"
        f"    if os.path.exists({str(release)!r}):\n"
        "        break\n"
        "    time.sleep(0.05)\n"
        "time.sleep(0.5)\n"
        "print('code done')\n"
    )
    live.server.script(sc.python_call(code), sc.text("Noted: plot in blue."))
    cell = live.fe.submit("Run something, then plot it.")
    cell.pump(_allow_then(live, started.exists), what="the code to start")
    box = _steer_box(live)
    steer = "use blue for the plot, not red"
    live.fe.send(box.comm_id, {"method": "update", "state": {"value": steer}, "buffer_paths": []})
    live.fe.click(live.fe.buttons("Send")[-1])
    release.touch()
    ex = cell.finish(timeout=60)
    assert ex.status == "ok", ex.content

    assert len(live.server.requests) == 2
    second = request_messages(live.server, 1)
    users = [str(m["content"]) for m in second if m["role"] == "user"]
    assert any(steer in u for u in users), second  # the steer reached the very next request
    events = last_turn_events(live.fe.events())
    steers = [
        e["data"]
        for e in events
        if e["type"] == "user/message" and steer in str(e["data"]["content"])
    ]
    assert len(steers) == 1, steers  # steered once, not again when the click reached the view
