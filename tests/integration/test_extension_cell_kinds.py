"""The notebook extension's reading of a cell (``widgets/src/cells.ts``, compiled to
``widgets/lib/cells.js``) against the table it shares with the kernel's router
(``tests/data/cell_kinds.json``), run with node.

Needs node and the extension built (``cd widgets && npm run build``; ``make test`` builds it): a
machine without either fails with one line saying so, never a skip.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cell_kinds import TABLE, cell_kind_cases

WIDGETS = Path(__file__).resolve().parents[2] / "widgets"
SOURCE = WIDGETS / "src" / "cells.ts"
COMPILED = WIDGETS / "lib" / "cells.js"

RUNNER = """
import { readFileSync } from 'node:fs';
const { cellKind } = await import(process.argv[2]);
const { cases } = JSON.parse(readFileSync(process.argv[3], 'utf8'));
console.log(JSON.stringify(cases.map(c => cellKind(c.source, c.default))));
"""


def compiled_module(tmp: Path) -> Path:
    node = shutil.which("node")
    if node is None:
        pytest.fail("this test needs node (Node 20, as the extension's build does)", pytrace=False)
    if not COMPILED.exists() or COMPILED.stat().st_mtime < SOURCE.stat().st_mtime:
        pytest.fail(
            f"{COMPILED.relative_to(WIDGETS.parent)} is missing or older than its source: "
            "cd widgets && npm run build",
            pytrace=False,
        )
    # lib/ is ES modules in a package without "type": "module": node reads a copy named .mjs
    module = tmp / "cells.mjs"
    module.write_text(COMPILED.read_text(encoding="utf-8"), encoding="utf-8")
    return module


def test_the_extension_reads_each_case_as_the_kernel_does(tmp_path: Path) -> None:
    module = compiled_module(tmp_path)
    runner = tmp_path / "run.mjs"
    runner.write_text(RUNNER, encoding="utf-8")
    done = subprocess.run(
        ["node", str(runner), module.as_uri(), str(TABLE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    kinds = json.loads(done.stdout)
    cases = cell_kind_cases()
    wrong = [
        f"{c.name}: {c.source!r} on {c.default} is {kind}, the kernel's {c.kind}"
        for c, kind in zip(cases, kinds, strict=True)
        if kind != c.kind
    ]
    assert wrong == []
