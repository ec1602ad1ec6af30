"""The Jupyter interrupt (SIGINT from ``KernelManager.interrupt_kernel``) during a chat turn, in each of
the four states a turn waits in: for the first token, mid-stream, for an approval, in ``python`` tool
code. Each must end the turn ``aborted`` quickly (a generous bound here; ``benchmarks/kernel.py``
measures the latency) and leave the kernel able to run the next cell — Python and chat."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.kernel.conftest import Live
from tests.support import scenarios as sc
from tests.support.frontend import saved_bundle

BOUND_S = 5.0


def _first_token(live: Live) -> Callable[[], bool]:
    live.server.script(sc.hang_before_first_token())
    return lambda: len(live.server.requests) == 1


def _streaming(live: Live) -> Callable[[], bool]:
    live.server.script(sc.hang_mid_stream(12))
    return lambda: bool(live.fe.text_updates("s4 "))


def _approval(live: Live) -> Callable[[], bool]:
    live.server.script(sc.python_call("never_set = 1"), sc.text("unreachable"))
    return lambda: bool(live.fe.buttons("Always allow"))


def _tool_code(live: Live) -> Callable[[], bool]:
    started, finished = live.tmp / "tool-started", live.tmp / "tool-finished"
    for marker in (started, finished):
        marker.unlink(missing_ok=True)
    code = (
        f"open({str(started)!r}, 'w').close()\n"
        "import time\n"
        "time.sleep(60)\n"
        f"open({str(finished)!r}, 'w').close()"
    )
    live.server.script(sc.python_call(code), sc.text("unreachable"))
    clicked: list[bool] = []

    def running() -> bool:
        if not clicked and live.fe.buttons("Allow once"):
            live.fe.click(live.fe.buttons("Allow once")[0])
            clicked.append(True)
        return started.exists()

    return running


STATES: dict[str, Callable[[Live], Callable[[], bool]]] = {
    "waiting-for-first-token": _first_token,
    "streaming": _streaming,
    "waiting-for-approval": _approval,
    "running-tool-code": _tool_code,
}


@pytest.mark.parametrize("state", list(STATES))
def test_interrupt_aborts_the_turn_and_the_kernel_stays_healthy(live: Live, state: str) -> None:
    reached = STATES[state](live)
    cell = live.fe.submit(f"Interrupt me ({state}).")
    cell.pump(reached, what=state)
    sent = time.monotonic()
    live.kernel.km.interrupt_kernel()
    ex = cell.finish(timeout=30)
    elapsed = time.monotonic() - sent
    assert elapsed < BOUND_S, f"{state}: the turn took {elapsed:.2f} s to stop"
    assert ex.status == "error"
    assert ex.content["ename"] == "ABORTED"
    assert "stopped" in ex.content["evalue"]

    requests = live.server.requests
    if state in ("waiting-for-first-token", "streaming"):
        # The server notices the close at its next write or read (mid-stream frames are paced).
        deadline = time.monotonic() + 2.0
        while not live.server.requests[0].client_closed and time.monotonic() < deadline:
            time.sleep(0.02)
        assert live.server.requests[0].client_closed, "the HTTP stream was left open"
    assert len(requests) == 1  # no continuation after the abort
    if state == "running-tool-code":
        assert not (live.tmp / "tool-finished").exists(), "the tool code ran on"
    if state == "waiting-for-approval":
        assert "never_set" not in live.fe.python("print(sorted(globals()))")

    events = live.fe.events()
    ends = [e["data"]["reason"] for e in events if e["type"] == "turn/end"]
    assert ends[-1]["kind"] == "aborted"

    # The next cells work: Python, then a chat turn.
    assert live.fe.python("print(6 * 7)").strip() == "42"
    live.server.script(sc.text("Still ", "here."))
    after = live.fe.run("Are you still there?")
    assert after.status == "ok", after.content
    assert "Still here." in saved_bundle(after)["text/markdown"]
