"""The repeated-call guard: a model that keeps making one tool call and keeps getting one result is
told it already has that result, and then stopped — not left to run to the step bound.

Definitions (all within one turn; a new turn starts afresh):

* a call's **key** is its tool name and its canonical arguments: the arguments parsed as JSON and
  written again with sorted keys and no spaces (arguments that are not JSON: the text without
  surrounding blanks), so ``{"a": 1, "b": 2}`` and ``{"b":2,"a":1}`` are one call;
* a step **makes** a key when one of its calls has it; the key's **result** in that step is what the
  last such call returned: its content blocks, as logged, and whether it is an error;
* a key's **run** is the number of *consecutive* steps, ending with the latest step that ran tools,
  that made it and got one same result. A step that does not make the key ends its run; a step that
  makes it and gets a different result starts a new run of 1.

With ``limit`` = n (the agent's ``repeat_limit``, ``DSH_REPEAT_LIMIT``; 0 switches the guard off):

1. a call whose key has a run of n is **not run** (n = 2: the third identical call in a row). It gets
   the error result ``REPEATED_CALL``, which tells the model that it already has the result (above,
   in its history) and should answer with it; the step's other calls run, and the model is asked
   again — the next step can answer;
2. a call whose key was refused in the step just before is refused again, and once that step's
   calls are done the turn ends: ``turn/end{completed, note: "repeated-call"}``.

What the log keeps: both cases are the refused call's ``tool/call`` and its ``tool/result`` with
``error.code`` ``REPEATED_CALL`` (the views draw a one-line notice from it), and the second ends the
turn with the note; the runs themselves are not logged — they are recomputed from the calls and
results a turn logged, as ``RepeatGuard`` computes them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from dsh_kernel.llm.codec import block_to_json
from dsh_kernel.llm.types import ToolCallBlock
from dsh_kernel.tools.scheduler import Refusal
from dsh_kernel.tools.types import ToolResult

REPEATED_CALL = "REPEATED_CALL"
"""The error code of a call the guard did not run."""

DEFAULT_REPEAT_LIMIT = 2
"""Identical calls with an identical result in a row before the next one is not run."""


def call_key(name: str, arguments: str) -> tuple[str, str]:
    """The key of a call: its name and its canonical arguments (module docstring)."""
    try:
        value: object = json.loads(arguments) if arguments.strip() else {}
    except (ValueError, RecursionError):
        return name, arguments.strip()
    return name, json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def result_key(result: ToolResult) -> str:
    """What makes two results the same: their content blocks, as logged, and the error flag."""
    blocks = [block_to_json(b) for b in result.content]
    return json.dumps([result.is_error, blocks], sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepPlan:
    """What the guard decided about one step's calls before they run."""

    refusals: dict[int, Refusal]
    """The calls not to run, by position."""
    ends_turn: bool
    """A refused call was refused in the step before too: the turn ends after this step."""


def _message(name: str, times: int) -> str:
    return (
        f"not run: you called `{name}` with these same arguments {times} times in a row and got "
        "the same result each time — that result is above, in this conversation. Do not call it "
        "again: use that result to answer the user now (or call something different)."
    )


def _again(name: str) -> str:
    return (
        f"not run: `{name}` with these arguments was refused just before as a repeat; the turn "
        "ends here. The earlier result above stands."
    )


class RepeatGuard:
    """The guard of one agent (module docstring): ``begin_turn``, then per step ``plan`` before its
    calls run and ``record`` after."""

    def __init__(self, limit: int = DEFAULT_REPEAT_LIMIT) -> None:
        if limit < 0:
            raise ValueError("the repeat limit must be 0 (off) or more")
        self.limit = limit
        self._runs: dict[tuple[str, str], tuple[str, int]] = {}
        """Each key made by the latest step that ran tools: its result and its run."""
        self._refused: set[tuple[str, str]] = set()
        """The keys refused in the latest step that ran tools."""

    def begin_turn(self) -> None:
        self._runs = {}
        self._refused = set()

    def plan(self, calls: Sequence[ToolCallBlock]) -> StepPlan:
        """Which of ``calls`` (one step's, in model order) are not to run, and whether the turn
        ends after them."""
        if self.limit == 0:
            return StepPlan(refusals={}, ends_turn=False)
        refusals: dict[int, Refusal] = {}
        ends = False
        for i, call in enumerate(calls):
            key = call_key(call.name, call.arguments)
            if key in self._refused:
                refusals[i] = Refusal(code=REPEATED_CALL, message=_again(call.name))
                ends = True
                continue
            run = self._runs.get(key)
            if run is not None and run[1] >= self.limit:
                refusals[i] = Refusal(code=REPEATED_CALL, message=_message(call.name, run[1]))
        return StepPlan(refusals=refusals, ends_turn=ends)

    def record(
        self, calls: Sequence[ToolCallBlock], results: Sequence[ToolResult], plan: StepPlan
    ) -> None:
        """Take in a step's calls and their results (in model order; ``plan`` was the step's)."""
        if self.limit == 0:
            return
        made: dict[tuple[str, str], str] = {}
        refused: set[tuple[str, str]] = set()
        for i, (call, result) in enumerate(zip(calls, results, strict=True)):
            key = call_key(call.name, call.arguments)
            if i in plan.refusals:
                refused.add(key)
                continue
            made[key] = result_key(result)
        runs: dict[tuple[str, str], tuple[str, int]] = {}
        for key, outcome in made.items():
            before = self._runs.get(key)
            count = before[1] + 1 if before is not None and before[0] == outcome else 1
            runs[key] = (outcome, count)
        self._runs = runs
        self._refused = refused
