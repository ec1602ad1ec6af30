"""Per-turn harness cost over one long session, and memory per stored event (issue 16, item 5).

**Per turn.** One ``Agent`` (dev invariants off: they walk the log by design) runs ``--turns`` turns
(default 1,000) of one session; each turn streams one answer of ``--chunks`` chunks (default 1,000:
block start, text deltas, block end, usage, finish) from a ``ScriptedProvider`` (the model edge,
faked; it yields to the event loop before every chunk, as a socket would). Every ``--tool-every``-th
turn (default 4) first calls a read-only tool and then answers, so the tool path (call, result, a
second request) is exercised too. The provider's model info gives a context window, so every
request is fitted (``agent.request.fit.fit_request``, the meter) as a real route's is.

Each turn also does what a chat cell does around it (``kernel.kernel``'s chat path): the cell's view
(``kernel.host.viewing.open_view``: a real ``TurnView`` with its ``TurnFold``, image reader and widgets,
subscribed to the session for the turn), its ``close()`` (the static rendering), and ``turn_end``
(how the cell's turn ended). Only the display messages are missing (a silent cell), and the journal
unless ``--journal`` (each session then journals into a temporary store, every checkpoint an fsync).

Reported: the harness time of a turn at turns 1, 100, 200 and 1,000 — each the median over the turns
of a 9-turn window at that point (so it is the time of an ordinary 1,000-chunk turn; the tool
turns are rarer), then the median over ``--reps`` sessions — and the ratio last/first (target:
the median of 5 sessions ≤ 1.3), literally and against a fresh session's turn measured right after
it (the same moment of a loaded machine), each with the lowest and highest session's ratio. "agent"
is ``followup`` to idle; "cell" adds the view and the kernel's reads, by the wall clock; "cell CPU"
is the same cell by this process's CPU time, which preemptions by other processes do not change.
The mean per turn over the first and the last 100 turns is printed beside them: it includes the
garbage collector's full collections, which a median leaves out.

**Memory per stored event.** ``tracemalloc``: the bytes still allocated once a session of
``--memory-events`` events (default 100,000: 100 turns of the same shape, no view) has been built
by an ``Agent`` and everything but the ``Session`` (agent, provider, its script and recorded
requests) has been dropped and collected, divided by the session's event count.

**Before and after, in one run.** ``--baseline PATH`` runs this same script a second time, in a
subprocess whose ``dsh_kernel`` is imported from the tree at ``PATH`` (e.g. a checkout of ``main``),
and prints its figures beside this tree's. ``--json FILE`` writes the figures.

Run: ``make bench`` or ``python benchmarks/long_session.py [--turns 1000] [--chunks 1000]
[--reps 1] [--baseline PATH]``; the target's figure is ``--reps 5``. The defaults take about a
minute.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dsh_kernel
from dsh_kernel import Agent
from dsh_kernel.ids import new_message_id
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.kernel.host.settings import HostSettings
from dsh_kernel.kernel.host.viewing import open_view
from dsh_kernel.llm.types import Message, ModelInfo, StreamChunk, TextBlock, TokenUsage, UserSource
from dsh_kernel.session.log import Session
from dsh_kernel.store.journal import attach_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.testing import ScriptedProvider, text_response, tool_call_response
from dsh_kernel.tools.types import ToolDefinition
from dsh_kernel.transcript.turn import turn_end

MARKS = (1, 100, 200, 1000)
WINDOW = 9
WINDOW_TOKENS = 1 << 30
"""The route's context window: large enough that a long benchmark session never fills it."""


def _lookup(args: JsonObject) -> JsonValue:
    return {"key": args.get("key"), "value": 42}


