"""JSON form of the LLM vocabulary, exactly as the log stores it (camelCase keys, harness tags).

``*_to_json`` produce fresh ``JsonObject``s; ``*_from_json`` accept what the log holds and raise
``ValueError`` naming the field on malformed input. Unknown tags of open unions round-trip through the
``Unknown…`` members untouched; an unknown stream-chunk type is an error (the chunk union is closed).

Optional fields are omitted when unset, so logs stay compact and diff cleanly against the harness.

A tool call's argument text is parsed by ``dsh_kernel.llm.arguments``.
"""

from __future__ import annotations

from typing import assert_never

from dsh_kernel.ids import CallId, MessageId
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import (
    BlockEndChunk,
    BlockStartChunk,
    ContentBlock,
    FinishAborted,
    FinishChunk,
    FinishError,
    FinishMaxTokens,
    FinishReason,
    FinishStop,
    FinishToolCalls,
    FinishUnknown,
    ImageBlock,
    LlmCallConfig,
    LlmFailure,
    Message,
    MessageSource,
    ModelSource,
    PluginSource,
    ReasoningBlock,
    ReasoningDeltaChunk,
    ReasoningPassback,
    Role,
    StreamChunk,
    TextBlock,
    TextDeltaChunk,
    TokenUsage,
    ToolCallBlock,
    ToolCallDeltaChunk,
    ToolResultBlock,
    ToolSchema,
    ToolSource,
    UnknownBlock,
    UnknownSource,
    UsageChunk,
    UserSource,
)


def _obj(value: JsonValue, what: str) -> JsonObject:
    if not isinstance(value, dict):
        raise ValueError(f"{what}: expected an object, got {type(value).__name__}")
    return value


def _str(obj: JsonObject, key: str, what: str) -> str:
    v = obj.get(key)
    if not isinstance(v, str):
        raise ValueError(f"{what}.{key}: expected a string")
    return v


def _int(obj: JsonObject, key: str, what: str) -> int:
    v = obj.get(key)
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError(f"{what}.{key}: expected an integer")
    return v


def _opt_int(obj: JsonObject, key: str, what: str) -> int | None:
    return None if obj.get(key) is None else _int(obj, key, what)


def _opt_str(obj: JsonObject, key: str, what: str) -> str | None:
    return None if obj.get(key) is None else _str(obj, key, what)


def _list(value: JsonValue, what: str) -> list[JsonValue]:
    if not isinstance(value, list):
        raise ValueError(f"{what}: expected an array")
    return value


# --- blocks ----------------------------------------------------------------------------------------


def block_to_json(block: ContentBlock) -> JsonObject:
    match block:
        case TextBlock():
            if block.unclosed_reasoning:
                return {"type": "text", "text": block.text, "unclosedReasoning": True}
            return {"type": "text", "text": block.text}
        case ReasoningBlock():
            out: JsonObject = {"type": "reasoning", "text": block.text}
            if block.signature is not None:
                out["signature"] = block.signature
            if block.redacted is not None:
                out["redacted"] = block.redacted
            return out
        case ToolCallBlock():
            call: JsonObject = {"type": "tool-call", "id": block.id, "name": block.name}
            call["arguments"] = block.arguments
            if block.recovered_from is not None:
                call["recoveredFrom"] = block.recovered_from
            return call
        case ToolResultBlock():
            res: JsonObject = {
                "type": "tool-result",
                "toolCallId": block.tool_call_id,
                "content": [block_to_json(b) for b in block.content],
            }
            if block.is_error:
                res["isError"] = True
            return res
        case ImageBlock():
            image: JsonObject = {
                "type": "image",
                "sha256": block.sha256,
                "mediaType": block.media_type,
                "width": block.width,
                "height": block.height,
                "bytes": block.size,
                "description": block.description,
            }
            if block.reduction is not None:
                image["reduction"] = block.reduction
            return image
        case UnknownBlock():
            return dict(block.raw)


