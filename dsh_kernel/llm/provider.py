"""The provider seam: what the agent needs from a model backend.

A provider streams ``StreamChunk``s for a ``GenerateRequest`` and fails in exactly two ways
(SPINE §2.4): it *raises* ``LlmError`` for transport or protocol faults, or it *ends* with
``finish{error|aborted}`` for in-band faults. ``stream_call`` folds the first way into the second, so
the agent loop only ever sees finish chunks. Cancellation is asyncio cancellation of the consuming task
and propagates (providers close their HTTP stream on ``CancelledError``).

One call is one attempt: providers never retry; retry is agent policy (``dsh_kernel.agent.retry``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, replace
from typing import Final, Protocol, runtime_checkable

from dsh_kernel.errors import LlmError, UsageError, error_chain
from dsh_kernel.llm.types import (
    FinishChunk,
    FinishError,
    GenerateRequest,
    HeldText,
    LlmCallConfig,
    LlmFailure,
    ModelInfo,
    ReasoningPassback,
    StreamChunk,
)

REPLAY_PROVIDER_ID: Final = "replay"
"""The id ``store.replay.ReplayProvider`` answers as, so the one its requests log: a turn whose
requests carry it was replayed (the views and ``%%sql`` draw it so that a re-run saves the same)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedCall:
    """A call config with the adapter's defaults applied. ``adapter_defaults`` names the fields the
    adapter filled in (``"reasoningEffort"``, ``"maxTokens"``) so the next step can drop them and let
    the current route re-apply its own."""

    config: LlmCallConfig
    adapter_defaults: frozenset[str] = frozenset()


@runtime_checkable
class Provider(Protocol):
    """A model backend. ``id`` is what the log records as ``config.provider``."""

    @property
    def id(self) -> str: ...

    def model_info(self, model: str) -> ModelInfo:
        """Advisory metadata for ``model``; unknown ids get an empty ``ModelInfo``."""
        ...

    def prepare_call(self, config: LlmCallConfig) -> PreparedCall:
        """Fill adapter defaults; raise ``LlmError(UNSUPPORTED_REASONING_EFFORT)`` for an effort the
        route does not support (never clamp)."""
        ...

    def stream(self, request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        """Stream one attempt. Must end with exactly one ``finish`` chunk or raise ``LlmError``."""
        ...


@runtime_checkable
class StreamsReads(Protocol):
    """A provider that can hand its chunks over a network read at a time (``stream_call_reads``)."""

    def stream_reads(self, request: GenerateRequest) -> AsyncIterator[list[StreamChunk] | HeldText]:
        """``stream``'s chunks, one non-empty list per read, in order; the same ending and errors.
        A ``HeldText`` note may come between reads (answer text held back: ``llm.types.HeldText``)."""
        ...


@runtime_checkable
class LearnsPassback(Protocol):
    """A provider whose servers may want reasoning back, or refuse it, and say so with a 400
    (the generic OpenAI-compatible profile; the agent's ``agent.passback`` asks it)."""

    def passback_retry(
        self, failure: LlmFailure, current: ReasoningPassback | None
    ) -> ReasoningPassback | None:
        """The dialect to retry ``failure`` with (``current`` is the one it was sent with);
        ``None``: the failure is not about passback, or there is nothing else to try."""
        ...


class BaseProvider:
    """Defaults for providers with no model catalogue and no adapter defaults."""

    def model_info(self, model: str) -> ModelInfo:
        return ModelInfo()

    def prepare_call(self, config: LlmCallConfig) -> PreparedCall:
        return PreparedCall(config=config)


def apply_defaults(
    config: LlmCallConfig, info: ModelInfo, *, efforts_required: bool = False
) -> PreparedCall:
    """Shared helper for adapters: fill ``max_tokens``, ``reasoning_effort`` and ``images`` from
    ``info``."""
    filled: set[str] = set()
    if config.max_tokens is None and info.default_max_tokens is not None:
        config = replace(config, max_tokens=info.default_max_tokens)
        filled.add("maxTokens")
    if config.reasoning_effort is None and info.default_reasoning_effort is not None:
        config = replace(config, reasoning_effort=info.default_reasoning_effort)
        filled.add("reasoningEffort")
    elif (
        config.reasoning_effort is not None
        and info.reasoning_efforts
        and config.reasoning_effort not in info.reasoning_efforts
    ) or (efforts_required and config.reasoning_effort is not None and not info.reasoning_efforts):
        raise LlmError(
            LlmFailure(
                code="UNSUPPORTED_REASONING_EFFORT",
                message=(
                    f"reasoning effort {config.reasoning_effort!r} is not supported by "
                    f"{config.provider}:{config.model}; supported: "
                    f"{', '.join(info.reasoning_efforts) or 'none'}"
                    + (f" ({info.reasoning_note})" if info.reasoning_note else "")
                ),
            )
        )
    if config.images is None and info.images:
        # only a model the catalogue knows to take images gets them; absent means text stand-ins
        config = replace(config, images=True)
        filled.add("images")
    return PreparedCall(config=config, adapter_defaults=frozenset(filled))


async def stream_call(
    provider: Provider, request: GenerateRequest
) -> AsyncGenerator[StreamChunk, None]:
    """Run one provider attempt, turning a raised failure into a terminal ``finish{error}`` chunk.

    ``CancelledError`` propagates. A provider that ends without a finish chunk gets none added: the
    assembler treats a missing finish as ``stop`` (the grammar checker in tests flags it).
    """
    stream = provider.stream(request)
    try:
        async for chunk in stream:
            yield chunk
    except UsageError:
        raise  # a consumer/test bug, not a provider failure
    except Exception as exc:
        yield _folded(exc)
    finally:
        # A consumer that stops early (cancel, error) closes the HTTP stream at once instead of
        # leaving it to async-generator finalisation.
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


async def stream_call_reads(
    provider: Provider, request: GenerateRequest
) -> AsyncGenerator[Sequence[StreamChunk] | HeldText, None]:
    """``stream_call``'s chunks in order, grouped as they arrived: a ``StreamsReads`` provider's one
    network read at a time (with its ``HeldText`` notes), any other provider's one chunk at a time.
    The same failures folded the same way (the folded ``finish{error}`` comes alone); the agent's
    answer loop logs each group in one call."""
    if isinstance(provider, StreamsReads):
        stream = provider.stream_reads(request)
        singles = None
    else:
        singles = provider.stream(request)
        stream = None
    try:
        if stream is not None:
            async for chunks in stream:
                yield chunks
        elif singles is not None:  # no extra generator on the way: one chunk is one group
            async for chunk in singles:
                yield (chunk,)
    except UsageError:
        raise
    except Exception as exc:
        yield (_folded(exc),)
    finally:
        aclose = getattr(stream if stream is not None else singles, "aclose", None)
        if aclose is not None:
            await aclose()


def _folded(exc: Exception) -> FinishChunk:
    """The ``finish{error}`` a provider's raised failure becomes."""
    if isinstance(exc, LlmError):
        return FinishChunk(reason=FinishError(failure=exc.failure))
    return FinishChunk(
        reason=FinishError(
            failure=LlmFailure(code="UNKNOWN", message=f"provider failed: {error_chain(exc)}")
        )
    )
