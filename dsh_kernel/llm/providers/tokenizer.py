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
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final, Literal, Protocol, TypeAlias, TypedDict, runtime_checkable

import httpx

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.calibration import TEMPLATE_MESSAGE_TOKENS
from dsh_kernel.llm.providers.transport import json_object
from dsh_kernel.llm.types import GenerateRequest

TOKENIZE_TIMEOUT_S: Final = 1.5
"""Seconds one count may take, the first probe included."""
PROBE_ATTEMPTS: Final = 3
"""Probes that ran out of time before a server is taken to have no tokenizer."""
BODY_LIMIT: Final = 8 * 1024 * 1024

TEMPLATE_PROBE_TIMEOUT_S: Final = 60.0
"""Seconds the template's probe (two one-token answers) may take, once per server and model: a
one-thread CPU server loading its model answers the first request slowly (Qwen2.5-0.5B's ~155-token
probe took 17.7 s on a shared, loaded 2-core machine), and the turn's own request would wait behind
it anyway. A probe that ran out of time is made again at the next request, once."""
TEMPLATE_PROBE_ATTEMPTS: Final = 2
PROBE_MESSAGES: Final[list[JsonValue]] = [
    {"role": "system", "content": "You answer briefly."},
    {"role": "user", "content": "Say yes."},
]
PROBE_TOOL: Final[JsonObject] = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a word up in the dictionary.",
        "parameters": {
            "type": "object",
            "properties": {"word": {"type": "string", "description": "The word."}},
            "required": ["word"],
        },
    },
}

Kind: TypeAlias = Literal["extras", "tokenize"]
_FAULTS = (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL, OSError, ValueError)


@dataclass(frozen=True, slots=True, kw_only=True)
class TemplateShare:
    """What the server's chat template adds, measured by ``probe_template``."""

    prompt: int
    """Tokens a two-message request holds beyond its text and ``TEMPLATE_MESSAGE_TOKENS`` a
    message (the generation prompt, a BOS token)."""
    tools_rendered: bool
    """Whether the template puts the tools in the prompt at all (SmolLM2's does not)."""
    tool_preamble: int
    """Tokens the template adds around the tool list (``0`` when it drops the tools)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptCount:
    """A request's text as the server's tokenizer counted it."""

    tokens: int
    """The messages' text."""
    tool_tokens: int
    """The tools' text (``0``: none offered)."""
    messages: int
    """Messages of the request, the system prompt among them (the template wraps each one)."""
    template: TemplateShare | None
    """What the chat template adds, when it was measured."""
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


def prompt_text(body: JsonObject) -> tuple[str, str, int]:
    """``(the messages' text, the tools' text, messages)`` of a Chat Completions body (module
    docstring); the tools' text is ``""`` when none are offered."""
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
    tool_text = "\n".join(_tool_json(t) for t in tools) if isinstance(tools, list) else ""
    return "\n".join(pieces), tool_text, count


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


def _prompt_tokens(body: JsonObject | None) -> int | None:
    usage = body.get("usage") if body is not None else None
    value = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


async def _completion_prompt(
    client: httpx.AsyncClient, url: str, body: JsonObject, headers: Mapping[str, str]
) -> int | None:
    """The prompt tokens a non-streamed one-token answer to ``body`` reports, or ``None``."""
    try:
        response = await client.post(
            url,
            json=body,
            headers={**headers, "accept": "application/json"},
            timeout=httpx.Timeout(TEMPLATE_PROBE_TIMEOUT_S),
            follow_redirects=False,
        )
    except _FAULTS:
        return None
    if response.status_code != 200 or len(response.content) > BODY_LIMIT:
        return None
    return _prompt_tokens(json_object(response.content))


