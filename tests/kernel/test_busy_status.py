"""The kernel reads *busy* for as long as a chat turn runs, also while it waits for a click.

JupyterLab shows the status of the last ``status`` message whatever its parent. While a turn waits
for approval the kernel answers other requests — Lab asks for a comm subshell on the control
channel as the view's widgets arrive — and each answer ends with its own ``idle``; the kernel
follows it with a ``busy`` for the running cell, so the status bar does not read "Idle" mid-turn.
"""

from __future__ import annotations

from typing import Any

from tests.kernel.conftest import Live
from tests.support import scenarios as sc


def _statuses(live: Live) -> list[tuple[str, str]]:
    """``(execution_state, parent msg_id)`` of every status read so far, in the order sent."""
    found: list[tuple[str, str, str]] = [
        (str(m["header"]["date"]), m["content"]["execution_state"], m["parent_header"]["msg_id"])
        for msgs in live.fe.by_parent.values()
        for m in msgs
        if m["msg_type"] == "status"
    ]
    return [(state, parent) for _, state, parent in sorted(found)]


def test_an_answered_control_request_mid_turn_leaves_the_kernel_busy(live: Live) -> None:
    live.server.script(sc.python_call("busy_check = 1"), sc.text("done"))
    cell = live.fe.submit("Set busy_check.")
    cell.pump(lambda: bool(live.fe.buttons("Allow once")), what="the approval buttons")

    kc = live.fe.kernel.kc
    request: dict[str, Any] = kc.session.msg("create_subshell_request", {})
    kc.control_channel.send(request)
    asked = request["header"]["msg_id"]
    cell.pump(lambda: ("idle", asked) in _statuses(live), what="the control request's idle status")
    cell.pump(
        lambda: _statuses(live)[-1] == ("busy", cell.msg_id),
        timeout=10,
        what="a busy status for the running cell after the control request's idle",
    )

    live.fe.click(live.fe.buttons("Allow once")[0])
    ex = cell.finish()
    assert ex.status == "ok"
    states = _statuses(live)
    assert states[-1] == ("idle", cell.msg_id)  # the cell's own idle still ends it
