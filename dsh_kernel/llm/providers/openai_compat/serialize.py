"""``GenerateRequest`` → Chat Completions request body (SPINE §2.8, WIRE §2.1, §3.2, §3.4).

Always ``stream: true`` with ``stream_options.include_usage``. Messages:

- the system prompt becomes the first ``system`` message (system-role history messages follow it);
- an assistant message becomes one ``assistant`` message: ``content`` is its text joined and ``""``
  — never ``null`` — when empty; ``tool_calls`` carries each call with its raw argument text (a call
  recovered from text goes back as a proper call: that is the point of recovering it); with
  ``profile.reasoning_passback`` its reasoning is sent as ``reasoning_content`` whenever non-empty and
  as ``""`` on a tool-call turn without any (DeepSeek answers HTTP 400 when it is missing). With
  ``profile.passback_dialect`` (a generic server) the request's ``reasoning_passback`` decides:
  ``send`` — ``reasoning_content`` on every assistant message (``""`` when it has none); ``omit`` —
  never; unset — on a tool-call turn whose reasoning the server streamed as ``reasoning_content``
  (the finish's replay state says so), the rule DeepSeek behind a proxy needs. Reasoning read from
  ``<think>`` tags is therefore not sent back unless the server asked for ``send``; it is never
  sent back as text;
- a user message becomes one ``tool`` message per tool-result block (first, so they follow the
  assistant turn that asked for them), then one ``user`` message with its text if it has text or
  has no tool results. A tool result's content is its text, or ``(no output)``.

Images (``llm.image_wire`` decides which can be sent). On a route that takes them (``request.images``):
a tool message stays text — Chat Completions takes no images there — each of its images a line
``[image 1 of this result: follows in the next user message]``; the images of consecutive tool
messages follow in ONE ``user`` message after the last of them (the tool messages must follow the
assistant's ``tool_calls`` directly), a text part naming the call before each ``image_url`` part (a
``data:`` URL). A user message with images becomes text and ``image_url`` parts in order. On a route
that takes none (any model not known to take images; DeepSeek — ``profile.image_parts`` off — even
when asked, since it answers 400 ``unknown variant image_url``), no image part is sent anywhere:
each image is its stand-in, in the text where it stood.

Blocks a chat-completions server cannot take (unknown types) are left out.

The effort: with ``profile.thinking_toggle`` (DeepSeek) ``off`` → ``thinking: disabled`` and any other
→ ``thinking: enabled`` + ``reasoning_effort`` (a session title never thinks); otherwise ``off`` →
``profile.off_effort`` (OpenAI: ``none``) or nothing, any other → ``reasoning_effort`` as given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dsh_kernel.llm.image_wire import data_url, joined_text, stand_in, withheld_reason
from dsh_kernel.llm.providers.base import ProviderDefaults, tool_result_text
from dsh_kernel.llm.providers.openai_compat.profiles import ChatProfile
from dsh_kernel.llm.providers.openai_compat.wire import (
    ChatRequestBody,
    WireAssistantMessage,
    WireContentPart,
    WireMessage,
    WireTool,
    WireToolCall,
    WireToolMessage,
)
from dsh_kernel.llm.types import (
    ContentBlock,
    GenerateRequest,
    ImageBlock,
    Message,
    ModelSource,
    ReasoningBlock,
    ReasoningPassback,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)


def _streamed_reasoning_content(message: Message) -> bool:
    source = message.source
    state = source.replay_state if isinstance(source, ModelSource) else None
    return isinstance(state, dict) and state.get("reasoningField") == "reasoning_content"


def _passback(
    message: Message,
    reasoning: str,
    has_calls: bool,
    profile: ChatProfile,
    dialect: ReasoningPassback | None,
) -> str | None:
    """The ``reasoning_content`` to send with ``message``, or ``None`` for none (module docstring)."""
    if profile.reasoning_passback:
        return reasoning if reasoning or has_calls else None
    if not profile.passback_dialect or dialect == "omit":
        return None
    if dialect == "send":
        return reasoning
    if has_calls and reasoning and _streamed_reasoning_content(message):
        return reasoning
    return None


def _assistant(
    message: Message, profile: ChatProfile, dialect: ReasoningPassback | None
) -> WireAssistantMessage:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[WireToolCall] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ReasoningBlock):
            reasoning.append(block.text)
        elif isinstance(block, ToolCallBlock):
            calls.append(
                {
                    "id": block.id,
                    "type": "function",
                    "function": {"name": block.name, "arguments": block.arguments},
                }
            )
    out: WireAssistantMessage = {"role": "assistant", "content": "".join(texts)}
    passback = _passback(message, "".join(reasoning), bool(calls), profile, dialect)
    if passback is not None:
        out["reasoning_content"] = passback
    if calls:
        out["tool_calls"] = calls
    return out


def _image_text(images: bool) -> Callable[[ImageBlock], str]:
    return lambda image: stand_in(image, withheld_reason(image, images))


def _user_content(blocks: Sequence[ContentBlock], images: bool) -> str | list[WireContentPart]:
    """A user message's own blocks: its text (images as stand-ins), or text and image parts when it
    carries an image the route takes."""
    if not any(isinstance(b, ImageBlock) and withheld_reason(b, images) is None for b in blocks):
        return joined_text(blocks, _image_text(images))
    parts: list[WireContentPart] = []
    for block in blocks:
        if isinstance(block, TextBlock) and block.text:
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            if withheld_reason(block, images) is None:
                parts.append({"type": "image_url", "image_url": {"url": data_url(block)}})
            else:
                parts.append({"type": "text", "text": _image_text(images)(block)})
    return parts


def _tool_message(
    result: ToolResultBlock, name: str | None, images: bool, follow: list[WireContentPart]
) -> WireToolMessage:
    """The ``tool`` message of ``result``: text, where each image the route takes is a line saying
    it follows, its parts appended to ``follow`` (the user message after the step's tool messages)."""
    count = 0

    def image_text(image: ImageBlock) -> str:
        nonlocal count
        reason = withheld_reason(image, images)
        if reason is not None:
            return stand_in(image, reason)
        count += 1
        call = f"tool call {result.tool_call_id}" + (f" ({name})" if name else "")
        follow.append({"type": "text", "text": f"[image {count} of the result of {call}]"})
        follow.append({"type": "image_url", "image_url": {"url": data_url(image)}})
        return f"[image {count} of this result: follows in the next user message]"

    content = tool_result_text(result.content, image_text)
    return {"role": "tool", "tool_call_id": result.tool_call_id, "content": content}


def serialize_messages(
    messages: tuple[Message, ...],
    system: str | None,
    profile: ChatProfile,
    dialect: ReasoningPassback | None = None,
    images: bool = False,
) -> list[WireMessage]:
    """The Chat Completions ``messages`` for ``system`` and ``messages``, shaped by ``profile``;
    image blocks go as ``image_url`` parts when ``images`` (the route takes them), else as their
    stand-ins (module docstring)."""
    out: list[WireMessage] = []
    names: dict[str, str] = {}
    follow: list[WireContentPart] = []
    """The images of the tool messages just written: one user message after the last of them."""

    def flush() -> None:
        if follow:
            out.append({"role": "user", "content": follow.copy()})
            follow.clear()

    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if message.role == "assistant":
            flush()
            out.append(_assistant(message, profile, dialect))
            names.update((b.id, b.name) for b in message.content if isinstance(b, ToolCallBlock))
            continue
        if message.role == "system":
            flush()
            out.append({"role": "system", "content": message.text()})
            continue
        results = [b for b in message.content if isinstance(b, ToolResultBlock)]
        for result in results:
            out.append(_tool_message(result, names.get(result.tool_call_id), images, follow))
        own = [b for b in message.content if not isinstance(b, ToolResultBlock)]
        content = _user_content(own, images)
        if content or not results:
            flush()
            out.append({"role": "user", "content": content})
    flush()
    return out


def _tools(request: GenerateRequest) -> list[WireTool]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            },
        }
        for t in request.tools
    ]


