"""The context window through a real kernel (issue 14, items 1–4).

Two kernels against loopback servers. The first server answers llama.cpp's ``/props`` (an 8,192-token
window): ``%agent status`` and ``%agent context`` show the window and where it came from, the output
cap goes on the wire as ``max_tokens``, ``%agent context <tokens>`` overrides it and ``default``
clears the override; with a configured 4,096-token window an over-long message fails at once with
``CONTEXT_WINDOW_EXCEEDED`` and nothing reaches the server, and the next short message works. The
second server is llama-cpp-python: it says nothing about its window and answers an over-long
streamed prompt with HTTP 200 and no bytes — the kernel probes once without streaming, reads the 400
``context_length_exceeded``, does not retry, and the next short message works. A third kernel reads
the window from ``c.DshKernel.context_window``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kernel.conftest import provider_env
from tests.support import scenarios as sc
from tests.support.kernel import Kernel, start_kernel
from tests.support.sse_server import SseServer, json_reply, sse_reply

PROPS = {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1}
LONG = "Summarise this text in one sentence: " + " ".join(f"word{i}" for i in range(6000))
OVERFLOW_400 = {
    "error": {
        "message": "This model's maximum context length is 4096 tokens. However, you requested "
        "23921 tokens (23920 in the messages, 1 in the completion). Please reduce the length of "
        "the messages or completion.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


@pytest.fixture(scope="module")
def props_rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kernel, SseServer]]:
    tmp = tmp_path_factory.mktemp("window-props")
    with (
        SseServer(routes={"/props": json_reply(200, PROPS)}) as server,
        start_kernel(tmp, "dsh", env=provider_env(server, tmp, DSH_MODEL="qwen")) as k,
    ):
        yield k, server


@pytest.fixture(scope="module")
def silent_rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kernel, SseServer]]:
    tmp = tmp_path_factory.mktemp("window-silent")
    with (
        SseServer() as server,
        start_kernel(tmp, "dsh", env=provider_env(server, tmp, DSH_MODEL="qwen")) as k,
    ):
        yield k, server


def command(k: Kernel, line: str) -> str:
    ex = k.execute(line)
    assert ex.status == "ok", ex.content
    return ex.stdout


def chat(k: Kernel, text: str) -> Any:
    return k.execute(text, timeout=120)


def retries(k: Kernel) -> list[dict[str, Any]]:
    return [e for e in k.events() if e["type"] == "llm/retry"]


def test_a_discovered_window_is_shown_and_caps_the_answer(
    props_rig: tuple[Kernel, SseServer],
) -> None:
    k, server = props_rig
    server.script(sc.text("Hi there."))
    ex = chat(k, "Say hi.")
    assert ex.status == "ok", ex.content
    assert {r.path for r in server.lookups} >= {"/props"}
    (sent,) = server.requests
    cap = sent.json["max_tokens"]
    assert 256 <= cap < 8192  # the room the window leaves, in the generic profile's own field
    status = command(k, "%agent status")
    assert "window:   8,192 tokens (discovered from /props)" in status, status
    assert "of 8,192" in status  # the context line measures against it
    assert command(k, "%agent context").strip() == (
        "context window: 8,192 tokens (discovered from /props)"
    )
    contexts = [e["data"] for e in k.events() if e["type"] == "request/context"]
    assert contexts[-1] == {
        "provider": "openai-compatible",
        "model": "qwen",
        "contextWindow": 8192,
        "contextWindowSource": "discovered",
        "contextWindowFrom": "/props",
    }


def test_agent_context_sets_and_clears_the_window(props_rig: tuple[Kernel, SseServer]) -> None:
    k, server = props_rig
    out = command(k, "%agent context 16,384")
    assert out.strip() == "context window: 16,384 tokens (configured)"
    assert "window:   16,384 tokens (configured)" in command(k, "%agent status")
    server.script(sc.text("Fine."))
    assert chat(k, "And now?").status == "ok"
    assert server.requests[0].json["max_tokens"] > 8192  # the configured window's room
    bad = k.execute("%agent context lots")
    assert bad.status == "error" and bad.content["ename"] == "USAGE"
    assert "'lots' is not a context window" in bad.content["evalue"]
    assert "discovered from /props" in command(k, "%agent context default")


def test_an_over_long_message_is_refused_before_sending_and_the_next_works(
    props_rig: tuple[Kernel, SseServer],
) -> None:
    k, server = props_rig
    command(k, "%agent context 4096")
    try:
        server.script(sc.text("Hello!"))
        ex = chat(k, LONG)
        assert ex.status == "error"
        assert ex.content["ename"] == "CONTEXT_WINDOW_EXCEEDED"
        evalue = ex.content["evalue"]
        assert "4,096 tokens (configured)" in evalue and "it was not sent" in evalue
        assert "%agent new" in evalue and "%agent context <tokens>" in evalue
        assert server.requests == []  # nothing was sent
        ex = chat(k, "Say hello.")
        assert ex.status == "ok", ex.content
        (sent,) = server.requests
        body = str(sent.json["messages"])
        assert "Say hello." in body and "word5999" not in body
    finally:
        command(k, "%agent context default")


def test_an_empty_stream_is_probed_once_and_the_next_message_works(
    silent_rig: tuple[Kernel, SseServer],
) -> None:
    k, server = silent_rig
    server.script(sse_reply([], chunked=False), json_reply(400, OVERFLOW_400), sc.text("Hello."))
    ex = chat(k, LONG)
    assert ex.status == "error", ex.content
    assert ex.content["ename"] == "CONTEXT_WINDOW_EXCEEDED"
    assert "maximum context length is 4096" in ex.content["evalue"]
    rendered = ex.data("text/html")[-1]  # the saved rendering shows the warning too
    assert "of a 4,096-token context window (assumed: the server did not say)" in rendered
    streamed, probe = server.requests  # one attempt and one probe: no retry storm
    assert streamed.json["stream"] is True and "max_tokens" not in streamed.json
    assert probe.json["stream"] is False and probe.json["max_tokens"] == 1
    assert retries(k) == []
    warnings = [e for e in k.events() if e["type"] == "context/warning"]
    assert warnings and warnings[0]["data"]["source"] == "default"  # warned, not refused
    ex = chat(k, "Say hello.")
    assert ex.status == "ok", ex.content
    assert len(server.requests) == 3
    assert "word5999" not in str(server.requests[2].json["messages"])
    status = command(k, "%agent status")
    # The server would not say, but its overflow named the window: from now on it is known.
    assert "window:   4,096 tokens (discovered from the server's error)" in status
    assert "max_tokens" in server.requests[2].json  # so the answer is capped to fit


def test_the_window_can_be_configured_in_jupyter_config(tmp_path: Path) -> None:
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text(
        "c.DshKernel.context_window = 6000\n", encoding="utf-8"
    )
    with (
        SseServer(routes={"/props": json_reply(200, PROPS)}) as server,
        start_kernel(tmp_path, "dsh", env=provider_env(server, tmp_path)) as k,
    ):
        assert "window:   6,000 tokens (configured)" in command(k, "%agent status")
        assert server.lookups == []  # a configured window is never asked for