LOOKUP = ToolDefinition(
    name="lookup",
    description="Look a key up.",
    parameters={"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
    execute=lambda args, ctx: _lookup(args),
    read_only=True,
)


def answer(chunks: int, turn: int) -> list[StreamChunk]:
    """One answer of ``chunks`` chunks (``chunks - 4`` text deltas), with usage."""
    pieces = max(1, chunks - 4)
    text = "".join(f"tok{i % 97} " for i in range(pieces))
    usage = TokenUsage(input_tokens=1000 + 2 * turn * pieces, output_tokens=pieces)
    return text_response(text, pieces=pieces, usage=usage)


def prompt(turn: int) -> Message:
    text = f"Question {turn}: what is next?"
    return Message(
        id=new_message_id(), role="user", content=(TextBlock(text=text),), source=UserSource()
    )


def make_agent(provider: ScriptedProvider) -> Agent:
    return Agent(provider=provider, model="bench", tools=(LOOKUP,), check_invariants=False)


def script_turn(provider: ScriptedProvider, turn: int, chunks: int, tool_every: int) -> None:
    if tool_every and turn % tool_every == 0:
        usage = TokenUsage(input_tokens=1000 + 2 * turn * chunks, output_tokens=20)
        provider.push(tool_call_response("lookup", {"key": f"k{turn}"}, usage=usage))
    provider.push(answer(chunks, turn))


class Host:
    """What ``kernel.host.viewing.open_view`` reads of the kernel's ``AgentHost``."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.view: object = None
        self.settings = HostSettings()  # the defaults a kernel runs with (the redraw rate)

    def resolve_approval(self, request_id: str, outcome: str) -> None:
        raise AssertionError("the benchmark's tool needs no approval")

    def model_info(self, provider: str, model: str) -> ModelInfo | None:
        return self.agent.provider.model_info(model)

    def earlier_session_hint(self) -> str | None:
        return None

    @property
    def budgets(self) -> Host:
        """No daily budget: the footer has no budget part (``kernel.course.budgets.footer_text``)."""
        return self

    def footer_text(self, fresh: bool) -> str | None:
        del fresh
        return None


async def run_cell_turn(agent: Agent, host: Host, turn: int) -> tuple[float, float, float]:
    """One chat cell's turn, as the kernel runs it (``kernel.kernel``'s chat path, silent: no
    display messages): ``(agent seconds, cell seconds, cell CPU seconds)``."""
    session = agent.session
    msg = prompt(turn)
    started_cpu = time.process_time()
    started = time.perf_counter()
    view = open_view(host, msg.id, silent=True)  # type: ignore[arg-type]  # the host's duck type
    agent_started = time.perf_counter()
    agent.followup(msg)
    await agent.when_idle()
    agent_done = time.perf_counter()
    view.close()
    end = turn_end(session.events, msg.id)
    done = time.perf_counter()
    cpu = time.process_time() - started_cpu
    if agent.last_error is not None or end is None or end.get("kind") != "completed":
        raise AssertionError(f"turn {turn} did not complete: {end} {agent.last_error!r}")
    return agent_done - agent_started, done - started, cpu


class Cell:
    """One session, driven as a notebook's chat cells drive it (journaled into ``store``, if
    given, as the kernel journals it)."""

    def __init__(self, chunks: int, tool_every: int, store: Store | None = None) -> None:
        self.provider = ScriptedProvider(info=ModelInfo(context_window=WINDOW_TOKENS))
        self.agent = make_agent(self.provider)
        self.host = Host(self.agent)
        self.chunks, self.tool_every = chunks, tool_every
        self.turns = 0
        self.journal = attach_journal(self.agent, store) if store is not None else None

    def close(self) -> None:
        if self.journal is not None:
            self.journal.close()

    async def next_turn(self) -> tuple[float, float, float]:
        self.turns += 1
        script_turn(self.provider, self.turns, self.chunks, self.tool_every)
        return await run_cell_turn(self.agent, self.host, self.turns)


KINDS = ("agent", "cell", "cell CPU", "fresh agent", "fresh cell", "fresh cell CPU")
""""agent" and "cell" by the wall clock; "cell CPU" by this process's CPU time, which a loaded
machine's preemptions do not change."""


