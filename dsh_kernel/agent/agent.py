"""``Agent``: the handle and the turn/step loop (SPINE §1.3–§1.4, §3).

The agent owns a ``Session`` (the log) and an ``Inbox`` (a projection of it). Sends put user messages
in the inbox and, when they wake the agent, start its driver task (``agent.driver``), which runs
turns until the inbox is empty; each turn runs steps (one model call plus its tools) until the model
owes nothing. Beside each step: the request (``agent.request.envelope``), the answer
(``agent.response``), tools and approvals (``agent.tool_calls``), the repeated-call guard
(``agent.repeats``), the context window (``agent.request.window``, ``agent.request.fit``), the
spending budget (``agent.request.spend``), the passback and retry policies (``agent.passback``,
``agent.retry``). A turn that ends without the model's reply still completes: ``note: no-reply``
(after a tool step the model ended its turn with nothing) or ``note: repeated-call`` (the guard).

Event order of a turn (exact): ``turn/start`` · [claim splices] · ``step/start`` · ``user/message``* ·
``context/warning``? · ``request/header``? · ``request/context``? · ``assistant/chunk``* · ``assistant/message`` ·
(``tool/call`` … ``tool/result``)* · ``step/end`` · … · [overflow note] · ``turn/end`` (always written).

Cancellation: ``cancel(cause)`` aborts the activity's ``AbortSignal`` (first cause wins), which
cancels the driver task; the loop finalises what the user saw (an ``interrupted`` assistant message
of the visible text), the scheduler commits drained and synthetic tool results, and the turn ends
``aborted{reason: cause}``. Without ``keep_inbox`` the inbox is durably cleared, even when idle.

Compaction (``agent.compaction.run``, ``agent.compact()``; SPINE §7.1): before each request, on pressure;
after a request that did not fit, once per step, then the request is retried; by hand between turns.

Dev invariants (``check_invariants=True``, or ``DSH_DEV_INVARIANTS=1``): every request is compared
with the one rebuilt from the log alone, and the log passes the structural checker after each turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

from dsh_kernel.abort import USER_CANCEL, AbortCause, AbortSignal
from dsh_kernel.agent.compaction.run import Compaction, CompactionResult, CompactionSettings
from dsh_kernel.agent.driver import Driver, Status
from dsh_kernel.agent.hooks import (
    AgentErrorPayload,
    AgentHooks,
    Checkpoint,
    CheckpointReason,
    Enter,
    PreStep,
    PreStepDecision,
    Reject,
    RequestErrorPayload,
    Retry,
    SessionStart,
    TurnStopping,
)
from dsh_kernel.agent.inbox import Inbox, Target
from dsh_kernel.agent.passback import PassbackRetry
from dsh_kernel.agent.repeats import DEFAULT_REPEAT_LIMIT, RepeatGuard
from dsh_kernel.agent.request.fit import drop_overflowed_turn
from dsh_kernel.agent.request.spend import SpendGate
from dsh_kernel.agent.request.step import StepRequests, StepSettings
from dsh_kernel.agent.request.window import ContextWindows
from dsh_kernel.agent.response import append_response, stream_response
from dsh_kernel.agent.retry import RetryHandler, RetryPolicy, Sleep
from dsh_kernel.agent.system_prompt import RuntimeContext, SystemPrompt
from dsh_kernel.agent.tool_calls import ApprovalLog, run_step_tools
from dsh_kernel.errors import LlmError, UsageError, error_chain
from dsh_kernel.ids import new_message_id, new_session_id
from dsh_kernel.llm.calibration import Calibration, Calibrations
from dsh_kernel.llm.codec import message_to_json, usage_to_json
from dsh_kernel.llm.provider import Provider
from dsh_kernel.llm.types import (
    MODEL_STOPPED,
    FinishAborted,
    FinishError,
    FinishMaxTokens,
    LlmCallConfig,
    LlmFailure,
    Message,
    ModelInfo,
    TextBlock,
    ToolCallBlock,
    UserSource,
)
from dsh_kernel.session.check.invariants import assert_invariants
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.log import Clock, Session, wall_clock_ms
from dsh_kernel.session.log_images import record_images
from dsh_kernel.session.payloads import (
    EndAborted,
    EndBlocked,
    EndCompleted,
    EndError,
    EndErrorDetail,
    EndMaxSteps,
    EndMaxTokens,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnEndReason,
    TurnStart,
)
from dsh_kernel.tools.approval import (
    Answerer,
    ApprovalMode,
    ApprovalPolicy,
    ApprovalService,
)
from dsh_kernel.tools.lean import ToolSchemaForm
from dsh_kernel.tools.pipeline import PreDecision, PreExecuteInput, ToolHooks, ToolRuntime
from dsh_kernel.tools.registry import ToolRegistry
from dsh_kernel.tools.types import ToolLike

StepEnding = Literal["completed", "max-tokens", "no-reply", "repeated-call"]
"""How a step ended the turn: the model answered (or a tool concluded the turn), its answer was cut
off, it ended without a reply after a tool step, or it kept repeating a call (``agent.repeats``)."""
StepOutcome = StepEnding | None
"""``None``: tools ran, the model is asked again."""


# --- how a turn ends (the `turn/end` reason) ------------------------------------------------------


def ended_by(outcome: StepEnding) -> TurnEndReason:
    """The end reason of a step that ended the turn by itself."""
    match outcome:
        case "completed":
            return EndCompleted(kind="completed")
        case "max-tokens":
            return EndMaxTokens(kind="max-tokens")
        case "no-reply" | "repeated-call":
            return EndCompleted(kind="completed", note=outcome)


def blocked(message: str | None) -> EndBlocked:
    """A pre-step hook rejected the step (``message``: its reason, when it gave one)."""
    return EndBlocked(kind="blocked", message=message) if message else EndBlocked(kind="blocked")


def aborted(cause: AbortCause | None) -> EndAborted:
    """The turn was cancelled: by ``cause``, or by the task's disposal when no signal fired."""
    return EndAborted(kind="aborted", reason=(cause or AbortCause(kind="disposed")).to_json())


