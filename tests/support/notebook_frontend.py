"""The notebook frontend extension's end of the ``dsh.notebook`` comm, played by a test, and a
chat cell sent as JupyterLab sends it (``docs/dev/notebook-comm.md``)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from tests.support.frontend import Frontend, RunningCell
from tests.support.kernel import Execution


class CellWithId(RunningCell):
    """A chat cell sent as JupyterLab sends it: its cell id in the request's metadata, and from a
    notebook (not a console) ``deletedCells`` and ``recordTiming`` too (``@jupyterlab/notebook``)."""

    def __init__(
        self,
        frontend: Frontend,
        code: str,
        cell_id: str,
        *,
        console: bool = False,
        deleted: Sequence[str] = (),
    ) -> None:
        self.frontend, self.code, self.submitted = frontend, code, time.monotonic()
        kc = frontend.kernel.kc
        content = {"code": code, "silent": False, "store_history": True, "user_expressions": {}}
        msg = kc.session.msg("execute_request", content)
        notebook = {} if console else {"deletedCells": list(deleted), "recordTiming": False}
        msg["metadata"] = {"cellId": cell_id, **notebook}
        kc.shell_channel.send(msg)
        self.msg_id = msg["header"]["msg_id"]


class Notebook:
    """A notebook and the extension's end of its comm, served from the test."""

    def __init__(self, fe: Frontend, cells: list[dict[str, Any]], path: str = "work/nb.ipynb"):
        self.fe = fe
        self.path = path
        self.cells = cells
        self.requests: list[dict[str, Any]] = []
        self.answer = True
        self.renamed: str | None = None
        """The path the insert reply names (the notebook was renamed since the hello)."""
        self.answer_ids: list[str] | None = None
        """The ids the insert reply names instead of the new cells' (a broken frontend)."""
        self.comm_id = self.open()
        self._next = 0

    def open(self, path: str | None = None) -> str:
        comm_id = uuid.uuid4().hex
        hello = {"protocol": 1, "path": path or self.path, "frontend": "test", "version": "0"}
        kc = self.fe.kernel.kc
        msg = kc.session.msg(
            "comm_open", {"comm_id": comm_id, "target_name": "dsh.notebook", "data": hello}
        )
        kc.shell_channel.send(msg)
        return comm_id

    def close(self, comm_id: str | None = None) -> None:
        kc = self.fe.kernel.kc
        msg = kc.session.msg("comm_close", {"comm_id": comm_id or self.comm_id, "data": {}})
        kc.shell_channel.send(msg)

    def run(
        self,
        code: str,
        *,
        allow: bool = False,
        cell_id: str | None = None,
        deleted: Sequence[str] = (),
        timeout: float = 60,
    ) -> Execution:
        """Run a chat cell (with ``cell_id`` in its metadata, as JupyterLab sends it), answering
        the kernel's requests (and clicking Allow when ``allow``)."""
        cell = (
            self.fe.submit(code)
            if cell_id is None
            else CellWithId(self.fe, code, cell_id, deleted=deleted)
        )
        deadline = time.monotonic() + timeout
        seen: set[str] = set()
        while not cell.done:
            assert time.monotonic() < deadline, f"cell did not finish: {code!r}"
            self.fe.poll(0.02)
            self._serve(cell, seen)
            if allow and self.fe.buttons("Allow once"):
                self.fe.click(self.fe.buttons("Allow once")[0])
        return cell.finish()

    def _serve(self, cell: RunningCell, seen: set[str]) -> None:
        for m in cell.messages:
            if m["msg_type"] != "comm_msg" or m["content"]["comm_id"] != self.comm_id:
                continue
            if m["header"]["msg_id"] in seen:
                continue
            seen.add(m["header"]["msg_id"])
            request = m["content"]["data"]
            self.requests.append(request)
            if self.answer:
                self.fe.send(self.comm_id, self.reply(request))

    def reply(self, request: dict[str, Any]) -> dict[str, Any]:
        rid = request["id"]
        if request["request"] == "read":
            return {
                "reply_to": rid,
                "ok": True,
                "path": self.path,
                "dirty": True,
                "active_cell_id": self.cells[-1]["id"],
                "cells": [
                    {**c, "outputs": "", "execution_count": None, "metadata_dsh": c.get("dsh")}
                    for c in self.cells
                ],
            }
        ids = [c["id"] for c in self.cells]
        if request["after"] not in ids:
            return {
                "reply_to": rid,
                "ok": False,
                "error": {
                    "code": "NOTEBOOK_ANCHOR_GONE",
                    "message": f"no cell with id {request['after']} in {self.path}",
                },
            }
        at = ids.index(request["after"]) + 1
        new = []
        for c in request["cells"]:
            self._next += 1
            new.append(
                {
                    "id": f"new{self._next}",
                    "cell_type": c["cell_type"],
                    "source": c["source"],
                    "dsh": c["metadata"]["dsh"],
                }
            )
        self.cells[at:at] = new
        ids = [c["id"] for c in new] if self.answer_ids is None else self.answer_ids
        done = {"reply_to": rid, "ok": True, "inserted": ids}
        return {**done, "path": self.renamed} if self.renamed else done
