"""Hostile tool calls and the bounded ``sql`` tool, through a real kernel (issue 11, items 3, 4, 8, 9).

* Arguments nested 2,000 levels deep (which made ``json.loads`` raise ``RecursionError``) get an
  ``INVALID_ARGS`` result, the turn goes on, and the next request answers every tool call.
* A 5 MB tool name is cut where it is echoed: the result, and every later request, stay small.
* 10,000 unexpected arguments give one short ``INVALID_ARGS`` line, not 600 kB.
* A 10 MB error text from the ``sql`` tool is cut with a marker.
* A ``sql`` query that would return 1 GB ends bounded (a truncated result under the byte cap or a
  clear memory error) and the kernel's peak RSS does not move; the query's own process stays under
  its address-space cap.
* ``EXPLAIN ANALYZE`` of anything but a plain read, and statements DuckDB's Python enum cannot name
  (``UPDATE EXTENSIONS``), are refused in one line.

Every test ends by checking that the kernel still runs Python and chat, and that its journal passes
the session invariants.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.support import (
    FIGURES,
    Call,
    chat,
    journal_of,
    launch,
    loopback_env,
    of_type,
    text_reply,
    tool_reply,
    turn_ends,
    verify_log,
)
from tests.support.kernel import Kernel
from tests.support.sse_server import SseServer

Rig = tuple[Kernel, SseServer, Path]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("tool-bounds")
    with SseServer() as srv, launch(tmp, env=loopback_env(srv, DSH_APPROVAL="auto")) as k:
        yield k, srv, tmp


def every_call_answered(body: dict[str, Any]) -> None:
    """Each ``tool_calls`` entry of a request's assistant messages has its ``tool`` message."""
    messages = body["messages"]
    called = [
        c["id"] for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or ()
    ]
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    missing = [c for c in called if c not in answered]
    assert not missing, f"tool calls without a result in the request: {missing}"


def healthy(k: Kernel, srv: SseServer) -> None:
    assert k.python("print(6 * 7)").strip() == "42"
    srv.script(text_reply("still-here"))
    ex = chat(k, "Are you still there?")
    assert ex.status == "ok", ex.content
    every_call_answered(srv.requests[-1].json)
    verify_log(k)


def run_tools(k: Kernel, srv: SseServer, *calls: Call, timeout: float = 120) -> dict[str, str]:
    """One turn in which the model makes ``calls``, then answers; the result text of each call, as
    the next request gave it to the model (every call of the request must be answered)."""
    srv.script(tool_reply(*calls), text_reply("done"))
    ex = chat(k, "Run these tools.", timeout=timeout)
    assert ex.status == "ok", ex.content
    requests = srv.requests
    assert len(requests) == 2, [r.json for r in requests[2:]]
    body = requests[-1].json
    every_call_answered(body)
    assert turn_ends(verify_log(k))[-1] == {"kind": "completed"}
    return {
        str(m["tool_call_id"]): str(m["content"])
        for m in body["messages"]
        if m.get("role") == "tool"
    }


def result_event(k: Kernel, call_id: str) -> dict[str, Any]:
    events = verify_log(k)
    results = of_type(events, "tool/result")
    (result,) = [e for e in results if e.data["message"]["source"]["callId"] == call_id]  # type: ignore[index]
    return dict(result.data)


def error_code(k: Kernel, call_id: str) -> str | None:
    error = result_event(k, call_id).get("error")
    return None if error is None else str(error["code"])


# --- item 3: arguments nested too deeply ---------------------------------------------------------


@pytest.mark.parametrize("depth", [2_000, 100_000])
def test_deeply_nested_arguments_get_invalid_args_and_every_call_a_result(
    rig: Rig, depth: int
) -> None:
    k, srv, _ = rig
    k.python("nest_probe = 7")
    deep = '{"code": ' + "[" * depth + "]" * depth + "}"
    got = run_tools(
        k,
        srv,
        Call("python", deep, f"deep{depth}"),
        Call("inspect", {"name": "nest_probe"}, f"after{depth}"),
    )
    text = got[f"deep{depth}"]
    assert text.startswith("Error: invalid arguments") and "nested deeper than 64" in text, text
    assert error_code(k, f"deep{depth}") == "INVALID_ARGS"
    assert "int" in got[f"after{depth}"]  # the sibling call in the same step ran normally
    healthy(k, srv)


# --- item 4: no tool text without a cap ----------------------------------------------------------


def test_a_five_megabyte_tool_name_is_cut_where_it_is_echoed(rig: Rig) -> None:
    k, srv, _ = rig
    assert "new session" in k.execute("%agent new").stdout  # no earlier test's history in the way
    name = "n" * 5_000_000
    got = run_tools(k, srv, Call(name, {}, "huge-name"))
    text = got["huge-name"]
    assert text.startswith("Error: unknown tool") and "python" in text, text[:300]
    assert len(text.encode()) < 2_000, len(text)
    assert "characters cut]" in text
    sizes = [len(r.body) for r in srv.requests]
    assert sizes[-1] < 200_000, sizes  # the request after the call
    srv.script(text_reply("later"))
    assert chat(k, "And later?").status == "ok"
    later = len(srv.requests[-1].body)
    assert later < 200_000, later  # every later request stays small
    FIGURES.append(f"tool bounds: a 5 MB tool name; the requests after it are {later:,} bytes")
    healthy(k, srv)


