"""Approval: the policy that decides whether a call needs a human, and the service that asks one.

``ApprovalPolicy`` maps a tool to a mode — ``auto`` (run), ``ask`` (ask first) or ``never`` (refuse).
A tool with an explicit entry uses it. Otherwise read-only tools run (``auto``) and every other tool
follows the global mode (``ask`` unless set). The policy is plain data with a JSON round trip, so the
agent logs each change as ``approval/policy``. That event is a record, never restored: a resumed,
forked or replayed session starts from the policy the kernel is configured with (``DSH_APPROVAL``,
default ``ask``), so a journal — which may come from elsewhere — can never grant its tools ``auto``.

``ApprovalService.request(req, signal)`` asks the pluggable *answerer* (the approval widget) and
returns an ``ApprovalOutcome``. It fails closed: no answerer, an answerer that raises or returns
anything but ``allowed-once``/``allowed-always``/``rejected`` → ``unavailable``; an abort of ``signal``
→ ``cancelled``; no answer within ``timeout_s`` → ``timeout``. Only the two ``allowed-*`` outcomes
grant. ``allowed-always`` also sets that tool's mode to ``auto`` in the service's policy.

The service logs nothing itself. Its ``ApprovalRecorder`` callbacks let the agent append
``approval/asked`` before the answerer is consulted, ``approval/decided`` once per request (also when
the waiting task is cancelled), and ``approval/policy`` when ``allowed-always`` changed the policy.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

from dsh_kernel.abort import AbortCause, AbortSignal
from dsh_kernel.errors import UsageError
from dsh_kernel.ids import ApprovalRequestId, CallId, new_approval_id
from dsh_kernel.jsonvalue import JsonObject, JsonValue

if TYPE_CHECKING:
    from dsh_kernel.tools.types import ToolDefinition

_log = logging.getLogger(__name__)

ApprovalMode: TypeAlias = Literal["ask", "auto", "never"]
ApprovalDecision: TypeAlias = Literal["allow", "ask", "deny"]
ApprovalOutcome: TypeAlias = Literal[
    "allowed-once", "allowed-always", "rejected", "cancelled", "unavailable", "timeout"
]
ANSWERS: Final[frozenset[str]] = frozenset({"allowed-once", "allowed-always", "rejected"})
"""What an answerer may return; anything else counts as no answer (``unavailable``)."""
GRANTING: Final[frozenset[str]] = frozenset({"allowed-once", "allowed-always"})


def _mode(value: JsonValue, what: str) -> ApprovalMode:
    match value:
        case "ask" | "auto" | "never":
            return value
        case _:
            raise ValueError(f"{what}: expected one of ask, auto, never; got {value!r}")


class ApprovalPolicy:
    """Per-tool approval modes over a global mode for tools that are not read-only."""

    __slots__ = ("_default", "_tools")

    def __init__(
        self, default: ApprovalMode = "ask", tools: Mapping[str, ApprovalMode] | None = None
    ) -> None:
        self._default: ApprovalMode = _mode(default, "default")
        self._tools: dict[str, ApprovalMode] = {
            k: _mode(v, f"tools.{k}") for k, v in (tools or {}).items()
        }

    @property
    def default(self) -> ApprovalMode:
        return self._default

    @property
    def tools(self) -> Mapping[str, ApprovalMode]:
        return dict(self._tools)

    def mode_for(self, name: str, *, read_only: bool) -> ApprovalMode:
        explicit = self._tools.get(name)
        if explicit is not None:
            return explicit
        return "auto" if read_only else self._default

    def decide(self, defn: ToolDefinition) -> ApprovalDecision:
        match self.mode_for(defn.name, read_only=defn.read_only):
            case "auto":
                return "allow"
            case "ask":
                return "ask"
            case "never":
                return "deny"

    def set(self, tool: str | None, mode: ApprovalMode | None) -> None:
        """Set one tool's mode (``mode=None`` removes the entry), or the global mode (``tool=None``)."""
        if tool is None:
            if mode is None:
                raise UsageError("the global approval mode cannot be cleared")
            self._default = _mode(mode, "mode")
        elif mode is None:
            self._tools.pop(tool, None)
        else:
            self._tools[tool] = _mode(mode, "mode")

    def copy(self) -> ApprovalPolicy:
        return ApprovalPolicy(self._default, self._tools)

    def to_json(self) -> JsonObject:
        tools: JsonObject = {k: self._tools[k] for k in sorted(self._tools)}
        return {"default": self._default, "tools": tools}

    @classmethod
    def from_json(cls, value: JsonValue) -> ApprovalPolicy:
        if not isinstance(value, dict):
            raise ValueError("approval policy: expected an object")
        tools = value.get("tools", {})
        if not isinstance(tools, dict):
            raise ValueError("approval policy.tools: expected an object")
        return cls(
            _mode(value.get("default", "ask"), "approval policy.default"),
            {k: _mode(v, f"approval policy.tools.{k}") for k, v in tools.items()},
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ApprovalPolicy):
            return NotImplemented
        return self._default == other._default and self._tools == other._tools

    def __hash__(self) -> int:
        return hash((self._default, tuple(sorted(self._tools.items()))))

    def __repr__(self) -> str:
        return f"ApprovalPolicy(default={self._default!r}, tools={self._tools!r})"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """One question to the human. ``arguments`` is the raw call text, for display only."""

    tool_name: str
    call_id: CallId | None = None
    reason: str | None = None
    arguments: str | None = None


