"""``MessagesProvider``: the ``Provider`` for the Anthropic Messages API (and compatible endpoints,
such as DeepSeek's ``/anthropic``).

One ``stream()`` call is one HTTP attempt: resolve the key per request, serialise, POST
``{base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version``, then read events through
``MessagesEventReader`` and ``MessagesTranslator``, yielding after each network read. Non-2xx answers
(529 ``overloaded_error`` included) raise ``LlmError`` with a classified failure; an ``event: error``
inside the stream ends it with ``finish{error}``. It never retries. Cancellation closes the response
(and so the connection) in ``finally``, at once.

The httpx client is injected or created on first use and then owned (``aclose()``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import replace
from types import MappingProxyType

import httpx

from dsh_kernel.llm.catalogue import ANTHROPIC_EFFORTS, ANTHROPIC_MODELS
from dsh_kernel.llm.provider import PreparedCall, apply_defaults
from dsh_kernel.llm.providers.anthropic.serialize import DEFAULT_MAX_TOKENS, serialize_request
from dsh_kernel.llm.providers.anthropic.sse import MessagesEventReader
from dsh_kernel.llm.providers.anthropic.translate import MessagesTranslator
from dsh_kernel.llm.providers.anthropic.wire import ANTHROPIC_VERSION
from dsh_kernel.llm.providers.base import (
    USER_AGENT,
    KeySource,
    ProviderDefaults,
    Timeouts,
    model_info_for,
)
from dsh_kernel.llm.providers.transport import (
    HttpClient,
    iter_body,
    one_by_one,
    open_stream,
    request_body,
)
from dsh_kernel.llm.types import (
    FinishChunk,
    FinishError,
    GenerateRequest,
    LlmCallConfig,
    ModelInfo,
    StreamChunk,
)

ANTHROPIC_MODEL = ModelInfo(
    context_window=200_000,
    default_max_tokens=DEFAULT_MAX_TOKENS,
    reasoning_efforts=ANTHROPIC_EFFORTS,
    reasoning_style="adaptive",
)
"""Metadata for a model id the catalogue does not list (ids are configuration): no prices, and no
default effort (no thinking setting is sent: the model's own default applies). A newer model is
assumed to think the Claude 5.x way (adaptive)."""

CATALOGUE: Mapping[str, ModelInfo] = MappingProxyType(
    {m: replace(i, default_max_tokens=DEFAULT_MAX_TOKENS) for m, i in ANTHROPIC_MODELS.items()}
)
"""``dsh_kernel.llm.catalogue``'s Anthropic models, asking for the adapter's default output cap."""


class MessagesProvider:
    """A ``Provider`` speaking the Messages API to ``base_url``."""

    def __init__(
        self,
        *,
        id: str,
        base_url: str,
        api_key: KeySource,
        client: httpx.AsyncClient | None = None,
        defaults: ProviderDefaults | None = None,
        timeouts: Timeouts | None = None,
        default_model: str | None = None,
        name: str = "Anthropic",
    ) -> None:
        self._id = id
        self.default_model = default_model
        """The configured model id; ``Agent`` uses it when given no ``model``."""
        self._url = base_url.rstrip("/") + "/v1/messages"
        self._name = name
        self._api_key = api_key
        self._defaults = defaults or ProviderDefaults()
        self._timeouts = timeouts or Timeouts()
        self._client = HttpClient(client, self._timeouts)

    def __repr__(self) -> str:
        return f"MessagesProvider(id={self._id!r}, url={self._url!r})"

    @property
    def id(self) -> str:
        return self._id

    def model_info(self, model: str) -> ModelInfo:
        return model_info_for(model, CATALOGUE, ANTHROPIC_MODEL, self._defaults)

    def prepare_call(self, config: LlmCallConfig) -> PreparedCall:
        return apply_defaults(config, self.model_info(config.model))

    async def aclose(self) -> None:
        """Close the httpx client if this provider created it."""
        await self._client.aclose()

    async def stream(self, request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        async for chunk in one_by_one(self.stream_reads(request)):
            yield chunk

    async def stream_reads(
        self, request: GenerateRequest
    ) -> AsyncGenerator[list[StreamChunk], None]:
        """``stream``'s chunks a network read at a time: every chunk one read completed, in order
        (never an empty list). The agent's answer loop logs each read's chunks in one call."""
        key = self._api_key()
        body = serialize_request(request, self._defaults, self.model_info(request.model))
        http_request = self._client.get().build_request(
            "POST",
            self._url,
            content=request_body(body),
            headers={
                "x-api-key": key,
                "anthropic-version": ANTHROPIC_VERSION,
                "content-type": "application/json",
                "accept": "text/event-stream",
                "user-agent": USER_AGENT,
            },
            timeout=self._client.timeout,
        )
        name = self._name
        deadline = asyncio.get_running_loop().time() + self._timeouts.deadline_s
        response = await open_stream(
            self._client.get(), http_request, deadline=deadline, provider=name, secret=key
        )
        try:
            reader = MessagesEventReader(provider=name, secret=key)
            translator = MessagesTranslator(provider=name, secret=key)
            async for data in iter_body(
                response,
                deadline=deadline,
                idle_s=self._timeouts.idle_s,
                provider=name,
                secret=key,
            ):
                for event in reader.feed(data):
                    translator.feed(event)
                    if translator.stopped or translator.failure is not None:
                        break
                failure = translator.failure
                if failure is not None:
                    translator.out.append(FinishChunk(reason=FinishError(failure=failure)))
                out = translator.out
                if out:
                    translator.out = []
                    yield out
                if failure is not None or translator.stopped:
                    return
            translator.end_of_stream(bytes_seen=reader.bytes_seen)  # raises: a cut stream
        finally:
            await response.aclose()
