"""The execution pipeline: one tool call in, exactly one ``ToolResult`` out (SPINE §4.3).

``ToolRuntime.execute(call, args, signal)`` runs, in order:

1. **Visibility** — a tool the registry does not show → ``UNKNOWN_TOOL``.
2. **Already aborted** → ``ABORTED_BEFORE_DISPATCH`` ("tool call aborted before dispatch").
3. **Validate the arguments** (``INVALID_ARGS``: invalid JSON or nesting deeper than 64 levels says
   so; at most 10 problems are listed), then the tool's own ``check_args`` (what a schema cannot
   say, e.g. a total size; for an ``@tool`` function, the pydantic validation its signature
   implies: constraints, models, ``dict`` values). This is earlier than SPINE §4.3, which validates in the
   body after ``pre-execute``, on purpose: the approver is a person reading the card, so only a call
   that could run is shown for approval, and a malformed call gets ``INVALID_ARGS`` (which the model
   can correct) under every policy, never ``DENIED``. Hooks and guards see the validated object.
4. **Pre-execute hooks** in order; the first that decides wins: ``deny`` refuses, ``ask`` requires
   approval, ``allow`` skips the policy's ``ask``. Then the **approval policy**: ``never`` refuses
   even when a hook allowed (it is the user's hard setting), ``ask`` requires approval.
5. **Approval** when required; only ``allowed-once``/``allowed-always`` proceed; everything else
   (rejected, timeout, unavailable, no approval service) is ``DENIED`` with a message telling the
   model what happened and what the user can change. ``cancelled`` by an abort is ``ABORTED``.
6. **Guards** (registry) — a returned reason is ``DENIED``.
7. **Dispatch** under the tool's ``timeout_ms`` (``TIMEOUT``): run the body, timed by the runtime's
   monotonic ``clock`` (``ToolResult.duration_ms``: the body alone, whatever its outcome), check that
   the value is lossless JSON and matches ``output_schema`` (``INVALID_TOOL_OUTPUT``, naming the JSON
   path), then ``render`` and ``presentation_meta`` (a JSON object, else ``INVALID_TOOL_OUTPUT``).
8. **Post-execute hooks** on success: ``accept`` may replace the content *or* the value (a new value
   is re-checked and re-rendered); ``block`` turns the outcome into a ``BLOCKED`` error.
9. **Late abort** — a success while the signal is aborted becomes ``ABORTED`` ("tool call aborted").
10. **Normalise** — any exception becomes ``Error: <message>`` content with ``ToolFailure(message,
   name, code)``: a ``DshError``'s own code, ``TOOL_FAILED`` (message prefixed with the type name) for
   anything else.
11. **Finalise** — ``finalize_content`` exactly once per outcome; its failure is logged, never fatal.
   A tool with an ``origin`` (an MCP server's) has it put into every outcome's ``meta``.
12. **Cap** — every result, success or error, leaves through ``dsh_kernel.tools.bounds.capped``:
    at most 100 kB of text, cut with a marker. A name the model sent is quoted cut to 100 characters.

Cancellation: a ``CancelledError`` that arrives while ``signal`` is aborted is converted into the
``ABORTED`` result (the body was stopped; its result is still owed). ``execute`` therefore swallows
that cancellation; run it in its own task, as the scheduler does, when the caller must observe it.
A cancellation while the signal is *not* aborted is not ours and propagates.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TypeAlias

from dsh_kernel.abort import AbortCause, AbortController, AbortedError, AbortSignal
from dsh_kernel.errors import (
    DshError,
    LosslessJsonError,
    ToolArgsError,
    ToolError,
    ToolOutputError,
    UsageError,
)
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.arguments import ArgumentsTooDeep
from dsh_kernel.session.codec import lossless_copy
from dsh_kernel.textcap import cap_echo
from dsh_kernel.tools.approval import ApprovalPolicy, ApprovalRequest, ApprovalService
from dsh_kernel.tools.bounds import capped, invalid_args_message
from dsh_kernel.tools.hooks import (
    HookAccept,
    HookAsk,
    HookBlock,
    HookDeny,
    PostExecuteInput,
    PreDecision,
    PreExecuteInput,
    ToolHooks,
)
from dsh_kernel.tools.registry import ToolRegistry
from dsh_kernel.tools.schema import validate
from dsh_kernel.tools.types import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    BLOCKED,
    DENIED,
    TIMEOUT,
    TOOL_FAILED,
    UNKNOWN_TOOL,
    ToolCall,
    ToolContext,
    ToolDefinition,
    ToolResult,
    parse_arguments,
)

_log = logging.getLogger(__name__)

# -- lossless JSON ----------------------------------------------------------------------------------


def lossless_problem(value: object, path: str = "$") -> str | None:
    """Why ``value`` would not survive a JSON round trip unchanged (naming the path), or ``None``.

    The same gate as the session log's, so anything accepted here is accepted by ``Session.append``.
    """
    try:
        lossless_copy(value)
    except LosslessJsonError as exc:
        # "data is not lossless JSON at $.a[0]: reason" → "<path>.a[0]: reason"
        where = exc.message.partition(" is not lossless JSON at ")[2] or exc.message
        return path + where[1:] if where.startswith("$") else where
    return None


# -- the runtime ------------------------------------------------------------------------------------

Clock: TypeAlias = Callable[[], int]
"""Milliseconds from a clock that never goes backwards (only differences are used)."""


def monotonic_ms() -> int:
    """The default ``Clock``: ``time.monotonic_ns`` in milliseconds."""
    return time.monotonic_ns() // 1_000_000


class _BodyTime:
    """How long one call's body ran (``ms`` is ``None`` until it has run)."""

    __slots__ = ("ms",)

    def __init__(self) -> None:
        self.ms: int | None = None


