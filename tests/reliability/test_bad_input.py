"""Bad input through a real kernel (issue 7, item 4).

Huge, binary and not-UTF-8 tool output; a model that sends invalid tool arguments, unknown tool
names, hundreds of calls in one step, or invalid UTF-8 in its stream; a long SQL query that is
interrupted (``%%sql`` by the Jupyter interrupt, the ``sql`` tool by its time limit); a journal with
garbage in the middle (refused, named) versus a torn last line (tolerated); and the journal's disk
write failing (``/dev/full`` put under the journal's file descriptor, between turns and in the middle
of one). Each ends in a defined state with a readable message, the log passes the invariants, and
the kernel goes on working.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.support import (
    Call,
    chat,
    interrupt_later,
    journal_of,
    launch,
    loopback_env,
    of_type,
    python_call,
    session_id,
    sizes,
    stress,
    text_reply,
    tool_reply,
    turn_ends,
    verify_log,
)
from tests.support.kernel import Kernel
from tests.support.sse_server import Frame, SseServer, sse_reply

Rig = tuple[Kernel, SseServer, Path]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("bad-input")
    with SseServer() as srv, launch(tmp, env=loopback_env(srv, DSH_APPROVAL="auto")) as k:
        yield k, srv, tmp


def tool_messages(srv: SseServer, *calls: Call) -> list[dict[str, object]]:
    """The results of ``calls`` as the last request gave them to the model, in its order."""
    ids = {c.id for c in calls}
    return [m for m in srv.requests[-1].json["messages"] if m.get("tool_call_id") in ids]


def healthy(k: Kernel, srv: SseServer) -> None:
    """The kernel still runs Python and chat cells, and its log is sound."""
    assert k.python("print(6 * 7)").strip() == "42"
    srv.script(text_reply("still-here"))
    ex = chat(k, "Are you still there?")
    assert ex.status == "ok", ex.content
    verify_log(k)


def run_tools(
    k: Kernel, srv: SseServer, *calls: Call, timeout: float = 60
) -> list[dict[str, object]]:
    """One turn in which the model calls ``calls``, then answers; returns the results it got."""
    srv.script(tool_reply(*calls), text_reply("done"))
    started = len(srv.requests)
    ex = chat(k, "Run these tools.", timeout=timeout)
    assert ex.status == "ok", ex.content
    assert len(srv.requests) == started + 2
    assert turn_ends(verify_log(k))[-1] == {"kind": "completed"}
    return tool_messages(srv, *calls)


# --- tool output ---------------------------------------------------------------------------------


@pytest.mark.timeout(300)
@pytest.mark.parametrize("megabytes", sizes(30, 200))
def test_huge_tool_output_is_capped_with_a_marker(rig: Rig, megabytes: int) -> None:
    k, srv, _ = rig
    healthy(k, srv)  # the journal file exists from here on
    before = journal_of(k).stat().st_size
    code = f"for _ in range({megabytes}):\n    print('x' * (1 << 20))"
    (msg,) = run_tools(k, srv, python_call(code, "huge"), timeout=240)
    text = str(msg["content"])
    assert len(text.encode()) < 70_000, len(text)
    assert "[output truncated:" in text and "MB more]" in text
    grown = journal_of(k).stat().st_size - before
    assert grown < 5_000_000, f"the journal grew by {grown} bytes"
    healthy(k, srv)


BINARY = r"""
import os, sys
from IPython.display import display
print('lone surrogates: \udcff \ud800 end')
print('controls: \x00 \x07 \x1b[31m red \x1b[0m \x7f')
sys.stdout.write(bytes(range(256)).decode('latin-1'))
os.write(1, b'\xff\xfe raw bytes on fd 1 \x00\n')
display({'application/octet-stream': b'\x00\xff\xfe', 'text/plain': 'a binary bundle'}, raw=True)
b'\xff\xfe\x00 a bytes value'
"""


def test_binary_and_invalid_utf8_tool_output(rig: Rig) -> None:
    k, srv, _ = rig
    (msg,) = run_tools(k, srv, python_call(BINARY, "binary"))
    text = str(msg["content"])
    assert "lone surrogates: ? ? end" in text  # unpaired surrogates cannot travel as UTF-8
    assert "controls: \x00 \x07" in text and "a binary bundle" in text
    assert "b'\\xff\\xfe\\x00 a bytes value'" in text
    ex = k.execute("%%sql rows <<\nSELECT count(*) FROM tool_calls WHERE call_id = 'binary'")
    assert ex.status == "ok", ex.content
    assert k.python("print(int(rows.iloc[0, 0]))").strip() == "1"
    healthy(k, srv)


def test_invalid_utf8_in_the_model_stream(rig: Rig) -> None:
    k, srv, _ = rig
    bad = b'data: {"choices":[{"delta":{"content":"caf\xc3 \xff\xfe ok"},"finish_reason":"stop"}]}\n\n'
    srv.script(sse_reply([Frame(raw=bad), Frame(raw=b"data: [DONE]\n\n")]))
    ex = chat(k, "Say something odd.")
    assert ex.status == "error", ex.content
    assert ex.content["ename"] == "MALFORMED_RESPONSE"  # not UTF-8: refused, never half-decoded
    assert "malformed stream payload" in ex.content["evalue"]
    assert turn_ends(verify_log(k))[-1]["error"]["code"] == "MALFORMED_RESPONSE"
    healthy(k, srv)


# --- the model's tool calls ----------------------------------------------------------------------


def test_invalid_arguments_and_unknown_tools_get_error_results(rig: Rig, tmp_path: Path) -> None:
    k, srv, _ = rig
    marker = tmp_path / "ran"
    sneaky = f"open({str(marker)!r}, 'w').write('ran')"
    got = run_tools(
        k,
        srv,
        Call("python", "{not json", "a1"),
        Call("python", {"code": 5}, "a2"),
        Call("python", {}, "a3"),
        Call("python", {"code": sneaky, "unexpected": True}, "a4"),
        Call("rm_rf", {"path": "/"}, "a5"),
        Call("inspect", {"name": "get_ipython().kernel.host"}, "a6"),
        Call("", {}, "a7"),
    )
    results = {str(m["tool_call_id"]): str(m["content"]) for m in got}
    assert list(results) == ["a1", "a2", "a3", "a4", "a5", "a6", "a7"]
    assert "not valid JSON" in results["a1"]
    assert "invalid arguments" in results["a2"] and "code" in results["a2"]
    assert "invalid arguments" in results["a3"] and "code" in results["a3"]
    assert "invalid arguments" in results["a4"] and "unexpected" in results["a4"]
    assert "unknown tool 'rm_rf'" in results["a5"] and "python" in results["a5"]
    assert "not a variable name" in results["a6"]
    assert "unknown tool" in results["a7"]
    assert all(r.startswith("Error") for r in results.values()), results
    assert not marker.exists(), "a call with invalid arguments ran"
    healthy(k, srv)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("calls", sizes(200, 1000))
def test_hundreds_of_calls_in_one_step_are_capped(rig: Rig, calls: int) -> None:
    k, srv, _ = rig
    k.python("cap_probe = 1")
    results = run_tools(
        k,
        srv,
        *(Call("inspect", {"name": "cap_probe"}, f"many{i}") for i in range(calls)),
        timeout=300,
    )
    assert [m["tool_call_id"] for m in results] == [f"many{i}" for i in range(calls)]
    capped = [m for m in results if "too many tool calls in one step" in str(m["content"])]
    assert len(capped) == calls - 64
    assert f"({calls} > 64)" in str(capped[0]["content"])
    assert all("int" in str(m["content"]) for m in results[:64])
    healthy(k, srv)


# --- SQL -----------------------------------------------------------------------------------------

LONG_SQL = "SELECT sum(hash(range)) FROM range(50000000000)"


def test_a_long_sql_cell_is_interrupted_at_once(rig: Rig) -> None:
    k, srv, _ = rig
    started = time.monotonic()
    interrupter = interrupt_later(k, 0.5)
    ex = k.execute(f"%%sql\n{LONG_SQL}", timeout=60)
    took = time.monotonic() - started
    interrupter.join()
    assert ex.status == "error", ex.content
    assert ex.content["ename"] == "SQL_INTERRUPTED"
    assert "interrupted" in ex.content["evalue"]
    assert took < 3, f"the interrupt took {took:.1f} s to stop the query"
    ex = k.execute("%%sql\nSELECT count(*) FROM events")
    assert ex.status == "ok", ex.content
    healthy(k, srv)


def test_a_long_sql_tool_query_stops_at_its_time_limit(rig: Rig) -> None:
    k, srv, _ = rig
    (msg,) = run_tools(k, srv, Call("sql", {"sql": LONG_SQL}, "slow"), timeout=30)
    assert "longer than 5 s" in str(msg["content"])
    events = verify_log(k)
    (result,) = [e for e in of_type(events, "tool/result") if "slow" in json.dumps(e.data)]
    error: Any = result.data["error"]
    assert error["code"] == "SQL_TIMEOUT"
    healthy(k, srv)


# --- the journal ---------------------------------------------------------------------------------

BREAK_JOURNAL = """
import os
_path = os.path.realpath({path!r})
_fd = next(int(f) for f in os.listdir('/proc/self/fd')
           if os.path.realpath(f'/proc/self/fd/{{f}}') == _path)
