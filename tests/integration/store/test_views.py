"""The public views over sessions recorded by a real Agent (only the provider is scripted)."""

from __future__ import annotations

import json

from dsh_kernel import tool
from dsh_kernel.store.ingest.incremental import set_price
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query
from dsh_kernel.testing import text_response, tool_call_response
from dsh_kernel.tools.approval import ApprovalPolicy, ApprovalRequest

from .conftest import RICH_PROMPTS, chat, make_agent, record_rich_session, usage


def rows(store: Store, sql: str, params: object = None) -> list[tuple[object, ...]]:
    return list(run_query(store, sql, params).rows)  # type: ignore[arg-type]


async def test_sessions_turns_and_messages(store: Store) -> None:
    agent, writer = await record_rich_session(store)
    sid = agent.session.id
    [(title, turns, events, cwd)] = rows(store, "SELECT title, turns, events, cwd FROM sessions")
    assert (
        title == RICH_PROMPTS[0]
        and turns == 2
        and events == len(agent.session)
        and cwd == agent.session.header.cwd
    )
    assert rows(
        store,
        "SELECT turn, end_reason, prompt, steps, requests, tool_calls, tool_errors FROM turns ORDER BY turn",
    ) == [
        (1, "completed", RICH_PROMPTS[0], 5, 5, 4, 2),
        (2, "completed", RICH_PROMPTS[1], 1, 1, 0, 0),
    ]
    transcript = rows(
        store,
        "SELECT role, source, text, reasoning FROM messages WHERE session_id = ? ORDER BY seq",
        [sid],
    )
    assert transcript[0] == ("user", "user", RICH_PROMPTS[0], None)
    assert ("assistant", "model", "The sum is 5.", "2 plus 3") in transcript
    assert ("user", "tool", "Error: no such key: nope", None) in transcript
    assert transcript[-1] == ("assistant", "model", "You're welcome, goodbye.", None)
    # every message event of the log is there, in order
    surface = [e.seq for e in agent.session.events if e.surface_op is not None]
    assert [r[0] for r in rows(store, "SELECT seq FROM messages ORDER BY seq")] == surface
    writer.close()


async def test_tool_calls_code_runs_and_errors(store: Store) -> None:
    agent, writer = await record_rich_session(store)
    calls = rows(
        store, "SELECT call_id, name, status, error_code, result FROM tool_calls ORDER BY call_seq"
    )
    assert calls == [
        ("c-add", "add", "done", None, "5"),
        ("c-look", "lookup", "failed", "NOT_FOUND", "Error: no such key: nope"),
        ("c-py1", "python", "done", None, '{"stdout":"ran 6 chars\\n","names":["df"]}'),
        ("c-py2", "python", "failed", "CODE_FAILED", "Error: ZeroDivisionError: division by zero"),
    ]
    assert rows(
        store, "SELECT count(*) FROM tool_calls WHERE duration_ms IS NULL OR duration_ms < 0"
    ) == [(0,)]
    runs = rows(
        store,
        "SELECT call_id, code, stdout, names_added, status FROM code_runs ORDER BY call_seq",
    )
    assert runs[0] == ("c-py1", "df = 1", "ran 6 chars\n", ["df"], "done")
    assert runs[1] == (
        "c-py2",
        "raise 1/0",
        None,
        None,
        "failed",
    )  # no meta: the code comes from the arguments
    errors = rows(store, "SELECT source, code, tool_name FROM errors ORDER BY seq")
    assert errors == [
        ("tool", "NOT_FOUND", "lookup"),
        ("tool", "CODE_FAILED", "python"),
        ("request", "RATE_LIMIT", None),
    ]
    del agent
    writer.close()


async def test_requests_and_usage_with_retries_and_cost(store: Store) -> None:
    agent, writer = await record_rich_session(store)
    reqs = rows(
        store,
        "SELECT request, turn, step, attempt, finish, error_code, provider, model, message_count, tool_count FROM requests ORDER BY request",
    )
    assert [r[:6] for r in reqs] == [
        (1, 1, 1, 1, "tool-calls", None),
        (2, 1, 2, 1, "tool-calls", None),
        (3, 1, 3, 1, "tool-calls", None),
        (4, 1, 4, 1, "tool-calls", None),
        (5, 1, 5, 1, "error", "RATE_LIMIT"),
        (6, 1, 5, 2, "stop", None),
        (7, 2, 1, 1, "stop", None),
    ]
    assert {(r[6], r[7], r[9]) for r in reqs} == {("scripted", "m1", 3)}
    # history sent grows: 1 prompt; then +assistant +result per step; the retry sends the same
    assert [r[8] for r in reqs] == [1, 3, 5, 7, 9, 9, 11]
    assert [m.messages.__len__() for m in agent.provider.requests] == [1, 3, 5, 7, 9, 9, 11]  # type: ignore[attr-defined]
    # no price yet: cost unknown
    assert rows(store, "SELECT count(*), count(cost) FROM usage") == [(6, 0)]
    set_price(
        store,
        provider="scripted",
        model="m1",
        input_per_mtok=1.0,
        output_per_mtok=4.0,
        cached_input_per_mtok=0.1,
    )
    [(inp, cached, out, cost)] = rows(
        store,
        "SELECT sum(input_tokens), sum(cached_input_tokens), sum(output_tokens), sum(cost) FROM usage",
    )
    assert (inp, cached, out) == (1080, 770, 90)
    assert abs(float(str(cost)) - (1080 * 1.0 + 770 * 0.1 + 90 * 4.0) / 1e6) < 1e-12
    [(total, scost, complete)] = rows(
        store, "SELECT total_tokens, cost, cost_complete FROM sessions"
    )
    assert (
        total == 1080 + 770 + 90
        and abs(float(str(scost)) - float(str(cost))) < 1e-12
        and complete is True
    )
    writer.close()


