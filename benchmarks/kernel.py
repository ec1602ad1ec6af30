"""Kernel benchmarks (issue 4): start-up, streaming overhead of a chat cell, interrupt and Stop latency.

Everything goes through ``jupyter_client`` against real kernel subprocesses, as a frontend would.
The model is the loopback scenario server (``tests.support.sse_server``) in its **own process**,
scripted over its control endpoint, so it never competes with the client for the GIL. Kernels run
with ``DSH_DEV_INVARIANTS=0`` (the per-request log-rebuild check is a test-only cost).

1. **Start to first reply**: ``KernelManager.start_kernel()`` until the ``execute_reply`` of the
   first cell (``1+1``; ``%%python`` in ``dsh``), stock ipykernel (same interpreter) against ``dsh``.
   Target: ``dsh`` ≤ 1.5× stock. Also shown, no target: ``dsh`` start to the reply of a first *chat*
   cell (the agent, provider and store are created lazily by that cell).
2. **Streaming overhead**: a chat cell whose answer is N text chunks (default 2,000). *Raw stream*:
   the same bytes read by httpx ``aiter_lines`` + ``json.loads`` in this process. *Cell*: from the
   ``execute_request`` to its ``execute_reply``. Overhead = cell − raw. Target ≤ 150 ms.
3. **Interrupt latency** in the four states a turn waits in (no first token yet, mid-stream, waiting
   for approval, running ``python`` tool code): from ``interrupt_kernel()`` (SIGINT) to the cell's
   ``execute_reply``. Target ≤ 250 ms each.
4. **Stop latency** in the same four states: from the view's Stop click (the ``comm_msg`` a browser
   sends) to the cell's ``execute_reply``. In ``python`` tool code the click is heard on ipykernel's
   shell channel thread while the code holds the main thread (``dsh_kernel.kernel.host.busy``), which then
   interrupts the code as the Jupyter interrupt does. Target ≤ 250 ms each.

Medians of ``--reps`` runs (after one warm-up), printed side by side with their targets (``--only
interrupt`` measures parts 3 and 4). Run from the repository root: ``python benchmarks/kernel.py [--reps 5] [--chunks 2000] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from jupyter_client.manager import KernelManager

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import scenarios as sc  # noqa: E402
from tests.support.frontend import Frontend  # noqa: E402
from tests.support.kernel import Kernel, kernelspecs  # noqa: E402
from tests.support.sse_server import Reply, reply_to_json  # noqa: E402

STOCK = "bench-ipykernel"


# --- the model server, in its own process ---------------------------------------------------------


class ModelServer:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.sse_server"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def script(self, *replies: Reply) -> None:
        body = json.dumps({"replies": [reply_to_json(r) for r in replies]}).encode()
        req = urllib.request.Request(f"{self.url}/_dsh/script", data=body, method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()

    def requests(self) -> list[dict[str, object]]:
        with urllib.request.urlopen(f"{self.url}/_dsh/requests", timeout=10) as r:
            return json.loads(r.read())

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


# --- kernels --------------------------------------------------------------------------------------


def environment(tmp: Path, server: ModelServer) -> dict[str, str]:
    env = {
        **os.environ,
        "JUPYTER_PATH": str(tmp / "jupyter-data"),
        "DSH_STORE": str(tmp / "store"),
        "IPYTHONDIR": str(tmp / "ipython"),
        "DSH_DEV_INVARIANTS": "0",
        "DSH_PROVIDER": "openai-compatible",
        "DSH_BASE_URL": server.url,
        "PYTHONUNBUFFERED": "1",
    }
    for k in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DSH_MODEL"):
        env.pop(k, None)
    return env


def write_specs(tmp: Path) -> None:
    data = kernelspecs(tmp)
    stock = data / "kernels" / STOCK
    stock.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "stock ipykernel",
        "language": "python",
    }
    (stock / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")


@contextmanager
def kernel(name: str, env: dict[str, str], cwd: Path) -> Iterator[tuple[Kernel, float]]:
    """A started kernel and the seconds from ``start_kernel()`` to its first cell's reply."""
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = env["JUPYTER_PATH"]
    try:
        km = KernelManager(kernel_name=name)
        started = time.perf_counter()
        km.start_kernel(env=env, cwd=str(cwd))
    finally:
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old
    kc = km.client()
    kc.start_channels()
    try:
        # The shell request is queued until the kernel binds; its reply is the first reply.
        msg_id = kc.execute("%%python\n1+1" if name == "dsh" else "1+1")
        reply = kc.get_shell_msg(timeout=60)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = kc.get_shell_msg(timeout=60)
        first = time.perf_counter() - started
        assert reply["content"]["status"] == "ok", reply["content"]
        kc.wait_for_ready(timeout=60)
        yield Kernel(km, kc), first
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def first_chat_reply(env: dict[str, str], cwd: Path, server: ModelServer) -> float:
    server.script(sc.text("Hello."))
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = env["JUPYTER_PATH"]
    try:
        km = KernelManager(kernel_name="dsh")
        started = time.perf_counter()
        km.start_kernel(env=env, cwd=str(cwd))
    finally:
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old
    kc = km.client()
    kc.start_channels()
    try:
        msg_id = kc.execute("Hi!")
        reply = kc.get_shell_msg(timeout=60)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = kc.get_shell_msg(timeout=60)
        assert reply["content"]["status"] == "ok", reply["content"]
        return time.perf_counter() - started
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


