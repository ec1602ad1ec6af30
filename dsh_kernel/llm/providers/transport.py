"""One HTTP attempt over httpx, shared by the adapters: send, read with bounds, turn faults into failures.

``open_stream`` sends the request and returns the streaming response once it is a 2xx; any other
status has its body read and is raised as ``LlmError`` carrying a classified ``LlmFailure`` (status,
``Retry-After`` in ms, request id). ``iter_body`` yields the raw byte reads of the response under two
bounds (``base.Timeouts``): httpx's per-read timeout is the idle bound, and an asyncio timeout is
armed around a read only when the overall deadline is nearer than the idle bound, so the common path
pays nothing for it.

Failure mapping (SPINE §2.8): httpx timeouts and the deadline → ``TIMEOUT``; connect/DNS/TLS faults →
``TRANSPORT``; a peer that closes mid-body → ``STREAM_CLOSED``. ``CancelledError`` is never caught:
the caller's ``finally`` closes the response, which closes the connection at once.

Classification (``classify_http``) follows the harness table, with 402 and quota/balance/credit/
billing/spend-limit wording → ``QUOTA`` (never retried, even under a 429), and context-overflow
wording → ``CONTEXT_WINDOW_EXCEEDED``. Every message built here passes through ``redact`` so an API
key echoed by a server or proxy — whole, escaped, or cut short — never reaches a failure, a log line
or a repr: the request's own key is replaced exactly, and the process's redactor
(``dsh_kernel.llm.secrets``) scrubs every piece of every secret it knows.

``request_body`` is how the adapters encode what they send: the body with every known secret
redacted (a copy is made only when something is), as UTF-8 JSON. The key goes in a header only.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import re
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import cast

import httpx

from dsh_kernel.errors import LlmError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.providers.base import Timeouts
from dsh_kernel.llm.secrets import REDACTED, REDACTOR
from dsh_kernel.llm.types import HeldText, LlmFailure, StreamChunk

ERROR_BODY_LIMIT = 65536
"""Bytes of a non-2xx body we read; proxies can answer with whole HTML pages."""

_QUOTA = re.compile(
    r"insufficient[_ ]quota|exceeded your current quota|\bquota\b|insufficient[_ ]balance|"
    r"\bbalance\b|\bcredits?\b|billing|spend[_ ]limit",
    re.IGNORECASE,
)
_CONTEXT = re.compile(
    r"context_length_exceeded|exceed_context_size|maximum context length|"
    r"exceeds the available context size|prompt is too long|context.{0,20}(length|window|size)",
    re.IGNORECASE,
)
# In-band errors carry a type, not a status: the status each type stands for, for classification.
_TYPE_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "permission_denied": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "api_error": 500,
    "server_error": 500,
    "service_unavailable_error": 503,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def redact(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` and every piece of a known secret replaced (servers and proxies do
    echo keys, and cut their echo short)."""
    if secret:
        text = text.replace(secret, REDACTED)
    return REDACTOR.redact(text)


async def one_by_one(
    reads: AsyncGenerator[list[StreamChunk] | HeldText, None],
) -> AsyncIterator[StreamChunk]:
    """An adapter's ``stream`` from its ``stream_reads``: the chunks of each read in order (its
    ``HeldText`` notes left out); the reads are closed however the caller stops."""
    try:
        async for chunks in reads:
            if isinstance(chunks, HeldText):
                continue
            for chunk in chunks:
                yield chunk
    finally:
        await reads.aclose()


