"""Benchmark: 100,000 text-delta chunks through BlockAssembler plus Session.append.

Compares, in one run and alternating order, the median chunks/s of:

* ``json.loads``   — parsing the same chunks' JSON text (the cost of merely reading them);
* ``assembler``    — ``BlockAssembler.push`` alone;
* ``assemble+log`` — what the agent loop does per chunk: ``chunk_to_json`` + ``Session.append``
  (``assistant/chunk``, lossless-JSON checked) + ``BlockAssembler.push``.

Target (issue 2): assemble+log ≥ 200,000 chunks/s on the 2-core reference machine.
Run: ``make bench`` or ``python benchmarks/assembler_append.py [--chunks N] [--reps R]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from dsh_kernel.llm.assembler import BlockAssembler
from dsh_kernel.llm.codec import chunk_to_json
from dsh_kernel.llm.types import BlockEndChunk, FinishChunk, FinishStop, TextBlock, TextDeltaChunk
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.log import Session


def make_chunks(n: int) -> list[TextDeltaChunk]:
    return [TextDeltaChunk(index=0, text=f"tok{i % 97} ") for i in range(n)]


def bench_json(lines: list[str]) -> float:
    t = time.perf_counter()
    for line in lines:
        json.loads(line)
    return time.perf_counter() - t


def bench_assembler(chunks: list[TextDeltaChunk]) -> float:
    t = time.perf_counter()
    asm = BlockAssembler()
    push = asm.push
    for c in chunks:
        push(c)
    asm.push(BlockEndChunk(index=0, block=TextBlock(text="x")))
    asm.push(FinishChunk(reason=FinishStop()))
    asm.blocks()
    return time.perf_counter() - t


def bench_assemble_log(chunks: list[TextDeltaChunk]) -> float:
    session = Session(header=SessionHeader(id="bench", created_at=0))
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    t = time.perf_counter()
    asm = BlockAssembler()
    push = asm.push
    append = session.append
    for c in chunks:
        append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk_to_json(c)})
        push(c)
    asm.blocks()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a tiny run that only checks the benchmark still works (make test runs it); its figures mean nothing",
    )
    args = ap.parse_args()
    if args.quick:
        args.chunks, args.reps = 2_000, 1
    chunks = make_chunks(args.chunks)
    lines = [json.dumps(chunk_to_json(c)) for c in chunks]
    results: dict[str, list[float]] = {"json.loads": [], "assembler": [], "assemble+log": []}
    for rep in range(args.reps):
        order = list(results)
        if rep % 2:
            order.reverse()
        for name in order:
            if name == "json.loads":
                dt = bench_json(lines)
            elif name == "assembler":
                dt = bench_assembler(chunks)
            else:
                dt = bench_assemble_log(chunks)
            results[name].append(args.chunks / dt)
    base = statistics.median(results["json.loads"])
    print(f"{args.chunks} text-delta chunks, median of {args.reps} runs (alternating order)")
    print(f"{'path':<14} {'chunks/s':>12} {'vs json.loads':>14}")
    for name, rates in results.items():
        med = statistics.median(rates)
        print(f"{name:<14} {med:>12,.0f} {med / base:>13.2f}x")
    target = statistics.median(results["assemble+log"])
    print(
        f"target >= 200,000 chunks/s for assemble+log: {'MET' if target >= 200_000 else 'NOT MET'}"
    )


if __name__ == "__main__":
    main()
