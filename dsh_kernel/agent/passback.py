"""Whether a server wants reasoning back, learned from its 400: one retry the other way, remembered.

A generic OpenAI-compatible server may require ``reasoning_content`` on the assistant messages it
is sent (DeepSeek behind OpenRouter or LiteLLM: HTTP 400 "Missing `reasoning_content` field in the
assistant message at message index 2") or refuse it (a strict validator: "Extra inputs are not
permitted"); nothing says which before it answers. ``PassbackRetry`` is a listener on the
``request_error`` waterfall, ahead of the retry policy. When the failed request's provider
(``llm.provider.LearnsPassback``) reads the failure as a 400 about ``reasoning_content`` that the
other dialect would answer, the listener:

1. learns the dialect (``send`` or ``omit``; ``llm.types.ReasoningPassback``), which the agent puts in
   the config of every later request of the session — so the retried request's ``request/header``
   is a ``change`` carrying ``config.reasoningPassback``, listed in ``adapterDefaults`` (``mark``:
   the server chose it, not the user): the log says what was sent, the reconstruction check
   (``agent.request.envelope.assert_reconstruction``) rebuilds it, and a resumed session starts from it;
2. appends ``llm/retry`` (``mode`` and ``policyKey`` ``reasoning-passback``, retry 1, no delay) and
   ``llm/retry-started``, as every retry does (the views show the notice; the store counts the
   attempt);
3. returns ``Retry()``: the loop re-issues the request in the same step.

At most once per step: a second such failure in the step goes on down the waterfall (the retry
policy does not retry ``INVALID_REQUEST``), so two dialects never alternate. The dialect is kept
per provider id (``dialect_for``): it belongs to the server that taught it, so a switch to another
provider sends none, and a switch back sends it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from dsh_kernel.agent.hooks import Next, RequestErrorPayload, Retry
from dsh_kernel.ids import new_retry_id
from dsh_kernel.llm.codec import failure_to_json
from dsh_kernel.llm.provider import LearnsPassback, PreparedCall, Provider
from dsh_kernel.llm.types import ReasoningPassback
from dsh_kernel.session.derive import last_request_header
from dsh_kernel.session.log import Session

POLICY_KEY = "reasoning-passback"
"""The ``llm/retry`` ``mode`` and ``policyKey`` of a passback retry."""


class PassbackRetry:
    """The ``request_error`` listener and the dialect it learned (module docstring)."""

    def __init__(self, session: Session, providers: Mapping[str, Provider]) -> None:
        self._session = session
        self._providers = providers
        self._learned: dict[str, ReasoningPassback] = {}
        header = last_request_header(list(session.events))
        if header is not None and header.config.reasoning_passback is not None:
            self._learned[header.config.provider] = header.config.reasoning_passback

    def dialect_for(self, provider_id: str) -> ReasoningPassback | None:
        """What the next requests to ``provider_id`` send; ``None`` until its server has said."""
        return self._learned.get(provider_id)

    def mark(self, prepared: PreparedCall) -> PreparedCall:
        """``prepared`` with ``reasoningPassback`` among its adapter defaults when it carries one:
        the header's way of saying the route chose the value, not the user."""
        if prepared.config.reasoning_passback is None:
            return prepared
        return replace(prepared, adapter_defaults=prepared.adapter_defaults | {"reasoningPassback"})

    def _retried_in_step(self, turn: int, step: int) -> bool:
        for ev in reversed(self._session.events):
            if ev.type in ("step/start", "turn/start"):
                return False
            if (
                ev.type == "llm/retry"
                and ev.data.get("policyKey") == POLICY_KEY
                and ev.data.get("turn") == turn
                and ev.data.get("step") == step
            ):
                return True
        return False

    async def __call__(
        self, payload: RequestErrorPayload, next: Next[Retry | None]
    ) -> Retry | None:
        provider = self._providers.get(payload.provider)
        if payload.signal.aborted or not isinstance(provider, LearnsPassback):
            return await next()
        wanted = provider.passback_retry(payload.failure, self._learned.get(payload.provider))
        if wanted is None or self._retried_in_step(payload.turn, payload.step):
            return await next()
        self._learned[payload.provider] = wanted
        retry_id = new_retry_id()
        where = {"retryId": retry_id, "turn": payload.turn, "step": payload.step}
        self._session.append(
            "llm/retry",
            {
                **where,
                "provider": payload.provider,
                "mode": POLICY_KEY,
                "policyKey": POLICY_KEY,
                "retry": 1,
                "delayMs": 0,
                "failure": failure_to_json(payload.failure),
            },
        )
        self._session.append("llm/retry-started", {**where, "retry": 1})
        return Retry()
