"""Wire shapes of the Anthropic Messages API (WIRE.md §4).

Outbound bodies are ``TypedDict``s built from typed domain values. Inbound, only usage is validated
with pydantic (it is read twice per response); the per-event hot path reads the event dicts directly
(``translate.py``), following the event grammar documented by ``EventShape``. Everything inbound is
lenient: unknown event types, block types and keys are ignored or preserved, never fatal.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict

from dsh_kernel.jsonvalue import JsonObject, JsonValue

ANTHROPIC_VERSION = "2023-06-01"

# ---------------------------------------------------------------------------------------------------
# Outbound (request body)


class WireText(TypedDict):
    type: Literal["text"]
    text: str


class WireThinking(TypedDict):
    type: Literal["thinking"]
    thinking: str
    signature: str
    """Opaque; echoed byte for byte or the API answers 400."""


class WireRedactedThinking(TypedDict):
    type: Literal["redacted_thinking"]
    data: str


class WireToolUse(TypedDict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: JsonValue


class WireImageSource(TypedDict):
    type: Literal["base64"]
    media_type: str
    data: str


class WireImage(TypedDict):
    type: Literal["image"]
    source: WireImageSource


class WireToolResult(TypedDict):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[WireText | WireImage]
    """A string, or text and image blocks when the result carries images the model takes."""
    is_error: bool


WireBlock = (
    WireText | WireImage | WireThinking | WireRedactedThinking | WireToolUse | WireToolResult
)


class WireMessage(TypedDict):
    role: Literal["user", "assistant"]
    content: list[WireBlock]


class WireTool(TypedDict):
    name: str
    description: str
    input_schema: JsonObject


class WireThinkingConfig(TypedDict):
    """``enabled`` + ``budget_tokens`` (manual thinking), ``adaptive`` or ``disabled``."""

    type: Literal["enabled", "adaptive", "disabled"]
    budget_tokens: NotRequired[int]


class WireOutputConfig(TypedDict):
    effort: str


class MessagesRequestBody(TypedDict):
    model: str
    max_tokens: int
    messages: list[WireMessage]
    stream: bool
    system: NotRequired[str]
    tools: NotRequired[list[WireTool]]
    thinking: NotRequired[WireThinkingConfig]
    output_config: NotRequired[WireOutputConfig]
    temperature: NotRequired[float]
    stop_sequences: NotRequired[list[str]]


# ---------------------------------------------------------------------------------------------------
# Inbound, hot path (documentation only: read as plain dicts)


class EventShape(TypedDict, total=False):
    """One event's JSON, dispatched on ``type`` (the SSE ``event:`` name is ignored):
    ``message_start{message{usage}}``, ``content_block_start{index, content_block}``,
    ``content_block_delta{index, delta{type: text_delta|thinking_delta|signature_delta|
    input_json_delta|citations_delta, …}}``, ``content_block_stop{index}``,
    ``message_delta{delta{stop_reason}, usage}``, ``message_stop``, ``ping``, ``error{error}``."""

    type: str
    index: int
    message: JsonObject
    content_block: JsonObject
    delta: JsonObject
    usage: JsonObject
    error: JsonObject


# ---------------------------------------------------------------------------------------------------
# Inbound, validated


class WireUsage(BaseModel):
    """``message_start.message.usage`` or the cumulative ``message_delta.usage``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
