"""Asking an OpenAI-compatible server how big its context window is.

Local and self-hosted servers know the window they run with, and say it in their own places:

* llama.cpp's ``llama-server``: ``GET /props`` → ``default_generation_settings.n_ctx`` (the window
  a request gets, per slot);
* Ollama: ``POST /api/show {"model": …}`` → ``num_ctx`` in ``parameters`` when the model sets one,
  else ``model_info["<arch>.context_length"]`` (the model's trained maximum: Ollama's own default
  ``num_ctx`` may be smaller, and it then cuts the prompt silently);
* vLLM: ``GET {base}/models`` → the model's ``max_model_len``; OpenRouter and others that list a
  ``context_length`` (or ``context_window``) per model are read the same way.

``discover_window`` asks all three at once and takes the best answer in that order (the window a
request really gets beats a model's maximum). It is cheap and safe by construction: one short
timeout bounds the whole lookup (``DISCOVERY_TIMEOUT_S``), each body read is capped
(``BODY_LIMIT``), redirects are not followed, every URL is on the base URL's own scheme, host and
port — so the headers (the API key among them) never reach another host — and any failure (a
refused connection, a 404, a body that is not JSON, a number that is not a plausible window) is
simply "not found": ``None``. The caller then uses a default. It never raises.

``WindowDiscovery`` is the provider capability the agent looks for (``agent.request.window``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import httpx

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.providers.transport import json_object

DISCOVERY_TIMEOUT_S = 2.0
"""Seconds the whole lookup may take (all three requests run at once)."""

BODY_LIMIT = 4 * 1024 * 1024
"""Bytes read of one answer (OpenRouter's model list is about 1 MB)."""

_MIN_WINDOW = 256
MAX_WINDOW = 100_000_000
"""The largest context window believed (a server's, a setting's, an error message's): well above
any model's, far below what the log can keep."""
_FAULTS = (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL, OSError, ValueError)
"""What a lookup may meet on the way: each one means "not found"."""
_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True, kw_only=True)
class DiscoveredWindow:
    """A context window a server reported."""

    tokens: int
    where: str
    """Which lookup said so: ``/props``, ``/api/show`` or ``/models``."""


@runtime_checkable
class WindowDiscovery(Protocol):
    """A provider that can ask its server for a model's context window."""

    @property
    def discovers_window(self) -> bool:
        """Whether this provider's server is one whose window is not known in advance."""
        ...

    @property
    def endpoint(self) -> str:
        """The base URL the provider talks to (part of the route a window is cached under)."""
        ...

    async def discover_context_window(self, model: str) -> DiscoveredWindow | None:
        """The window the server reports for ``model``; ``None`` when it says nothing usable."""
        ...


def _window(value: JsonValue) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if _MIN_WINDOW <= value <= MAX_WINDOW else None


def window_from_props(body: JsonObject) -> int | None:
    """llama.cpp ``/props``: ``default_generation_settings.n_ctx`` (older builds: top-level ``n_ctx``)."""
    settings = body.get("default_generation_settings")
    if isinstance(settings, dict):
        found = _window(settings.get("n_ctx"))
        if found is not None:
            return found
    return _window(body.get("n_ctx"))


def window_from_show(body: JsonObject) -> tuple[int | None, int | None]:
    """Ollama ``/api/show``: ``(num_ctx set in the model's parameters, the model's context_length)``."""
    num_ctx: int | None = None
    params = body.get("parameters")
    if isinstance(params, str) and (m := _NUM_CTX.search(params)):
        num_ctx = _window(int(m.group(1)))
    length: int | None = None
    info = body.get("model_info")
    if isinstance(info, dict):
        arch = info.get("general.architecture")
        if isinstance(arch, str):
            length = _window(info.get(f"{arch}.context_length"))
        if length is None:
            lengths = [
                w
                for k, v in info.items()
                if k.endswith(".context_length") and (w := _window(v)) is not None
            ]
            length = lengths[0] if len(lengths) == 1 else None
    return num_ctx, length


def window_from_models(body: JsonObject, model: str) -> int | None:
    """An OpenAI-style model list: the entry for ``model`` (the only entry, when the server serves
    one model under another name), its ``max_model_len`` (vLLM), ``context_length`` or
    ``context_window``."""
    data = body.get("data")
    if not isinstance(data, list):
        return None
    entries = [e for e in data if isinstance(e, dict)]
    chosen = [e for e in entries if e.get("id") == model] or (entries if len(entries) == 1 else [])
    for entry in chosen:
        for key in ("max_model_len", "context_length", "context_window"):
            found = _window(entry.get(key))
            if found is not None:
                return found
    return None


def lookup_urls(base_url: str) -> tuple[httpx.URL, httpx.URL, httpx.URL]:
    """``(/props, /api/show, {base}/models)`` for ``base_url``: the first two at the server's root,
    the model list beside ``/chat/completions``."""
    base = httpx.URL(base_url.rstrip("/") + "/")
    root = base.copy_with(path="/", query=None, fragment=None)
    return root.join("props"), root.join("api/show"), base.join("models")


async def _json(
    client: httpx.AsyncClient, request: httpx.Request, origin: httpx.URL
) -> JsonObject | None:
    url = request.url
    if (url.scheme, url.host, url.port) != (origin.scheme, origin.host, origin.port):
        return None  # never: the URLs are built on the base URL's origin
    try:
        response = await client.send(request, stream=True, follow_redirects=False)
    except _FAULTS:
        return None
    try:
        if response.status_code != 200:
            return None
        parts: list[bytes] = []
        size = 0
        async for data in response.aiter_bytes():
            parts.append(data)
            size += len(data)
            if size > BODY_LIMIT:
                return None
        return json_object(b"".join(parts))
    except _FAULTS:
        return None
    finally:
        await response.aclose()


async def discover_window(
    client: httpx.AsyncClient,
    base_url: str,
    model: str,
    *,
    headers: Mapping[str, str],
    timeout_s: float = DISCOVERY_TIMEOUT_S,
) -> DiscoveredWindow | None:
    """The window the server at ``base_url`` reports for ``model``, else ``None`` (module docstring)."""
    timeout = httpx.Timeout(timeout_s)
    hdrs = {**headers, "accept": "application/json"}
    try:
        props_url, show_url, models_url = lookup_urls(base_url)
        origin = httpx.URL(base_url)
        requests = (
            client.build_request("GET", props_url, headers=hdrs, timeout=timeout),
            client.build_request(
                "POST", show_url, headers=hdrs, json={"model": model}, timeout=timeout
            ),
            client.build_request("GET", models_url, headers=hdrs, timeout=timeout),
        )
    except _FAULTS:
        return None
    try:
        async with asyncio.timeout(timeout_s):
            props, show, models = await asyncio.gather(
                *(_json(client, r, origin) for r in requests)
            )
    except TimeoutError:
        return None
    num_ctx, length = window_from_show(show) if show is not None else (None, None)
    ranked = (
        (window_from_props(props) if props is not None else None, "/props"),
        (num_ctx, "/api/show"),
        (window_from_models(models, model) if models is not None else None, "/models"),
        (length, "/api/show"),
    )
    for tokens, where in ranked:
        if tokens is not None:
            return DiscoveredWindow(tokens=tokens, where=where)
    return None
