"""The transcripts of WIRE.md, byte for byte, and the error bodies of its tables.

Shared by the provider tests, the end-to-end tests and the streaming benchmark. Transcripts are SSE
text; ``tests.support.sse_server.frames_from_sse`` turns one into frames (one per event).
"""

from __future__ import annotations

import json
from typing import Any

OPENAI_TEXT = 'data: {"id":"chatcmpl-A1","object":"chat.completion.chunk","created":1764500000,"model":"gpt-x","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}\n\ndata: {"id":"chatcmpl-A1","object":"chat.completion.chunk","created":1764500000,"model":"gpt-x","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}\n\ndata: {"id":"chatcmpl-A1","object":"chat.completion.chunk","created":1764500000,"model":"gpt-x","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" there!"},"logprobs":null,"finish_reason":null}],"usage":null}\n\ndata: {"id":"chatcmpl-A1","object":"chat.completion.chunk","created":1764500000,"model":"gpt-x","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}\n\ndata: {"id":"chatcmpl-A1","object":"chat.completion.chunk","created":1764500000,"model":"gpt-x","system_fingerprint":"fp_1","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}\n\ndata: [DONE]\n\n'
"""WIRE §2.4, transcript A: plain text with a trailing usage chunk."""

OPENAI_PARALLEL_TOOLS = 'data: {"id":"chatcmpl-B1","object":"chat.completion.chunk","created":1764500001,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_aaa111","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}],"usage":null}\n\ndata: {"id":"chatcmpl-B1","object":"chat.completion.chunk","created":1764500001,"model":"gpt-x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"ci"}}]},"finish_reason":null}],"usage":null}\n\ndata: {"id":"chatcmpl-B1","object":"chat.completion.chunk","created":1764500001,"model":"gpt-x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\\": \\"Paris\\"}"}}]},"finish_reason":null}],"usage":null}\n\ndata: {"id":"chatcmpl-B1","object":"chat.completion.chunk","created":1764500001,"model":"gpt-x","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_bbb222","type":"function","function":{"name":"get_time","arguments":""}}]},"finish_reason":null}],"usage":null}\n\ndata: {"id":"chatcmpl-B1","object":"chat.completion.chunk","created":1764500001,"model":"gpt-x","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\\"tz\\":\\"Europe/Paris\\"}"}}]},"finish_reason":null}],"usage":null}\n\ndata: {"id":"chatcmpl-B1","object":"chat.completion.chunk","created":1764500001,"model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":null}\n\ndata: {"id":"chatcmpl-B1","object":"chat.completion.chunk","created":1764500001,"model":"gpt-x","choices":[],"usage":{"prompt_tokens":80,"completion_tokens":31,"total_tokens":111}}\n\ndata: [DONE]\n\n'
"""WIRE §2.5, transcript B: two parallel tool calls with fragmented arguments."""

OPENAI_LENGTH = 'data: {"id":"chatcmpl-C1","object":"chat.completion.chunk","created":1764500002,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":"The first"},"finish_reason":null}]}\n\ndata: {"id":"chatcmpl-C1","object":"chat.completion.chunk","created":1764500002,"model":"gpt-x","choices":[{"index":0,"delta":{"content":" three"},"finish_reason":"length"}]}\n\ndata: [DONE]\n\n'
"""WIRE §2.6, transcript C: cut by ``max_tokens``; content and finish in one chunk."""

OPENAI_INSTREAM_ERROR = 'data: {"id":"chatcmpl-E1","object":"chat.completion.chunk","created":1764500003,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":"Par"},"finish_reason":null}]}\n\ndata: {"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}\n\n'
"""WIRE §2.8: an error object after partial text; no ``[DONE]``."""

