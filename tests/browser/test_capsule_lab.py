"""The session travels inside the .ipynb, in a real JupyterLab (issue 34): Lab keeps each chat
cell's capsule (the metadata of the ``update_display_data`` that ends the turn) and saves it; the
saved notebook, opened in another Lab whose kernels use another store, continues the conversation.

A ``dsh`` notebook with three chat cells; in the first Lab (store ``a``) the first two are run as a
person would (Shift+Enter) and the notebook is saved with Lab's own save (Ctrl+S; autosave is off,
so nothing else writes it). The file on disk holds each run cell's capsule in its output's
metadata, passes ``nbformat.validate``, and its capsules join into both turns. The file is then copied to a second Lab (store ``b``, which holds no
session of it); running the third cell there imports the conversation (the cell says so in one
line) and the request the model receives carries both earlier turns. The model is the loopback
server; the assertions are on the saved file, the request bodies and the page's text. Screenshots go
to ``artifacts/browser/``.

Needs ``/usr/bin/chromium`` and the ``playwright`` and ``jupyterlab`` packages.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import nbformat

from dsh_kernel.capsule import CAPSULE_KEY
from dsh_kernel.capsule.conversation import join, notebook_capsules
from tests.support import scenarios as sc
from tests.support.lab import KERNEL_IDLE_JS, LabPage, browser, lab_server
from tests.support.sse_server import SseServer

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser"
TIMEOUT_S = 180
"""A margin for a shared, slow machine: a wait ends as soon as its condition holds."""

CAT, DOG, ASK = (
    "My cat is called Bartholomew.",
    "My dog is called Zanzibar.",
    "What are my pets called?",
)
NOTED_CAT, NOTED_DOG, PETS = "Noted the cat.", "Noted the dog.", "Bartholomew and Zanzibar."

# No cell of the notebook is running and the kernel is idle: a run has finished in the page.
SETTLED_JS = f"""() => {{
  const idle = ({KERNEL_IDLE_JS})();
  const prompts = [...document.querySelectorAll('.jp-NotebookPanel .jp-Cell .jp-InputPrompt')];
  return idle && !prompts.some((p) => p.textContent.includes('*'));
}}"""

# The open notebook's model holds no unsaved change.
SAVED_JS = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  return !!w && !!w.context && w.context.model.dirty === false;
}"""

# The metadata of each output of each cell, as the open notebook's model holds it.
OUTPUT_METADATA_JS = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  return w.content.model.sharedModel.cells.map((c) => (c.outputs || []).map((o) => o.metadata || {}));
}"""


def run_and_wait(nb: LabPage, server: SseServer, n: int, answer: str) -> str:
    """Run cell ``n`` (Shift+Enter), wait until the model was asked once more, the cell's output
    shows ``answer`` and the run is over; return the messages the model was sent, as JSON text."""
    asked = len(server.requests)
    nb.run_cell(n)
    deadline = time.monotonic() + TIMEOUT_S
    while len(server.requests) <= asked:
        assert time.monotonic() < deadline, f"cell {n} never asked the model"
        time.sleep(0.1)
    out = nb.cells.nth(n).locator(".jp-OutputArea")
    out.get_by_text(answer, exact=False).first.wait_for(state="visible", timeout=TIMEOUT_S * 1000)
    nb.page.wait_for_function(SETTLED_JS, timeout=TIMEOUT_S * 1000)
    requests = server.requests
    assert len(requests) == asked + 1, [r.json for r in requests[asked:]]
    return json.dumps(requests[-1].json["messages"])


def saved_capsules(path: Path) -> list[list[dict[str, Any]]]:
    """Each cell's capsules as the saved file holds them (one list per cell)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [
        [o["metadata"][CAPSULE_KEY] for o in c.get("outputs", []) if CAPSULE_KEY in o["metadata"]]
        for c in cells
    ]


def save_with_lab(nb: LabPage, path: Path) -> None:
    """Save with Lab's own key (Ctrl+S, in command mode) and wait until Lab says the model is saved
    and the file on disk holds the capsules of the two run cells."""
    nb.cells.nth(0).locator(".jp-InputPrompt").click()
    nb.page.keyboard.press("Escape")
    nb.page.keyboard.press("Control+s")
    nb.page.wait_for_function(SAVED_JS, timeout=TIMEOUT_S * 1000)
    deadline = time.monotonic() + TIMEOUT_S
    while [len(c) for c in saved_capsules(path)][:2] != [1, 1]:
        assert time.monotonic() < deadline, saved_capsules(path)
        time.sleep(0.2)


def without_autosave(work: Path) -> None:
    """Turn Lab's autosave off in the settings dir ``lab_server(…, work)`` uses: the file is
    written by the test's Ctrl+S and by nothing else."""
    plugin = work / "settings" / "@jupyterlab" / "docmanager-extension"
    plugin.mkdir(parents=True, exist_ok=True)
    (plugin / "plugin.jupyterlab-settings").write_text(
        json.dumps({"autosave": False}), encoding="utf-8"
    )


