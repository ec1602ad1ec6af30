"""``ChatCompletionsProvider``: the ``Provider`` for OpenAI-compatible servers, DeepSeek included.

One ``stream()`` call is one HTTP attempt: resolve the key (per request, from the ``KeySource``),
serialise, POST ``{base_url}/chat/completions``, then read the event stream through
``ChatEventReader`` and ``ChatTranslator``, yielding chunks after each network read
(``stream_reads`` yields them as one list per read: ``llm.provider.stream_call_reads``). It raises
``LlmError`` for transport and protocol faults (``transport.py`` has the mapping) and ends with
``finish{error}`` for faults the server reports in-band. It never retries.

Held text: while the translator holds answer text that may be a tool call written as text
(``text_tools``), ``stream_reads`` hands over a ``HeldText`` note after the read — at once for the
first, then at most every ``HELD_NOTE_INTERVAL_S`` while the count grows, and one of 0 characters
at once when nothing is held any more (released, decided, or turned into reasoning by a bare
``</think>``) — so that the agent can log it and a view can say a call is being written. ``stream``
leaves the notes out.

Cancellation: a ``CancelledError`` in the consuming task surfaces at the pending read; ``finally``
closes the response, which closes the connection at once, so no further tokens are read (or billed).

A server that ignores ``stream: true`` and answers with one ``application/json`` completion is
accepted: its message is fed to the translator as if it were a single delta.

An empty stream — HTTP 200 and not one byte — is, with ``profile.probe_empty_stream``, sent once more
*without* streaming (the same body, ``stream: false``, the output cap 1) to read the server's real
error: llama-cpp-python answers an over-long prompt so when streaming, and with a proper 400
``context_length_exceeded`` otherwise (it then closes the stream's keep-alive connection, so a probe
that meets the dead socket is sent once more, on a new one). The attempt then ends with that error (classified as any
answer is), or with ``EMPTY_RESPONSE`` (``detail: empty-body``) saying what the probe saw. The probe is a diagnosis, not a
retry: its answer is never shown.

``discover_context_window`` (with ``profile.discover_window``) asks the server for a model's window
(``llm.providers.discovery``), with this provider's key, on its own host only; with the same profile
``count_request_tokens`` has the server's tokenizer count a request's text and, once per model, its
chat template's share measured (``llm.providers.tokenizer``; ``llm.calibration`` turns it into the
token meter's calibration). A usage that came through a proxy naming itself in its headers
(``transport.proxy_of``: LiteLLM) is marked with it (``TokenUsage.via``).

The httpx client is injected (tests, connection sharing) or created on first use and then owned:
``aclose()`` closes an owned client and leaves an injected one alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import replace
from typing import Final, cast

import httpx

from dsh_kernel.errors import LlmError
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.provider import PreparedCall, apply_defaults
from dsh_kernel.llm.providers.base import (
    USER_AGENT,
    KeySource,
    ProviderDefaults,
    Timeouts,
    model_info_for,
)
from dsh_kernel.llm.providers.discovery import DiscoveredWindow, discover_window
from dsh_kernel.llm.providers.openai_compat.profiles import ChatProfile, passback_for
from dsh_kernel.llm.providers.openai_compat.serialize import serialize_request
from dsh_kernel.llm.providers.openai_compat.sse import ChatEventReader
from dsh_kernel.llm.providers.openai_compat.translate import ChatTranslator
from dsh_kernel.llm.providers.tokenizer import PromptCount, ServerTokenizer
from dsh_kernel.llm.providers.transport import (
    HttpClient,
    error_info,
    inband_failure,
    iter_body,
    json_object,
    malformed,
    one_by_one,
    open_stream,
    proxy_of,
    read_all,
    request_body,
)
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
    empty_body,
)

HELD_NOTE_INTERVAL_S: Final = 0.2
"""Seconds between two ``HeldText`` notes of one response: each is a logged event, and a view
redraws at most 20 times a second anyway; five updates a second keep the count visibly live."""


class ChatCompletionsProvider:
    """A ``Provider`` speaking Chat Completions to ``base_url`` in the dialect of ``profile``."""

    def __init__(
        self,
        *,
        id: str,
        base_url: str,
        profile: ChatProfile,
        api_key: KeySource,
        client: httpx.AsyncClient | None = None,
        defaults: ProviderDefaults | None = None,
        timeouts: Timeouts | None = None,
        default_model: str | None = None,
    ) -> None:
        self._id = id
        self._base_url = base_url
        self.default_model = default_model
        """The configured model id; ``Agent`` uses it when given no ``model``."""
        self._url = base_url.rstrip("/") + profile.path
        self._profile = profile
        self._api_key = api_key
        self._defaults = defaults or ProviderDefaults()
        self._timeouts = timeouts or Timeouts()
        self._client = HttpClient(client, self._timeouts)
        self._tokenizer = ServerTokenizer(base_url)

    def __repr__(self) -> str:
        return f"ChatCompletionsProvider(id={self._id!r}, url={self._url!r}, profile={self._profile.name!r})"

    @property
    def id(self) -> str:
        return self._id

    @property
    def profile(self) -> ChatProfile:
        return self._profile

    @property
    def endpoint(self) -> str:
        return self._base_url

    @property
    def discovers_window(self) -> bool:
        return self._profile.discover_window

    @property
    def counts_tokens(self) -> bool:
        """Whether the server may count tokens (a local server's profile: the one that discovers
        its window), and was not found to have no tokenizer."""
        return self._profile.discover_window and not self._tokenizer.absent

    async def count_request_tokens(self, request: GenerateRequest) -> PromptCount | None:
        """The text of ``request``'s body counted by the server's tokenizer, with what its chat
        template adds measured once per model (``llm.providers.tokenizer``), or ``None``."""
        if not self.counts_tokens:
            return None
        body = serialize_request(request, self._profile, self._defaults)
        headers = {"user-agent": USER_AGENT}
        with contextlib.suppress(LlmError):  # no key: ask without one
            headers["authorization"] = f"Bearer {self._api_key()}"
        return await self._tokenizer.count_prompt(
            self._client.get(),
            cast("JsonObject", body),
            chat_url=self._url,
            model=request.model,
            headers=headers,
        )

    async def discover_context_window(self, model: str) -> DiscoveredWindow | None:
        """The window the server reports for ``model`` (``None`` without ``discover_window``)."""
        if not self._profile.discover_window:
            return None
        headers = {"user-agent": USER_AGENT}
        with contextlib.suppress(LlmError):  # no key: ask without one
            headers["authorization"] = f"Bearer {self._api_key()}"
        return await discover_window(self._client.get(), self._base_url, model, headers=headers)

    def model_info(self, model: str) -> ModelInfo:
        p = self._profile
        return model_info_for(model, p.catalogue, p.fallback, self._defaults)

    def prepare_call(self, config: LlmCallConfig) -> PreparedCall:
        if config.images and not self._profile.image_parts:
            # configuration (DSH_VISION=on) cannot make a server take parts it refuses
            prepared = apply_defaults(replace(config, images=False), self.model_info(config.model))
            return replace(prepared, adapter_defaults=prepared.adapter_defaults | {"images"})
        return apply_defaults(config, self.model_info(config.model))

    def passback_retry(
        self, failure: LlmFailure, current: ReasoningPassback | None
    ) -> ReasoningPassback | None:
        """The passback dialect to retry ``failure`` with, when this profile learns one and the
        failure is a 400 naming ``reasoning_content`` the other way (``profiles.passback_for``)."""
        if not self._profile.passback_dialect:
            return None
        wanted = passback_for(failure)
        return wanted if wanted != current else None

    async def aclose(self) -> None:
        """Close the httpx client if this provider created it."""
        await self._client.aclose()

    async def stream(self, request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        async for chunk in one_by_one(self.stream_reads(request)):
            yield chunk

    async def stream_reads(
        self, request: GenerateRequest
    ) -> AsyncGenerator[list[StreamChunk] | HeldText, None]:
        """``stream``'s chunks a network read at a time: every chunk one read completed, in order
        (never an empty list), and a ``HeldText`` note after a read while answer text is held
        (module docstring). The agent's answer loop logs each read's chunks in one call."""
        key = self._api_key()
        body = serialize_request(request, self._profile, self._defaults)
        http_request = self._post(body, key, accept="text/event-stream")
        name = self._profile.name
        clock = asyncio.get_running_loop().time
        deadline = clock() + self._timeouts.deadline_s
        response = await open_stream(
            self._client.get(), http_request, deadline=deadline, provider=name, secret=key
        )
        try:
            p = self._profile
            translator = ChatTranslator(
                provider=name,
                secret=key,
                text_tool_calls=frozenset(t.name for t in request.tools)
                if p.text_tool_calls
                else (),
                think_tags=p.think_tags,
                record_reasoning_field=p.passback_dialect,
                call_seed=str(len(request.messages)),
                clock=clock,
            )
            translator.usage_via = proxy_of(response.headers)
            content_type = response.headers.get("content-type", "")
            if content_type.startswith("application/json"):
                raw = await read_all(
                    response,
                    deadline=deadline,
                    idle_s=self._timeouts.idle_s,
                    provider=name,
                    secret=key,
                )
                yield _whole_completion(raw, translator, name, key)
                return
            reader = ChatEventReader(provider=name, secret=key)
            feed = translator.feed
            noted, next_note = 0, 0.0  # the last held count reported, and when the next may be
            async for data in iter_body(
                response,
                deadline=deadline,
                idle_s=self._timeouts.idle_s,
                provider=name,
                secret=key,
            ):
                for obj in reader.feed(data):
                    feed(obj)
                    if translator.failure is not None:
                        break
                failure = translator.failure
                if failure is not None:
                    translator.out.append(FinishChunk(reason=FinishError(failure=failure)))
                elif reader.done:
                    translator.finish()
                out = translator.out
                if out:
                    translator.out = []
                    yield out
                if failure is not None or reader.done:
                    return
                held = translator.held
                if held != noted and (held == 0 or not noted or clock() >= next_note):
                    noted = held
                    next_note = clock() + HELD_NOTE_INTERVAL_S
                    yield HeldText(chars=held)
            if reader.bytes_seen == 0 and self._profile.probe_empty_stream:
                await response.aclose()
                failure = await self._probe(dict(body), key, deadline)
                yield [FinishChunk(reason=FinishError(failure=failure))]
                return
            translator.end_of_stream(bytes_seen=reader.bytes_seen)
            if translator.out:
                yield translator.out
        finally:
            await response.aclose()

    def _post(self, body: Mapping[str, object], key: str, *, accept: str) -> httpx.Request:
        """The chat-completions POST of ``body``, with this provider's key and headers."""
        return self._client.get().build_request(
            "POST",
            self._url,
            content=request_body(body),
            headers={
                "authorization": f"Bearer {key}",
                "content-type": "application/json",
                "accept": accept,
                "user-agent": USER_AGENT,
            },
            timeout=self._client.timeout,
        )

    async def _probe(self, body: dict[str, object], key: str, deadline: float) -> LlmFailure:
        """After an empty stream: the same request without streaming, read for the real error."""
        name = self._profile.name
        empty = f"{name} sent an empty stream (HTTP 200, no bytes)"
        body["stream"] = False
        body.pop("stream_options", None)
        body[self._profile.max_tokens_field] = 1
        request = self._post(body, key, accept="application/json")
        try:
            try:
                response = await open_stream(
                    self._client.get(), request, deadline=deadline, provider=name, secret=key
                )
            except LlmError as exc:
                if exc.failure.code != "TRANSPORT":
                    raise
                # llama-cpp-python drops the keep-alive connection its empty stream came on just
                # after the pool took it back: the first try can meet the dead socket.
                response = await open_stream(
                    self._client.get(), request, deadline=deadline, provider=name, secret=key
                )
        except LlmError as exc:
            failure = exc.failure
            detail = failure.message.removeprefix(f"{name} ")
            return replace(failure, message=f"{empty}; asked again without streaming: {detail}")
        try:
            raw = await read_all(
                response,
                deadline=deadline,
                idle_s=self._timeouts.idle_s,
                provider=name,
                secret=key,
            )
        except LlmError:
            raw = b""
        finally:
            await response.aclose()
        obj = json_object(raw)
        info = error_info(obj) if obj is not None and obj.get("error") else None
        if info is not None:
            failure = inband_failure(info, provider=name, secret=key)
            detail = failure.message.removeprefix(f"{name} ")
            return replace(failure, message=f"{empty}; asked again without streaming: {detail}")
        return empty_body(
            f"{empty}; the same request without streaming was answered, so the server "
            "could not stream it — its log says why"
        )


def _whole_completion(
    raw: bytes, translator: ChatTranslator, provider: str, secret: str
) -> list[StreamChunk]:
    """A non-streaming completion body → the chunks its stream would have produced."""
    # DeepSeek pads queued non-streaming answers with blank lines; strip() handles that.
    try:
        obj = json.loads(raw.strip() or b"null")
    except ValueError:
        raise malformed(raw, provider, secret, "not JSON") from None
    if not isinstance(obj, dict):
        raise malformed(raw, provider, secret, "not an object")
    body: JsonObject = obj  # pyright: ignore[reportUnknownVariableType]
    if body.get("error"):
        info = error_info(body)
        if info is not None:
            return [
                FinishChunk(
                    reason=FinishError(
                        failure=inband_failure(info, provider=provider, secret=secret)
                    )
                )
            ]
    choices = body.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(first, dict):
        raise malformed(raw, provider, secret, "no choices")
    message = first.get("message")
    translator.feed(
        {
            "choices": [
                {
                    "index": 0,
                    "delta": message if isinstance(message, dict) else {},
                    "finish_reason": first.get("finish_reason") or "stop",
                }
            ],
            "usage": body.get("usage"),
        }
    )
    translator.finish()
    return translator.out
