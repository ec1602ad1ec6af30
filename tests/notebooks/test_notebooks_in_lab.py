"""Every teaching notebook in a real JupyterLab, in headless Debian Chromium (Playwright).

Each notebook is executed headless first (``run_notebook``: nbclient with the widget state saved, as
the notebook tests do), trusted, and opened in Lab: its saved chat views must render as widgets with
no widget error view. The quickstart is also run live in the page — Run All, then a click on
**Allow** in the tool card — as a newcomer would. Screenshots go to ``artifacts/browser/``
(gitignored), kept for a person to look at.

Needs Debian's ``chromium`` (``/usr/bin/chromium``) and ``playwright`` (pip; never ``playwright
install``); without them these tests fail, saying so.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.support.notebooks import ROOT, run_notebook
from tests.support.sse_server import SseServer, sse_reply
from tests.support.wire_transcripts import anthropic_text, chat_text_stream, deepseek_thinking_text

ARTIFACTS = ROOT / "artifacts" / "browser"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "dsh-notebooks"
KERNEL_IDLE = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle' && k.connectionStatus === 'connected';
}"""
ERROR_VIEWS = ".jupyter-widgets-error-widget, .jp-RenderedText[data-mime-type='application/vnd.jupyter.stderr']"


@dataclass
class Lab:
    url: str
    env: dict[str, str]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def jupyter_lab(root: Path, work: Path, env: dict[str, str]) -> Iterator[Lab]:
    """JupyterLab on 127.0.0.1 serving ``root``, with private config, data, runtime, settings and
    workspace directories (the venv's kernelspecs are still found); stopped by its process group."""
    lab_env = dict(env)
    for name in (
        "JUPYTER_CONFIG_DIR",
        "JUPYTER_DATA_DIR",
        "JUPYTER_RUNTIME_DIR",
        "JUPYTERLAB_SETTINGS_DIR",
        "JUPYTERLAB_WORKSPACES_DIR",
    ):
        lab_env[name] = str(work / name.lower())
        Path(lab_env[name]).mkdir(parents=True, exist_ok=True)
    settings = Path(lab_env["JUPYTERLAB_SETTINGS_DIR"]) / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}), encoding="utf-8"
    )
    port = _free_port()
    cmd = [
        str(Path(sys.executable).parent / "jupyter"),
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={TOKEN}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.expose_app_in_browser=True",
    ]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = (work / "lab.log").open("w")
    proc = subprocess.Popen(
        cmd, env=lab_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (work / "lab.log").read_text()
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, "JupyterLab did not come up"
                time.sleep(0.1)
        yield Lab(url=base, env=lab_env)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@contextmanager
def browser(work: Path) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "Debian's chromium is needed: apt-get install -y chromium"
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(work / "chromium-profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield ctx.pages[0] if ctx.pages else ctx.new_page()
        finally:
            ctx.close()


def open_notebook(page: Any, lab: Lab, name: str, *, kernel: bool) -> None:
    page.goto(f"{lab.url}/lab/tree/{name}?token={TOKEN}&reset", wait_until="load")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
    if kernel:
        page.wait_for_function(KERNEL_IDLE, timeout=60_000)


def kernel_env(tmp: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "JUPYTER_PATH")
    }
    env["DSH_STORE"] = str(tmp / "lab-store")
    env.update(extra or {})
    return env


def fake_providers() -> list[Any]:
    return [
        sse_reply(deepseek_thinking_text("A greeting.", "Hello from the DeepSeek fake!")),
        sse_reply(chat_text_stream(["Hello from the OpenAI fake!"])),
        sse_reply(anthropic_text("Hello from the Anthropic fake!")),
        sse_reply(chat_text_stream(["Hello from the Ollama fake!"])),
        sse_reply(chat_text_stream(["Hello from the vLLM fake!"])),
        sse_reply(chat_text_stream(["Hello from the llama.cpp fake!"])),
    ]


NOTEBOOKS = [
    "01-quickstart.ipynb",
    "02-sql-over-sessions.ipynb",
    "03-teaching-replay.ipynb",
    "04-providers.ipynb",
    "05-build-a-tool.ipynb",
]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_executed_notebook_renders_its_saved_chat_views_in_lab(name: str, tmp_path: Path) -> None:
    extra = {"DSH_APPROVAL": "auto"} if name.startswith("01") else {}
    keys = {
        "DEEPSEEK_API_KEY": "sk-deepseek-test",
        "OPENAI_API_KEY": "sk-openai-test",
        "ANTHROPIC_API_KEY": "sk-ant-test",
    }
    with SseServer(fake_providers()) as server:
        if name.startswith("04"):
            extra = {"DSH_BASE_URL": server.url, **keys}
        ex = run_notebook(name, tmp_path / "run", extra)
    nbformat.write(ex.nb, ex.workdir / name)
    chat_views = sum(
        1
        for c in ex.nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    )
    assert chat_views >= 1
    with jupyter_lab(ex.workdir, tmp_path / "lab", kernel_env(tmp_path)) as lab:
        subprocess.run(
            [str(Path(sys.executable).parent / "jupyter"), "trust", str(ex.workdir / name)],
            env=lab.env,
            check=True,
            capture_output=True,
        )
        with browser(tmp_path) as page:
            open_notebook(page, lab, name, kernel=False)
            footers = page.locator(".dsh-footer")
            footers.nth(chat_views - 1).wait_for(state="attached", timeout=60_000)
            page.wait_for_timeout(500)
            assert footers.count() == chat_views  # every saved chat view drew as a widget
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / f"{Path(name).stem}.png"))
            chat_cells = page.locator(".jp-Cell", has=page.locator(".dsh-footer"))
            for i in range(chat_views):
                chat_cells.nth(i).screenshot(
                    path=str(ARTIFACTS / f"{Path(name).stem}-chat-{i + 1}.png")
                )
            assert page.locator(ERROR_VIEWS).count() == 0
            assert page.get_by_text("Error displaying widget").count() == 0


def test_quickstart_runs_live_in_lab_with_a_click_on_allow(tmp_path: Path) -> None:
    root = tmp_path / "notebooks"
    root.mkdir()
    source = ROOT / "notebooks" / "01-quickstart.ipynb"
    (root / source.name).write_bytes(source.read_bytes())
    with (
        jupyter_lab(root, tmp_path / "lab", kernel_env(tmp_path)) as lab,
        browser(tmp_path) as page,
    ):
        open_notebook(page, lab, source.name, kernel=True)
        cells = page.locator(".jp-NotebookPanel:visible .jp-Notebook .jp-Cell")
        cells.nth(0).click()  # a Markdown cell: selects it, in command mode
        page.keyboard.press("Escape")
        page.keyboard.press("Control+A")
        page.keyboard.press("Shift+Enter")  # Run All: the cells run one after the other
        allow = page.locator("button.jupyter-button", has_text="Allow once").first
        allow.wait_for(state="visible", timeout=60_000)
        allow.click()
        page.get_by_text("The tool answered").first.wait_for(state="visible", timeout=60_000)
        page.get_by_text("this session: 2 requests").first.wait_for(
            state="attached", timeout=60_000
        )
        page.wait_for_function(KERNEL_IDLE, timeout=60_000)
        page.wait_for_timeout(500)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        chat = page.locator(".jp-Cell", has=page.locator(".dsh-footer")).first
        chat.screenshot(path=str(ARTIFACTS / "01-quickstart-live.png"))
        assert page.get_by_text("done · allowed once").count() >= 1
        assert page.locator(ERROR_VIEWS).count() == 0
        assert page.get_by_text("Error displaying widget").count() == 0