def serialize_request(
    request: GenerateRequest, profile: ChatProfile, defaults: ProviderDefaults
) -> ChatRequestBody:
    """The request body for one streamed attempt."""
    body: ChatRequestBody = {
        "model": request.model,
        "messages": serialize_messages(
            request.messages,
            request.system,
            profile,
            request.reasoning_passback,
            request.images and profile.image_parts,
        ),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = _tools(request)
    effort = request.reasoning_effort
    if profile.thinking_toggle:
        if request.purpose == "session-title" or effort == "off":
            body["thinking"] = {"type": "disabled"}
        elif effort is not None:
            body["thinking"] = {"type": "enabled"}
            body["reasoning_effort"] = effort
    elif effort == "off":
        if profile.off_effort is not None:
            body["reasoning_effort"] = profile.off_effort
    elif effort is not None:
        body["reasoning_effort"] = effort
    temperature = request.temperature if request.temperature is not None else defaults.temperature
    if temperature is not None:
        body["temperature"] = temperature
    if request.seed is not None:
        body["seed"] = request.seed
    if request.max_tokens is not None:
        if profile.max_tokens_field == "max_completion_tokens":
            body["max_completion_tokens"] = request.max_tokens
        else:
            body["max_tokens"] = request.max_tokens
    if request.stop:
        body["stop"] = list(request.stop)
    return body
