"""Retry of failed model calls, as agent policy (SPINE §2.9).

``RetryHandler`` is a listener on the ``request_error`` waterfall. For a retryable failure it:

0. asks ``before_retry`` (the agent's: whether the spending budget can pay for the retry,
   ``StepRequests.check_retry``), which refuses by raising — then nothing is logged, nobody waits,
   and the turn ends with that error;
1. appends ``llm/retry{retryId, turn, step, provider, mode, policyKey, retry, maxRetries?, delayMs,
   failure}``;
2. sleeps ``delayMs`` (cancellably — a cancel during the sleep writes no started event);
3. appends ``llm/retry-started{retryId, turn, step, retry}``;
4. returns ``Retry()``, and the loop re-issues the request *in the same step*.

Counting comes from the log: ``retry = 1 +`` the last ``llm/retry.retry`` for the same
``(turn, step, provider, policyKey)``, so the count survives anything that re-derives state.

Delay for retry *n*: ``min(initial · 2^(n−1), max) · uniform(1 − j, 1 + j)`` capped at ``max``; a
provider ``Retry-After`` of at most ``max`` replaces it exactly (no jitter); a longer one makes the
``normal`` mode give up and the ``always`` mode use its own backoff. Cancellation beats retry.

Some codes are retried fewer times than ``max_retries`` (``code_max_retries``; the ``normal`` mode
only): ``EMPTY_RESPONSE`` at most once (``DEFAULT_CODE_MAX_RETRIES``). An empty answer that a retry
does not mend is not mended by four more, and a server that answers HTTP 200 with no bytes has
already been asked once more without streaming by its adapter (the probe reads the real error); the
harness's five retries cost ~15 s of backoff before the user heard anything. An overflow
(``CONTEXT_WINDOW_EXCEEDED``) is never retried as it is: it would fail the same way.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from dsh_kernel.agent.hooks import Next, RequestErrorPayload, Retry
from dsh_kernel.ids import new_retry_id
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.codec import failure_to_json
from dsh_kernel.llm.types import LlmFailure
from dsh_kernel.session.codec import canonical
from dsh_kernel.session.log import Session
from dsh_kernel.session.payloads import LlmRetry, LlmRetryStarted, payload_of

DEFAULT_RETRYABLE = frozenset({"EMPTY_RESPONSE", "RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT"})
DEFAULT_CODE_MAX_RETRIES: Mapping[str, int] = MappingProxyType({"EMPTY_RESPONSE": 1})


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """When and how long to wait before retrying a failed model call within its step."""

    mode: Literal["normal", "always", "off"] = "normal"
    max_retries: int = 5
    retryable_codes: frozenset[str] = field(default_factory=lambda: DEFAULT_RETRYABLE)
    code_max_retries: Mapping[str, int] = field(default_factory=lambda: DEFAULT_CODE_MAX_RETRIES)
    """Codes retried fewer than ``max_retries`` times (a failure of the code counts every retry of
    its step so far)."""
    initial_delay_ms: int = 500
    max_delay_ms: int = 10_000
    jitter_ratio: float = 0.1

    @property
    def key(self) -> str:
        """Canonical JSON of the behaviour fields (codes sorted)."""
        body: JsonObject = {
            "mode": self.mode,
            "initialDelayMs": self.initial_delay_ms,
            "maxDelayMs": self.max_delay_ms,
            "jitterRatio": self.jitter_ratio,
        }
        if self.mode == "normal":
            body["maxRetries"] = self.max_retries
            body["retryableCodes"] = list(sorted(self.retryable_codes))
            if self.code_max_retries:
                body["codeMaxRetries"] = dict(sorted(self.code_max_retries.items()))
        return canonical(body)

    def retries_for(self, code: str) -> int:
        """How many retries a failure with ``code`` may have in its step (``normal`` mode)."""
        return min(self.max_retries, self.code_max_retries.get(code, self.max_retries))

    def delay_ms(
        self, retry: int, provider_retry_after_ms: int | None, rng: random.Random
    ) -> int | None:
        """Milliseconds to wait before retry number ``retry``; ``None`` means give up."""
        if provider_retry_after_ms is not None and provider_retry_after_ms > 0:
            if provider_retry_after_ms <= self.max_delay_ms:
                return provider_retry_after_ms
            if self.mode == "normal":
                return None
        base = min(self.initial_delay_ms * 2 ** (retry - 1), self.max_delay_ms)
        jitter = rng.uniform(1 - self.jitter_ratio, 1 + self.jitter_ratio)
        return int(min(base * jitter, self.max_delay_ms))


Sleep = Callable[[float], Awaitable[None]]
BeforeRetry = Callable[[LlmFailure], None]
"""Called with the failure before a retry of it is scheduled; raises to refuse the retry."""


class RetryHandler:
    """The ``request_error`` listener. ``sleep`` and ``rng`` are injectable for tests."""

    def __init__(
        self,
        session: Session,
        policy: RetryPolicy | None = None,
        *,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        before_retry: BeforeRetry | None = None,
    ) -> None:
        self.session = session
        self.policy = policy or RetryPolicy()
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.before_retry = before_retry

    def _last_retry(self, turn: int, step: int, provider: str, key: str) -> tuple[int, str | None]:
        for ev in reversed(self.session.events):
            if ev.type in ("step/start", "turn/start"):
                break
            if ev.type != "llm/retry":
                continue
            d = payload_of(ev, "llm/retry")
            if (d["turn"], d["step"], d["provider"], d["policyKey"]) == (turn, step, provider, key):
                return d["retry"], d["retryId"]
        return 0, None

    async def __call__(
        self, payload: RequestErrorPayload, next: Next[Retry | None]
    ) -> Retry | None:
        policy = self.policy
        failure = payload.failure
        if payload.signal.aborted or policy.mode == "off":
            return await next()
        if policy.mode == "normal" and failure.code not in policy.retryable_codes:
            return await next()
        key = policy.key
        last, retry_id = self._last_retry(payload.turn, payload.step, payload.provider, key)
        retry = last + 1
        if policy.mode == "normal" and retry > policy.retries_for(failure.code):
            return await next()
        delay = policy.delay_ms(retry, failure.provider_retry_after_ms, self.rng)
        if delay is None:
            return await next()
        if self.before_retry is not None:
            self.before_retry(failure)
        retry_id = retry_id or new_retry_id()
        data = LlmRetry(
            retryId=retry_id,
            turn=payload.turn,
            step=payload.step,
            provider=payload.provider,
            mode=policy.mode,
            policyKey=key,
            retry=retry,
            delayMs=delay,
            failure=failure_to_json(failure),
        )
        if policy.mode == "normal":
            data["maxRetries"] = policy.retries_for(failure.code)
        self.session.append("llm/retry", data)
        await self.sleep(delay / 1000)
        if payload.signal.aborted:
            return await next()
        self.session.append(
            "llm/retry-started",
            LlmRetryStarted(retryId=retry_id, turn=payload.turn, step=payload.step, retry=retry),
        )
        return Retry()
