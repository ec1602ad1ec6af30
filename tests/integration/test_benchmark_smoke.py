"""The long-session benchmark still runs (it crashed at its first turn once its stand-in host lagged
behind the kernel's): a tiny run, its figures written as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_long_session_benchmark_runs_a_tiny_session(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    args = [
        "--turns",
        "12",
        "--chunks",
        "5",
        "--memory-events",
        "200",
        "--quiet",
        "--json",
        str(out),
    ]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "long_session.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert figures, figures
