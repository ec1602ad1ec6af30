"""kill -9 in the middle of a compaction (issue 16): repair closes the turn but never the
``compaction/*`` bracket; the old surface stays in force; on resume the orphan is stale (the
end-seed rule), the session goes on and can compact again."""

from __future__ import annotations

import os
import signal
import subprocess

from dsh_kernel.session.check.invariants import check_invariants
from dsh_kernel.store.journal import load_session
from dsh_kernel.store.layout import Store
from dsh_kernel.store.sessions import resume
from dsh_kernel.testing import text_response
from dsh_kernel.transcript.model import NoticeItem
from dsh_kernel.transcript.turn import fold_turn, turn_events

from .conftest import HERE, PY, chat, make_agent


def kill_mid_compaction(store: Store) -> str:
    with subprocess.Popen(
        [PY, str(HERE / "child_agent.py"), "compact-hang", str(store.root)],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None
        sid = next((ln.split()[1] for ln in child.stdout if ln.startswith("HANGING")), "")
        assert sid, "the child never reached its hanging summary call"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    return sid


async def test_kill_9_mid_compaction_then_repair_and_resume(store: Store) -> None:
    sid = kill_mid_compaction(store)
    path = store.find_journal(sid)
    _, events, repaired = load_session(path)
    assert repaired
    types = [e.type for e in events]
    assert types.count("compaction/start") == 1 and "compaction/end" not in types
    assert "compaction/summary" not in types  # nothing was replaced: the old surface stands
    assert types[-1] == "turn/end" and events[-1].data["reason"] == {"kind": "interrupted"}
    assert check_invariants(list(events)) == []
    # the turn's view says the compaction was cut short (repair closed the turn, never it)
    crashed = fold_turn(turn_events(events, events[-1].data["turn"]))  # type: ignore[arg-type]
    notes = [i.text for i in crashed.items if isinstance(i, NoticeItem)]
    assert any(n.startswith("Compaction interrupted") for n in notes), notes
    session = resume(store, sid)
    assert session.compaction_open is None  # the orphan belongs to a dead lifecycle
    summary = (  # one that passes the substance check (agent.compaction.substance)
        "## Goal\n- Answer the user's short questions (one, two, three, four) about the data.\n"
        "## Done so far\n- Each got a long answer about the data, the same sentence repeated many "
        "times over; then the user said go on and got a short reply.\n## Open questions and next "
        "step\n- Wait for the user's next question about the data; answer it at the same length."
    )
    script = [text_response("Going on."), text_response(summary)]
    agent, provider, writer = make_agent(store, script, session=session)
    await chat(agent, "go on")
    sent = [m.text() for m in provider.requests[0].messages if m.role == "user"]
    assert "one?" in sent and "go on" in sent  # the history the model sees is the old one
    result = await agent.compact()  # and a new compaction takes the lock and lands
    assert result is not None and result.method == "model" and session.compaction_open is None
    provider.assert_consumed()
    writer.close()