def test_ten_thousand_unexpected_arguments_give_one_short_line(rig: Rig, tmp_path: Path) -> None:
    k, srv, _ = rig
    marker = tmp_path / "ran"
    args: dict[str, Any] = {"code": f"open({str(marker)!r}, 'w').write('x')"}
    args.update({f"unexpected_{i}": i for i in range(10_000)})
    got = run_tools(k, srv, Call("python", args, "many-args"))
    text = got["many-args"]
    assert text.startswith("Error: invalid arguments"), text[:300]
    assert "10000 unexpected properties" in text and "unexpected_0" in text, text
    assert len(text.encode()) < 2_000, len(text)
    assert error_code(k, "many-args") == "INVALID_ARGS"
    assert not marker.exists(), "a call with invalid arguments ran"
    healthy(k, srv)


def test_a_ten_megabyte_sql_error_is_cut_with_a_marker(rig: Rig) -> None:
    k, srv, _ = rig
    healthy(k, srv)  # the journal exists from here on
    before = journal_of(k).stat().st_size
    got = run_tools(
        k, srv, Call("sql", {"sql": "SELECT error(repeat('x', 10000000))"}, "big-error")
    )
    text = got["big-error"]
    assert text.startswith("Error:") and "xxxx" in text, text[:300]
    assert len(text.encode()) < 20_000, len(text)
    assert "characters cut]" in text, text[-300:]
    grown = journal_of(k).stat().st_size - before
    assert grown < 1_000_000, f"the journal grew by {grown} bytes"
    healthy(k, srv)


# --- item 8: the sql tool is bounded -------------------------------------------------------------


def peak_rss_kb(k: Kernel) -> int:
    provisioner = k.km.provisioner
    assert provisioner is not None
    pid = provisioner.pid  # type: ignore[attr-defined]
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0])


CHILD_PEAK = "import resource\nprint(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"


@pytest.mark.timeout(300)
def test_a_one_gigabyte_sql_result_stays_bounded(rig: Rig) -> None:
    k, srv, _ = rig
    healthy(k, srv)
    before = peak_rss_kb(k)
    got = run_tools(
        k,
        srv,
        Call("sql", {"sql": "SELECT repeat('x', 1000000) AS s FROM range(1000)"}, "gig-rows"),
        Call("sql", {"sql": "SELECT repeat('x', 1000000000) AS s"}, "gig-cell"),
        Call("sql", {"sql": "SELECT count(*) AS n FROM events"}, "control"),
    )
    grown_mb = (peak_rss_kb(k) - before) // 1024
    for call in ("gig-rows", "gig-cell"):
        text = got[call]
        assert len(text.encode()) < 25_000, (call, len(text))
        code = error_code(k, call)
        if code is None:  # a result cut at the byte cap, saying so
            assert "byte cap" in text, (call, text[-400:])
        else:  # or a clear memory error
            assert code == "SQL_MEMORY", (call, code, text[:400])
            assert "memory" in text and "\n" not in text.strip(), (call, text[:400])
    assert "| n |" in got["control"]
    assert grown_mb < 200, f"the kernel's peak RSS grew by {grown_mb} MB"
    child_peak_mb = int(k.python(CHILD_PEAK).strip()) // 1024
    assert child_peak_mb < 1_600, f"the sql tool's process peaked at {child_peak_mb} MB"
    FIGURES.append(
        f"tool bounds: 1 GB sql results; kernel peak RSS +{grown_mb} MB, "
        f"the query process peaked at {child_peak_mb} MB"
    )
    healthy(k, srv)


# --- item 9: EXPLAIN ANALYZE and statement types the enum does not know --------------------------

REFUSED = {
    "explain-delete": "EXPLAIN ANALYZE DELETE FROM t_events",
    "explain-set": "EXPLAIN ANALYZE SET memory_limit = '100GB'",
    "explain-commented": "EXPLAIN /* hi */ ANALYZE (FORMAT json) INSERT INTO t_events SELECT * FROM t_events",
    "update-extensions": "UPDATE EXTENSIONS",
}


def test_explain_analyze_of_a_write_and_unnamed_statements_are_refused_in_one_line(
    rig: Rig,
) -> None:
    k, srv, _ = rig
    calls = [Call("sql", {"sql": sql}, name) for name, sql in REFUSED.items()]
    calls.append(
        Call("sql", {"sql": "EXPLAIN ANALYZE SELECT count(*) FROM events"}, "explain-read")
    )
    got = run_tools(k, srv, *calls)
    for name in REFUSED:
        text = got[name]
        assert text.startswith("Error: the sql tool") and "not allowed" in text, (name, text)
        assert "\n" not in text and "ValueError" not in text, (name, text)
        assert error_code(k, name) == "SQL_REFUSED", name
    assert "EXTENSIONS" in got["update-extensions"]
    assert error_code(k, "explain-read") is None, got["explain-read"]
    events = verify_log(k)
    assert json.dumps([e.data for e in of_type(events, "tool/result")]).count("ValueError") == 0
    healthy(k, srv)
