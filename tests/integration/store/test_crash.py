"""kill -9 of a process in the middle of a streamed turn: the journal is repaired on load, every event
checkpointed before the kill is there, and resume continues the session."""

from __future__ import annotations

import os
import signal
import subprocess

from dsh_kernel.session.check.invariants import check_invariants
from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.journal import load_session, read_session
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query
from dsh_kernel.store.sessions import resume
from dsh_kernel.testing import text_response

from .conftest import HERE, PY, chat, make_agent


def run_until_hanging(store: Store) -> tuple[str, int, list[str]]:
    with subprocess.Popen(
        [PY, str(HERE / "child_agent.py"), "hang", str(store.root)],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None
        checkpoints: list[str] = []
        sid = ""
        for line in child.stdout:
            if line.startswith("CHECKPOINT"):
                checkpoints.append(line.split()[2])
                last = int(line.split()[1])
            elif line.startswith("HANGING"):
                sid = line.split()[1]
                break
        assert sid, "the child never reached its hanging stream"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        assert child.returncode == -signal.SIGKILL
    return sid, last, checkpoints


async def test_kill_9_mid_turn_then_repair_and_resume(store: Store) -> None:
    sid, durable, checkpoints = run_until_hanging(store)
    assert checkpoints[-1] == "before-request" and "before-tool" in checkpoints
    path = store.find_journal(sid)
    on_disk = read_session(path)  # what the crash left, repaired only in memory
    header, events, repaired = load_session(path)
    assert repaired and header.id == sid
    assert events == on_disk.events
    # everything up to the last checkpoint is durable, in order, followed by the repair closers
    assert len(events) >= durable + 2
    assert [e.seq for e in events] == list(range(len(events)))
    assert [e.type for e in events[-2:]] == ["step/end", "turn/end"]
    assert events[-1].data == {"turn": 1, "reason": {"kind": "interrupted"}}
    types = [e.type for e in events[:durable]]
    assert types.count("tool/result") == 1 and "request/header" in types
    assert check_invariants(list(events)) == []
    # a second load changes nothing
    assert load_session(path).events == events and not load_session(path).repaired

    # resume: new turns continue the same journal
    session = resume(store, sid)
    agent, provider, writer = make_agent(
        store, [text_response("Continuing: it was 3.")], session=session
    )
    await chat(agent, "where were we?")
    provider.assert_consumed()
    sent = provider.requests[0].messages
    assert [m.text() for m in sent if m.role == "user" and m.source.kind == "user"] == [
        "add 1 and 2, then think",
        "where were we?",
    ]
    writer.close()
    final = read_session(path)
    assert not final.repaired and final.events[: len(events)] == events
    assert [e.type for e in final.events[len(events) :]][:2] == [
        "session/end-seed",
        "agent/inbox/spliced",
    ]
    ingest(store)
    turns = run_query(store, "SELECT turn, end_reason FROM turns ORDER BY turn").rows
    assert turns == ((1, "interrupted"), (2, "completed"))
    crash = run_query(store, "SELECT source, code FROM errors").rows
    assert crash == (("crash", "INTERRUPTED"),)
