"""Wire shapes of OpenAI-compatible Chat Completions (WIRE.md §2, §3, §5).

Outbound bodies are ``TypedDict``s: we build them from already-typed domain values, so validating them
again would only cost time. Inbound data is untrusted and validated here with pydantic — but only the
parts read once per response (usage). The per-chunk hot path reads the
streamed chunk dicts directly (``translate.py``), because a model validation per token would cost more
than the rest of the pipeline together; the shape it expects is documented by ``StreamChunkShape``.

Everything inbound is lenient: unknown keys are ignored and every field is optional, because real
servers omit ``id``/``index``/``model`` and add ``obfuscation``, ``timings``, ``provider`` and friends.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict

from dsh_kernel.jsonvalue import JsonObject, JsonValue

# ---------------------------------------------------------------------------------------------------
# Outbound (request body)


class WireFunctionCall(TypedDict):
    name: str
    arguments: str
    """The raw JSON text the model wrote, sent back as received (never re-encoded)."""


class WireToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: WireFunctionCall


class WireSystemMessage(TypedDict):
    role: Literal["system"]
    content: str


class WireTextPart(TypedDict):
    type: Literal["text"]
    text: str


class WireImageUrl(TypedDict):
    url: str
    """A ``data:<media type>;base64,<bytes>`` URL: the image itself, never a link to fetch."""


class WireImagePart(TypedDict):
    type: Literal["image_url"]
    image_url: WireImageUrl


WireContentPart = WireTextPart | WireImagePart


class WireUserMessage(TypedDict):
    role: Literal["user"]
    content: str | list[WireContentPart]
    """A string, or text and image parts when the message carries images the model takes."""


class WireAssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: str
    """Always a string, ``""`` when empty: a ``null`` here can brick a DeepSeek session."""
    reasoning_content: NotRequired[str]
    tool_calls: NotRequired[list[WireToolCall]]


class WireToolMessage(TypedDict):
    role: Literal["tool"]
    tool_call_id: str
    content: str


WireMessage = WireSystemMessage | WireUserMessage | WireAssistantMessage | WireToolMessage


class WireFunctionDef(TypedDict):
    name: str
    description: str
    parameters: JsonObject


class WireTool(TypedDict):
    type: Literal["function"]
    function: WireFunctionDef


class WireStreamOptions(TypedDict):
    include_usage: bool


class WireThinking(TypedDict):
    type: Literal["enabled", "disabled"]


class ChatRequestBody(TypedDict):
    model: str
    messages: list[WireMessage]
    stream: bool
    stream_options: NotRequired[WireStreamOptions]
    tools: NotRequired[list[WireTool]]
    thinking: NotRequired[WireThinking]
    reasoning_effort: NotRequired[str]
    temperature: NotRequired[float]
    seed: NotRequired[int]
    max_tokens: NotRequired[int]
    max_completion_tokens: NotRequired[int]
    stop: NotRequired[list[str]]


# ---------------------------------------------------------------------------------------------------
# Inbound, hot path (documentation only: read as plain dicts)


class StreamChunkShape(TypedDict, total=False):
    """One ``data:`` payload. ``choices`` may be empty, null or missing (usage-only chunks);
    ``usage`` may ride on any chunk (last wins); ``error`` replaces everything on an in-band fault."""

    id: str
    choices: list[JsonObject]
    """Each: ``{index?, delta: {role?, content?, reasoning_content?, reasoning?, tool_calls?},
    finish_reason?}``; tool-call fragments are ``{index?, id?, type?, function: {name?, arguments?}}``
    where ``arguments`` is a string fragment (or, from some servers, a whole object)."""
    usage: JsonObject | None
    error: JsonValue


# ---------------------------------------------------------------------------------------------------
# Inbound, once per response (validated)


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class WirePromptDetails(_Lenient):
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None


class WireCompletionDetails(_Lenient):
    reasoning_tokens: int | None = None


class WireUsage(_Lenient):
    """Usage as OpenAI, DeepSeek (``prompt_cache_hit/miss_tokens``) and local servers report it."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_tokens_details: WirePromptDetails | None = None
    completion_tokens_details: WireCompletionDetails | None = None
    prompt_cache_hit_tokens: int | None = None
    prompt_cache_miss_tokens: int | None = None
