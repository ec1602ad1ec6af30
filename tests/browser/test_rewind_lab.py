"""The notebook is the conversation, in a real JupyterLab (issue 33): editing and re-running an
earlier chat cell re-asks from there, the next cell continues that branch, and deleting a chat cell
takes its turn out of what the model sees.

A ``dsh`` notebook with three chat cells, run top to bottom as a person would (Shift+Enter); then
the second cell is edited in the page and run again, then the third, then the first cell is deleted
with Lab's own keys (``d d``, so Lab sends its ``deletedCells`` with the next run) and the third run
once more. The model is the loopback server; every assertion is on the request bodies it received
and on the text the page shows in each cell's output. Screenshots go to ``artifacts/browser/``.

Needs ``/usr/bin/chromium`` and the ``playwright`` and ``jupyterlab`` packages.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import nbformat

from tests.support import scenarios as sc
from tests.support.lab import KERNEL_IDLE_JS, LabPage, browser, lab_server
from tests.support.sse_server import SseServer

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser"
TIMEOUT_S = 120
"""A margin for a shared, slow machine: a wait ends as soon as its condition holds."""

KIWI, PLUM, ASK = (
    "Remember the code word kiwi.",
    "Remember the code word plum.",
    "Which code words do you know?",
)
MANGO = "Remember the code word mango."

# No cell of the notebook is running and the kernel is idle: a run has finished in the page.
SETTLED_JS = f"""() => {{
  const idle = ({KERNEL_IDLE_JS})();
  const prompts = [...document.querySelectorAll('.jp-NotebookPanel .jp-Cell .jp-InputPrompt')];
  return idle && !prompts.some((p) => p.textContent.includes('*'));
}}"""


def output_text(nb: LabPage, n: int) -> str:
    return nb.cells.nth(n).locator(".jp-OutputArea").inner_text()


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


def test_editing_rerunning_and_deleting_chat_cells_rewinds_the_conversation(
    tmp_path: Path,
) -> None:
    root, work = tmp_path / "notebooks", tmp_path / "work"
    root.mkdir()
    work.mkdir()
    nb_file = nbformat.v4.new_notebook()
    nb_file.metadata["kernelspec"] = {
        "name": "dsh",
        "display_name": "DSH Agent",
        "language": "python",
    }
    nb_file.cells = [nbformat.v4.new_code_cell(text) for text in (KIWI, PLUM, ASK)]
    nbformat.write(nb_file, root / "rewind.ipynb")
    answers = [
        "Noted kiwi.",
        "Noted plum.",
        "kiwi and plum.",
        "Noted mango.",
        "kiwi and mango.",
        "Only mango now.",
    ]
    with SseServer([sc.text(a) for a in answers]) as server:
        env = {
            "DSH_PROVIDER": "openai-compatible",
            "DSH_BASE_URL": server.url,
            "DSH_STORE": str(tmp_path / "store"),
            "IPYTHONDIR": str(tmp_path / "ipython"),
        }
        with lab_server(root, work, env) as lab, browser(work) as page:
            nb = LabPage(page, lab, "rewind.ipynb", timeout_s=TIMEOUT_S)
            nb.wait_kernel_idle()

            # 1. Top to bottom: each request carries the turns before it.
            run_and_wait(nb, server, 0, "Noted kiwi.")
            run_and_wait(nb, server, 1, "Noted plum.")
            body = run_and_wait(nb, server, 2, "kiwi and plum.")
            for seen in (KIWI, "Noted kiwi.", PLUM, "Noted plum.", ASK):
                assert seen in body, seen

            # 2. The second cell edited in the page (plum → mango) and run again: the model sees the
            # first turn and the new message only; the page shows the new answer in its place.
            editor = nb.cells.nth(1).locator(".jp-InputArea-editor")
            editor.click()
            page.keyboard.press("Control+a")
            page.keyboard.type(MANGO)
            page.wait_for_function(
                "(text) => window.jupyterapp.shell.currentWidget.content.model.sharedModel"
                ".cells[1].getSource() === text",
                arg=MANGO,
                timeout=TIMEOUT_S * 1000,
            )
            body = run_and_wait(nb, server, 1, "Noted mango.")
            assert KIWI in body and "Noted kiwi." in body and MANGO in body, body
            for gone in ("plum", ASK, "kiwi and plum."):
                assert gone not in body, (gone, body)
            second = output_text(nb, 1)
            assert "Noted mango." in second and "Noted plum." not in second, second
            assert "Re-asked from here on a new branch" in second, second  # the turn's notice
            assert "kiwi and plum." in output_text(nb, 2)  # not run again: its output stays

            # 3. The third cell run again continues the new branch.
            body = run_and_wait(nb, server, 2, "kiwi and mango.")
            for seen in (KIWI, "Noted kiwi.", MANGO, "Noted mango.", ASK):
                assert seen in body, (seen, body)
            assert "plum" not in body, body
            assert body.count(ASK) == 1, body
            third = output_text(nb, 2)
            assert "kiwi and mango." in third and "kiwi and plum." not in third, third
            nb.screenshot(ARTIFACTS / "rewind-rerun.png")

            # 4. The first cell deleted with Lab's keys; Lab sends its id with the next run.
            cells_before = len(nb.model_cells())
            nb.cells.nth(0).locator(".jp-InputPrompt").click()
            page.keyboard.press("Escape")
            page.keyboard.press("d")
            page.keyboard.press("d")
            page.wait_for_function(
                "(n) => window.jupyterapp.shell.currentWidget.content.model.sharedModel"
                ".cells.length === n",
                arg=cells_before - 1,
                timeout=TIMEOUT_S * 1000,
            )
            sources = [c["source"] for c in nb.model_cells()]
            assert sources[:2] == [MANGO, ASK], sources
            body = run_and_wait(nb, server, 1, "Only mango now.")
            assert "kiwi" not in body, body
            assert "[Turn 1 is left out" in body, body
            for seen in (MANGO, "Noted mango.", ASK):
                assert seen in body, (seen, body)
            assert "plum" not in body and body.count(ASK) == 1, body
            third = output_text(nb, 1)
            assert "Only mango now." in third and "kiwi and mango." not in third, third
            assert "its cell was deleted" in third, third  # the turn's notice names the deletion
            nb.screenshot(ARTIFACTS / "rewind-deleted.png")
            assert nb.widget_errors() == []
    assert server.remaining == 0
