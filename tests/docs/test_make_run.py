"""The README's setup command, ``make run``, run for real: it sets the project up in ``.venv`` (an
editable install with JupyterLab, the kernelspecs into the venv, the notebook extension built) and
serves ``notebooks/`` in JupyterLab with both kernelspecs listed and the extension loaded. Lab is
stopped (by its process group) once checked."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "dsh-make-run-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def test_make_run_sets_up_and_opens_the_notebooks_with_both_kernelspecs(tmp_path: Path) -> None:
    port = free_port()
    env = dict(os.environ)
    env.pop("JUPYTER_PATH", None)
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR"):
        env[name] = str(tmp_path / name.lower())
    env["JUPYTERLAB_SETTINGS_DIR"] = str(tmp_path / "lab-settings")
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(tmp_path / "lab-workspaces")
    lab_args = (
        f"--no-browser --ip=127.0.0.1 --port={port} --IdentityProvider.token={TOKEN} "
        "--LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"
    )
    log = (tmp_path / "make-run.log").open("w")
    proc = subprocess.Popen(
        ["make", "run", f"LAB_ARGS={lab_args}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600  # a first run installs; later runs only start Lab
        while True:
            assert proc.poll() is None, (tmp_path / "make-run.log").read_text()
            try:
                get(f"{base}/api/status?token={TOKEN}")
                break
            except OSError:
                assert time.monotonic() < deadline, "JupyterLab did not come up"
                time.sleep(0.25)
        specs = get(f"{base}/api/kernelspecs?token={TOKEN}")["kernelspecs"]
        assert {"dsh", "dsh-python"} <= set(specs)
        assert specs["dsh"]["spec"]["display_name"] == "DSH Agent"
        assert specs["dsh-python"]["spec"]["display_name"] == "DSH Python"
        # Installed into the venv with this interpreter's absolute path (not a bare `python`).
        venv_python = ROOT / ".venv" / "bin" / "python"
        assert Path(specs["dsh"]["spec"]["argv"][0]) == venv_python
        names = {c["name"] for c in get(f"{base}/api/contents?token={TOKEN}")["content"]}
        assert {
            "01-quickstart.ipynb",
            "02-sql-over-sessions.ipynb",
            "03-teaching-replay.ipynb",
            "04-providers.ipynb",
            "05-build-a-tool.ipynb",
            "data",
        } <= names
        assert (ROOT / ".venv" / ".dsh-setup-lab").exists()
        # The notebook extension the editable install built is one Lab loads (its page config).
        with urllib.request.urlopen(f"{base}/lab?token={TOKEN}", timeout=10) as r:
            page = r.read().decode()
        found = re.search(r'<script id="jupyter-config-data"[^>]*>(.*?)</script>', page, re.S)
        assert found, page[:500]
        config = json.loads(found.group(1))
        assert "dsh-kernel" in {e["name"] for e in config["federated_extensions"]}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # make and the Lab it started: their own session
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
