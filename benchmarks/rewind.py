"""What the rewind (``kernel.rewind``, issue 33) adds to a chat cell, beside the turn it precedes.

One ``Agent`` (dev invariants off) runs ``--turns`` turns (default 300) of one session, each a
prompt recording its notebook cell (``c1``, ``c2``, …) answered by a ``ScriptedProvider`` stream of
``--chunks`` chunks (default 200): a long notebook conversation. Then, side by side in one run:

* **decide (append)**: what every chat cell with a cell id now does first when nothing is
  rewound — read the log's turns (``turns_of``) and ``plan`` a new cell below the others;
* **rewind**: re-running cell ``c2`` — ``turns_of``, ``plan``, ``store.sessions.fork`` (the copied
  prefix becomes the seed of a new ``Session``) and the context record; the journal's copy of
  the seed is not included (it is written as any resumed session's);
* **turn**: one more ordinary turn of the same session (``followup`` to idle), the work the
  decision precedes.

Each is the median of ``--reps`` runs (default 15); the ratios are decide/turn and rewind/turn.
Run: ``make bench`` or ``python benchmarks/rewind.py [--turns 300] [--chunks 200] [--reps 15]``
(about 30 s; ``--quick``: a tiny run that only proves it works).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

from dsh_kernel import Agent
from dsh_kernel.ids import new_message_id
from dsh_kernel.kernel.rewind import context_of, plan, turns_of, with_cell
from dsh_kernel.llm.types import Message, TextBlock, UserSource
from dsh_kernel.store.sessions import fork
from dsh_kernel.testing import ScriptedProvider, text_response


def prompt(text: str, cell: str) -> Message:
    msg = Message(
        id=new_message_id(), role="user", content=(TextBlock(text=text),), source=UserSource()
    )
    return with_cell(msg, cell, None)


def median_ms(fn: Callable[[], object], reps: int) -> float:
    times: list[float] = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


async def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--chunks", type=int, default=200)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="a tiny run that only proves it works")
    a = ap.parse_args()
    if a.quick:
        a.turns, a.chunks, a.reps = 6, 5, 3
    words = " ".join(f"w{i}" for i in range(a.chunks))
    n = a.turns + a.reps + 1
    provider = ScriptedProvider([text_response(words, pieces=a.chunks) for _ in range(n)])
    agent = Agent(provider=provider, model="m1")
    for i in range(1, a.turns + 1):
        agent.followup(prompt(f"question {i}", f"c{i}"))
        await agent.when_idle()
    session = agent.session

    def decide() -> object:
        return plan(turns_of(session), "c-new")

    def rewind() -> object:
        p = plan(turns_of(session), "c2")
        assert p is not None and p.fork_after is not None
        child = fork(session.header, list(session.events), p.fork_after, kind="rewind")
        return child, context_of(p, parent=session.id, names=[])

    decide_ms = median_ms(decide, a.reps)
    rewind_ms = median_ms(rewind, a.reps)
    turn_times: list[float] = []
    for i in range(a.reps):
        t0 = time.perf_counter()
        agent.followup(prompt(f"more {i}", f"m{i}"))
        await agent.when_idle()
        turn_times.append((time.perf_counter() - t0) * 1000)
    turn_ms = statistics.median(turn_times)
    print(
        f"session: {a.turns} turns, {len(session)} events ({a.chunks} chunks a turn); "
        f"medians of {a.reps}"
    )
    print(f"  decide (append)  {decide_ms:8.2f} ms   {decide_ms / turn_ms:6.1%} of a turn")
    print(f"  rewind (fork)    {rewind_ms:8.2f} ms   {rewind_ms / turn_ms:6.1%} of a turn")
    print(f"  turn             {turn_ms:8.2f} ms")


if __name__ == "__main__":
    asyncio.run(main())
