"""``GenerateRequest`` → Messages API request body (WIRE.md §4.1, §4.4).

- ``system`` is the system prompt, with any system-role history messages appended;
- assistant content keeps its order: reasoning with a signature → ``thinking`` (text and signature
  exactly as received), redacted reasoning → ``redacted_thinking``, text → ``text``, tool calls →
  ``tool_use`` with the arguments parsed back to an object (``{}`` when they are not one); unsigned
  reasoning (from another provider) and empty text are left out, since the API rejects both;
- tool results → ``tool_result`` blocks in a user turn; consecutive turns of one role are merged, so
  the parallel results of one step travel together. A result's content is its text, or — when it
  carries image blocks and the route takes images — a list of its ``text`` and ``image`` blocks in
  order;
- image blocks (in a user message or a tool result), when the route takes images
  (``request.images``) → ``image`` blocks with a ``base64`` source; otherwise, or when an image cannot
  be sent (no bytes, a format the API does not take), → its stand-in (``llm.image_wire``: media type,
  size, why it is not shown, the description logged at capture) — a ``text`` block, or a line of the
  tool result's text on a route that takes no images;
- ``max_tokens`` is required: the request's, else ``DEFAULT_MAX_TOKENS``;
- the effort, for the Claude 5.x generation (adaptive thinking; they refuse ``budget_tokens``):
  ``off`` → ``thinking: {type: disabled}``, any other → ``thinking: {type: adaptive}`` +
  ``output_config: {effort}``, none → no thinking setting (the model's default); for models with
  manual thinking (``budget=True``, Haiku 4.5): ``low``/``medium``/``high`` →
  ``thinking.budget_tokens`` (kept ≥ 1024 and below ``max_tokens``, or thinking is left off), ``off``
  or none → no thinking. With thinking on, ``temperature`` is not sent (the API only accepts its
  default then). A session title never thinks.
"""

from __future__ import annotations

from dsh_kernel.llm.image_wire import stand_in, withheld_reason
from dsh_kernel.llm.providers.anthropic.wire import (
    MessagesRequestBody,
    WireBlock,
    WireImage,
    WireImageSource,
    WireMessage,
    WireText,
    WireTool,
)
from dsh_kernel.llm.providers.base import ProviderDefaults, tool_result_text
from dsh_kernel.llm.providers.transport import json_object
from dsh_kernel.llm.types import (
    GenerateRequest,
    ImageBlock,
    Message,
    ModelInfo,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)

DEFAULT_MAX_TOKENS = 32_000
EFFORT_BUDGETS: dict[str, int] = {"low": 4_096, "medium": 10_000, "high": 24_000}
MIN_THINKING_BUDGET = 1_024


def _image(image: ImageBlock, images: bool) -> WireImage | WireText:
    """``image`` as an image block, or as its stand-in text (``llm.image_wire``)."""
    reason = withheld_reason(image, images)
    if reason is not None or image.data is None:
        return {"type": "text", "text": stand_in(image, reason)}
    source: WireImageSource = {"type": "base64", "media_type": image.media_type, "data": image.data}
    return {"type": "image", "source": source}


def _result_content(result: ToolResultBlock, images: bool) -> str | list[WireText | WireImage]:
    """A tool result's text (its images' stand-ins in it on a route that takes none), or — when it
    carries images for a route that takes them — its text and image blocks in order."""
    if not images or not any(isinstance(b, ImageBlock) for b in result.content):
        return tool_result_text(result.content)
    out: list[WireText | WireImage] = []
    for block in result.content:
        if isinstance(block, TextBlock) and block.text:
            out.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            out.append(_image(block, images))
    return out


def _blocks(message: Message, images: bool) -> list[WireBlock]:
    out: list[WireBlock] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            if block.text:
                out.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            out.append(_image(block, images))
        elif isinstance(block, ReasoningBlock):
            if block.redacted is not None:
                out.append({"type": "redacted_thinking", "data": block.redacted})
            elif block.signature:
                out.append(
                    {"type": "thinking", "thinking": block.text, "signature": block.signature}
                )
        elif isinstance(block, ToolCallBlock):
            out.append(
                {
                    "type": "tool_use",
                    "id": block.id,
                    "name": block.name,
                    "input": json_object(block.arguments) or {},
                }
            )
        elif isinstance(block, ToolResultBlock):
            out.append(
                {
                    "type": "tool_result",
                    "tool_use_id": block.tool_call_id,
                    "content": _result_content(block, images),
                    "is_error": block.is_error,
                }
            )
    return out


def serialize_messages(
    messages: tuple[Message, ...], images: bool = False
) -> tuple[list[WireMessage], list[str]]:
    """The wire turns, and the text of any system-role messages (they go to ``system``); image
    blocks go as images when ``images`` (the route takes them), else as their stand-ins."""
    turns: list[WireMessage] = []
    system: list[str] = []
    for message in messages:
        if message.role == "system":
            if text := message.text():
                system.append(text)
            continue
        blocks = _blocks(message, images)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == message.role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": message.role, "content": blocks})
    return turns, system


def thinking_budget(effort: str | None, max_tokens: int) -> int | None:
    """The ``budget_tokens`` for ``effort`` under ``max_tokens``; ``None`` for no (or too small a) budget."""
    budget = EFFORT_BUDGETS.get(effort or "")
    if budget is None:
        return None
    budget = min(budget, max_tokens - 1)
    return budget if budget >= MIN_THINKING_BUDGET else None


def serialize_request(
    request: GenerateRequest, defaults: ProviderDefaults, info: ModelInfo | None = None
) -> MessagesRequestBody:
    """The request body; ``info`` says how the model thinks (module docstring)."""
    turns, extra_system = serialize_messages(request.messages, request.images)
    max_tokens = request.max_tokens or defaults.max_tokens or DEFAULT_MAX_TOKENS
    body: MessagesRequestBody = {
        "model": request.model,
        "max_tokens": max_tokens,
        "messages": turns,
        "stream": True,
    }
    system = "\n\n".join([s for s in (request.system, *extra_system) if s])
    if system:
        body["system"] = system
    if request.tools:
        tools: list[WireTool] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
        body["tools"] = tools
    efforts = info.reasoning_efforts if info is not None else ()
    effort = request.reasoning_effort
    if request.purpose == "session-title":  # as little thinking as the model allows
        effort = "off" if "off" in efforts or not efforts else efforts[0]
    thinking = False
    if info is not None and info.reasoning_style == "budget":
        tokens = thinking_budget(effort, max_tokens)
        if tokens is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": tokens}
            thinking = True
    elif effort == "off":
        body["thinking"] = {"type": "disabled"}
    elif effort is not None:
        body["thinking"] = {"type": "adaptive"}
        body["output_config"] = {"effort": effort}
        thinking = True
    if not thinking:
        temperature = (
            request.temperature if request.temperature is not None else defaults.temperature
        )
        if temperature is not None:
            body["temperature"] = temperature
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    return body
