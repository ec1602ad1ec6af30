"""Frontends without widgets, through a real ``dsh`` kernel and ``jupyter_client``: a request with no
cell id that allows stdin (``jupyter console``, qtconsole, ``kc.execute``) gets the turn as
``stream`` text; one with a cell id (JupyterLab, Notebook 7, VS Code) gets the widget view as before;
``exit`` leaves; an approval is refused at once with how to allow."""

from __future__ import annotations

import queue
import time
from typing import Any

import pytest

from tests.kernel.conftest import Live, provider_env
from tests.support import scenarios as sc
from tests.support.frontend import WIDGET_VIEW
from tests.support.kernel import Execution, Kernel, start_kernel
from tests.support.sse_server import SseServer

SHOWN = ("display_data", "update_display_data", "execute_result", "comm_open")


def console(
    kernel: Kernel, code: str, *, cell_id: str | None = None, interrupt_at: str | None = None
) -> Execution:
    """Run ``code`` as a console sends it (stdin allowed, no metadata), or with ``cell_id`` in the
    metadata as JupyterLab sends it; ``interrupt_at``: interrupt the kernel (Ctrl-C in a console)
    once the streamed text holds it."""
    kc = kernel.kc
    content = {
        "code": code,
        "silent": False,
        "store_history": True,
        "user_expressions": {},
        "allow_stdin": True,
        "stop_on_error": True,
    }
    msg = kc.session.msg("execute_request", content)
    if cell_id is not None:
        msg["metadata"] = {"cellId": cell_id}
    kc.shell_channel.send(msg)
    msg_id = msg["header"]["msg_id"]
    messages: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while not any(
        m["msg_type"] == "status" and m["content"]["execution_state"] == "idle" for m in messages
    ):
        assert time.monotonic() < deadline, f"cell did not finish: {code!r}"
        try:
            m = kc.get_iopub_msg(timeout=0.5)
        except queue.Empty:
            continue
        if m["parent_header"].get("msg_id") == msg_id:
            messages.append(m)
            if interrupt_at is not None and interrupt_at in Execution({}, messages).stdout:
                kernel.km.interrupt_kernel()
                interrupt_at = None
    reply = kc.get_shell_msg(timeout=30)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=30)
    return Execution(reply=reply, messages=messages)


def test_a_console_gets_the_answer_a_tool_outcome_and_the_footer_as_text(live: Live) -> None:
    live.server.script(
        sc.tool_calls(("inspect", {}), say="Let me look at your variables."),
        sc.words(60, delay_ms=10),
    )
    ex = console(live.kernel, "What is in my namespace?")
    assert ex.status == "ok", ex.content
    assert not [
        m["msg_type"] for m in ex.messages if m["msg_type"] in SHOWN
    ]  # no widget, no display
    streams = ex.of_type("stream")
    assert len(streams) >= 3, len(streams)  # streamed as it arrived, not written once at the end
    text = ex.stdout
    lines = text.splitlines()
    assert "Let me look at your variables." in text
    assert "▸ inspect: list variables" in lines
    assert any(ln.startswith("  ✓ inspect: done") for ln in lines), lines
    assert sc.expected_words(60).strip() in text
    assert lines[-1].startswith("— openai-compatible:"), lines[-1]
    for fact in ("in ", "out ", "total ", "session "):
        assert fact in lines[-1], (fact, lines[-1])
    assert text.index("Let me look") < text.index("▸ inspect") < text.index("w0 w1")


def test_an_approval_in_a_console_is_refused_at_once_saying_how_to_allow(live: Live) -> None:
    live.server.script(sc.python_call("x_console = 1"), sc.text("I could not run it."))
    started = time.monotonic()
    ex = console(live.kernel, "Set x_console.")
    took = time.monotonic() - started
    assert ex.status == "ok", ex.content
    assert took < 8, took  # no wait for a click that cannot come (a headless run waits 10 s)
    [line] = [ln for ln in ex.stdout.splitlines() if "✗ python denied" in ln]
    assert "%agent approve auto" in line
    assert "I could not run it." in ex.stdout
    assert "x_console" not in live.kernel.python("print(sorted(globals()))")


