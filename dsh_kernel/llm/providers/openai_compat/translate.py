"""Chat Completions chunk objects → ``StreamChunk``s (SPINE §2.4, §2.8; WIRE §2.3, §3.3, §5).

``ChatTranslator.feed(obj)`` appends to ``out`` the chunks one wire object yields; the adapter drains
``out`` after each network read. Blocks are indexed by first appearance — at most one reasoning block,
one text block, and one block per tool call:

- non-empty ``reasoning_content`` (or ``reasoning``, as Ollama and newer vLLM name it) opens the
  reasoning block, then ``reasoning-delta`` — the empty first thinking chunk opens nothing;
- non-empty ``content`` opens the text block, then ``text-delta``;
- each tool-call fragment opens or continues a tool-call block, then ``tool-call-delta``.

``block-end``s (in opening order), ``usage`` (the last seen) and ``finish`` are held back until
``finish()`` — called at ``[DONE]``, or at end of stream once a finish reason has arrived (a soft
end: some servers never send ``[DONE]``). End of stream before any finish reason raises
``STREAM_CLOSED`` (``EMPTY_RESPONSE`` if the body was empty). An ``{"error": …}`` object in the
stream sets ``failure``; the adapter then ends with ``finish{error}`` and reads no further.

Finish mapping: ``stop`` → stop; ``tool_calls`` → tool-calls; ``length`` → max-tokens;
``insufficient_system_resource`` (DeepSeek cut generation for capacity) → ``error{SERVER}`` so the
retry policy treats it as the transient server fault it is; anything else → ``error{REASON}``;
``stop`` or none with no block at all → ``error{EMPTY_RESPONSE}`` (``detail: model-stopped`` when a
stop reason came: the model ended its turn at once; an empty body is ``detail: empty-body``). Tool calls streamed under
``stop``/none count as ``tool-calls`` (Ollama, Gemini's layer).

Tool-call fragments are keyed by ``index``; without one (old Ollama) by ``id``, else they continue the
latest call. A fragment that repeats an index with a different id starts a new call (proxies that
send every parallel call at index 0). Missing ids are synthesised (``call_<hex>``) and kept even if
an id turns up later (a call's id never changes mid-stream); arguments sent as an object are
re-encoded to JSON text.

The answer filters, for a profile that asks for them (the generic one; ``ChatProfile``):
``think_tags`` sends ``content`` through ``ThinkTags`` first (``<think>`` becomes reasoning; at a
bare ``</think>`` the answer block so far is closed empty and its text re-sent as reasoning), then
``text_tool_calls`` sends the answer through ``TextToolCalls`` with the request's tool names: held
text is shown when it is decided to be text, and an answer that is tool calls becomes tool-call
blocks at ``finish()`` (``block-start``, one ``tool-call-delta`` with the whole arguments, and a
``block-end`` whose block carries ``recovered_from``), so the finish is ``tool-calls``. Held text is
released as text when the server sends tool calls of its own or the finish reason is not a stop,
or when it outgrows ``TextToolCalls``' bounds (its characters, and its seconds on ``clock``);
``held`` says how much is held now (the adapter reports it: ``llm.types.HeldText``). An attempt
that fails in-band or is cut drops what it held, as a retry drops its partial blocks.
A stream that ends (with a stop) inside a ``<think>`` never closed, with no answer and no call,
makes that reasoning the answer: the reasoning block is closed empty, as an unsaid answer block is,
and a text block with the whole reasoning follows, its ``block-end`` block marked
``unclosed_reasoning`` — what the user sees is the model's answer in the history too, so the next
request sends it as the assistant's text (reasoning alone would go back as an empty message).
A cut (``length``) keeps it as reasoning: the model did not choose to stop there.
``record_reasoning_field`` puts ``{"reasoningField": "reasoning_content" | "reasoning"}`` in the
finish chunk's replay state when the server streamed reasoning in a field, for the serializer's
passback rule (``serialize.py``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import replace

from pydantic import ValidationError

from dsh_kernel.errors import LlmError
from dsh_kernel.ids import CallId
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.providers.openai_compat.text_tools import TextToolCalls, call_id
from dsh_kernel.llm.providers.openai_compat.think_tags import ThinkTags
from dsh_kernel.llm.providers.openai_compat.wire import WireUsage
from dsh_kernel.llm.providers.transport import error_info, inband_failure
from dsh_kernel.llm.types import (
    BlockEndChunk,
    BlockStartChunk,
    ContentBlock,
    FinishChunk,
    FinishError,
    FinishMaxTokens,
    FinishReason,
    FinishStop,
    FinishToolCalls,
    LlmFailure,
    ReasoningBlock,
    StreamChunk,
    TextBlock,
    TokenUsage,
    ToolCallBlock,
    ToolCallDeltaChunk,
    UsageChunk,
    empty_body,
    model_stopped,
    reasoning_delta,
    text_delta,
)


class _Open:
    """A block under assembly. ``parts`` are joined once, at the end (no quadratic ``+=``)."""

    __slots__ = (
        "call_id",
        "ended",
        "index",
        "kind",
        "name",
        "parts",
        "recovered_from",
        "synthetic_id",
        "unclosed_reasoning",
    )

    def __init__(
        self, index: int, kind: str, call_id: str = "", synthetic_id: bool = False
    ) -> None:
        self.index = index
        self.kind = kind
        self.parts: list[str] = []
        self.call_id = call_id
        self.name: str | None = None
        self.synthetic_id = synthetic_id
        self.recovered_from: str | None = None
        self.ended = False  # closed early (an answer block that turned out to be reasoning)
        self.unclosed_reasoning = False

    def block(self) -> ContentBlock:
        text = "".join(self.parts)
        if self.kind == "text":
            return TextBlock(text=text, unclosed_reasoning=self.unclosed_reasoning)
        if self.kind == "reasoning":
            return ReasoningBlock(text=text)
        return ToolCallBlock(
            id=CallId(self.call_id),
            name=self.name or "",
            arguments=text,
            recovered_from=self.recovered_from,
        )


def map_usage(raw: JsonObject) -> TokenUsage | None:
    """Wire usage → disjoint counts (cache reads and writes out of input; reasoning inside output).

    ``None`` when the object is not a usage we can read, or says 0 prompt and 0 completion tokens (a
    proxy's placeholder: no request has an empty prompt): usage is then unknown, never zero.
    """
    try:
        u = WireUsage.model_validate(raw)
    except ValidationError:
        return None
    if u.prompt_tokens == 0 and u.completion_tokens == 0:
        return None  # a real request always has prompt tokens: 0/0 is a count nobody made
    prompt = u.prompt_tokens_details
    cache_read = (
        prompt.cached_tokens
        if prompt is not None and prompt.cached_tokens is not None
        else u.prompt_cache_hit_tokens
    )
    cache_write = prompt.cache_write_tokens if prompt is not None else None
    details = u.completion_tokens_details
    return TokenUsage(
        input_tokens=max(0, u.prompt_tokens - (cache_read or 0) - (cache_write or 0)),
        output_tokens=u.completion_tokens,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=details.reasoning_tokens if details is not None else None,
    )


def map_finish(reason: str | None, *, has_blocks: bool, has_tools: bool) -> FinishReason:
    """The finish reason for a ``finish_reason`` (no content is ``EMPTY_RESPONSE``)."""
    if has_tools and reason in (None, "stop", "tool_calls"):
        return FinishToolCalls()
    if reason in (None, "stop", "tool_calls"):
        if not has_blocks:
            if reason is None:  # no stop reason either: nothing says the model chose this
                return FinishError(
                    failure=LlmFailure(code="EMPTY_RESPONSE", message="the model returned nothing")
                )
            return FinishError(failure=model_stopped())
        return FinishStop()
    if reason == "length":
        return FinishMaxTokens()
    code = "SERVER" if reason == "insufficient_system_resource" else reason.upper()
    return FinishError(failure=LlmFailure(code=code, message=f"model stopped: {reason}"))


def _arguments(value: JsonValue) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


class ChatTranslator:
    """Stateful translation of one response. Not reusable."""

    __slots__ = (
        "_by_id",
        "_by_wire_index",
        "_call_seed",
        "_calls",
        "_clock",
        "_filtered",
        "_finish_reason",
        "_last_tool",
        "_next_index",
        "_offered",
        "_order",
        "_provider",
        "_reasoning",
        "_reasoning_field",
        "_record_field",
        "_response_id",
        "_secret",
        "_text",
        "_think",
        "_usage",
        "failure",
        "finish_seen",
        "out",
        "usage_via",
    )

    def __init__(
        self,
        *,
        provider: str,
        secret: str | None,
        text_tool_calls: Collection[str] = (),
        think_tags: bool = False,
        record_reasoning_field: bool = False,
        call_seed: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``text_tool_calls``: the offered tool names whose calls are recovered from the answer
        text (none: no recovery); ``call_seed``: what recovered call ids are derived from besides
        the response id (the adapter gives the length of the history); ``clock``: seconds, read
        only while text is held (``TextToolCalls``' time bound)."""
        self._provider = provider
        self._secret = secret
        self._offered = text_tool_calls
        self._calls = TextToolCalls(text_tool_calls) if text_tool_calls else None
        self._think = ThinkTags() if think_tags else None
        self._filtered = self._calls is not None or self._think is not None
        self._record_field = record_reasoning_field
        self._reasoning_field: str | None = None
        self._response_id = ""
        self._call_seed = call_seed
        self._clock = clock
        self.out: list[StreamChunk] = []
        self._next_index = 0
        self._order: list[_Open] = []
        self._text: _Open | None = None
        self._reasoning: _Open | None = None
        self._by_wire_index: dict[int, _Open] = {}
        self._by_id: dict[str, _Open] = {}
        self._last_tool: _Open | None = None
        self._finish_reason: str | None = None
        self._usage: JsonObject | None = None
        self.usage_via: str | None = None
        """The proxy the answer came through (``transport.proxy_of``): marked on its usage."""
        self.finish_seen = False
        self.failure: LlmFailure | None = None

    @property
    def held(self) -> int:
        """Answer characters held back now as a possible tool call (0: none)."""
        calls = self._calls
        return calls.held if calls is not None else 0

    def _open(self, kind: str, call_id: str = "", synthetic: bool = False) -> _Open:
        block = _Open(self._next_index, kind, call_id, synthetic)
        self._next_index += 1
        self._order.append(block)
        self.out.append(BlockStartChunk(index=block.index, block_type=kind))
        return block

    def feed(self, obj: JsonObject) -> None:
        # The per-token hot path: exact-type checks and one pass, no helper calls for text.
        choices = obj.get("choices")
        if choices and type(choices) is list:
            for choice in choices:
                if type(choice) is not dict or choice.get("index"):
                    continue  # only the first choice (index 0, or no index) is ours
                delta = choice.get("delta")
                if delta and type(delta) is dict:
                    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                    if reasoning and type(reasoning) is str:
                        block = self._reasoning
                        if block is None:
                            block = self._reasoning = self._open("reasoning")
                            self._reasoning_field = (
                                "reasoning_content"
                                if delta.get("reasoning_content")
                                else "reasoning"
                            )
                        block.parts.append(reasoning)
                        self.out.append(reasoning_delta(block.index, reasoning))
                    content = delta.get("content")
                    if content and type(content) is str:
                        calls, think, block = self._calls, self._think, self._text
                        if block is not None and (
                            not self._filtered
                            or (
                                self._response_id
                                and (calls is None or calls.passing)
                                and (think is None or think.plain(content))
                            )
                        ):  # more of an answer decided as text (``_content``'s fast path, inlined)
                            block.parts.append(content)
                            self.out.append(text_delta(block.index, content))
                        elif self._filtered:
                            self._content(content, obj)
                        else:
                            self._text_delta(content)
                    calls = delta.get("tool_calls")
                    if calls and type(calls) is list:
                        for call in calls:
                            if type(call) is dict:
                                self._tool_fragment(call)
                reason = choice.get("finish_reason")
                if reason and type(reason) is str:
                    self._finish_reason = reason
                    self.finish_seen = True
        usage = obj.get("usage")
        if usage and type(usage) is dict:
            self._usage = usage
        if obj.get("error"):
            info = error_info(obj)
            if info is not None:
                self.failure = inband_failure(info, provider=self._provider, secret=self._secret)

    # -- the answer filters (module docstring) -----------------------------------------------------

    def _content(self, content: str, obj: JsonObject) -> None:
        if not self._response_id:
            rid = obj.get("id")
            self._response_id = rid if isinstance(rid, str) else ""
        think = self._think
        calls = self._calls
        if (calls is None or calls.passing) and (think is None or think.plain(content)):
            self._text_delta(content)  # decided answer text: the fast path
            return
        if think is None:
            self._answer(content)
            return
        for kind, piece in think.feed(content):
            self._piece(kind, piece)

    def _piece(self, kind: str, piece: str) -> None:
        if kind == "answer":
            self._answer(piece)
        elif kind == "reasoning":
            block = self._text
            if block is not None:  # a think block after some answer: that answer stands, closed
                block.ended = True
                self.out.append(BlockEndChunk(index=block.index, block=block.block()))
                self._text = None
            self._reasoning_delta(piece)
        else:  # "unsay": the answer so far was reasoning; it is re-sent as such next
            if self._calls is not None:
                self._calls = TextToolCalls(self._offered)
            block = self._text
            if block is not None:
                block.ended = True
                block.parts.clear()  # unsaid: it is no answer
                self.out.append(BlockEndChunk(index=block.index, block=TextBlock(text="")))
                self._text = None

    def _answer(self, text: str) -> None:
        calls = self._calls
        if calls is not None and not calls.passing:
            text = calls.feed(text, self._clock())
        if text:
            self._text_delta(text)

    def _text_delta(self, text: str) -> None:
        block = self._text
        if block is None:
            block = self._text = self._open("text")
        block.parts.append(text)
        self.out.append(text_delta(block.index, text))

    def _reasoning_delta(self, text: str) -> None:
        block = self._reasoning
        if block is None:
            block = self._reasoning = self._open("reasoning")
        block.parts.append(text)
        self.out.append(reasoning_delta(block.index, text))

    def _release_held(self) -> None:
        calls = self._calls
        if calls is not None and not calls.passing:
            held = calls.release()
            if held:
                self._text_delta(held)

    def _settle(self) -> None:
        """At the end of the answer: flush the filters; recovered calls become tool-call blocks;
        reasoning never closed, with nothing else said, becomes the answer (module docstring)."""
        think = self._think
        if think is not None:
            for kind, piece in think.finish():
                self._piece(kind, piece)
        self._settle_calls()
        if think is not None and think.unclosed and self._finish_reason in (None, "stop"):
            self._reasoning_as_answer()

    def _reasoning_as_answer(self) -> None:
        block = self._reasoning
        if block is None or any(
            b.kind == "tool-call" or (b.kind == "text" and "".join(b.parts).strip())
            for b in self._order
        ):
            return
        text = "".join(block.parts)
        if not text.strip():
            return
        block.ended = True
        self.out.append(BlockEndChunk(index=block.index, block=ReasoningBlock(text="")))
        self._reasoning = None
        answer = self._text
        if answer is None:
            answer = self._text = self._open("text")
        answer.unclosed_reasoning = True
        answer.parts.append(text)
        self.out.append(text_delta(answer.index, text))

    def _settle_calls(self) -> None:
        calls = self._calls
        if calls is None or calls.passing:
            return
        native = any(b.kind == "tool-call" for b in self._order)
        if native or self._finish_reason not in (None, "stop", "tool_calls"):
            self._release_held()
            return
        text, recovered = calls.finish()
        if text:
            self._text_delta(text)
        seed = f"{self._response_id}\x00{self._call_seed}"
        for n, call in enumerate(recovered):
            block = self._open("tool-call", call_id(seed, n, call.source))
            block.name = call.name
            block.recovered_from = call.source
            block.parts.append(call.arguments)
            self.out.append(
                ToolCallDeltaChunk(
                    index=block.index,
                    id=CallId(block.call_id),
                    name=call.name,
                    arguments_delta=call.arguments,
                )
            )

    # -- native tool calls --------------------------------------------------------------------------

    def _tool_fragment(self, call: JsonObject) -> None:
        if self._calls is not None:
            self._release_held()  # held text came first: it stays first
        wire_index = call.get("index")
        raw_id = call.get("id")
        call_id = raw_id if isinstance(raw_id, str) and raw_id else None
        fn = call.get("function")
        fn = fn if isinstance(fn, dict) else {}
        raw_name = fn.get("name")
        name = raw_name if isinstance(raw_name, str) and raw_name else None
        fragment = _arguments(fn.get("arguments"))

        block: _Open | None
        if isinstance(wire_index, int) and not isinstance(wire_index, bool):
            block = self._by_wire_index.get(wire_index)
        elif call_id is not None:
            block = self._by_id.get(call_id)
        elif name is None:
            block = self._last_tool
        else:
            block = None
        if (
            block is not None
            and call_id is not None
            and call_id != block.call_id
            and not block.synthetic_id
        ):
            block = None  # a new id at a known index: a new call (proxies that reuse index 0)
        if block is None:
            synthetic = call_id is None
            block = self._open(
                "tool-call", call_id or f"call_{uuid.uuid4().hex[:24]}", synthetic=synthetic
            )
            self._by_id[block.call_id] = block
            if isinstance(wire_index, int):
                self._by_wire_index[wire_index] = block
        self._last_tool = block
        if name is not None and block.name is None:
            block.name = name
        block.parts.append(fragment)
        self.out.append(
            ToolCallDeltaChunk(
                index=block.index,
                id=CallId(block.call_id),
                name=block.name,
                arguments_delta=fragment,
            )
        )

    def finish(self) -> None:
        """Emit the held chunks: every ``block-end``, then ``usage`` if any, then ``finish``."""
        if self._filtered:
            self._settle()
        has_tools = False
        for block in self._order:
            has_tools = has_tools or block.kind == "tool-call"
            if not block.ended:
                self.out.append(BlockEndChunk(index=block.index, block=block.block()))
        if self._usage is not None:
            usage = map_usage(self._usage)
            if usage is not None:
                if self.usage_via is not None:
                    usage = replace(usage, via=self.usage_via)
                self.out.append(UsageChunk(usage=usage))
        field = self._reasoning_field
        self.out.append(
            FinishChunk(
                reason=map_finish(
                    self._finish_reason, has_blocks=bool(self._order), has_tools=has_tools
                ),
                replay_state={"reasoningField": field}
                if self._record_field and field is not None
                else None,
            )
        )

    def end_of_stream(self, *, bytes_seen: int) -> None:
        """The body ended without ``[DONE]``: a soft end after a finish reason, else a fault."""
        if self.finish_seen:
            self.finish()
            return
        if bytes_seen == 0:
            raise LlmError(empty_body(f"{self._provider} sent an empty body"))
        raise LlmError(
            LlmFailure(
                code="STREAM_CLOSED",
                message=f"{self._provider} stream ended before the model finished",
            )
        )
