"""The store's public names resolve lazily, and importing the package does not import DuckDB."""

from __future__ import annotations

import subprocess

import dsh_kernel.store as store_pkg

from .conftest import PY


def test_every_exported_name_resolves() -> None:
    for name in store_pkg.__all__:
        assert getattr(store_pkg, name) is not None, name
    assert {
        "run_query",
        "ingest",
        "attach_journal",
        "load_session",
        "ReplayProvider",
        "fork",
    } <= set(store_pkg.__all__)


def test_importing_the_package_is_cheap() -> None:
    code = "import sys, dsh_kernel.store; print('duckdb' in sys.modules)"
    out = subprocess.run(
        [PY, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "False"
