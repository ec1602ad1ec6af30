"""The token estimate: what a text, a content block, a message or a request header comes to when
no server counted it (the harness heuristic, SPINE §7.6).

The one rule, shared by the token meter (``agent.request.meter``), the usage reader
(``session.usage``) and the store (``store.ingest.statements``'s ``est_tokens`` and the
``header_tokens`` of ``store/sql/views.sql``, the same rule in SQL; a test holds them equal):

* text and reasoning ``ceil(chars / 4) + 4``; a tool call ``ceil((name + arguments) / 4) + 4``;
* an image ``max(width * height // 750, ceil(description / 4) + 4) + 4`` — about one token per 750
  pixels (Anthropic's rule; OpenAI's tiles come to about the same at 1,024 px), or its description
  when that is larger;
* a tool result ``+ 4`` plus its nested blocks, each counted as a leaf: an image as above, any other
  block its ``text`` (a block without one: ``4``);
* a block this version does not know: its ``text``, if it has one, as text;
* ``+ 4`` per message;
* a request header: the system prompt ``ceil(chars / 4) + 4`` when there is one, the tool list
  ``ceil(len(compact JSON) / 4) + 4`` when there is one.

Pure functions over the ``llm.types`` values; nothing here fails on a well-formed value.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import assert_never

from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.llm.codec import tool_schema_to_json
from dsh_kernel.llm.types import (
    ContentBlock,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSchema,
    UnknownBlock,
)


def chars_tokens(chars: int) -> int:
    """The estimate of ``chars`` characters of text: ``ceil(chars / 4) + 4``."""
    return math.ceil(chars / 4) + 4


def text_tokens(text: str) -> int:
    """The estimate of one piece of text (a block's, a system prompt's)."""
    return chars_tokens(len(text))


def _unknown_text(block: UnknownBlock) -> str:
    text = block.raw.get("text")
    return text if isinstance(text, str) else ""


def _leaf_tokens(block: ContentBlock) -> int:
    """A block inside a tool result: an image by its pixels or description, any other its text."""
    match block:
        case ImageBlock():
            pixels = block.width * block.height
            return max(pixels // 750, text_tokens(block.description)) + 4
        case TextBlock() | ReasoningBlock():
            return text_tokens(block.text)
        case UnknownBlock():
            return text_tokens(_unknown_text(block))
        case ToolCallBlock() | ToolResultBlock():
            return chars_tokens(0)  # no text of its own
        case _:
            assert_never(block)


def block_tokens(block: ContentBlock) -> int:
    """The estimate of one block of a message (module docstring)."""
    match block:
        case ToolCallBlock():
            return chars_tokens(len(block.name) + len(block.arguments))
        case ToolResultBlock():
            return sum(_leaf_tokens(b) for b in block.content) + 4
        case TextBlock() | ReasoningBlock() | ImageBlock() | UnknownBlock():
            return _leaf_tokens(block)
        case _:
            assert_never(block)


def message_tokens(message: Message) -> int:
    """The estimate of a message: its blocks, ``+ 4``."""
    return sum(block_tokens(b) for b in message.content) + 4


def tools_json_tokens(tools: JsonValue) -> int:
    """The estimate of a tool list in its JSON form (as logged): its compact JSON text; ``0`` for
    an empty or missing list."""
    if not isinstance(tools, list) or not tools:
        return 0
    return chars_tokens(len(json.dumps(tools, ensure_ascii=False, separators=(",", ":"))))


def request_header_tokens(system: str | None, tools: Sequence[ToolSchema]) -> int:
    """The estimate of a request header's system prompt and tool list (``0`` for neither)."""
    total = text_tokens(system) if system else 0
    return total + tools_json_tokens([tool_schema_to_json(t) for t in tools])
