"""``python -m dsh_kernel`` beside a real kernel: the kernelspecs' command line starts the kernel (and
so does the one written before the ``kernel`` subcommand), and a student's store is exported and reported by the CLI while the kernel that writes it
runs (its database opens are short, so it does not lock the CLI out)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.kernel import start_kernel

GUARD_S = 180  # only against a hang


def dsh(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    return subprocess.run(
        [sys.executable, "-m", "dsh_kernel", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=GUARD_S,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def test_the_kernelspecs_command_line_still_starts_the_kernel(tmp_path: Path) -> None:
    # kernel.json: python -m dsh_kernel kernel -f {connection_file} --DshKernel.default_cell=python
    with start_kernel(tmp_path, "dsh-python") as k:
        assert k.python("print(1 + 1)") == "2\n"
        assert k.python("print(get_ipython().kernel.default_cell)") == "python\n"


def test_a_kernelspec_written_before_the_kernel_subcommand_still_starts_it(tmp_path: Path) -> None:
    # what `python -m dsh_kernel install` wrote before: no `kernel` word before -f
    old = tmp_path / "jupyter-data" / "kernels" / "dsh-old"
    old.mkdir(parents=True)
    argv = [sys.executable, "-m", "dsh_kernel", "-f", "{connection_file}"]
    spec = {
        "argv": [*argv, "--DshKernel.default_cell=python"],
        "display_name": "old",
        "language": "python",
    }
    (old / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    with start_kernel(tmp_path, "dsh-old") as k:
        assert k.python("print(get_ipython().kernel.default_cell)") == "python\n"


def test_a_running_kernels_store_is_exported_and_reported_by_its_student(tmp_path: Path) -> None:
    store = tmp_path / "store"
    env = {
        "DSH_PROVIDER": "offline",
        "DSH_HEADLESS_APPROVAL_TIMEOUT": "0.1",
        "JUPYTERHUB_USER": "dana",
    }
    with start_kernel(tmp_path / "k", "dsh", env=env, store=store) as k:
        chat = k.execute("Hello! What can you do?", timeout=60)
        assert chat.status == "ok", chat.content
        (tmp_path / "course").mkdir()
        out = tmp_path / "course" / "folder-name"
        done = dsh("export", "--parquet", out, "--store", store)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"exported 1 session from {store} to {out}")
        assert k.python("print(1)") == "1\n"  # the kernel is unaffected
    report = dsh("report", tmp_path / "course")
    assert report.returncode == 0, report.stderr
    row = next(
        line for line in report.stdout.splitlines() if line.startswith("| dana |")
    )  # the header's user, not the folder's name
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:4] == ["1", "1"]  # one session, one turn
    assert cells[-2] == "full"
