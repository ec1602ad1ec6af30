"""A notebook tab closed while its chat cell waits for approval, and reopened after the kernel timed
the approval out and finished the turn, shows the turn as it is — not "waiting for approval".

Lab saved the notebook while the view was live (as its autosave does), so the reopened cell holds
the widget view's output; the widget manager draws it from the kernel's models, which must hold the
finished turn.

Needs ``/usr/bin/chromium`` and the ``playwright`` and ``jupyterlab`` packages.
"""

from __future__ import annotations

import time
from pathlib import Path

import nbformat

from tests.support import scenarios as sc
from tests.support.lab import LabPage, browser, lab_server
from tests.support.sse_server import SseServer

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser"
KERNEL_ID_JS = "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.id"


def test_a_reopened_tab_shows_the_turn_the_kernel_finished_meanwhile(tmp_path: Path) -> None:
    root, work = tmp_path / "notebooks", tmp_path / "work"
    root.mkdir()
    work.mkdir()
    nb_file = nbformat.v4.new_notebook()
    nb_file.metadata["kernelspec"] = {
        "name": "dsh",
        "display_name": "DSH Agent",
        "language": "python",
    }
    nb_file.cells = [nbformat.v4.new_code_cell("Set reopened = 1 in Python.")]
    nbformat.write(nb_file, root / "reopen.ipynb")
    script = [sc.python_call("reopened = 1"), sc.text("Finished after the approval timed out.")]
    with SseServer(script) as server:
        env = {
            "DSH_PROVIDER": "openai-compatible",
            "DSH_BASE_URL": server.url,
            "DSH_STORE": str(tmp_path / "store"),
            "IPYTHONDIR": str(tmp_path / "ipython"),
            "DSH_APPROVAL_TIMEOUT": "6",
        }
        with lab_server(root, work, env) as lab, browser(work) as page:
            nb = LabPage(page, lab, "reopen.ipynb")
            nb.wait_kernel_idle()
            kernel_id = page.evaluate(KERNEL_ID_JS)
            nb.run_cell(0)
            nb.button("Allow once").wait_for(state="visible", timeout=30_000)
            nb.save()  # what Lab's autosave does while the view is live
            page.locator(".lm-TabBar-tab.lm-mod-current .lm-TabBar-tabCloseIcon").first.click()
            page.wait_for_selector(".jp-NotebookPanel", state="detached")

            # The kernel times the approval out and finishes the turn with no tab open.
            deadline = time.monotonic() + 60
            while (
                len(server.requests) < 2
                or lab.api(f"/api/kernels/{kernel_id}")["execution_state"] != "idle"
            ):
                assert time.monotonic() < deadline, "the turn did not finish"
                time.sleep(0.2)

            nb = LabPage(page, lab, "reopen.ipynb")
            nb.wait_text("Finished after the approval timed out.")
            card = page.locator(".dsh-card").first
            pill = card.locator(".dsh-pill").inner_text().lower()
            nb.screenshot(ARTIFACTS / "lab-reopened.png")
            assert "waiting" not in pill, pill
            assert "no answer in time" in card.inner_text()
            assert not nb.button("Allow once").count()  # decided: the buttons are gone
            assert nb.widget_errors() == []