def windows(turns: int, marks: list[int]) -> dict[int, int]:
    """turn → the mark whose window holds it: ``WINDOW`` turns around each mark, inside the run."""
    out: dict[int, int] = {}
    for m in marks:
        lo = min(max(1, m - WINDOW // 2), max(1, turns - WINDOW + 1))
        for t in range(lo, min(turns, lo + WINDOW - 1) + 1):
            out.setdefault(t, m)
    return out


async def long_session(
    turns: int, chunks: int, tool_every: int, marks: list[int], store: Store | None
) -> tuple[dict[str, dict[int, float]], dict[str, tuple[float, float]]]:
    """The medians per mark of each kind, and the means of the first and last 100 turns."""
    long = Cell(chunks, tool_every, store)
    where = windows(turns, marks)
    samples: dict[str, dict[int, list[float]]] = {k: {m: [] for m in marks} for k in KINDS}
    every: dict[str, list[float]] = {"agent": [], "cell": []}
    fresh: tuple[int, Cell] | None = None
    for turn in range(1, turns + 1):
        a, c, cpu = await long.next_turn()
        every["agent"].append(a)
        every["cell"].append(c)
        m = where.get(turn)
        if m is None:
            continue
        samples["agent"][m].append(a)
        samples["cell"][m].append(c)
        samples["cell CPU"][m].append(cpu)
        # A fresh session's turn right after it: the same moment of a noisy machine, at turn 1-9.
        if fresh is None or fresh[0] != m:
            if fresh is not None:
                fresh[1].close()
            fresh = (m, Cell(chunks, tool_every, store))
        fa, fc, fcpu = await fresh[1].next_turn()
        samples["fresh agent"][m].append(fa)
        samples["fresh cell"][m].append(fc)
        samples["fresh cell CPU"][m].append(fcpu)
    long.provider.assert_consumed()
    long.close()
    if fresh is not None:
        fresh[1].close()
    medians = {k: {m: statistics.median(v) for m, v in by.items()} for k, by in samples.items()}
    k = min(100, turns)
    means = {kind: (statistics.fmean(v[:k]), statistics.fmean(v[-k:])) for kind, v in every.items()}
    return medians, means


async def _build(turns: int, chunks: int, tool_every: int) -> Session:
    provider = ScriptedProvider(info=ModelInfo(context_window=WINDOW_TOKENS))
    agent = make_agent(provider)
    for turn in range(1, turns + 1):
        script_turn(provider, turn, chunks, tool_every)
        agent.followup(prompt(turn))
        await agent.when_idle()
    return agent.session


def memory_per_event(events: int, chunks: int, tool_every: int) -> tuple[float, int]:
    """``(bytes per event, events)`` held by a session of about ``events`` events (tracemalloc)."""
    turns = max(1, round(events / (chunks + 8)))
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    session = asyncio.run(_build(turns, chunks, tool_every))
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    n = len(session)
    return held / n, n


def measure(args: argparse.Namespace) -> dict[str, object]:
    marks = sorted({m for m in MARKS if m <= args.turns} | {args.turns})
    per: dict[str, dict[int, list[float]]] = {k: {m: [] for m in marks} for k in KINDS}
    means: dict[str, list[tuple[float, float]]] = {"agent": [], "cell": []}
    for _ in range(args.reps):
        gc.collect()
        with tempfile.TemporaryDirectory() as tmp:
            store = Store.at(tmp) if args.journal else None
            medians, firsts_lasts = asyncio.run(
                long_session(args.turns, args.chunks, args.tool_every, marks, store)
            )
        for kind, by in medians.items():
            for m, v in by.items():
                per[kind][m].append(v)
        for kind, pair in firsts_lasts.items():
            means[kind].append(pair)
    bytes_per_event, n = memory_per_event(args.memory_events, args.chunks, args.tool_every)
    return {
        "tree": str(Path(dsh_kernel.__file__).resolve().parent.parent),
        "turns": args.turns,
        "chunks": args.chunks,
        "reps": args.reps,
        "marks": marks,
        "ms": {
            kind: {str(m): 1000 * statistics.median(v) for m, v in by.items()}
            for kind, by in per.items()
        },
        "ratio_runs": {  # each session's turn last / turn 1, and turn last / a fresh session then
            kind: {
                "literal": [b / a for a, b in zip(per[kind][1], per[kind][marks[-1]], strict=True)],
                "fresh": [
                    b / f
                    for f, b in zip(
                        per["fresh " + kind][marks[-1]], per[kind][marks[-1]], strict=True
                    )
                ],
            }
            for kind in ("agent", "cell", "cell CPU")
        },
        "mean_ms": {
            kind: {
                "first100": 1000 * statistics.median(a for a, _ in pairs),
                "last100": 1000 * statistics.median(b for _, b in pairs),
            }
            for kind, pairs in means.items()
        },
        "bytes_per_event": bytes_per_event,
        "memory_events": n,
    }


def report(results: list[dict[str, Any]], names: list[str]) -> None:
    first = results[0]
    marks: list[int] = first["marks"]
    last = str(marks[-1])
    print(
        f"long session: {first['turns']} turns of {first['chunks']} chunks, median of "
        f"{first['reps']} session(s); ms per turn, the median of a {WINDOW}-turn window at each mark"
    )
    print(f"  {'':<34}" + "".join(f"{n:>16}" for n in names))

    def row(label: str, cell: Callable[[dict[str, Any]], str]) -> None:
        print(f"  {label:<34}" + "".join(f"{cell(r):>16}" for r in results))

    def ms(r: dict[str, Any], kind: str, m: int | str) -> float | None:
        return r["ms"].get(kind, {}).get(str(m))

    def fig(value: float | None, form: str = ".2f") -> str:
        return "-" if value is None else format(value, form)

    def runs(r: dict[str, Any], kind: str, which: str) -> str:
        values = r.get("ratio_runs", {}).get(kind, {}).get(which)
        return f"{min(values):.2f}–{max(values):.2f}" if values else "-"

    def ratio(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else a / b

    for kind in ("agent", "cell", "cell CPU"):
        for m in marks:
            row(f"{kind}, turn {m}", lambda r, k=kind, m=m: fig(ms(r, k, m)))
            row("  fresh session, same moment", lambda r, k=kind, m=m: fig(ms(r, "fresh " + k, m)))
        row(
            f"{kind}, turn {last} / turn 1",
            lambda r, k=kind: fig(ratio(ms(r, k, last), ms(r, k, 1))),
        )
        row("  lowest–highest session", lambda r, k=kind: runs(r, k, "literal"))
        row(
            f"{kind}, turn {last} / fresh then",
            lambda r, k=kind: fig(ratio(ms(r, k, last), ms(r, "fresh " + k, last))),
        )
        row("  lowest–highest session", lambda r, k=kind: runs(r, k, "fresh"))
        if kind == "cell CPU":
            continue
        for which in ("first100", "last100"):
            row(
                f"{kind}, mean of the {which[:-3]} 100",
                lambda r, k=kind, w=which: f"{r['mean_ms'][k][w]:.2f}",
            )
    row("bytes per stored event", lambda r: f"{r['bytes_per_event']:,.0f}")
    row("  (events in that session)", lambda r: f"{r['memory_events']:,}")
    print("  memory: tracemalloc, bytes held by the Session alone after the agent is dropped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--tool-every", type=int, default=4)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--memory-events", type=int, default=100_000)
    parser.add_argument(
        "--journal",
        action="store_true",
        help="journal every session (a temporary store), as the kernel does: every checkpoint "
        "is then an fsync",
    )
    parser.add_argument("--baseline", type=Path, help="a source tree to compare against")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--quiet", action="store_true", help="print nothing (with --json)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a tiny run that only checks the benchmark still works (make test runs it); its figures mean nothing",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.turns, args.chunks, args.memory_events = 12, 5, 200
    results = [measure(args)]
    names = ["this tree"]
    if args.baseline is not None:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "baseline.json"
            forwarded = [a for a in (argv if argv is not None else sys.argv[1:])]
            cut = [a for i, a in enumerate(forwarded) if not _is_baseline(forwarded, i)]
            env = {**os.environ, "PYTHONPATH": str(args.baseline.resolve())}
            subprocess.run(
                [sys.executable, __file__, *cut, "--json", str(out), "--quiet"],
                check=True,
                env=env,
                cwd=args.baseline,
            )
            results.insert(0, json.loads(out.read_text(encoding="utf-8")))
            names.insert(0, "baseline")
    if args.json is not None:
        args.json.write_text(json.dumps(results[-1], indent=2), encoding="utf-8")
    if not args.quiet:
        report(results, names)
        for name, r in zip(names, results, strict=True):
            print(f"  {name}: {r['tree']}")
    return 0


def _is_baseline(argv: list[str], i: int) -> bool:
    """Whether ``argv[i]`` is ``--baseline`` or its value (not forwarded to the baseline run)."""
    a = argv[i]
    if a == "--baseline" or a.startswith("--baseline="):
        return True
    if a in ("--json",) or a.startswith("--json="):
        return True
    return i > 0 and argv[i - 1] in ("--baseline", "--json")


if __name__ == "__main__":
    sys.exit(main())
