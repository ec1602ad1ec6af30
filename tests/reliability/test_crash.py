"""``kill -9`` of the kernel at random points of a scripted multi-turn session (issue 7, item 2).

One session is carried across a chain of kernels. Each kernel resumes the session the previous one
left (``%agent resume`` repairs the journal on disk), checks with ``%%sql`` that the store's counts
equal the journals', then runs scripted turns — a ``python`` tool call that leaves a marker file,
then a streamed answer, with a ``%%sql`` cell in between — and is killed with SIGKILL at a random
moment. After each kill, from the outside:

* the journal, repaired in memory, passes the session invariants;
* every event a checkpoint acknowledged is there: a checkpoint listener registered after the
  journal's own writes ``committed`` (events fsynced) to an acknowledgement file, and the journal
  holds at least that many events, the last acknowledged one of the recorded type;
* every message the model server received, every tool body that ran (marker file) and every chat
  cell that replied ``ok`` is in the journal.

At the end the store API repairs every journal, ingests, and SQL counts match the journals again.
The seed of the random kill times is ``DSH_RELIABILITY_SEED`` (default: random, printed in the
figures).
"""

from __future__ import annotations

import collections
import json
import os
import random
import time
from pathlib import Path
from typing import Any, cast

import pytest

from dsh_kernel.session.check.invariants import check_invariants, result_call_id
from dsh_kernel.session.events import SessionEvent
from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.journal import load_session, read_session
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query
from tests.reliability.support import (
    FIGURES,
    Driver,
    chat,
    kill9,
    launch,
    loopback_env,
    python_call,
    session_id,
    sizes,
    text_reply,
    tool_reply,
)
from tests.support.kernel import Kernel
from tests.support.sse_server import SseServer

TURNS = 3
WINDOW_S = 3.2
"""Kill times are drawn uniformly from [0, WINDOW_S) after the scripted cells start; an
uninterrupted run of them takes about 2.5 s, so a few kills land after the end (an idle kernel)."""

ACK_LISTENER = """
import os as _os
_h = get_ipython().kernel.host
_ack_fd = _os.open({acks!r}, _os.O_WRONLY | _os.O_APPEND | _os.O_CREAT, 0o644)
async def _ack(cp, _h=_h):
    j = _h.journal
    n = j.committed if j is not None and j.last_error is None else 0
    if n:
        last = _h.agent.session.events[n - 1].type
        _os.write(_ack_fd, f"{{n}} {{last}} {{cp.reason}}\\n".encode())
_h.agent.hooks.checkpoint.on(_ack)
"""


def script(srv: SseServer, run: int, marks: Path) -> list[str]:
    replies = []
    cells = []
    for turn in range(1, TURNS + 1):
        code = (
            f"open({str(marks / f'{run}-{turn}')!r}, 'w').write('ran')\nprint('tool {run}.{turn}')"
        )
        replies.append(tool_reply(python_call(code, f"call_{run}_{turn}")))
        replies.append(text_reply(f"answer {run}.{turn} " * 6, delay_ms=40, pieces=6))
        cells.append(f"crash-run {run}.{turn}: please run the step")
        if turn == 2:
            cells.append("%%sql\nSELECT type, count(*) FROM events GROUP BY type")
    srv.script(*replies)
    return cells


def sql_counts(k: Kernel) -> dict[tuple[str, str], int]:
    ex = k.execute(
        "%%sql counts <<\nSELECT session_id, type, count(*) AS n FROM events GROUP BY ALL"
    )
    assert ex.status == "ok", ex.content
    rows = json.loads(k.python("print(counts.to_json(orient='values'))"))
    return {(r[0], r[1]): int(r[2]) for r in rows}


def journal_counts(store: Store) -> dict[tuple[str, str], int]:
    out: collections.Counter[tuple[str, str]] = collections.Counter()
    for path in store.iter_journals():
        loaded = read_session(path)
        assert not loaded.repaired, f"{path} still has an open turn"
        for e in loaded.events:
            out[(loaded.header.id, e.type)] += 1
    return dict(out)


