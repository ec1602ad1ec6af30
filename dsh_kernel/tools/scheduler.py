"""Running one step's tool calls (SPINE §4.5): parallel where safe, results strictly in model order.

``run_tool_calls(calls, runtime, signal, on_start=..., on_result=...)``:

* **Arguments** are parsed here, once per call: blank → ``{}``; invalid JSON, or JSON nested deeper
  than 64 levels → the raw text is passed on and the pipeline reports ``INVALID_ARGS`` (the raw text
  stays in the log untouched). Parsing never raises out of the step.
* **Groups**, in model order: a call is classified just before it starts. A concurrency-safe call
  joins a rolling pool of at most ``max_parallel`` running calls; an exclusive call waits for the
  pool to drain, runs alone, and is a barrier for the calls after it.
* ``on_start(call)`` fires when a call *starts* (the agent appends ``tool/call`` then); ``on_result``
  fires strictly in model order, each result after its own ``on_start``.
* **Refusals**: a call the caller refuses (``refusals``, by its position in ``calls``) never runs:
  when its turn to start comes it gets ``on_start`` and the error result of its ``Refusal`` (code and
  message), committed in model order like any other; it is no barrier to the calls around it.
* **Cap**: calls beyond ``max_calls`` never run; each gets ``on_start`` and a
  ``TOO_MANY_TOOL_CALLS`` result, after the others.
* **Abort** (``signal`` aborted): nothing new starts; running calls are cancelled (through the
  signal and task cancellation), drained and committed; every call that never started gets
  ``on_start`` and a synthetic ``ABORTED_BEFORE_DISPATCH`` result. If the abort reached us as a
  ``CancelledError`` (the agent cancels the turn task), that bookkeeping is finished first and the
  ``CancelledError`` is re-raised; otherwise the outcome is returned normally.
* **Every call ends in a result**: an exception that escapes ``ToolRuntime.execute`` (it should
  not; the pipeline normalises the body's) becomes that call's error result too
  (``failure_from_exception``: the error's own code, else ``TOOL_FAILED``).
* **Internal failure** (a callback raises — the log cannot be written —, or a call task dies with a
  ``BaseException`` that is not ours): nothing new starts, started calls are drained, and the error
  propagates without inventing results here; the agent then closes the step's unanswered calls
  with crash repair's synthetic results, so the history stays valid.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from dsh_kernel.abort import AbortCause, AbortSignal
from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.tools.bounds import capped
from dsh_kernel.tools.pipeline import ToolRuntime, failure_from_exception
from dsh_kernel.tools.types import TOO_MANY_TOOL_CALLS, ToolCall, ToolResult, parse_arguments

DEFAULT_MAX_PARALLEL = 10
DEFAULT_MAX_CALLS = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class StepToolOutcome:
    """The results of one step's tool calls, and whether one of them concludes the turn."""

    results: tuple[ToolResult, ...]
    """One per call, in model order."""
    concludes_turn: bool
    """A successful result asked to conclude the turn (SPINE §3.7)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """Why the caller will not run a call: the error result's ``code`` and ``message``."""

    code: str
    message: str


def _args(call: ToolCall) -> JsonValue:
    try:
        return parse_arguments(call.arguments)
    except (ValueError, RecursionError):
        return call.arguments


