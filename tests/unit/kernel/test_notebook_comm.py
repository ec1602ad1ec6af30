"""The ``dsh.notebook`` comm's registry and requests, and ``notebook_read``'s reading, without a kernel.

The comm is the Jupyter edge, so it is played here by ``Wire``, which records what the kernel sends
and lets a test answer as the frontend would (the kernel tier, ``tests/kernel/test_notebook_tools.py``,
runs the same paths over a real kernel and ``jupyter_client``).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dsh_kernel.abort import AbortController
from dsh_kernel.errors import ToolArgsError, ToolError
from dsh_kernel.ids import CallId
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.kernel.notebook.comm import TARGET, NotebookComms
from dsh_kernel.kernel.notebook.snapshot import (
    MAX_CELLS,
    MAX_TEXT_BYTES,
    NotebookCell,
    Snapshot,
    fallback_file,
    render,
    snapshot_from_file,
    summarize_outputs,
)
from dsh_kernel.kernel.toolbox.notebook import NotebookDesk, RunningCell, cells_text
from dsh_kernel.llm.secrets import REDACTOR
from dsh_kernel.tools.presentation import GenericCallView, call_view
from dsh_kernel.tools.types import ToolContext, ToolDefinition

if TYPE_CHECKING:
    from dsh_kernel.agent.agent import Agent

SECRET = "sk-unit-notebook-secret-42424242"


class Wire:
    """A comm as ipykernel hands it to a target: sends are recorded; ``answer`` plays the frontend."""

    def __init__(self, comm_id: str, *, broken: bool = False) -> None:
        self.comm_id = comm_id
        self.sent: list[JsonValue] = []
        self.broken = broken
        self._on_msg: Callable[[dict[str, object]], None] | None = None
        self._on_close: Callable[[dict[str, object]], None] | None = None

    def send(self, data: JsonValue = None) -> None:
        if self.broken:
            raise OSError("socket closed")
        self.sent.append(data)

    def on_msg(self, callback: Callable[[dict[str, object]], None] | None) -> None:
        self._on_msg = callback

    def on_close(self, callback: Callable[[dict[str, object]], None] | None) -> None:
        self._on_close = callback

    def answer(self, data: dict[str, object]) -> None:
        assert self._on_msg is not None
        self._on_msg({"content": {"comm_id": self.comm_id, "data": data}})

    def close(self) -> None:
        assert self._on_close is not None
        self._on_close({})


class Manager:
    def __init__(self) -> None:
        self.targets: dict[str, Callable[..., object]] = {}

    def register_target(self, target_name: str, f: Callable[..., object]) -> None:
        self.targets[target_name] = f


def open_comm(comms: NotebookComms, session: str, path: str = "a.ipynb", **kw: bool) -> Wire:
    wire = Wire(f"comm-{len(comms.frontends)}-{session}", **kw)
    hello = {"protocol": 1, "path": path, "frontend": "jupyterlab", "version": "0.1.0"}
    comms.opened(wire, {"header": {"session": session}, "content": {"data": hello}})
    return wire


def test_the_target_is_registered_and_comms_are_kept_by_client_session() -> None:
    comms = NotebookComms()
    manager = Manager()
    comms.register(manager)
    assert list(manager.targets) == [TARGET] == ["dsh.notebook"]
    open_comm(comms, "lab-1", "work/a.ipynb")
    open_comm(comms, "lab-2", "work/b.ipynb")
    fe = comms.frontend_for("lab-2")
    assert fe is not None and fe.path == "work/b.ipynb" and fe.frontend == "jupyterlab"
    assert comms.frontend_for("vscode") is None
    assert comms.frontend_for(None) is None


def test_two_comms_of_one_session_are_ambiguous_and_a_closed_one_is_forgotten() -> None:
    comms = NotebookComms()
    open_comm(comms, "lab", "work/a.ipynb")
    second = open_comm(comms, "lab", "work/b.ipynb")
    with pytest.raises(ToolError) as info:
        comms.frontend_for("lab")
    assert info.value.code == "NOTEBOOK_AMBIGUOUS"
    assert "work/a.ipynb" in info.value.message and "work/b.ipynb" in info.value.message
    second.close()
    fe = comms.frontend_for("lab")
    assert fe is not None and fe.path == "work/a.ipynb"


def test_two_views_of_one_notebook_are_served_by_the_newest() -> None:
    # "New View for Notebook": one kernel connection, two comms naming the same notebook (one model)
    comms = NotebookComms()
    first = open_comm(comms, "lab", "work/a.ipynb")
    newest = open_comm(comms, "lab", "work/a.ipynb")
    fe = comms.frontend_for("lab")
    assert fe is not None and fe.comm_id == newest.comm_id
    newest.close()
    fe = comms.frontend_for("lab")
    assert fe is not None and fe.comm_id == first.comm_id


async def test_a_request_gets_its_own_reply_and_strays_are_dropped() -> None:
    comms = NotebookComms()
    wire = open_comm(comms, "lab")
    fe = comms.frontend_for("lab")
    assert fe is not None
    task = asyncio.ensure_future(comms.request(fe, {"request": "read"}))
    await asyncio.sleep(0)
    [sent] = wire.sent
    assert isinstance(sent, dict) and sent["request"] == "read"
    wire.answer({"reply_to": "nobody", "ok": True, "cells": []})  # not ours: dropped
    await asyncio.sleep(0.01)
    assert not task.done()
    wire.answer({"reply_to": sent["id"], "ok": True, "cells": [], "path": "a.ipynb"})
    reply = await task
    assert reply["path"] == "a.ipynb" and fe.waiting == {}


async def test_a_reply_on_another_thread_reaches_the_waiting_request() -> None:
    """JupyterLab ≥ 4.4 sends comm messages on a kernel subshell: the handler runs on its thread."""
    comms = NotebookComms()
    wire = open_comm(comms, "lab")
    fe = comms.frontend_for("lab")
    assert fe is not None
    task = asyncio.ensure_future(comms.request(fe, {"request": "read"}))
    await asyncio.sleep(0)
    [sent] = wire.sent
    assert isinstance(sent, dict)
    other = threading.Thread(
        target=wire.answer, args=({"reply_to": sent["id"], "ok": True, "cells": []},)
    )
    other.start()
    other.join()
    reply = await asyncio.wait_for(task, 30)
    assert reply["ok"] is True


async def test_a_refusal_carries_the_frontend_code_and_message() -> None:
    comms = NotebookComms()
    wire = open_comm(comms, "lab")
    fe = comms.frontend_for("lab")
    assert fe is not None
    task = asyncio.ensure_future(comms.request(fe, {"request": "insert", "after": "c9"}))
    await asyncio.sleep(0)
    [sent] = wire.sent
    assert isinstance(sent, dict)
    error = {"code": "NOTEBOOK_ANCHOR_GONE", "message": "no cell with id c9 in a.ipynb"}
    wire.answer({"reply_to": sent["id"], "ok": False, "error": error})
    with pytest.raises(ToolError) as info:
        await task
    assert info.value.code == "NOTEBOOK_ANCHOR_GONE"
    assert info.value.message == "no cell with id c9 in a.ipynb"


@pytest.mark.parametrize(
    ("code", "kept"),
    [
        ("NOTEBOOK_ANCHOR_GONE", True),
        ("A" * 65, False),
        ("NOT-A-CODE", False),
        ("lower_case", False),
    ],
)
async def test_a_refusal_is_capped_like_every_frontend_text(code: str, kept: bool) -> None:
    comms = NotebookComms()
    wire = open_comm(comms, "lab")
    fe = comms.frontend_for("lab")
    assert fe is not None
    task = asyncio.ensure_future(comms.request(fe, {"request": "insert", "after": "c9"}))
    await asyncio.sleep(0)
    [sent] = wire.sent
    assert isinstance(sent, dict)
    error = {"code": code, "message": "m" * 1_000_000}
    wire.answer({"reply_to": sent["id"], "ok": False, "error": error})
    with pytest.raises(ToolError) as info:
        await task
    assert info.value.code == (code if kept else "NOTEBOOK_INSERT_FAILED")
    assert len(info.value.message) <= 4_000 and "characters cut" in info.value.message


def test_a_hello_is_capped_like_every_frontend_text() -> None:
    comms = NotebookComms()
    hello = {"protocol": 1, "path": "p/" * 100_000, "frontend": "f" * 10_000, "version": "9" * 500}
    comms.opened(Wire("w"), {"header": {"session": "lab"}, "content": {"data": hello}})
    fe = comms.frontend_for("lab")
    assert fe is not None and fe.path is not None
    assert len(fe.path) < 1_100 and fe.path.endswith("characters cut]")
    assert len(fe.describe()) < 1_400


async def test_no_answer_times_out_and_a_close_fails_the_wait_at_once() -> None:
    comms = NotebookComms(timeout_s=0.05)
    wire = open_comm(comms, "lab")
    fe = comms.frontend_for("lab")
    assert fe is not None
    with pytest.raises(ToolError) as info:
        await comms.request(fe, {"request": "read"})
    assert info.value.code == "NOTEBOOK_TIMEOUT" and "0.05 s" in info.value.message
    # it says what to do: the user's page, not the model, can fix a frontend that does not answer
    assert "reload the page" in info.value.message and "%agent status" in info.value.message
    assert "extension may be outdated" in info.value.message
    comms.timeout_s = 30
    task = asyncio.ensure_future(comms.request(fe, {"request": "read"}))
    await asyncio.sleep(0)
    wire.close()
    with pytest.raises(ToolError) as closed:
        await asyncio.wait_for(task, 30)
    assert closed.value.code == "NOTEBOOK_CLOSED"
    assert comms.frontend_for("lab") is None


async def test_a_comm_that_cannot_be_written_is_dropped() -> None:
    comms = NotebookComms()
    open_comm(comms, "lab", broken=True)
    fe = comms.frontend_for("lab")
    assert fe is not None
    with pytest.raises(ToolError) as info:
        await comms.request(fe, {"request": "read"})
    assert info.value.code == "NOTEBOOK_CLOSED" and comms.frontends == {}


async def test_a_reply_without_ok_is_a_bad_reply() -> None:
    comms = NotebookComms()
    wire = open_comm(comms, "lab")
    fe = comms.frontend_for("lab")
    assert fe is not None
    task = asyncio.ensure_future(comms.request(fe, {"request": "read"}))
    await asyncio.sleep(0)
    [sent] = wire.sent
    assert isinstance(sent, dict)
    wire.answer({"reply_to": sent["id"], "cells": "?"})
    with pytest.raises(ToolError) as info:
        await task
    assert info.value.code == "NOTEBOOK_BAD_REPLY"


# --- notebook_read ---------------------------------------------------------------------------------


def read_tool(desk: NotebookDesk) -> ToolDefinition:
    return desk._read_tool()


def ctx() -> ToolContext:
    return ToolContext(
        call_id=CallId("call_1"), name="notebook_read", signal=AbortController().signal
    )


async def test_read_through_the_comm_is_redacted(tmp_path: Path) -> None:
    REDACTOR.add(SECRET)
    comms = NotebookComms()
    wire = open_comm(comms, "lab", "work/a.ipynb")
    desk = NotebookDesk(comms, namespace={}, notebook_name=None, python_cells=True, cwd=tmp_path)
    desk.cell = RunningCell(session="lab", cell_id="c2")
    result = read_tool(desk).execute({}, ctx())
    assert asyncio.iscoroutine(result)
    task = asyncio.ensure_future(result)
    await asyncio.sleep(0)
    [sent] = wire.sent
    assert isinstance(sent, dict)
    cells = [
        {"id": "c1", "cell_type": "markdown", "source": "# Title", "outputs": ""},
        {"id": "c2", "cell_type": "code", "source": f"key = '{SECRET}'", "outputs": ""},
    ]
    wire.answer({"reply_to": sent["id"], "ok": True, "path": "work/a.ipynb", "cells": cells})
    text = await task
    assert isinstance(text, str)
    assert "# Title" in text and "id c2" in text and SECRET not in text and "[redacted]" in text


def test_saved_outputs_are_summarised_in_300_characters() -> None:
    assert summarize_outputs([]) == ""
    err = [{"output_type": "error", "ename": "KeyError", "evalue": "'x'", "traceback": []}]
    assert summarize_outputs(err) == "KeyError: 'x'"
    value = [{"output_type": "execute_result", "data": {"text/plain": "42"}, "metadata": {}}]
    assert summarize_outputs(value) == "text/plain: 42 (1 output)"
    long = [{"output_type": "stream", "name": "stdout", "text": "y" * 1000}]
    assert len(summarize_outputs(long)) == 300


def snap(n: int) -> Snapshot:
    cells = tuple(
        NotebookCell(id=f"c{i}", cell_type="code", source=f"x{i}") for i in range(1, n + 1)
    )
    return Snapshot(origin="frontend", path="a.ipynb", cells=cells)


def test_a_range_is_checked_and_a_long_notebook_is_read_in_parts() -> None:
    text = render(snap(3), 2, 3)
    assert "--- cell 2 · id c2" in text and "--- cell 1 " not in text
    with pytest.raises(ToolArgsError) as info:
        render(snap(3), 5, None)
    assert "has 3 cells" in info.value.message
    many = render(snap(MAX_CELLS + 5))
    assert f"--- cell {MAX_CELLS} " in many and f"--- cell {MAX_CELLS + 1} " not in many
    assert f"notebook_read with first={MAX_CELLS + 1}" in many


def test_a_big_read_shows_whole_cells_in_order_and_points_to_the_first_not_shown() -> None:
    # 60 cells of 3,000 characters: twice the byte budget; no cell in the middle may go missing
    cells = tuple(
        NotebookCell(id=f"c{i}", cell_type="code", source=f"# cell {i}\n" + "z" * 3_000)
        for i in range(1, 61)
    )
    text = render(Snapshot(origin="frontend", path="a.ipynb", cells=cells))
    assert len(text.encode()) <= MAX_TEXT_BYTES
    shown = [int(ln.split()[2]) for ln in text.splitlines() if ln.startswith("--- cell ")]
    assert shown == list(range(1, len(shown) + 1)) and 10 < len(shown) < 60
    nxt = len(shown) + 1
    for n in shown:  # every shown cell is whole
        assert f"# cell {n}\n" + "z" * 3_000 + "\n" in text + "\n"
    assert f"cells {nxt}..60 not shown" in text
    assert f"call notebook_read with first={nxt}" in text
    assert "first=61" not in text
    # a later part starts where the first stopped
    rest = render(Snapshot(origin="frontend", path="a.ipynb", cells=cells), nxt, None)
    assert f"--- cell {nxt} · id c{nxt}" in rest


def test_the_saved_file_is_found_and_a_broken_one_says_why(tmp_path: Path) -> None:
    nb = tmp_path / "nb.ipynb"
    nb.write_text(
        json.dumps({"cells": [{"id": "a", "cell_type": "markdown", "source": ["# A"]}]}),
        encoding="utf-8",
    )
    assert fallback_file("nb.ipynb", {}, tmp_path) == nb
    assert fallback_file(None, {"__vsc_ipynb_file__": str(nb)}, tmp_path) == nb
    assert fallback_file("missing.ipynb", {}, tmp_path) is None
    text = render(snapshot_from_file(nb))
    assert "MAY BE STALE" in text and "# A" in text
    nb.write_text("{not json", encoding="utf-8")
    with pytest.raises(ToolError) as info:
        snapshot_from_file(nb)
    assert info.value.code == "NOTEBOOK_FILE_UNREADABLE" and str(nb) in info.value.message


def test_code_cells_are_written_for_the_kernel_that_runs_them(tmp_path: Path) -> None:
    comms = NotebookComms()
    dsh = NotebookDesk(comms, namespace={}, notebook_name=None, python_cells=True, cwd=tmp_path)
    plain = NotebookDesk(comms, namespace={}, notebook_name=None, python_cells=False, cwd=tmp_path)
    assert dsh.code_source("x = 1") == "%%python\nx = 1"
    assert dsh.code_source("%%sql\nSELECT 1") == "%%sql\nSELECT 1"
    assert plain.code_source("x = 1") == "x = 1"
    assert plain.code_source("%%python\nx = 1") == "x = 1"


@pytest.mark.parametrize(
    ("python_cells", "model", "inserted"),
    [(True, "x = 1", "%%python\nx = 1"), (False, "%%python\ny = 2", "y = 2")],
)
def test_the_insert_card_shows_each_cell_as_it_will_be_inserted(
    tmp_path: Path, python_cells: bool, model: str, inserted: str
) -> None:
    desk = NotebookDesk(
        NotebookComms(), namespace={}, notebook_name=None, python_cells=python_cells, cwd=tmp_path
    )

    def no_agent() -> Agent:
        raise AssertionError("presenting a call needs no agent")

    args: JsonObject = {
        "cells": [
            {"cell_type": "code", "source": model},
            {"cell_type": "markdown", "source": "%%python is a magic"},
        ],
        "after": "c1",
    }
    view = call_view(desk._insert_tool(no_agent), "notebook_insert", json.dumps(args))
    assert isinstance(view, GenericCallView) and view.content is not None
    assert view.title == "add 2 cells to the notebook after cell c1"
    assert f"── cell 1 · code ──\n{inserted}\n\n" in view.content
    assert model not in view.content.replace(inserted, "")
    assert view.content.endswith("── cell 2 · markdown ──\n%%python is a magic")
    # the card is made from exactly what the insert request sends
    sent = desk._cells(args, session="s", call_id="call_1")
    assert view.content == cells_text(sent)


def test_an_inserted_chat_cell_is_refused() -> None:
    from dsh_kernel.kernel.toolbox.notebook import check_insert_args

    with pytest.raises(ToolArgsError) as info:
        check_insert_args({"cells": [{"cell_type": "code", "source": "%%chat\nsummarise df"}]})
    assert "%%chat cell would send its text to the agent again" in info.value.message
    kept: JsonObject = {"cell_type": "code", "source": "%%sql\nSELECT 1"}
    assert check_insert_args({"cells": [kept]}) == [kept]


@pytest.mark.parametrize(
    ("source", "chat"),
    [
        ("%%chat\tsummarise df", True),
        ("%%chat\t\nsummarise df", True),
        ("\n  \n%%chat\nsummarise df", True),
        ("  %%chat\nsummarise df", True),
        ("%%chat\u00a0summarise df", True),
        ("%%chat\r\nsummarise df", True),
        ("%%chatter\nx = 1", False),
        ("%%chat.x\nx = 1", False),
        ("%%sql\tchat\nSELECT 1", False),
        ("print('%%chat')", False),
        ("# %%chat\nx = 1", False),
    ],
)
def test_insert_refuses_exactly_what_the_router_runs_as_chat(source: str, chat: bool) -> None:
    # One reading of a cell: the check refuses a cell exactly when the kernel would route it, as
    # inserted (the dsh kernel adds %%python to a cell that starts with no magic), as chat.
    from dsh_kernel.kernel.cells import classify
    from dsh_kernel.kernel.toolbox.notebook import check_insert_args

    args: JsonObject = {"cells": [{"cell_type": "code", "source": source}]}
    if chat:
        with pytest.raises(ToolArgsError, match="%%chat cell would send its text"):
            check_insert_args(args)
    else:
        assert check_insert_args(args) == args["cells"]
    for python_cells in (True, False):
        desk = NotebookDesk(
            NotebookComms(), namespace={}, notebook_name=None, python_cells=python_cells
        )
        routed = classify(desk.code_source(source), "chat" if python_cells else "python")
        assert (routed.kind == "chat") == chat, (source, python_cells)


def test_one_card_only_cell_is_singular() -> None:
    from dsh_kernel.kernel.toolbox.notebook import insert_text

    text = insert_text({"applied": "card", "cells": [{"cell_type": "code"}]}, for_model=True)
    assert "the 1 cell is only shown" in text


def saved_notebook(path: Path, heading: str) -> None:
    cell = {"id": "a", "cell_type": "markdown", "metadata": {}, "source": [heading]}
    doc = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [cell]}
    path.write_text(json.dumps(doc), encoding="utf-8")


async def read_saved(desk: NotebookDesk) -> str:
    result = read_tool(desk).execute({}, ctx())
    text = await result if asyncio.iscoroutine(result) else result
    assert isinstance(text, str)
    return text


async def test_a_saved_file_over_the_cap_is_refused_without_being_parsed(tmp_path: Path) -> None:
    from dsh_kernel.kernel.notebook.snapshot import MAX_FILE_BYTES

    big = tmp_path / "big.ipynb"
    with big.open("wb") as f:  # sparse, and not JSON: parsing it would say NOTEBOOK_FILE_UNREADABLE
        f.truncate(MAX_FILE_BYTES + 1)
    desk = NotebookDesk(
        NotebookComms(), namespace={}, notebook_name=str(big), python_cells=True, cwd=tmp_path
    )
    with pytest.raises(ToolError) as info:
        await read_saved(desk)
    assert info.value.code == "NOTEBOOK_FILE_TOO_LARGE"
    message = info.value.message
    assert str(big) in message and f"{MAX_FILE_BYTES // 1_000_000} MB" in message
    assert "extension" in message and "clear" in message.lower()


async def test_an_unchanged_saved_file_is_parsed_once(tmp_path: Path) -> None:
    nb = tmp_path / "nb.ipynb"
    saved_notebook(nb, "# First")
    desk = NotebookDesk(
        NotebookComms(), namespace={}, notebook_name=str(nb), python_cells=True, cwd=tmp_path
    )
    assert "# First" in await read_saved(desk)
    # Same size and modification time, other bytes: the one parse of this version is reused.
    stamp = nb.stat()
    saved_notebook(nb, "# Other")
    os.utime(nb, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert nb.stat().st_size == stamp.st_size
    assert "# First" in await read_saved(desk)
    # A new version (saved again) is parsed again.
    os.utime(nb, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1_000_000_000))
    text = await read_saved(desk)
    assert "# Other" in text and "# First" not in text


def test_a_path_message_moves_the_frontend_and_the_notebook_file(tmp_path: Path) -> None:
    from dsh_kernel.kernel.notebook.file import NotebookFile

    (tmp_path / "work").mkdir()
    old = tmp_path / "work" / "a.ipynb"
    saved_notebook(old, "# A")
    comms = NotebookComms(notebook=NotebookFile(str(old), tmp_path / "work"))
    wire = open_comm(comms, "lab", "work/a.ipynb")
    new = tmp_path / "work" / "b.ipynb"
    old.rename(new)
    wire.answer({"event": "path", "path": "work/b.ipynb"})
    fe = comms.frontend_for("lab")
    assert fe is not None and fe.path == "work/b.ipynb" and fe.hello_path == "work/a.ipynb"
    assert comms.notebook.find() == new
    assert wire.sent == []  # an event, not a request: nothing is answered
    wire.answer({"event": "path", "path": "p" * 5_000})  # capped, names no file: not followed
    assert fe.path is not None and len(fe.path) < 1_100 and comms.notebook.find() == new