async def probe_template(
    client: httpx.AsyncClient,
    chat_url: str,
    model: str,
    headers: Mapping[str, str],
    count: Callable[[str], Awaitable[int | None]],
) -> TemplateShare | None:
    """Measure what the server's chat template adds: the same two messages answered (one token,
    not streamed: a llama.cpp-family server reports usage then) without and with one small tool;
    their prompt counts against the tokenizer's count of their text say the template's share per
    request and around the tools, or that it leaves the tools out. ``None`` when the server does
    not answer so. It never raises, and has no timeout of its own: the caller bounds it
    (``TEMPLATE_PROBE_TIMEOUT_S``)."""
    base: JsonObject = {
        "model": model,
        "messages": PROBE_MESSAGES,
        "max_tokens": 1,
        "temperature": 0,
        "stream": False,
    }
    plain = await _completion_prompt(client, chat_url, base, headers)
    with_tool = await _completion_prompt(client, chat_url, {**base, "tools": [PROBE_TOOL]}, headers)
    text = await count("You answer briefly.\nSay yes.")
    tool = await count(_tool_json(PROBE_TOOL))
    if plain is None or with_tool is None or text is None or tool is None:
        return None
    added = with_tool - plain
    rendered = added > tool // 2
    return TemplateShare(
        prompt=max(0, plain - text - 2 * TEMPLATE_MESSAGE_TOKENS),
        tools_rendered=rendered,
        tool_preamble=max(0, added - tool) if rendered else 0,
    )


class ServerTokenizer:
    """One server's tokenizer endpoint, found once (module docstring)."""

    def __init__(self, base_url: str) -> None:
        self._base_url = base_url
        self.kind: Kind | None = None
        """The endpoint found; ``None`` while unknown or absent (``absent``)."""
        self.absent = False
        self._timeouts = 0
        self.templates: dict[str, TemplateShare | None] = {}
        """What each model's chat template adds (``probe_template``), once probed; ``None``: the
        probe failed (the measured constants are used)."""
        self._template_tries: dict[str, int] = {}
        self._counted: tuple[str, int] | None = None
        """The latest tool list's text and its count (it rarely changes)."""

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

    async def count_prompt(
        self,
        client: httpx.AsyncClient,
        body: JsonObject,
        *,
        chat_url: str,
        model: str,
        headers: Mapping[str, str],
    ) -> PromptCount | None:
        """The count of a Chat Completions ``body``: its messages' text, its tools' text (kept
        while the tool list stays the same), and, the first time for ``model``, what the chat
        template adds (``probe_template``). ``None`` when the server cannot count (never raises)."""
        text, tool_text, messages = prompt_text(body)
        found = await self.count(client, text, model=model, headers=headers)
        if found is None:
            return None
        tokens, where = found
        tool_tokens = 0
        if tool_text:
            if self._counted is not None and self._counted[0] == tool_text:
                tool_tokens = self._counted[1]
            else:
                counted = await self.count(client, tool_text, model=model, headers=headers)
                if counted is None:
                    return None
                tool_tokens = counted[0]
                self._counted = (tool_text, tool_tokens)
        if model not in self.templates:

            async def count(piece: str) -> int | None:
                answer = await self.count(client, piece, model=model, headers=headers)
                return answer[0] if answer is not None else None

            try:
                async with asyncio.timeout(TEMPLATE_PROBE_TIMEOUT_S):
                    self.templates[model] = await probe_template(
                        client, chat_url, model, headers, count
                    )
            except TimeoutError:
                tries = self._template_tries[model] = self._template_tries.get(model, 0) + 1
                if tries >= TEMPLATE_PROBE_ATTEMPTS:
                    self.templates[model] = None
        return PromptCount(
            tokens=tokens,
            tool_tokens=tool_tokens,
            messages=messages,
            template=self.templates.get(model),
            where=where,
        )


class TemplateFigures(TypedDict, total=False):
    """``tokenizer_calibration``'s template keywords."""

    prompt: int
    tools_rendered: bool
    tool_preamble: int


def template_share(share: TemplateShare | None) -> TemplateFigures:
    """The template keywords of ``llm.calibration.tokenizer_calibration`` for ``share`` (none: the
    constants)."""
    if share is None:
        return {}
    return {
        "prompt": share.prompt,
        "tools_rendered": share.tools_rendered,
        "tool_preamble": share.tool_preamble,
    }