def failure_from_exception(exc: BaseException) -> ToolResult:
    if isinstance(exc, DshError):
        result = ToolResult.failure(
            exc.message or type(exc).__name__, code=exc.code, name=type(exc).__name__
        )
        # A tool error may carry presentation meta (e.g. the python tool's captured outputs), so the
        # card of a failed call still shows what happened. Only a lossless JSON object is kept.
        meta = getattr(exc, "meta", None)
        if (
            isinstance(exc, ToolError)
            and meta is not None
            and lossless_problem(meta, "meta") is None
            and isinstance(meta, dict)  # an object, as tool/result.meta is
        ):
            result = replace(result, meta=meta)
        return result
    text = str(exc)
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return ToolResult.failure(message, code=TOOL_FAILED, name=type(exc).__name__)


def _aborted(before_dispatch: bool) -> ToolResult:
    if before_dispatch:
        return ToolResult.failure(
            "tool call aborted before dispatch", code=ABORTED_BEFORE_DISPATCH, name="AbortedError"
        )
    return ToolResult.failure("tool call aborted", code=ABORTED, name="AbortedError")


def _denied(message: str) -> ToolResult:
    return ToolResult.failure(message, code=DENIED)


class ToolRuntime:
    """Executes calls against ``registry`` under ``policy``. ``approval`` (may be ``None``: every
    call that needs approval is then denied) must share ``policy``, because ``allowed-always``
    edits it; a service without a policy is given ours. ``clock`` times the bodies (the edge tests
    fake; ``None``: ``monotonic_ms``)."""

    def __init__(
        self,
        registry: ToolRegistry,
        approval: ApprovalService | None,
        policy: ApprovalPolicy,
        *,
        hooks: ToolHooks | None = None,
        clock: Clock | None = None,
    ) -> None:
        if approval is not None:
            # ``allowed-always`` edits the service's policy; it must be the one we decide with.
            if approval.policy is None:
                approval.policy = policy
            elif approval.policy is not policy:
                raise UsageError("the approval service and the runtime must share one policy")
        self.registry = registry
        self.approval = approval
        self.policy = policy
        self.hooks = hooks or ToolHooks()
        self.clock = clock or monotonic_ms

    def is_concurrency_safe(self, call: ToolCall, args: JsonValue) -> bool:
        """Only a visible tool whose predicate returns literally ``True`` may run in parallel."""
        defn = self.registry.get(call.name)
        if defn is None:
            return False
        try:
            return defn.is_concurrency_safe(args) is True
        except Exception:
            _log.warning(
                "is_concurrency_safe of %r failed; running it alone", call.name, exc_info=True
            )
            return False

    def abort_before_dispatch(self, call: ToolCall, signal: AbortSignal) -> ToolResult:
        """The synthetic result for a call that never started (finalised like any other)."""
        return self._settle(call, signal, lambda ctx: _aborted(True))

    def refuse(self, call: ToolCall, signal: AbortSignal, message: str, code: str) -> ToolResult:
        """An error result for a call the caller will not run (e.g. over the per-step cap)."""
        return self._settle(call, signal, lambda ctx: ToolResult.failure(message, code=code))

    def _settle(
        self, call: ToolCall, signal: AbortSignal, make: Callable[[ToolContext], ToolResult]
    ) -> ToolResult:
        ctx = ToolContext(call_id=call.call_id, name=call.name, signal=signal)
        ctx.close()
        defn = self.registry.get(call.name)
        return capped(_finalize(defn, ctx, make(ctx)))

    async def execute(self, call: ToolCall, args: JsonValue, signal: AbortSignal) -> ToolResult:
        defn = self.registry.get(call.name)
        if defn is None:
            names = ", ".join(self.registry.names()) or "none"
            return ToolResult.failure(
                f"unknown tool '{cap_echo(call.name)}'; available tools: {names}",
                code=UNKNOWN_TOOL,
            )
        body_ctl = AbortController()
        unlink = signal.add_callback(body_ctl.abort)
        ctx = ToolContext(call_id=call.call_id, name=call.name, signal=body_ctl.signal)
        body = _BodyTime()
        try:
            result = await self._run(defn, call, args, ctx, signal, body_ctl, body)
        except asyncio.CancelledError:
            if not signal.aborted:
                raise
            result = _aborted(False)
        except AbortedError as exc:
            result = _aborted(False) if signal.aborted else failure_from_exception(exc)
        except Exception as exc:
            result = failure_from_exception(exc)
        finally:
            unlink()
            ctx.close()
        if ctx.deferred_contexts:
            result = replace(
                result, additional_contexts=ctx.deferred_contexts + result.additional_contexts
            )
        if body.ms is not None:
            result = replace(result, duration_ms=body.ms)
        return capped(_finalize(defn, ctx, result))

    async def _run(
        self,
        defn: ToolDefinition,
        call: ToolCall,
        args: JsonValue,
        ctx: ToolContext,
        signal: AbortSignal,
        body_ctl: AbortController,
        body: _BodyTime,
    ) -> ToolResult:
        if signal.aborted:
            return _aborted(True)
        obj = _validated(defn, call, args)  # before approval: see step 3 of the module docstring
        refusal = await self._authorise(defn, call, obj, signal)
        if refusal is not None:
            return refusal
        reason = self.registry.check_guards(call, obj)
        if reason is not None:
            return _denied(reason or f"call to '{defn.name}' denied by a guard")

        value = await self._dispatch(defn, obj, ctx, body_ctl, body)
        if signal.aborted:
            return _aborted(False)
        result = self._success(defn, obj, value)
        result = await self._post(defn, call, obj, result)
        if signal.aborted and not result.is_error:
            return replace(_aborted(False), additional_contexts=result.additional_contexts)
        if ctx.concluded and not result.is_error:
            result = replace(result, concludes_turn=True)
        return result

    async def _authorise(
        self, defn: ToolDefinition, call: ToolCall, args: JsonObject, signal: AbortSignal
    ) -> ToolResult | None:
        hook_decision: PreDecision | None = None
        for hook in self.hooks.pre_execute:
            hook_decision = await hook(
                PreExecuteInput(call=call, args=args, definition=defn, signal=signal)
            )
            if hook_decision is not None:
                break
        if isinstance(hook_decision, HookDeny):
            return _denied(hook_decision.reason)
        policy = self.policy.decide(defn)
        if policy == "deny":
            return _denied(
                f"tool '{defn.name}' may not run: its approval policy is 'never'. Do not call it "
                "again; if it is needed, ask the user to change the approval policy."
            )
        asking = isinstance(hook_decision, HookAsk) or (hook_decision is None and policy == "ask")
        if not asking:
            return None
        reason = hook_decision.reason if isinstance(hook_decision, HookAsk) else None
        return await self._approve(defn, call, reason, signal)

    async def _approve(
        self, defn: ToolDefinition, call: ToolCall, reason: str | None, signal: AbortSignal
    ) -> ToolResult | None:
        change = (
            "The user can change the approval policy (for example `%agent approve auto`) "
            "to let it run without asking."
        )
        if self.approval is None:
            return _denied(
                f"this call to '{defn.name}' needs approval, but nobody can be asked here, so it "
                f"did not run. {change}"
            )
        request = ApprovalRequest(
            tool_name=defn.name, call_id=call.call_id, reason=reason, arguments=call.arguments
        )
        outcome = await self.approval.request(request, signal)
        match outcome:
            case "allowed-once" | "allowed-always":
                return None
            case "rejected":
                return _denied(
                    f"the user rejected this call to '{defn.name}', so it did not run. Do not "
                    "repeat it unchanged; ask the user how to proceed or take another approach."
                )
            case "timeout":
                secs = self.approval.timeout_s
                after = f" after {secs:g} s" if secs is not None else ""
                return _denied(
                    f"approval for this call to '{defn.name}' timed out{after} without an "
                    f"answer, so it did not run. {change}"
                )
            case "unavailable":
                return _denied(
                    f"this call to '{defn.name}' needs approval, but no answer could be obtained "
                    f"(approval unavailable), so it did not run. {change}"
                )
            case "cancelled":
                if signal.aborted:
                    return _aborted(False)
                return _denied(f"approval for this call to '{defn.name}' was cancelled.")

    async def _dispatch(
        self,
        defn: ToolDefinition,
        args: JsonObject,
        ctx: ToolContext,
        body_ctl: AbortController,
        body: _BodyTime,
    ) -> JsonValue:
        timeout_s = defn.timeout_ms / 1000 if defn.timeout_ms is not None else None
        timer = asyncio.timeout(timeout_s)
        started = self.clock()
        try:
            async with timer:
                out = defn.execute(args, ctx)
                if inspect.isawaitable(out):
                    out = await out
        except TimeoutError as exc:
            if not timer.expired():
                raise
            body_ctl.abort(AbortCause(kind="hook", reason="tool timeout"))
            raise ToolError(
                f"tool '{defn.name}' timed out after {defn.timeout_ms} ms and was stopped; "
                "try a smaller request",
                code=TIMEOUT,
            ) from exc
        finally:
            body.ms = max(0, self.clock() - started)
            ctx.close()
        return out

    def _success(self, defn: ToolDefinition, args: JsonObject, value: JsonValue) -> ToolResult:
        _check_output(defn, value)
        content = tuple(defn.render(args, value))
        meta: JsonValue = None
        if defn.presentation_meta is not None:
            meta = defn.presentation_meta(args, value)
            problem = lossless_problem(meta, "meta")
            if problem:
                raise ToolOutputError(f"presentation meta of '{defn.name}' is not JSON: {problem}")
            if meta is not None and not isinstance(meta, dict):
                raise ToolOutputError(
                    f"presentation meta of '{defn.name}' must be a JSON object (or None), not "
                    f"{type(meta).__name__}"
                )
        return ToolResult(is_error=False, content=content, meta=meta, value=value)

    async def _post(
        self, defn: ToolDefinition, call: ToolCall, args: JsonObject, result: ToolResult
    ) -> ToolResult:
        for hook in self.hooks.post_execute:
            decision = await hook(
                PostExecuteInput(call=call, args=args, definition=defn, result=result)
            )
            match decision:
                case None:
                    continue
                case HookBlock():
                    return ToolResult.failure(
                        decision.feedback,
                        code=BLOCKED,
                        additional_contexts=result.additional_contexts
                        + decision.additional_contexts,
                    )
                case HookAccept():
                    contexts = result.additional_contexts + decision.additional_contexts
                    if decision.value is not None:
                        result = self._success(defn, args, decision.value.value)
                    elif decision.content is not None:
                        result = replace(result, content=tuple(decision.content))
                    result = replace(result, additional_contexts=contexts)
        return result


