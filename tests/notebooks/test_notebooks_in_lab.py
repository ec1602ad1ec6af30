"""Every teaching notebook in a real JupyterLab, in headless Debian Chromium (Playwright), through the
browser tier's helper (``tests.support.lab``).

Each notebook is executed headless first (``run_notebook``: nbclient with the widget state saved, as
the notebook tests do), trusted, and opened in Lab: its saved chat views must render as widgets, with
no widget error view. The quickstart is also run live in the page — Run All, then a click on
**Allow once** in the tool card — as a newcomer would. Screenshots go to ``artifacts/browser/``
(gitignored), for a person to look at.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.support.lab import (
    Lab,
    LabPage,
    browser,
    lab_server,
    missing_requirements,
    require_browser,
)
from tests.support.notebooks import ROOT, run_notebook
from tests.support.sse_server import SseServer, sse_reply
from tests.support.wire_transcripts import anthropic_text, chat_text_stream, deepseek_thinking_text

ARTIFACTS = ROOT / "artifacts" / "browser"
ERROR_VIEWS = ".jupyter-widgets-error-widget, .jp-RenderedText[data-mime-type='application/vnd.jupyter.stderr']"
NOTEBOOKS = [
    "01-quickstart.ipynb",
    "02-sql-over-sessions.ipynb",
    "03-teaching-replay.ipynb",
    "04-providers.ipynb",
    "05-build-a-tool.ipynb",
]
KEYS = {
    "DEEPSEEK_API_KEY": "sk-deepseek-test",
    "OPENAI_API_KEY": "sk-openai-test",
    "ANTHROPIC_API_KEY": "sk-ant-test",
}


@pytest.fixture(autouse=True)
def _browser_requirements() -> None:
    require_browser()  # one line naming what to install, before any Lab starts


def test_the_browser_tier_can_run_here() -> None:
    assert missing_requirements() == []


def trust(notebook: Path, lab_work: Path) -> None:
    """``jupyter trust`` into the data directory ``lab_server(…, lab_work)`` gives Lab, so the saved
    widget state renders."""
    env = {**os.environ, "JUPYTER_DATA_DIR": str(lab_work / "data")}
    jupyter = str(Path(sys.executable).with_name("jupyter"))
    subprocess.run([jupyter, "trust", str(notebook)], env=env, check=True, capture_output=True)


def kernel_env(tmp: Path) -> dict[str, str]:
    """What the kernels Lab starts see: a private store, and no provider keys (the offline demo)."""
    return {"DSH_STORE": str(tmp / "lab-store"), **{k: "" for k in KEYS}}


def fake_providers() -> list[Any]:
    return [
        sse_reply(deepseek_thinking_text("A greeting.", "Hello from the DeepSeek fake!")),
        sse_reply(chat_text_stream(["Hello from the OpenAI fake!"])),
        sse_reply(anthropic_text("Hello from the Anthropic fake!")),
        sse_reply(chat_text_stream(["Hello from the Ollama fake!"])),
        sse_reply(chat_text_stream(["Hello from the vLLM fake!"])),
        sse_reply(chat_text_stream(["Hello from the llama.cpp fake!"])),
    ]


@pytest.fixture(scope="module")
def shared_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Lab]]:
    """One JupyterLab for every executed notebook (its root, its work directory, the server): a Lab
    start is most of a notebook's check, and the notebooks do not share anything else."""
    tmp = tmp_path_factory.mktemp("lab-notebooks")
    root = tmp / "root"
    root.mkdir()
    with lab_server(root, tmp / "lab", kernel_env(tmp)) as lab:
        yield root, tmp / "lab", lab


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_executed_notebook_renders_its_saved_chat_views_in_lab(
    name: str, tmp_path: Path, shared_lab: tuple[Path, Path, Lab]
) -> None:
    root, lab_work, lab = shared_lab
    with SseServer(fake_providers()) as server:
        env = {"DSH_APPROVAL": "auto"} if name.startswith("01") else {}
        if name.startswith("04"):
            urls = ("DSH", "DEEPSEEK", "OPENAI", "ANTHROPIC")
            env = {**{f"{p}_BASE_URL": server.url for p in urls}, **KEYS}
        ex = run_notebook(name, tmp_path / "run", env)
    for data in ex.workdir.iterdir():  # the data files the notebooks read, next to them
        if data.suffix == ".ipynb" or (root / data.name).exists():
            continue
        if data.is_dir():
            shutil.copytree(data, root / data.name)
        else:
            shutil.copy(data, root)
    nbformat.write(ex.nb, root / name)
    chat_views = sum(
        1
        for c in ex.nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "dsh-turn-static" in o.get("data", {}).get("text/html", "")
    )
    assert chat_views >= 1
    trust(root / name, lab_work)
    with browser(tmp_path) as page:
        view = LabPage(page, lab, name)
        turns = page.locator(".dsh-turn-static")
        turns.nth(chat_views - 1).wait_for(state="attached", timeout=60_000)
        page.wait_for_timeout(500)
        assert turns.count() == chat_views  # every saved chat turn drew, with no kernel state
        view.screenshot(ARTIFACTS / f"{Path(name).stem}.png")
        chat_cells = page.locator(".jp-Cell", has=page.locator(".dsh-turn-static"))
        for i in range(chat_views):
            shot = ARTIFACTS / f"{Path(name).stem}-chat-{i + 1}.png"
            chat_cells.nth(i).screenshot(path=str(shot))
        assert view.widget_errors() == []
        assert page.locator(ERROR_VIEWS).count() == 0


def test_quickstart_runs_live_in_lab_with_a_click_on_allow(tmp_path: Path) -> None:
    root = tmp_path / "notebooks"
    root.mkdir()
    source = ROOT / "notebooks" / "01-quickstart.ipynb"
    (root / source.name).write_bytes(source.read_bytes())
    with (
        lab_server(root, tmp_path / "lab", kernel_env(tmp_path)) as lab,
        browser(tmp_path) as page,
    ):
        view = LabPage(page, lab, source.name)
        view.wait_kernel_idle()
        view.cells.nth(0).click()  # a Markdown cell: this selects it, in command mode
        page.keyboard.press("Escape")
        page.keyboard.press("Control+A")
        page.keyboard.press("Shift+Enter")  # Run All: the cells run one after the other
        allow = view.button("Allow once")
        allow.wait_for(state="visible", timeout=60_000)
        allow.click()
        view.wait_text("The tool answered")
        page.get_by_text("this session: 2 requests").first.wait_for(
            state="attached", timeout=60_000
        )
        view.wait_kernel_idle()
        page.wait_for_timeout(500)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        chat = page.locator(".jp-Cell", has=page.locator(".dsh-turn-static")).first
        chat.screenshot(path=str(ARTIFACTS / "01-quickstart-live.png"))
        assert page.get_by_text("done · allowed once").count() >= 1
        assert view.widget_errors() == []
        assert page.locator(ERROR_VIEWS).count() == 0
