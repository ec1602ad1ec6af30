"""The store's SQL says exactly what happened, through a real kernel and the loopback model server
(issue 12, items 6, 9 and 10):

* ``code_runs`` answers "which run created x?": the names each ``python`` run added, changed and
  removed are list columns;
* a server that sends no usage (llama.cpp) gives *estimated* counts (the token meter's), never 0, and
  the cost is incomplete; a call cut before its first chunk still has its ``requests`` row;
* a fork's copied rows are marked ``seeded`` in every view, so counting ``NOT seeded`` counts each
  thing once.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from typing import Any

import pytest

from dsh_kernel.store.journal import read_session
from dsh_kernel.store.layout import Store
from tests.kernel.conftest import provider_env
from tests.reliability.support import Driver, python_call, text_reply, tool_reply
from tests.support.kernel import Kernel, start_kernel
from tests.support.sse_server import SseServer, sse_reply
from tests.support.wire_transcripts import chat_chunk, sse

MODEL = "loopback-model"


@pytest.fixture(scope="module")
def rig(
    server: SseServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Kernel, Store]]:
    tmp = tmp_path_factory.mktemp("store-precision")
    env = provider_env(server, tmp, DSH_APPROVAL="auto", DSH_MODEL=MODEL)
    with start_kernel(tmp, "dsh", env=env) as k:
        yield k, Store.at(tmp / "store")


def sql(k: Kernel, query: str) -> list[dict[str, Any]]:
    ex = k.execute(f"%%sql _rows <<\n{query}")
    assert ex.status == "ok", ex.content
    return json.loads(k.python("print(_rows.to_json(orient='records'))"))


def chat(k: Kernel, text: str) -> None:
    ex = k.execute(text)
    assert ex.status == "ok", ex.content


def current(k: Kernel) -> tuple[str, int]:
    """The kernel's session id and its latest turn number."""
    out = k.python(
        "_s = get_ipython().kernel.host.agent.session\n"
        "print(_s.id, max([e.data['turn'] for e in _s.events if e.type == 'turn/start'] or [0]))"
    ).split()
    return out[0], int(out[1])


def test_code_runs_say_which_run_added_changed_and_removed_each_name(
    rig: tuple[Kernel, Store], server: SseServer
) -> None:
    k, _ = rig
    server.script(
        tool_reply(python_call("lin_a = 1\nlin_b = [1]\nlin_gone = 0", "lin-1")),
        tool_reply(python_call("lin_a = 2\nlin_b.append(2)\ndel lin_gone\nlin_c = 3", "lin-2")),
        text_reply("Done."),
    )
    chat(k, "Set up some variables, then change them.")
    sid, _ = current(k)
    runs = sql(
        k,
        "SELECT call_id, names_added, names_changed, names_removed FROM code_runs "
        f"WHERE session_id = '{sid}' ORDER BY call_seq",
    )
    assert runs == [
        {
            "call_id": "lin-1",
            "names_added": ["lin_a", "lin_b", "lin_gone"],
            "names_changed": [],
            "names_removed": [],
        },
        {
            "call_id": "lin-2",
            "names_added": ["lin_c"],
            "names_changed": ["lin_a", "lin_b"],
            "names_removed": ["lin_gone"],
        },
    ]
    creator = sql(k, "SELECT call_id FROM code_runs WHERE list_contains(names_added, 'lin_c')")
    assert creator == [{"call_id": "lin-2"}]
    killer = sql(k, "SELECT call_id FROM code_runs WHERE list_contains(names_removed, 'lin_gone')")
    assert killer == [{"call_id": "lin-2"}]


ANSWER = "Hello from a server that never reports token usage."


def no_usage_reply(text: str) -> Any:
    """What llama.cpp's server streams: content and a finish, no usage chunk."""
    return sse_reply(
        sse(
            chat_chunk({"role": "assistant", "content": ""}),
            chat_chunk({"content": text}),
            chat_chunk({}, finish_reason="stop"),
            "[DONE]",
        )
    )


def test_usage_the_server_did_not_send_is_estimated_and_the_cost_incomplete(
    rig: tuple[Kernel, Store], server: SseServer
) -> None:
    k, _ = rig
    k.python(
        "from dsh_kernel.store import Store, set_price\n"
        f"set_price(Store.default(), provider='openai-compatible', model={MODEL!r}, "
        "input_per_mtok=1.0, output_per_mtok=2.0)"
    )
    k.execute("%agent new")
    server.script(no_usage_reply(ANSWER))
    chat(k, "Say hello.")
    sid, turn = current(k)
    [row] = sql(
        k,
        "SELECT input_tokens, output_tokens, estimated, cost FROM usage "
        f"WHERE session_id = '{sid}' AND turn = {turn}",
    )
    meter_answer = math.ceil(len(ANSWER) / 4) + 4 + 4  # one text block + the message
    assert row["estimated"] is True and row["cost"] is None
    assert row["output_tokens"] == meter_answer
    # the same estimate as the session's own accounting (%agent cost), from the same log
    py = k.python(
        "from dsh_kernel.session.usage import usage_totals\n"
        "_u = usage_totals(get_ipython().kernel.host.agent.session.events)\n"
        "print(_u.input_tokens, _u.output_tokens, _u.estimated_requests)"
    ).split()
    assert [int(x) for x in py] == [row["input_tokens"], meter_answer, 1]
    assert row["input_tokens"] > math.ceil(len("Say hello.") / 4)
    [ses] = sql(
        k, f"SELECT total_tokens, cost_complete, estimated FROM sessions WHERE session_id = '{sid}'"
    )
    assert ses == {
        "total_tokens": row["input_tokens"] + meter_answer,
        "cost_complete": False,
        "estimated": True,
    }
    out = k.execute("%agent cost").stdout
    assert "estimated" in out and "$" not in out


