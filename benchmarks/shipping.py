"""Shared-store benchmark: shipping throughput and lag against a real PostgreSQL on a Unix socket.

The server is the tests' (``tests/support/postgres.py``: Debian's ``postgresql``, run as ``nobody``
under root), started for this run and stopped by its PID at the end; it runs with ``fsync=off``,
so the figures are the shipper's and the protocol's, not a disk's.

1. **throughput** — ``ship_store`` (what ``python -m dsh_kernel ship`` runs: crash repair judged
   from each journal's end, each journal read and checked — the next while one is sent — and one
   transaction per batch of up to 5,000 events: ``COPY`` into a temporary table, ``INSERT … ON
   CONFLICT DO NOTHING``, the session upsert) of a generated store (``benchmarks/store.py``'s
   generator: ``--sessions`` × ``--events``) into an empty database that has the schema (as a
   class's server has; both sides' migration is left out of the timing), against its anchor, measured at the same moment: a bare ``COPY`` of the
   same rows (already in memory, ``data`` as its JSON text) into the same table, ``dsh_events``,
   with its checks, keys and index — what the events cost the server with no shipper around them.
   ``--runs`` rounds (at least 5 for a figure; the order of the two alternates from round to round),
   each into fresh databases; the figure is the median of the rounds' ratios (anchor time / ship
   time, i.e. ship's throughput as a fraction of the anchor's; target ≥ 0.25×) with their spread and
   the load average. Beside it, for reference, a ``COPY`` into an unindexed table without ``data``
   (no keys, no jsonb, no checks) — the floor earlier figures were quoted against;
2. **lag** — ``--agents`` in-process agents (scripted model, real journal, one ``Shipper`` each, as
   a kernel has) chat ``--turns`` turns at once; for each turn, the time from the turn's end (its
   ``turn-end`` checkpoint pokes the shipper) until the server holds every event of it: p50 and
   p95; and the checkpoint's own cost with the shipper attached vs without (it must not grow).

Run: ``python benchmarks/shipping.py [--sessions 100] [--events 1000] [--runs 7] [--agents 3]
[--turns 20]``; ``--quick`` runs each step, tiny (its figures mean nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import LiteralString

import psycopg
import psycopg.sql

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dsh_kernel import Agent  # noqa: E402
from dsh_kernel.store.journal import attach_journal  # noqa: E402
from dsh_kernel.store.layout import Store  # noqa: E402
from dsh_kernel.store.shared.catchup import ship_store  # noqa: E402
from dsh_kernel.store.shared.connection import migrate  # noqa: E402
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


def _fresh_db(server: PgServer, name: str, *, schema: bool = False) -> str:
    with psycopg.connect(server.conninfo, autocommit=True) as conn:
        conn.execute(
            psycopg.sql.SQL("DROP DATABASE IF EXISTS {}").format(psycopg.sql.Identifier(name))
        )
        conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    target = f"host={server.socket_dir} dbname={name} user=dsh"
    if schema:
        with psycopg.connect(target) as conn:
            migrate(conn)
    return target


Anchored = tuple[str, int, str, int, str, str]
"""One event as the anchor copies it: session, seq, type, time, data (JSON text), line."""


def _rows(store: Store) -> list[Anchored]:
    """Every event of ``store`` as the shipper reads it, with ``data`` as the server stores it."""
    rows: list[Anchored] = []
    for path in store.iter_journals():
        tail = JournalTail(path=path, session_id=path.stem)
        while True:
            batch = tail.read()
            if not batch.rows and batch.offset == tail.offset:
                break
            for r in batch.rows:
                data = r.data if r.data is not None else json.dumps(json.loads(r.line)["data"])
                rows.append((path.stem, r.seq, r.type, r.time, data, r.line))
            tail.advance(batch)
    return rows


def _copy(target: str, statement: LiteralString, rows: list[tuple[object, ...]]) -> float:
    """The time of one ``COPY`` of ``rows`` and its commit."""
    with psycopg.connect(target) as conn:
        started = time.perf_counter()
        with conn.cursor() as cur, cur.copy(statement) as copy:
            for row in rows:
                copy.write_row(row)
        conn.commit()
        return time.perf_counter() - started


def _anchor(target: str, rows: list[Anchored]) -> float:
    """The anchor: the same rows into the same table (its checks, keys and index), one ``COPY``."""
    statement = "COPY dsh_events (session_id, seq, type, time, data, line) FROM STDIN"
    return _copy(target, statement, list(rows))


def _floor(target: str, rows: list[Anchored]) -> float:
    """The old floor: the rows but ``data`` into a table with no key, index, jsonb or check."""
    with psycopg.connect(target) as conn:
        conn.execute(
            "CREATE TABLE bare (session_id text, seq bigint, type text, time bigint, line text)"
        )
    return _copy(
        target, "COPY bare FROM STDIN", [(s, q, t, m, line) for s, q, t, m, _, line in rows]
    )


def _ship(target: str, store: Store, total: int) -> float:
    started = time.perf_counter()
    done = ship_store(store, target)
    elapsed = time.perf_counter() - started
    assert done.events == total and not done.skipped, (done.events, total, done.skipped)
    return elapsed


def _spread(values: list[float]) -> str:
    return f"{min(values):.3f}–{max(values):.3f}"


def throughput(server: PgServer, sessions: int, events: int, runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="dsh-ship-bench-") as tmp:
        total, _ = _generator()(Path(tmp) / "store", sessions, events)
        store = Store.at(Path(tmp) / "store")
        size_mb = sum(p.stat().st_size for p in store.iter_journals()) / 1e6
        rows = _rows(store)
        assert len(rows) == total
        load_before = os.getloadavg()
        ship_s: list[float] = []
        anchor_s: list[float] = []
        floor_s: list[float] = []
        for run in range(runs):
            # the same names each round: a round's databases replace the last round's
            ship_db = _fresh_db(server, "ship", schema=True)
            anchor_db = _fresh_db(server, "anchor", schema=True)
            if run % 2 == 0:
                ship_s.append(_ship(ship_db, store, total))
                anchor_s.append(_anchor(anchor_db, rows))
            else:
                anchor_s.append(_anchor(anchor_db, rows))
                ship_s.append(_ship(ship_db, store, total))
            floor_s.append(_floor(_fresh_db(server, "floor"), rows))
        load_after = os.getloadavg()
        ratios = [a / s for a, s in zip(anchor_s, ship_s, strict=True)]
        floors = [f / s for f, s in zip(floor_s, ship_s, strict=True)]
        ship, anchor, floor = (statistics.median(x) for x in (ship_s, anchor_s, floor_s))
        print(f"throughput: {sessions} sessions, {total:,} events, {size_mb:.0f} MB of journals")
        print(
            f"  ship_store               {total / ship:>10,.0f} events/s  {size_mb / ship:6.1f} MB/s  "
            f"(median of {runs}: {ship:.2f} s, reading and checking the journals included)"
        )
        print(
            f"  anchor: COPY, same table {total / anchor:>10,.0f} events/s  "
            f"{size_mb / anchor:6.1f} MB/s  (rows already in memory; dsh_events' checks, keys, index)"
        )
        print(
            f"  ship / anchor            {statistics.median(ratios):.3f}x  (target >= 0.25x; median "
            f"of {runs} alternating rounds, spread {_spread(ratios)})"
        )
        print(
            f"  reference: COPY, bare    {total / floor:>10,.0f} events/s  (no keys, no jsonb, no "
            f"checks): ship at {statistics.median(floors):.3f}x of it, spread {_spread(floors)}"
        )
        print(
            "  load average (1, 5, 15 min): "
            f"{' '.join(f'{x:.2f}' for x in load_before)} before, "
            f"{' '.join(f'{x:.2f}' for x in load_after)} after, on {os.cpu_count()} cores"
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
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--agents", type=int, default=3)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a tiny run that only checks the benchmark still works (make test runs it); its figures mean nothing",
    )
    args = ap.parse_args()
    if args.quick:
        args.sessions, args.events, args.runs, args.agents, args.turns = 3, 50, 2, 1, 2
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