DEEPSEEK_THINKING_TOOL = ': keep-alive\n\n: keep-alive\n\ndata: {"id":"5f1c0b7e-0d61-4f0c-9b8e-2a4c7d1e9a00","object":"chat.completion.chunk","created":1764500100,"model":"deepseek-flash","system_fingerprint":"fp_ds_1","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":""},"logprobs":null,"finish_reason":null}]}\n\ndata: {"id":"5f1c0b7e-0d61-4f0c-9b8e-2a4c7d1e9a00","object":"chat.completion.chunk","created":1764500100,"model":"deepseek-flash","system_fingerprint":"fp_ds_1","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"The user asks for Paris weather."},"logprobs":null,"finish_reason":null}]}\n\ndata: {"id":"5f1c0b7e-0d61-4f0c-9b8e-2a4c7d1e9a00","object":"chat.completion.chunk","created":1764500100,"model":"deepseek-flash","system_fingerprint":"fp_ds_1","choices":[{"index":0,"delta":{"content":null,"reasoning_content":" I should call get_weather."},"logprobs":null,"finish_reason":null}]}\n\ndata: {"id":"5f1c0b7e-0d61-4f0c-9b8e-2a4c7d1e9a00","object":"chat.completion.chunk","created":1764500100,"model":"deepseek-flash","system_fingerprint":"fp_ds_1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_00_x1","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}]}\n\ndata: {"id":"5f1c0b7e-0d61-4f0c-9b8e-2a4c7d1e9a00","object":"chat.completion.chunk","created":1764500100,"model":"deepseek-flash","system_fingerprint":"fp_ds_1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\""}}]},"logprobs":null,"finish_reason":null}]}\n\ndata: {"id":"5f1c0b7e-0d61-4f0c-9b8e-2a4c7d1e9a00","object":"chat.completion.chunk","created":1764500100,"model":"deepseek-flash","system_fingerprint":"fp_ds_1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":": \\"Paris\\"}"}}]},"logprobs":null,"finish_reason":null}]}\n\ndata: {"id":"5f1c0b7e-0d61-4f0c-9b8e-2a4c7d1e9a00","object":"chat.completion.chunk","created":1764500100,"model":"deepseek-flash","system_fingerprint":"fp_ds_1","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":310,"completion_tokens":42,"total_tokens":352,"prompt_tokens_details":{"cached_tokens":256},"completion_tokens_details":{"reasoning_tokens":17},"prompt_cache_hit_tokens":256,"prompt_cache_miss_tokens":54}}\n\ndata: [DONE]\n\n'
"""WIRE §3.5, transcript D: keep-alive preamble, thinking, a tool call, cache usage."""

DEEPSEEK_MINIMAL = 'data: {"choices":[{"delta":{"role":"assistant","content":null,"reasoning_content":""}}]}\n\ndata: {"choices":[{"delta":{"content":"hello"}}]}\n\ndata: {"choices":[{"delta":{"content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\ndata: [DONE]\n\n'
"""WIRE §3.5: the harness's minimal payloads (no id/object/index), framed as SSE."""

ANTHROPIC_TEXT = 'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_fake_0001","type":"message","role":"assistant","content":[],"model":"claude-model-id","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":11,"output_tokens":1}}}\n\nevent: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\nevent: ping\ndata: {"type": "ping"}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" from"}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" E."}}\n\nevent: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\nevent: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":6}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n'
"""WIRE §4.3, transcript E: text with a ping."""

ANTHROPIC_THINKING_TOOL = 'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_01F","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":42,"cache_creation_input_tokens":0,"cache_read_input_tokens":1800,"output_tokens":1,"service_tier":"standard"}}}\n\nevent: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Need the weather; call get_weather with Paris."}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCkgIARABGAIiQL...fake...=="}}\n\nevent: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\nevent: content_block_start\ndata: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Let me check."}}\n\nevent: content_block_stop\ndata: {"type":"content_block_stop","index":1}\n\nevent: content_block_start\ndata: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01ABC","name":"get_weather","input":{}}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\\"city\\": \\"Par"}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"is\\"}"}}\n\nevent: content_block_stop\ndata: {"type":"content_block_stop","index":2}\n\nevent: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":88}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n'
"""WIRE §4.4, transcript F: signed thinking, text and ``tool_use``, cache read."""

ANTHROPIC_OVERLOADED = 'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_01G","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":1}}}\n\nevent: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Partial ans"}}\n\nevent: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
"""WIRE §4.6, transcript G: ``event: error`` overloaded after partial text."""


