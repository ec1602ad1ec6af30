"""Load on the shared store (issue 19): three real kernels chat at once into one PostgreSQL server,
which is stopped for two turns in the middle and then restarted. Asserted: every cell replies ``ok`` (the chat never
waits for the server), and once the kernels are done the server holds exactly each journal's events
(none lost, none twice). The whole test is bounded at 20 s of chatting; the time from the last
turn's end until every event is on the server goes to the figures."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.reliability.support import FIGURES, stress
from tests.support.kernel import Kernel, start_kernel
from tests.support.shared_db import SharedDb

KERNELS = 3
TURNS = 8
BOUND_S = 20.0


def _journal(store: Path) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for path in sorted((store / "journals").rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:
            out.append((path.stem, json.loads(line)["seq"]))
    return sorted(out)


def _reply(k: Kernel, msg_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        reply = k.kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply
    raise TimeoutError(f"no reply to {msg_id} in {BOUND_S} s")


@stress
def test_three_kernels_ship_through_a_server_restart(shared_db: SharedDb, tmp_path: Path) -> None:
    env = {
        "DSH_PROVIDER": "offline",
        "DSH_HEADLESS_APPROVAL_TIMEOUT": "0.1",
        "DSH_SHARED_STORE": shared_db.target,
    }
    failures: list[str] = []
    stores = [tmp_path / f"k{i}" / "store" for i in range(KERNELS)]
    kernels = [
        start_kernel(tmp_path / f"k{i}", env={**env, "JUPYTERHUB_USER": f"s{i}"})
        for i in range(KERNELS)
    ]
    entered = [k.__enter__() for k in kernels]
    try:
        started = time.monotonic()
        for n in range(TURNS):
            # the three kernels run each turn at once: send all three, then collect the replies
            sent = [k.kc.execute(f"Hello {n}! What can you do?") for k in entered]
            for k, msg_id in zip(entered, sent, strict=True):
                reply = _reply(k, msg_id)
                if reply["content"]["status"] != "ok":
                    failures.append(f"turn {n}: {reply['content']}")
            if n == 2:
                shared_db.server.stop()
            if n == 4:
                shared_db.server.start()
        chatted = time.monotonic() - started
        assert failures == []
        assert chatted < BOUND_S, chatted
        expected = sorted(x for s in stores for x in _journal(s))
        deadline = time.monotonic() + 30  # the backoff after the restart is at most a few s
        while time.monotonic() < deadline:
            got = sorted(
                (str(a), int(b))
                for a, b in shared_db.rows("SELECT session_id, seq FROM dsh_events")
            )
            if got == expected:
                break
            time.sleep(0.2)
        lag = time.monotonic() - started - chatted
        assert got == expected  # none lost, none twice (the primary key forbids twice anyway)
        FIGURES.append(
            f"shared store: {KERNELS} kernels x {TURNS} turns, a server restart mid-run: "
            f"{len(expected)} events, chat {chatted:.1f} s, all shipped {lag:.1f} s after the last turn"
        )
    finally:
        for k in kernels:
            k.__exit__(None, None, None)