async def test_the_request_header_behind_each_request(store: Store) -> None:
    agent, writer = await record_rich_session(store, system="You are terse.")
    [(header_json, system_hash, n)] = rows(
        store,
        "SELECT e.data, r.system_hash, count(*) OVER () FROM requests r "
        "JOIN events e ON e.session_id = r.session_id AND e.seq = r.header_seq WHERE r.request = 7",
    )
    header = json.loads(str(header_json))["header"]
    assert header["config"] == {"provider": "scripted", "model": "m1"}
    assert "You are terse." in header["system"]
    assert [t["name"] for t in header["tools"]] == ["add", "lookup", "python"]
    assert n == 1 and len(str(system_hash)) == 32
    del agent
    writer.close()


class ManualClock:
    """Epoch milliseconds that move only when a test says so (the clock is the faked edge)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


async def test_approvals(store: Store) -> None:
    asked: list[ApprovalRequest] = []
    clock = ManualClock()

    async def answer(rid: object, request: ApprovalRequest) -> object:
        asked.append(request)
        clock.now += 5_000  # the user takes five seconds to answer
        return "allowed-once" if len(asked) == 1 else "rejected"

    @tool(name="write_note")
    def slow_note(text: str) -> str:
        """Write a note (changes state, so it asks first); takes a quarter of a second."""
        clock.now += 250
        return f"noted: {text}"

    agent, _, writer = make_agent(
        store,
        [
            tool_call_response("write_note", {"text": "a"}, call_id="n1", usage=usage()),
            tool_call_response("write_note", {"text": "b"}, call_id="n2", usage=usage()),
            text_response("done", usage=usage()),
        ],
        answerer=answer,
        extra_tools=[slow_note],
        approval=ApprovalPolicy("ask"),
        clock=clock,
    )
    await chat(agent, "take notes")
    got = rows(
        store, "SELECT call_id, tool_name, outcome, wait_ms FROM approvals ORDER BY asked_seq"
    )
    assert got == [
        ("n1", "write_note", "allowed-once", 5_000),
        ("n2", "write_note", "rejected", 5_000),
    ]
    # The log carries the body's own time; a call whose body never ran carries none.
    results = [e.data for e in agent.session.events if e.type == "tool/result"]
    assert [r.get("durationMs") for r in results] == [250, None]
    # duration_ms is that time, not the call-to-result span that includes the wait for the click;
    # without it (the denied call) the span is all there is.
    assert rows(
        store,
        "SELECT call_id, status, duration_ms, epoch_ms(ended_at) - epoch_ms(started_at) "
        "FROM tool_calls ORDER BY call_seq",
    ) == [("n1", "done", 250, 5_250), ("n2", "denied", 5_000, 5_000)]
    writer.close()


async def test_sessions_show_who_a_session_is_for_and_its_ai_policy(store: Store) -> None:
    # Issue 17: the header's user and aiPolicy reach sessions."user" and sessions.ai_policy; a
    # header without them (an older journal) shows NULLs.
    from dsh_kernel.session.events import SessionHeader
    from dsh_kernel.session.log import Session

    header = SessionHeader(
        id="s-course", created_at=1_700_000_000_000, user="ada", ai_policy="explain"
    )
    agent, _, writer = make_agent(store, [text_response("Hi.")], session=Session(header=header))
    plain, _, plain_writer = make_agent(store, [text_response("Hi.")])
    await chat(agent, "Hello?")
    await chat(plain, "Hello?")
    writer.close()
    plain_writer.close()
    got = rows(
        store, 'SELECT session_id, "user", ai_policy FROM sessions ORDER BY "user" NULLS LAST'
    )
    assert got == [("s-course", "ada", "explain"), (plain.session.id, None, None)]
