"""Two agent processes chatting into one store while a third process runs SQL in a loop: no event lost,
no lock error reaches anyone, both sessions appear once their turns end."""

from __future__ import annotations

import json
import subprocess
from typing import cast

from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query

from .conftest import HERE, PY

QUERIER = """
import json, sys, time
from pathlib import Path
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query
store, stop = Store.at(sys.argv[1]), Path(sys.argv[2])
stats = {"queries": 0, "errors": [], "sources": {}, "max_sessions": 0}
while not stop.exists():
    try:
        r = run_query(store, "SELECT count(DISTINCT session_id) FROM events", lock_timeout_s=1.0)
        stats["queries"] += 1
        stats["sources"][r.source] = stats["sources"].get(r.source, 0) + 1
        stats["max_sessions"] = max(stats["max_sessions"], r.rows[0][0])
    except Exception as exc:
        stats["errors"].append(f"{type(exc).__name__}: {exc}")
print(json.dumps(stats), flush=True)
"""

TURNS = 12


def test_two_writers_and_a_reader(store: Store) -> None:
    Store.open(store.root)
    stop = store.root / "stop"
    with subprocess.Popen(
        [PY, "-c", QUERIER, str(store.root), str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as querier:
        kernels = [
            subprocess.Popen(
                [PY, str(HERE / "child_agent.py"), "chat", str(store.root), str(TURNS)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        done: dict[str, int] = {}
        for k in kernels:
            with k:
                out, err = k.communicate(timeout=120)
                assert k.returncode == 0, err
                [line] = [x for x in out.splitlines() if x.startswith("DONE")]
                _, sid, n = line.split()
                done[sid] = int(n)
        stop.touch()
        out, err = querier.communicate(timeout=60)
        assert querier.returncode == 0, err
    stats = json.loads(out)
    assert stats["errors"] == [], stats["errors"][:3]
    assert stats["queries"] > 0
    final = run_query(
        store, "SELECT session_id, count(*), max(seq) FROM events GROUP BY 1 ORDER BY 1"
    )
    assert final.source == "database" and final.notices == ()
    assert {r[0]: r[1] for r in final.rows} == done  # every event of both sessions, none twice
    assert all(r[2] == cast(int, r[1]) - 1 for r in final.rows)
    turns = run_query(
        store,
        "SELECT session_id, count(*) FILTER (WHERE end_reason = 'completed') FROM turns GROUP BY 1",
    )
    assert {r[0]: r[1] for r in turns.rows} == {sid: TURNS for sid in done}