def env_of(server: SseServer, tmp: Path, store: str) -> dict[str, str]:
    return {
        "DSH_PROVIDER": "openai-compatible",
        "DSH_BASE_URL": server.url,
        "DSH_STORE": str(tmp / store),
        "IPYTHONDIR": str(tmp / "ipython"),
    }


def test_a_notebook_saved_in_lab_carries_its_conversation_to_another_store(
    tmp_path: Path,
) -> None:
    first_root, second_root = tmp_path / "here", tmp_path / "elsewhere"
    for d in (first_root, second_root, tmp_path / "work-a", tmp_path / "work-b"):
        d.mkdir()
    nb_file = nbformat.v4.new_notebook()
    nb_file.metadata["kernelspec"] = {
        "name": "dsh",
        "display_name": "DSH Agent",
        "language": "python",
    }
    nb_file.cells = [nbformat.v4.new_code_cell(text) for text in (CAT, DOG, ASK)]
    saved = first_root / "pets.ipynb"
    nbformat.write(nb_file, saved)
    on_disk_before = saved.read_text(encoding="utf-8")
    with SseServer([sc.text(a) for a in (NOTED_CAT, NOTED_DOG, PETS)]) as server:
        # 1. Two chat cells run in Lab on store a, saved with Lab's own save.
        work = tmp_path / "work-a"
        without_autosave(work)
        env = env_of(server, tmp_path, "a")
        with lab_server(first_root, work, env) as lab, browser(work) as page:
            nb = LabPage(page, lab, "pets.ipynb", timeout_s=TIMEOUT_S)
            nb.wait_kernel_idle()
            run_and_wait(nb, server, 0, NOTED_CAT)
            body = run_and_wait(nb, server, 1, NOTED_DOG)
            for seen in (CAT, NOTED_CAT, DOG):
                assert seen in body, (seen, body)
            # Lab's model kept the capsule the turn's final update_display_data carried.
            metadata = page.evaluate(OUTPUT_METADATA_JS)
            assert [sum(CAPSULE_KEY in m for m in cell) for cell in metadata] == [1, 1, 0], metadata
            assert saved.read_text(encoding="utf-8") == on_disk_before  # not saved yet
            save_with_lab(nb, saved)
            nb.screenshot(ARTIFACTS / "capsule-saved.png")
            assert nb.widget_errors() == []

        nbformat.validate(nbformat.read(saved, as_version=4))
        per_cell = saved_capsules(saved)
        assert [len(c) for c in per_cell] == [1, 1, 0], per_cell
        (cat,), (dog,) = per_cell[0], per_cell[1]
        assert cat["version"] == 1 and cat["turn"] == 1 and cat["first"] == 0, cat["turn"]
        assert dog["turn"] == 2 and dog["session"] == cat["session"], (dog["turn"], dog["session"])
        joined = join(notebook_capsules(saved))
        assert joined.left == [], joined.left
        assert len(joined.turns) == 2, joined.turns
        assert joined.header is not None and joined.header.id == cat["session"]
        log = json.dumps([e.data for e in joined.events])
        for seen in (CAT, NOTED_CAT, DOG, NOTED_DOG):
            assert seen in log, seen
        assert not (tmp_path / "b").exists()

        # 2. The saved file opened in another Lab whose kernels use store b: the third cell imports
        # the conversation and continues it.
        shutil.copy(saved, second_root / "pets.ipynb")
        work = tmp_path / "work-b"
        without_autosave(work)
        env = env_of(server, tmp_path, "b")
        with lab_server(second_root, work, env) as lab, browser(work) as page:
            nb = LabPage(page, lab, "pets.ipynb", timeout_s=TIMEOUT_S)
            nb.wait_kernel_idle()
            assert NOTED_DOG in nb.cells.nth(1).locator(".jp-OutputArea").inner_text()
            body = run_and_wait(nb, server, 2, PETS)
            for seen in (CAT, NOTED_CAT, DOG, NOTED_DOG, ASK):
                assert seen in body, (seen, body)
            assert body.count(CAT) == 1 and body.count(DOG) == 1, body
            third = nb.cells.nth(2).locator(".jp-OutputArea").inner_text()
            imported = [
                line
                for line in third.splitlines()
                if "imported the conversation this notebook carries" in line
            ]
            assert len(imported) == 1, third
            assert imported[0].startswith(
                "imported the conversation this notebook carries: 2 turns of session "
                f"{cat['session'][:8]}"
            ), imported
            assert "left out" not in third, third
            nb.screenshot(ARTIFACTS / "capsule-imported.png")
            assert nb.widget_errors() == []
    assert server.remaining == 0
