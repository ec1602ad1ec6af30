"""A plain install, as a new user makes it: the wheel and the sdist are built from this tree; the wheel
is installed with ``pip install`` (no extras) into a fresh virtualenv, the files it installed are
checked against the list of data files the package must ship, and notebooks 01–03 are run headless
with nbclient (from this test environment) on the kernelspecs that install registered — the kernel runs
in that virtualenv with only the core dependencies, so a notebook needing an undeclared package fails.

The sdist is checked the way ``pip install <sdist>`` uses it: pip builds a wheel from it (in an
isolated build environment, fetching the build backend) and installs that wheel. So the test builds
that wheel with ``pip wheel --no-deps <sdist>`` and requires it to hold exactly the files of the wheel
built from the tree, byte for byte — a file missing from the sdist shows up as a difference — without
paying for a second virtualenv with every dependency (about a minute on the 2-core machine).

This tier costs one fresh virtualenv and three notebook runs."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import nbformat
import pytest

from tests.support.notebooks import run_notebook

ROOT = Path(__file__).resolve().parents[2]

DATA_FILES = {
    # Both kernelspecs, as wheel shared-data (relative to the environment's prefix).
    "share/jupyter/kernels/dsh/kernel.json",
    "share/jupyter/kernels/dsh/logo-32x32.png",
    "share/jupyter/kernels/dsh/logo-64x64.png",
    "share/jupyter/kernels/dsh-python/kernel.json",
    "share/jupyter/kernels/dsh-python/logo-32x32.png",
    "share/jupyter/kernels/dsh-python/logo-64x64.png",
    # Package data (relative to site-packages).
    "dsh_kernel/py.typed",
    "dsh_kernel/views/dsh.css",
    "dsh_kernel/kernel/logos/logo-32x32.png",
    "dsh_kernel/kernel/logos/logo-64x64.png",
    # The local store: the projection's derived tables and views, and the migration of what is not
    # derived (user prices).
    "dsh_kernel/store/sql/tables.sql",
    "dsh_kernel/store/sql/views.sql",
    "dsh_kernel/store/sql/0010_projection.sql",
    # The shared store's PostgreSQL migrations (its own, beside the DuckDB ones).
    "dsh_kernel/store/shared/migrations/0001_events.sql",
    "dsh_kernel/store/shared/migrations/0002_sessions.sql",
    "dsh_kernel/store/shared/migrations/0003_consistent_sessions.sql",
    "dsh_kernel/store/shared/migrations/0004_bounded_events.sql",
}
"""Every non-Python file a plain install must contain; an issue that ships a new one adds it here."""

LABEXTENSION = ROOT / "widgets" / "labextension"


def labextension_files() -> set[str]:
    """The prebuilt notebook extension (issue 18), as shared-data: every file npm built into
    ``widgets/labextension`` (its bundle names carry content hashes, so they are read, not listed)
    and ``install.json``. A wheel with a file missing, or an extra one, fails the equality below."""
    built = {p.relative_to(LABEXTENSION).as_posix() for p in LABEXTENSION.rglob("*") if p.is_file()}
    assert {"package.json", "static/style.js"} <= built, f"not built: {sorted(built)}"
    assert any(f.startswith("static/remoteEntry.") for f in built), sorted(built)
    prefix = "share/jupyter/labextensions/dsh-kernel/"
    return {prefix + f for f in built} | {prefix + "install.json"}


NOTEBOOKS = {
    "01-quickstart.ipynb": {"DSH_APPROVAL": "auto"},
    "02-sql-over-sessions.ipynb": {},
    "03-teaching-replay.ipynb": {},
}

pytestmark = pytest.mark.timeout(900)


def run(*cmd: str | Path, cwd: Path = ROOT) -> str:
    proc = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, f"{cmd}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", out)
    (wheel,) = out.glob("dsh_kernel-*.whl")
    (sdist,) = out.glob("dsh_kernel-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


@pytest.fixture(scope="module")
def plain_env(dists: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with only ``pip install <the wheel>`` in it."""
    prefix = tmp_path_factory.mktemp("plain-wheel")
    venv.create(prefix, with_pip=True)
    python = prefix / "bin" / "python"
    run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", dists["wheel"])
    return prefix


def wheel_contents(wheel: Path) -> dict[str, str]:
    """Each file of ``wheel`` (its RECORD aside) with the sha256 of its bytes."""
    with zipfile.ZipFile(wheel) as zf:
        return {
            name: hashlib.sha256(zf.read(name)).hexdigest()
            for name in zf.namelist()
            if not name.endswith(".dist-info/RECORD")
        }