def block_from_json(value: JsonValue) -> ContentBlock:
    obj = _obj(value, "block")
    tag = obj.get("type")
    match tag:
        case "text":
            return TextBlock(
                text=_str(obj, "text", "text block"),
                unclosed_reasoning=obj.get("unclosedReasoning") is True,
            )
        case "reasoning":
            return ReasoningBlock(
                text=_str(obj, "text", "reasoning block"),
                signature=_opt_str(obj, "signature", "reasoning block"),
                redacted=_opt_str(obj, "redacted", "reasoning block"),
            )
        case "tool-call":
            return ToolCallBlock(
                id=CallId(_str(obj, "id", "tool-call block")),
                name=_str(obj, "name", "tool-call block"),
                arguments=_str(obj, "arguments", "tool-call block"),
                recovered_from=_opt_str(obj, "recoveredFrom", "tool-call block"),
            )
        case "tool-result":
            return ToolResultBlock(
                tool_call_id=CallId(_str(obj, "toolCallId", "tool-result block")),
                content=tuple(
                    block_from_json(b) for b in _list(obj.get("content"), "tool-result.content")
                ),
                is_error=obj.get("isError") is True,
            )
        case "image":
            return ImageBlock(
                sha256=_str(obj, "sha256", "image block"),
                media_type=_str(obj, "mediaType", "image block"),
                width=_int(obj, "width", "image block"),
                height=_int(obj, "height", "image block"),
                size=_int(obj, "bytes", "image block"),
                description=_str(obj, "description", "image block"),
                reduction=_opt_str(obj, "reduction", "image block"),
            )
        case str():
            return UnknownBlock(type=tag, raw=dict(obj))
        case _:
            raise ValueError("block.type: expected a string")


# --- sources and messages -------------------------------------------------------------------------


def source_to_json(source: MessageSource) -> JsonObject:
    match source:
        case UserSource():
            out_user: JsonObject = {"kind": "user"}
            for k, v in source.extra.items():
                if k != "kind":
                    out_user[k] = v
            return out_user
        case PluginSource():
            out: JsonObject = {"kind": "plugin", "plugin": source.plugin}
            if source.form is not None:
                out["form"] = dict(source.form)
            for k, v in source.extra.items():
                if k not in out:
                    out[k] = v
            return out
        case ModelSource():
            m: JsonObject = {"kind": "model", "provider": source.provider, "model": source.model}
            if source.replay_state is not None:
                m["replayState"] = source.replay_state
            return m
        case ToolSource():
            return {"kind": "tool", "callId": source.call_id}
        case UnknownSource():
            return dict(source.raw)


def source_from_json(value: JsonValue) -> MessageSource:
    obj = _obj(value, "source")
    kind = obj.get("kind")
    match kind:
        case "user":
            return UserSource(extra={k: v for k, v in obj.items() if k != "kind"})
        case "plugin":
            form = obj.get("form")
            return PluginSource(
                plugin=_str(obj, "plugin", "plugin source"),
                form=_obj(form, "plugin source.form") if form is not None else None,
                extra={k: v for k, v in obj.items() if k not in ("kind", "plugin", "form")},
            )
        case "model":
            return ModelSource(
                provider=_str(obj, "provider", "model source"),
                model=_str(obj, "model", "model source"),
                replay_state=obj.get("replayState"),
            )
        case "tool":
            return ToolSource(call_id=CallId(_str(obj, "callId", "tool source")))
        case str():
            return UnknownSource(kind=kind, raw=dict(obj))
        case _:
            raise ValueError("source.kind: expected a string")


def message_to_json(message: Message) -> JsonObject:
    return {
        "id": message.id,
        "role": message.role,
        "content": [block_to_json(b) for b in message.content],
        "source": source_to_json(message.source),
    }


_ROLES: tuple[Role, ...] = ("system", "user", "assistant")


def message_from_json(value: JsonValue) -> Message:
    obj = _obj(value, "message")
    role = obj.get("role")
    if role not in _ROLES:
        raise ValueError(f"message.role: expected one of {_ROLES}, got {role!r}")
    return Message(
        id=MessageId(_str(obj, "id", "message")),
        role=role,
        content=tuple(block_from_json(b) for b in _list(obj.get("content"), "message.content")),
        source=source_from_json(obj.get("source")),
    )


