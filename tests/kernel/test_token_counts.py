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
from dsh_kernel.llm.providers.tokenizer import prompt_text
from tests.kernel.conftest import provider_env
from tests.support.kernel import Kernel, start_kernel
from tests.support.sse_server import (
    Recorded,
    Reply,
    SseServer,
    frames_from_sse,
    json_reply,
    sse_reply,
)
from tests.support.wire_transcripts import chat_chunk, sse

WINDOW = 16_384
PROPS = {"default_generation_settings": {"n_ctx": WINDOW}, "total_slots": 1}
BIG, SMALL = 7_000, 350
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


def no_probe(rec: Recorded) -> Reply | None:
    """A server whose one-token, unstreamed answers fail: the template's share is not measured."""
    if rec.json is not None and rec.json.get("stream") is False:
        return json_reply(500, {"error": {"message": "no", "type": "server_error"}})
    return None


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
    server.script(no_usage("Hi there."), routes=routes(BIG), respond=no_probe)
    chat(k, "Say hi.")
    # probed once, both endpoints at once; the text counted is the request's (the message, then
    # the tools); the template's probe (two one-token answers) failed: its constants are used
    paths = [r.path for r in server.counts]
    assert sorted(paths[:2]) == ["/extras/tokenize/count", "/tokenize"], paths
    assert set(paths[2:]) == {"/extras/tokenize/count"}
    texts = [r.json["input"] for r in server.counts if r.path == "/extras/tokenize/count"]
    assert "Say hi." in texts[0] and '"name": "python"' in texts[1]
    assert all(r.json["model"] == "qwen" for r in server.counts if r.json.get("model"))
    probes = [r.json for r in server.requests if r.json["stream"] is False]
    assert len(probes) == 2 and probes[0]["max_tokens"] == 1 and "tools" in probes[1]

    events = k.events()
    (context,) = [e["data"] for e in events if e["type"] == "request/context"]
    assert context["tokenCalibration"] == "tokenizer"
    (warning,) = [e["data"] for e in events if e["type"] == "context/warning"]
    tokens = warning["tokens"]
    # the messages' text and the tools' text, each counted BIG by this fake tokenizer
    assert 2 * BIG + TEMPLATE_TOOL_TOKENS <= tokens <= 2 * BIG + TEMPLATE_TOOL_TOKENS + 200
    assert tokens >= 0.8 * WINDOW and warning["measured"] is False

    rows = requests_view(k)
    assert rows == [{"turn": 1, "input_tokens": tokens, "estimated": True}]
    status = k.execute("%agent status").stdout
    assert "from the server's tokenizer" in status, status


def test_a_smaller_count_warns_no_more_and_the_endpoint_is_not_probed_again(
    rig: tuple[Kernel, SseServer],
) -> None:
    k, server = rig
    server.script(no_usage("Fine."), routes=routes(SMALL), respond=no_probe)
    chat(k, "And now?")
    # the endpoint and the tool list's count are kept, and the template is not probed again
    assert [r.path for r in server.counts] == ["/extras/tokenize/count"]
    assert [r.json["stream"] for r in server.requests] == [True]
    events = k.events()
    turn2 = next(e["seq"] for e in events if e["type"] == "turn/start" and e["data"]["turn"] == 2)
    later = [e for e in events if e["seq"] > turn2]
    assert not [e for e in later if e["type"] == "context/warning"]
    (context,) = [e["data"] for e in later if e["type"] == "request/context"]
    assert context["tokenCalibration"] == "tokenizer"
    rows = requests_view(k)
    assert rows[-1]["turn"] == 2 and rows[-1]["estimated"] is True
    # the messages' new count, the tool list's kept count, the template's share (5 a message, 3
    # for the answer's prompt) and the preamble, within what rounding the logged ratio can move
    low = SMALL + BIG + TEMPLATE_TOOL_TOKENS
    assert low <= rows[-1]["input_tokens"] <= low + 100
    assert rows[-1]["input_tokens"] < 0.8 * WINDOW


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


def fake_tokens(text: str) -> int:
    """This fake server's tokenizer: a token per 3 characters (the kernel's rule says 4)."""
    return -(-len(text) // 3)


def fake_prompt(body: dict[str, Any], *, preamble: int | None) -> int:
    """What this fake server's chat template makes of ``body``: the messages' text, 5 tokens a
    message and 1 for the answer's prompt, and — unless it drops the tools (``preamble`` None) —
    the tools' text and a ``preamble``."""
    text, tools, messages = prompt_text(body)
    total = fake_tokens(text) + 5 * messages + 1
    if tools and preamble is not None:
        total += fake_tokens(tools) + preamble
    return total


def template_server(preamble: int | None) -> Any:
    def respond(rec: Recorded) -> Reply | None:
        body = rec.json or {}
        if rec.path.endswith("/tokenize/count"):
            return json_reply(200, {"count": fake_tokens(body["input"])})
        if body.get("stream") is False:  # the template's probe: one token, with usage
            prompt = fake_prompt(body, preamble=preamble)
            usage = {"prompt_tokens": prompt, "completion_tokens": 1, "total_tokens": prompt + 1}
            return json_reply(
                200,
                {
                    "id": "x",
                    "object": "chat.completion",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "y"},
                            "finish_reason": "length",
                        }
                    ],
                    "usage": usage,
                },
            )
        return None

    return respond


@pytest.mark.parametrize("preamble", [87, None], ids=["tool-preamble", "tools-dropped"])
def test_the_template_probe_makes_the_count_the_servers(
    tmp_path: Any, preamble: int | None
) -> None:
    respond = template_server(preamble)
    with (
        SseServer(routes={"/props": json_reply(200, PROPS)}) as server,
        start_kernel(tmp_path, "dsh", env=provider_env(server, tmp_path, DSH_MODEL="qwen")) as k,
    ):
        for text in ("Say hi.", "def f(x):\n    return {i: i ** 2 for i in range(x)}\n" * 5):
            server.script(no_usage("Noted."), respond=respond, tokenizer=respond)
            chat(k, text)
        (sent,) = [r.json for r in server.requests if r.json["stream"] is True]
        real = fake_prompt(sent, preamble=preamble)
        rows = requests_view(k)
        counted = rows[-1]["input_tokens"]
        # the kernel's count of its request is the server's, but for the logged ratio's rounding
        assert abs(counted - real) <= 0.005 * real, (counted, real)
        (context,) = [e["data"] for e in k.events() if e["type"] == "request/context"][-1:]
        # the tools and their preamble on top of the messages, or taken out when left out
        assert (context["tokenAllowance"] > 0) == (preamble is not None), context
