"""The context window asked of a real HTTP server, and the empty stream probed (issue 14).

The server is the loopback scenario server answering as each local server does: llama.cpp's
``/props``, Ollama's ``/api/show``, vLLM's and OpenRouter's model lists, llama-cpp-python's model
list (which says nothing about the window), and llama-cpp-python's answer to an over-long prompt —
HTTP 200 with no bytes when streaming, a 400 ``context_length_exceeded`` without (the body is the
server's own format, ``llama_cpp/server/errors.py``, with the figures of the run recorded in
``real-llama-cpp-server.md``).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from dsh_kernel import Agent
from dsh_kernel.agent.request.window import ContextWindows
from dsh_kernel.errors import LlmError
from dsh_kernel.llm.providers.discovery import DiscoveredWindow, discover_window, lookup_urls
from dsh_kernel.llm.types import FinishChunk, FinishError
from dsh_kernel.session.payloads import payload_of
from tests.support import wire_transcripts as wt
from tests.support.providers import chat_provider, collect, request
from tests.support.sse_server import SseServer, json_reply, sse_reply

LLAMACPP_PROPS = {
    "default_generation_settings": {"n_ctx": 4096, "n_predict": -1, "model": "qwen.gguf"},
    "total_slots": 1,
    "chat_template": "{% for m in messages %}…{% endfor %}",
}
OLLAMA_SHOW = {
    "modelfile": "FROM qwen2.5:0.5b",
    "parameters": 'num_ctx                        8192\nstop                           "<|im_end|>"',
    "details": {"family": "qwen2", "parameter_size": "494.03M"},
    "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
}
OLLAMA_SHOW_DEFAULTS = {**OLLAMA_SHOW, "parameters": 'stop "<|im_end|>"'}
VLLM_MODELS = {
    "object": "list",
    "data": [{"id": "Qwen/Qwen2.5-7B-Instruct", "object": "model", "max_model_len": 32768}],
}
LLAMA_CPP_PYTHON_MODELS = {
    "object": "list",
    "data": [{"id": "qwen", "object": "model", "owned_by": "me", "permissions": []}],
}
LLAMA_CPP_PYTHON_OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 4096 tokens. However, you requested "
        "23921 tokens (23920 in the messages, 1 in the completion). Please reduce the length of "
        "the messages or completion.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


async def ask(server: SseServer, client: httpx.AsyncClient, model: str = "m") -> Any:
    return await discover_window(client, server.url + "/v1", model, headers={"x-test": "1"})


def test_the_lookups_stay_on_the_base_urls_host() -> None:
    props, show, models = lookup_urls("http://127.0.0.1:8080/v1")
    assert (str(props), str(show), str(models)) == (
        "http://127.0.0.1:8080/props",
        "http://127.0.0.1:8080/api/show",
        "http://127.0.0.1:8080/v1/models",
    )
    assert (
        str(lookup_urls("https://openrouter.ai/api/v1/")[2])
        == "https://openrouter.ai/api/v1/models"
    )


async def test_llama_cpp_props(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(routes={"/props": json_reply(200, LLAMACPP_PROPS)})
    assert await ask(server, client) == DiscoveredWindow(tokens=4096, where="/props")
    paths = sorted(r.path for r in server.lookups)
    assert paths == ["/api/show", "/props", "/v1/models"]  # asked at once, all on this server
    assert all(r.headers["x-test"] == "1" for r in server.lookups)
    assert server.requests == []  # no model call


async def test_ollama_show_prefers_num_ctx_then_the_model_length(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(routes={"/api/show": json_reply(200, OLLAMA_SHOW)})
    assert await ask(server, client, "qwen2.5:0.5b") == DiscoveredWindow(
        tokens=8192, where="/api/show"
    )
    (show,) = [r for r in server.lookups if r.path == "/api/show"]
    assert show.method == "POST" and show.json == {"model": "qwen2.5:0.5b"}
    server.script(routes={"/api/show": json_reply(200, OLLAMA_SHOW_DEFAULTS)})
    assert await ask(server, client) == DiscoveredWindow(tokens=32768, where="/api/show")


async def test_vllm_model_list(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(routes={"/v1/models": json_reply(200, VLLM_MODELS)})
    found = await ask(server, client, "Qwen/Qwen2.5-7B-Instruct")
    assert found == DiscoveredWindow(tokens=32768, where="/models")


async def test_props_beats_a_model_list(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(
        routes={
            "/props": json_reply(200, LLAMACPP_PROPS),
            "/v1/models": json_reply(200, VLLM_MODELS),
        }
    )
    assert (await ask(server, client, "Qwen/Qwen2.5-7B-Instruct")).where == "/props"


@pytest.mark.parametrize(
    "routes",
    [
        {},  # 404 everywhere
        {"/v1/models": json_reply(200, LLAMA_CPP_PYTHON_MODELS)},  # llama-cpp-python: no window
        {"/props": json_reply(200, b"<html>not json</html>")},
        {"/props": json_reply(200, {"default_generation_settings": {"n_ctx": 0}})},
        {"/props": json_reply(500, {"error": "busy"})},
    ],
)
async def test_a_server_that_says_nothing_usable_gives_none(
    server: SseServer, client: httpx.AsyncClient, routes: dict[str, Any]
) -> None:
    server.script(routes=routes)
    assert await ask(server, client) is None


async def test_a_refused_connection_gives_none(client: httpx.AsyncClient) -> None:
    assert await discover_window(client, "http://127.0.0.1:9/v1", "m", headers={}) is None


async def test_a_route_is_asked_once_and_the_key_goes_only_to_its_server(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(routes={"/props": json_reply(200, LLAMACPP_PROPS)})
    provider = chat_provider(server.url + "/v1", client, profile="generic", key="sk-local-1")
    windows = ContextWindows()
    first = await windows.resolve(provider, "qwen")
    second = await windows.resolve(provider, "qwen")
    assert first == second and first is not None
    assert first.describe() == "4,096 tokens (discovered from /props)"
    assert len(server.lookups) == 3  # once, not twice
    assert {r.headers["authorization"] for r in server.lookups} == {"Bearer sk-local-1"}
    # A catalogue provider is never asked.
    catalogue = chat_provider(server.url, client, profile="openai")
    window = await ContextWindows().resolve(catalogue, "gpt-6-luna")
    assert window is not None and window.source == "catalogue" and len(server.lookups) == 3


async def test_a_generic_server_that_says_nothing_gets_the_default(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    provider = chat_provider(server.url, client, profile="generic")
    window = await ContextWindows().resolve(provider, "qwen")
    assert window is not None and (window.tokens, window.source) == (4096, "default")
    assert not window.known


# --- the empty stream, probed once ---------------------------------------------------------------


async def test_an_empty_stream_is_probed_once_for_the_real_error(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply([], chunked=False),  # llama-cpp-python, streaming an over-long prompt
        json_reply(400, LLAMA_CPP_PYTHON_OVERFLOW),  # the same request without streaming
    )
    chunks = await collect(chat_provider(server.url, client, profile="generic"), request())
    finish = chunks[-1]
    assert isinstance(finish, FinishChunk) and isinstance(finish.reason, FinishError)
    failure = finish.reason.failure
    assert failure.code == "CONTEXT_WINDOW_EXCEEDED" and failure.status == 400
    assert "empty stream" in failure.message and "maximum context length is 4096" in failure.message
    streamed, probe = server.requests
    assert streamed.json["stream"] is True
    assert probe.json["stream"] is False and probe.json["max_tokens"] == 1
    assert "stream_options" not in probe.json
    assert probe.json["messages"] == streamed.json["messages"]


async def test_an_empty_stream_whose_probe_is_answered_stays_empty_response(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    completion = {
        "id": "x",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "H"},
                "finish_reason": "length",
            }
        ],
    }
    server.script(sse_reply([], chunked=False), json_reply(200, completion))
    chunks = await collect(chat_provider(server.url, client, profile="generic"), request())
    failure = chunks[-1].reason.failure  # type: ignore[union-attr]
    assert failure.code == "EMPTY_RESPONSE" and "its log says why" in failure.message
    assert len(server.requests) == 2


async def test_catalogue_profiles_are_not_probed(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply([], chunked=False), sse_reply(wt.OPENAI_TEXT))
    with pytest.raises(LlmError) as info:
        await collect(chat_provider(server.url, client, profile="openai"), request())
    assert info.value.code == "EMPTY_RESPONSE"
    assert len(server.requests) == 1


async def test_the_cap_goes_in_each_profiles_own_field(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    for profile, field, other in (
        ("openai", "max_completion_tokens", "max_tokens"),
        ("generic", "max_tokens", "max_completion_tokens"),
    ):
        server.script(sse_reply(wt.OPENAI_TEXT))
        agent = Agent(
            provider=chat_provider(server.url, client, profile=profile),
            model="gpt-6-luna",
            context_windows=ContextWindows(configured=8192),
        )
        agent.followup("Hello.")
        await agent.when_idle()
        (sent,) = server.requests
        assert 256 <= sent.json[field] < 8192 and other not in sent.json, profile


async def test_an_overflow_that_names_the_window_teaches_it(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    """llama-cpp-python says nothing of its window when asked, but its overflow names it: from
    then on the route's window is known, so the next over-long message is refused before sending
    and a short one is capped to fit."""
    provider = chat_provider(server.url, client, profile="generic")
    windows = ContextWindows()
    agent = Agent(provider=provider, model="qwen", context_windows=windows, check_invariants=True)
    server.script(sse_reply([], chunked=False), json_reply(400, LLAMA_CPP_PYTHON_OVERFLOW))
    long = "word " * 20_000
    agent.followup(long)
    await agent.when_idle()
    assert isinstance(agent.last_error, LlmError)
    assert agent.last_error.failure.code == "CONTEXT_WINDOW_EXCEEDED"
    learned = windows.current(provider, "qwen")
    assert learned is not None and learned.known
    assert learned.describe() == "4,096 tokens (discovered from the server's error)"
    sent = len(server.requests)
    agent.followup(long)
    await agent.when_idle()
    assert isinstance(agent.last_error, LlmError)
    assert agent.last_error.failure.code == "CONTEXT_WINDOW_EXCEEDED"
    assert "it was not sent" in agent.last_error.failure.message
    assert len(server.requests) == sent  # refused before sending
    server.script(sse_reply(wt.sse(wt.chat_chunk({"content": "Hi."}, finish_reason="stop"))))
    agent.followup("Say hi.")
    await agent.when_idle()
    ends = [payload_of(e, "turn/end") for e in agent.session.events if e.type == "turn/end"]
    assert ends[-1]["reason"]["kind"] == "completed", ends[-1]
    (short,) = server.requests
    assert 0 < short.json["max_tokens"] < 4096
