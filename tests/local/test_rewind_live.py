"""Re-running an earlier chat cell re-asks from there, against a real model server (issue 33).

Qwen2.5-Coder-0.5B on a real llama-cpp-python server, through a real kernel: three chat cells sent
as JupyterLab sends them (``metadata.cellId``, ``tests/support/notebook_frontend.py``) — A states a
fact, B another, C asks about them — then B is run again, edited. The kernel forks a new session
before B's turn (``parent_kind`` ``rewind``), so the request the server receives for the edited B
holds A's turn and the new message, and neither B's superseded fact nor C's question.

The server's access log has no bodies, so the kernel talks to the server through a ``WireTap``
(``tests/local/tap.py``) that passes every byte on unchanged and keeps the requests: the assertions
are on those bodies, the session header and the ``%%sql`` views — never on what the model answered.
"""

from __future__ import annotations

import json
import uuid

import pytest

from tests.local.conftest import KernelFactory
from tests.local.server import LlamaServer
from tests.local.tap import TappedRequest, WireTap
from tests.support.frontend import Frontend, sql_rows
from tests.support.kernel import Execution
from tests.support.notebook_frontend import CellWithId

pytestmark = [pytest.mark.local, pytest.mark.timeout(3000)]

CAT, DOG, NEW_DOG = "Bartholomew", "Zanzibar", "Quintus"
CELL_A = f"My cat is called {CAT}. Reply with one word: noted."
CELL_B = f"My dog is called {DOG}. Reply with one word: noted."
QUESTION = "What are my two pets called?"
CELL_C = f"{QUESTION} Reply in one short sentence."
CELL_B_EDITED = f"My dog is called {NEW_DOG}. Reply with one word: noted."
CELL_TIMEOUT_S = 900


def run(fe: Frontend, code: str, cell_id: str) -> Execution:
    ex = CellWithId(fe, code, cell_id).finish(timeout=CELL_TIMEOUT_S)
    assert ex.status == "ok", (code, ex.content)
    return ex


def messages_of(requests: list[TappedRequest]) -> list[str]:
    """Each request's ``messages``, as the JSON text the server received."""
    assert requests, "the cell sent the server a chat request"
    return [json.dumps(r.json()["messages"], ensure_ascii=False) for r in requests]


def header(fe: Frontend) -> dict[str, str | None]:
    out = fe.python(
        "import json as _j\n"
        "_s = get_ipython().kernel.host.agent.session\n"
        "print(_j.dumps({'id': _s.id, 'parent': _s.header.parent_session,"
        " 'kind': _s.header.parent_kind}))"
    )
    return json.loads(out)


def test_rerunning_an_edited_cell_sends_the_turns_above_and_the_new_message(
    kernel_at: KernelFactory, qwen: LlamaServer
) -> None:
    with WireTap(qwen.port) as tap, kernel_at(qwen, DSH_BASE_URL=tap.base_url) as k:
        fe = Frontend(k, render=False)
        tag = uuid.uuid4().hex[:6]
        a, b, c = (f"{tag}-{name}" for name in "abc")
        run(fe, CELL_A, a)
        run(fe, CELL_B, b)
        before_c = len(tap.chat_requests())
        run(fe, CELL_C, c)
        # Before the rewind the history is sent as it stands: C's request carries both facts.
        for body in messages_of(tap.chat_requests()[before_c:]):
            assert CAT in body and DOG in body and QUESTION in body, body
        first = header(fe)
        assert first["kind"] is None, first

        before_rerun = len(tap.chat_requests())
        run(fe, CELL_B_EDITED, b)
        rerun = tap.chat_requests()[before_rerun:]
        # Every request of the re-asked turn holds A's fact and the new one; the superseded turn's
        # fact and the question of the cell below are gone, in whatever case an answer wrote them.
        for body in messages_of(rerun):
            assert CAT in body, body
            assert NEW_DOG in body, body
            assert DOG.lower() not in body.lower(), body
            assert QUESTION.lower() not in body.lower(), body

        branch = header(fe)
        assert branch["id"] != first["id"]
        assert (branch["parent"], branch["kind"]) == (first["id"], "rewind"), branch
        [row] = sql_rows(
            fe, f"SELECT parent_session FROM sessions WHERE session_id = '{branch['id']}'"
        )
        assert row["parent_session"] == first["id"], row
        turns = sql_rows(
            fe,
            "SELECT turn, seeded, requests, prompt FROM turns "
            f"WHERE session_id = '{branch['id']}' ORDER BY turn",
        )
        # The branch is A's turn (copied from the parent) and the re-asked B, nothing else; the
        # server saw exactly the requests the log counts for it.
        assert [(t["turn"], t["seeded"]) for t in turns] == [(1, True), (2, False)], turns
        assert CAT in turns[0]["prompt"] and NEW_DOG in turns[1]["prompt"], turns
        assert len(rerun) == turns[1]["requests"], (len(rerun), turns)
