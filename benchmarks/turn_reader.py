"""Benchmark: the turn reader (``transcript/turn.py``) on the live path, beside the log it reads.

A live chat cell appends every stream chunk to the log and feeds it to the view's ``TurnFold``,
which takes a ``snapshot()`` at each redraw. This compares, in one run and alternating order, the
median events/s of:

* ``log``             — ``Session.append`` of ``assistant/chunk`` events alone (what the agent pays);
* ``log+read``        — the same appends, each event also applied to a ``TurnFold``;
* ``log+read+redraw`` — as above, with a ``snapshot()`` every 50 events (a redraw rate of 20 Hz at
  1,000 chunks/s).

The ratio says what the view adds to the agent's own cost per chunk. Run: ``make bench`` or
``python benchmarks/turn_reader.py [--chunks N] [--reps R]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from dsh_kernel.llm.codec import chunk_to_json
from dsh_kernel.llm.types import TextDeltaChunk
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.log import Session
from dsh_kernel.transcript.turn import TurnFold


def run(chunks: int, *, read: bool, redraw_every: int | None) -> float:
    """Seconds to append (and read) ``chunks`` text deltas of one turn."""
    session = Session(header=SessionHeader(id="bench", created_at=0))
    fold = TurnFold()
    if read:
        session.subscribe(fold.apply)
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    payloads = [chunk_to_json(TextDeltaChunk(index=0, text=f"tok{i % 97} ")) for i in range(chunks)]
    append = session.append
    t = time.perf_counter()
    for i, chunk in enumerate(payloads):
        append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk})
        if redraw_every and i % redraw_every == 0:
            fold.snapshot()
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a tiny run that only checks the benchmark still works (make test runs it); its figures mean nothing",
    )
    args = parser.parse_args()
    if args.quick:
        args.chunks, args.reps = 500, 1
    cases: dict[str, tuple[bool, int | None]] = {
        "log": (False, None),
        "log+read": (True, None),
        "log+read+redraw": (True, 50),
    }
    results: dict[str, list[float]] = {name: [] for name in cases}
    for rep in range(args.reps):
        names = list(cases) if rep % 2 == 0 else list(reversed(cases))
        for name in names:
            read, every = cases[name]
            results[name].append(args.chunks / run(args.chunks, read=read, redraw_every=every))
    base = statistics.median(results["log"])
    print(f"turn reader, {args.chunks:,} chunks × {args.reps} reps (median events/s)")
    for name, rates in results.items():
        med = statistics.median(rates)
        print(f"  {name:16s} {med:12,.0f}   time ×{base / med:.2f} of log alone")


if __name__ == "__main__":
    main()
