"""Public test fakes: scripted providers, chunk builders and a clock (SPINE §8.1).

Tests fake only the edge: the model provider and the clock. These fakes stand in for them while
everything downstream (assembler, log, agent loop, tools) stays real. They are public so that users of
the kernel can test their own tools and prompts the same way.

- ``ScriptedProvider`` plays one *script entry* per ``stream()`` call and records every request.
  An entry is one of:

  * a sequence of ``StreamChunk`` — streamed as is;
  * a callable ``(GenerateRequest) -> Iterable[StreamChunk] | AsyncIterable[StreamChunk]``;
  * ``hang(prefix, late_ms=0)`` — stream ``prefix``, then wait until the consuming task is
    cancelled; with ``late_ms > 0`` keep running that long after the cancellation before
    re-raising it (a provider that notices the abort late);
  * an ``LlmError`` — raised before any chunk (a transport failure);
  * ``raise_after(chunks, error)`` — stream ``chunks``, then raise ``error``.

  Every stream yields to the event loop before each chunk (``await asyncio.sleep(0)``), so a
  cancellation can land mid-stream. Running out of script records the request, then raises
  ``UsageError`` ("script exhausted after N requests") at the ``stream()`` call: a test that makes
  more model calls than it scripted is a broken test, so the error is never turned into a model
  failure. ``stream_call`` lets it propagate (no ``finish`` chunk, no retry); an ``Agent`` ends that
  turn with ``turn/end{error: {code: "USAGE", message}}``, keeps the exception as ``last_error``
  and goes idle. ``assert_consumed()`` and ``remaining`` say how much of the script was used.
  ``cancellations`` counts the streams whose cancellation landed inside the provider (mid-stream
  or while hanging).
- ``FunctionProvider`` computes every response from the request with one function.
- ``FakeClock`` is both clocks an ``Agent`` (or a ``Session``) takes: called, it returns epoch
  milliseconds that advance by ``step_ms`` on every read, so event times are distinct and
  predictable (``Agent(clock=…)``, ``Session(clock=…)``); its ``sleep`` is the retry backoff's
  sleep (``Agent(sleep=clock.sleep)``): it returns at once, records the seconds in ``slept`` and
  moves the clock on by that long. A negative or non-finite sleep raises ``UsageError`` (the real
  backoff never asks for one).
- Builders (``text_response``, ``tool_call_response``, ``tool_calls_response``,
  ``max_tokens_response``, ``error_response``) return well-formed chunk lists: blocks at consecutive
  indices from 0 (reasoning, then text, then tool calls), each opened by ``block-start`` and closed
  by ``block-end`` with the full block, then an optional ``usage`` and one ``finish``. Default tool
  call ids are ``call_<24 hex digits>`` from a fresh UUID4, so ids never collide across the steps of a
  session; pass ``call_id`` when a test needs to know the id in advance. Dict arguments are encoded
  as compact JSON (``json.dumps(args, separators=(",", ":"), ensure_ascii=False)``).

Example::

    from dsh_kernel.testing import ScriptedProvider, hang, text_response, tool_call_response

    provider = ScriptedProvider(
        [
            tool_call_response("read_file", {"path": "a.txt"}, call_id="c1"),
            text_response("Done.", pieces=3),
            hang(),
        ]
    )
    # ... run the agent with ``provider`` ...
    assert provider.requests[1].messages[-1].source.kind == "tool"
    provider.assert_consumed()

    clock = FakeClock()
    agent = Agent(provider=provider, model="m", clock=clock, sleep=clock.sleep)
    # ... a provider that fails twice with a retryable error, then answers ...
    assert len(clock.slept) == 2  # the backoff asked for two waits; none was waited
"""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from dsh_kernel.errors import LlmError, UsageError
from dsh_kernel.ids import CallId
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.provider import BaseProvider
from dsh_kernel.llm.types import (
    BlockEndChunk,
    BlockStartChunk,
    FinishChunk,
    FinishError,
    FinishMaxTokens,
    FinishReason,
    FinishStop,
    FinishToolCalls,
    GenerateRequest,
    LlmFailure,
    ModelInfo,
    ReasoningBlock,
    ReasoningDeltaChunk,
    StreamChunk,
    TextBlock,
    TextDeltaChunk,
    TokenUsage,
    ToolCallBlock,
    ToolCallDeltaChunk,
    UsageChunk,
)