def test_ask_user_in_a_console_fails_at_once(live: Live) -> None:
    question = {"questions": [{"id": "q1", "question": "Which file?"}]}
    live.server.script(sc.tool_calls(("ask_user", question)), sc.text("I will assume a.csv."))
    started = time.monotonic()
    ex = console(live.kernel, "Ask me which file.")
    assert time.monotonic() - started < 8  # no wait for a form no one can see
    assert ex.status == "ok", ex.content
    assert any(ln.startswith("  ✗ ask_user failed (NO_PROVIDER)") for ln in ex.stdout.splitlines())
    assert "I will assume a.csv." in ex.stdout


def test_ctrl_c_in_a_console_stops_the_turn_and_says_so(live: Live) -> None:
    live.server.script(sc.hang_mid_stream(5, delay_ms=20))
    ex = console(live.kernel, "Talk until I stop you.", interrupt_at="s4 ")
    assert ex.status == "error" and ex.content["ename"] == "ABORTED", ex.content
    lines = ex.stdout.splitlines()
    assert lines[0] == "s0 s1 s2 s3 s4 "
    assert "Stopped by you." in lines
    assert lines[-1].startswith("— ")


def test_a_cell_with_an_id_gets_the_widget_view_as_before(live: Live) -> None:
    live.server.script(sc.text("Hello from the widget view."))
    ex = console(live.kernel, "Say hello.", cell_id="cell-1")
    assert ex.status == "ok", ex.content
    shown = ex.of_type("display_data")
    assert any(WIDGET_VIEW in m["content"]["data"] for m in shown)
    [final] = ex.of_type("update_display_data")
    assert "Hello from the widget view." in final["content"]["data"]["text/markdown"]
    assert "Hello from the widget view." not in ex.stdout


def test_quit_in_a_console_asks_it_to_leave(
    server: SseServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # IPython's exit stops the kernel too (as in any IPython kernel): a kernel of its own.
    tmp = tmp_path_factory.mktemp("dsh-quit")
    server.script()
    with start_kernel(tmp, "dsh", env=provider_env(server, tmp)) as kernel:
        ex = console(kernel, "quit()")
        assert ex.status == "ok", ex.content
        assert ex.content["payload"] == [{"source": "ask_exit", "keepkernel": False}]
        assert server.requests == []  # never sent to the model


def test_a_client_that_opened_the_widget_control_comm_keeps_the_widget_view(
    server: SseServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # The classic Notebook sends no cell id and allows stdin, but its widget manager opens
    # ipywidgets' control comm on connecting (a kernel of its own: the session is marked for good).
    tmp = tmp_path_factory.mktemp("dsh-nb6")
    with start_kernel(tmp, "dsh", env=provider_env(server, tmp)) as kernel:
        kc = kernel.kc
        comm_id = "control-1"
        opened = {"comm_id": comm_id, "target_name": "jupyter.widget.control", "data": {}}
        # as @jupyter-widgets/base-manager opens it
        kc.shell_channel.send(kc.session.msg("comm_open", opened, metadata={"version": "1.0.0"}))
        kernel.send_comm(comm_id, {"method": "request_states"})
        deadline = time.monotonic() + 30
        answered = False
        while not answered:  # ipywidgets itself answers the comm the kernel noted
            assert time.monotonic() < deadline, "no update_states from ipywidgets"
            try:
                m = kc.get_iopub_msg(timeout=0.5)
            except queue.Empty:
                continue
            data = m["content"].get("data", {})
            answered = m["msg_type"] == "comm_msg" and data.get("method") == "update_states"
        server.script(sc.text("Hello, classic Notebook."))
        ex = console(kernel, "Say hello.")
        assert ex.status == "ok", ex.content
        assert any(WIDGET_VIEW in m["content"]["data"] for m in ex.of_type("display_data"))
        assert "Hello, classic Notebook." not in ex.stdout
