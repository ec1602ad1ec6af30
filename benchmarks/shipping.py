"""Shared-store benchmark: shipping throughput and lag against a real PostgreSQL on a Unix socket.

The server is the tests' (``tests/support/postgres.py``: Debian's ``postgresql``, run as ``nobody``
under root), started for this run and stopped by its PID at the end; it runs with ``fsync=off``,
so the figures are the shipper's and the protocol's, not a disk's.

1. **throughput** — ``ship_store`` (what ``python -m dsh_kernel ship`` runs: read each journal,
   one transaction per batch of up to 5,000 events — ``COPY`` into a temporary table, ``INSERT …
   ON CONFLICT DO NOTHING``, the session upsert) of a generated store (``benchmarks/store.py``'s
   generator: ``--sessions`` × ``--events``) into an empty database: events/s and MB/s, median of
   ``--runs``; beside it, as the floor, a bare ``COPY`` of the same rows into an unindexed table;
2. **lag** — ``--agents`` in-process agents (scripted model, real journal, one ``Shipper`` each, as
   a kernel has) chat ``--turns`` turns at once; for each turn, the time from the turn's end (its
   ``turn-end`` checkpoint pokes the shipper) until the server holds every event of it: p50 and
   p95; and the checkpoint's own cost with the shipper attached vs without (it must not grow).

Run: ``python benchmarks/shipping.py [--sessions 100] [--events 1000] [--runs 3] [--agents 3]
[--turns 20]``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import psycopg.sql

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dsh_kernel import Agent  # noqa: E402
from dsh_kernel.store.journal import attach_journal  # noqa: E402
from dsh_kernel.store.layout import Store  # noqa: E402
from dsh_kernel.store.shared.catchup import ship_store  # noqa: E402
from dsh_kernel.store.shared.send import JournalTail  # noqa: E402
from dsh_kernel.store.shared.shipper import Shipper  # noqa: E402
from dsh_kernel.testing import ScriptedProvider, text_response  # noqa: E402
from tests.support.postgres import PgServer, find_bindir  # noqa: E402


def _generator():
    spec = importlib.util.spec_from_file_location("store_bench", ROOT / "benchmarks" / "store.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["store_bench"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module.generate_store


def _fresh_db(server: PgServer, name: str) -> str:
    with psycopg.connect(server.conninfo, autocommit=True) as conn:
        conn.execute(
            psycopg.sql.SQL("DROP DATABASE IF EXISTS {}").format(psycopg.sql.Identifier(name))
        )
        conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    return f"host={server.socket_dir} dbname={name} user=dsh"


def _bare_copy(target: str, store: Store) -> float:
    rows = []
    for path in store.iter_journals():
        tail = JournalTail(path=path, session_id=path.stem)
        while True:
            batch = tail.read()
            if not batch.rows and batch.offset == tail.offset:
                break
            rows.extend((path.stem, r) for r in batch.rows)
            tail.advance(batch)
    with psycopg.connect(target) as conn:
        conn.execute(
            "CREATE TABLE bare (session_id text, seq bigint, type text, time bigint, line text)"
        )
        started = time.perf_counter()
        with conn.cursor() as cur, cur.copy("COPY bare FROM STDIN") as copy:
            for sid, r in rows:
                copy.write_row((sid, r.seq, r.type, r.time, r.line))
        conn.commit()
        return time.perf_counter() - started


def throughput(server: PgServer, sessions: int, events: int, runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="dsh-ship-bench-") as tmp:
        total, _ = _generator()(Path(tmp) / "store", sessions, events)
        store = Store.at(Path(tmp) / "store")
        size_mb = sum(p.stat().st_size for p in store.iter_journals()) / 1e6
        ship_s, bare_s = [], []
        for run in range(runs):
            target = _fresh_db(server, f"bench{run}")
            started = time.perf_counter()
            done = ship_store(store, target)
            ship_s.append(time.perf_counter() - started)
            assert done.events == total, (done.events, total)
            bare_s.append(_bare_copy(_fresh_db(server, f"bare{run}"), store))
        ship, bare = statistics.median(ship_s), statistics.median(bare_s)
        print(f"throughput: {sessions} sessions, {total:,} events, {size_mb:.0f} MB of journals")
        print(
            f"  ship_store       {total / ship:>10,.0f} events/s  {size_mb / ship:6.1f} MB/s  "
            f"(median of {runs}: {ship:.2f} s, reading the journals included)"
        )
        print(
            f"  bare COPY floor  {total / bare:>10,.0f} events/s  {size_mb / bare:6.1f} MB/s  "
            f"(rows already in memory, no keys, no jsonb, no upsert)"
        )


def _until(probe: psycopg.Connection, session_id: str, want: int) -> None:
    while True:
        row = probe.execute(
            "SELECT count(*) FROM dsh_events WHERE session_id = %s", (session_id,)
        ).fetchone()
        probe.commit()
        if row is not None and row[0] >= want:
            return
        time.sleep(0.002)


async def _agent_turns(
    store: Store, target: str | None, turns: int, name: str
) -> tuple[list[float], list[float]]:
    provider = ScriptedProvider(
        [text_response(f"answer {n} " * 40, pieces=60) for n in range(turns)]
    )
    agent = Agent(provider=provider, model="m1")
    writer = attach_journal(agent, store)
    shipper = Shipper(target) if target is not None else None
    checkpoint_s: list[float] = []
    lags: list[float] = []
    try:
        if shipper is not None:
            shipper.follow(writer, agent.hooks)
        probe = psycopg.connect(target) if target is not None else None
        for n in range(turns):
            agent.followup(f"{name} turn {n}")
            started = time.perf_counter()
            await agent.when_idle()
            checkpoint_s.append(time.perf_counter() - started)
            if probe is None:
                continue
            ended = time.perf_counter()
            # polled from a thread: the event loop (the other agents' turns) never waits on it
            await asyncio.to_thread(_until, probe, writer.header.id, writer.committed)
            lags.append(time.perf_counter() - ended)
        if probe is not None:
            probe.close()
    finally:
        if shipper is not None:
            shipper.close()
        writer.close()
    return lags, checkpoint_s


async def lag(server: PgServer, agents: int, turns: int) -> None:
    with tempfile.TemporaryDirectory(prefix="dsh-ship-lag-") as tmp:
        target = _fresh_db(server, "lag")
        with psycopg.connect(target) as conn:  # the schema first, so no agent waits on it
            from dsh_kernel.store.shared.connection import migrate

            migrate(conn)
        results = await asyncio.gather(
            *(
                _agent_turns(Store.at(Path(tmp) / f"a{i}"), target, turns, f"a{i}")
                for i in range(agents)
            )
        )
        alone = await asyncio.gather(
            *(
                _agent_turns(Store.at(Path(tmp) / f"b{i}"), None, turns, f"b{i}")
                for i in range(agents)
            )
        )
    lags = sorted(x for lags_, _ in results for x in lags_)
    with_s = statistics.median(x for _, t in results for x in t)
    without_s = statistics.median(x for _, t in alone for x in t)
    p95 = lags[round(0.95 * (len(lags) - 1))]  # nearest rank (a floor read the minimum of two)
    print(f"lag: {agents} agents x {turns} turns at once (~65 events a turn), one shipper each")
    print(
        f"  turn end -> on the server: p50 {statistics.median(lags) * 1000:.1f} ms, "
        f"p95 {p95 * 1000:.1f} ms"
    )
    print(
        f"  a turn (its checkpoints included): {with_s * 1000:.1f} ms with the shipper, "
        f"{without_s * 1000:.1f} ms without"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--events", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--agents", type=int, default=3)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a tiny run that only checks the benchmark still works (make test runs it); its figures mean nothing",
    )
    args = ap.parse_args()
    if args.quick:
        args.sessions, args.events, args.runs, args.agents, args.turns = 3, 50, 1, 1, 2
    bindir = find_bindir()
    if bindir is None:
        print(
            "shipping benchmark skipped: PostgreSQL is not installed (apt-get install postgresql)"
        )
        return 0
    server = PgServer.create(bindir)
    try:
        server.start()
        throughput(server, args.sessions, args.events, args.runs)
        asyncio.run(lag(server, args.agents, args.turns))
    finally:
        server.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
