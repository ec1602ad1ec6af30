"""Load: three kernels chatting into one store while a fourth process queries it (issue 7, item 3).

Each kernel has its own loopback server and runs ``turns`` chat turns (a ``python`` tool call, then
an answer), with a ``%%sql`` cell every fifth turn — so the kernels contend for the database with
each other and with the querier, a separate process running ``%%sql``-style ``run_query`` calls in a
loop. Asserted: every cell of every kernel replies ``ok`` (no lock error reaches a user), the querier
saw no error, each journal equals its kernel's live log, and after the load the store's SQL counts
equal every session's event count (zero lost events). The querier's latency percentiles go to the
figures.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query
from tests.reliability.support import (
    FIGURES,
    Driver,
    launch,
    loopback_env,
    python_call,
    session_id,
    sizes,
    text_reply,
    tool_reply,
    verify_log,
)
from tests.support.sse_server import SseServer

KERNELS = 3

QUERIER = """
import json, sys, time
from pathlib import Path
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query
store, stop = Store.at(sys.argv[1]), Path(sys.argv[2])
out = {"latencies_ms": [], "errors": [], "sources": {}}
while not stop.exists():
    t = time.perf_counter()
    try:
        r = run_query(store, "SELECT session_id, type, count(*) FROM events GROUP BY ALL")
        out["sources"][r.source] = out["sources"].get(r.source, 0) + 1
        out["latencies_ms"].append((time.perf_counter() - t) * 1000)
    except Exception as exc:
        out["errors"].append(f"{type(exc).__name__}: {exc}")
    time.sleep(0.01)
print(json.dumps(out), flush=True)
"""


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def cells_for(server: SseServer, kernel: int, turns: int) -> list[str]:
    replies = []
    cells = []
    for turn in range(1, turns + 1):
        code = f"load_{kernel} = {turn}\nprint('kernel {kernel} turn {turn}')"
        replies.append(tool_reply(python_call(code, f"call_{kernel}_{turn}")))
        replies.append(text_reply(f"kernel {kernel} answered turn {turn}", pieces=4))
        cells.append(f"load turn {turn} of kernel {kernel}")
        if turn % 5 == 0:
            cells.append("%%sql\nSELECT session_id, count(*) FROM events GROUP BY 1")
    server.script(*replies)
    return cells


@pytest.mark.timeout(900)
@pytest.mark.parametrize("turns", sizes(5, 20))
def test_three_kernels_and_a_querier(tmp_path: Path, turns: int) -> None:
    store = Store.at(tmp_path / "store")
    stop = tmp_path / "stop"
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(SseServer()) for _ in range(KERNELS)]
        kernels = [
            stack.enter_context(
                launch(
                    tmp_path / f"k{i}", env=loopback_env(s, DSH_APPROVAL="auto"), store=store.root
                )
            )
            for i, s in enumerate(servers)
        ]
        querier = subprocess.Popen(
            [sys.executable, "-c", QUERIER, str(store.root), str(stop)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            drivers = [
                Driver(k, cells_for(s, i, turns)).start()
                for i, (k, s) in enumerate(zip(kernels, servers, strict=True))
            ]
            for d in drivers:
                d.join(60 + 6 * turns)
        finally:
            stop.touch()
            out, _ = querier.communicate(timeout=60)
        stats = json.loads(out)
        for d in drivers:
            failed = [r for r in d.replies if r["status"] != "ok"]
            assert failed == [] and len(d.replies) == len(d.cells), failed
        assert stats["errors"] == []
        live = {}
        for i, k in enumerate(kernels):
            events = verify_log(k)
            live[session_id(k)] = len(events)
            assert sum(1 for e in events if e.type == "tool/result") == turns
            last = f"kernel {i} answered turn {turns}"
            assert any(e.type == "assistant/message" and last in json.dumps(e.data) for e in events)
    result = run_query(store, "SELECT session_id, count(*) FROM events GROUP BY 1")
    counted = {str(r[0]): int(str(r[1])) for r in result.rows}
    for sid, n in live.items():
        assert counted.get(sid) == n, (sid, counted.get(sid), n)
    lat = stats["latencies_ms"]
    assert lat, "the querier never finished a query"
    FIGURES.append(
        f"load: {KERNELS} kernels x {turns} turns, {sum(live.values())} events, 0 lost; "
        f"{len(lat)} queries during the load (sources {stats['sources']}), 0 errors; "
        f"query latency p50 {percentile(lat, 50):.0f} ms, p99 {percentile(lat, 99):.0f} ms, "
        f"max {max(lat):.0f} ms"
    )
