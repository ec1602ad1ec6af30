"""``python -m dsh_kernel strip`` run as a shell, a pre-commit hook or CI would: subprocesses over
notebooks written to a temporary folder — one with capsules in two outputs, one without, one broken."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

from dsh_kernel.capsule import CAPSULE_KEY

GUARD_S = 120  # only against a hang


def dsh(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    return subprocess.run(
        [sys.executable, "-m", "dsh_kernel", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=GUARD_S,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def chat_notebook(capsules: bool) -> nbformat.NotebookNode:
    nb = new_notebook(metadata={"kernelspec": {"name": "dsh", "display_name": "DSH Agent"}})
    for i in range(2):
        meta = {CAPSULE_KEY: {"version": 1, "session": "s", "turn": i + 1}} if capsules else {}
        out = new_output("display_data", {"text/plain": f"answer {i} ✓"}, metadata=meta)
        nb.cells.append(new_code_cell(f"question {i}", outputs=[out]))
    nb.cells.append(new_code_cell("%%python\nprint(1)", outputs=[]))
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"c{i}"
    return nb


def folder(tmp_path: Path) -> tuple[Path, Path, Path]:
    nbformat.write(chat_notebook(True), tmp_path / "with.ipynb")
    nbformat.write(chat_notebook(False), tmp_path / "without.ipynb")
    (tmp_path / "broken.ipynb").write_text('{"cells": [', encoding="utf-8")
    (tmp_path / "with.ipynb").chmod(0o600)
    return tmp_path / "with.ipynb", tmp_path / "without.ipynb", tmp_path / "broken.ipynb"


def test_strip_removes_the_capsules_reports_each_notebook_and_goes_past_a_broken_one(
    tmp_path: Path,
) -> None:
    with_, without, broken = folder(tmp_path)
    untouched = without.read_bytes()
    done = dsh("strip", "with.ipynb", "broken.ipynb", "without.ipynb", cwd=tmp_path)
    assert done.returncode == 1  # the broken notebook
    assert done.stdout == "with.ipynb: removed 2 capsules\nwithout.ipynb: no capsules\n"
    assert done.stderr == (
        "error: broken.ipynb: not a notebook: not JSON (line 1 column 12: Expecting value)\n"
    )
    # what nbformat writes for the same notebook without the capsules, byte for byte
    assert with_.read_text(encoding="utf-8") == nbformat.writes(chat_notebook(False)) + "\n"
    assert stat.S_IMODE(with_.stat().st_mode) == 0o600
    nbformat.validate(nbformat.read(with_, as_version=4))
    assert without.read_bytes() == untouched
    assert broken.read_text(encoding="utf-8") == '{"cells": ['
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "broken.ipynb",
        "with.ipynb",
        "without.ipynb",
    ]
    clean = dsh("strip", "with.ipynb", "without.ipynb", cwd=tmp_path)
    assert clean.returncode == 0 and clean.stderr == ""
    assert clean.stdout == "with.ipynb: no capsules\nwithout.ipynb: no capsules\n"


def test_check_reports_and_fails_only_when_a_notebook_holds_capsules(tmp_path: Path) -> None:
    with_, _without, _broken = folder(tmp_path)
    held = with_.read_bytes()
    for flag in ("--check", "--dry-run"):
        found = dsh("strip", flag, "without.ipynb", "with.ipynb", cwd=tmp_path)
        assert found.returncode == 1, flag
        assert found.stdout == "without.ipynb: no capsules\nwith.ipynb: would remove 2 capsules\n"
        assert found.stderr == "" and with_.read_bytes() == held
    fine = dsh("strip", "--check", "without.ipynb", cwd=tmp_path)
    assert fine.returncode == 0 and fine.stdout == "without.ipynb: no capsules\n"


def test_output_writes_elsewhere_and_the_command_line_is_checked(tmp_path: Path) -> None:
    with_, _without, _broken = folder(tmp_path)
    held = with_.read_bytes()
    done = dsh("strip", "with.ipynb", "-o", "shared.ipynb", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "with.ipynb: removed 2 capsules (written to shared.ipynb)\n"
    assert with_.read_bytes() == held
    shared = json.loads((tmp_path / "shared.ipynb").read_text(encoding="utf-8"))
    assert all(CAPSULE_KEY not in o["metadata"] for c in shared["cells"] for o in c["outputs"])
    again = dsh("strip", "with.ipynb", "-o", "shared.ipynb", cwd=tmp_path)
    assert again.returncode == 1
    assert again.stderr == "error: shared.ipynb: already exists; give --force to replace it\n"
    assert dsh("strip", "with.ipynb", "-o", "shared.ipynb", "--force", cwd=tmp_path).returncode == 0

    for wrong, says in (
        (["with.ipynb", "without.ipynb", "-o", "x.ipynb"], "-o/--output takes one NOTEBOOK"),
        (["--check", "with.ipynb", "-o", "x.ipynb"], "--check writes nothing"),
        ([], "the following arguments are required: NOTEBOOK"),
    ):
        bad = dsh("strip", *wrong, cwd=tmp_path)
        assert bad.returncode == 2, wrong
        assert bad.stderr.startswith("usage: python -m dsh_kernel strip"), wrong
        assert says in bad.stderr and "Traceback" not in bad.stderr, wrong
        assert not (tmp_path / "x.ipynb").exists()
    for gone, says in (("nowhere.ipynb", "no such file"), (".", "a folder, not a notebook")):
        missing = dsh("strip", gone, cwd=tmp_path)
        assert missing.returncode == 1 and missing.stderr == f"error: {gone}: {says}\n"
    helped = dsh("help", "strip", cwd=tmp_path)
    assert helped.returncode == 0 and "--check, --dry-run" in helped.stdout
    listed = dsh("--help", cwd=tmp_path)
    assert "\n    strip     remove the session capsules from notebooks\n" in listed.stdout