# ---------------------------------------------------------------------------------------------------
# Builders for streams the document describes but does not spell out


def sse(*payloads: object) -> str:
    """SSE text with one ``data:`` event per payload (``str`` payloads are sent verbatim)."""
    return "".join(
        f"data: {p if isinstance(p, str) else json.dumps(p, ensure_ascii=False)}\n\n"
        for p in payloads
    )


def chat_chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    index: int | None = 0,
) -> dict[str, Any]:
    choice: dict[str, Any] = {"delta": delta or {}, "finish_reason": finish_reason}
    if index is not None:
        choice["index"] = index
    return {
        "id": "chatcmpl-X",
        "object": "chat.completion.chunk",
        "created": 1764500000,
        "model": "gpt-x",
        "choices": [choice],
        "usage": usage,
    }


def chat_text_stream(pieces: list[str], *, usage: dict[str, Any] | None = None) -> str:
    """Role chunk, one chunk per piece, a finish chunk, a usage chunk, ``[DONE]``."""
    usage = usage or {
        "prompt_tokens": 10,
        "completion_tokens": len(pieces),
        "total_tokens": 10 + len(pieces),
    }
    return sse(
        chat_chunk({"role": "assistant", "content": ""}),
        *(chat_chunk({"content": p}) for p in pieces),
        chat_chunk({}, finish_reason="stop"),
        {"id": "chatcmpl-X", "choices": [], "usage": usage},
        "[DONE]",
    )


def deepseek_thinking_text(reasoning: str, text: str) -> str:
    """DeepSeek thinking mode ending in a plain answer (no tool call)."""
    return sse(
        chat_chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
        chat_chunk({"content": None, "reasoning_content": reasoning}),
        chat_chunk({"content": text, "reasoning_content": None}),
        chat_chunk(
            {"content": ""},
            finish_reason="stop",
            usage={
                "prompt_tokens": 400,
                "completion_tokens": 20,
                "total_tokens": 420,
                "prompt_cache_hit_tokens": 384,
                "prompt_cache_miss_tokens": 16,
                "completion_tokens_details": {"reasoning_tokens": 9},
            },
        ),
        "[DONE]",
    )


def anthropic_text(text: str, *, input_tokens: int = 30, output_tokens: int = 5) -> str:
    """A minimal Messages stream answering ``text``."""
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_T",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "claude-x",
                    "stop_reason": None,
                    "usage": {"input_tokens": input_tokens, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join(f"event: {name}\ndata: {json.dumps(obj)}\n\n" for name, obj in events)


# -- WIRE §5: local-server quirks ---------------------------------------------------------------------

LOCAL_REASONING_FIELD = sse(
    chat_chunk({"role": "assistant", "content": "", "reasoning": "Thinking about it"}),
    chat_chunk({"content": "", "reasoning": " carefully."}),
    chat_chunk({"content": "Answer: 42"}),
    chat_chunk({}, finish_reason="stop"),
    "[DONE]",
)
"""Ollama ``/v1`` and vLLM ≥ 0.10 name it ``reasoning`` and send ``content: ""`` while thinking."""

LOCAL_NO_INDEX = sse(
    {
        "choices": [
            {
                "delta": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":'},
                        }
                    ],
                }
            }
        ]
    },
    {
        "choices": [
            {"delta": {"tool_calls": [{"id": "call_a", "function": {"arguments": ' "Oslo"}'}}]}}
        ]
    },
    {
        "choices": [
            {
                "delta": {
                    "tool_calls": [
                        {
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "get_time", "arguments": "{}"},
                        }
                    ]
                }
            }
        ]
    },
    {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
    "[DONE]",
)
"""Old Ollama: tool-call fragments without ``index``, keyed by ``id``."""

LOCAL_DICT_ARGS_STOP = sse(
    {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_d",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": {"city": "Lima"}},
                        }
                    ],
                },
            }
        ]
    },
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    "[DONE]",
)
"""A whole call in one chunk, ``arguments`` as an object, and ``finish_reason: stop`` after it."""

