"""The agent's interception points, as a small typed bus.

Four dispatch modes (SPINE §0):

* ``emit`` — fire-and-forget notifications; listener errors are logged and contained;
* ``waterfall`` — each listener gets ``(payload, next)`` and either returns a decision or awaits
  ``next()``; the caller supplies the innermost default. Listeners run in registration order;
* ``serial`` — listeners awaited in order, no return value;

Hooks (payload → result):

==================  ==========  =====================================================================
``pre_step``        waterfall   ``PreStep`` → ``Enter(messages)`` or ``Reject(reason)``
``request``         waterfall   ``RequestPayload`` → ``LlmCallConfig`` (may switch route; never messages)
``request_error``   waterfall   ``RequestErrorPayload`` → ``Retry()`` or ``None`` (terminal)
``turn_stopping``   serial      ``TurnStopping`` — steer the agent to keep going
``checkpoint``      serial      ``Checkpoint(reason)`` — durability barrier (the store flushes here)
``session_start``   emit        ``SessionStart(source)``
``status``          emit        ``"idle" | "running"``
``error``           emit        ``AgentErrorPayload``
==================  ==========  =====================================================================

A failing waterfall or serial listener is an error of the turn (it propagates); only ``emit``
contains errors.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeAlias, TypeVar

from dsh_kernel.abort import AbortSignal
from dsh_kernel.llm.types import LlmCallConfig, LlmFailure, Message

_log = logging.getLogger(__name__)

P = TypeVar("P")
R = TypeVar("R")


class Emitter(Generic[P]):
    """Fire-and-forget listeners; errors are logged, never raised."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._listeners: list[Callable[[P], object]] = []

    def on(self, fn: Callable[[P], object]) -> Callable[[], None]:
        self._listeners.append(fn)
        return lambda: self._listeners.remove(fn) if fn in self._listeners else None

    def emit(self, payload: P) -> None:
        for fn in tuple(self._listeners):
            try:
                fn(payload)
            except Exception:
                _log.exception("listener of %s failed", self.name)


Next = Callable[[], Awaitable[R]]
WaterfallListener = Callable[[P, Next[R]], Awaitable[R]]


class Waterfall(Generic[P, R]):
    def __init__(self, name: str) -> None:
        self.name = name
        self._listeners: list[WaterfallListener[P, R]] = []

    def on(self, fn: WaterfallListener[P, R]) -> Callable[[], None]:
        self._listeners.append(fn)
        return lambda: self._listeners.remove(fn) if fn in self._listeners else None

    async def run(self, payload: P, default: Callable[[], Awaitable[R]]) -> R:
        listeners = tuple(self._listeners)

        async def call(i: int) -> R:
            if i == len(listeners):
                return await default()
            return await listeners[i](payload, lambda: call(i + 1))

        return await call(0)


class Serial(Generic[P]):
    def __init__(self, name: str) -> None:
        self.name = name
        self._listeners: list[Callable[[P], Awaitable[None]]] = []

    def on(self, fn: Callable[[P], Awaitable[None]]) -> Callable[[], None]:
        self._listeners.append(fn)
        return lambda: self._listeners.remove(fn) if fn in self._listeners else None

    @property
    def empty(self) -> bool:
        return not self._listeners

    async def run(self, payload: P) -> None:
        for fn in tuple(self._listeners):
            await fn(payload)


# --- payloads and decisions -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PreStep:
    messages: tuple[Message, ...]
    turn: int
    step: int
    signal: AbortSignal


@dataclass(frozen=True, slots=True, kw_only=True)
class Enter:
    kind: Literal["enter"] = "enter"
    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Reject:
    kind: Literal["reject"] = "reject"
    reason: str | None = None


PreStepDecision: TypeAlias = Enter | Reject


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestPayload:
    turn: int
    step: int
    config: LlmCallConfig
    signal: AbortSignal


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestErrorPayload:
    turn: int
    step: int
    provider: str
    failure: LlmFailure
    signal: AbortSignal


@dataclass(frozen=True, slots=True, kw_only=True)
class Retry:
    kind: Literal["retry"] = "retry"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStopping:
    turn: int
    signal: AbortSignal


CheckpointReason: TypeAlias = Literal[
    "before-request", "before-tool", "step-boundary", "turn-end", "shutdown"
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    reason: CheckpointReason
    turn: int | None = None
    step: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStart:
    source: Literal["startup", "resume", "clear", "compact"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentErrorPayload:
    turn: int
    step: int | None
    error: BaseException


class AgentHooks:
    """Every interception point of one agent."""

    def __init__(self) -> None:
        self.pre_step: Waterfall[PreStep, PreStepDecision] = Waterfall("agent/pre-step")
        self.request: Waterfall[RequestPayload, LlmCallConfig] = Waterfall("agent/request")
        self.request_error: Waterfall[RequestErrorPayload, Retry | None] = Waterfall(
            "agent/request-error"
        )
        self.turn_stopping: Serial[TurnStopping] = Serial("agent/turn-stopping")
        self.checkpoint: Serial[Checkpoint] = Serial("agent/checkpoint")
        self.session_start: Emitter[SessionStart] = Emitter("agent/session-start")
        self.status: Emitter[str] = Emitter("agent/status")
        self.error: Emitter[AgentErrorPayload] = Emitter("agent/error")