def check_after_kill(
    events: tuple[SessionEvent, ...],
    acks: Path,
    marks: Path,
    requests: list[Any],
    completed: list[str],
) -> None:
    assert check_invariants(events) == []
    if acks.exists():
        for line in acks.read_text().splitlines():
            n, kind, _reason = line.split()
            assert len(events) >= int(n), f"acknowledged {n} events, journal has {len(events)}"
            assert events[int(n) - 1].type == kind
            assert [e.seq for e in events[: int(n)]] == list(range(int(n)))
    calls = {cast(str, e.data["callId"]) for e in events if e.type == "tool/call"}
    for mark in marks.iterdir():
        run, turn = mark.name.split("-")
        assert f"call_{run}_{turn}" in calls, (
            f"tool body {mark.name} ran but its call is not logged"
        )
    texts = json.dumps([e.data for e in events if e.type in ("user/message", "tool/result")])
    answered = {result_call_id(e.data) for e in events if e.type == "tool/result"}
    for req in requests:
        for m in req.json["messages"]:
            if (
                m["role"] == "user"
                and isinstance(m["content"], str)
                and "crash-run" in m["content"]
            ):
                assert m["content"] in texts, f"sent to the model but not journaled: {m['content']}"
            if m["role"] == "tool":
                assert m["tool_call_id"] in answered
    for prompt in completed:
        turn = next(
            e.data["turn"]
            for e in events
            if e.type == "turn/start"
            and any(
                u.type == "user/message" and prompt in json.dumps(u.data)
                for u in events[e.seq : e.seq + 8]
            )
        )
        ends = [e.data["reason"] for e in events if e.type == "turn/end" and e.data["turn"] == turn]
        assert ends == [{"kind": "completed"}], (prompt, ends)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("kills", sizes(4, 24))
def test_kill_9_at_random_points(tmp_path: Path, server: SseServer, kills: int) -> None:
    seed = int(os.environ.get("DSH_RELIABILITY_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    store = Store.at(tmp_path / "store")
    acks, marks = tmp_path / "acks", tmp_path / "marks"
    marks.mkdir()
    env = loopback_env(server, DSH_APPROVAL="auto")
    sid = ""
    stats = collections.Counter[str]()
    for run in range(kills + 1):
        with launch(tmp_path / f"k{run}", env=env, store=store.root) as k:
            if not sid:
                server.script(text_reply("the session starts"))
                assert chat(k, "crash-run 0.0: hello").status == "ok"
                sid = session_id(k)
            else:
                out = k.execute(f"%agent resume {sid}").stdout
                assert f"resumed session {sid}" in out, out
                assert sql_counts(k) == journal_counts(store)
            if run == kills:
                break
            k.python(ACK_LISTENER.format(acks=str(acks)))
            cells = script(server, run + 1, marks)
            driver = Driver(k, cells).start()
            at = rng.uniform(0, WINDOW_S)
            time.sleep(at)
            kill9(k)
            driver.stop()
        requests = server.requests
        completed = [
            c
            for c, r in zip(cells, driver.replies, strict=False)
            if r["status"] == "ok" and "crash-run" in c
        ]
        path = store.find_journal(sid)
        on_disk = read_session(path)
        check_after_kill(on_disk.events, acks, marks, requests, completed)
        stats["killed mid-turn" if on_disk.repaired else "killed between turns"] += 1
        stats["torn last line"] += not path.read_bytes().endswith(b"\n")
    # the store API: repair every journal, ingest, and the SQL counts equal the journals'
    for path in store.iter_journals():
        load_session(path)
    assert ingest(store).status in ("ingested", "up-to-date")
    result = run_query(store, "SELECT session_id, type, count(*) FROM events GROUP BY ALL")
    assert {(r[0], r[1]): r[2] for r in result.rows} == journal_counts(store)
    final = read_session(store.find_journal(sid)).events
    assert check_invariants(final) == []
    FIGURES.append(
        f"crash: {kills} kill -9 points (seed {seed}); "
        + ", ".join(f"{v} {k}" for k, v in sorted(stats.items()) if v)
        + f"; session {len(final)} events, {sum(1 for e in final if e.type == 'turn/end')} turns; "
        f"acknowledged events lost: 0"
    )