LOCAL_SAME_INDEX = sse(
    {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "a", "arguments": "{}"},
                        }
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
                        {
                            "index": 0,
                            "id": "call_2",
                            "type": "function",
                            "function": {"name": "b", "arguments": '{"x":1}'},
                        }
                    ]
                },
            }
        ]
    },
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    "[DONE]",
)
"""A proxy that sends every parallel call at index 0 with distinct ids."""

LOCAL_NO_ID = sse(
    {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [{"index": 0, "function": {"name": "ping", "arguments": "{}"}}]
                },
            }
        ]
    },
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    "[DONE]",
)
"""A tool call that never gets an id (one must be synthesised)."""

LOCAL_NO_DONE = sse(
    chat_chunk({"role": "assistant", "content": "Hi"}),
    chat_chunk({}, finish_reason="stop"),
    {"choices": None, "usage": {"prompt_tokens": 5, "completion_tokens": 1}},
)
"""ik_llama.cpp: no ``[DONE]``; a vLLM-style usage chunk with ``choices: null``."""

LOCAL_CONTINUOUS_USAGE = sse(
    chat_chunk({"content": "a"}, usage={"prompt_tokens": 7, "completion_tokens": 1}),
    chat_chunk({"content": "b"}, usage={"prompt_tokens": 7, "completion_tokens": 2}),
    chat_chunk({}, finish_reason="stop", usage={"prompt_tokens": 7, "completion_tokens": 3}),
    "[DONE]",
)
"""vLLM/SGLang ``continuous_usage_stats``: usage on every chunk, the last one wins."""

LOCAL_NO_USAGE = sse(
    {"choices": [{"index": 0, "delta": {"role": "assistant"}}]},
    {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]},
    "[DONE]",
)
"""llama-cpp-python: a role-only first delta and no usage at all."""


# ---------------------------------------------------------------------------------------------------
# Error bodies (WIRE §2.7, §3.6, §4.5, §5.11)

OPENAI_401 = {
    "error": {
        "message": "Incorrect API key provided: sk-fak***1234. You can find your API key at https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
}
OPENAI_403_COUNTRY = {
    "error": {
        "message": "Country, region, or territory not supported",
        "type": "permission_denied",
        "param": None,
        "code": "unsupported_country_region_territory",
    }
}
OPENAI_404_MODEL = {
    "error": {
        "message": "The model `gpt-x` does not exist or you do not have access to it.",
        "type": "invalid_request_error",
        "param": None,
        "code": "model_not_found",
    }
}
OPENAI_400_CONTEXT = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 8312 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
OPENAI_400_BAD = {
    "error": {
        "message": "Invalid value for 'temperature': must be between 0 and 2.",
        "type": "invalid_request_error",
        "param": "temperature",
        "code": None,
    }
}
OPENAI_429_QUOTA = {
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
}
OPENAI_429_RATE = {
    "error": {
        "message": "Rate limit reached for gpt-x on requests per min (RPM): Limit 3, Used 3, Requested 1.",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}
OPENAI_500 = {
    "error": {
        "message": "The server had an error while processing your request. Sorry about that!",
        "type": "server_error",
        "param": None,
        "code": None,
    }
}
OPENAI_503 = {
    "error": {
        "message": "The engine is currently overloaded, please try again later",
        "type": "service_unavailable_error",
        "param": None,
        "code": "server_is_overloaded",
    }
}

DEEPSEEK_402 = {
    "error": {
        "message": "Insufficient Balance",
        "type": "unknown_error",
        "param": None,
        "code": "invalid_request_error",
    }
}
DEEPSEEK_422 = {
    "error": {
        "message": "Invalid Parameters: temperature",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_request_error",
    }
}
DEEPSEEK_503 = {
    "error": {
        "message": "Server overloaded, please try again later.",
        "type": "server_error",
        "param": None,
        "code": "server_error",
    }
}

ANTHROPIC_401 = {
    "type": "error",
    "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    "request_id": "req_011CA401",
}
ANTHROPIC_400_TOO_LONG = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 215000 tokens > 200000 maximum",
    },
    "request_id": "req_011CA400",
}
ANTHROPIC_402 = {
    "type": "error",
    "error": {
        "type": "billing_error",
        "message": "Your credit balance is too low to access the Anthropic API.",
    },
    "request_id": "req_011CA402",
}
ANTHROPIC_429_RATE = {
    "type": "error",
    "error": {
        "type": "rate_limit_error",
        "message": "Number of request tokens has exceeded your per-minute rate limit",
    },
    "request_id": "req_011CA429",
}
ANTHROPIC_429_SPEND = {
    "type": "error",
    "error": {
        "type": "rate_limit_error",
        "message": "You have reached your specified workspace API usage limits.",
        "details": {"error_code": "enforced_spend_limit_reached"},
    },
    "request_id": "req_011CA42S",
}
ANTHROPIC_529 = {
    "type": "error",
    "error": {"type": "overloaded_error", "message": "Overloaded"},
    "request_id": "req_011CA529",
}