_saved = os.dup(_fd)
_full = os.open('/dev/full', os.O_WRONLY)
os.dup2(_full, _fd)
os.close(_full)
print(_fd)
"""
REPAIR_JOURNAL = "os.dup2(_saved, _fd)\nos.close(_saved)"


def test_a_failing_journal_disk_stops_the_turn_before_the_model_runs(rig: Rig) -> None:
    k, srv, _ = rig
    healthy(k, srv)
    path = journal_of(k)
    lines = len(path.read_bytes().splitlines())
    k.python(BREAK_JOURNAL.format(path=str(path)))
    srv.script(text_reply("should never be asked"))
    ex = chat(k, "This turn cannot be journaled.")
    assert ex.status == "error", ex.content
    assert ex.content["ename"] == "JOURNAL_WRITE_FAILED"
    assert "journal" in ex.content["evalue"] and "No space left" in ex.content["evalue"]
    assert srv.requests == [], "the model was asked although the journal could not be written"
    assert len(path.read_bytes().splitlines()) == lines
    k.python(REPAIR_JOURNAL)
    srv.script(text_reply("back to normal"))
    assert chat(k, "And now?").status == "ok"
    events = verify_log(k)  # nothing of the failed turn was lost: it is all in the file now
    assert any("This turn cannot be journaled." in json.dumps(e.data) for e in events)
    assert turn_ends(events)[-2]["error"]["code"] == "JOURNAL_WRITE_FAILED"


def test_a_journal_disk_failing_mid_turn_stops_before_the_next_model_call(rig: Rig) -> None:
    k, srv, _ = rig
    healthy(k, srv)
    path = journal_of(k)
    srv.script(
        tool_reply(python_call(BREAK_JOURNAL.format(path=str(path)), "breaker")),
        text_reply("should never be asked"),
    )
    ex = chat(k, "Break the disk, then keep going.")
    assert ex.status == "error", ex.content
    assert ex.content["ename"] == "JOURNAL_WRITE_FAILED"
    assert len(srv.requests) == 1, "a model call went out after the journal failed"
    k.python(REPAIR_JOURNAL)
    srv.script(text_reply("recovered"))
    assert chat(k, "Is it fixed?").status == "ok"
    events = verify_log(k)
    (result,) = [e for e in of_type(events, "tool/result") if "breaker" in json.dumps(e.data)]
    assert result.data.get("error") is None  # the tool ran and its result survived the outage
    assert turn_ends(events)[-2]["error"]["code"] == "JOURNAL_WRITE_FAILED"


def test_garbage_in_the_middle_is_refused_and_a_torn_tail_tolerated(rig: Rig) -> None:
    k, srv, _ = rig
    srv.script(text_reply("first answer"), text_reply("second answer"))
    assert chat(k, "damage-probe one").status == "ok"
    assert chat(k, "damage-probe two").status == "ok"
    sid = session_id(k)
    path = journal_of(k)
    assert "new session" in k.execute("%agent new").stdout
    original = path.read_bytes()
    lines = original.split(b"\n")
    middle = len(lines) // 2
    lines[middle] = b'{"seq": 12, "type": "assistant/chunk", "data": {"garbage'
    path.write_bytes(b"\n".join(lines))
    refused = k.execute(f"%agent resume {sid}")  # a failed command fails its cell
    assert refused.status == "error", refused.content
    assert f"{path}:{middle + 1}" in refused.content["evalue"], refused.content
    assert "resumed session" not in refused.stdout
    ex = k.execute("%%sql\nSELECT count(*) FROM events")
    assert ex.status == "ok", ex.content
    assert f"{path.name}" in json.dumps(ex.data("text/plain")), "the damaged journal is not named"
    # a torn last line (a crash mid-write) is tolerated: cut off, and the session continues
    torn = original + b'{"seq": 999999, "type": "assistant/chu'
    path.write_bytes(torn)
    out = k.execute(f"%agent resume {sid}").stdout
    assert f"resumed session {sid}" in out, out
    assert path.read_bytes() == original
    srv.script(text_reply("third answer"))
    assert chat(k, "damage-probe three").status == "ok"
    events = verify_log(k)
    assert [e.type for e in events].count("turn/end") >= 3
    healthy(k, srv)


@stress
def test_a_runaway_print_loop_is_stopped(rig: Rig) -> None:
    k, srv, _ = rig
    code = "while True:\n    print('y' * (1 << 20))"
    (msg,) = run_tools(k, srv, python_call(code, "runaway"), timeout=240)
    assert "output" in str(msg["content"]).lower() and str(msg["content"]).startswith("Error")
    healthy(k, srv)