def request_body(body: Mapping[str, object]) -> bytes:
    """``body`` (a JSON object) as the UTF-8 JSON we send, with every known secret redacted (``body``
    itself is not changed). Compact: no space after ``,`` and ``:`` — a model server counts the bytes
    of the tool list on every request, and a small model pays for them in its context."""
    REDACTOR.refresh()
    scrubbed = REDACTOR.scrubbed(cast("JsonObject", body))
    return json.dumps(scrubbed, ensure_ascii=False, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorInfo:
    """What a provider said about an error, from whichever body shape it used."""

    message: str | None = None
    type: str | None = None
    code: str | None = None
    status_hint: int | None = None
    """An integer ``code`` that looks like an HTTP status (vLLM, llama.cpp)."""
    request_id: str | None = None

    @property
    def text(self) -> str:
        return " ".join(p for p in (self.type, self.code, self.message) if p)


def json_object(data: bytes | str) -> JsonObject | None:
    """``json.loads`` narrowed to an object: ``None`` for invalid JSON (nesting too deep for the
    decoder included) or any other value."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return cast("JsonObject", value) if isinstance(value, dict) else None


def _as_str(value: JsonValue) -> str | None:
    if isinstance(value, str):
        return value or None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def error_info(obj: JsonObject) -> ErrorInfo | None:
    """Read an error object in any shape we know (WIRE §2.7, §4.5, §5.11); ``None`` if it is none."""
    err = obj.get("error")
    if isinstance(err, str) and err:
        return ErrorInfo(message=err)
    if not isinstance(err, dict):
        if obj.get("object") == "error":  # vLLM (older): the error fields at the top level
            err = obj
        elif isinstance(detail := obj.get("detail"), str) and detail.lstrip().startswith("{"):
            inner = json_object(detail)  # a gateway that wrapped the body once more
            return error_info(inner) if inner is not None else ErrorInfo(message=detail)
        elif isinstance(detail, str) and detail:
            return ErrorInfo(message=detail)
        else:
            return None
    code_value = err.get("code")
    status_hint = (
        code_value
        if isinstance(code_value, int)
        and not isinstance(code_value, bool)
        and 100 <= code_value <= 599
        else None
    )
    details = err.get("details")
    detail_code = _as_str(details.get("error_code")) if isinstance(details, dict) else None
    code = _as_str(code_value) if status_hint is None else None
    return ErrorInfo(
        message=_as_str(err.get("message")),
        type=_as_str(err.get("type")),
        code=" ".join(c for c in (code, detail_code) if c) or None,
        status_hint=status_hint,
        request_id=_as_str(obj.get("request_id")),
    )


def parse_error_body(body: bytes) -> ErrorInfo:
    """An error body → ``ErrorInfo``; a non-JSON body becomes its (trimmed) text."""
    text = body.decode("utf-8", "replace").strip()
    obj = json_object(text)
    if obj is not None:
        info = error_info(obj)
        if info is not None:
            return info
    return ErrorInfo(message=text[:300] or None)


def classify_http(status: int, info: ErrorInfo) -> str:
    """The stable failure code for a non-2xx answer (SPINE §2.8)."""
    if status in (401, 403):
        return "AUTH"
    text = info.text
    if status == 402 or _QUOTA.search(text):
        return "QUOTA"
    if status == 429:
        return "RATE_LIMIT"
    if status in (400, 413, 422) and _CONTEXT.search(text):
        return "CONTEXT_WINDOW_EXCEEDED"
    if status in (400, 413, 422):
        return "INVALID_REQUEST"
    if status >= 500:
        return "SERVER"
    return f"HTTP_{status}"


def classify_inband(info: ErrorInfo) -> str:
    """The code for an error that arrived inside a 200 stream (no HTTP status of its own)."""
    status = info.status_hint or _TYPE_STATUS.get(info.type or "", 0)
    if status:
        return classify_http(status, info)
    if _CONTEXT.search(info.text):
        return "CONTEXT_WINDOW_EXCEEDED"
    if _QUOTA.search(info.text):
        return "QUOTA"
    return "SERVER"


def retry_after_ms(headers: httpx.Headers, *, now: float | None = None) -> int | None:
    """``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP-date) as positive milliseconds."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            ms = float(raw_ms)
        except ValueError:
            ms = 0.0
        if ms > 0 and ms < 1e12:
            return max(1, round(ms))
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not 0 < seconds < 1e9:
        return None
    return max(1, round(seconds * 1000))


def proxy_of(headers: httpx.Headers) -> str | None:
    """The proxy a response came through, when its headers name one: ``litellm`` (LiteLLM's proxy
    sends ``x-litellm-*`` headers on every answer: ``x-litellm-call-id``, ``x-litellm-version``,
    ``x-litellm-model-id``, …). A usage in such an answer may be the proxy's own count."""
    if any(name.lower().startswith("x-litellm-") for name in headers):
        return "litellm"
    return None


def request_id(headers: httpx.Headers) -> str | None:
    """The provider's request id from the response headers, if it sent one."""
    for name in ("x-request-id", "x-deepseek-request-id", "request-id"):
        value = headers.get(name)
        if value:
            return value
    return None


def http_failure(
    response: httpx.Response, body: bytes, *, provider: str, secret: str | None
) -> LlmFailure:
    """The failure for a non-2xx response whose body (possibly truncated) is ``body``."""
    status = response.status_code
    info = parse_error_body(body)
    detail = info.message or (response.reason_phrase or "no detail")
    return LlmFailure(
        code=classify_http(status, info),
        message=redact(f"{provider} API error (HTTP {status}): {detail}", secret),
        status=status if 100 <= status <= 599 else None,
        provider_retry_after_ms=retry_after_ms(response.headers),
        request_id=request_id(response.headers) or info.request_id,
    )


def inband_failure(info: ErrorInfo, *, provider: str, secret: str | None) -> LlmFailure:
    """The failure for an error object received inside a 200 stream."""
    return LlmFailure(
        code=classify_inband(info),
        message=redact(
            f"{provider} stream error: {info.message or info.text or 'unknown'}", secret
        ),
        request_id=info.request_id,
    )


def malformed(payload: bytes, provider: str, secret: str | None, why: str) -> LlmError:
    """``MALFORMED_RESPONSE`` quoting the start of the offending payload."""
    snippet = payload[:120].decode("utf-8", "replace")
    return LlmError(
        LlmFailure(
            code="MALFORMED_RESPONSE",
            message=redact(
                f"{provider} sent a malformed stream payload ({why}): {snippet}", secret
            ),
        )
    )


