"""Calibrated counts through a real kernel (``llm.calibration``), against a loopback server that plays
llama-cpp-python: it streams answers with no usage (as llama-cpp-python does), says its window at
``/props``, and counts tokens at ``/extras/tokenize/count`` — with a count the test chooses.

The kernel probes the tokenizer once (both endpoints at once, then only the one that answered),
measures each request with the count plus the template's share, records the calibration on the
request's ``request/context``, and warns when *that* figure passes 80 % of the window — where the
plain ``chars / 4`` estimate would not. The store's ``requests.input_tokens`` shows the figure the
warning names, and ``%agent status`` says where the calibration came from."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from dsh_kernel.llm.calibration import TEMPLATE_TOOL_TOKENS
from tests.kernel.conftest import provider_env
from tests.support.kernel import Kernel, start_kernel
from tests.support.sse_server import Reply, SseServer, frames_from_sse, json_reply, sse_reply
from tests.support.wire_transcripts import chat_chunk, sse

WINDOW = 16_384
PROPS = {"default_generation_settings": {"n_ctx": WINDOW}, "total_slots": 1}
BIG, SMALL = 14_000, 700
"""What the fake tokenizer counts: over 80 % of the window with the template's share, and far under."""


def no_usage(text: str) -> Reply:
    """An answer streamed as llama-cpp-python streams one: no usage chunk."""
    return sse_reply(
        frames_from_sse(
            sse(
                chat_chunk({"role": "assistant", "content": ""}),
                chat_chunk({"content": text}),
                chat_chunk({}, finish_reason="stop"),
                "[DONE]",
            )
        )
    )


def routes(count: int) -> dict[str, Reply]:
    return {
        "/props": json_reply(200, PROPS),
        "/extras/tokenize/count": json_reply(200, {"count": count}),
    }


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kernel, SseServer]]:
    tmp = tmp_path_factory.mktemp("token-counts")
    with (
        SseServer(routes=routes(BIG)) as server,
        start_kernel(tmp, "dsh", env=provider_env(server, tmp, DSH_MODEL="qwen")) as k,
    ):
        yield k, server


def chat(k: Kernel, text: str) -> None:
    ex = k.execute(text, timeout=120)
    assert ex.status == "ok", ex.content


def requests_view(k: Kernel) -> list[dict[str, Any]]:
    k.python("get_ipython().kernel.host.flush()")
    ex = k.execute(
        "%%sql _req <<\nSELECT turn, input_tokens, estimated FROM requests ORDER BY request"
    )
    assert ex.status == "ok", ex.content
    return json.loads(k.python("print(_req.to_json(orient='records'))"))


def test_the_tokenizers_count_is_the_meters_and_the_views(rig: tuple[Kernel, SseServer]) -> None:
    k, server = rig
    server.script(no_usage("Hi there."), routes=routes(BIG))
    chat(k, "Say hi.")
    # probed once, both endpoints at once; the text counted is the request's (the message, the tools)
    paths = sorted(r.path for r in server.counts)
    assert paths == ["/extras/tokenize/count", "/tokenize"], paths
    (counted,) = [r for r in server.counts if r.path == "/extras/tokenize/count"]
    assert "Say hi." in counted.json["input"] and '"name": "python"' in counted.json["input"]
    assert counted.json["model"] == "qwen"

    events = k.events()
    (context,) = [e["data"] for e in events if e["type"] == "request/context"]
    assert context["tokenCalibration"] == "tokenizer"
    assert context["tokenAllowance"] == TEMPLATE_TOOL_TOKENS
    (warning,) = [e["data"] for e in events if e["type"] == "context/warning"]
    tokens = warning["tokens"]
    assert BIG + TEMPLATE_TOOL_TOKENS <= tokens <= BIG + TEMPLATE_TOOL_TOKENS + 200
    assert tokens >= 0.8 * WINDOW and warning["measured"] is False

    rows = requests_view(k)
    assert rows == [{"turn": 1, "input_tokens": tokens, "estimated": True}]
    status = k.execute("%agent status").stdout
    assert "from the server's tokenizer" in status, status


def test_a_smaller_count_warns_no_more_and_the_endpoint_is_not_probed_again(
    rig: tuple[Kernel, SseServer],
) -> None:
    k, server = rig
    server.script(no_usage("Fine."), routes=routes(SMALL))
    chat(k, "And now?")
    assert [r.path for r in server.counts] == ["/extras/tokenize/count"]
    events = k.events()
    turn2 = next(e["seq"] for e in events if e["type"] == "turn/start" and e["data"]["turn"] == 2)
    later = [e for e in events if e["seq"] > turn2]
    assert not [e for e in later if e["type"] == "context/warning"]
    (context,) = [e["data"] for e in later if e["type"] == "request/context"]
    rows = requests_view(k)
    assert rows[-1]["turn"] == 2 and rows[-1]["estimated"] is True
    # the count, the template's share (5 per message, 3 for the answer's prompt) and the preamble,
    # within what rounding the logged ratio can move
    assert SMALL + TEMPLATE_TOOL_TOKENS <= rows[-1]["input_tokens"] <= SMALL + 200
    assert context["tokenRatio"] < 1.0  # the raw estimate was larger than this count


def through_litellm(text: str, prompt_tokens: int) -> Reply:
    """An answer as LiteLLM's proxy relays it: its ``x-litellm-*`` headers, and a usage."""
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 3,
        "total_tokens": prompt_tokens + 3,
    }
    return sse_reply(
        frames_from_sse(
            sse(
                chat_chunk({"role": "assistant", "content": ""}),
                chat_chunk({"content": text}),
                chat_chunk({}, finish_reason="stop"),
                {"id": "chatcmpl-X", "choices": [], "usage": usage},
                "[DONE]",
            )
        ),
        headers={"x-litellm-version": "1.80.0", "x-litellm-call-id": "c0ffee"},
    )


def test_a_proxys_own_usage_is_marked_and_neither_anchors_nor_calibrates(tmp_path: Any) -> None:
    with (
        SseServer(routes={"/props": json_reply(200, PROPS)}) as server,
        start_kernel(tmp_path, "dsh", env=provider_env(server, tmp_path, DSH_MODEL="qwen")) as k,
    ):
        # about a quarter of the request's estimate: what a proxy counting by itself reports
        server.script(through_litellm("Hi.", 300))
        chat(k, "Say hi.")
        (answer,) = [e["data"] for e in k.events() if e["type"] == "assistant/message"]
        assert answer["usage"]["via"] == "litellm" and answer["usageOrigin"] == "proxy"
        status = k.execute("%agent status").stdout
        assert "(estimated)" in status and "calibrated" not in status, status

        # a plausible count through the same proxy passes for the server's: it calibrates
        server.script(through_litellm("Fine.", 2_000))
        chat(k, "And now?")
        events = k.events()
        answers = [e["data"] for e in events if e["type"] == "assistant/message"]
        assert "usageOrigin" not in answers[-1] and answers[-1]["usage"]["via"] == "litellm"
        status = k.execute("%agent status").stdout
        assert "(measured; estimates calibrated ×" in status, status
        assert "from 1 request the server counted" in status
