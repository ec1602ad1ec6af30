"""A model request: its one constructor, the envelope events it is sent with, and the check behind
"the log is the truth" (SPINE §1.4, §2).

``generate_request(header, messages, session_id)`` is the only place a ``GenerateRequest`` is built
from a request header and a history; the agent's live request and the dev-invariant rebuild both
use it, so the two can differ only in what they are built from.

``RequestLog`` writes the envelope of a session's requests: ``request/header`` before the first
request of this process (``reason: "initial"`` for a new session, ``"resume"`` for one with an
earlier header in its log) and whenever the header changes (``"change"``); ``request/context`` (the
route, its context window and where the window came from: ``contextWindowSource`` configured /
discovered / catalogue / default, ``contextWindowFrom`` the server lookup that reported it, and the
calibration of the token estimate the request was measured with: ``tokenRatio``, ``tokenAllowance``,
``tokenCalibration``: ``llm.calibration``) at the first request of each turn
and whenever it changes, so every turn's own events say its window (its footer and notices are
drawn from them) and every estimated count is explained by the log. A header equal to the last one writes nothing. Before either, the call is fitted to the
window (``agent.request.fit.fit_request``: the warning, the refusal, the output cap) and to the spending
budget (``agent.request.spend``: the refusal, the cap lowered to what is left), so the header logged is the
one sent — a per-request output cap included.

``assert_reconstruction(session, request)`` rebuilds the request from the log alone — the latest
logged header, and the messages projected afresh from the surface events (on purpose not
``derive_messages()``, which the live request used) — and raises ``InvariantError`` when it differs
from the request about to be sent (its ``purpose`` aside).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from dsh_kernel.agent.request.fit import fit_request
from dsh_kernel.agent.request.meter import prepared_header
from dsh_kernel.agent.request.window import ContextWindow
from dsh_kernel.errors import InvariantError
from dsh_kernel.llm.calibration import Calibration
from dsh_kernel.llm.provider import PreparedCall
from dsh_kernel.llm.types import GenerateRequest, LlmCallConfig, Message, ToolSchema
from dsh_kernel.session.derive import EpochHeader, header_equals, last_request_header, project_event
from dsh_kernel.session.log import Session
from dsh_kernel.session.payloads import RequestContext, RequestHeader, payload_of


def generate_request(
    header: EpochHeader, messages: tuple[Message, ...], session_id: str
) -> GenerateRequest:
    """The request of ``header`` (config, system prompt, tools) over ``messages``."""
    cfg = header.config
    return GenerateRequest(
        provider=cfg.provider,
        model=cfg.model,
        messages=messages,
        system=header.system,
        tools=header.tools,
        reasoning_effort=cfg.reasoning_effort,
        temperature=cfg.temperature,
        seed=cfg.seed,
        max_tokens=cfg.max_tokens,
        stop=cfg.stop,
        reasoning_passback=cfg.reasoning_passback,
        images=cfg.images is True,
        session_id=session_id,
    )


class RequestLog:
    """The ``request/header`` and ``request/context`` events of one session (module docstring)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._written = False
        latest = session.latest("request/header")
        self._last: EpochHeader | None = (
            EpochHeader.from_json(payload_of(latest, "request/header")["header"])
            if latest is not None
            else None
        )
        self._context_turn: int | None = None

    def record(
        self,
        prepared: PreparedCall,
        window: ContextWindow | None,
        system: str,
        tools: tuple[ToolSchema, ...],
        gate: Callable[[PreparedCall], PreparedCall] | None = None,
        calibration: Calibration | None = None,
    ) -> EpochHeader:
        """Fit the next request (of the session's open turn and step) to ``window``, then pass it
        through ``gate`` (the spending budget, ``agent.request.spend``), and log its envelope where it
        changed; returns its header. Raises ``LlmError(CONTEXT_WINDOW_EXCEEDED)`` for a request
        that cannot fit, or the gate's refusal (nothing is logged then). ``calibration``: the token
        estimate's, measured with and logged (default: none)."""
        turn, step = self._session.open_turn or 0, self._session.open_step or 0
        cal = calibration if calibration is not None else Calibration()
        prepared = fit_request(
            self._session,
            prepared,
            window,
            system=system,
            tools=tools,
            turn=turn,
            step=step,
            calibration=cal,
        )
        if gate is not None:
            prepared = gate(prepared)
        header = prepared_header(prepared, system=system, tools=tools)
        append = self._session.append
        if not self._written:
            reason = "initial" if self._last is None else "resume"
            append("request/header", RequestHeader(header=header.to_json(), reason=reason))
            self._written = True
        elif not header_equals(self._last, header):
            append("request/header", RequestHeader(header=header.to_json(), reason="change"))
        self._log_context(prepared.config, window, turn, cal)
        self._last = header
        return header

    def _log_context(
        self, config: LlmCallConfig, window: ContextWindow | None, turn: int, cal: Calibration
    ) -> None:
        data = RequestContext(provider=config.provider, model=config.model)
        if window is not None:
            data["contextWindow"] = window.tokens
            data["contextWindowSource"] = window.source
            if window.where is not None:
                data["contextWindowFrom"] = window.where
        if cal.calibrated:
            data["tokenRatio"] = cal.ratio
            data["tokenAllowance"] = cal.allowance
            data["tokenCalibration"] = cal.source
        if self._context_turn == turn:
            last = self._session.latest("request/context")
            if last is not None and last.data == data:
                return
        self._context_turn = turn
        self._session.append("request/context", data)


def assert_reconstruction(session: Session, request: GenerateRequest) -> None:
    """Raise ``InvariantError`` unless ``request`` is the one the log alone rebuilds."""
    events = session.events
    header = last_request_header(list(events))
    if header is None:
        raise InvariantError("request sent with no request/header in the log")
    rebuilt: list[Message] = []
    for seq in session.surface:
        m = project_event(events[seq])
        if m is not None:
            rebuilt.append(m)
    expected = generate_request(header, tuple(rebuilt), session.id)
    if replace(request, purpose=None) != expected:
        raise InvariantError(
            "request differs from the one rebuilt from the log (system + derive_messages + header)"
        )
