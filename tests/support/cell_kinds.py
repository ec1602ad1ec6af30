"""The shared table of what a dsh kernel runs a cell as (``tests/data/cell_kinds.json``).

The kernel's router (``dsh_kernel.kernel.cells.classify``) and the notebook extension's
(``widgets/src/cells.ts``, ``cellKind``, which sets a cell's editor mode) must never disagree:
the unit tier runs every case through ``classify``, the integration tier through the extension's
compiled module with node, the browser tier through the extension in JupyterLab (the editor mode
of a cell holding the case's source).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

TABLE = Path(__file__).resolve().parents[1] / "data" / "cell_kinds.json"


@dataclass(frozen=True)
class CellKindCase:
    name: str
    source: str
    default: Literal["chat", "python"]
    """What a plain cell is: ``chat`` on the ``dsh`` kernelspec, ``python`` on ``dsh-python``."""
    kind: Literal["chat", "python", "sql"]


def cell_kind_cases() -> list[CellKindCase]:
    data = json.loads(TABLE.read_text(encoding="utf-8"))
    return [CellKindCase(**case) for case in data["cases"]]