# --- usage, failures, finish ----------------------------------------------------------------------


def usage_to_json(usage: TokenUsage) -> JsonObject:
    out: JsonObject = {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens}
    if usage.cache_read_tokens is not None:
        out["cacheReadTokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens is not None:
        out["cacheWriteTokens"] = usage.cache_write_tokens
    if usage.reasoning_tokens is not None:
        out["reasoningTokens"] = usage.reasoning_tokens
    if usage.via is not None:
        out["via"] = usage.via
    return out


def usage_from_json(value: JsonValue) -> TokenUsage:
    obj = _obj(value, "usage")
    return TokenUsage(
        input_tokens=_int(obj, "inputTokens", "usage"),
        output_tokens=_int(obj, "outputTokens", "usage"),
        cache_read_tokens=_opt_int(obj, "cacheReadTokens", "usage"),
        cache_write_tokens=_opt_int(obj, "cacheWriteTokens", "usage"),
        reasoning_tokens=_opt_int(obj, "reasoningTokens", "usage"),
        via=via if isinstance(via := obj.get("via"), str) else None,
    )


def failure_to_json(failure: LlmFailure) -> JsonObject:
    out: JsonObject = {"message": failure.message, "code": failure.code}
    if failure.status is not None:
        out["status"] = failure.status
    if failure.provider_retry_after_ms is not None:
        out["providerRetryAfterMs"] = failure.provider_retry_after_ms
    if failure.request_id is not None:
        out["requestId"] = failure.request_id
    if failure.detail is not None:
        out["detail"] = failure.detail
    return out


def failure_from_json(value: JsonValue) -> LlmFailure:
    obj = _obj(value, "failure")
    return LlmFailure(
        message=_str(obj, "message", "failure"),
        code=_str(obj, "code", "failure"),
        status=_opt_int(obj, "status", "failure"),
        provider_retry_after_ms=_opt_int(obj, "providerRetryAfterMs", "failure"),
        request_id=_opt_str(obj, "requestId", "failure"),
        detail=_opt_str(obj, "detail", "failure"),
    )


def finish_to_json(reason: FinishReason) -> JsonObject:
    match reason:
        case FinishStop() | FinishToolCalls() | FinishMaxTokens():
            return {"kind": reason.kind}
        case FinishAborted() | FinishError():
            return {"kind": reason.kind, "failure": failure_to_json(reason.failure)}
        case FinishUnknown():
            return dict(reason.raw)


def finish_from_json(value: JsonValue) -> FinishReason:
    obj = _obj(value, "finish reason")
    match obj.get("kind"):
        case "stop":
            return FinishStop()
        case "tool-calls":
            return FinishToolCalls()
        case "max-tokens":
            return FinishMaxTokens()
        case "aborted":
            return FinishAborted(failure=failure_from_json(obj.get("failure")))
        case "error":
            return FinishError(failure=failure_from_json(obj.get("failure")))
        case str() as kind:
            return FinishUnknown(kind=kind, raw=dict(obj))
        case _:
            raise ValueError("finish reason.kind: expected a string")


# --- chunks ----------------------------------------------------------------------------------------


def chunk_to_json(chunk: StreamChunk) -> JsonObject:
    match chunk:
        case TextDeltaChunk():
            return {"type": "text-delta", "index": chunk.index, "text": chunk.text}
        case ReasoningDeltaChunk():
            return {"type": "reasoning-delta", "index": chunk.index, "text": chunk.text}
        case ToolCallDeltaChunk():
            out: JsonObject = {"type": "tool-call-delta", "index": chunk.index, "id": chunk.id}
            if chunk.name is not None:
                out["name"] = chunk.name
            out["argumentsDelta"] = chunk.arguments_delta
            return out
        case BlockStartChunk():
            return {"type": "block-start", "index": chunk.index, "blockType": chunk.block_type}
        case BlockEndChunk():
            return {"type": "block-end", "index": chunk.index, "block": block_to_json(chunk.block)}
        case UsageChunk():
            return {"type": "usage", "usage": usage_to_json(chunk.usage)}
        case FinishChunk():
            fin: JsonObject = {"type": "finish", "reason": finish_to_json(chunk.reason)}
            if chunk.replay_state is not None:
                fin["replayState"] = chunk.replay_state
            return fin
        case _:
            assert_never(chunk)


def chunk_from_json(value: JsonValue) -> StreamChunk:
    obj = _obj(value, "chunk")
    match obj.get("type"):
        case "text-delta":
            return TextDeltaChunk(
                index=_int(obj, "index", "chunk"), text=_str(obj, "text", "chunk")
            )
        case "reasoning-delta":
            return ReasoningDeltaChunk(
                index=_int(obj, "index", "chunk"), text=_str(obj, "text", "chunk")
            )
        case "tool-call-delta":
            return ToolCallDeltaChunk(
                index=_int(obj, "index", "chunk"),
                id=CallId(_str(obj, "id", "chunk")),
                name=_opt_str(obj, "name", "chunk"),
                arguments_delta=_str(obj, "argumentsDelta", "chunk"),
            )
        case "block-start":
            return BlockStartChunk(
                index=_int(obj, "index", "chunk"), block_type=_str(obj, "blockType", "chunk")
            )
        case "block-end":
            return BlockEndChunk(
                index=_int(obj, "index", "chunk"), block=block_from_json(obj.get("block"))
            )
        case "usage":
            return UsageChunk(usage=usage_from_json(obj.get("usage")))
        case "finish":
            rs = obj.get("replayState")
            return FinishChunk(
                reason=finish_from_json(obj.get("reason")),
                replay_state=_obj(rs, "finish.replayState") if rs is not None else None,
            )
        case other:
            raise ValueError(f"chunk.type: unknown stream chunk type {other!r}")


def tool_schema_to_json(schema: ToolSchema) -> JsonObject:
    return {"name": schema.name, "description": schema.description, "parameters": schema.parameters}


def tool_schema_from_json(value: JsonValue) -> ToolSchema:
    obj = _obj(value, "tool schema")
    return ToolSchema(
        name=_str(obj, "name", "tool schema"),
        description=_str(obj, "description", "tool schema"),
        parameters=_obj(obj.get("parameters"), "tool schema.parameters"),
    )


def _passback(value: JsonValue) -> ReasoningPassback | None:
    match value:
        case None | "send" | "omit":
            return value
        case _:
            raise ValueError(f"config.reasoningPassback: expected 'send' or 'omit', got {value!r}")


def config_to_json(config: LlmCallConfig) -> JsonObject:
    out: JsonObject = {"provider": config.provider, "model": config.model}
    if config.reasoning_effort is not None:
        out["reasoningEffort"] = config.reasoning_effort
    if config.temperature is not None:
        out["temperature"] = config.temperature
    if config.seed is not None:
        out["seed"] = config.seed
    if config.max_tokens is not None:
        out["maxTokens"] = config.max_tokens
    if config.stop is not None:
        out["stop"] = list(config.stop)
    if config.reasoning_passback is not None:
        out["reasoningPassback"] = config.reasoning_passback
    if config.images is not None:
        out["images"] = config.images
    return out


def config_from_json(value: JsonValue) -> LlmCallConfig:
    obj = _obj(value, "config")
    temp = obj.get("temperature")
    if temp is not None and (not isinstance(temp, int | float) or isinstance(temp, bool)):
        raise ValueError("config.temperature: expected a number")
    stop = obj.get("stop")
    return LlmCallConfig(
        provider=_str(obj, "provider", "config"),
        model=_str(obj, "model", "config"),
        reasoning_effort=_opt_str(obj, "reasoningEffort", "config"),
        temperature=float(temp) if temp is not None else None,
        seed=_opt_int(obj, "seed", "config"),
        max_tokens=_opt_int(obj, "maxTokens", "config"),
        stop=tuple(str(s) for s in _list(stop, "config.stop")) if stop is not None else None,
        reasoning_passback=_passback(obj.get("reasoningPassback")),
        images=_opt_bool(obj, "images", "config"),
    )


def _opt_bool(obj: JsonObject, key: str, what: str) -> bool | None:
    value = obj.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise ValueError(f"{what}.{key}: expected true or false")