def _fail(
    code: str, message: str, secret: str | None, exc: BaseException | None = None
) -> LlmError:
    detail = f"{message}: {type(exc).__name__}: {exc}" if exc is not None else message
    return LlmError(LlmFailure(code=code, message=redact(detail, secret)))


async def open_stream(
    client: httpx.AsyncClient,
    request: httpx.Request,
    *,
    deadline: float,
    provider: str,
    secret: str | None,
) -> httpx.Response:
    """Send ``request`` and return its 2xx streaming response; raise ``LlmError`` otherwise.

    ``deadline`` is in ``loop.time()`` units. The caller owns the returned response and must close it.
    """
    where = f"{provider} request to {request.url.host}"
    try:
        async with asyncio.timeout_at(deadline):
            response = await client.send(request, stream=True)
    except TimeoutError as exc:
        raise _fail("TIMEOUT", f"{where}: no response before the deadline", secret) from exc
    except httpx.TimeoutException as exc:
        raise _fail("TIMEOUT", f"{where} timed out", secret, exc) from exc
    except httpx.HTTPError as exc:
        raise _fail("TRANSPORT", f"{where} failed", secret, exc) from exc
    if response.is_success:
        return response
    try:
        body = await _read_limited(response, deadline)
    except (httpx.HTTPError, TimeoutError):
        body = b""
    finally:
        await response.aclose()
    raise LlmError(http_failure(response, body, provider=provider, secret=secret))


async def _read_limited(response: httpx.Response, deadline: float) -> bytes:
    parts: list[bytes] = []
    size = 0
    async with asyncio.timeout_at(deadline):
        async for data in response.aiter_bytes():
            parts.append(data)
            size += len(data)
            if size >= ERROR_BODY_LIMIT:
                break
    return b"".join(parts)[:ERROR_BODY_LIMIT]


async def read_all(
    response: httpx.Response, *, deadline: float, idle_s: float, provider: str, secret: str | None
) -> bytes:
    """The whole body of a (non-streaming) response, under the same bounds as a stream."""
    parts: list[bytes] = []
    async for data in iter_body(
        response, deadline=deadline, idle_s=idle_s, provider=provider, secret=secret
    ):
        parts.append(data)
    return b"".join(parts)


async def iter_body(
    response: httpx.Response,
    *,
    deadline: float,
    idle_s: float,
    provider: str,
    secret: str | None,
) -> AsyncIterator[bytes]:
    """The body's byte reads, bounded by the idle timeout (httpx's read timeout) and ``deadline``."""
    loop = asyncio.get_running_loop()
    encoded = response.headers.get("content-encoding", "identity").lower() not in ("", "identity")
    reads = response.aiter_bytes() if encoded else response.aiter_raw()
    try:
        while True:
            remaining = deadline - loop.time()
            try:
                if remaining <= 0:
                    raise TimeoutError
                if remaining < idle_s:
                    async with asyncio.timeout(remaining):
                        data = await anext(reads)
                else:
                    data = await anext(reads)
            except StopAsyncIteration:
                return
            except TimeoutError as exc:
                raise _fail(
                    "TIMEOUT", f"{provider} stream passed its overall deadline", secret
                ) from exc
            except httpx.TimeoutException as exc:
                raise _fail(
                    "TIMEOUT", f"{provider} stream idle for {idle_s:g}s", secret, exc
                ) from exc
            except httpx.RemoteProtocolError as exc:
                raise _fail(
                    "STREAM_CLOSED", f"{provider} stream closed mid-response", secret, exc
                ) from exc
            except httpx.HTTPError as exc:
                raise _fail("TRANSPORT", f"{provider} stream read failed", secret, exc) from exc
            yield data
    finally:
        if isinstance(reads, AsyncGenerator):
            await reads.aclose()


_TLS_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR")
_tls_contexts: dict[tuple[str | None, ...], ssl.SSLContext] = {}


def tls_context() -> ssl.SSLContext:
    """httpx's default TLS context (``httpx.create_ssl_context()``: certifi's CA bundle, or the one
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` names), built once per process for each value of those two
    variables and shared by every client this module creates. Building one loads the whole CA
    bundle — about 40 ms on a 2-core machine — and a new client built its own, on the path of the
    first request of every session; an ``SSLContext`` is made to be shared."""
    key = tuple(os.environ.get(name) for name in _TLS_VARIABLES)
    context = _tls_contexts.get(key)
    if context is None:
        context = _tls_contexts[key] = httpx.create_ssl_context()
    return context


class HttpClient:
    """The httpx client of one adapter: injected (and left alone) or created on first use with the
    adapter's timeouts and the shared TLS context (``tls_context``), and closed by ``aclose``."""

    def __init__(self, client: httpx.AsyncClient | None, timeouts: Timeouts) -> None:
        self._client = client
        self._owned = client is None
        self.timeout = httpx.Timeout(
            connect=timeouts.connect_s,
            read=timeouts.idle_s,
            write=timeouts.idle_s,
            pool=timeouts.connect_s,
        )

    def get(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout, verify=tls_context())
        return self._client

    async def aclose(self) -> None:
        if self._owned and self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