def test_a_call_cut_before_its_first_chunk_still_has_its_request_row(
    rig: tuple[Kernel, Store], server: SseServer
) -> None:
    k, _ = rig
    server.script(sse_reply([], close="hang"))  # the headers, then nothing
    before = len(server.requests)
    driver = Driver(k, ["Answer slowly."], allow_errors=True).start()
    for _ in range(600):
        if len(server.requests) > before:
            break
        time.sleep(0.05)
    assert len(server.requests) > before, "the request never reached the server"
    k.km.interrupt_kernel()
    driver.join(60)
    sid, turn = current(k)
    rows = sql(
        k,
        "SELECT attempt, chunks, finish, input_tokens FROM requests "
        f"WHERE session_id = '{sid}' AND turn = {turn}",
    )
    assert rows == [{"attempt": 1, "chunks": 0, "finish": None, "input_tokens": None}]
    [t] = sql(k, f"SELECT end_reason FROM turns WHERE session_id = '{sid}' AND turn = {turn}")
    assert t == {"end_reason": "aborted"}


def own_counts(store: Store) -> dict[str, int]:
    """From the journals themselves: events, tool calls and messages, each counted once (a fork's
    copied prefix left out)."""
    out = {"events": 0, "tool_calls": 0, "messages": 0}
    for path in store.iter_journals():
        loaded = read_session(path)
        seed = loaded.header.seed_length or 0
        own = [e for e in loaded.events if e.seq >= seed]
        out["events"] += len(own)
        out["tool_calls"] += sum(1 for e in own if e.type == "tool/call")
        out["messages"] += sum(
            1
            for e in own
            if e.type in ("user/message", "assistant/message", "tool/result")
            and e.surface_op is not None
        )
    return out


def test_a_forks_copied_rows_are_seeded_in_every_view(
    rig: tuple[Kernel, Store], server: SseServer
) -> None:
    k, store = rig
    k.execute("%agent new")
    server.script(
        tool_reply(python_call("fork_x = 1 / 0", "fork-call")),
        text_reply("It failed."),
    )
    chat(k, "Divide by zero.")
    parent, turn = current(k)
    out = k.execute(f"%agent fork {turn}").stdout
    assert "forked session" in out, out
    server.script(text_reply("Forked and fine."))
    chat(k, "Carry on in the fork.")
    child, _ = current(k)
    assert child != parent
    copied = sql(
        k,
        "SELECT (SELECT count(*) FROM tool_calls WHERE call_id = 'fork-call') AS calls, "
        "(SELECT count(*) FROM tool_calls WHERE call_id = 'fork-call' AND NOT seeded) AS own, "
        "(SELECT count(*) FROM code_runs WHERE call_id = 'fork-call' AND NOT seeded) AS runs, "
        "(SELECT count(*) FROM errors WHERE source = 'tool' AND message ILIKE '%ZeroDivision%' "
        " AND NOT seeded) AS failures",
    )
    assert copied == [{"calls": 2, "own": 1, "runs": 1, "failures": 1}]
    k.python("get_ipython().kernel.host.flush()")
    truth = own_counts(store)
    [counts] = sql(
        k,
        "SELECT (SELECT count(*) FROM events WHERE NOT seeded) AS events, "
        "(SELECT count(*) FROM tool_calls WHERE NOT seeded) AS tool_calls, "
        "(SELECT count(*) FROM messages WHERE NOT seeded) AS messages",
    )
    assert counts == truth
    # in the fork, exactly its seed is seeded, in every view that copies rows
    [seed] = sql(k, f"SELECT seed_length FROM sessions WHERE session_id = '{child}'")
    views = sql(
        k,
        "SELECT 'events' AS v, count(*) FILTER (WHERE seeded) AS n, "
        f"count(*) FILTER (WHERE seeded AND seq >= {seed['seed_length']}) AS wrong "
        f"FROM events WHERE session_id = '{child}' "
        "UNION ALL SELECT 'messages', count(*) FILTER (WHERE seeded), 0 FROM messages "
        f"WHERE session_id = '{child}' "
        "UNION ALL SELECT 'turns', count(*) FILTER (WHERE seeded), 0 FROM turns "
        f"WHERE session_id = '{child}' "
        "UNION ALL SELECT 'requests', count(*) FILTER (WHERE seeded), 0 FROM requests "
        f"WHERE session_id = '{child}' "
        "UNION ALL SELECT 'code_runs', count(*) FILTER (WHERE seeded), 0 FROM code_runs "
        f"WHERE session_id = '{child}' "
        "UNION ALL SELECT 'errors', count(*) FILTER (WHERE seeded), 0 FROM errors "
        f"WHERE session_id = '{child}' ORDER BY 1",
    )
    got = {r["v"]: (r["n"], r["wrong"]) for r in views}
    assert got["events"] == (seed["seed_length"], 0)
    assert all(n > 0 for n, _ in got.values()), got
    # the parent's rows are never seeded
    [p] = sql(
        k,
        "SELECT bool_or(seeded) AS any FROM (SELECT seeded FROM events WHERE session_id = "
        f"'{parent}' UNION ALL SELECT seeded FROM tool_calls WHERE session_id = '{parent}')",
    )
    assert p == {"any": False}