# --- measurements ---------------------------------------------------------------------------------


def raw_stream_s(server: ModelServer, chunks: int) -> float:
    body = {"model": "default", "messages": [{"role": "user", "content": "go"}], "stream": True}
    with httpx.Client(timeout=30) as client:
        started = time.perf_counter()
        got = 0
        with client.stream("POST", server.url + "/chat/completions", json=body) as resp:
            for line in resp.iter_lines():
                if line.startswith("data: ") and line[6:] != "[DONE]":
                    obj = json.loads(line[6:])
                    got += sum(1 for c in obj["choices"] if c["delta"].get("content"))
        elapsed = time.perf_counter() - started
    assert got == chunks, (got, chunks)
    return elapsed


def cell_s(k: Kernel, code: str) -> float:
    started = time.perf_counter()
    ex = k.execute(code, timeout=120)
    elapsed = time.perf_counter() - started
    assert ex.status == "ok", ex.content
    return elapsed


def reach(fe: Frontend, server: ModelServer, state: str, tmp: Path) -> Callable[[], bool]:
    """Script the model for ``state`` and return the condition that holds once the turn is in it."""
    marker = tmp / "tool-started"
    marker.unlink(missing_ok=True)
    clicked: list[bool] = []
    if state == "first-token":
        server.script(sc.hang_before_first_token())
        return lambda: len(server.requests()) == 1
    if state == "streaming":
        server.script(sc.hang_mid_stream(12, delay_ms=10))
        seen = len(fe.text_updates("s4 "))  # an earlier run's view holds the same words
        return lambda: len(fe.text_updates("s4 ")) > seen
    if state == "approval":
        server.script(sc.python_call("never = 1"))
        return lambda: bool(fe.buttons("Always allow"))
    code = f"open({str(marker)!r}, 'w').close()\nimport time\ntime.sleep(60)"
    server.script(sc.python_call(code))

    def reached() -> bool:
        if not clicked and fe.buttons("Allow once"):
            fe.click(fe.buttons("Allow once")[0])
            clicked.append(True)
        return marker.exists()

    return reached


def stopped_s(fe: Frontend, server: ModelServer, state: str, tmp: Path, how: str) -> float:
    """Seconds from the interrupt (``how="interrupt"``) or the Stop click (``"stop"``) to the
    cell's reply, with the turn in ``state``."""
    reached = reach(fe, server, state, tmp)
    cell = fe.submit(f"{how} ({state})")
    cell.pump(lambda: reached() and (how != "stop" or bool(fe.buttons("Stop"))), what=state)
    time.sleep(0.05)  # settle in the state
    stop = fe.buttons("Stop")[-1] if how == "stop" else None
    sent = time.perf_counter()
    if stop is None:
        fe.kernel.km.interrupt_kernel()
    else:
        fe.click(stop)
    ex = cell.finish(timeout=30)
    elapsed = time.perf_counter() - sent
    assert ex.status == "error" and ex.content["ename"] == "ABORTED", ex.content
    return elapsed


# --- the parts -----------------------------------------------------------------------------

Rows = list[tuple[str, str, str, str]]


