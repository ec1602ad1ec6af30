"""Streaming throughput: text chunks per second through each client, same loopback server, same bytes.

One OpenAI-compatible stream of N text chunks (default 20,000, each a full chat.completion.chunk
object like WIRE transcript A) is served by ``tests.support.sse_server`` running in its **own
process** (so the server never competes with the clients for the GIL). Contenders, each consuming
the whole stream and checked to have received every character:

- ``raw``: httpx ``aiter_lines`` + ``json.loads`` — the practical limit of a Python client;
- ``adapter``: our ``ChatCompletionsProvider.stream`` (chunks as ``StreamChunk`` values);
- ``adapter+loop``: the same adapter under ``Agent`` — assembler, ``assistant/chunk`` events in the
  session log, the final message;
- ``openai-sdk``: the official ``openai`` client, ``stream=True``;
- ``pydantic-ai``: ``Agent.run_stream`` over its OpenAI chat model, ``stream_text(delta=True,
  debounce_by=None)``.

By default the server writes the stream in 64 KiB pieces so that it is never the bottleneck;
``--per-frame`` makes it write every SSE frame separately, as real APIs flush tokens, which adds a
fixed per-read cost (httpx and h11) to every contender. The order of the contenders rotates every
repetition, and every run starts from a collected heap (``gc.collect()`` before it, untimed: the
garbage one contender leaves, such as a finished agent's log, is not collected on another's time);
each figure is the median of ``--reps`` runs after one warm-up run, by the wall clock and by this
process's CPU time (which a loaded machine's preemptions change least), with the spread beside it:
the lowest and highest of the runs' ratios to the same repetition's ``raw``. Targets: adapter ≥
0.5× raw (issue 3), adapter+loop — the adapter under the agent, its log included — ≥ 0.5× raw
(issue 31; it was 0.25×), both ≥ 5× the openai SDK. ``openai`` and ``pydantic-ai-slim[openai]`` are
benchmark-only dependencies; a contender whose package is missing is reported as skipped.

``--baseline PATH`` compares this tree with another (e.g. a checkout of ``main``) in one run: the
benchmark runs ``--reps`` times in each tree, alternately, in a fresh process each (with three
rotations of the contenders), and every contender is reported as the median of its rate as a
multiple of the same run's ``raw``, with the lowest and highest of those runs beside it.

Run from the repository root: ``python benchmarks/streaming.py [--chunks 20000] [--reps 5]
[--baseline PATH]``.
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
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from dsh_kernel.ids import new_message_id
from dsh_kernel.llm.providers import GENERIC, ChatCompletionsProvider
from dsh_kernel.llm.types import GenerateRequest, Message, TextBlock, TextDeltaChunk, UserSource

ROOT = Path(__file__).resolve().parent.parent
MODEL = "bench-model"
KEY = "sk-bench"


def piece(i: int) -> str:
    return f"tok{i} " if i % 50 else f"née{i} "  # a few multi-byte characters along the way


def stream_text(n: int) -> str:
    def chunk(delta: dict[str, object], finish: str | None = None) -> str:
        obj = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1764500000,
            "model": MODEL,
            "system_fingerprint": "fp_bench",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            "usage": None,
        }
        return "data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n\n"

    usage = {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": n + 10}
    parts = [chunk({"role": "assistant", "content": ""})]
    parts += [chunk({"content": piece(i)}) for i in range(n)]
    parts.append(chunk({}, "stop"))
    parts.append(
        "data: " + json.dumps({"id": "chatcmpl-bench", "choices": [], "usage": usage}) + "\n\n"
    )
    parts.append("data: [DONE]\n\n")
    return "".join(parts)


Contender = Callable[[], Awaitable[int]]


def user(text: str) -> Message:
    return Message(
        id=new_message_id(), role="user", content=(TextBlock(text=text),), source=UserSource()
    )


# Complexity (C901): one nested stream function per contender, each with its own chunk loop.
def contenders(url: str, client: httpx.AsyncClient) -> dict[str, Contender | str]:  # noqa: C901
    body = {"model": MODEL, "messages": [{"role": "user", "content": "go"}], "stream": True}
    provider = ChatCompletionsProvider(
        id="bench", base_url=url, profile=GENERIC, api_key=lambda: KEY, client=client
    )
    request = GenerateRequest(provider="bench", model=MODEL, messages=(user("go"),))

    async def raw() -> int:
        chars = 0
        async with client.stream("POST", url + "/chat/completions", json=body) as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data: "):
                    data = line[6:]
                    if data == "[DONE]":
                        break
                    obj = json.loads(data)
                    for choice in obj["choices"]:
                        chars += len(choice["delta"].get("content") or "")
        return chars

    async def adapter() -> int:
        chars = 0
        async for chunk in provider.stream(request):
            if isinstance(chunk, TextDeltaChunk):
                chars += len(chunk.text)
        return chars

    async def adapter_loop() -> int:
        from dsh_kernel import Agent

        agent = Agent(provider=provider, model=MODEL)
        agent.followup("go")
        await agent.when_idle()
        messages = agent.session.derive_messages()
        return len(messages[-1].text())

    out: dict[str, Contender | str] = {"raw": raw, "adapter": adapter, "adapter+loop": adapter_loop}
    try:
        from openai import AsyncOpenAI
    except ImportError:
        out["openai-sdk"] = "skipped: `openai` is not installed"
    else:
        sdk = AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0)

        async def openai_sdk() -> int:
            chars = 0
            stream = await sdk.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "go"}], stream=True
            )
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    chars += len(chunk.choices[0].delta.content)
            return chars

        out["openai-sdk"] = openai_sdk
    try:
        from pydantic_ai import Agent as PydanticAgent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider
    except ImportError:
        out["pydantic-ai"] = "skipped: `pydantic-ai-slim[openai]` is not installed"
    else:
        model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=url, api_key=KEY))
        pai = PydanticAgent(model)

        async def pydantic_ai() -> int:
            chars = 0
            async with pai.run_stream("go") as result:
                async for delta in result.stream_text(delta=True, debounce_by=None):
                    chars += len(delta)
            return chars

        out["pydantic-ai"] = pydantic_ai
    return out


Times = dict[str, list[float] | str]


async def measure(url: str, n: int, reps: int) -> tuple[Times, Times]:
    """Each contender's wall times and this process's CPU times (skipped ones: why)."""
    expected = sum(len(piece(i)) for i in range(n))
    async with httpx.AsyncClient(timeout=120) as client:
        runs = contenders(url, client)
        names = list(runs)
        times: Times = {k: v if isinstance(v, str) else [] for k, v in runs.items()}
        cpu: Times = {k: v if isinstance(v, str) else [] for k, v in runs.items()}
        for rep in range(reps + 1):  # rep 0 is the warm-up
            shift = rep % len(names)
            for name in names[shift:] + names[:shift]:
                run = runs[name]
                if isinstance(run, str):
                    continue
                gc.collect()  # one contender's garbage is not collected on another's time
                started, started_cpu = time.perf_counter(), time.process_time()
                chars = await run()
                elapsed = time.perf_counter() - started
                used = time.process_time() - started_cpu
                if chars != expected:
                    raise AssertionError(
                        f"{name}: received {chars} characters, expected {expected}"
                    )
                if rep:
                    slot, cpu_slot = times[name], cpu[name]
                    assert isinstance(slot, list) and isinstance(cpu_slot, list)
                    slot.append(elapsed)
                    cpu_slot.append(used)
    return times, cpu


def rates_of(times: Times, n: int) -> dict[str, float]:
    return {k: n / statistics.median(v) for k, v in times.items() if isinstance(v, list) and v}


def spread(values: list[float]) -> str:
    """``min–max`` of ``values``."""
    return f"{min(values):.2f}–{max(values):.2f}"


def run_ratios(times: Times, name: str) -> list[float]:
    """Each repetition's rate of ``name`` as a multiple of the same repetition's ``raw``."""
    mine, raw = times.get(name), times.get("raw")
    if not isinstance(mine, list) or not isinstance(raw, list):
        return []
    return [r / m for m, r in zip(mine, raw, strict=True)]


def report(times: Times, cpu: Times, n: int) -> dict[str, float]:
    rates = rates_of(times, n)
    cpu_rates = rates_of(cpu, n)
    raw = rates.get("raw")
    sdk = rates.get("openai-sdk")
    print(
        f"{n} text chunks, median of {len(next(iter(t for t in times.values() if isinstance(t, list))))} runs "
        "(spread: the lowest and highest run, each against its own repetition's raw)"
    )
    print(
        f"{'client':<14}{'chunks/s':>12}{'× raw':>9}{'spread':>12}{'× sdk':>9}"
        f"{'CPU µs/chunk':>14}{'× raw':>9}{'spread':>12}"
    )
    for name, value in times.items():
        if isinstance(value, str):
            print(f"{name:<14}{value}")
            continue
        rate = rates[name]
        vs_raw = f"{rate / raw:.2f}" if raw else "-"
        wall_spread = spread(run_ratios(times, name)) if raw else "-"
        vs_sdk = f"{rate / sdk:.2f}" if sdk else "-"
        cpu_us = 1e6 / cpu_rates[name]
        cpu_raw = f"{cpu_rates[name] / cpu_rates['raw']:.2f}" if "raw" in cpu_rates else "-"
        cpu_spread = spread(run_ratios(cpu, name)) if "raw" in cpu_rates else "-"
        print(
            f"{name:<14}{rate:>12,.0f}{vs_raw:>9}{wall_spread:>12}{vs_sdk:>9}"
            f"{cpu_us:>14.1f}{cpu_raw:>9}{cpu_spread:>12}"
        )
    print(
        "(CPU: this process's CPU time, the server's aside — what a loaded machine's preemptions "
        "do not change)"
    )
    return {**rates, **{f"cpu {k}": v for k, v in cpu_rates.items()}}


def compare(args: argparse.Namespace) -> int:
    """``--baseline``: this benchmark run ``--reps`` times in each tree, alternately (a fresh
    process each, its ``dsh_kernel`` imported from that tree, three rotations of the contenders
    each), and each contender's rate as a multiple of that same run's ``raw`` — so a machine that
    slows down between runs moves both."""
    trees = {"baseline": args.baseline.resolve(), "this tree": ROOT}
    ratios: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    raw: dict[str, list[float]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rates.json"
        for rep in range(args.reps):
            names = list(trees) if rep % 2 == 0 else list(reversed(trees))
            for name in names:
                command = [sys.executable, __file__, "--chunks", str(args.chunks), "--reps", "3"]
                if args.per_frame:
                    command.append("--per-frame")
                env = {**os.environ, "PYTHONPATH": str(trees[name])}
                subprocess.run(
                    [*command, "--json", str(out), "--quiet"], check=True, env=env, cwd=ROOT
                )
                rates: dict[str, float] = json.loads(out.read_text(encoding="utf-8"))
                raw[name].append(rates["raw"])
                for contender, rate in rates.items():
                    base = rates["cpu raw"] if contender.startswith("cpu ") else rates["raw"]
                    ratios[name].setdefault(contender, []).append(rate / base)
    print(
        f"{args.chunks} text chunks, {args.reps} runs per tree (alternating), "
        "median of each run's rate as a multiple of that run's raw, and the lowest–highest run"
    )
    print(f"{'client':<16}" + "".join(f"{name + ' × raw':>20}{'spread':>12}" for name in trees))
    for contender in ratios["this tree"]:
        cells = [
            f"{statistics.median(ratios[name][contender]):>20.2f}"
            f"{spread(ratios[name][contender]):>12}"
            if contender in ratios[name]
            else f"{'-':>20}{'':>12}"
            for name in trees
        ]
        print(f"{contender:<16}" + "".join(cells))
    print(
        f"{'raw chunks/s':<16}"
        + "".join(f"{statistics.median(raw[n]):>20,.0f}{'':>12}" for n in trees)
    )
    print("(cpu: the same, from this process's CPU time: what a loaded machine changes least)")
    for name, tree in trees.items():
        print(f"  {name}: {tree}")
    if args.json:
        medians = {n: {c: statistics.median(v) for c, v in r.items()} for n, r in ratios.items()}
        args.json.write_text(json.dumps(medians, indent=2), encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="streaming throughput benchmark")
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument(
        "--per-frame",
        action="store_true",
        help="one server write per SSE frame (as real APIs flush), instead of 64 KiB writes",
    )
    parser.add_argument("--json", type=Path, help="also write the rates here")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a source tree (e.g. a checkout of main) to compare against, run by run",
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing (with --json)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a tiny run that only checks the benchmark still works (make test runs it); its figures mean nothing",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.chunks, args.reps = 500, 1
    if args.baseline is not None:
        return compare(args)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.json"
        script.write_text(
            json.dumps(
                {
                    "replies": [
                        {
                            "sse": stream_text(args.chunks),
                            "sticky": True,
                            "coalesce": not args.per_frame,
                        }
                    ]
                }
            ),
            encoding="utf-8",
        )
        server = subprocess.Popen(
            [sys.executable, "-m", "tests.support.sse_server", str(script)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            times, cpu = asyncio.run(measure(url, args.chunks, args.reps))
        finally:
            server.terminate()
            server.wait(10)
            if server.stdout is not None:
                server.stdout.close()
    if args.quiet:
        rates = {**rates_of(times, args.chunks)}
        rates.update({f"cpu {k}": v for k, v in rates_of(cpu, args.chunks).items()})
    else:
        rates = report(times, cpu, args.chunks)
    if args.json:
        args.json.write_text(json.dumps(rates, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
