"""Benchmark: what showing the agent's running code's output live costs the code.

The ``python`` tool runs the model's code on the kernel's main thread; while it runs, every write
goes through the output capture (``runtime.capture``) and, with a view, to the card's live area
(``views.live_output``: an append under a lock and a clock read per write, a push of the changed
outputs at most 20 times a second). This runs one loop printing N lines (default 100,000) through
``CodeRunner.run``, in one process, alternating:

* ``no view`` — the capture alone (what a run cost before live output, and costs without a view);
* ``view``    — the capture with a real tool card's live output as its tap. Each widget message is
  JSON-encoded as the kernel's session would before sending it (``comm.create_comm`` is replaced by
  a comm that encodes and counts), so the pushes' own cost is in the figure.

Reported: the median wall and CPU time of each over ``--reps`` runs (CPU time is this process's,
the push thread's included, and moves least on a loaded machine), their ratios (target ≤ 1.5× wall),
and how many pushes and bytes the view sent. Run: ``make bench`` or ``python benchmarks/live_output.py
[--lines N] [--reps R] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import comm  # noqa: E402
from comm.base_comm import BaseComm  # noqa: E402

from dsh_kernel.runtime.runner import CodeRunner  # noqa: E402
from dsh_kernel.runtime.types import DEFAULT_CAPS  # noqa: E402
from dsh_kernel.views.live_output import LiveOutput  # noqa: E402

TARGET_RATIO = 1.5


class EncodingComm(BaseComm):
    """A comm that JSON-encodes what it would send, as a kernel's session does, and counts it."""

    sent_bytes = 0
    messages = 0

    def publish_msg(
        self,
        msg_type: str,
        data: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        buffers: list[bytes] | None = None,
        **keys: Any,
    ) -> None:
        EncodingComm.messages += 1
        EncodingComm.sent_bytes += len(json.dumps({"msg_type": msg_type, "data": data}))


def loop_code(lines: int) -> str:
    return f"for _i in range({lines}):\n    print('step', _i, 'loss', 1 / (_i + 1))\n"


def run_once(lines: int, *, view: bool) -> tuple[float, float, int]:
    """Wall and CPU seconds (this process: the ticker thread's too) for the loop, and the live
    area's pushes (0 without a view)."""
    live = LiveOutput(whole=True) if view else None
    runner = CodeRunner({})
    started, cpu = time.perf_counter(), time.process_time()
    result = runner.run(loop_code(lines), caps=DEFAULT_CAPS, tap=live)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert result.ok, result.failure
    pushes = 0
    if live is not None:
        live.close()
        pushes = live.pushes
        live.dispose()
    return elapsed, cpu, pushes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a tiny run (checks it runs)")
    args = parser.parse_args(argv)
    if args.quick:
        args.lines, args.reps = 2_000, 1
    comm.create_comm = lambda **kwargs: EncodingComm(**kwargs)

    run_once(min(args.lines, 2_000), view=True)  # warm-up: imports, first widgets
    times: dict[str, list[float]] = {"no view": [], "view": []}
    cpus: dict[str, list[float]] = {"no view": [], "view": []}
    pushes: list[int] = []
    for rep in range(args.reps):
        order = [False, True] if rep % 2 == 0 else [True, False]
        for view in order:
            if view:
                EncodingComm.sent_bytes = EncodingComm.messages = 0
            seconds, cpu, n = run_once(args.lines, view=view)
            times["view" if view else "no view"].append(seconds)
            cpus["view" if view else "no view"].append(cpu)
            if view:
                pushes.append(n)
    base = statistics.median(times["no view"])
    with_view = statistics.median(times["view"])
    ratio = with_view / base if base > 0 else float("inf")
    cpu_base, cpu_view = statistics.median(cpus["no view"]), statistics.median(cpus["view"])
    cpu_ratio = cpu_view / cpu_base if cpu_base > 0 else float("inf")
    print(f"a loop printing {args.lines:,} lines, median of {args.reps} (python tool's runner)")
    print(f"  no view : {base * 1000:9.1f} ms wall {cpu_base * 1000:9.1f} ms CPU")
    print(
        f"  view    : {with_view * 1000:9.1f} ms wall {cpu_view * 1000:9.1f} ms CPU   "
        f"({statistics.median(pushes):.0f} pushes; last run: {EncodingComm.messages} messages, "
        f"{EncodingComm.sent_bytes / 1000:.0f} kB sent)"
    )
    verdict = "ok" if ratio <= TARGET_RATIO else "OVER"
    print(
        f"  ratio   : {ratio:9.2f}× wall {cpu_ratio:6.2f}× CPU   target ≤ {TARGET_RATIO}× wall "
        f"[{verdict}]"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
