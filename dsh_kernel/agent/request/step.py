"""Each step's request, from the agent's settings to the frozen ``GenerateRequest`` (SPINE §1.4
step 1, §1.10), with compaction around it (``agent.compaction.run``).

``StepRequests.build`` proposes the call config from the agent's settings (route, reasoning effort,
sampling, output cap, passback dialect, images), runs the ``agent/request`` waterfall, resolves the
route's provider, context window and tool schemas, and lets the adapter fill its defaults: that is
the *route*. Then:

0. **calibration** — the route's calibration of the token estimate (``llm.calibration``):
   learned from the server's reported usage, else counted by its tokenizer (a local server that
   has one; a short, bounded lookup), else none; every measure below uses it, and the request's
   ``request/context`` records it. When the answer comes, its usage teaches the calibration
   (``answered``), unless a proxy made it up;
1. **pressure** — ``Compaction.relieve``: the history is compacted first when the request would
   pass the threshold of the window;
2. **the envelope** — ``RequestLog.record`` fits the call to the window (warning, refusal, output
   cap), then to the spending budget (``agent.request.spend``: refusal, the cap lowered to what is left),
   and logs ``request/header`` / ``request/context`` where they changed (``check_retry`` holds a
   retry of it to the budget before the retry is even scheduled);
3. **overflow** — a refusal for size (``CONTEXT_WINDOW_EXCEEDED``) compacts as far as possible and
   fits again, once per step (``compact_overflow``, which the step loop also calls when the *server*
   reported the overflow, before it retries the same step);
4. the messages are ``derive_messages()`` of the surface then, checked against the log alone under
   dev invariants, and image bytes are attached for routes that take images.

``route`` is the same route for ``Agent.compact()`` between turns. The class is built once per
agent from its fixed collaborators (the log, the providers, the windows, the tool registry, the
hooks, compaction); the settings that change between requests come with each call as one frozen
``StepSettings`` value, so a request reads exactly what the agent held when it was built.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from dsh_kernel.abort import AbortSignal
from dsh_kernel.agent.compaction.run import Compaction, Route
from dsh_kernel.agent.hooks import AgentHooks, RequestPayload
from dsh_kernel.agent.passback import PassbackRetry
from dsh_kernel.agent.request.envelope import RequestLog, assert_reconstruction, generate_request
from dsh_kernel.agent.request.meter import measure, prepared_header
from dsh_kernel.agent.request.spend import SpendGate, request_input_tokens
from dsh_kernel.agent.request.window import ContextWindows
from dsh_kernel.errors import LlmError
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.calibration import (
    Calibration,
    Calibrations,
    made_up,
    tokenizer_calibration,
)
from dsh_kernel.llm.calibration import Route as CalibrationRoute
from dsh_kernel.llm.estimate import request_header_tokens
from dsh_kernel.llm.provider import PreparedCall, Provider
from dsh_kernel.llm.providers.tokenizer import TokenCounting, template_share
from dsh_kernel.llm.types import (
    GenerateRequest,
    LlmCallConfig,
    LlmFailure,
    TextBlock,
    ToolSchema,
    UserSource,
)
from dsh_kernel.session.log import Session
from dsh_kernel.session.log_images import attach_image_data
from dsh_kernel.tools.lean import ToolSchemaForm, lean_for
from dsh_kernel.tools.registry import ToolRegistry


def tools_named(session: Session, names: Iterable[str]) -> frozenset[str]:
    """Which of the tool ``names`` the user's messages of the open turn name, as whole words
    (``ask_user``, not ``ask``): the lean tool set offers a ``lean_when_named`` tool only then. Reads
    the turn's own messages only (from the newest back to the turn's start), so it costs the same
    on the thousandth turn as on the first."""
    start = session.latest("turn/start")
    if start is None:
        return frozenset()
    text: list[str] = []
    for seq in reversed(session.surface):
        if seq < start.seq:
            break
        message = session.projection(seq)
        if (
            message is not None
            and message.role == "user"
            and isinstance(message.source, UserSource)
        ):
            text.extend(b.text for b in message.content if isinstance(b, TextBlock))
    words = set(_WORD.findall("\n".join(text)))
    return frozenset(n for n in names if n in words)


_WORD = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class StepSettings:
    """The agent's settings as one request reads them, taken when the request is built: they
    change between requests (``%agent model``, ``%agent reasoning``, a course's budget), never
    during one."""

    provider: Provider
    model: str
    reasoning_effort: str | None
    temperature: float | None
    seed: int | None
    max_tokens: int | None
    images: bool | None
    tool_schemas: ToolSchemaForm
    spend: SpendGate | None


def calibration_route(provider: Provider, model: str) -> CalibrationRoute:
    """The key a route's calibration is learned under: provider id, endpoint, model."""
    endpoint = getattr(provider, "endpoint", "")
    return (provider.id, endpoint if isinstance(endpoint, str) else "", model)


class StepRequests:
    """The requests of one agent's steps (module docstring)."""

    def __init__(
        self,
        session: Session,
        *,
        providers: dict[str, Provider],
        windows: ContextWindows,
        registry: ToolRegistry,
        passback: PassbackRetry,
        hooks: AgentHooks,
        compaction: Compaction,
        check_invariants: bool,
        calibrations: Calibrations | None = None,
    ) -> None:
        self._session = session
        self._providers = providers
        self._windows = windows
        self._registry = registry
        self._passback = passback
        self._hooks = hooks
        self._compaction = compaction
        self._check_invariants = check_invariants
        self._calibrations = calibrations if calibrations is not None else Calibrations()
        self._log = RequestLog(session)
        self._route: Route | None = None
        self._overflow_compacted = False
        self._sent: (
            tuple[PreparedCall, str, tuple[ToolSchema, ...], SpendGate | None, Calibration] | None
        ) = None
        """The latest request's call, system prompt, tools, budget and calibration (what a retry
        is held to)."""
        self._measured: tuple[CalibrationRoute, int] | None = None
        """The latest request's calibration route and raw estimate (what its usage is held to)."""

    def new_step(self) -> None:
        """A step begins: it may compact for an overflow once."""
        self._overflow_compacted = False

    def provider(self, provider_id: str) -> Provider:
        """The registered provider ``provider_id``; ``LlmError(NO_ADAPTER)`` if there is none."""
        provider = self._providers.get(provider_id)
        if provider is None:
            failure = LlmFailure(
                code="NO_ADAPTER", message=f"no provider registered as {provider_id!r}"
            )
            raise LlmError(failure)
        return provider

    async def route(
        self, settings: StepSettings, turn: int, system: str, signal: AbortSignal
    ) -> Route:
        """The route the next request would take (for a compaction between turns)."""
        return (await self._prepare(settings, turn, 0, system, signal))[0]

    async def build(
        self, settings: StepSettings, turn: int, step: int, system: str, signal: AbortSignal
    ) -> GenerateRequest:
        """The request of step ``step`` (module docstring)."""
        session = self._session
        route, prepared = await self._prepare(settings, turn, step, system, signal)
        key = calibration_route(route.provider, route.config.model)
        cal = await self._calibrate(key, route.provider, prepared, system, route.tools)
        route = replace(route, calibration=cal)
        self._route = route
        await self._compaction.relieve(route, turn=turn)
        gate = self._gate(settings.spend, system, route.tools, cal)
        try:
            header = self._log.record(
                prepared, route.window, system, route.tools, gate, calibration=cal
            )
        except LlmError as exc:
            if not await self.compact_overflow(exc.failure, turn):
                raise
            header = self._log.record(
                prepared, route.window, system, route.tools, gate, calibration=cal
            )
        self._sent = (prepared, system, route.tools, settings.spend, cal)
        self._measured = (key, measure(session, header=header, calibration=cal).raw_tokens)
        request = generate_request(header, tuple(session.derive_messages()), session.id)
        if self._check_invariants:
            assert_reconstruction(session, request)
        return attach_image_data(request, session)

    async def _calibrate(
        self,
        key: CalibrationRoute,
        provider: Provider,
        prepared: PreparedCall,
        system: str,
        tools: tuple[ToolSchema, ...],
    ) -> Calibration:
        """The calibration of the request about to be built (module docstring): the usage-learned
        one when the server has reported any; else, when its server can count, its tokenizer's
        count of this request's text (bounded by the tokenizer's own short timeout); else what was
        learned before."""
        calibrations = self._calibrations
        if calibrations.learned_from_usage(key):
            return calibrations.current(key)
        if isinstance(provider, TokenCounting) and provider.counts_tokens:
            session = self._session
            header = prepared_header(prepared, system=system, tools=tools)
            draft = generate_request(header, tuple(session.derive_messages()), session.id)
            counted = await provider.count_request_tokens(draft)
            if counted is not None:
                raw = measure(session, header=header).raw_tokens
                calibrations.counted(
                    key,
                    tokenizer_calibration(
                        raw=raw,
                        raw_tools=request_header_tokens(None, tools),
                        text_tokens=counted.tokens,
                        tool_tokens=counted.tool_tokens,
                        messages=counted.messages,
                        **template_share(counted.template),
                    ),
                )
        return calibrations.current(key)

    def usage_origin(self, usage: JsonObject | None) -> str | None:
        """``"proxy"`` when the latest request's ``usage`` is a proxy's own count
        (``llm.calibration.made_up``), else ``None``."""
        if usage is None or self._measured is None:
            return None
        return "proxy" if made_up(usage, self._measured[1]) else None

    def answered(self, usage: JsonObject | None) -> None:
        """The latest request was answered with ``usage``: learn from it (not from a proxy's own
        count, nor from an implausible one)."""
        if usage is not None and self._measured is not None:
            key, raw = self._measured
            self._calibrations.observe(key, raw, usage)

    def calibration(self, provider: Provider, model: str) -> Calibration:
        """What a request to ``model`` on ``provider`` would be measured with now (no lookup)."""
        return self._calibrations.current(calibration_route(provider, model))

    def _gate(
        self,
        spend: SpendGate | None,
        system: str,
        tools: tuple[ToolSchema, ...],
        calibration: Calibration,
    ) -> Callable[[PreparedCall], PreparedCall] | None:
        """The spending budget's check of a request (``agent.request.spend``), or ``None`` without one."""
        session = self._session
        if spend is None:
            return None

        def gate(prepared: PreparedCall) -> PreparedCall:
            tokens = request_input_tokens(
                session, prepared, system=system, tools=tools, calibration=calibration
            )
            return spend.fit(prepared, tokens)

        return gate

    def check_retry(self, failure: LlmFailure) -> None:
        """Before a retry of the latest request is scheduled: ``LlmError`` ``BUDGET_EXCEEDED``
        when the spending budget cannot pay for it, counting the failed attempts (``agent.request.spend``).
        The retry is checked again, with the rest of its envelope, when it is built."""
        if self._sent is None:
            return
        prepared, system, tools, spend, cal = self._sent
        if spend is None:
            return
        tokens = request_input_tokens(
            self._session, prepared, system=system, tools=tools, calibration=cal
        )
        spend.fit(prepared, tokens, retry_of=failure)

    async def compact_overflow(self, failure: LlmFailure, turn: int) -> bool:
        """After a request did not fit: compact as much as possible, once per step; whether the
        history changed (so the request is worth retrying)."""
        session = self._session
        route = self._route
        if (
            failure.code != "CONTEXT_WINDOW_EXCEEDED"
            or not self._compaction.auto
            or self._overflow_compacted
            or route is None
            or session.compaction_open is not None
        ):
            return False
        self._overflow_compacted = True
        self._windows.learn(route.provider, route.config.model, failure)
        window = self._windows.current(route.provider, route.config.model)
        generation = session.replace_generation
        await self._compaction.relieve(replace(route, window=window), turn=turn, trigger="overflow")
        return session.replace_generation > generation

    async def _prepare(
        self, settings: StepSettings, turn: int, step: int, system: str, signal: AbortSignal
    ) -> tuple[Route, PreparedCall]:
        proposed = LlmCallConfig(
            provider=settings.provider.id,
            model=settings.model,
            reasoning_effort=settings.reasoning_effort,
            temperature=settings.temperature,
            seed=settings.seed,
            max_tokens=settings.max_tokens,
            reasoning_passback=self._passback.dialect_for(settings.provider.id),
            images=settings.images,
        )

        async def default() -> LlmCallConfig:
            return proposed

        config = await self._hooks.request.run(
            RequestPayload(turn=turn, step=step, config=proposed, signal=signal), default
        )
        provider = self.provider(config.provider)
        window = await self._windows.resolve(provider, config.model)
        lean = lean_for(settings.tool_schemas, window)
        named = tools_named(self._session, self._registry.names()) if lean else ()
        tools = self._registry.schemas(lean=lean, named=named)
        prepared = self._passback.mark(provider.prepare_call(config))
        route = Route(
            provider=provider,
            config=prepared.config,
            window=window,
            system=system,
            tools=tools,
            spend=settings.spend,
        )
        return route, prepared
