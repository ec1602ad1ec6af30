"""The notebook tools through a real kernel (issue 18): ``notebook_read`` and ``notebook_insert``.

The test acts as the frontend extension: it opens the ``dsh.notebook`` comm from the same
``jupyter_client`` session that sends the chat cell's ``execute_request`` (a real client over the
real protocol, as ``docs/dev/notebook-comm.md`` says) and answers the kernel's ``read`` and
``insert`` requests from a notebook it keeps. The model is the loopback server. Covered: read,
insert (event and ``notebook_edits`` row), the anchor gone, two comms of one session (ambiguous), a
frontend that does not answer (timeout), no extension (the ``set_next_input`` payload in the reply,
and the saved file read with its stale note), the ``explain``/``off`` policies, approval under
``ask``, and the redactor over what is read.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from jupyter_client.session import Session

from tests.kernel.conftest import provider_env
from tests.support import scenarios as sc
from tests.support.frontend import Frontend
from tests.support.kernel import Execution, start_kernel
from tests.support.notebook_frontend import CellWithId, Notebook
from tests.support.sse_server import SseServer

SECRET = "sk-notebook-secret-0123456789abcdef"


def cells() -> list[dict[str, Any]]:
    return [
        {"id": "c1", "cell_type": "markdown", "source": "# Sales in March"},
        {"id": "c2", "cell_type": "code", "source": f"%%python\nkey = '{SECRET}'"},
        {"id": "c3", "cell_type": "code", "source": "%%python\ndf = load()  # not run yet"},
    ]


def tool_texts(server: SseServer, n: int) -> list[str]:
    """The tool results request ``n`` carries after its last assistant message."""
    messages = server.requests[n].json["messages"]
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    return [str(m["content"]) for m in messages[last + 1 :] if m["role"] == "tool"]


def req_sources(nb: Notebook) -> list[str]:
    """The sources of the cells the kernel asked the frontend to insert."""
    return [c["source"] for r in nb.requests if r["request"] == "insert" for c in r["cells"]]


def offered(server: SseServer) -> list[str]:
    return [t["function"]["name"] for t in server.requests[0].json.get("tools", [])]


def turn_events(fe: Frontend) -> list[dict[str, Any]]:
    events = fe.events()
    start = max(i for i, e in enumerate(events) if e["type"] == "turn/start")
    return events[start:]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Frontend, SseServer, Path]]:
    tmp = tmp_path_factory.mktemp("notebook-tools")
    saved = tmp / "saved.ipynb"
    saved.write_text(
        json.dumps(
            {
                "nbformat": 4,
                "nbformat_minor": 5,
                "metadata": {},
                "cells": [
                    {"id": "s1", "cell_type": "markdown", "metadata": {}, "source": ["# Saved"]},
                    {
                        "id": "s2",
                        "cell_type": "code",
                        "metadata": {},
                        "execution_count": 3,
                        "source": [f"token = '{SECRET}'"],
                        "outputs": [
                            {
                                "output_type": "execute_result",
                                "execution_count": 3,
                                "data": {"text/plain": "42"},
                                "metadata": {},
                            }
                        ],
                    },
                ],
            }
        ),
        encoding="utf-8",
    )
    with SseServer() as server:
        env = provider_env(server, tmp, DSH_API_KEY=SECRET, JPY_SESSION_NAME=str(saved))
        with start_kernel(tmp, "dsh", env=env) as kernel:
            fe = Frontend(kernel)
            assert fe.run("%agent approve auto").status == "ok"
            yield fe, server, tmp


def test_read_returns_the_live_cells_redacted(rig: tuple[Frontend, SseServer, Path]) -> None:
    fe, server, _ = rig
    nb = Notebook(fe, cells())
    try:
        server.script(sc.tool_calls(("notebook_read", {})), sc.text("Read it."))
        ex = nb.run("What is in my notebook?")
        assert ex.status == "ok", ex.content
        assert [r["request"] for r in nb.requests] == ["read"]
        assert {"notebook_read", "notebook_insert"} <= set(offered(server))
        [text] = tool_texts(server, 1)
        assert "# Sales in March" in text and "df = load()  # not run yet" in text
        assert "id c3" in text and "live from the notebook frontend" in text
        assert SECRET not in text and "[redacted]" in text
    finally:
        nb.close()


def test_insert_adds_python_cells_logs_them_and_the_view_has_a_row(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, tmp = rig
    nb = Notebook(fe, cells())
    try:
        new = [
            {"cell_type": "code", "source": "df.describe()"},
            {"cell_type": "markdown", "source": "The mean is shown above."},
        ]
        server.script(
            sc.tool_calls(("notebook_insert", {"cells": new, "after": "c3"})), sc.text("Done.")
        )
        ex = nb.run("Add a summary cell.")
        assert ex.status == "ok", ex.content
        assert ex.content["payload"] == []  # the extension inserted: no set_next_input
        [req] = nb.requests
        assert req["request"] == "insert" and req["after"] == "c3"
        assert [c["source"] for c in req["cells"]] == [
            "%%python\ndf.describe()",
            "The mean is shown above.",
        ]
        dsh = req["cells"][0]["metadata"]["dsh"]
        assert dsh["by"] == "agent" and dsh["call_id"] == "call_0_notebook_insert"
        assert [c["id"] for c in nb.cells] == ["c1", "c2", "c3", "new1", "new2"]
        [text] = tool_texts(server, 1)
        assert "inserted 2 cells below cell c3" in text and "new1, new2" in text
        [edit] = [e["data"] for e in turn_events(fe) if e["type"] == "notebook/insert"]
        assert edit["applied"] == "extension" and edit["inserted"] == ["new1", "new2"]
        assert edit["notebook"] == "work/nb.ipynb" and edit["after"] == "c3"
        assert edit["cells"][0]["sha256"] == hashlib.sha256(b"%%python\ndf.describe()").hexdigest()
        assert (
            dsh["session"] == fe.python("print(get_ipython().kernel.host.agent.session.id)").strip()
        )
        q = fe.run(
            "%%sql _edits <<\nSELECT position, cell_type, applied, cell_id, after_cell, notebook "
            f"FROM notebook_edits WHERE session_id = '{dsh['session']}' ORDER BY position"
        )
        assert q.status == "ok", q.content
        rows = json.loads(fe.python("print(_edits.to_json(orient='records'))"))
        assert rows == [
            {
                "position": 0,
                "cell_type": "code",
                "applied": "extension",
                "cell_id": "new1",
                "after_cell": "c3",
                "notebook": "work/nb.ipynb",
            },
            {
                "position": 1,
                "cell_type": "markdown",
                "applied": "extension",
                "cell_id": "new2",
                "after_cell": "c3",
                "notebook": "work/nb.ipynb",
            },
        ]
        # %agent export --parquet carries the rows (a course's export: python -m dsh_kernel export).
        out = tmp / "export-with-edits"
        assert fe.run(f"%agent export --parquet {out}").status == "ok"
        exported = duckdb.connect().execute(
            f"SELECT position, source, applied, cell_id FROM '{out}/notebook_edits.parquet' "
            f"WHERE session_id = '{dsh['session']}' ORDER BY position"
        )
        assert exported.fetchall() == [
            (0, "%%python\ndf.describe()", "extension", "new1"),
            (1, "The mean is shown above.", "extension", "new2"),
        ]
    finally:
        nb.close()


def test_anchor_gone_inserts_nothing_and_logs_nothing(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    nb = Notebook(fe, cells())
    try:
        new = [{"cell_type": "code", "source": "x = 1"}]
        server.script(
            sc.tool_calls(("notebook_insert", {"cells": new, "after": "gone"})), sc.text("Hm.")
        )
        ex = nb.run("Add a cell.")
        assert ex.status == "ok", ex.content
        [text] = tool_texts(server, 1)
        assert "no cell with id gone" in text
        assert [c["id"] for c in nb.cells] == ["c1", "c2", "c3"]
        events = turn_events(fe)
        assert not [e for e in events if e["type"] == "notebook/insert"]
        [result] = [e["data"] for e in events if e["type"] == "tool/result"]
        assert result["error"]["code"] == "NOTEBOOK_ANCHOR_GONE"
    finally:
        nb.close()


def test_two_comms_of_one_session_are_refused_as_ambiguous(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    nb = Notebook(fe, cells())
    second = nb.open("work/other.ipynb")
    try:
        server.script(sc.tool_calls(("notebook_read", {})), sc.text("Cannot tell."))
        ex = nb.run("Read my notebook.")
        assert ex.status == "ok", ex.content
        assert nb.requests == []  # nothing was asked of either
        [text] = tool_texts(server, 1)
        assert "NOTEBOOK_AMBIGUOUS" in json.dumps(turn_events(fe))
        assert "2 notebook connections" in text
    finally:
        nb.close()
        nb.close(second)


def status_notebook_line(fe: Frontend) -> str:
    ex = fe.run("%agent status")
    assert ex.status == "ok", ex.content
    [line] = [ln for ln in ex.stdout.splitlines() if ln.startswith("notebook: ")]
    return line


def test_status_says_whether_this_cells_frontend_has_the_extension(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, _, tmp = rig
    line = status_notebook_line(fe)
    assert line.startswith("notebook: no extension in this cell's frontend — ")
    assert "set_next_input" in line and f"saved file {tmp / 'saved.ipynb'}" in line
    # another client's comm is not this cell's: said, and still no extension here
    other = Session(key=fe.kernel.kc.session.key)
    hello = {"protocol": 1, "path": "other.ipynb", "frontend": "other", "version": "0"}
    msg = other.msg(
        "comm_open", {"comm_id": "other-comm", "target_name": "dsh.notebook", "data": hello}
    )
    fe.kernel.kc.shell_channel.send(msg)
    nb = Notebook(fe, cells())
    still_open = True
    try:
        line = status_notebook_line(fe)
        assert line == (
            "notebook: extension test 0 (work/nb.ipynb) in this cell's frontend: notebook_read "
            "reads the live notebook, notebook_insert inserts cells"
        )
        nb.close()
        still_open = False
        line = status_notebook_line(fe)
        assert (
            "no extension in this cell's frontend (1 other frontend of this kernel has it)" in line
        )
    finally:
        if still_open:
            nb.close()
        close = other.msg("comm_close", {"comm_id": "other-comm", "data": {}})
        fe.kernel.kc.shell_channel.send(close)


def test_a_frontend_that_does_not_answer_times_out(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    fe.python("get_ipython().kernel.notebook_comms.timeout_s = 0.5")
    nb = Notebook(fe, cells())
    nb.answer = False
    try:
        new = [{"cell_type": "code", "source": "x = 1"}]
        server.script(
            sc.tool_calls(("notebook_insert", {"cells": new, "after": "c1"})), sc.text("Slow.")
        )
        ex = nb.run("Add a cell.")
        assert ex.status == "ok", ex.content
        [text] = tool_texts(server, 1)
        assert "did not answer the insert request within 0.5 s" in text
        # a late insert still lands: the model is not told that nothing was done
        assert "nothing is assumed done" not in text
        assert "the cells may or may not have been added" in text
        assert "call notebook_read to check before inserting again" in text
        assert "reload the page" in text and "`%agent status`" in text
        events = turn_events(fe)
        assert not [e for e in events if e["type"] == "notebook/insert"]
        [result] = [e["data"] for e in events if e["type"] == "tool/result"]
        assert result["error"]["code"] == "NOTEBOOK_TIMEOUT"
    finally:
        nb.close()
        fe.python("get_ipython().kernel.notebook_comms.timeout_s = 10.0")


def test_without_the_extension_insert_uses_set_next_input_and_read_the_stale_file(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    new = [
        {"cell_type": "code", "source": "df.plot()"},
        {"cell_type": "markdown", "source": "A plot."},
    ]
    server.script(
        sc.tool_calls(("notebook_read", {}), ("notebook_insert", {"cells": new})),
        sc.text("Here."),
    )
    ex = fe.run("Plot it.")
    assert ex.status == "ok", ex.content
    assert ex.content["payload"] == [
        {"source": "set_next_input", "text": "%%python\ndf.plot()", "replace": False}
    ]
    read, inserted = tool_texts(server, 1)
    assert "# Saved" in read and "MAY BE STALE" in read and "[outputs: text/plain: 42" in read
    assert SECRET not in read
    assert "set_next_input" in inserted and "cannot know whether" in inserted
    [edit] = [e["data"] for e in turn_events(fe) if e["type"] == "notebook/insert"]
    assert edit["applied"] == "set_next_input" and edit["inserted"] == []
    assert [c["source"] for c in edit["cells"]] == ["%%python\ndf.plot()", "A plot."]


def test_under_ask_insert_waits_for_the_click_and_the_card_shows_the_cells(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    assert fe.run("%agent approve ask").status == "ok"
    nb = Notebook(fe, cells())
    try:
        new = [{"cell_type": "code", "source": "asked = True"}]
        server.script(
            sc.tool_calls(("notebook_insert", {"cells": new, "after": "c2"})), sc.text("Ok.")
        )
        ex = nb.run("Add it.", allow=True)
        assert ex.status == "ok", ex.content
        decided = [e["data"] for e in turn_events(fe) if e["type"] == "approval/decided"]
        assert [d["outcome"] for d in decided] == ["allowed-once"]
        assert [c["id"] for c in nb.cells][:3] == ["c1", "c2", "new1"]
        html = ex.of_type("update_display_data")[-1]["content"]["data"]["text/html"]
        assert "add 1 cell to the notebook after cell c2" in html
        # the card shows the cell as it was inserted (and as the user allowed it): with %%python
        assert req_sources(nb) == ["%%python\nasked = True"]
        assert "── cell 1 · code ──\n%%python\nasked = True" in html
    finally:
        nb.close()
        assert fe.run("%agent approve auto").status == "ok"


@pytest.mark.parametrize(
    ("sources", "cap"),
    [(["x" * 50_001], "a cell may have at most 50,000"), (["y" * 40_000] * 3, "at most 100,000")],
)
def test_an_insert_over_the_size_caps_is_refused_before_the_approval_card(
    rig: tuple[Frontend, SseServer, Path], sources: list[str], cap: str
) -> None:
    fe, server, _ = rig
    assert fe.run("%agent approve ask").status == "ok"
    nb = Notebook(fe, cells())
    try:
        new = [{"cell_type": "code", "source": s} for s in sources]
        server.script(
            sc.tool_calls(("notebook_insert", {"cells": new, "after": "c2"})), sc.text("Too big.")
        )
        ex = nb.run("Add the data.", allow=True)
        assert ex.status == "ok", ex.content
        assert nb.requests == []  # nothing was sent to the frontend
        events = turn_events(fe)
        assert not [e for e in events if e["type"].startswith("approval/")]
        assert not [e for e in events if e["type"] == "notebook/insert"]
        [result] = [e["data"] for e in events if e["type"] == "tool/result"]
        assert result["error"]["code"] == "INVALID_ARGS"
        [text] = tool_texts(server, 1)
        assert cap in text and "write it to a file" in text and "nothing was inserted" in text
        assert [c["id"] for c in nb.cells] == ["c1", "c2", "c3"]
    finally:
        nb.close()
        assert fe.run("%agent approve auto").status == "ok"


@pytest.mark.parametrize("policy", ["explain", "off"])
def test_explain_and_off_allow_no_insertion(tmp_path: Path, policy: str) -> None:
    with SseServer() as server:
        env = provider_env(server, tmp_path, DSH_AI_POLICY=policy, DSH_APPROVAL="auto")
        with start_kernel(tmp_path, "dsh", env=env) as kernel:
            fe = Frontend(kernel)
            nb = Notebook(fe, cells())
            new = [{"cell_type": "code", "source": "x = 1"}]
            server.script(
                sc.tool_calls(("notebook_insert", {"cells": new, "after": "c1"})), sc.text("No.")
            )
            ex = nb.run("Add a cell.")
            assert nb.requests == []
            if policy == "off":
                assert ex.status == "error" and ex.content["ename"] == "AI_POLICY_OFF"
                return
            assert ex.status == "ok", ex.content
            assert "notebook_insert" not in offered(server)
            assert "notebook_read" in offered(server)  # read-only: explain offers it
            # the system prompt tells of the notebook tool it has, not of the one it lacks
            system = "\n".join(
                str(m["content"])
                for m in server.requests[0].json["messages"]
                if m["role"] == "system"
            )
            assert "`notebook_read`" in system and "notebook_insert" not in system
            assert "UNKNOWN_TOOL" in json.dumps(turn_events(fe))
            assert nb.cells == cells()


def test_with_no_notebook_known_read_is_not_offered_until_vs_code_names_its_file(
    tmp_path: Path,
) -> None:
    saved = tmp_path / "vsc.ipynb"
    saved.write_text(
        json.dumps(
            {
                "nbformat": 4,
                "nbformat_minor": 5,
                "metadata": {},
                "cells": [{"id": "v1", "cell_type": "markdown", "metadata": {}, "source": "# V"}],
            }
        ),
        encoding="utf-8",
    )
    with SseServer() as server:
        env = provider_env(server, tmp_path, DSH_APPROVAL="auto")
        with start_kernel(tmp_path, "dsh", env=env) as kernel:
            server.script(sc.text("Hi."))
            assert kernel.execute("Hello.").status == "ok"
            assert "notebook_read" not in offered(server)
            assert "notebook_insert" in offered(server)
            # VS Code's start-up code, sent as its executeSilently sends it (silent false, no
            # history): plain Python, not a chat message.
            ex = kernel.execute(
                f"__vsc_ipynb_file__ = {str(saved)!r}", silent=False, store_history=False
            )
            assert ex.status == "ok", ex.content
            assert len(server.requests) == 1  # no chat turn was started
            server.script(sc.tool_calls(("notebook_read", {})), sc.text("Read."))
            ex = kernel.execute("Read it.")
            assert ex.status == "ok", ex.content
            assert "notebook_read" in offered(server)
            [text] = tool_texts(server, 1)
            assert "# V" in text and "MAY BE STALE" in text and str(saved) in text


def test_kernel_is_dsh_python_code_cells_have_no_python_magic(tmp_path: Path) -> None:
    with SseServer() as server:
        env = provider_env(server, tmp_path, DSH_APPROVAL="auto")
        with start_kernel(tmp_path, "dsh-python", env=env) as kernel:
            fe = Frontend(kernel)
            nb = Notebook(fe, cells())
            new = [{"cell_type": "code", "source": "%%python\ny = 2"}]
            server.script(
                sc.tool_calls(("notebook_insert", {"cells": new, "after": "c1"})), sc.text("Ok.")
            )
            ex = nb.run("%%chat\nAdd a cell.")
            assert ex.status == "ok", ex.content
            [req] = nb.requests
            assert [c["source"] for c in req["cells"]] == ["y = 2"]


def test_a_tab_after_chat_is_a_chat_cell_for_the_router_and_refused_by_insert(
    tmp_path: Path,
) -> None:
    source = "%%chat\tplease\nsummarise df again"
    with SseServer() as server:
        env = provider_env(server, tmp_path, DSH_APPROVAL="auto")
        with start_kernel(tmp_path, "dsh-python", env=env) as kernel:
            fe = Frontend(kernel)
            nb = Notebook(fe, cells())
            new = [{"cell_type": "code", "source": source}]
            server.script(
                sc.tool_calls(("notebook_insert", {"cells": new, "after": "c1"})), sc.text("No.")
            )
            ex = nb.run("%%chat\nAdd a cell.")
            assert ex.status == "ok", ex.content
            assert nb.requests == []  # refused before anything reached the frontend
            [result] = [e["data"] for e in turn_events(fe) if e["type"] == "tool/result"]
            assert result["error"]["code"] == "INVALID_ARGS"
            [text] = tool_texts(server, 1)
            assert "a %%chat cell would send its text to the agent again" in text
            # the kernel's router reads the same source as a chat message
            server.script(sc.text("Summarised."))
            ex = fe.run(source)
            assert ex.status == "ok", ex.content
            assert "summarise df again" in json.dumps(server.requests[-1].json["messages"])


def test_by_default_cells_go_below_the_chat_cell_then_below_each_other(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    nb = Notebook(fe, cells())
    try:
        server.script(
            sc.tool_calls(("notebook_insert", {"cells": [{"cell_type": "code", "source": "a"}]})),
            sc.tool_calls(("notebook_insert", {"cells": [{"cell_type": "code", "source": "b"}]})),
            sc.text("Two cells."),
        )
        ex = nb.run("Add a, then b.", cell_id="c2")
        assert ex.status == "ok", ex.content
        inserts = [r for r in nb.requests if r["request"] == "insert"]
        assert [r["after"] for r in inserts] == ["c2", "new1"]
        assert [c["id"] for c in nb.cells] == ["c1", "c2", "new1", "new2", "c3"]
    finally:
        nb.close()


def test_replay_shows_the_recorded_insertion_and_inserts_nothing(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    assert fe.run("%agent new").status == "ok"
    assert fe.run("%agent approve auto").status == "ok"
    nb = Notebook(fe, cells())
    try:
        new = [{"cell_type": "markdown", "source": "Recorded note."}]
        server.script(
            sc.tool_calls(
                ("notebook_insert", {"cells": new, "after": "c1"}),
                ("notebook_insert", {"cells": new, "after": "gone"}),
            ),
            sc.text("Noted."),
        )
        assert nb.run("Add a note.").status == "ok"
        assert len(nb.requests) == 2 and len(nb.cells) == 4
        recorded = fe.python("print(get_ipython().kernel.host.agent.session.id)").strip()
        assert fe.run(f"%agent replay {recorded}").status == "ok"
        assert fe.run("%agent approve auto").status == "ok"
        nb.requests.clear()
        ex = nb.run("Add a note.")
        assert ex.status == "ok", ex.content  # not REPLAY_DIVERGED: the same results, same errors
        assert nb.requests == [] and len(nb.cells) == 4
        events = turn_events(fe)
        assert not [e for e in events if e["type"] == "notebook/insert"]
        results = [e["data"] for e in events if e["type"] == "tool/result"]
        assert "error" not in results[0] and results[1]["error"]["code"] == "NOTEBOOK_ANCHOR_GONE"
        assert results[0]["meta"]["replayed"] is True
        html = ex.of_type("update_display_data")[-1]["content"]["data"]["text/html"]
        assert "Recorded note." in html and "replayed: as recorded, not inserted again" in html
    finally:
        nb.close()
        assert fe.run("%agent new").status == "ok"
        assert fe.run("%agent approve auto").status == "ok"


def run_cell(fe: Frontend, code: str, cell_id: str, *, console: bool) -> Execution:
    cell = CellWithId(fe, code, cell_id, console=console)
    deadline = time.monotonic() + 60
    while not cell.done:
        assert time.monotonic() < deadline, f"cell did not finish: {code!r}"
        fe.poll(0.02)
    return cell.finish()


def test_a_chat_cell_in_a_console_gets_no_set_next_input(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    new = [{"cell_type": "code", "source": "from_console = 1"}]
    server.script(sc.tool_calls(("notebook_insert", {"cells": new})), sc.text("Shown."))
    # JupyterLab's console (also "New Console for Notebook"): cellId, but no deletedCells
    ex = run_cell(fe, "Add a cell.", "console-cell-1", console=True)
    assert ex.status == "ok", ex.content
    assert ex.content["payload"] == []  # the console's prompt is left alone
    [text] = tool_texts(server, 1)
    assert "ran in a console" in text and "only shown to the user in the card" in text
    [edit] = [e["data"] for e in turn_events(fe) if e["type"] == "notebook/insert"]
    assert edit["applied"] == "card" and edit["inserted"] == []
    # the same from a notebook cell (no extension) is offered through set_next_input
    server.script(sc.tool_calls(("notebook_insert", {"cells": new})), sc.text("Offered."))
    ex = run_cell(fe, "Add a cell.", "nb-cell-1", console=False)
    assert ex.status == "ok", ex.content
    assert ex.content["payload"] == [
        {"source": "set_next_input", "text": "%%python\nfrom_console = 1", "replace": False}
    ]


def test_two_views_of_one_notebook_are_served_by_the_newest(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    nb = Notebook(fe, cells())
    first = nb.comm_id
    nb.comm_id = nb.open()  # "New View for Notebook": same connection, same path
    try:
        server.script(sc.tool_calls(("notebook_read", {})), sc.text("Read."))
        ex = nb.run("Read my notebook.")
        assert ex.status == "ok", ex.content
        assert [r["request"] for r in nb.requests] == ["read"]  # the newest view answered
        [text] = tool_texts(server, 1)
        assert "# Sales in March" in text and "NOTEBOOK_AMBIGUOUS" not in text
    finally:
        nb.close()
        nb.close(first)


def test_the_recorded_notebook_is_in_the_sessions_form_and_follows_a_rename(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, tmp = rig
    # JPY_SESSION_NAME is tmp/saved.ipynb (absolute); the frontend names it relative to its root
    nb = Notebook(fe, cells(), path="saved.ipynb")
    nb.renamed = "renamed.ipynb"
    try:
        new = [{"cell_type": "markdown", "source": "renamed"}]
        server.script(
            sc.tool_calls(("notebook_insert", {"cells": new, "after": "c1"})), sc.text("Done.")
        )
        assert nb.run("Add it.").status == "ok"
        [edit] = [e["data"] for e in turn_events(fe) if e["type"] == "notebook/insert"]
        assert edit["notebook"] == str(tmp / "renamed.ipynb")
    finally:
        nb.close()
    # without the extension: JPY_SESSION_NAME as sessions.notebook has it
    server.script(sc.tool_calls(("notebook_insert", {"cells": new})), sc.text("Offered."))
    assert fe.run("Add it.").status == "ok"
    [edit] = [e["data"] for e in turn_events(fe) if e["type"] == "notebook/insert"]
    assert edit["notebook"] == str(tmp / "saved.ipynb")


def test_what_a_frontend_answers_is_recorded_capped(
    rig: tuple[Frontend, SseServer, Path],
) -> None:
    fe, server, _ = rig
    nb = Notebook(fe, cells())
    nb.answer_ids = ["i" * 5_000] + [f"extra{i}" for i in range(200_000)]
    nb.renamed = "deep/" * 200_000 + "nb.ipynb"  # a megabyte of path
    try:
        new = [{"cell_type": "markdown", "source": "one cell"}]
        server.script(
            sc.tool_calls(("notebook_insert", {"cells": new, "after": "c1"})), sc.text("Done.")
        )
        ex = nb.run("Add it.", timeout=120)
        assert ex.status == "ok", ex.content
        [event] = [e for e in turn_events(fe) if e["type"] == "notebook/insert"]
        edit = event["data"]
        # one id per cell sent, the id and the path cut with a count of what was cut
        assert edit["inserted"] == ["i" * 64 + "… [4936 characters cut]"]
        assert edit["notebook"].startswith("deep/deep/") and len(edit["notebook"]) < 1_100
        assert edit["notebook"].endswith(f"… [{len(nb.renamed) - 1_000} characters cut]")
        assert len(json.dumps(event)) < 5_000
        [text] = tool_texts(server, 1)
        assert "extra1" not in text and len(text) < 2_000
    finally:
        nb.close()
