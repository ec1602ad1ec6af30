"""The README's setup command, ``make run``, run for real: it sets the project up in ``.venv`` (an
editable install with JupyterLab, the kernelspecs into the venv, the notebook extension built) and
serves ``my-notebooks/``, its copy of ``notebooks/``, in JupyterLab with both kernelspecs listed and
the extension loaded; what Lab writes there (a notebook saved with outputs, its checkpoint) leaves
``git status`` as it was. Lab is stopped (by its process group) once checked. ``make notebook-copy``
(the copy ``make run`` makes first) is checked on its own: it never overwrites a file of the copy."""

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


def call(method: str, url: str, body: Any = None) -> Any:
    """One request to Lab's REST API with a JSON body; its JSON answer (``None`` when empty)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as r:
        raw = r.read()
    return json.loads(raw) if raw else None


def git_status() -> str:
    """``git status`` of the checkout, untracked files included (ignored ones are not shown)."""
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


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
    status_before = git_status()
    scratch = ""
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
        # Lab serves the copy, not the tracked notebooks: a notebook saved there with outputs (as
        # Lab's autosave does after a Run All) and its checkpoint leave `git status` unchanged.
        copy = ROOT / "my-notebooks"
        made = call(
            "POST", f"{base}/api/contents?token={TOKEN}", {"copy_from": "01-quickstart.ipynb"}
        )
        scratch = made["path"]
        assert (copy / scratch).is_file()
        notebook = get(f"{base}/api/contents/{scratch}?token={TOKEN}")["content"]
        cell = next(c for c in notebook["cells"] if c["cell_type"] == "code")
        cell["execution_count"] = 1
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "saved by Lab\n"}]
        url = f"{base}/api/contents/{scratch}?token={TOKEN}"
        call("PUT", url, {"type": "notebook", "format": "json", "content": notebook})
        call("POST", f"{base}/api/contents/{scratch}/checkpoints?token={TOKEN}")
        assert "saved by Lab" in (copy / scratch).read_text(encoding="utf-8")
        assert list(copy.glob(".ipynb_checkpoints/*.ipynb"))
        assert git_status() == status_before
        # The notebook extension the editable install built is one Lab loads (its page config).
        with urllib.request.urlopen(f"{base}/lab?token={TOKEN}", timeout=10) as r:
            page = r.read().decode()
        found = re.search(r'<script id="jupyter-config-data"[^>]*>(.*?)</script>', page, re.S)
        assert found, page[:500]
        config = json.loads(found.group(1))
        assert "dsh-kernel" in {e["name"] for e in config["federated_extensions"]}
    finally:
        if scratch:
            call("DELETE", f"{base}/api/contents/{scratch}?token={TOKEN}")
        os.killpg(proc.pid, signal.SIGTERM)  # make and the Lab it started: their own session
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def notebook_copy(copy: Path) -> str:
    done = subprocess.run(
        ["make", "--no-print-directory", "notebook-copy", f"NOTEBOOK_COPY={copy}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_the_notebook_copy_is_made_once_and_never_overwritten(tmp_path: Path) -> None:
    copy = tmp_path / "my-notebooks"
    assert f"{copy}/" in notebook_copy(copy)
    shipped = sorted(p.relative_to(ROOT / "notebooks") for p in (ROOT / "notebooks").rglob("*"))
    assert sorted(p.relative_to(copy) for p in copy.rglob("*")) == [
        p for p in shipped if ".ipynb_checkpoints" not in p.parts
    ]
    assert (copy / "data" / "teaching-session.jsonl").is_file()  # what the notebooks read
    edited = copy / "01-quickstart.ipynb"
    edited.write_text("my edits", encoding="utf-8")
    (copy / "02-sql-over-sessions.ipynb").unlink()
    notebook_copy(copy)
    assert edited.read_text(encoding="utf-8") == "my edits"  # a person's copy is kept
    restored = (copy / "02-sql-over-sessions.ipynb").read_bytes()
    assert restored == (ROOT / "notebooks" / "02-sql-over-sessions.ipynb").read_bytes()


def test_git_ignores_what_running_the_notebooks_writes() -> None:
    paths = [
        "my-notebooks/01-quickstart.ipynb",  # make run's copy
        "my-notebooks/.ipynb_checkpoints/01-quickstart-checkpoint.ipynb",
        "notebooks/.ipynb_checkpoints/01-quickstart-checkpoint.ipynb",  # Lab run in place
        "notebooks/course-report.html",  # notebook 06, run in place
        "notebooks/class-store/sessions.duckdb",
    ]
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert sorted(done.stdout.split()) == sorted(paths)
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "NOTEBOOK_COPY ?= my-notebooks\n" in makefile
    assert "--ServerApp.root_dir='$(NOTEBOOK_COPY)'" in makefile