Answerer: TypeAlias = Callable[[ApprovalRequestId, ApprovalRequest], Awaitable[object]]
"""Asks the human; returns ``allowed-once``, ``allowed-always`` or ``rejected``. It is cancelled
(``CancelledError`` at its await) when the request is aborted or times out."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRecorder:
    """Callbacks through which the agent logs approval events. Exceptions propagate: a log that
    cannot record the question must not let the call proceed."""

    on_asked: Callable[[ApprovalRequestId, ApprovalRequest], None] | None = None
    on_decided: Callable[[ApprovalRequestId, ApprovalOutcome], None] | None = None
    on_policy: Callable[[ApprovalPolicy, str], None] | None = None
    """Called with the updated policy and its source (``"allowed-always"``)."""


class ApprovalService:
    """Asks the answerer about the calls the policy sends to a human, and logs the question and answer."""

    def __init__(
        self,
        answerer: Answerer | None = None,
        recorder: ApprovalRecorder | None = None,
        timeout_s: float | None = None,
        *,
        policy: ApprovalPolicy | None = None,
    ) -> None:
        if timeout_s is not None and timeout_s <= 0:
            raise UsageError("approval timeout_s must be positive (or None to wait forever)")
        self.answerer = answerer
        """Replaceable at run time (the kernel installs the widget answerer once it can draw)."""
        self.recorder = recorder or ApprovalRecorder()
        self.timeout_s = timeout_s
        self.policy = policy

    async def request(self, request: ApprovalRequest, signal: AbortSignal) -> ApprovalOutcome:
        rid = new_approval_id()
        if self.recorder.on_asked is not None:
            self.recorder.on_asked(rid, request)
        try:
            outcome = await self._ask(rid, request, signal)
        except asyncio.CancelledError:
            self._decided(rid, "cancelled")
            raise
        self._decided(rid, outcome)
        if outcome == "allowed-always" and self.policy is not None:
            self.policy.set(request.tool_name, "auto")
            if self.recorder.on_policy is not None:
                self.recorder.on_policy(self.policy, "allowed-always")
        return outcome

    def _decided(self, rid: ApprovalRequestId, outcome: ApprovalOutcome) -> None:
        if self.recorder.on_decided is not None:
            self.recorder.on_decided(rid, outcome)

    async def _ask(
        self, rid: ApprovalRequestId, request: ApprovalRequest, signal: AbortSignal
    ) -> ApprovalOutcome:
        if signal.aborted:
            return "cancelled"
        answerer = self.answerer
        if answerer is None:
            return "unavailable"
        task = asyncio.ensure_future(_answer(answerer, rid, request))
        aborted = asyncio.get_running_loop().create_future()

        def on_abort(cause: AbortCause) -> None:
            del cause
            if not aborted.done():
                aborted.set_result(None)

        dispose = signal.add_callback(on_abort)
        try:
            done, _ = await asyncio.wait(
                {task, aborted}, timeout=self.timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:
            await _stop(task)
            raise
        finally:
            dispose()
            aborted.cancel()
        if task in done:
            return task.result()
        await _stop(task)
        return "cancelled" if signal.aborted else "timeout"


async def _answer(
    answerer: Answerer, rid: ApprovalRequestId, request: ApprovalRequest
) -> ApprovalOutcome:
    try:
        answer = await answerer(rid, request)
    except asyncio.CancelledError:
        # Our own cancellation is handled by the caller; an answerer cancelling itself is no answer.
        me = asyncio.current_task()
        if me is not None and me.cancelling():
            raise
        return "unavailable"
    except Exception:
        _log.warning("approval answerer failed; treating as unavailable", exc_info=True)
        return "unavailable"
    match answer:
        case "allowed-once":
            return "allowed-once"
        case "allowed-always":
            return "allowed-always"
        case "rejected":
            return "rejected"
        case "unavailable":  # the answerer knows nobody can answer (e.g. no frontend)
            return "unavailable"
        case "timeout":  # the answerer ran its own clock
            return "timeout"
        case _:
            _log.warning("approval answerer returned %r; treating as unavailable", answer)
            return "unavailable"


async def _stop(task: asyncio.Future[ApprovalOutcome]) -> None:
    """Cancel the answerer and wait until it has actually stopped."""
    task.cancel()
    await asyncio.wait({task})
