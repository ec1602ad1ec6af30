"""Re-running, editing or deleting a chat cell rewinds what the model sees (issue 33), through a
real ``dsh`` kernel: chat cells sent as notebook frontends send them (``metadata.cellId``, and
JupyterLab's ``deletedCells``), the model played by the loopback server, every assertion on the
request bodies the server received and on the log — never on a model's judgement."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.kernel.conftest import provider_env
from tests.support import scenarios as sc
from tests.support.frontend import Frontend, sql_rows
from tests.support.kernel import Execution, start_kernel
from tests.support.notebook_frontend import CellWithId, Notebook
from tests.support.sse_server import SseServer


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Frontend, SseServer, Path]]:
    tmp = tmp_path_factory.mktemp("rewind")
    with SseServer() as server:
        env = provider_env(server, tmp, DSH_APPROVAL="auto")
        with start_kernel(tmp, "dsh", env=env) as kernel:
            yield Frontend(kernel), server, tmp


def ids(n: int) -> list[str]:
    tag = uuid.uuid4().hex[:6]
    return [f"{tag}-c{i}" for i in range(1, n + 1)]


def ask(
    fe: Frontend,
    server: SseServer,
    cell: str,
    text: str,
    answer: str,
    *,
    deleted: Sequence[str] = (),
) -> Execution:
    server.script(sc.text(answer))
    ex = CellWithId(fe, text, cell, deleted=deleted).finish()
    assert ex.status == "ok", ex.content
    return ex


def sent(server: SseServer) -> str:
    """The messages of the last request, as the JSON text the server received."""
    body = server.requests[-1].json
    assert isinstance(body, dict)
    return json.dumps(body["messages"])


def session_of(fe: Frontend) -> dict[str, Any]:
    out = fe.python(
        "import json as _j, dataclasses as _d\n"
        "_s = get_ipython().kernel.host.agent.session\n"
        "print(_j.dumps({'id': _s.id, 'parent': _s.header.parent_session,"
        " 'kind': _s.header.parent_kind}))"
    )
    return json.loads(out)


def prompts(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["data"]
        for e in events
        if e["type"] == "user/message" and e["data"]["source"]["kind"] == "user"
    ]


def test_rerunning_cell_2_of_4_sends_turn_1_and_the_new_2(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    fe.run("%agent new")
    c = ids(4)
    for i, cell in enumerate(c, 1):
        ask(fe, server, cell, f"Question {i}: the code word is kiwi-{i}.", f"Answer {i} noted.")
    first = session_of(fe)
    assert fe.run("%agent approve never python").status == "ok"
    ask(fe, server, c[1], "Question 2, edited: the code word is mango-2.", "Answer 2b noted.")
    # The branch keeps the user's approval decisions.
    policy = fe.python("print(get_ipython().kernel.host.agent.approval_policy.tools.get('python'))")
    assert policy.strip() == "never"
    body = sent(server)
    assert "kiwi-1" in body and "Answer 1 noted." in body
    assert "mango-2" in body
    for gone in ("kiwi-2", "Answer 2 noted.", "kiwi-3", "Answer 3 noted.", "kiwi-4", "Answer 4"):
        assert gone not in body, gone
    branch = session_of(fe)
    assert branch["id"] != first["id"]
    assert (branch["parent"], branch["kind"]) == (first["id"], "rewind")
    # The prompt records its cell and the branch point.
    prompt = prompts(fe.events())[-1]
    extra = prompt["source"]
    assert extra["cellId"] == c[1]
    context = extra["context"]
    assert context["order"] == "run"
    assert context["branch"]["session"] == first["id"]
    assert context["branch"]["turn"] == 1 and context["branch"]["replaces"] == 2
    assert [(d["turn"], d["why"]) for d in context["branch"]["dropped"]] == [
        (2, "rerun"),
        (3, "below"),
        (4, "below"),
    ]
    # Running the next cell continues the new branch, replacing that cell's turn too.
    ask(fe, server, c[2], "Question 3 again: the code word is pear-3.", "Answer 3b noted.")
    body = sent(server)
    assert "kiwi-1" in body and "mango-2" in body and "Answer 2b noted." in body
    assert "pear-3" in body and "kiwi-3" not in body and "kiwi-4" not in body
    assert session_of(fe)["id"] == branch["id"]  # no second branch: c3 had no turn on this one
    # The branches are in SQL: the lineage, the cells, the turn the re-run replaced.
    [row] = sql_rows(
        fe,
        "SELECT parent_session, parent_kind, root_session, replaces_turn, turn, cell_id, "
        f"dropped_turns FROM branches WHERE session_id = '{branch['id']}'",
    )
    assert (row["parent_session"], row["parent_kind"], row["root_session"]) == (
        first["id"],
        "rewind",
        first["id"],
    )
    assert (row["replaces_turn"], row["turn"], row["cell_id"]) == (2, 2, c[1])
    assert list(row["dropped_turns"]) == [2, 3, 4]
    cells = sql_rows(
        fe, f"SELECT turn, cell_id FROM turns WHERE session_id = '{first['id']}' ORDER BY turn"
    )
    assert [(r["turn"], r["cell_id"]) for r in cells] == list(enumerate(c, 1))
    # %agent history shows the current branch.
    history = fe.run("%agent history").stdout
    assert f"a rewind of {first['id'][:8]}" in history
    rows = [line.split() for line in history.splitlines()[2:5]]
    assert [r[0] for r in rows] == ["1", "2", "3"]
    assert "copied" in history.splitlines()[2] and "kiwi-1" in history.splitlines()[2]
    assert "mango-2" in history.splitlines()[3] and "pear-3" in history.splitlines()[4]


def test_deleting_a_cell_takes_its_turn_out_of_the_next_request(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    fe.run("%agent new")
    c = ids(4)
    for i, cell in enumerate(c[:3], 1):
        ask(fe, server, cell, f"Fact {i}: the colour is teal-{i}.", f"Ok {i}.")
    before = session_of(fe)
    ask(fe, server, c[3], "Which colours do you know?", "Some.", deleted=[c[2]])
    body = sent(server)
    assert "teal-1" in body and "teal-2" in body
    assert "teal-3" not in body and "Ok 3." not in body
    assert "Turn 3 is left out" in body  # the note standing in for it
    assert session_of(fe)["id"] == before["id"]  # a deletion alone does not branch
    context = prompts(fe.events())[-1]["source"]["context"]
    assert context["left"] == [{"turn": 3, "why": "deleted", "cellId": c[2]}]
    rows = sql_rows(
        fe, f"SELECT turn, left_out FROM turns WHERE session_id = '{before['id']}' ORDER BY turn"
    )
    assert [(r["turn"], r["left_out"]) for r in rows] == [
        (1, None),
        (2, None),
        (3, "deleted"),
        (4, None),
    ]
    # The deleted cell's id arrives once; the next cell does not cut again.
    ask(fe, server, c[0] + "-next", "And now?", "Fine.")
    assert "context" not in prompts(fe.events())[-1]["source"]


def test_a_deletion_sent_with_a_python_cell_counts_at_the_next_chat_cell(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    fe.run("%agent new")
    c = ids(3)
    ask(fe, server, c[0], "Remember plum-1.", "Ok.")
    ask(fe, server, c[1], "Remember plum-2.", "Ok.")
    py = CellWithId(fe, "%%python\nx_rw = 1", c[2], deleted=[c[1]]).finish()
    assert py.status == "ok", py.content
    ask(fe, server, c[2] + "-chat", "What do you remember?", "plum.")
    body = sent(server)
    assert "plum-1" in body and "plum-2" not in body


def test_a_console_request_appends_whatever_it_repeats(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    fe.run("%agent new")
    for answer in ("First.", "Second."):
        server.script(sc.text(answer))
        ex = fe.run("Say the same thing: cherry-9.")
        assert ex.status == "ok", ex.content
    body = sent(server)
    assert body.count("cherry-9") == 2 and "First." in body
    assert session_of(fe)["parent"] is None


def test_rerun_tells_the_names_the_superseded_turns_made(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    fe.run("%agent new")
    c = ids(2)
    server.script(sc.python_call("rw_frame = [1, 2, 3]"), sc.text("Made rw_frame."))
    ex = CellWithId(fe, "Make rw_frame.", c[0]).finish()
    assert ex.status == "ok", ex.content
    ask(fe, server, c[1], "Now something else.", "Done.")
    ex = ask(fe, server, c[0], "Make rw_frame again, differently.", "Again.")
    body = sent(server)
    assert "rw_frame" in body and "were created or changed" in body  # the model is told
    context = prompts(fe.events())[-1]["source"]["context"]
    assert context["names"] == ["rw_frame"]
    # The turn's saved output carries the notice (drawn from the prompt's record).
    shown = json.dumps([m["content"] for m in ex.messages])
    assert "Not rolled back" in shown and "rw_frame" in shown
    assert fe.python("print(rw_frame)").strip() == "[1, 2, 3]"  # the namespace is as it was


def test_notebook_order_from_the_extension_leaves_cells_below_out(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    fe.run("%agent new")
    c = ids(3)
    cells = [{"id": i, "cell_type": "code", "source": "…"} for i in (c[0], c[2])]
    nb = Notebook(fe, cells)
    try:
        for cell, word in ((c[0], "fig-1"), (c[2], "fig-3")):
            server.script(sc.text(f"Noted {word}."))
            assert nb.run(f"Remember {word}.", cell_id=cell).status == "ok"
        first = session_of(fe)
        # A new cell inserted between them, then run: the turn of the cell below is left out.
        nb.cells.insert(1, {"id": c[1], "cell_type": "code", "source": "…"})
        server.script(sc.text("Noted fig-2."))
        assert nb.run("Remember fig-2.", cell_id=c[1]).status == "ok"
        body = sent(server)
        assert "fig-1" in body and "fig-2" in body and "fig-3" not in body
        context = prompts(fe.events())[-1]["source"]["context"]
        assert context["order"] == "notebook"
        assert context["branch"]["session"] == first["id"]
        assert "replaces" not in context["branch"]
        assert context["branch"]["dropped"] == [{"turn": 2, "why": "below", "cellId": c[2]}]
        assert all(r["request"] == "read" for r in nb.requests)
    finally:
        nb.close()


def test_rewind_off_keeps_strict_appending(tmp_path: Path) -> None:
    with SseServer() as server:
        env = provider_env(server, tmp_path, DSH_REWIND="off")
        with start_kernel(tmp_path, "dsh", env=env) as kernel:
            fe = Frontend(kernel)
            ask(fe, server, "k1", "Remember lime-1.", "Ok 1.")
            ask(fe, server, "k2", "Remember lime-2.", "Ok 2.")
            ask(fe, server, "k1", "Remember lime-1 again.", "Ok 3.")
            body = sent(server)
            assert "lime-2" in body and "Ok 2." in body
            assert session_of(fe)["parent"] is None
            # The cell is still recorded on the prompt.
            assert prompts(fe.events())[-1]["source"]["cellId"] == "k1"


def test_an_interrupt_while_the_notebook_is_asked_for_its_order_keeps_the_kernel(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    fe.run("%agent new")
    [cell_id] = ids(1)
    nb = Notebook(fe, [{"id": cell_id, "cell_type": "code", "source": "…"}])
    nb.answer = False  # the frontend never answers the read
    try:
        server.script(sc.text("Still here."))
        cell = CellWithId(fe, "Are you there?", cell_id)
        asked = lambda: any(  # noqa: E731
            m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == nb.comm_id
            for m in cell.messages
        )
        cell.pump(asked, what="the kernel asking the notebook for its order")
        fe.kernel.km.interrupt_kernel()
        ex = cell.finish()
        assert ex.status == "ok", ex.content  # the turn went on, by the order first run
        assert "Are you there?" in sent(server)
        assert fe.python("print('alive')").strip() == "alive"
    finally:
        nb.close()


def test_a_deleted_cell_stays_out_of_a_later_branch(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    fe.run("%agent new")
    c = ids(4)
    for i, cell in enumerate(c[:3], 1):
        ask(fe, server, cell, f"Note {i}: secret-{i}.", f"Ok {i}.")
    ask(fe, server, c[3], "Go on.", "Going.", deleted=[c[0]])
    assert "secret-1" not in sent(server)
    # Re-running the third cell branches before its turn: the note cutting turn 1 came later in
    # the log, so the branch cuts it again.
    ask(fe, server, c[2], "Note 3 again: secret-3b.", "Ok 3b.")
    body = sent(server)
    assert "secret-1" not in body and "Turn 1 is left out" in body
    assert "secret-2" in body and "secret-3b" in body


def test_a_cell_cut_and_pasted_is_not_taken_for_deleted(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    fe.run("%agent new")
    c = ids(3)
    nb = Notebook(fe, [{"id": i, "cell_type": "code", "source": "…"} for i in c])
    try:
        for cell, word in ((c[0], "fig-1"), (c[1], "fig-2")):
            server.script(sc.text(f"Noted {word}."))
            assert nb.run(f"Remember {word}.", cell_id=cell).status == "ok"
        # JupyterLab reports a cut (then pasted) cell as deleted; the notebook still holds it.
        server.script(sc.text("Both."))
        assert nb.run("Which figs?", cell_id=c[2], deleted=[c[0]]).status == "ok"
        body = sent(server)
        assert "fig-1" in body and "left out" not in body
    finally:
        nb.close()


def test_a_restored_cell_run_again_re_asks_from_its_old_place(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    fe.run("%agent new")
    c = ids(4)
    for i, cell in enumerate(c[:3], 1):
        ask(fe, server, cell, f"Point {i}: pin-{i}.", f"Ok {i}.")
    ask(fe, server, c[3], "Next.", "Ok 4.", deleted=[c[1]])
    ask(fe, server, c[1], "Point 2 restored: pin-2b.", "Ok 2b.")  # undone, and run again
    body = sent(server)
    assert "pin-1" in body and "pin-2b" in body
    assert "pin-3" not in body and "Next." not in body


def test_names_of_an_earlier_branch_are_still_told_after_another_rewind(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    fe.run("%agent new")
    c = ids(3)
    ask(fe, server, c[0], "One.", "Ok 1.")
    ask(fe, server, c[1], "Two.", "Ok 2.")
    server.script(sc.python_call("rw_kept = 7"), sc.text("Made rw_kept."))
    assert CellWithId(fe, "Make rw_kept.", c[2]).finish().status == "ok"
    ask(fe, server, c[1], "Two again.", "Ok 2b.")
    assert "rw_kept" in sent(server)
    ask(fe, server, c[0], "One again.", "Ok 1b.")
    assert "rw_kept" in sent(server)  # still in the namespace, still said


def test_a_cell_id_that_is_not_a_string_is_no_cell_id(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    fe.run("%agent new")
    for bad in (["a", "b"], {"x": 1}, 7):
        server.script(sc.text("Fine."))
        ex = CellWithId(fe, "Hello.", bad).finish()  # type: ignore[arg-type]
        assert ex.status == "ok", ex.content
    long_id = "vscode-notebook-cell:/" + "x" * 1000 + "#W1"
    ask(fe, server, long_id, "Remember pear-1.", "Ok.")
    ask(fe, server, long_id, "Remember pear-2.", "Ok.")  # the same long id: a re-run
    assert "pear-1" not in sent(server)
    assert prompts(fe.events())[-1]["source"]["cellId"].startswith("sha256:")
