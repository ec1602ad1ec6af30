"""MCP benchmark: how fast Stop ends a running MCP call, and what a call costs over the bare SDK.

A real MCP server (the SDK-built test server, ``tests/support/mcp_server.py``, over stdio) is
connected through ``McpServer`` exactly as the kernel connects it. Measured, in one run:

1. **Stop** — a ``wait_forever`` call is started; once the server has logged that it runs, the
   call's abort signal fires (what Stop and interrupt do). Timed: from the abort to the call raising
   ``ABORTED`` (target < 250 ms), and from the abort to the server having logged the
   ``notifications/cancelled`` it received. Then an ``echo`` call proves the server still answers.
   The anchor, side by side: cancelling an ``asyncio`` task that sleeps (the loop's own latency).
2. **Round trip** — ``echo`` through ``McpServer.call`` (idle timer, abort watch, result as JSON)
   against the same call through the SDK's ``Client.call_tool`` directly on the same connection,
   alternating; medians and the ratio.
3. **In a kernel** — a real ``dsh`` kernel with the server in its ``mcp.json`` and the loopback fake
   model calling ``wait_forever``: once the server logs that the call runs, the cell's Stop button
   is clicked (a comm message, as the page sends it) or the kernel is interrupted, alternating;
   timed to the cell's reply (``ABORTED``), target < 250 ms.

Run: ``python benchmarks/mcp_stop.py [--runs 15]``; ``--quick`` runs each step a few times.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dsh_kernel.abort import AbortCause, AbortController  # noqa: E402
from dsh_kernel.jsonvalue import JsonValue  # noqa: E402
from dsh_kernel.mcp.config import parse_entry  # noqa: E402
from dsh_kernel.mcp.server import McpCallError, McpServer  # noqa: E402
from tests.support.mcp_server import read_records, stdio_argv  # noqa: E402


def count(log: Path, event: str) -> int:
    return sum(r.get("event") == event for r in read_records(log))


async def wait_until(check: Callable[[], bool], within_s: float = 30.0) -> float:
    deadline = time.perf_counter() + within_s
    while not check():
        if time.perf_counter() > deadline:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.002)
    return time.perf_counter()


async def one_stop(server: McpServer, log: Path) -> tuple[float, float]:
    """(ms abort → ABORTED, ms abort → the server logged the cancellation)."""
    started, cancelled = count(log, "tool-started"), count(log, "notifications/cancelled")
    ctl = AbortController()
    call = asyncio.ensure_future(
        server.call("wait_forever", {}, signal=ctl.signal, idle_s=600, deadline_s=3600)
    )
    await wait_until(lambda: count(log, "tool-started") > started)
    t0 = time.perf_counter()
    ctl.abort(AbortCause(kind="user", reason="stop"))
    try:
        await call
    except McpCallError as exc:
        assert exc.code == "ABORTED", exc
    t1 = time.perf_counter()
    t2 = await wait_until(lambda: count(log, "notifications/cancelled") > cancelled)
    return (t1 - t0) * 1000, (t2 - t0) * 1000


async def one_sleep_cancel() -> float:
    task = asyncio.ensure_future(asyncio.sleep(3600))
    await asyncio.sleep(0.01)
    t0 = time.perf_counter()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return (time.perf_counter() - t0) * 1000


async def main_async(runs: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="dsh-mcp-bench-"))
    log = work / "cancel.log"
    argv = stdio_argv(cancel_log=log)
    args: list[JsonValue] = list(argv[1:])
    entry = parse_entry("bench", {"command": argv[0], "args": args, "cwd": str(ROOT)}, "benchmark")
    server = McpServer(entry, log_dir=work / "logs")
    server.start()
    await asyncio.wait_for(server.settled.wait(), timeout=120)
    assert server.state == "ready", server.last_error
    load = os.getloadavg()[0]
    stops: list[float] = []
    heard: list[float] = []
    anchors: list[float] = []
    for _ in range(runs):
        stop_ms, heard_ms = await one_stop(server, log)
        stops.append(stop_ms)
        heard.append(heard_ms)
        anchors.append(await one_sleep_cancel())
    ctl = AbortController()
    echo = await server.call("echo", {"text": "alive"}, signal=ctl.signal, idle_s=60, deadline_s=60)
    assert "alive" in str(echo), echo
    ours: list[float] = []
    bare: list[float] = []
    client = server._client
    assert client is not None
    for _ in range(runs * 4):
        t0 = time.perf_counter()
        await server.call("echo", {"text": "x"}, signal=ctl.signal, idle_s=60, deadline_s=60)
        t1 = time.perf_counter()
        await client.call_tool("echo", {"text": "x"})
        t2 = time.perf_counter()
        ours.append((t1 - t0) * 1000)
        bare.append((t2 - t1) * 1000)
    await server.stop()

    def spread(xs: list[float]) -> str:
        return f"median {statistics.median(xs):.1f} ms (spread {min(xs):.1f}-{max(xs):.1f})"

    print(
        f"MCP Stop, {runs} runs (load average {load:.2f} before, {os.getloadavg()[0]:.2f} after):\n"
        f"  abort -> the call ends ABORTED: {spread(stops)} (target < 250 ms)\n"
        f"  abort -> the server logged notifications/cancelled: {spread(heard)}\n"
        f"  anchor, cancelling an asyncio sleep: {spread(anchors)}\n"
        f"  the server answered an echo after every stop: yes\n"
        f"MCP echo round trip, {len(ours)} alternating calls:\n"
        f"  McpServer.call: {spread(ours)}\n"
        f"  the SDK's Client.call_tool on the same connection: {spread(bare)}\n"
        f"  ratio: {statistics.median(ours) / statistics.median(bare):.2f}x"
    )


def kernel_stops(runs: int) -> None:
    """Part 3 (module docstring)."""
    from tests.kernel.conftest import provider_env
    from tests.support import scenarios as sc
    from tests.support.frontend import Frontend
    from tests.support.kernel import start_kernel
    from tests.support.sse_server import SseServer

    work = Path(tempfile.mkdtemp(prefix="dsh-mcp-kernel-"))
    log = work / "cancel.log"
    argv = stdio_argv(cancel_log=log)
    config = work / "servers.json"
    entry = {"command": argv[0], "args": argv[1:], "cwd": str(ROOT)}
    config.write_text(json.dumps({"mcpServers": {"t": entry}}))
    times: dict[str, list[float]] = {"stop": [], "interrupt": []}
    with SseServer() as model:
        env = provider_env(
            model, work, DSH_MCP_CONFIG=str(config), DSH_MCP_WAIT="120", DSH_APPROVAL="auto"
        )
        with start_kernel(work, "dsh", env=env) as k:
            fe = Frontend(k)
            for i in range(runs * 2 + 2):
                how = "stop" if i % 2 == 0 else "interrupt"
                started = count(log, "tool-started")
                model.script(sc.tool_calls(("t__wait_forever", {})))
                cell = fe.submit(f"wait ({how})")
                cell.pump(  # the call is running, and the view's Stop is drawn (it may come after)
                    lambda n=started: count(log, "tool-started") > n and bool(fe.buttons("Stop")),
                    timeout=120,
                )
                t0 = time.perf_counter()
                if how == "stop":
                    fe.click(fe.buttons("Stop")[-1])
                else:
                    k.km.interrupt_kernel()
                ex = cell.finish(timeout=60)
                elapsed = (time.perf_counter() - t0) * 1000
                assert ex.status == "error" and ex.content["ename"] == "ABORTED", ex.content
                if i >= 2:  # the first of each is a warm-up
                    times[how].append(elapsed)
    load = os.getloadavg()[0]
    for how, xs in times.items():
        print(
            f"  {how} of a running MCP call -> the cell's ABORTED reply: median "
            f"{statistics.median(xs):.0f} ms (spread {min(xs):.0f}-{max(xs):.0f}, {len(xs)} runs, "
            f"load {load:.2f}; target < 250 ms)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="MCP benchmark: Stop, and a call's cost")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="a few runs: it runs, nothing more")
    args = parser.parse_args()
    runs = 3 if args.quick else args.runs
    asyncio.run(main_async(runs))
    print("MCP Stop in a kernel (the chat cell's Stop button, and an interrupt):")
    kernel_stops(1 if args.quick else max(5, runs // 3))


if __name__ == "__main__":
    main()
