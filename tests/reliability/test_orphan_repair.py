"""A kernel killed mid-turn: the store shows its session as interrupted as soon as another kernel runs
a ``%%sql`` cell — no ``%agent resume`` ever (issue 12, item 8).

* killed while the answer streamed: the turn is ``interrupted`` and the text the user saw is kept as
  an interrupted assistant message (the model gets it back on resume, as after a Stop);
* killed while a ``python`` call waited for the Allow click: while it waits, ``code_runs.status`` is
  ``waiting``; after the kill the call is ``interrupted`` with ``TOOL_NOT_STARTED`` and a result that
  says it never ran (its code did not run: no side effect), and the question is ``interrupted``;
* two kernels querying at once right after the kill repair the journal once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dsh_kernel.session.check.invariants import check_invariants
from dsh_kernel.store.journal import read_session
from dsh_kernel.store.layout import Store
from tests.reliability.support import (
    Driver,
    kill9,
    launch,
    loopback_env,
    python_call,
    session_id,
    tool_reply,
)
from tests.support.frontend import Frontend
from tests.support.kernel import Kernel
from tests.support.sse_server import SseServer, sse_reply
from tests.support.wire_transcripts import chat_chunk, sse

SEEN = "The user saw this part of the answer"


def sql(k: Kernel, query: str) -> list[dict[str, Any]]:
    ex = k.execute(f"%%sql _rows <<\n{query}")
    assert ex.status == "ok", ex.content
    return json.loads(k.python("print(_rows.to_json(orient='records'))"))


def wait_for(what: str, cond: Callable[[], bool], tries: int = 600) -> None:
    """Poll ``cond`` (every 50 ms, up to 30 s): waits for a write, asserts nothing about time."""
    for _ in range(tries):
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def journal(store: Store, sid: str) -> Path:
    return store.find_journal(sid)


def only_session_with(store: Store, text: str) -> Callable[[], str]:
    """A probe: the id of the one journal holding ``text``, or "" (not written yet)."""

    def probe() -> str:
        if not store.journals_dir.is_dir():
            return ""
        hits = [p.stem for p in store.iter_journals() if text in p.read_text(encoding="utf-8")]
        assert len(hits) <= 1, hits
        return hits[0] if hits else ""

    return probe


def hanging_answer() -> Any:
    """Some streamed text, then a stream that never finishes."""
    body = sse(
        chat_chunk({"role": "assistant", "content": ""}),
        chat_chunk({"content": SEEN[:18]}),
        chat_chunk({"content": SEEN[18:]}),
    )
    return sse_reply(body, close="hang")


def start_streaming_and_kill(tmp: Path, server: SseServer, store: Store) -> str:
    """A kernel whose chat cell streams some text, then is killed -9 before the answer ends."""
    server.script(hanging_answer())
    with launch(tmp / "a", env=loopback_env(server), store=store.root) as a:
        driver = Driver(a, ["Tell me something long."], allow_errors=True).start()
        probe = only_session_with(store, SEEN[18:])
        wait_for("the streamed text reached the journal", lambda: bool(probe()))
        sid = probe()
        kill9(a)
        driver.stop()
    return sid


def test_a_killed_kernel_shows_interrupted_to_a_kernel_that_never_resumes(
    tmp_path: Path, server: SseServer
) -> None:
    store = Store.at(tmp_path / "store")
    sid = start_streaming_and_kill(tmp_path, server, store)
    with launch(tmp_path / "b", env=loopback_env(server), store=store.root) as b:
        [turn] = sql(
            b,
            f"SELECT end_reason, ended_at IS NOT NULL AS ended FROM turns WHERE session_id = '{sid}'",
        )
        assert turn == {"end_reason": "interrupted", "ended": True}
        msgs = sql(
            b,
            f"SELECT type, text, interrupted FROM messages WHERE session_id = '{sid}' ORDER BY seq",
        )
        assert msgs[-1] == {"type": "assistant/message", "text": SEEN, "interrupted": True}
        [err] = sql(b, f"SELECT source, code FROM errors WHERE session_id = '{sid}'")
        assert err == {"source": "crash", "code": "INTERRUPTED"}
        assert session_id(b) != sid  # b never resumed the session
    loaded = read_session(journal(store, sid))
    assert not loaded.repaired  # the repair is in the journal itself
    assert check_invariants(loaded.events) == []


def test_a_crash_while_waiting_for_approval_says_the_code_never_ran(
    tmp_path: Path, server: SseServer
) -> None:
    store = Store.at(tmp_path / "store")
    marker = tmp_path / "side-effect"
    code = f"open({str(marker)!r}, 'w').write('ran')"
    server.script(tool_reply(python_call(code, "call_wait")))
    env = loopback_env(server, DSH_APPROVAL="ask", DSH_HEADLESS_APPROVAL_TIMEOUT="30")
    with (
        launch(tmp_path / "a", env=env, store=store.root) as a,
        launch(tmp_path / "b", env=loopback_env(server), store=store.root) as b,
    ):
        fe = Frontend(a)
        cell = fe.submit("Write the marker file.")
        cell.pump(lambda: bool(fe.buttons("Allow once")), what="the approval buttons")
        probe = only_session_with(store, "approval/asked")
        wait_for("the question reached the journal", lambda: bool(probe()))
        sid = probe()
        query = (
            "SELECT c.status, c.error_code, c.result_summary, a.outcome FROM code_runs c "
            "JOIN approvals a USING (session_id, call_id) "
            f"WHERE c.session_id = '{sid}' AND c.call_id = 'call_wait'"
        )
        [waiting] = sql(b, query)
        assert waiting["status"] == "waiting" and waiting["outcome"] == "pending"
        kill9(a)
        [after] = sql(b, query)
        assert after["status"] == "interrupted" and after["error_code"] == "TOOL_NOT_STARTED"
        assert "never ran" in after["result_summary"] and "may have" not in after["result_summary"]
        assert after["outcome"] == "interrupted"
        [turn] = sql(b, f"SELECT end_reason FROM turns WHERE session_id = '{sid}'")
        assert turn == {"end_reason": "interrupted"}
    assert not marker.exists()
    assert check_invariants(read_session(journal(store, sid)).events) == []


def test_two_kernels_querying_at_once_after_a_kill_repair_once(
    tmp_path: Path, server: SseServer
) -> None:
    store = Store.at(tmp_path / "store")
    sid = start_streaming_and_kill(tmp_path, server, store)
    env = loopback_env(server)
    with (
        launch(tmp_path / "b", env=env, store=store.root) as b,
        launch(tmp_path / "c", env=env, store=store.root) as c,
    ):
        cell = f"%%sql _ends <<\nSELECT end_reason FROM turns WHERE session_id = '{sid}'"
        drivers = [Driver(k, [cell]).start() for k in (b, c)]
        for d in drivers:
            d.join(120)
            assert [r["status"] for r in d.replies] == ["ok"], d.replies
        for k in (b, c):
            out = k.python("print(_ends.to_json(orient='values'))")
            assert json.loads(out) == [["interrupted"]]
    events = read_session(journal(store, sid)).events
    assert [e.data for e in events if e.type == "turn/end"] == [
        {"turn": 1, "reason": {"kind": "interrupted"}}
    ]
    assert sum(1 for e in events if e.type == "assistant/message") == 1
    assert check_invariants(events) == []
