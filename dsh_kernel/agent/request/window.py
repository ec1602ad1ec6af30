"""The context window of a route, and where it came from.

``ContextWindows.resolve(provider, model)`` answers, in this order:

1. **configured** — ``ContextWindows.configured`` (the kernel's ``DSH_CONTEXT_WINDOW``,
   ``c.DshKernel.context_window`` or ``%agent context <tokens>``): it overrides everything, for
   every route, until cleared;
2. **catalogue** — the provider's model metadata (DeepSeek, OpenAI, Anthropic models the catalogue
   lists, or a test provider's ``ModelInfo``);
3. **discovered** — for a provider that can ask its server (``WindowDiscovery``; the generic
   OpenAI-compatible one), what the server reports (``llm.providers.discovery``);
4. **default** — for such a provider whose server says nothing: ``DEFAULT_WINDOW`` tokens.

``None`` means nothing is known and nothing is assumed (the offline demo model, a replay).

Discovery runs once per route — ``(provider id, endpoint, model)`` — and its answer is kept for
the life of this object (the kernel keeps one across its sessions); a route whose server said
nothing is asked again only after ``forget_failures()`` (a new session). ``prefetch`` starts the
lookup in the background as soon as a route is chosen, so a first message rarely waits for it;
``resolve`` awaits it (shielded: an interrupted turn does not cancel a lookup another waits for).
``current`` is the synchronous reading for ``%agent status``: what is known now, without asking.
``learn`` takes the window from an overflow error that names it (llama-cpp-python's server says
nothing when asked, but its overflow says "maximum context length is 4096 tokens").

Why 4,096 for an unknown local model: it is the context llama.cpp's ``llama-server`` and Ollama
give a model when none is set, and the smallest a chat model with tools is usable in. A default is
only *assumed*: the meter warns against it, but a request is never refused and its output never
capped on its account (``agent.request.fit``) — a server with a bigger window must keep working.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Literal, TypeAlias

from dsh_kernel.llm.provider import Provider
from dsh_kernel.llm.providers.discovery import MAX_WINDOW, DiscoveredWindow, WindowDiscovery
from dsh_kernel.llm.types import LlmFailure

WindowSource: TypeAlias = Literal["configured", "discovered", "catalogue", "default"]

DEFAULT_WINDOW = 4096
"""Tokens assumed for a local model whose server does not say (module docstring)."""

_Route: TypeAlias = tuple[str, str, str]

_NAMED_WINDOW = re.compile(
    r"(?:maximum context length|context window|context length|n_ctx)\D{0,20}?(\d[\d,]*)",
    re.IGNORECASE,
)
"""The window an overflow error names: OpenAI, vLLM and llama-cpp-python ("maximum context length
is 4096 tokens"), llama.cpp ("exceed context window of 4096"), others ("n_ctx: 4096")."""

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextWindow:
    """How many tokens a request and its answer may hold together, and how that is known."""

    tokens: int
    source: WindowSource
    where: str | None = None
    """For ``discovered``: the lookup that said so (``/props``, ``/api/show``, ``/models``)."""

    @property
    def known(self) -> bool:
        """Whether the window was configured or reported by the server (not merely assumed)."""
        return self.source in ("configured", "discovered")

    def origin(self) -> str:
        """Where it came from, for people: ``configured``, ``discovered from /props``, …"""
        match self.source:
            case "discovered":
                return f"discovered from {self.where}" if self.where else "discovered"
            case "default":
                return "default for an unknown model: the server did not say"
            case _:
                return self.source

    def describe(self) -> str:
        return f"{self.tokens:,} tokens ({self.origin()})"


def sized(window: ContextWindow | None) -> int | None:
    """The window's tokens unless it is merely assumed (``default``) or unknown."""
    return window.tokens if window is not None and window.source != "default" else None


class ContextWindows:
    """The windows of the routes an agent (or a kernel's agents) talk to (module docstring)."""

    def __init__(self, configured: int | None = None, *, default: int = DEFAULT_WINDOW) -> None:
        self.configured = configured
        """Tokens set by the user; overrides every route while set."""
        self.default = default
        self._found: dict[_Route, DiscoveredWindow | None] = {}
        self._pending: dict[_Route, asyncio.Task[DiscoveredWindow | None]] = {}

    @staticmethod
    def _discovery(provider: Provider) -> WindowDiscovery | None:
        if isinstance(provider, WindowDiscovery) and provider.discovers_window:
            return provider
        return None

    def _needs_lookup(self, provider: Provider, model: str) -> WindowDiscovery | None:
        if self.configured is not None or provider.model_info(model).context_window is not None:
            return None
        return self._discovery(provider)

    def current(self, provider: Provider, model: str) -> ContextWindow | None:
        """What is known about ``model``'s window now, without asking its server."""
        if self.configured is not None:
            return ContextWindow(tokens=self.configured, source="configured")
        catalogue = provider.model_info(model).context_window
        if catalogue is not None:
            return ContextWindow(tokens=catalogue, source="catalogue")
        finder = self._discovery(provider)
        if finder is None:
            return None
        found = self._found.get((provider.id, finder.endpoint, model))
        if found is not None:
            return ContextWindow(tokens=found.tokens, source="discovered", where=found.where)
        return ContextWindow(tokens=self.default, source="default")

    def asking(self, provider: Provider, model: str) -> bool:
        """Whether the server is being asked right now."""
        finder = self._needs_lookup(provider, model)
        return finder is not None and (provider.id, finder.endpoint, model) in self._pending

    def prefetch(self, provider: Provider, model: str) -> None:
        """Start asking the server in the background (no-op without a running event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self._task(provider, model)

    async def resolve(self, provider: Provider, model: str) -> ContextWindow | None:
        """The window of ``model`` on ``provider``, asking its server first if it was not yet."""
        pending = self._task(provider, model)
        if pending is not None:
            route, task = pending
            try:
                self._found[route] = await asyncio.shield(task)
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise  # this turn was cancelled; the lookup goes on for the next one
            except Exception:  # a bug in a lookup must not fail the turn: nothing was found
                _log.warning(
                    "dsh: asking %s for its context window failed", route[1], exc_info=True
                )
                self._found[route] = None
        return self.current(provider, model)

    def learn(self, provider: Provider, model: str, failure: LlmFailure) -> None:
        """Take the window from an overflow the server reported, when it names it ("maximum context
        length is 4096 tokens", "context window of 4096"): a route whose server would not say
        becomes ``discovered`` (from its error), so later requests are fitted and refused in time."""
        finder = self._needs_lookup(provider, model)
        if finder is None or failure.code != "CONTEXT_WINDOW_EXCEEDED":
            return
        match = _NAMED_WINDOW.search(failure.message)
        if match is not None:
            tokens = int(match.group(1).replace(",", ""))
            if 0 < tokens <= MAX_WINDOW:
                route = (provider.id, finder.endpoint, model)
                self._found[route] = DiscoveredWindow(tokens=tokens, where="the server's error")

    def forget_failures(self) -> None:
        """Ask again the servers that said nothing (their answer may be different now)."""
        self._found = {k: v for k, v in self._found.items() if v is not None}

    def _task(
        self, provider: Provider, model: str
    ) -> tuple[_Route, asyncio.Task[DiscoveredWindow | None]] | None:
        """The lookup of a route not asked yet (started here if it is not running)."""
        finder = self._needs_lookup(provider, model)
        if finder is None:
            return None
        route = (provider.id, finder.endpoint, model)
        if route in self._found:
            return None
        task = self._pending.get(route)
        if task is None:
            task = asyncio.get_running_loop().create_task(
                finder.discover_context_window(model), name=f"dsh-window-{model}"
            )
            self._pending[route] = task

            def done(t: asyncio.Task[DiscoveredWindow | None], route: _Route = route) -> None:
                self._pending.pop(route, None)
                if not t.cancelled() and t.exception() is None:
                    self._found[route] = t.result()

            task.add_done_callback(done)
        return route, task
