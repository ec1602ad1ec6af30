"""A real JupyterLab in headless Debian Chromium, driven by Playwright, for the browser tier.

``lab_server(root, env=…)`` starts ``jupyter lab`` from this virtualenv on 127.0.0.1 (free port, a
token, private config/data/runtime/settings/workspace directories, no news or update checks, the
app exposed as ``window.jupyterapp``); the kernelspecs of this checkout are put on ``JUPYTER_PATH``
and ``env`` reaches the kernels Lab starts (e.g. the loopback provider's URL). The notebook
extension Lab loads is this checkout's build (``widgets/labextension``, copied onto that
``JUPYTER_PATH``, which Lab searches before the virtualenv's copy) when there is one, so a test
runs against the extension of the tree it tests, whichever virtualenv runs it; without a build, Lab
loads the one installed in the virtualenv. ``browser(tmp)``
launches Chromium from ``/usr/bin/chromium`` with a fresh profile (PLATFORM.md: never
``playwright install``). ``LabPage`` wraps the page with the few actions the tests need.

Only processes started here are stopped, by process group id: the Lab server (and the kernels it
started) and the browser Playwright launched.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.kernel import kernelspecs

CHROMIUM = "/usr/bin/chromium"
CHECKOUT_LABEXTENSION = Path(__file__).resolve().parents[2] / "widgets" / "labextension"
"""This checkout's build of the notebook extension (``cd widgets && npm run build``)."""
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
TOKEN = "dsh-browser-test"

KERNEL_IDLE_JS = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle' && k.connectionStatus === 'connected';
}"""

MODEL_CELLS_JS = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  return w.content.model.sharedModel.cells.map((c) => ({
    id: c.id, cell_type: c.cell_type, source: c.getSource(), metadata: c.getMetadata()}));
}"""

COMM_STATE_JS = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  return (w && w.node.dataset.dshNotebookComm) || null;
}"""


def missing_requirements() -> list[str]:
    """What this machine lacks to run the browser tier, each with how to install it (empty when all
    is there)."""
    out: list[str] = []
    if not Path(CHROMIUM).exists():
        out.append(
            f"Chromium at {CHROMIUM}: apt-get install chromium fonts-noto-color-emoji "
            "(CI's .ci/run installs it)"
        )
    for module in ("playwright", "jupyterlab"):
        try:
            __import__(module)
        except ImportError:
            out.append(f"the {module} package: make setup-dev")
    return out


def require_browser() -> None:
    """Fail the calling test with one line (no traceback) when ``missing_requirements()`` is not
    empty: the browser tier never skips, so a machine without Chromium cannot pass for green."""
    missing = missing_requirements()
    if missing:
        pytest.fail(f"the browser tier needs {'; and '.join(missing)}", pytrace=False)


def install_checkout_labextension(data: Path) -> bool:
    """Copy this checkout's built notebook extension into the Jupyter data dir ``data`` (one that
    is first on ``JUPYTER_PATH``, so Lab loads it rather than the virtualenv's); False when the
    checkout has no build."""
    if not (CHECKOUT_LABEXTENSION / "package.json").exists():
        return False
    target = data / "labextensions" / "dsh-kernel"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(CHECKOUT_LABEXTENSION, target)
    return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Lab:
    url: str
    root: Path
    process: subprocess.Popen[bytes]
    log: Path

    def notebook_url(self, path: str) -> str:
        return f"{self.url}/lab/tree/{path}?token={TOKEN}&reset"

    def api(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}{path}?token={TOKEN}", timeout=5) as r:
            return json.loads(r.read())


@contextmanager
def lab_server(root: Path, work: Path, env: Mapping[str, str] | None = None) -> Iterator[Lab]:
    dirs = {
        "JUPYTER_CONFIG_DIR": work / "config",
        "JUPYTER_DATA_DIR": work / "data",
        "JUPYTER_RUNTIME_DIR": work / "runtime",
        "JUPYTERLAB_SETTINGS_DIR": work / "settings",
        "JUPYTERLAB_WORKSPACES_DIR": work / "workspaces",
    }
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    apputils = dirs["JUPYTERLAB_SETTINGS_DIR"] / "@jupyterlab" / "apputils-extension"
    apputils.mkdir(parents=True, exist_ok=True)
    (apputils / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}), encoding="utf-8"
    )
    jupyter_path = kernelspecs(work)
    install_checkout_labextension(jupyter_path)
    full_env = {
        **os.environ,
        **{k: str(v) for k, v in dirs.items()},
        "JUPYTER_PATH": str(jupyter_path),
        **(env or {}),
    }
    port = _free_port()
    cmd = [
        str(Path(sys.executable).with_name("jupyter")),
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={TOKEN}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.extension_manager=readonly",
    ]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = work / "lab.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, env=full_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    lab = Lab(url=f"http://127.0.0.1:{port}", root=root, process=proc, log=log)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"jupyter lab exited ({proc.returncode}):\n{log.read_text()[-3000:]}"
                )
            try:
                lab.api("/api/status")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"jupyter lab did not start:\n{log.read_text()[-3000:]}"
                    ) from None
                time.sleep(0.1)
        yield lab
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the group we created: Lab and its kernels
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@contextmanager
def browser(work: Path, *, width: int = 1300, height: int = 1000) -> Iterator[Any]:
    """A Chromium context (fresh profile); yields its page."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(work / "chromium-profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": width, "height": height},
        )
        try:
            yield ctx.pages[0] if ctx.pages else ctx.new_page()
        finally:
            ctx.close()