def _validated(defn: ToolDefinition, call: ToolCall, args: JsonValue) -> JsonObject:
    if isinstance(args, str):
        try:
            parse_arguments(call.arguments)
        except ValueError as exc:
            too_deep = isinstance(exc, ArgumentsTooDeep)
            what = str(exc) if too_deep else f"the arguments are not valid JSON ({exc})"
            raise ToolArgsError(
                f"invalid arguments: {what}; send one JSON object matching the parameters of "
                f"'{defn.name}'"
            ) from exc
    errors = validate(defn.parameters, args)
    if errors:
        raise ToolArgsError(invalid_args_message(errors))
    assert isinstance(args, dict)
    if defn.check_args is not None:
        defn.check_args(args)
    return args


def _check_output(defn: ToolDefinition, value: JsonValue) -> None:
    problem = lossless_problem(value)
    if problem:
        raise ToolOutputError(
            f"tool '{defn.name}' returned a value that is not lossless JSON: {problem}"
        )
    if defn.output_schema is not None:
        errors = validate(defn.output_schema, value)
        if errors:
            raise ToolOutputError(
                f"tool '{defn.name}' returned a value that does not match its output schema: "
                + "; ".join(errors)
            )


def _finalize(defn: ToolDefinition | None, ctx: ToolContext, result: ToolResult) -> ToolResult:
    if defn is not None and defn.origin is not None:
        meta = result.meta if isinstance(result.meta, dict) else {}
        result = replace(result, meta={**meta, "origin": defn.origin})
    if defn is None or defn.finalize_content is None:
        return result
    try:
        content = defn.finalize_content(ctx, result)
    except Exception:  # finalisation must not fail the call: keep the content we have
        _log.warning("finalize_content of %r failed; keeping its content", defn.name, exc_info=True)
        return result
    if content is None:
        return result
    return replace(result, content=tuple(content))
