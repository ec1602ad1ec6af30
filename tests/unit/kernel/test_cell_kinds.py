"""The kernel's router against the table it shares with the notebook extension
(``tests/data/cell_kinds.json``; ``tests/support/cell_kinds.py``)."""

from __future__ import annotations

import pytest

from dsh_kernel.kernel.cells import classify
from tests.support.cell_kinds import CellKindCase, cell_kind_cases

CASES = cell_kind_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_kernel_routes_each_case_as_the_table_says(case: CellKindCase) -> None:
    assert classify(case.source, case.default).kind == case.kind


def test_the_table_covers_what_the_two_readings_could_disagree_on() -> None:
    sources = {c.source for c in CASES}
    for tricky in (
        "%%chat\thi",  # the magic's name ends at a tab
        "\n \t\n%%chat\nhi",  # blank lines before the magic
        "   %%chat\nhi",  # indentation
        "# first\n%%python\nx = 1",  # a comment before a cell magic
        "%agent status",  # line magics only
        "%%time\nx = 1",  # IPython's own cell magic
        "",  # the empty cell
        "%%sql result <<\nSELECT 1",
        "%%py\nx = 1",
        "\ufeff%agent status",  # space to JavaScript, not to Python
        "%agent status\u0085hello",  # a line break to Python only
    ):
        assert tricky in sources
    assert {(c.default, c.kind) for c in CASES} >= {
        ("chat", "chat"),
        ("chat", "python"),
        ("chat", "sql"),
        ("python", "chat"),
        ("python", "python"),
        ("python", "sql"),
    }