def failed_llm(failure: LlmFailure) -> EndError:
    """The provider call failed; the detail has the keys of ``llm.codec.failure_to_json``."""
    detail = EndErrorDetail(message=failure.message, code=failure.code)
    if failure.status is not None:
        detail["status"] = failure.status
    if failure.provider_retry_after_ms is not None:
        detail["providerRetryAfterMs"] = failure.provider_retry_after_ms
    if failure.request_id is not None:
        detail["requestId"] = failure.request_id
    if failure.detail is not None:
        detail["detail"] = failure.detail
    return EndError(kind="error", error=detail)


def failed(exc: Exception) -> EndError:
    """Any other exception: its chained message and its stable ``code`` (``UNKNOWN`` without one)."""
    code = getattr(exc, "code", None)
    detail = EndErrorDetail(
        message=error_chain(exc), code=code if isinstance(code, str) else "UNKNOWN"
    )
    return EndError(kind="error", error=detail)


class Agent:
    """An agent over one session. See the module docstring."""

    def __init__(
        self,
        *,
        provider: Provider,
        model: str | None = None,
        tools: Sequence[ToolLike] = (),
        system: str | SystemPrompt | None = None,
        session: Session | None = None,
        reasoning_effort: str | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
        retry_policy: RetryPolicy | None = None,
        approval_policy: ApprovalPolicy | None = None,
        answerer: Answerer | None = None,
        approval_timeout_s: float | None = None,
        registry: ToolRegistry | None = None,
        max_parallel_tool_calls: int = 10,
        max_steps_per_turn: int = 100,
        repeat_limit: int = DEFAULT_REPEAT_LIMIT,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        check_invariants: bool | None = None,
        context_windows: ContextWindows | None = None,
        token_calibrations: Calibrations | None = None,
        compaction: CompactionSettings | None = None,
        spend: SpendGate | None = None,
    ) -> None:
        self.providers: dict[str, Provider] = {provider.id: provider}
        self.provider = provider
        chosen = model or getattr(provider, "default_model", None)
        if not isinstance(chosen, str) or not chosen:
            raise UsageError("Agent needs a model id: Agent(provider=…, model='…')")
        self.model: str = chosen
        self.reasoning_effort = reasoning_effort
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens
        self.windows = context_windows or ContextWindows()  # each route's window (agent.window)
        self.calibrations = token_calibrations or Calibrations()
        """What each route's server counts against the token estimate (``llm.calibration``)."""
        self.spend = spend  # the spending budget each request is held to (agent.spend)
        self.tool_schemas: ToolSchemaForm = "auto"
        """``full``, ``lean`` or ``auto`` (``dsh_kernel.tools.lean.lean_for``)."""
        self.images: bool | None = None
        """Images as images (``True``), as descriptions (``False``), or as the catalogue says."""
        self.session = (
            session
            if session is not None
            else Session(
                header=SessionHeader(
                    id=new_session_id(), created_at=(clock or wall_clock_ms)(), cwd=os.getcwd()
                ),
                clock=clock,
            )
        )
        self.hooks = AgentHooks()
        self.inbox = Inbox(self.session)
        self.inbox.replay(self.session.events, self.session.header.seed_length or 0)
        if isinstance(system, SystemPrompt):
            self.system_prompt = system
        else:
            self.system_prompt = SystemPrompt.default(system)
        self.runtime_context = RuntimeContext()
        self.registry = registry or ToolRegistry()
        for t in tools:
            self.registry.register(t)
        self.approval_policy = approval_policy or ApprovalPolicy()
        self._approval_log = ApprovalLog(self.session)
        self.approval = ApprovalService(
            answerer,
            self._approval_log.recorder(),
            approval_timeout_s,
            policy=self.approval_policy,
        )
        self.tool_runtime = ToolRuntime(
            self.registry,
            self.approval,
            self.approval_policy,
            hooks=ToolHooks(pre_execute=(self._before_tool,)),
            clock=clock,  # the edge tests fake: one clock for the log and the tool bodies
        )
        self.max_parallel_tool_calls = max_parallel_tool_calls
        if max_steps_per_turn < 1:
            raise UsageError("max_steps_per_turn must be at least 1")
        self.max_steps_per_turn = max_steps_per_turn
        if repeat_limit < 0:
            raise UsageError("repeat_limit must be 0 (off) or more")
        self.repeats = RepeatGuard(repeat_limit)
        """The repeated-call guard (``agent.repeats``); ``.limit`` may change between turns."""
        self.passback = PassbackRetry(self.session, self.providers)
        self.hooks.request_error.on(self.passback)
        self.retry = RetryHandler(self.session, retry_policy, sleep=sleep or asyncio.sleep)
        self.hooks.request_error.on(self.retry)
        dev = os.environ.get("DSH_DEV_INVARIANTS", "").strip().lower() in ("1", "true", "yes", "on")
        self.check_invariants = dev if check_invariants is None else check_invariants
        self._driver = Driver(
            run_turn=self._turn,
            has_pending=lambda: self.inbox.has_pending,
            on_status=self.hooks.status.emit,
            on_first_start=self._session_start,
            name=f"dsh-agent-{self.id}",
        )
        self.compaction = Compaction(self.session, compaction)
        """Compaction of this session's history (``agent.compaction.run``): ``.auto`` switches the
        automatic one; ``compact()`` runs one by hand."""
        self._requests = StepRequests(
            self.session,
            providers=self.providers,
            windows=self.windows,
            registry=self.registry,
            passback=self.passback,
            hooks=self.hooks,
            compaction=self.compaction,
            check_invariants=self.check_invariants,
            calibrations=self.calibrations,
        )
        self.retry.before_retry = self._requests.check_retry

        async def before_summary() -> None:
            await self._checkpoint("before-request", self.session.open_turn, self.session.open_step)

        self.compaction.before_call = before_summary
        self._phase_turn = self.session.last_turn
        self._phase_step = 0

    # --- public state ------------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def status(self) -> Status:
        return self._driver.status

    @property
    def last_error(self) -> BaseException | None:
        """The exception that ended the last failed turn (already logged as turn/end{error})."""
        return self._driver.last_error

    @property
    def model_info(self) -> ModelInfo:
        return self.provider.model_info(self.model)

    def set_route(self, *, provider: Provider | None = None, model: str | None = None) -> None:
        """Switch provider and/or model for the next request (logged as a header change)."""
        if provider is not None:
            self.providers[provider.id] = provider
            self.provider = provider
        if model is not None:
            self.model = model

    def set_reasoning(self, effort: str | None) -> None:
        """Set the reasoning effort of the next requests (``None``: the model's default), checked
        against the current model first: ``LlmError(UNSUPPORTED_REASONING_EFFORT)`` for one it
        does not take. Logged as a header change with the next request."""
        self.provider.prepare_call(
            LlmCallConfig(provider=self.provider.id, model=self.model, reasoning_effort=effort)
        )
        self.reasoning_effort = effort

    def effective_reasoning(self) -> tuple[str | None, bool]:
        """``(the effort the next request sends, whether it is the model's default)``; raises as
        ``set_reasoning`` when the effort set is one the current model does not take."""
        prepared = self.provider.prepare_call(
            LlmCallConfig(
                provider=self.provider.id, model=self.model, reasoning_effort=self.reasoning_effort
            )
        )
        return prepared.config.reasoning_effort, "reasoningEffort" in prepared.adapter_defaults

    # --- delivery ----------------------------------------------------------------------------------

    def _as_message(self, message: str | Message) -> Message:
        if isinstance(message, Message):
            return message
        return Message(
            id=new_message_id(),
            role="user",
            content=(TextBlock(text=message),),
            source=UserSource(),
        )

    def send(self, message: str | Message, target: Target, *, wakeup: bool) -> Message:
        msg = self._as_message(message)
        if wakeup and self._driver.aborting():
            # An abort is in flight: queue for a fresh turn and replay once idle.
            self.inbox.append("next-turn", msg)
            self._driver.latch()
            return msg
        self.inbox.append(target, msg)
        if wakeup:
            self._driver.wake()
        return msg

    def followup(self, message: str | Message) -> Message:
        """Queue a message as its own turn (FIFO) and wake the agent. No completion handle: await
        ``when_idle()``."""
        return self.send(message, "next-turn", wakeup=True)

    def steer(self, message: str | Message) -> Message:
        """Tell the running agent something now: it enters at the next step boundary."""
        return self.send(message, "next-step", wakeup=True)

    def inject(self, message: str | Message) -> Message:
        """Add context for the next step without waking the agent."""
        return self.send(message, "next-step", wakeup=False)

    def cancel(self, cause: AbortCause = USER_CANCEL, *, keep_inbox: bool = False) -> None:
        if not keep_inbox:
            self.inbox.clear()
        self._driver.abort(cause, keep_pending=keep_inbox)

    async def when_idle(self) -> None:
        """Resolve once no driver remains (following any queued work). Raises the
        ``InvariantError`` that ended a turn: dev invariants are bugs of ours, never the user's."""
        await self._driver.when_idle()

    async def run_maintenance(self, task: Callable[[AbortSignal], Awaitable[None]]) -> None:
        """Run ``task`` between turns while the status stays ``idle``; waking input waits for it.
        Raises if the agent is busy."""
        await self._driver.run_maintenance(task)

    async def compact(self) -> CompactionResult | None:
        """Compact the history now, between turns, even below the automatic threshold
        (``agent.compaction.run``); ``None`` when there is nothing to replace. Raises ``UsageError``
        when the agent is busy or a compaction is already under way."""
        done: list[CompactionResult | None] = [None]

        async def task(signal: AbortSignal) -> None:
            route = await self._requests.route(
                self._step_settings(), self._phase_turn, self.system_prompt.render(), signal
            )
            done[0] = await self.compaction.run(route, trigger="manual", turn=None)
            await self._checkpoint("turn-end", None, None)

        await self.run_maintenance(task)
        return done[0]

    def _session_start(self) -> None:
        source = "resume" if self.session.seed_length else "startup"
        self.hooks.session_start.emit(SessionStart(source=source))

    # --- turn --------------------------------------------------------------------------------------

    async def _turn(self, signal: AbortSignal) -> bool:
        turn = self._phase_turn + 1
        self._phase_turn, self._phase_step = turn, 0
        self.session.append("turn/start", TurnStart(turn=turn))
        target: Target = "next-turn"
        ends: TurnEndReason | None = None
        self.repeats.begin_turn()
        after_tools = False  # the previous step of this turn ran tools
        try:
            while True:
                step = self._phase_step + 1
                claimed = self.inbox.claim(target)
                system = self.system_prompt.render()
                ctx_msg = self.runtime_context.project(self.session.derive_messages())
                entered = tuple(claimed) + ((ctx_msg,) if ctx_msg is not None else ())
                pre = PreStep(messages=entered, turn=turn, step=step, signal=signal)

                async def default(pre: PreStep = pre) -> PreStepDecision:
                    return Enter(messages=pre.messages)

                decision = await self.hooks.pre_step.run(pre, default)
                await self._checkpoint("step-boundary", turn, None)
                if isinstance(decision, Reject):
                    ends = blocked(decision.reason)
                    return False
                if ends is not None and not decision.messages:
                    break
                if self._phase_step == 0 and not decision.messages:
                    ends = EndCompleted(kind="completed")
                    return False
                if step > self.max_steps_per_turn:
                    # A model that keeps calling tools would otherwise run forever. Every call of
                    # the last step already has its result, so the history stays valid.
                    for m in claimed:  # claimed input is not lost: queue it again
                        self.inbox.append("next-turn", m)
                    ends = EndMaxSteps(kind="max-steps", limit=self.max_steps_per_turn)
                    return False
                self.session.append("step/start", StepStart(turn=turn, step=step))
                self._phase_step = step
                try:
                    for m in decision.messages:
                        record_images(self.session, m.content)
                        self.session.append("user/message", message_to_json(m), surface_op="append")
                    outcome = await self._step(turn, step, system, signal, after_tools)
                    after_tools = outcome is None
                    if ends is None or ends["kind"] != "max-tokens":
                        ends = ended_by(outcome) if outcome is not None else None
                finally:
                    self.session.append("step/end", StepEnd(turn=turn, step=step))
                    with contextlib.suppress(Exception):
                        await self._checkpoint("step-boundary", turn, step)
                if ends is not None and not self.inbox.next_step:
                    await self.hooks.turn_stopping.run(TurnStopping(turn=turn, signal=signal))
                if ends is not None and not self.inbox.next_step:
                    break
                target = "next-step"
        except asyncio.CancelledError:
            ends = aborted(signal.reason if signal.aborted else None)
            raise
        except LlmError as exc:
            ends = failed_llm(exc.failure)
            drop_overflowed_turn(self.session, turn, exc.failure)
            self.windows.learn(self.provider, self.model, exc.failure)
            self.hooks.error.emit(
                AgentErrorPayload(turn=turn, step=self._phase_step or None, error=exc)
            )
            raise
        except Exception as exc:
            ends = failed(exc)
            self.hooks.error.emit(
                AgentErrorPayload(turn=turn, step=self._phase_step or None, error=exc)
            )
            raise
        finally:
            self.session.append(
                "turn/end", TurnEnd(turn=turn, reason=ends or EndCompleted(kind="completed"))
            )
            with contextlib.suppress(BaseException):
                await asyncio.shield(self._checkpoint("turn-end", turn, None))
            if self.check_invariants:
                assert_invariants(list(self.session.events))
        return self.inbox.has_pending

    def calibration(self) -> Calibration:
        """The calibration of the token estimate a request on the current route would be measured
        with now (``llm.calibration``; ``%agent status``)."""
        return self._requests.calibration(self.provider, self.model)

    def _step_settings(self) -> StepSettings:
        """The settings a request reads, as they are now (``agent.request.step``)."""
        return StepSettings(
            provider=self.provider,
            model=self.model,
            reasoning_effort=self.reasoning_effort,
            temperature=self.temperature,
            seed=self.seed,
            max_tokens=self.max_tokens,
            images=self.images,
            tool_schemas=self.tool_schemas,
            spend=self.spend,
        )

    async def _checkpoint(
        self, reason: CheckpointReason, turn: int | None, step: int | None
    ) -> None:
        if not self.hooks.checkpoint.empty:
            await self.hooks.checkpoint.run(Checkpoint(reason=reason, turn=turn, step=step))

    # --- step --------------------------------------------------------------------------------------

    async def _step(
        self, turn: int, step: int, system: str, signal: AbortSignal, after_tools: bool
    ) -> StepOutcome:
        """One step (SPINE §1.4). Beyond the spec: after a step that ran tools (``after_tools``),
        an answer in which the model chose to stop with nothing (``EMPTY_RESPONSE`` with ``detail:
        model-stopped``) ends the turn as completed without a reply (``note: no-reply``) — the tool
        results stand — rather than failing it; and the repeated-call guard (``agent.repeats``)
        may refuse calls, or end the turn (``note: repeated-call``)."""
        self._requests.new_step()
        while True:
            request = await self._requests.build(self._step_settings(), turn, step, system, signal)
            provider = self._provider(request.provider)
            await self._checkpoint("before-request", turn, step)
            streamed = await stream_response(
                self.session, provider, request, turn=turn, step=step, signal=signal
            )
            finish = streamed.assembler.finish
            if isinstance(finish, FinishError) and await self._requests.compact_overflow(
                finish.failure, turn
            ):
                continue
            if (
                after_tools
                and isinstance(finish, FinishError)
                and finish.failure.detail == MODEL_STOPPED
            ):
                # Nothing to retry: the request went through and the model chose to stop. Its
                # chunks (the finish says why) are the attempt's record; it logs no message.
                return "no-reply"
            if isinstance(finish, FinishError | FinishAborted):
                payload = RequestErrorPayload(
                    turn=turn,
                    step=step,
                    provider=request.provider,
                    failure=finish.failure,
                    signal=signal,
                )

                async def terminal() -> Retry | None:
                    return None

                decision = await self.hooks.request_error.run(payload, terminal)
                if isinstance(decision, Retry) and not signal.aborted:
                    continue
                raise LlmError(finish.failure)
            message = append_response(
                self.session,
                streamed,
                request,
                turn=turn,
                step=step,
                usage_origin=self._requests.usage_origin,
            )
            if streamed.assembler.usage is not None:
                self._requests.answered(usage_to_json(streamed.assembler.usage))
            if isinstance(finish, FinishMaxTokens):
                return "max-tokens"
            calls = [b for b in message.content if isinstance(b, ToolCallBlock)]
            if not calls:
                return "completed"
            plan = self.repeats.plan(calls)
            tools = await run_step_tools(
                self.session,
                self.inbox,
                self.tool_runtime,
                turn=turn,
                step=step,
                calls=calls,
                signal=signal,
                max_parallel=self.max_parallel_tool_calls,
                refusals=plan.refusals,
            )
            self.repeats.record(calls, tools.results, plan)
            if tools.concludes_turn:
                return "completed"
            return "repeated-call" if plan.ends_turn else None

    def _provider(self, provider_id: str) -> Provider:
        return self._requests.provider(provider_id)

    # --- approvals ---------------------------------------------------------------------------------

    def set_approval(self, mode: ApprovalMode, tool: str | None = None) -> None:
        """Change the approval policy (``ask``/``auto``/``never``, for one tool or all), logged as
        ``approval/policy``. No tool offers this. Between turns the change is the user's; during a
        turn it can only come from code a tool ran (the user's approved code, e.g. the ``python``
        tool), and the log says so (``source: "code-during-turn"``)."""
        self.approval_policy.set(tool, mode)
        self._approval_log.policy(
            self.approval_policy, "user" if self.status == "idle" else "code-during-turn"
        )

    def adopt_approval(self, other: ApprovalPolicy, source: str) -> None:
        """Take ``other``'s modes (the global one and each tool's) as this agent's, logged as
        ``approval/policy`` with ``source`` when that changes anything (``rewind``: a branch of
        the same conversation keeps the user's "Always allow")."""
        if other.to_json() == self.approval_policy.to_json():
            return
        self.approval_policy.set(None, other.default)
        for tool in list(self.approval_policy.tools):
            self.approval_policy.set(tool, None)
        for tool, mode in other.tools.items():
            self.approval_policy.set(tool, mode)
        self._approval_log.policy(self.approval_policy, source)

    def forget_approval(self, tool: str, source: str) -> None:
        """Drop ``tool``'s own approval mode (it follows the default again: an "Always allow"
        is gone), logged as ``approval/policy`` with ``source`` saying why (``mcp-tool-changed``:
        an MCP server changed the tool since it was allowed)."""
        self.approval_policy.set(tool, None)
        self._approval_log.policy(self.approval_policy, source)

    async def _before_tool(self, inp: PreExecuteInput) -> PreDecision | None:
        turn, step = self._phase_turn, self._phase_step
        await self._checkpoint("before-tool", turn, step)
        return None