class _Step:
    def __init__(
        self,
        calls: Sequence[ToolCall],
        runtime: ToolRuntime,
        signal: AbortSignal,
        on_start: Callable[[ToolCall], None],
        on_result: Callable[[ToolCall, ToolResult], None],
        max_parallel: int,
        max_calls: int,
        refusals: Mapping[int, Refusal],
    ) -> None:
        self.calls = list(calls)
        self.refusals = refusals
        self.runtime = runtime
        self.signal = signal
        self.on_start = on_start
        self.on_result = on_result
        self.max_parallel = max_parallel
        self.runnable = min(len(self.calls), max_calls)
        self.max_calls = max_calls
        self.results: list[ToolResult | None] = [None] * len(self.calls)
        self.started = 0  # calls [0, started) have had on_start
        self.committed = 0  # calls [0, committed) have had on_result
        self.running: dict[asyncio.Task[ToolResult], int] = {}
        self.entered: set[int] = set()  # calls whose pipeline began running
        self.parsed: dict[int, JsonValue] = {}

    def args(self, i: int) -> JsonValue:
        if i not in self.parsed:
            self.parsed[i] = _args(self.calls[i])
        return self.parsed[i]

    def start(self, i: int) -> None:
        call = self.calls[i]
        self.on_start(call)
        self.started = i + 1
        task = asyncio.ensure_future(self._execute(i, call))
        self.running[task] = i

    async def _execute(self, i: int, call: ToolCall) -> ToolResult:
        self.entered.add(i)
        try:
            return await self.runtime.execute(call, self.args(i), self.signal)
        except Exception as exc:
            return capped(failure_from_exception(exc))

    def cancel_running(self, cause: AbortCause | None = None) -> None:
        del cause
        for task in self.running:
            task.cancel()

    async def wait_some(self) -> None:
        """Wait for at least one running call to finish; record and commit what finished."""
        done, _ = await asyncio.wait(set(self.running), return_when=asyncio.FIRST_COMPLETED)
        self.collect(done)
        self.commit()

    def collect(self, done: set[asyncio.Task[ToolResult]]) -> None:
        for task in done:
            i = self.running.pop(task)
            if task.cancelled():
                if not self.signal.aborted:
                    raise asyncio.CancelledError(f"tool call {self.calls[i].call_id} was cancelled")
                if i in self.entered:
                    # The pipeline ran (a synchronous body can finish while the cancel is pending,
                    # and asyncio then discards its result): it was dispatched, so say "aborted".
                    self.results[i] = self.runtime.refuse(
                        self.calls[i], self.signal, "tool call aborted", "ABORTED"
                    )
                else:
                    # Cancelled before its first step: nothing was dispatched.
                    self.results[i] = self.runtime.abort_before_dispatch(self.calls[i], self.signal)
            else:
                self.results[i] = task.result()  # an exception here is an internal failure

    def commit(self) -> None:
        while self.committed < len(self.calls):
            result = self.results[self.committed]
            if result is None:
                return
            self.on_result(self.calls[self.committed], result)
            self.committed += 1

    async def run(self) -> None:
        i = 0
        while i < self.runnable and not self.signal.aborted:
            call = self.calls[i]
            refusal = self.refusals.get(i)
            if refusal is not None:
                self.on_start(call)
                self.started = i + 1
                self.results[i] = self.runtime.refuse(
                    call, self.signal, refusal.message, refusal.code
                )
                self.commit()
                i += 1
                continue
            if self.runtime.is_concurrency_safe(call, self.args(i)):
                if len(self.running) >= self.max_parallel:
                    await self.wait_some()
                    continue
                self.start(i)
                i += 1
            else:
                if self.running:
                    await self.wait_some()
                    continue
                self.start(i)
                i += 1
                while self.running:
                    await self.wait_some()
        while self.running:
            await self.wait_some()

    async def drain(self, *, keep_results: bool) -> None:
        """Wait until every started call has settled, even through repeated cancellation.
        Without ``keep_results`` (an internal failure is propagating) outcomes are discarded."""
        while self.running:
            try:
                done, _ = await asyncio.wait(set(self.running))
            except asyncio.CancelledError:
                self.cancel_running()
                continue
            if keep_results:
                self.collect(done)
                continue
            for task in done:
                del self.running[task]
                if not task.cancelled():
                    task.exception()  # retrieved, so asyncio does not report it as lost

    def close_remaining(self) -> None:
        """Results for every call that never started: synthetic aborts, then the over-cap calls."""
        for i in range(self.started, len(self.calls)):
            call = self.calls[i]
            self.on_start(call)
            self.started = i + 1
            if i < self.runnable:
                self.results[i] = self.runtime.abort_before_dispatch(call, self.signal)
            else:
                message = (
                    f"too many tool calls in one step ({len(self.calls)} > {self.max_calls}); "
                    f"call at most {self.max_calls} tools per step"
                )
                self.results[i] = self.runtime.refuse(
                    call, self.signal, message, TOO_MANY_TOOL_CALLS
                )
            self.commit()


async def run_tool_calls(
    calls: Sequence[ToolCall],
    runtime: ToolRuntime,
    signal: AbortSignal,
    *,
    on_start: Callable[[ToolCall], None],
    on_result: Callable[[ToolCall, ToolResult], None],
    max_parallel: int = DEFAULT_MAX_PARALLEL,
    max_calls: int = DEFAULT_MAX_CALLS,
    refusals: Mapping[int, Refusal] | None = None,
) -> StepToolOutcome:
    """Run one step's calls; see the module docstring for the ordering and abort contract."""
    if max_parallel < 1 or max_calls < 1:
        raise ValueError("max_parallel and max_calls must be at least 1")
    step = _Step(
        calls, runtime, signal, on_start, on_result, max_parallel, max_calls, refusals or {}
    )
    unlink = signal.add_callback(step.cancel_running)
    try:
        try:
            await step.run()
        except asyncio.CancelledError:
            step.cancel_running()
            if not signal.aborted:  # not our abort: nothing to commit, just stop
                await step.drain(keep_results=False)
                raise
            await step.drain(keep_results=True)
            step.commit()
            step.close_remaining()
            raise
        except BaseException:
            await step.drain(keep_results=False)
            raise
        step.commit()
        step.close_remaining()
    finally:
        unlink()
    results = tuple(r for r in step.results if r is not None)
    assert len(results) == len(step.calls)
    return StepToolOutcome(
        results=results,
        concludes_turn=any(r.concludes_turn for r in results),
    )
