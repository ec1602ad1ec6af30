"""The session travels inside the .ipynb (issue 34): a notebook run on one store (its cells sent as
JupyterLab sends them, the outputs kept as a frontend keeps them) carries each chat turn's capsule in
its saved output; opened with another store, its first chat cell
imports that conversation and continues it with its full context (checked in the request body);
a tampered capsule is refused in one line, nothing is sent, and the kernel lives."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path
from typing import Any

import nbformat
import pytest

from dsh_kernel.capsule import CAPSULE_KEY
from tests.kernel.conftest import provider_env
from tests.support import scenarios as sc
from tests.support.frontend import Frontend, sql_rows
from tests.support.kernel import start_kernel
from tests.support.notebook_frontend import CellWithId
from tests.support.sse_server import SseServer


def outputs_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A cell's saved outputs as a notebook frontend keeps them: each display, replaced by its
    updates (``update_display_data`` of its display id), and the streams."""
    outputs: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    for m in messages:
        kind, content = m["msg_type"], m["content"]
        display_id = content.get("transient", {}).get("display_id")
        if kind == "display_data":
            out = nbformat.v4.new_output(
                "display_data", data=content["data"], metadata=content.get("metadata", {})
            )
            outputs.append(out)
            if display_id:
                by_id[display_id] = out
        elif kind == "update_display_data" and display_id in by_id:
            by_id[display_id]["data"] = content["data"]
            by_id[display_id]["metadata"] = content.get("metadata", {})
        elif kind == "stream":
            outputs.append(
                nbformat.v4.new_output("stream", name=content["name"], text=content["text"])
            )
    return outputs


