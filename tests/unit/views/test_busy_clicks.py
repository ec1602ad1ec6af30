"""``kernel.host.busy`` with a real ``TurnView``: Stop and Send heard on another thread (ipykernel's shell
channel thread, played here by a thread calling the comm hook as ipykernel does) while code holds
the main thread; the same clicks reaching the view afterwards are not acted on twice."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from comm.base_comm import BaseComm

from dsh_kernel.kernel.host import busy
from dsh_kernel.runtime import CodeRunner
from dsh_kernel.views import TurnView, ViewControls

from .helpers import CommLog, RecordingComm

CLICK = {"method": "custom", "content": {"event": "click"}}


class KernelComm(RecordingComm):
    """ipykernel 7's comm as the shell channel thread sees it (the edge being faked)."""

    def _reply_subshell_for(self, data: object, default: object) -> object:
        return default


class ShellThreadKernel:
    shell_channel_thread = object()


@pytest.fixture
def kernel_comms(comms: CommLog, monkeypatch: pytest.MonkeyPatch) -> CommLog:
    import comm

    def create_comm(**kwargs: Any) -> BaseComm:
        return KernelComm(comms, **kwargs)

    monkeypatch.setattr(comm, "create_comm", create_comm)
    return comms


def shell_thread(widget: Any, data: dict[str, Any]) -> None:
    """What ipykernel's shell channel thread does with a comm_msg before forwarding it."""
    result: list[object] = []
    thread = threading.Thread(
        target=lambda: result.append(getattr(widget.comm, busy.HOOK)(data, "sub")), daemon=True
    )
    thread.start()
    thread.join(5)
    assert result == ["sub"]  # routed as before


def test_send_while_code_runs_steers_once(kernel_comms: CommLog) -> None:
    steered: list[str] = []
    view = TurnView(ViewControls(on_steer=steered.append))
    dispose = busy.watch(ShellThreadKernel(), view, on_steer=steered.append)
    started, clicked = threading.Event(), threading.Event()

    def frontend() -> None:
        started.wait(30)
        shell_thread(view.steer, {"method": "update", "state": {"value": " blue "}})
        shell_thread(view.send, CLICK)
        clicked.set()

    thread = threading.Thread(target=frontend, daemon=True)
    thread.start()
    ns: dict[str, object] = {"started": started, "clicked": clicked}
    CodeRunner(ns).run("started.set()\nclicked.wait(30)")
    thread.join(5)
    assert steered == ["blue"]  # delivered as the code ended
    # The same messages now reach the view on the main thread, in order: no second steer.
    kernel_comms.set_state(view.steer, value=" blue ")
    kernel_comms.click(view.send)
    assert steered == ["blue"] and view.steer.value == ""
    # A later Send, with no code running, is the view's as usual.
    shell_thread(view.steer, {"method": "update", "state": {"value": "red"}})
    shell_thread(view.send, CLICK)
    kernel_comms.set_state(view.steer, value="red")
    kernel_comms.click(view.send)
    assert steered == ["blue", "red"]
    dispose()
    assert busy.HOOK not in vars(view.send.comm)


def test_stop_while_code_runs_interrupts_it(kernel_comms: CommLog) -> None:
    stops: list[str] = []
    view = TurnView(ViewControls(on_stop=lambda: stops.append("stop")))
    dispose = busy.watch(ShellThreadKernel(), view, on_steer=lambda _t: None)
    started = threading.Event()

    def frontend() -> None:
        started.wait(30)
        shell_thread(view.stop, CLICK)

    thread = threading.Thread(target=frontend, daemon=True)
    thread.start()
    result = CodeRunner({"started": started}).run("started.set()\nimport time\ntime.sleep(60)")
    thread.join(5)
    assert result.failure is not None and result.failure.kind == "abort"
    kernel_comms.click(view.stop)  # the click reaches the view too: it cancels the turn as ever
    assert stops == ["stop"]
    # With no code running the hook sends nothing (no KeyboardInterrupt lands in this test).
    shell_thread(view.stop, CLICK)
    dispose()


def test_nothing_is_hooked_without_a_shell_channel_thread(kernel_comms: CommLog) -> None:
    view = TurnView()
    busy.watch(object(), view, on_steer=lambda _t: None)
    assert busy.HOOK not in vars(view.stop.comm)
