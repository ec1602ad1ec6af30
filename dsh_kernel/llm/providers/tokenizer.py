"""Asking a local model server to count tokens with its own tokenizer.

Two llama.cpp-family servers can count:

* llama-cpp-python's ``python -m llama_cpp.server``: ``POST /extras/tokenize/count``
  ``{"input": text, "model": …}`` → ``{"count": n}``;
* llama.cpp's ``llama-server``: ``POST /tokenize`` ``{"content": text}`` → ``{"tokens": [...]}``.

Neither applies the chat template (what it adds is ``llm.calibration``'s to allow for);
each counts the text of a request as its model will read it. ``ServerTokenizer`` finds out *once*
which one a server has — both are asked at once the first time; the first that answers well is kept,
and a server where neither does (a 404, an answer that is not a count: OpenAI, vLLM, Ollama) is
never asked again. A lookup that ran out of time says nothing about the server: it is asked again
next time, up to ``PROBE_ATTEMPTS`` times. Every lookup is bounded by a short timeout
(``TOKENIZE_TIMEOUT_S``; a request is never held long for it), is on the base URL's own scheme, host
and port, follows no redirect, and never raises: any fault is ``None``.

``prompt_text(body)`` is the text of a Chat Completions request body the tokenizer is given: each
message's content (and a tool call's name and arguments, a tool result's text), and each tool as a
chat template renders it (Jinja's ``tojson``: sorted keys, ``", "`` and ``": "``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, Protocol, TypeAlias, runtime_checkable

import httpx

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.providers.transport import json_object
from dsh_kernel.llm.types import GenerateRequest

TOKENIZE_TIMEOUT_S: Final = 1.5
"""Seconds one count may take, the first probe included."""
PROBE_ATTEMPTS: Final = 3
"""Probes that ran out of time before a server is taken to have no tokenizer."""
BODY_LIMIT: Final = 8 * 1024 * 1024

Kind: TypeAlias = Literal["extras", "tokenize"]
_FAULTS = (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL, OSError, ValueError)


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptCount:
    """A request's text as the server's tokenizer counted it."""

    tokens: int
    messages: int
    """Messages of the request, the system prompt among them (the template wraps each one)."""
    tools: bool
    """Whether tools were offered (the template adds its tool preamble)."""
    where: str
    """The endpoint that counted: ``/extras/tokenize/count`` or ``/tokenize``."""


@runtime_checkable
class TokenCounting(Protocol):
    """A provider that may count a request's tokens with its server's tokenizer."""

    @property
    def counts_tokens(self) -> bool:
        """Whether it may have a tokenizer to ask (a local server's profile)."""
        ...

    async def count_request_tokens(self, request: GenerateRequest) -> PromptCount | None:
        """The count of ``request``'s text, or ``None`` (no tokenizer, or not in time)."""
        ...


def _tool_json(tool: JsonValue) -> str:
    return json.dumps(tool, sort_keys=True)


def prompt_text(body: JsonObject) -> tuple[str, int, bool]:
    """``(text, messages, tools offered)`` of a Chat Completions body (module docstring)."""
    pieces: list[str] = []
    messages = body.get("messages")
    count = 0
    for m in messages if isinstance(messages, list) else []:
        if not isinstance(m, dict):
            continue
        count += 1
        content = m.get("content")
        if isinstance(content, str):
            pieces.append(content)
        elif isinstance(content, list):
            for part in content:
                text = part.get("text") if isinstance(part, dict) else None
                if isinstance(text, str):
                    pieces.append(text)
        calls = m.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                pieces.append(
                    _tool_json({"name": fn.get("name"), "arguments": fn.get("arguments")})
                )
    tools = body.get("tools")
    offered = isinstance(tools, list) and bool(tools)
    if isinstance(tools, list):
        pieces.extend(_tool_json(t) for t in tools)
    return "\n".join(pieces), count, offered


def _root(base_url: str) -> httpx.URL:
    base = httpx.URL(base_url.rstrip("/") + "/")
    return base.copy_with(path="/", query=None, fragment=None)


async def _ask(client: httpx.AsyncClient, request: httpx.Request) -> tuple[int | None, bool]:
    """``(count, answered)``: the count in the answer, and whether the server answered at all (a
    404 answers: there is no such endpoint)."""
    try:
        response = await client.send(request, stream=True, follow_redirects=False)
    except _FAULTS:
        return None, False
    try:
        if response.status_code != 200:
            return None, True
        parts: list[bytes] = []
        size = 0
        async for data in response.aiter_bytes():
            parts.append(data)
            size += len(data)
            if size > BODY_LIMIT:
                return None, True
        return _count(json_object(b"".join(parts))), True
    except _FAULTS:
        return None, False
    finally:
        await response.aclose()


def _count(body: JsonObject | None) -> int | None:
    if body is None:
        return None
    count = body.get("count")
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return count
    tokens = body.get("tokens")
    if isinstance(tokens, list):
        return len(tokens)
    return None


_PATHS: Final[dict[Kind, str]] = {"extras": "extras/tokenize/count", "tokenize": "tokenize"}


class ServerTokenizer:
    """One server's tokenizer endpoint, found once (module docstring)."""

    def __init__(self, base_url: str) -> None:
        self._base_url = base_url
        self.kind: Kind | None = None
        """The endpoint found; ``None`` while unknown or absent (``absent``)."""
        self.absent = False
        self._timeouts = 0

    def _request(
        self,
        client: httpx.AsyncClient,
        kind: Kind,
        text: str,
        model: str,
        headers: Mapping[str, str],
    ) -> httpx.Request:
        url = _root(self._base_url).join(_PATHS[kind])
        body: JsonObject = (
            {"input": text, "model": model} if kind == "extras" else {"content": text}
        )
        return client.build_request(
            "POST",
            url,
            headers={**headers, "accept": "application/json"},
            json=body,
            timeout=httpx.Timeout(TOKENIZE_TIMEOUT_S),
        )

    async def count(
        self,
        client: httpx.AsyncClient,
        text: str,
        *,
        model: str,
        headers: Mapping[str, str],
        timeout_s: float = TOKENIZE_TIMEOUT_S,
    ) -> tuple[int, str] | None:
        """``(tokens, endpoint)`` of ``text``, or ``None`` (never raises)."""
        if self.absent:
            return None
        kinds: tuple[Kind, ...] = (self.kind,) if self.kind is not None else ("extras", "tokenize")
        try:
            requests = [self._request(client, k, text, model, headers) for k in kinds]
        except _FAULTS:
            self.absent = True
            return None
        try:
            async with asyncio.timeout(timeout_s):
                answers = await asyncio.gather(*(_ask(client, r) for r in requests))
        except TimeoutError:
            self._timed_out()
            return None
        for kind, (count, _) in zip(kinds, answers, strict=True):
            if count is not None:
                self.kind = kind
                return count, "/" + _PATHS[kind]
        if self.kind is None and all(answered for _, answered in answers):
            self.absent = True  # the server answered and has neither
        elif self.kind is None:
            self._timed_out()
        return None

    def _timed_out(self) -> None:
        if self.kind is None:
            self._timeouts += 1
            if self._timeouts >= PROBE_ATTEMPTS:
                self.absent = True
