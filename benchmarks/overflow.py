"""Benchmark: how long a context overflow takes to reach the user (issue 14, item 5).

The server is llama-cpp-python as measured in ``real-llama-cpp-server.md``: an over-long prompt sent
streaming gets HTTP 200 and not one byte; sent without streaming, a 400 ``context_length_exceeded``.
It is played by the loopback scenario server. Three ways through, side by side in one run:

* ``before`` — the behaviour until issue 14, kept reachable through the agent's own seams: no
  probe of the empty stream (``ChatProfile.probe_empty_stream=False``) and the harness's five
  retries of ``EMPTY_RESPONSE`` (``RetryPolicy(code_max_retries={})``), with real backoff sleeps.
  It ends with ``EMPTY_RESPONSE`` — the user is told to rephrase;
* ``after`` — the defaults: the empty stream is probed once, the 400 says
  ``CONTEXT_WINDOW_EXCEEDED``, nothing is retried;
* ``refused`` — a configured window (``DSH_CONTEXT_WINDOW``): the request is not sent at all.

Each is timed from ``Agent.followup`` to the end of the turn (the agent in this process, over
httpx, as a kernel runs it). The ``kernel`` row is a real ``dsh`` kernel, from the
``execute_request`` to its ``execute_reply`` (cell start to the error), with no window configured:
its first over-long cell (the warm-up, not counted) goes the ``after`` way and the agent learns the
window from the server's 400; every counted cell after it (``%agent new`` keeps what was learned)
is then **refused before sending** — no request reaches the server — so the row is ``refused``
through a kernel, the requests column saying so. ``before`` runs once (its ~15 s are backoff
sleeps, not noise; ``--quick`` skips them); the others report the median of ``--reps``. Run:
``make bench`` or ``python benchmarks/overflow.py [--reps 5] [--no-kernel]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dsh_kernel import Agent  # noqa: E402
from dsh_kernel.agent.request.window import ContextWindows  # noqa: E402
from dsh_kernel.agent.retry import RetryPolicy  # noqa: E402
from dsh_kernel.llm.providers.openai_compat.adapter import ChatCompletionsProvider  # noqa: E402
from dsh_kernel.llm.providers.openai_compat.profiles import GENERIC  # noqa: E402
from dsh_kernel.testing import FakeClock  # noqa: E402
from tests.support.kernel import start_kernel  # noqa: E402
from tests.support.sse_server import Reply, SseServer, json_reply, sse_reply  # noqa: E402

LONG = "Summarise this text in one sentence: " + " ".join(f"word{i}" for i in range(5000))
OVERFLOW_400 = {
    "error": {
        "message": "This model's maximum context length is 4096 tokens. However, you requested "
        "24674 tokens (24673 in the messages, 1 in the completion). Please reduce the length of "
        "the messages or completion.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


def empty() -> Reply:
    return sse_reply([], chunked=False)


async def agent_run(
    server: SseServer, *, before: bool = False, window: int | None = None, wait: bool = True
) -> tuple[float, str, int]:
    """``(seconds, the turn's error code, requests the server saw)`` for one over-long message;
    ``wait=False`` skips the backoff sleeps (on a ``FakeClock``)."""
    server.script(*([empty()] * 6 if before else [empty(), json_reply(400, OVERFLOW_400)]))
    async with httpx.AsyncClient() as client:
        provider = ChatCompletionsProvider(
            id="openai-compatible",
            base_url=server.url,
            profile=replace(GENERIC, probe_empty_stream=False) if before else GENERIC,
            api_key=lambda: "sk-local",
            client=client,
            default_model="smollm2",
        )
        agent = Agent(
            provider=provider,
            retry_policy=RetryPolicy(code_max_retries={}) if before else None,
            context_windows=ContextWindows(configured=window),
            sleep=None if wait else FakeClock().sleep,
        )
        t = time.perf_counter()
        agent.followup(LONG)
        await agent.when_idle()
        elapsed = time.perf_counter() - t
    end = [e for e in agent.session.events if e.type == "turn/end"][-1].data["reason"]
    code = end.get("error", {}).get("code") if isinstance(end, dict) else None  # type: ignore[union-attr]
    return elapsed, str(code), len(server.requests)


def kernel_runs(server: SseServer, reps: int) -> list[tuple[float, int]]:
    """``(seconds from a chat cell's execute_request to its execute_reply, model requests the
    server saw during that cell)``, through a kernel: the warm-up cell's overflow teaches the agent
    the window, so the counted cells are refused before sending (module docstring)."""
    out: list[tuple[float, int]] = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "DSH_PROVIDER": "openai-compatible",
            "DSH_BASE_URL": server.url,
            "DSH_MODEL": "smollm2",
            "DSH_DEV_INVARIANTS": "0",
            "IPYTHONDIR": str(Path(tmp) / "ipython"),
        }
        with start_kernel(Path(tmp), "dsh", env=env) as k:
            k.execute("%agent status")  # build the agent (and ask the server for its window)
            for _ in range(reps + 1):
                k.execute("%agent new")
                server.script(empty(), json_reply(400, OVERFLOW_400))
                t = time.perf_counter()
                ex = k.execute(LONG, timeout=120)
                out.append((time.perf_counter() - t, len(server.requests)))
                assert ex.content.get("ename") == "CONTEXT_WINDOW_EXCEEDED", ex.content
    return out[1:]  # the first is a warm-up


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--no-kernel", action="store_true", help="skip the run through a kernel")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a tiny run that only checks the benchmark still works (make test runs it); its figures mean nothing",
    )
    args = parser.parse_args()
    if args.quick:
        args.reps = 1
    with SseServer() as server:
        before = asyncio.run(agent_run(server, before=True, wait=not args.quick))
        after = [asyncio.run(agent_run(server)) for _ in range(args.reps)]
        refused = [asyncio.run(agent_run(server, window=4096)) for _ in range(args.reps)]
        kernel = [] if args.no_kernel else kernel_runs(server, args.reps)
    print("context overflow against an empty-200 server (llama-cpp-python), followup → turn end")
    print(f"  {'path':10s} {'time':>10s}   {'requests':>8s}   ends with")
    rows = [
        ("before", [before]),
        ("after", after),
        ("refused", refused),
    ]
    for name, runs in rows:
        med = statistics.median(r[0] for r in runs)
        print(f"  {name:10s} {med * 1000:8.0f} ms   {runs[0][2]:8d}   {runs[0][1]}")
    if kernel:
        med = statistics.median(r[0] for r in kernel)
        sent = max(r[1] for r in kernel)
        what = (
            "refused before sending (the window learned from the warm-up's 400), no request "
            "reaches the server"
            if sent == 0
            else f"{sent} request(s) reached the server"
        )
        print(
            f"  {'kernel':10s} {med * 1000:8.0f} ms   {sent:8d}   CONTEXT_WINDOW_EXCEEDED "
            f"({what}; cell start → error reply)"
        )
    print(f"  before/after: ×{before[0] / statistics.median(r[0] for r in after):,.0f}")


if __name__ == "__main__":
    main()