# ---------------------------------------------------------------------------------------------------
# Script entries

ResponseFn: TypeAlias = Callable[
    [GenerateRequest], Iterable[StreamChunk] | AsyncIterable[StreamChunk]
]

DEFAULT_HANG_PREFIX: tuple[StreamChunk, ...] = (
    BlockStartChunk(index=0, block_type="text"),
    TextDeltaChunk(index=0, text="partial"),
)
"""What ``hang()`` streams before waiting: an open text block reading ``"partial"``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Hang:
    """Stream ``prefix``, then wait for cancellation (see ``hang``)."""

    kind: Literal["hang"] = "hang"
    prefix: tuple[StreamChunk, ...] = DEFAULT_HANG_PREFIX
    late_ms: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RaiseAfter:
    """Stream ``chunks``, then raise ``error`` (see ``raise_after``)."""

    kind: Literal["raise-after"] = "raise-after"
    chunks: tuple[StreamChunk, ...]
    error: Exception


ScriptEntry: TypeAlias = Sequence[StreamChunk] | ResponseFn | Hang | RaiseAfter | LlmError


def hang(prefix: Iterable[StreamChunk] = DEFAULT_HANG_PREFIX, *, late_ms: int = 0) -> Hang:
    """An entry that streams ``prefix`` and then waits until the consuming task is cancelled.

    With ``late_ms > 0`` the stream keeps running for ``late_ms`` milliseconds after the
    cancellation before re-raising it, like a provider that notices the abort late.
    """
    if late_ms < 0:
        raise UsageError(f"hang: late_ms must be >= 0, got {late_ms}")
    return Hang(prefix=tuple(prefix), late_ms=late_ms)


def raise_after(chunks: Iterable[StreamChunk], error: Exception) -> RaiseAfter:
    """An entry that streams ``chunks`` and then raises ``error`` (e.g. ``LlmError`` mid-stream)."""
    return RaiseAfter(chunks=tuple(chunks), error=error)


# ---------------------------------------------------------------------------------------------------
# The clock


class FakeClock:
    """Epoch milliseconds that move only when read or slept: ``Agent(clock=c, sleep=c.sleep)``.

    Each call returns the time ``step_ms`` after the previous one (the first read returns
    ``start + step_ms``), so every event gets a distinct, predictable time. ``await sleep(s)``
    returns at once, appends ``s`` to ``slept`` and moves the time on by ``s`` seconds.
    """

    def __init__(self, start: int = 1_700_000_000_000, *, step_ms: int = 1) -> None:
        if step_ms < 0:
            raise UsageError(f"FakeClock: step_ms must be >= 0, got {step_ms}")
        self.now = start
        """The time last read (or slept to), epoch ms."""
        self.step_ms = step_ms
        self.slept: list[float] = []
        """Every ``sleep`` asked for, in seconds, in order."""

    def __call__(self) -> int:
        self.now += self.step_ms
        return self.now

    async def sleep(self, seconds: float) -> None:
        """Record ``seconds`` and move the time on by as long, without waiting."""
        if not math.isfinite(seconds) or seconds < 0:
            raise UsageError(f"FakeClock.sleep: seconds must be finite and >= 0, got {seconds}")
        self.slept.append(seconds)
        self.now += round(seconds * 1000)
        await asyncio.sleep(0)  # a real sleep yields to the loop; so does this one


# ---------------------------------------------------------------------------------------------------
# Providers


class _RecordingProvider(BaseProvider):
    """Shared parts: the id, the advisory model info, and request recording."""

    def __init__(self, *, id: str, info: ModelInfo | None) -> None:
        self._id = id
        self._info = info
        self.requests: list[GenerateRequest] = []
        self.cancellations = 0
        """How many streams were cancelled while running (any entry kind)."""

    @property
    def id(self) -> str:
        return self._id

    def model_info(self, model: str) -> ModelInfo:
        return self._info if self._info is not None else ModelInfo()

    async def _play(
        self, entry: ScriptEntry, request: GenerateRequest
    ) -> AsyncIterator[StreamChunk]:
        try:
            if isinstance(entry, LlmError):
                raise entry
            if isinstance(entry, Hang):
                async for chunk in _paced(entry.prefix):
                    yield chunk
                await _hang_until_cancelled(entry.late_ms)
            elif isinstance(entry, RaiseAfter):
                async for chunk in _paced(entry.chunks):
                    yield chunk
                raise entry.error
            elif callable(entry):
                result = entry(request)
                if isinstance(result, AsyncIterable):
                    async for chunk in result:
                        await asyncio.sleep(0)
                        yield chunk
                else:
                    async for chunk in _paced(result):
                        yield chunk
            else:
                async for chunk in _paced(entry):
                    yield chunk
        except asyncio.CancelledError:
            self.cancellations += 1
            raise


class ScriptedProvider(_RecordingProvider):
    """A provider that plays one script entry per ``stream()`` call, in order."""

    def __init__(
        self,
        script: Iterable[ScriptEntry] = (),
        *,
        id: str = "scripted",
        info: ModelInfo | None = None,
    ) -> None:
        super().__init__(id=id, info=info)
        self._script: deque[ScriptEntry] = deque(script)
        """The entries not played yet (a played one is let go: a long script holds no chunks it
        already streamed)."""
        self._next = 0
        """How many entries were played."""

    def push(self, *entries: ScriptEntry) -> None:
        """Append entries to the end of the script."""
        self._script.extend(entries)

    @property
    def remaining(self) -> int:
        """How many entries have not been consumed yet."""
        return len(self._script)

    def assert_consumed(self) -> None:
        """Fail the test unless every script entry was used."""
        if self.remaining:
            raise AssertionError(
                f"ScriptedProvider: {self.remaining} script entr"
                f"{'y' if self.remaining == 1 else 'ies'} not consumed after "
                f"{len(self.requests)} requests"
            )

    def stream(self, request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        """Record ``request`` and stream the next entry. Raises ``UsageError`` when exhausted."""
        self.requests.append(request)
        if not self._script:
            raise UsageError(f"ScriptedProvider: script exhausted after {self._next} requests")
        entry = self._script.popleft()
        self._next += 1
        return self._play(entry, request)


class FunctionProvider(_RecordingProvider):
    """A provider whose every response is ``fn(request)`` (a sync or async chunk iterable)."""

    def __init__(self, fn: ResponseFn, *, id: str = "function", info: ModelInfo | None = None):
        super().__init__(id=id, info=info)
        self._fn = fn

    def stream(self, request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        self.requests.append(request)
        return self._play(self._fn, request)


async def _paced(chunks: Iterable[StreamChunk]) -> AsyncIterator[StreamChunk]:
    for chunk in chunks:
        # Let the loop run between chunks so cancellation can land mid-stream, as with a socket.
        await asyncio.sleep(0)
        yield chunk


async def _hang_until_cancelled(late_ms: int) -> None:
    try:
        await asyncio.get_running_loop().create_future()
    except asyncio.CancelledError:
        if late_ms > 0:
            await asyncio.sleep(late_ms / 1000)
        raise


# ---------------------------------------------------------------------------------------------------
# Chunk builders


def new_call_id() -> CallId:
    """A fresh default call id, ``call_<24 hex digits>``."""
    return CallId(f"call_{uuid.uuid4().hex[:24]}")


def _encode_args(arguments: JsonObject | str) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)


def _split(text: str, pieces: int) -> list[str]:
    if pieces < 1:
        raise UsageError(f"pieces must be >= 1, got {pieces}")
    bounds = [len(text) * k // pieces for k in range(pieces + 1)]
    return [text[bounds[k] : bounds[k + 1]] for k in range(pieces)]


class _Builder:
    """Lays blocks out at consecutive indices."""

    def __init__(self) -> None:
        self.chunks: list[StreamChunk] = []
        self.index = 0

    def reasoning(self, text: str) -> None:
        i = self.index
        self.chunks += [
            BlockStartChunk(index=i, block_type="reasoning"),
            ReasoningDeltaChunk(index=i, text=text),
            BlockEndChunk(index=i, block=ReasoningBlock(text=text)),
        ]
        self.index += 1

    def text(self, text: str, *, pieces: int = 1, close: bool = True) -> None:
        i = self.index
        self.chunks.append(BlockStartChunk(index=i, block_type="text"))
        self.chunks += [TextDeltaChunk(index=i, text=p) for p in _split(text, pieces)]
        if close:
            self.chunks.append(BlockEndChunk(index=i, block=TextBlock(text=text)))
        self.index += 1

    def tool_call(
        self, name: str, arguments: JsonObject | str, call_id: str | None, *, close: bool = True
    ) -> None:
        i = self.index
        cid = CallId(call_id) if call_id is not None else new_call_id()
        raw = _encode_args(arguments)
        first, second = _split(raw, 2)
        self.chunks += [
            BlockStartChunk(index=i, block_type="tool-call"),
            ToolCallDeltaChunk(index=i, id=cid, name=name, arguments_delta=first),
        ]
        if close:
            self.chunks += [
                ToolCallDeltaChunk(index=i, id=cid, arguments_delta=second),
                BlockEndChunk(index=i, block=ToolCallBlock(id=cid, name=name, arguments=raw)),
            ]
        self.index += 1

    def finish(self, reason: FinishReason, usage: TokenUsage | None) -> list[StreamChunk]:
        if usage is not None:
            self.chunks.append(UsageChunk(usage=usage))
        self.chunks.append(FinishChunk(reason=reason))
        return self.chunks


def text_response(
    text: str,
    *,
    reasoning: str | None = None,
    usage: TokenUsage | None = None,
    pieces: int = 1,
) -> list[StreamChunk]:
    """A plain answer: optional reasoning block, the text in exactly ``pieces`` deltas (some empty
    when the text is shorter than ``pieces``), optional usage, ``finish{stop}``."""
    b = _Builder()
    if reasoning is not None:
        b.reasoning(reasoning)
    b.text(text, pieces=pieces)
    return b.finish(FinishStop(), usage)


def tool_calls_response(
    calls: Sequence[tuple[str, JsonObject | str] | tuple[str, JsonObject | str, str]],
    *,
    text: str | None = None,
    reasoning: str | None = None,
    usage: TokenUsage | None = None,
) -> list[StreamChunk]:
    """One step with several tool calls ``(name, arguments[, call_id])``, each call's argument
    JSON split across two deltas, then ``finish{tool-calls}``."""
    b = _Builder()
    if reasoning is not None:
        b.reasoning(reasoning)
    if text is not None:
        b.text(text)
    for call in calls:
        b.tool_call(call[0], call[1], call[2] if len(call) == 3 else None)
    return b.finish(FinishToolCalls(), usage)


def tool_call_response(
    name: str,
    arguments: JsonObject | str,
    *,
    call_id: str | None = None,
    text: str | None = None,
    reasoning: str | None = None,
    usage: TokenUsage | None = None,
) -> list[StreamChunk]:
    """One tool call (argument JSON split across two deltas), then ``finish{tool-calls}``."""
    call = (name, arguments) if call_id is None else (name, arguments, call_id)
    return tool_calls_response([call], text=text, reasoning=reasoning, usage=usage)


def max_tokens_response(
    text: str,
    *,
    tool_call: tuple[str, JsonObject] | None = None,
    usage: TokenUsage | None = None,
) -> list[StreamChunk]:
    """A truncated answer: the text block, then (if ``tool_call``) a tool call cut off after the
    first half of its arguments and never closed, then ``finish{max-tokens}``."""
    b = _Builder()
    b.text(text)
    if tool_call is not None:
        b.tool_call(tool_call[0], tool_call[1], None, close=False)
    return b.finish(FinishMaxTokens(), usage)


def error_response(
    code: str,
    message: str,
    *,
    status: int | None = None,
    retry_after_ms: int | None = None,
    partial_text: str | None = None,
) -> list[StreamChunk]:
    """An in-band failure: optional partial text (an open block, never closed), then
    ``finish{error}`` carrying ``LlmFailure(code, message, status, retry_after_ms)``."""
    b = _Builder()
    if partial_text is not None:
        b.text(partial_text, close=False)
    failure = LlmFailure(
        code=code, message=message, status=status, provider_retry_after_ms=retry_after_ms
    )
    return b.finish(FinishError(failure=failure), None)


__all__ = [
    "DEFAULT_HANG_PREFIX",
    "FakeClock",
    "FunctionProvider",
    "Hang",
    "RaiseAfter",
    "ResponseFn",
    "ScriptEntry",
    "ScriptedProvider",
    "error_response",
    "hang",
    "max_tokens_response",
    "new_call_id",
    "raise_after",
    "text_response",
    "tool_call_response",
    "tool_calls_response",
]
