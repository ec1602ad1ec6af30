"""A session whose process died mid-turn shows as interrupted at the next ingest by anyone, with no
resume: ingest commits crash repair to a journal nobody holds the lock of, never to a live one, and
two processes ingesting at once repair it once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from dsh_kernel.session.check.invariants import check_invariants
from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.journal import read_session, repair_orphan
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import fallback_connection, run_query

from .conftest import HERE, PY

INGESTER = """
import json, sys, time
from pathlib import Path
from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.layout import Store
store, go = Store.at(sys.argv[1]), Path(sys.argv[2])
print("READY", flush=True)
while not go.exists():
    time.sleep(0.005)
report = ingest(store, timeout_s=30)
print(json.dumps({"status": report.status, "repaired": list(report.repaired)}), flush=True)
"""


@contextmanager
def hanging_child(store: Store) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A process mid-turn (a tool call answered, a model stream hanging after some text)."""
    with subprocess.Popen(
        [PY, str(HERE / "child_agent.py"), "hang", str(store.root)],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None
        sid = ""
        for line in child.stdout:
            if line.startswith("HANGING"):
                sid = line.split()[1]
                break
        assert sid, "the child never reached its hanging stream"
        try:
            yield child, sid
        finally:
            if child.poll() is None:
                os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=10)


def kill(child: subprocess.Popen[str]) -> None:
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=10)


def turn_one(store: Store, sid: str) -> tuple[object, ...]:
    [row] = run_query(
        store, "SELECT end_reason, ended_at IS NOT NULL FROM turns WHERE session_id = ?", [sid]
    ).rows
    return row


def test_a_live_writer_is_left_alone_and_a_dead_one_is_repaired_at_the_next_ingest(
    store: Store,
) -> None:
    with hanging_child(store) as (child, sid):
        path = store.find_journal(sid)
        before = path.read_bytes()
        report = ingest(store)
        assert report.repaired == ()
        assert turn_one(store, sid) == (None, False)  # live and mid-turn: open, untouched
        assert repair_orphan(path) is False and path.read_bytes() == before
        kill(child)
        # nothing in the journals changed size since the last pass: the writer's death alone must
        # make the next pass repair (no shortcut may skip it)
        report = ingest(store)
    assert report.repaired == (store.relative(path),)
    assert turn_one(store, sid) == ("interrupted", True)
    events = read_session(path).events
    assert not read_session(path).repaired and check_invariants(events) == []
    # the text streamed before the kill is kept as an interrupted answer, as a cancel keeps it
    [kept] = [e for e in events if e.type == "assistant/message" and e.data.get("interrupted")]
    assert kept.source_event_seqs and "I am thinking" in json.dumps(kept.data)
    rows = run_query(
        store,
        "SELECT text, interrupted FROM messages WHERE session_id = ? AND type = 'assistant/message'",
        [sid],
    ).rows
    assert rows[-1][1] is True and str(rows[-1][0]).startswith("I am thinking")
    # idempotent: nothing more to do, by anyone
    assert repair_orphan(path) is False and ingest(store).repaired == ()
    assert len(read_session(path).events) == len(events)


def test_two_processes_ingesting_at_once_repair_once(store: Store) -> None:
    with hanging_child(store) as (child, sid):
        path = store.find_journal(sid)
        ingest(store)  # the database knows the turn is open
        kill(child)
    go = store.root / "go"
    procs = [
        subprocess.Popen(
            [PY, "-c", INGESTER, str(store.root), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "READY"
    go.touch()
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(len(r["repaired"]) for r in reports) == [0, 1], reports
    events = read_session(path).events
    ends = [e for e in events if e.type == "turn/end"]
    assert [e.data for e in ends] == [{"turn": 1, "reason": {"kind": "interrupted"}}]
    assert check_invariants(events) == []
    assert turn_one(store, sid) == ("interrupted", True)
    counts = run_query(store, "SELECT count(*) FROM events WHERE session_id = ?", [sid]).rows
    assert counts == ((len(events),),)


def test_the_journal_fallback_repairs_too(store: Store) -> None:
    # no database at all: the query is answered from the journals, and the dead turn is closed
    with hanging_child(store) as (child, sid):
        kill(child)
    store.db_path.unlink(missing_ok=True)
    con, report = fallback_connection(store)
    try:
        rows = con.execute("SELECT end_reason FROM turns WHERE session_id = ?", [sid]).fetchall()
    finally:
        con.close()
    assert report.repaired == (store.relative(store.find_journal(sid)),)
    assert rows == [("interrupted",)]