class LabPage:
    """One notebook open in Lab."""

    def __init__(self, page: Any, lab: Lab, notebook: str, *, timeout_s: float = 60) -> None:
        self.page = page
        self.lab = lab
        self.timeout_ms = timeout_s * 1000
        self.console: list[str] = []
        page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"[:500]))
        page.goto(lab.notebook_url(notebook), wait_until="load", timeout=self.timeout_ms)
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=self.timeout_ms)

    def wait_kernel_idle(self) -> None:
        self.page.wait_for_function(KERNEL_IDLE_JS, timeout=self.timeout_ms)

    def model_cells(self) -> list[dict[str, Any]]:
        """The open notebook's cells as its model holds them (what the user sees, saved or not):
        id, cell_type, source, metadata."""
        return self.page.evaluate(MODEL_CELLS_JS)

    def comm_state(self) -> str | None:
        """The notebook extension's ``dsh.notebook`` comm state on the open panel (``open``,
        ``closed``, ``none`` for a kernel that is not a dsh kernel), or None without the
        extension."""
        return self.page.evaluate(COMM_STATE_JS)

    def wait_comm_state(self, state: str) -> None:
        self.page.wait_for_function(
            f"() => ({COMM_STATE_JS})() === {json.dumps(state)}", timeout=self.timeout_ms
        )

    @property
    def cells(self) -> Any:
        return self.page.locator(".jp-NotebookPanel:visible .jp-Notebook .jp-Cell")

    def run_cell(self, n: int) -> None:
        """Click into cell ``n`` and run it with Shift+Enter, as a person would."""
        self.cells.nth(n).locator(".jp-InputArea-editor").click()
        self.page.keyboard.press("Shift+Enter")

    def wait_text(self, text: str) -> Any:
        loc = self.page.get_by_text(text, exact=False).first
        loc.wait_for(state="visible", timeout=self.timeout_ms)
        return loc

    def button(self, label: str) -> Any:
        return self.page.locator("button.jupyter-button:visible", has_text=label).first

    def widget_errors(self) -> list[str]:
        """Texts of widget views that failed to render (ipywidgets' error widget)."""
        errors = self.page.locator(
            ".jupyter-widgets-error-widget, .jp-OutputArea-output:has-text('Error displaying widget')"
        )
        return [errors.nth(i).inner_text()[:300] for i in range(errors.count())]

    def save(self) -> None:
        self.page.keyboard.press("Control+s")
        self.page.wait_for_timeout(500)

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path), full_page=True)
