"""``Agent``: the handle, the driver, and the turn/step loop (SPINE §1.3–§1.4, §3).

The agent owns a ``Session`` (the log) and an ``Inbox`` (a projection of it). Sends put user messages
in the inbox and, when they wake the agent, start a driver task on the running event loop. The driver
runs turns until the inbox is empty; each turn runs steps (one model call plus its tools) until the
model owes nothing.

Event order of a turn (exact): ``turn/start`` · [claim splices] · ``step/start`` · ``user/message``* ·
``request/header``? · ``request/context``? · ``assistant/chunk``* · ``assistant/message`` ·
(``tool/call`` … ``tool/result``)* · ``step/end`` · … · ``turn/end``. ``turn/end`` is always written.

Cancellation: ``cancel(cause)`` aborts the activity's ``AbortSignal`` (first cause wins), which
cancels the driver task; the loop finalises what the user saw (an ``interrupted`` assistant message
of the visible text), the scheduler commits drained and synthetic tool results, and the turn ends
``aborted{reason: cause}``. Without ``keep_inbox`` the inbox is durably cleared, even when idle.

Dev invariants (``check_invariants=True``, or ``DSH_DEV_INVARIANTS=1``): every request is compared
with the one rebuilt from the log alone, and the log passes the structural checker after each turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Literal

from dsh_kernel.abort import USER_CANCEL, AbortCause, AbortController, AbortSignal
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
    RequestPayload,
    Retry,
    SessionStart,
    TurnStopping,
)
from dsh_kernel.agent.inbox import Inbox, Target
from dsh_kernel.agent.prompt import RuntimeContext, SystemPrompt
from dsh_kernel.agent.retry import RetryHandler, RetryPolicy, Sleep
from dsh_kernel.errors import InvariantError, LlmError, UsageError, error_chain
from dsh_kernel.ids import CallId, new_message_id, new_session_id
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.assembler import BlockAssembler
from dsh_kernel.llm.codec import (
    chunk_to_json,
    failure_to_json,
    message_to_json,
    usage_to_json,
)
from dsh_kernel.llm.provider import Provider, stream_call
from dsh_kernel.llm.types import (
    FinishAborted,
    FinishError,
    FinishMaxTokens,
    GenerateRequest,
    LlmCallConfig,
    LlmFailure,
    Message,
    ModelInfo,
    ModelSource,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSource,
    UserSource,
)
from dsh_kernel.session.derive import EpochHeader, header_equals, last_request_header, project_event
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.log import Clock, Session, wall_clock_ms
from dsh_kernel.session.repair import closers
from dsh_kernel.tools.approval import (
    Answerer,
    ApprovalMode,
    ApprovalPolicy,
    ApprovalRecorder,
    ApprovalRequest,
    ApprovalService,
)
from dsh_kernel.tools.pipeline import PreDecision, PreExecuteInput, ToolHooks, ToolRuntime
from dsh_kernel.tools.registry import ToolRegistry
from dsh_kernel.tools.scheduler import run_tool_calls
from dsh_kernel.tools.types import ToolCall, ToolDefinition, ToolResult

Status = Literal["idle", "running"]
StepOutcome = Literal["completed", "max-tokens"] | None


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class Agent:
    """An agent over one session. See the module docstring."""

    def __init__(
        self,
        *,
        provider: Provider,
        model: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        system: str | SystemPrompt | None = None,
        session: Session | None = None,
        reasoning_effort: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        retry_policy: RetryPolicy | None = None,
        approval_policy: ApprovalPolicy | None = None,
        answerer: Answerer | None = None,
        approval_timeout_s: float | None = None,
        registry: ToolRegistry | None = None,
        max_parallel_tool_calls: int = 10,
        max_steps_per_turn: int = 100,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        check_invariants: bool | None = None,
    ) -> None:
        self.providers: dict[str, Provider] = {provider.id: provider}
        self.provider = provider
        chosen = model or getattr(provider, "default_model", None)
        if not isinstance(chosen, str) or not chosen:
            raise UsageError("Agent needs a model id: Agent(provider=…, model='…')")
        self.model: str = chosen
        self.reasoning_effort = reasoning_effort
        self.temperature = temperature
        self.max_tokens = max_tokens
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
        self.approval = ApprovalService(
            answerer,
            ApprovalRecorder(
                on_asked=self._on_approval_asked,
                on_decided=self._on_approval_decided,
                on_policy=self._on_approval_policy,
            ),
            approval_timeout_s,
            policy=self.approval_policy,
        )
        self.tool_runtime = ToolRuntime(
            self.registry,
            self.approval,
            self.approval_policy,
            hooks=ToolHooks(pre_execute=(self._before_tool,)),
        )
        self.max_parallel_tool_calls = max_parallel_tool_calls
        if max_steps_per_turn < 1:
            raise UsageError("max_steps_per_turn must be at least 1")
        self.max_steps_per_turn = max_steps_per_turn
        self.retry = RetryHandler(self.session, retry_policy, sleep=sleep or asyncio.sleep)
        self.hooks.request_error.on(self.retry)
        self.check_invariants = (
            _env_flag("DSH_DEV_INVARIANTS") if check_invariants is None else check_invariants
        )
        self._status: Status = "idle"
        self._driver: asyncio.Task[None] | None = None
        self._controller: AbortController | None = None
        self._wake_pending = False
        self._wake_latched = False
        self._maintenance: AbortController | None = None
        self._session_started = False
        self.last_error: BaseException | None = None
        """The exception that ended the last failed turn (already logged as turn/end{error})."""
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._header_written = False
        self._last_header: EpochHeader | None = last_request_header(self.session.events)
        self._phase_turn = self.session.last_turn
        self._phase_step = 0

    # --- public state ------------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def status(self) -> Status:
        return self._status

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
        aborting = self._controller is not None and self._controller.signal.aborted
        if wakeup and aborting and self._status == "running":
            # An abort is in flight: queue for a fresh turn and replay once idle.
            self.inbox.append("next-turn", msg)
            if not (
                self._controller
                and self._controller.signal.reason
                and self._controller.signal.reason.kind == "disposed"
            ):
                self._wake_latched = True
            return msg
        self.inbox.append(target, msg)
        if wakeup:
            self._wake()
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
            self._wake_latched = False
            self._wake_pending = False
        if self._controller is not None:
            self._controller.abort(cause)

    async def when_idle(self) -> None:
        """Resolve once no driver remains (following any queued work)."""
        if self._wake_pending and self._driver is None and self._maintenance is None:
            self._start_driver()
        if self._driver is None and self._maintenance is None:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._idle_waiters.append(fut)
        await fut
        if isinstance(self.last_error, InvariantError):
            # Dev invariants are bugs of ours, never of the user's: fail loudly.
            raise self.last_error

    async def run_maintenance(self, task: Callable[[AbortSignal], Awaitable[None]]) -> None:
        """Run ``task`` between turns while the status stays ``idle``; waking input waits for it.
        Raises if the agent is busy."""
        if self._driver is not None or self._maintenance is not None or self._wake_pending:
            raise UsageError("run_maintenance needs an idle agent")
        ctl = AbortController()
        self._controller = ctl
        self._maintenance = ctl
        try:
            await task(ctl.signal)
        finally:
            self._maintenance = None
            self._controller = None
            if self._wake_pending:
                self._start_driver()
            else:
                self._resolve_idle()

    # --- driver ------------------------------------------------------------------------------------

    def _wake(self) -> None:
        if self._driver is not None:
            return
        self._wake_pending = True
        if self._maintenance is not None:
            return  # started when the maintenance task ends
        self._set_status("running")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # started by when_idle() once a loop runs
        self._start_driver()

    def _start_driver(self) -> None:
        self._wake_pending = False
        if not self._session_started:
            self._session_started = True
            source = "resume" if self.session.seed_length else "startup"
            self.hooks.session_start.emit(SessionStart(source=source))
        self._set_status("running")
        self._driver = asyncio.get_running_loop().create_task(
            self._drive(), name=f"dsh-agent-{self.id}"
        )

    def _set_status(self, status: Status) -> None:
        if status != self._status:
            self._status = status
            self.hooks.status.emit(status)

    def _resolve_idle(self) -> None:
        self._set_status("idle")
        waiters, self._idle_waiters = self._idle_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def _drive(self) -> None:
        task = asyncio.current_task()
        try:
            while True:
                ctl = AbortController()
                self._controller = ctl
                ctl.signal.add_callback(lambda _c, t=task: t.cancel() if t is not None else None)
                self._phase_step = 0
                more = False
                try:
                    more = await self._turn(ctl.signal)
                except asyncio.CancelledError:
                    if not ctl.signal.aborted:
                        raise
                    if task is not None:
                        task.uncancel()
                except Exception as exc:
                    # Logged as turn/end{error}; pending work waits for the next wake.
                    self.last_error = exc
                    more = False
                if ctl.signal.aborted:
                    more = self._wake_latched and self.inbox.has_pending
                    self._wake_latched = False
                if not more:
                    break
        finally:
            self._controller = None
            self._driver = None
            self._resolve_idle()

    # --- turn --------------------------------------------------------------------------------------

    async def _turn(self, signal: AbortSignal) -> bool:
        turn = self._phase_turn + 1
        self._phase_turn = turn
        self.session.append("turn/start", {"turn": turn})
        target: Target = "next-turn"
        ends: JsonObject | None = None
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
                    ends = {"kind": "blocked"}
                    if decision.reason:
                        ends["message"] = decision.reason
                    return False
                if ends is not None and not decision.messages:
                    break
                if self._phase_step == 0 and not decision.messages:
                    ends = {"kind": "completed"}
                    return False
                if step > self.max_steps_per_turn:
                    # A model that keeps calling tools would otherwise run forever. Every call of
                    # the last step already has its result, so the history stays valid.
                    for m in claimed:  # claimed input is not lost: queue it again
                        self.inbox.append("next-turn", m)
                    ends = {"kind": "max-steps", "limit": self.max_steps_per_turn}
                    return False
                self.session.append("step/start", {"turn": turn, "step": step})
                self._phase_step = step
                try:
                    for m in decision.messages:
                        self.session.append("user/message", message_to_json(m), surface_op="append")
                    outcome = await self._step(turn, step, system, signal)
                    if ends is None or ends.get("kind") != "max-tokens":
                        ends = {"kind": outcome} if outcome is not None else None
                finally:
                    self.session.append("step/end", {"turn": turn, "step": step})
                    with contextlib.suppress(Exception):
                        await self._checkpoint("step-boundary", turn, step)
                if ends is not None and not self.inbox.next_step:
                    await self.hooks.turn_stopping.run(TurnStopping(turn=turn, signal=signal))
                if ends is not None and not self.inbox.next_step:
                    break
                target = "next-step"
        except asyncio.CancelledError:
            if signal.aborted and signal.reason is not None:
                ends = {"kind": "aborted", "reason": signal.reason.to_json()}
            else:
                ends = {"kind": "aborted", "reason": {"kind": "disposed"}}
            raise
        except LlmError as exc:
            ends = {"kind": "error", "error": failure_to_json(exc.failure)}
            self.hooks.error.emit(
                AgentErrorPayload(turn=turn, step=self._phase_step or None, error=exc)
            )
            raise
        except Exception as exc:
            ends = {
                "kind": "error",
                "error": {
                    "message": error_chain(exc),
                    "code": getattr(exc, "code", "UNKNOWN")
                    if isinstance(getattr(exc, "code", None), str)
                    else "UNKNOWN",
                },
            }
            self.hooks.error.emit(
                AgentErrorPayload(turn=turn, step=self._phase_step or None, error=exc)
            )
            raise
        finally:
            self.session.append("turn/end", {"turn": turn, "reason": ends or {"kind": "completed"}})
            with contextlib.suppress(BaseException):
                await asyncio.shield(self._checkpoint("turn-end", turn, None))
            if self.check_invariants:
                self._assert_log_invariants()
        return self.inbox.has_pending

    async def _checkpoint(
        self, reason: CheckpointReason, turn: int | None, step: int | None
    ) -> None:
        if not self.hooks.checkpoint.empty:
            await self.hooks.checkpoint.run(Checkpoint(reason=reason, turn=turn, step=step))

    # --- step --------------------------------------------------------------------------------------

    async def _step(self, turn: int, step: int, system: str, signal: AbortSignal) -> StepOutcome:
        while True:
            request = await self._build_request(turn, step, system, signal)
            provider = self.providers.get(request.provider)
            if provider is None:
                raise LlmError(
                    LlmFailure(
                        code="NO_ADAPTER", message=f"no provider registered as {request.provider!r}"
                    )
                )
            await self._checkpoint("before-request", turn, step)
            assembler = BlockAssembler()
            chunk_seqs: list[int] = []
            append = self.session.append
            try:
                async for chunk in stream_call(provider, request):
                    ev = append(
                        "assistant/chunk",
                        {"turn": turn, "step": step, "chunk": chunk_to_json(chunk)},
                    )
                    chunk_seqs.append(ev.seq)
                    assembler.push(chunk)
            except asyncio.CancelledError:
                if signal.aborted:
                    visible = assembler.interrupted_blocks()
                    if visible:
                        msg = Message(
                            id=new_message_id(),
                            role="assistant",
                            content=visible,
                            source=ModelSource(provider=request.provider, model=request.model),
                        )
                        self.session.append(
                            "assistant/message",
                            {
                                "turn": turn,
                                "step": step,
                                "message": message_to_json(msg),
                                "interrupted": True,
                            },
                            surface_op="append",
                            source_event_seqs=chunk_seqs,
                        )
                raise
            finish = assembler.finish
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
            source = ModelSource(
                provider=request.provider,
                model=request.model,
                replay_state=assembler.replay_state,
            )
            message = assembler.message(source)
            data: JsonObject = {"turn": turn, "step": step, "message": message_to_json(message)}
            if assembler.usage is not None:
                data["usage"] = usage_to_json(assembler.usage)
            self.session.append(
                "assistant/message", data, surface_op="append", source_event_seqs=chunk_seqs
            )
            if isinstance(finish, FinishMaxTokens):
                return "max-tokens"
            calls = [b for b in message.content if isinstance(b, ToolCallBlock)]
            if not calls:
                return "completed"
            concluded = await self._run_tools(turn, step, calls, signal)
            return "completed" if concluded else None

    async def _build_request(
        self, turn: int, step: int, system: str, signal: AbortSignal
    ) -> GenerateRequest:
        proposed = LlmCallConfig(
            provider=self.provider.id,
            model=self.model,
            reasoning_effort=self.reasoning_effort,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )

        async def default() -> LlmCallConfig:
            return proposed

        config = await self.hooks.request.run(
            RequestPayload(turn=turn, step=step, config=proposed, signal=signal), default
        )
        provider = self.providers.get(config.provider)
        if provider is None:
            raise LlmError(
                LlmFailure(
                    code="NO_ADAPTER", message=f"no provider registered as {config.provider!r}"
                )
            )
        prepared = provider.prepare_call(config)
        tools = self.registry.schemas()
        header = EpochHeader(
            config=prepared.config,
            adapter_defaults=prepared.adapter_defaults,
            system=system or None,
            tools=tools,
        ).canonical()
        if not self._header_written:
            reason = "initial" if self._last_header is None else "resume"
            self.session.append("request/header", {"header": header.to_json(), "reason": reason})
            self._header_written = True
        elif not header_equals(self._last_header, header):
            self.session.append("request/header", {"header": header.to_json(), "reason": "change"})
        self._log_context_change(prepared.config, provider)
        self._last_header = header
        cfg = prepared.config
        request = GenerateRequest(
            provider=cfg.provider,
            model=cfg.model,
            messages=tuple(self.session.derive_messages()),
            system=header.system,
            tools=header.tools,
            reasoning_effort=cfg.reasoning_effort,
            temperature=cfg.temperature,
            max_tokens=cfg.max_tokens,
            stop=cfg.stop,
            session_id=self.session.id,
        )
        if self.check_invariants:
            self._assert_reconstruction(request)
        return request

    def _log_context_change(self, config: LlmCallConfig, provider: Provider) -> None:
        window = provider.model_info(config.model).context_window
        for ev in reversed(self.session.events):
            if ev.type == "request/context":
                if (
                    ev.data.get("provider") == config.provider
                    and ev.data.get("model") == config.model
                    and ev.data.get("contextWindow") == window
                ):
                    return
                break
        data: JsonObject = {"provider": config.provider, "model": config.model}
        if window is not None:
            data["contextWindow"] = window
        self.session.append("request/context", data)

    # --- tools -------------------------------------------------------------------------------------

    async def _run_tools(
        self, turn: int, step: int, calls: list[ToolCallBlock], signal: AbortSignal
    ) -> bool:
        call_seqs: dict[str, int] = {}

        def on_start(call: ToolCall) -> None:
            data: JsonObject = {
                "turn": turn,
                "step": step,
                "callId": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            }
            call_seqs[call.call_id] = self.session.append("tool/call", data).seq

        def on_result(call: ToolCall, result: ToolResult) -> None:
            self._append_tool_result(turn, step, call, result, call_seqs.get(call.call_id))
            for ctx in result.additional_contexts:
                self.inbox.append("next-step", ctx)

        try:
            outcome = await run_tool_calls(
                [ToolCall(call_id=c.id, name=c.name, arguments=c.arguments) for c in calls],
                self.tool_runtime,
                signal,
                on_start=on_start,
                on_result=on_result,
                max_parallel=self.max_parallel_tool_calls,
            )
        except BaseException:
            # The tools failed internally (the log could not be written, …): close every call left
            # without a result as crash repair would, so no later request carries an unanswered
            # call. Best effort; the original error is what propagates.
            with contextlib.suppress(Exception):
                for p in closers(self.session.events):
                    if p.type == "tool/result":
                        self.session.append(
                            p.type,
                            p.data,
                            surface_op=p.surface_op,
                            source_event_seqs=p.source_event_seqs,
                        )
            raise
        return outcome.concludes_turn

    def _append_tool_result(
        self, turn: int, step: int, call: ToolCall, result: ToolResult, call_seq: int | None
    ) -> None:
        block = ToolResultBlock(
            tool_call_id=CallId(call.call_id),
            content=tuple(result.content),
            is_error=result.is_error,
        )
        msg = Message(
            id=new_message_id(),
            role="user",
            content=(block,),
            source=ToolSource(call_id=CallId(call.call_id)),
        )
        data: JsonObject = {"turn": turn, "step": step, "message": message_to_json(msg)}
        if result.error is not None:
            data["error"] = {"name": result.error.name, "code": result.error.code}
        if result.meta is not None:
            data["meta"] = result.meta
        self.session.append(
            "tool/result",
            data,
            surface_op="append",
            source_event_seqs=[call_seq] if call_seq is not None else None,
        )

    # --- approvals ---------------------------------------------------------------------------------

    def _on_approval_asked(self, approval_id: str, request: ApprovalRequest) -> None:
        data: JsonObject = {"id": approval_id, "toolName": request.tool_name}
        if request.call_id is not None:
            data["callId"] = request.call_id
        if request.reason is not None:
            data["reason"] = request.reason
        self.session.append("approval/asked", data)

    def _on_approval_decided(self, approval_id: str, outcome: str) -> None:
        self.session.append("approval/decided", {"id": approval_id, "outcome": outcome})

    def _on_approval_policy(self, policy: ApprovalPolicy, source: str) -> None:
        self.session.append("approval/policy", {"policy": policy.to_json(), "source": source})

    def set_approval(self, mode: ApprovalMode, tool: str | None = None) -> None:
        """Change the approval policy (``ask``/``auto``/``never``, for one tool or all), logged as
        ``approval/policy``. No tool offers this. Between turns the change is the user's; during a
        turn it can only come from code a tool ran (the user's approved code, e.g. the ``python``
        tool), and the log says so (``source: "code-during-turn"``)."""
        self.approval_policy.set(tool, mode)
        self._on_approval_policy(
            self.approval_policy, "user" if self._status == "idle" else "code-during-turn"
        )

    async def _before_tool(self, inp: PreExecuteInput) -> PreDecision | None:
        turn, step = self._phase_turn, self._phase_step
        await self._checkpoint("before-tool", turn, step)
        return None

    # --- dev invariants -----------------------------------------------------------------------------

    def _assert_reconstruction(self, request: GenerateRequest) -> None:
        events = self.session.events
        header = last_request_header(list(events))
        if header is None:
            raise InvariantError("request sent with no request/header in the log")
        rebuilt: list[Message] = []
        for seq in self.session.surface:
            m = project_event(events[seq])
            if m is not None:
                rebuilt.append(m)
        cfg = header.config
        expected = GenerateRequest(
            provider=cfg.provider,
            model=cfg.model,
            messages=tuple(rebuilt),
            system=header.system,
            tools=header.tools,
            reasoning_effort=cfg.reasoning_effort,
            temperature=cfg.temperature,
            max_tokens=cfg.max_tokens,
            stop=cfg.stop,
            session_id=self.session.id,
        )
        if replace(request, purpose=None) != expected:
            raise InvariantError(
                "request differs from the one rebuilt from the log (system + derive_messages + header)"
            )

    def _assert_log_invariants(self) -> None:
        from dsh_kernel.session.invariants import assert_invariants

        assert_invariants(list(self.session.events))