def test_the_sdist_builds_the_same_wheel(
    dists: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    out = tmp_path_factory.mktemp("from-sdist")
    run(
        sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check",
        "--wheel-dir", out, dists["sdist"],
    )  # fmt: skip
    (rebuilt,) = out.glob("dsh_kernel-*.whl")
    expected, got = wheel_contents(dists["wheel"]), wheel_contents(rebuilt)
    assert sorted(set(expected) ^ set(got)) == []  # no file missing from the sdist, none extra
    assert [n for n in expected if expected[n] != got[n]] == []


def installed_files(prefix: Path) -> set[str]:
    """The distribution's RECORD, with shared-data as prefix-relative paths."""
    script = (
        "import json, importlib.metadata as m, sys, pathlib\n"
        "site = pathlib.Path(m.distribution('dsh-kernel').locate_file(''))\n"
        "prefix = pathlib.Path(sys.prefix).resolve()\n"
        "out = []\n"
        "for f in m.files('dsh-kernel'):\n"
        "    p = pathlib.Path(f.locate()).resolve()\n"
        "    out.append(str(p.relative_to(prefix)) if p.is_relative_to(prefix) and not"
        " p.is_relative_to(site.resolve()) else str(p.relative_to(site.resolve())))\n"
        "print(json.dumps(out))\n"
    )
    return set(json.loads(run(prefix / "bin" / "python", "-c", script)))


def test_a_plain_install_ships_every_data_file_and_no_developer_tools(plain_env: Path) -> None:
    files = installed_files(plain_env)
    assert "bin/dsh-kernel" in files  # the console script ([project.scripts])
    data = {
        f
        for f in files
        if not f.endswith((".py", ".pyc")) and ".dist-info/" not in f and f != "bin/dsh-kernel"
    }
    assert data == DATA_FILES | labextension_files()
    spec = json.loads((plain_env / "share/jupyter/kernels/dsh/kernel.json").read_text())
    assert spec["argv"][:4] == ["python", "-m", "dsh_kernel", "kernel"]
    assert spec["display_name"] == "DSH Agent"
    # the console script beside `python -m dsh_kernel`: with no arguments, its help (nothing waits)
    helped = run(plain_env / "bin" / "dsh-kernel")
    assert helped.startswith("usage: dsh-kernel [-h] [--version] COMMAND ...")
    assert "\n    mirror    pull the shared store's sessions" in helped
    # The notebook extension is where JupyterLab and Notebook 7 look for prebuilt extensions, with
    # the entry point its metadata names, and says which Python package installed it.
    ext = plain_env / "share/jupyter/labextensions/dsh-kernel"
    meta = json.loads((ext / "package.json").read_text())
    assert meta["name"] == "dsh-kernel"
    assert (ext / meta["jupyterlab"]["_build"]["load"]).is_file()
    assert json.loads((ext / "install.json").read_text())["packageName"] == "dsh-kernel"
    # The core dependencies are there; the dev, lab and shared extras are not.
    probe = "import importlib.util as u; print([m for m in %r if u.find_spec(m)])"
    wanted = (
        "pandas",
        "matplotlib",
        "duckdb",
        "ipywidgets",
        "pytest",
        "jupyterlab",
        "playwright",
        "psycopg",
    )
    found = json.loads(run(plain_env / "bin" / "python", "-c", probe % (wanted,)).replace("'", '"'))
    assert found == ["pandas", "matplotlib", "duckdb", "ipywidgets"]


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_a_plain_install_runs_the_first_notebooks(
    plain_env: Path, name: str, tmp_path: Path
) -> None:
    # The notebook as shipped, plus one last cell that says which environment the kernel ran in.
    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    probe = "import sys\nprint('kernel prefix:', sys.prefix)"
    if nb.metadata["kernelspec"]["name"] == "dsh":
        probe = "%%python\n" + probe
    nb.cells.append(nbformat.v4.new_code_cell(probe))
    edited = tmp_path / "edited"
    edited.mkdir()
    nbformat.write(nb, edited / name)

    ex = run_notebook(
        name,
        tmp_path / "run",
        NOTEBOOKS[name],
        source=edited,
        jupyter_data=plain_env / "share" / "jupyter",
        python=plain_env / "bin" / "python",
    )
    assert ex.errors() == []
    assert ex.text(probe).strip() == f"kernel prefix: {plain_env}"
