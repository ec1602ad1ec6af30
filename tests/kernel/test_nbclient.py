"""A notebook on the ``dsh`` kernel run headless by nbclient (``store_widget_state=True``): the saved
notebook keeps the conversation readable without a kernel (each chat cell's output carries the static
Markdown and HTML of its turn beside the widget view) and the widget state in its metadata. A tool
call that needs approval is denied at once, with a clear message, since no one can click (fail
closed)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from tests.kernel.conftest import provider_env
from tests.support import scenarios as sc
from tests.support.kernel import kernelspecs
from tests.support.sse_server import SseServer

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def build_notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "dsh", "display_name": "DSH Agent", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell(
            "%%python\nimport pandas as pd\nsales = pd.DataFrame({'month': ['Jan', 'Feb'], 'units': [12, 30]})"
        ),
        nbformat.v4.new_code_cell("Which month sold more in $`sales`?"),
        nbformat.v4.new_code_cell("Double the units in Python."),
    ]
    return nb


def chat_output(cell: nbformat.NotebookNode) -> Any:
    (out,) = [o for o in cell.outputs if o.output_type == "display_data"]
    return out


def run_headless(
    server: SseServer, tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> nbformat.NotebookNode:
    data = kernelspecs(tmp)
    monkeypatch.setenv("JUPYTER_PATH", str(data))  # where nbclient looks the kernelspec up
    for key in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DSH_MODEL"):
        monkeypatch.delenv(key, raising=False)
    env = {
        **os.environ,
        **provider_env(server, tmp, DSH_STORE=str(tmp / "store")),
        "DSH_HEADLESS_APPROVAL_TIMEOUT": "0.5",
    }
    nb = build_notebook()
    client = NotebookClient(
        nb,
        timeout=60,
        kernel_name="dsh",
        store_widget_state=True,
        resources={"metadata": {"path": str(tmp)}},
    )
    client.execute(env=env, cwd=str(tmp))
    return nb


def test_headless_run_keeps_the_conversation_and_widget_state(
    server: SseServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.script(
        sc.text("**February** sold more: ", "30 units against 12."),
        sc.python_call("sales['units'] = sales['units'] * 2"),
        sc.text("I could not run it without your approval."),
    )
    nb = run_headless(server, tmp_path, monkeypatch)
    path = tmp_path / "executed.ipynb"
    nbformat.write(nb, path)
    saved = nbformat.read(path, as_version=4)
    nbformat.validate(saved)

    first = chat_output(saved.cells[1])
    assert WIDGET_VIEW not in first.data  # the finished turn is saved as its static rendering
    assert "**February** sold more: 30 units against 12." in first.data["text/markdown"]
    assert "<strong>February</strong> sold more" in first.data["text/html"]

    second = chat_output(saved.cells[2])
    markdown = second.data["text/markdown"]
    assert "sales['units'] = sales['units'] * 2" in markdown  # the tool card, statically
    assert "denied" in markdown and "%agent approve auto" in markdown
    assert "I could not run it without your approval." in markdown

    state = saved.metadata["widgets"][WIDGET_STATE]["state"]
    assert any(s["model_name"] == "VBoxModel" for s in state.values())
    answers = [
        s["state"]["value"]
        for s in state.values()
        if s["model_name"] == "HTMLModel" and 'class="dsh-md' in s["state"].get("value", "")
    ]
    assert any("30 units against 12." in a for a in answers)
    assert len(server.requests) == 3
