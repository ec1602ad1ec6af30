"""The Chat Completions adapter against replayed OpenAI wire bytes (WIRE §6 scenarios 1–6, 13)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import httpx
import pytest

from dsh_kernel.errors import LlmError
from dsh_kernel.ids import CallId
from dsh_kernel.llm.types import (
    BlockEndChunk,
    BlockStartChunk,
    ContentBlock,
    FinishError,
    FinishMaxTokens,
    FinishStop,
    FinishToolCalls,
    LlmCallConfig,
    ReasoningBlock,
    StreamChunk,
    TextBlock,
    TextDeltaChunk,
    TokenUsage,
    ToolCallBlock,
    ToolCallDeltaChunk,
    UsageChunk,
)
from tests.support import wire_transcripts as wt
from tests.support.providers import (
    WEATHER_TOOL,
    assistant,
    chat_provider,
    collect,
    finish_of,
    request,
    tool_result,
    user,
)
from tests.support.sse_server import Framing, SseServer, json_reply, sse_reply

FRAMINGS = {
    "plain": Framing(),
    "split": Framing(split_seed=7),
    "crlf": Framing(crlf=True),
    "no-space": Framing(no_space=True),
    "keepalive": Framing(keepalive=True),
    "all": Framing(split_seed=11, crlf=True, no_space=True, keepalive=True),
}


def blocks(chunks: Sequence[StreamChunk]) -> list[ContentBlock]:
    return [c.block for c in chunks if isinstance(c, BlockEndChunk)]


@pytest.mark.parametrize("framing", FRAMINGS.values(), ids=FRAMINGS.keys())
async def test_text_with_usage_under_any_framing(
    server: SseServer, client: httpx.AsyncClient, framing: Framing
) -> None:
    server.script(sse_reply(wt.OPENAI_TEXT, framing=framing))
    chunks = await collect(chat_provider(server.url, client), request())
    assert [type(c).__name__ for c in chunks] == [
        "BlockStartChunk",
        "TextDeltaChunk",
        "TextDeltaChunk",
        "BlockEndChunk",
        "UsageChunk",
        "FinishChunk",
    ]
    assert blocks(chunks) == [TextBlock(text="Hello there!")]
    assert chunks[-2] == UsageChunk(
        usage=TokenUsage(input_tokens=12, output_tokens=3, cache_read_tokens=0, reasoning_tokens=0)
    )
    assert finish_of(chunks).reason == FinishStop()


async def test_multibyte_text_split_inside_characters(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    pieces = ["Grüße ", "aus ", "Zürich ☀️", " — 11°C, 東京 🌧"]
    server.script(sse_reply(wt.chat_text_stream(pieces), framing=Framing(split_seed=3, crlf=True)))
    chunks = await collect(chat_provider(server.url, client), request())
    assert [c.text for c in chunks if isinstance(c, TextDeltaChunk)] == pieces
    assert blocks(chunks) == [TextBlock(text="".join(pieces))]


async def test_request_body_shape(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(sse_reply(wt.OPENAI_TEXT))
    provider = chat_provider(server.url, client)
    await collect(
        provider,
        request(
            user("weather?"),
            model="gpt-x",
            system="Be brief.",
            tools=[WEATHER_TOOL],
            max_tokens=100,
            temperature=0.2,
            seed=7,
            stop=("END",),
        ),
    )
    (rec,) = server.requests
    assert rec.path == "/chat/completions"
    assert rec.headers["authorization"] == "Bearer sk-test-0000000000000000"
    assert rec.headers["user-agent"].startswith("dsh-kernel/")
    assert rec.json == {
        "model": "gpt-x",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "weather?"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather for a city.",
                    "parameters": WEATHER_TOOL.parameters,
                },
            }
        ],
        "temperature": 0.2,
        "seed": 7,
        "max_completion_tokens": 100,
        "stop": ["END"],
    }


async def test_parallel_tool_calls_and_their_passback(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply(wt.OPENAI_PARALLEL_TOOLS, framing=Framing(split_seed=5)),
        sse_reply(wt.OPENAI_TEXT),
    )
    provider = chat_provider(server.url, client)
    chunks = await collect(provider, request(user("weather and time in Paris")))
    calls = blocks(chunks)
    assert calls == [
        ToolCallBlock(id=CallId("call_aaa111"), name="get_weather", arguments='{"city": "Paris"}'),
        ToolCallBlock(id=CallId("call_bbb222"), name="get_time", arguments='{"tz":"Europe/Paris"}'),
    ]
    deltas = [c for c in chunks if isinstance(c, ToolCallDeltaChunk)]
    assert [d.arguments_delta for d in deltas if d.index == 0] == ["", '{"ci', 'ty": "Paris"}']
    assert finish_of(chunks).reason == FinishToolCalls()
    # Block-ends, usage and finish are held to the end: every delta precedes every block-end.
    first_end = next(i for i, c in enumerate(chunks) if isinstance(c, BlockEndChunk))
    assert all(not isinstance(c, ToolCallDeltaChunk) for c in chunks[first_end:])

    history = (
        user("weather and time in Paris"),
        assistant(*calls),
        tool_result("call_aaa111", '{"temp_c": 11}'),
        tool_result("call_bbb222", "14:02"),
    )
    await collect(provider, request(*history))
    sent = server.requests[1].json["messages"]
    assert sent[1:] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_aaa111",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_bbb222",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": '{"tz":"Europe/Paris"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_aaa111", "content": '{"temp_c": 11}'},
        {"role": "tool", "tool_call_id": "call_bbb222", "content": "14:02"},
    ]
    assert "reasoning_content" not in sent[1]  # OpenAI profile: no DeepSeek passback field


async def test_length_finish_keeps_text(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(sse_reply(wt.OPENAI_LENGTH))
    chunks = await collect(chat_provider(server.url, client), request())
    assert blocks(chunks) == [TextBlock(text="The first three")]
    assert finish_of(chunks).reason == FinishMaxTokens()
    assert not any(isinstance(c, UsageChunk) for c in chunks)  # cut stream: usage unknown


async def test_truncated_tool_arguments_under_length(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply(
            wt.sse(
                wt.chat_chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_t",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"ci'},
                            }
                        ]
                    }
                ),
                wt.chat_chunk({}, finish_reason="length"),
                "[DONE]",
            )
        )
    )
    chunks = await collect(chat_provider(server.url, client), request())
    assert blocks(chunks) == [
        ToolCallBlock(id=CallId("call_t"), name="get_weather", arguments='{"ci')
    ]
    assert finish_of(chunks).reason == FinishMaxTokens()  # the assembler drops the unsafe call


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (401, wt.OPENAI_401, "AUTH"),
        (403, wt.OPENAI_403_COUNTRY, "AUTH"),
        (404, wt.OPENAI_404_MODEL, "HTTP_404"),
        (400, wt.OPENAI_400_CONTEXT, "CONTEXT_WINDOW_EXCEEDED"),
        (400, wt.OPENAI_400_BAD, "INVALID_REQUEST"),
        (429, wt.OPENAI_429_QUOTA, "QUOTA"),
        (429, wt.OPENAI_429_RATE, "RATE_LIMIT"),
        (500, wt.OPENAI_500, "SERVER"),
        (503, wt.OPENAI_503, "SERVER"),
        (400, wt.VLLM_400_TOPLEVEL, "CONTEXT_WINDOW_EXCEEDED"),
        (400, wt.LLAMACPP_400_CONTEXT, "CONTEXT_WINDOW_EXCEEDED"),
        (404, wt.OLLAMA_404, "HTTP_404"),
        (429, wt.GATEWAY_WRAPPED_429, "RATE_LIMIT"),
        (502, b"<html><body>502 Bad Gateway</body></html>", "SERVER"),
        (413, b"request entity too large", "INVALID_REQUEST"),
    ],
)
async def test_http_errors_are_classified(
    server: SseServer, client: httpx.AsyncClient, status: int, body: object, code: str
) -> None:
    server.script(json_reply(status, body, headers={"x-request-id": "req_42"}))
    with pytest.raises(LlmError) as info:
        await collect(chat_provider(server.url, client, profile="generic"), request())
    failure = info.value.failure
    assert (failure.code, failure.status, failure.request_id) == (code, status, "req_42")
    assert info.value.code == code
    assert str(status) in failure.message
    assert failure.provider_retry_after_ms is None


async def test_http_error_message_carries_provider_wording(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(json_reply(400, wt.OPENAI_400_CONTEXT))
    with pytest.raises(LlmError) as info:
        await collect(chat_provider(server.url, client), request())
    assert "maximum context length is 8192 tokens" in info.value.failure.message


@pytest.mark.parametrize(
    ("headers", "expected_ms"),
    [
        ({"retry-after": "1"}, 1000),
        ({"retry-after": "2.5"}, 2500),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1500),
        ({"retry-after": "0"}, None),
        ({"retry-after": "soon"}, None),
    ],
)
async def test_retry_after_is_kept(
    server: SseServer, client: httpx.AsyncClient, headers: dict[str, str], expected_ms: int | None
) -> None:
    server.script(json_reply(429, wt.OPENAI_429_RATE, headers=headers))
    with pytest.raises(LlmError) as info:
        await collect(chat_provider(server.url, client), request())
    assert info.value.failure.provider_retry_after_ms == expected_ms


async def test_retry_after_as_http_date(server: SseServer, client: httpx.AsyncClient) -> None:
    import email.utils
    import time

    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    server.script(json_reply(503, wt.OPENAI_503, headers={"retry-after": when}))
    with pytest.raises(LlmError) as info:
        await collect(chat_provider(server.url, client), request())
    ms = info.value.failure.provider_retry_after_ms
    assert ms is not None and 115_000 <= ms <= 121_000


async def test_in_stream_error_after_partial_text(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.OPENAI_INSTREAM_ERROR, close="hang"))
    chunks = await collect(chat_provider(server.url, client), request())
    assert [c for c in chunks if isinstance(c, TextDeltaChunk)] == [
        TextDeltaChunk(index=0, text="Par")
    ]
    reason = finish_of(chunks).reason
    assert isinstance(reason, FinishError)
    assert reason.failure.code == "SERVER"
    assert "The server had an error" in reason.failure.message
    assert not any(isinstance(c, BlockEndChunk) for c in chunks)  # the partial text never closes


async def test_in_stream_context_error_from_a_simulator(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.sse({"error": wt.OPENAI_400_CONTEXT["error"]})))
    chunks = await collect(chat_provider(server.url, client), request())
    reason = finish_of(chunks).reason
    assert isinstance(reason, FinishError) and reason.failure.code == "CONTEXT_WINDOW_EXCEEDED"


async def test_empty_completion_is_empty_response(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply(
            wt.sse(
                wt.chat_chunk({"role": "assistant", "content": ""}),
                wt.chat_chunk({"content": ""}, finish_reason="stop"),
                "[DONE]",
            )
        )
    )
    chunks = await collect(chat_provider(server.url, client), request())
    reason = finish_of(chunks).reason
    assert isinstance(reason, FinishError) and reason.failure.code == "EMPTY_RESPONSE"
    assert reason.failure.detail == "model-stopped"  # a stop reason came: the model's choice
    assert not any(isinstance(c, BlockStartChunk) for c in chunks)


async def test_llama_cpp_empty_answer_is_the_model_stopping(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.LOCAL_EMPTY_ANSWER))
    chunks = await collect(chat_provider(server.url, client), request())
    reason = finish_of(chunks).reason
    assert isinstance(reason, FinishError) and reason.failure.code == "EMPTY_RESPONSE"
    assert reason.failure.detail == "model-stopped"


async def test_a_zero_usage_is_no_count(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(
        sse_reply(wt.chat_text_stream(["hi"], usage={"prompt_tokens": 0, "completion_tokens": 0}))
    )
    chunks = await collect(chat_provider(server.url, client), request())
    assert not any(isinstance(c, UsageChunk) for c in chunks)  # unknown, never 0/0


@pytest.mark.parametrize(
    ("wire", "code"), [("content_filter", "CONTENT_FILTER"), ("weird_reason", "WEIRD_REASON")]
)
async def test_unknown_finish_reasons_become_errors(
    server: SseServer, client: httpx.AsyncClient, wire: str, code: str
) -> None:
    server.script(
        sse_reply(wt.sse(wt.chat_chunk({"content": "partial"}, finish_reason=wire), "[DONE]"))
    )
    chunks = await collect(chat_provider(server.url, client), request())
    reason = finish_of(chunks).reason
    assert isinstance(reason, FinishError) and reason.failure.code == code
    assert blocks(chunks) == [TextBlock(text="partial")]  # the text received is kept


async def test_stream_cut_mid_frame_is_stream_closed(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.OPENAI_TEXT, close="abort"))
    provider = chat_provider(server.url, client)
    seen: list[object] = []
    with pytest.raises(LlmError) as info:
        async for chunk in provider.stream(request()):
            seen.append(chunk)
    assert info.value.code == "STREAM_CLOSED"
    assert any(isinstance(c, TextDeltaChunk) for c in seen)


async def test_eof_before_finish_without_chunked_framing(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    text = wt.sse(wt.chat_chunk({"content": "half an ans"}))
    server.script(sse_reply(text, chunked=False))
    with pytest.raises(LlmError) as info:
        await collect(chat_provider(server.url, client), request())
    assert info.value.code == "STREAM_CLOSED"


async def test_empty_body_is_empty_response(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(sse_reply([], chunked=False))
    with pytest.raises(LlmError) as info:
        await collect(chat_provider(server.url, client), request())
    assert info.value.code == "EMPTY_RESPONSE"
    assert info.value.failure.detail == "empty-body"


async def test_malformed_payload(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(sse_reply(wt.sse("{not json")))
    with pytest.raises(LlmError) as info:
        await collect(chat_provider(server.url, client), request())
    assert info.value.code == "MALFORMED_RESPONSE"
    assert "{not json" in info.value.failure.message


async def test_non_streaming_json_answer_is_accepted(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    completion = {
        "id": "chatcmpl-N",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "call_n",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13},
    }
    server.script(json_reply(200, b"\n\n" + json.dumps(completion).encode()))
    chunks = await collect(chat_provider(server.url, client), request())
    assert blocks(chunks) == [
        ToolCallBlock(id=CallId("call_n"), name="get_weather", arguments='{"city":"Rome"}')
    ]
    assert UsageChunk(usage=TokenUsage(input_tokens=9, output_tokens=4)) in chunks
    assert finish_of(chunks).reason == FinishToolCalls()


# -- WIRE §5: local-server quirks ---------------------------------------------------------------------


async def test_reasoning_field_named_reasoning(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.LOCAL_REASONING_FIELD))
    chunks = await collect(chat_provider(server.url, client, profile="generic"), request())
    assert blocks(chunks) == [
        ReasoningBlock(text="Thinking about it carefully."),
        TextBlock(text="Answer: 42"),
    ]
    assert finish_of(chunks).reason == FinishStop()


async def test_tool_calls_without_index(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(sse_reply(wt.LOCAL_NO_INDEX))
    chunks = await collect(chat_provider(server.url, client, profile="generic"), request())
    assert blocks(chunks) == [
        ToolCallBlock(id=CallId("call_a"), name="get_weather", arguments='{"city": "Oslo"}'),
        ToolCallBlock(id=CallId("call_b"), name="get_time", arguments="{}"),
    ]


async def test_dict_arguments_and_stop_after_tool_calls(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.LOCAL_DICT_ARGS_STOP))
    chunks = await collect(chat_provider(server.url, client, profile="generic"), request())
    (call,) = blocks(chunks)
    assert isinstance(call, ToolCallBlock)
    assert json.loads(call.arguments) == {"city": "Lima"}
    assert finish_of(chunks).reason == FinishToolCalls()


async def test_parallel_calls_all_at_index_zero(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.LOCAL_SAME_INDEX))
    chunks = await collect(chat_provider(server.url, client, profile="generic"), request())
    assert blocks(chunks) == [
        ToolCallBlock(id=CallId("call_1"), name="a", arguments="{}"),
        ToolCallBlock(id=CallId("call_2"), name="b", arguments='{"x":1}'),
    ]


async def test_missing_tool_call_id_is_synthesised(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.LOCAL_NO_ID))
    chunks = await collect(chat_provider(server.url, client, profile="generic"), request())
    (call,) = blocks(chunks)
    assert isinstance(call, ToolCallBlock) and call.id.startswith("call_") and len(call.id) > 10
    deltas = [c for c in chunks if isinstance(c, ToolCallDeltaChunk)]
    assert {d.id for d in deltas} == {call.id}


async def test_a_late_tool_call_id_does_not_change_the_call(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(
        sse_reply(
            wt.sse(
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {"index": 0, "function": {"name": "ping", "arguments": "{"}}
                                ]
                            },
                        }
                    ]
                },
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {"index": 0, "id": "call_late", "function": {"arguments": "}"}}
                                ]
                            },
                        }
                    ]
                },
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
                "[DONE]",
            )
        )
    )
    chunks = await collect(chat_provider(server.url, client, profile="generic"), request())
    (call,) = blocks(chunks)
    assert isinstance(call, ToolCallBlock) and call.arguments == "{}" and call.name == "ping"
    assert call.id != "call_late"  # the synthesised id stands: a call's id never changes mid-stream


async def test_missing_done_after_finish_is_a_soft_end(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.LOCAL_NO_DONE))
    chunks = await collect(chat_provider(server.url, client, profile="generic"), request())
    assert blocks(chunks) == [TextBlock(text="Hi")]
    assert UsageChunk(usage=TokenUsage(input_tokens=5, output_tokens=1)) in chunks
    assert finish_of(chunks).reason == FinishStop()


async def test_omitted_done_switch_on_a_real_transcript(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.OPENAI_TEXT, framing=Framing(omit_done=True)))
    chunks = await collect(chat_provider(server.url, client), request())
    assert blocks(chunks) == [TextBlock(text="Hello there!")]
    assert finish_of(chunks).reason == FinishStop()


async def test_continuous_usage_last_wins(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(sse_reply(wt.LOCAL_CONTINUOUS_USAGE))
    chunks = await collect(chat_provider(server.url, client, profile="generic"), request())
    assert [c for c in chunks if isinstance(c, UsageChunk)] == [
        UsageChunk(usage=TokenUsage(input_tokens=7, output_tokens=3))
    ]


async def test_no_usage_role_only_first_delta(server: SseServer, client: httpx.AsyncClient) -> None:
    server.script(sse_reply(wt.LOCAL_NO_USAGE))
    chunks = await collect(chat_provider(server.url, client, profile="generic"), request())
    assert blocks(chunks) == [TextBlock(text="ok")]
    assert not any(isinstance(c, UsageChunk) for c in chunks)


async def test_a_payload_nested_absurdly_deep_is_malformed_not_a_crash(
    server: SseServer, client: httpx.AsyncClient
) -> None:
    server.script(sse_reply(wt.sse("[" * 100_000 + "]" * 100_000)))
    with pytest.raises(LlmError) as info:
        await collect(chat_provider(server.url, client), request())
    assert info.value.code == "MALFORMED_RESPONSE"
    assert "nested too deeply" in info.value.failure.message


@pytest.mark.parametrize(
    ("profile", "model", "effort", "expected"),
    [
        # GPT-5.4+ take function tools on Chat Completions only with effort none: the default
        ("openai", "gpt-6-luna", None, "none"),
        ("openai", "gpt-6-luna", "off", "none"),  # off is sent as OpenAI's none
        ("openai", "gpt-5-mini", "minimal", "minimal"),  # takes tools at any effort
        ("openai", "gpt-5-mini", None, None),  # the server's default (medium)
        ("generic", "local-model", "off", None),  # a compatible server: nothing assumed
        ("generic", "local-model", "high", "high"),
    ],
)
async def test_openai_efforts_on_the_wire(
    server: SseServer,
    client: httpx.AsyncClient,
    profile: str,
    model: str,
    effort: str | None,
    expected: str | None,
) -> None:
    server.script(sse_reply(wt.OPENAI_TEXT))
    provider = chat_provider(server.url, client, profile=profile)
    config = provider.prepare_call(
        LlmCallConfig(provider=profile, model=model, reasoning_effort=effort)
    ).config
    await collect(
        provider,
        request(
            user("hi"), model=model, tools=[WEATHER_TOOL], reasoning_effort=config.reasoning_effort
        ),
    )
    assert server.requests[0].json.get("reasoning_effort") == expected


def test_openai_models_that_need_effort_none_for_tools_refuse_others_saying_why() -> None:
    provider = chat_provider("http://127.0.0.1:9", None)
    for model, effort in (("gpt-6-luna", "high"), ("gpt-5-mini", "off")):
        with pytest.raises(LlmError) as info:
            provider.prepare_call(
                LlmCallConfig(provider="openai", model=model, reasoning_effort=effort)
            )
        assert info.value.code == "UNSUPPORTED_REASONING_EFFORT"
    with pytest.raises(LlmError) as luna:
        provider.prepare_call(
            LlmCallConfig(provider="openai", model="gpt-6-luna", reasoning_effort="high")
        )
    assert "only with reasoning effort none" in luna.value.message
    assert "Responses API" in luna.value.message and "off, none" in luna.value.message