def saved_notebook(server: SseServer, tmp: Path) -> Path:
    """Two chat cells run on store ``tmp/a`` as JupyterLab runs them (each with its cell id), the
    notebook saved with their outputs to ``tmp/shared.ipynb``."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "dsh", "display_name": "DSH Agent", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("My cat is called Bartholomew."),
        nbformat.v4.new_code_cell("My dog is called Zanzibar."),
    ]
    server.script(sc.text("Noted the cat."), sc.text("Noted the dog."))
    with start_kernel(tmp / "a", "dsh", env=provider_env(server, tmp / "a")) as kernel:
        fe = Frontend(kernel)
        for cell in nb.cells:
            ex = CellWithId(fe, cell.source, cell.id).finish()
            assert ex.status == "ok", ex.content
            cell.outputs = outputs_of(ex.messages)
            cell.execution_count = ex.reply["content"]["execution_count"]
    path = tmp / "shared.ipynb"
    nbformat.write(nb, path)
    return path


def capsule_outputs(path: Path) -> list[dict[str, Any]]:
    nb = json.loads(path.read_text())
    return [
        o for c in nb["cells"] for o in c.get("outputs", []) if CAPSULE_KEY in o.get("metadata", {})
    ]


def opened_elsewhere(tmp: Path, server: SseServer, path: Path, store: str) -> Any:
    env = provider_env(server, tmp, DSH_STORE=str(tmp / store), JPY_SESSION_NAME=str(path))
    return start_kernel(tmp / store, "dsh", env=env)


def test_a_notebook_opened_with_another_store_continues_its_conversation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SseServer() as server:
        path = saved_notebook(server, tmp_path)
        saved = nbformat.read(path, as_version=4)
        nbformat.validate(saved)
        outputs = capsule_outputs(path)
        assert len(outputs) == 2
        capsule = outputs[0]["metadata"][CAPSULE_KEY]
        assert capsule["version"] == 1 and capsule["turn"] == 1
        # A turn's capsule is at most 1.5× the rendered output of the same turn — but the first,
        # which also carries the request's envelope (system prompt, tool schemas: ~1.5 kB packed).
        sizes = [
            (len(json.dumps(o["metadata"][CAPSULE_KEY])), len(json.dumps(o["data"])))
            for o in outputs
        ]
        assert sizes[1][0] <= 1.5 * sizes[1][1], sizes
        assert sizes[0][0] <= 1.5 * sizes[0][1] + 2_000, sizes
        first_session = capsule["session"]
        cell_ids = [c.id for c in saved.cells]

        (tmp_path / "b").mkdir()
        with opened_elsewhere(tmp_path, server, path, "b") as kernel:
            fe = Frontend(kernel)
            server.script(sc.text("Bartholomew and Zanzibar."))
            ex = CellWithId(fe, "What are my pets called?", "new-cell").finish()
            assert ex.status == "ok", ex.content
            assert "imported the conversation this notebook carries: 2 turns" in ex.stdout
            body = json.dumps(server.requests[-1].json["messages"])
            assert "Bartholomew" in body and "Zanzibar" in body and "Noted the dog." in body
            [row] = sql_rows(
                fe,
                "SELECT parent_session, parent_kind FROM sessions WHERE parent_kind = 'import'",
            )
            assert row == {"parent_session": first_session, "parent_kind": "import"}
            # The imported cells own their turns here too: re-running the second rewinds.
            server.script(sc.text("Noted the new dog."))
            ex = CellWithId(fe, "My dog is called Quintus.", cell_ids[1]).finish()
            assert ex.status == "ok", ex.content
            body = json.dumps(server.requests[-1].json["messages"])
            assert "Bartholomew" in body and "Quintus" in body and "Zanzibar" not in body


def test_a_tampered_capsule_is_refused_in_one_line_and_nothing_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SseServer() as server:
        path = saved_notebook(server, tmp_path)
        nb = json.loads(path.read_text())
        out = next(o for o in nb["cells"][1]["outputs"] if CAPSULE_KEY in o.get("metadata", {}))
        capsule = out["metadata"][CAPSULE_KEY]
        lines = zlib.decompress(base64.b64decode(capsule["events"])).replace(b"Zanzibar", b"Fido")
        capsule["events"] = base64.b64encode(zlib.compress(lines)).decode()  # not re-hashed
        path.write_text(json.dumps(nb))
        sent = len(server.requests)
        (tmp_path / "c").mkdir()
        with opened_elsewhere(tmp_path, server, path, "c") as kernel:
            fe = Frontend(kernel)
            ex = CellWithId(fe, "What are my pets called?", "new-cell").finish()
            assert ex.status == "error"
            assert ex.content["ename"] == "CAPSULE_ALTERED"
            evalue = ex.content["evalue"]
            assert evalue.startswith(f"cell 2 (id {nb['cells'][1]['id']}): its session capsule")
            assert "\n" not in evalue
            assert len(server.requests) == sent  # nothing was sent
            assert fe.python("print('alive')").strip() == "alive"


def test_a_notebook_replays_from_its_own_capsules_with_an_empty_store(tmp_path: Path) -> None:
    with SseServer() as server:
        path = saved_notebook(server, tmp_path)
        saved = nbformat.read(path, as_version=4)
        capsules = [o["metadata"][CAPSULE_KEY] for o in capsule_outputs(path)]
        recorded = capsules[0]["session"]
        sent = len(server.requests)
        (tmp_path / "d").mkdir()
        with opened_elsewhere(tmp_path, server, path, "d") as kernel:
            fe = Frontend(kernel)
            ex = fe.run(f"%agent replay {recorded[:8]}")
            assert ex.status == "ok", ex.content
            assert f"answering from the recording of {recorded}" in ex.stdout
            again = []
            for cell in saved.cells:
                ex = CellWithId(fe, cell.source, cell.id).finish()
                assert ex.status == "ok", ex.content
                out = next(o for o in outputs_of(ex.messages) if CAPSULE_KEY in o["metadata"])
                again.append(out["metadata"][CAPSULE_KEY])
                assert "Noted the" in json.dumps(out["data"])
            assert again == capsules  # the replay saves the recording's turns: the same bytes
            assert len(server.requests) == sent  # offline: nothing reached the server


def test_reopening_the_notebook_continues_the_earlier_import(tmp_path: Path) -> None:
    with SseServer() as server:
        path = saved_notebook(server, tmp_path)
        (tmp_path / "e").mkdir()
        for run, answer in enumerate(("First here.", "Second here."), 1):
            with opened_elsewhere(tmp_path, server, path, "e") as kernel:
                fe = Frontend(kernel)
                server.script(sc.text(answer))
                ex = CellWithId(fe, f"Question {run} here.", f"new-{run}").finish()
                assert ex.status == "ok", ex.content
                body = json.dumps(server.requests[-1].json["messages"])
                assert "Bartholomew" in body and "Zanzibar" in body
                if run == 2:  # the notebook was not saved: the same conversation, imported before
                    assert "imported here before" in ex.stdout
                    assert "First here." in body  # its turn on this machine goes on too
                    rows = sql_rows(
                        fe, "SELECT count(*) AS n FROM sessions WHERE parent_kind = 'import'"
                    )
                    assert rows == [{"n": 1}]


def test_replay_names_a_notebook_file_and_answers_from_its_capsules(tmp_path: Path) -> None:
    with SseServer() as server:
        path = saved_notebook(server, tmp_path)
        saved = nbformat.read(path, as_version=4)
        capsules = [o["metadata"][CAPSULE_KEY] for o in capsule_outputs(path)]
        sent = len(server.requests)
        env = provider_env(server, tmp_path, DSH_STORE=str(tmp_path / "f"))  # no notebook named
        with start_kernel(tmp_path / "f", "dsh", env=env) as kernel:
            fe = Frontend(kernel)
            ex = fe.run("%agent replay nowhere.ipynb")
            assert ex.status == "error" and "no notebook at nowhere.ipynb" in ex.content["evalue"]
            ex = fe.run(f"%agent replay {path}")
            assert ex.status == "ok", ex.content
            assert f"that {path.name} carries" in ex.stdout
            again = []
            for cell in saved.cells:
                ex = CellWithId(fe, cell.source, cell.id).finish()
                assert ex.status == "ok", ex.content
                out = next(o for o in outputs_of(ex.messages) if CAPSULE_KEY in o["metadata"])
                again.append(out["metadata"][CAPSULE_KEY])
            assert again == capsules and len(server.requests) == sent