VLLM_400_TOPLEVEL = {
    "object": "error",
    "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}
LLAMACPP_400_CONTEXT = {
    "error": {
        "code": 400,
        "message": "request (9412 tokens) exceeds the available context size (8192 tokens), try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 9412,
        "n_ctx": 8192,
    }
}
OLLAMA_404 = {
    "error": {
        "message": 'model "qwen9:1b" not found, try pulling it first',
        "type": "api_error",
        "param": None,
        "code": None,
    }
}
GATEWAY_WRAPPED_429 = {"detail": json.dumps(OPENAI_429_RATE)}


# -- issue 14: what local servers leave in ``content`` ----------------------------------------------


def local_chunk(
    delta: dict[str, Any], *, finish_reason: str | None = None, rid: str
) -> dict[str, Any]:
    """A llama-cpp-python server chunk (WIRE §5.16): an id of its own, no ``usage`` key."""
    return {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": 1764600000,
        "model": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }


def local_stream(
    pieces: list[str],
    *,
    finish_reason: str = "stop",
    rid: str = "chatcmpl-5a1e6a3c-0b8e-4c1f-9d7e-2f3a4b5c6d7e",
    field: str = "content",
) -> str:
    """The shape llama-cpp-python 0.3.36 streams (research notes): a role-only first delta, one
    ``content`` delta per piece (``field`` names another delta key, e.g. ``reasoning_content``),
    a finish chunk, ``[DONE]`` — and no usage chunk, though ``include_usage`` was sent."""
    return sse(
        local_chunk({"role": "assistant"}, rid=rid),
        *(local_chunk({field: p}, rid=rid) for p in pieces),
        local_chunk({}, finish_reason=finish_reason, rid=rid),
        "[DONE]",
    )


def tokens(text: str, size: int = 3) -> list[str]:
    """``text`` cut into pieces of ``size`` characters, as a server streams it token by token."""
    return [text[i : i + size] for i in range(0, len(text), size)]


QWEN_TEXT_CALL = (
    '{"name": "python", "arguments": {"code": "17 * 23", "description": '
    '"A short title for this run, shown on its card"}}'
)
"""Qwen2.5-Coder-0.5B's answer to "Compute 17*23 with python" through llama-cpp-python's default
template (the research notes' trial table): the call as ``content``, ``finish_reason: stop``."""


# -- issue 37: empty answers ---------------------------------------------------------------------------

ANTHROPIC_EMPTY_TEXT_BLOCK = "".join(
    f"event: {name}\ndata: {json.dumps(obj)}\n\n"
    for name, obj in (
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_empty",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "claude-x",
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                },
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 0},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    )
)
"""An empty answer on the ``anthropic`` route as LiteLLM's Messages endpoint sends it in front of a
local model that ended its turn at once: one empty text block, ``end_turn``, and usage 0 in, 0 out."""

LOCAL_EMPTY_ANSWER = local_stream([])
"""llama-cpp-python's stream when the model's first token is end-of-turn: the role-only first delta,
then ``finish_reason: stop`` with nothing in between, ``[DONE]``, no usage."""