def start_part(
    reps: int, env: dict[str, str], tmp: Path, server: ModelServer, rows: Rows
) -> dict[str, float]:
    starts: dict[str, list[float]] = {STOCK: [], "dsh": []}
    for rep in range(reps + 1):  # one warm-up each, then alternate who goes first
        for name in (STOCK, "dsh") if rep % 2 else ("dsh", STOCK):
            with kernel(name, env, tmp) as (_, first):
                if rep:
                    starts[name].append(first)
    chats = [first_chat_reply(env, tmp, server) for _ in range(reps + 1)][1:]
    stock_ms, dsh_ms, chat_ms = median_ms(starts[STOCK]), median_ms(starts["dsh"]), median_ms(chats)
    ratio = dsh_ms / stock_ms
    rows.append(("start → first reply, stock ipykernel", f"{stock_ms:.0f} ms", "", ""))
    rows.append(("start → first reply, dsh", f"{dsh_ms:.0f} ms", "", ""))
    rows.append(("  dsh / stock", f"{ratio:.2f}×", "≤ 1.5×", _ok(ratio <= 1.5)))
    rows.append(("start → first chat reply, dsh", f"{chat_ms:.0f} ms", "", ""))
    return {"start_stock_ms": stock_ms, "start_dsh_ms": dsh_ms, "start_dsh_first_chat_ms": chat_ms}


def stream_part(
    reps: int, chunks: int, env: dict[str, str], tmp: Path, server: ModelServer, rows: Rows
) -> dict[str, float]:
    server.script(sc.words(chunks, coalesce=True, sticky=True))
    raws, cells = [], []
    with kernel("dsh", env, tmp) as (k, _):
        for rep in range(reps + 1):
            r = raw_stream_s(server, chunks)
            c = cell_s(k, f"Stream {chunks} chunks ({rep}).")
            if rep:
                raws.append(r)
                cells.append(c)
    raw_ms, cell_ms = median_ms(raws), median_ms(cells)
    over_ms = median_ms([c - r for c, r in zip(cells, raws, strict=True)])
    rows.append((f"raw stream, {chunks:,} chunks", f"{raw_ms:.0f} ms", "", ""))
    rows.append((f"chat cell, {chunks:,} chunks", f"{cell_ms:.0f} ms", "", ""))
    rows.append(("  cell − raw", f"{over_ms:.0f} ms", "≤ 150 ms", _ok(over_ms <= 150)))
    return {"stream_raw_ms": raw_ms, "stream_cell_ms": cell_ms, "stream_overhead_ms": over_ms}


def interrupt_part(
    reps: int, env: dict[str, str], tmp: Path, server: ModelServer, rows: Rows
) -> dict[str, float]:
    out: dict[str, float] = {}
    with kernel("dsh", env, tmp) as (k, _):
        fe = Frontend(k)
        for state in ("first-token", "streaming", "approval", "tool-code"):
            for how in ("interrupt", "stop"):
                runs = [stopped_s(fe, server, state, tmp, how) for _ in range(reps + 1)][1:]
                ms = out[f"{how}_{state}_ms"] = median_ms(runs)
                label = "interrupt" if how == "interrupt" else "Stop click"
                rows.append((f"{label}, {state}", f"{ms:.0f} ms", "≤ 250 ms", _ok(ms <= 250)))
    return out


# --- report ---------------------------------------------------------------------------------------


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def _ok(good: bool) -> str:
    return "ok" if good else "MISSED"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="kernel benchmarks (issue 4)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--chunks", type=int, default=2_000)
    parser.add_argument("--only", choices=("start", "stream", "interrupt"), help="one part only")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a tiny run that only checks the benchmark still works (make test runs it); its figures mean nothing",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.reps, args.chunks = 1, 100
    parts = [args.only] if args.only else ["start", "stream", "interrupt"]
    figures: dict[str, float] = {}
    rows: Rows = []
    server = ModelServer()
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            write_specs(tmp)
            env = environment(tmp, server)
            if "start" in parts:
                figures |= start_part(args.reps, env, tmp, server, rows)
            if "stream" in parts:
                figures |= stream_part(args.reps, args.chunks, env, tmp, server, rows)
            if "interrupt" in parts:
                figures |= interrupt_part(args.reps, env, tmp, server, rows)
    finally:
        server.close()
    load = os.getloadavg()[0]
    width = max(len(r[0]) for r in rows)
    print(
        f"kernel benchmarks: medians of {args.reps} runs after a warm-up; "
        f"{os.cpu_count()} CPUs, load average {load:.1f} at the end"
    )
    print(f"{'':<{width}}  {'median':>10}  {'target':>9}")
    for name, value, target, ok in rows:
        print(f"{name:<{width}}  {value:>10}  {target:>9}  {ok}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
