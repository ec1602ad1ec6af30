"""The answer's first words reach IOPub while the model server still holds the rest.

The loopback server streams the first words of an answer, then holds the next chunk on a gate
(``sse_server.Frame.gate``) that the test releases only once the kernel's IOPub shows those words:
in the widget view (an ``HTML`` update of the answer) and in the text view a console gets (a
``stream`` message). The kernel redraws at 0.01 Hz (``DSH_REDRAW_RATE``): a kernel that paced the
first words like their growth, or waited for more of the answer before showing any, would not show
them within the test's (generous) wait, and the test fails on that wait, never on a timing. Once
released, the rest streams and the finished turn holds the whole answer: nothing was dropped.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from tests.kernel.conftest import Live, provider_env
from tests.support.frontend import Frontend, markdown_body, saved_bundle
from tests.support.kernel import start_kernel
from tests.support.sse_server import Reply, SseServer, frames_from_sse, sse_reply
from tests.support.wire_transcripts import chat_text_stream

WAIT_S = 60.0
"""How long the first words may take to show: a margin for a loaded machine, not an expectation."""


def held_answer(first: str, rest: list[str], gate: str) -> Reply:
    """``first``, then ``rest`` once ``gate`` is released (the role chunk comes with ``first``)."""
    frames = list(frames_from_sse(chat_text_stream([first, *rest])))
    frames[2] = replace(frames[2], gate=gate)  # role chunk, first, [gate] the rest …
    return sse_reply(frames)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A kernel that redraws a growing answer once per 100 s, and the server playing its model."""
    tmp = tmp_path_factory.mktemp("first-words")
    with SseServer() as server:
        env = provider_env(server, tmp, DSH_REDRAW_RATE="0.01")
        with start_kernel(tmp, "dsh", env=env) as kernel:
            yield Live(kernel=kernel, fe=Frontend(kernel), server=server, tmp=tmp)


def test_the_widget_view_shows_the_first_words_before_the_server_sends_more(live: Live) -> None:
    live.server.script(held_answer("Tangerine", [" skies", " over", " Lisbon."], "widget"))
    cell = live.fe.submit("Describe the sky.")
    try:
        cell.pump(
            lambda: bool(live.fe.text_updates("Tangerine")), timeout=WAIT_S, what="first words"
        )
        assert not live.fe.text_updates("skies")  # the server is still holding them
    finally:
        live.server.release("widget")
    ex = cell.finish(timeout=WAIT_S)
    assert ex.status == "ok", ex.content
    assert "Tangerine skies over Lisbon." in live.fe.text_updates("Tangerine")[-1]
    assert "Tangerine skies over Lisbon." in markdown_body(saved_bundle(ex)["text/markdown"])


def test_a_console_is_written_the_first_words_before_the_server_sends_more(live: Live) -> None:
    live.server.script(held_answer("Saffron", [" clouds", " at", " dusk."], "text"))
    kc = live.kernel.kc
    msg_id = kc.execute("Describe the clouds.", allow_stdin=True)  # as jupyter console sends it
    written: list[str] = []
    released = False
    deadline = time.monotonic() + WAIT_S
    try:
        while True:
            assert time.monotonic() < deadline, f"the turn did not end; written: {written!r}"
            try:
                msg: dict[str, Any] = kc.get_iopub_msg(timeout=0.5)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                written.append(msg["content"]["text"])
                if not released and "Saffron" in "".join(written):
                    assert "clouds" not in "".join(written)  # still held by the server
                    live.server.release("text")
                    released = True
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
    finally:
        live.server.release("text")
    reply = kc.get_shell_msg(timeout=WAIT_S)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=WAIT_S)
    assert reply["content"]["status"] == "ok", reply["content"]
    assert released, f"the first words were not written before the rest: {written!r}"
    assert "".join(written).startswith("Saffron clouds at dusk.\n")
