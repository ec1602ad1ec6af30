"""The real llama-cpp-python recordings (``tests/support/llamacpp/``) are intact, and replay.

Every recording must parse: the request body is the JSON the kernel sent, the response's status and
headers are there, an SSE body is whole events of JSON (or ``[DONE]``), a plain body is JSON. A
corrupt or missing recording fails here, in ``make test``, not later in a replay test. The facts the
kernel's local-server handling is built on are pinned too (what llama-cpp-python really does), and
the plain-text stream replays through the real OpenAI-compatible adapter to the recorded text.
"""

from __future__ import annotations

import json

import httpx
import pytest

from dsh_kernel.errors import LlmError
from dsh_kernel.llm.types import BlockEndChunk, FinishStop, TextBlock, UsageChunk
from tests.local.models import MODELS
from tests.support import llamacpp
from tests.support.providers import chat_provider, collect, finish_of, request
from tests.support.sse_server import SseServer

EXPECTED = {
    "qwen_models",
    "qwen_think_stream",
    "qwen_tool_call_stream",
    "qwen_tool_result_stream",
    "smollm2_length_stream",
    "smollm2_models",
    "smollm2_overflow_nostream",
    "smollm2_overflow_probe",
    "smollm2_overflow_stream",
    "smollm2_probe_fits",
    "smollm2_props",
    "smollm2_text_stream",
}
KERNEL_TOOLS = ["ask_user", "inspect", "python", "sql"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recording_parses(name: str) -> None:
    assert name in llamacpp.names(), f"tests/support/llamacpp/{name}.json is missing"
    rec = llamacpp.load(name)
    assert rec.name == name
    assert rec.model_sha256 in {m.sha256 for m in MODELS}
    assert rec.header("content-type"), "headers were recorded"
    if rec.method == "POST":
        body = rec.request_json
        assert isinstance(body, dict) and body["messages"][0]["role"] == "system"
        assert [t["function"]["name"] for t in body["tools"]] == KERNEL_TOOLS
    if rec.chunks is not None:
        assert rec.complete, "the chunked body ended with its zero-length chunk"
        assert all(c.data.endswith("\n\n") for c in rec.chunks), "one whole SSE event per chunk"
        events = rec.events()
        assert all(isinstance(e, dict) or e == "[DONE]" for e in events)
    else:
        json.loads(rec.body)


def test_the_set_of_recordings_is_the_expected_one() -> None:
    assert set(llamacpp.names()) == EXPECTED


def test_what_llama_cpp_python_really_does() -> None:
    """The server behaviour issue 14 is about, as recorded (not as documented elsewhere)."""
    text = llamacpp.load("smollm2_text_stream")
    assert text.status == 200 and "text/event-stream" in (text.header("content-type") or "")
    assert not any(isinstance(e, dict) and e.get("usage") for e in text.events()), "no usage"

    overflow = llamacpp.load("smollm2_overflow_stream")
    assert (overflow.status, overflow.body) == (200, ""), "streamed overflow: 200 and 0 bytes"
    assert "text/event-stream" in (overflow.header("content-type") or "")

    for name in ("smollm2_overflow_nostream", "smollm2_overflow_probe"):
        refused = llamacpp.load(name)
        assert refused.status == 400
        assert json.loads(refused.body)["error"]["code"] == "context_length_exceeded"

    call = llamacpp.load("qwen_tool_call_stream")
    finishes = [
        c.get("finish_reason")
        for e in call.events()
        if isinstance(e, dict)
        for c in e.get("choices", [])
        if c.get("finish_reason")
    ]
    assert finishes == ["stop"], "the call arrives as text, finished as an ordinary answer"
    assert '"python"' in call.content() and '"arguments"' in call.content()
    assert not any(
        (c.get("delta") or {}).get("tool_calls")
        for e in call.events()
        if isinstance(e, dict)
        for c in e.get("choices", [])
    ), "no native tool_calls delta"

    think = llamacpp.load("qwen_think_stream")
    assert "<think>" in think.content() and "</think>" in think.content()

    listed = json.loads(llamacpp.load("smollm2_models").body)["data"]
    assert len(listed) == 1 and "n_ctx" not in json.dumps(listed), "no window in /v1/models"
    assert llamacpp.load("smollm2_props").status == 404


async def test_streamed_text_replays_through_the_adapter(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    rec = llamacpp.load("smollm2_text_stream")
    server.script(rec.reply())
    chunks = await collect(chat_provider(server.url + "/v1", client, profile="generic"), request())
    texts = [
        c.block.text
        for c in chunks
        if isinstance(c, BlockEndChunk) and isinstance(c.block, TextBlock)
    ]
    assert "".join(texts) == rec.content()
    assert not [c for c in chunks if isinstance(c, UsageChunk)]
    assert finish_of(chunks).reason == FinishStop()


async def test_the_recorded_400_is_context_window_exceeded(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(llamacpp.load("smollm2_overflow_nostream").reply())
    with pytest.raises(LlmError) as info:
        await collect(chat_provider(server.url + "/v1", client, profile="generic"), request())
    assert info.value.code == "CONTEXT_WINDOW_EXCEEDED"
