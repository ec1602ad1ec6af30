"""Module size, pinned: no module of ``dsh_kernel`` is over 600 lines, and one over 500 says why.

The reason is machine-checkable: the module's docstring contains the words "over 500 lines
because" (line breaks between them allowed), followed by the reason. A module that grows past 500
lines without one, or past 600 at all, is split by job (README, "Layout").
"""

from __future__ import annotations

import ast
from pathlib import Path

import dsh_kernel

PACKAGE = Path(dsh_kernel.__file__).parent
SOFT_CAP = 500
HARD_CAP = 600
REASON = "over 500 lines because"


def problem(name: str, text: str) -> str | None:
    """What is wrong with the size of module ``name`` (source ``text``), or ``None``."""
    lines = len(text.splitlines())
    if lines > HARD_CAP:
        return f"{name}: {lines} lines, over the {HARD_CAP}-line cap: split it by job"
    if lines > SOFT_CAP:
        doc = " ".join((ast.get_docstring(ast.parse(text)) or "").split())
        if REASON not in doc:
            return (
                f"{name}: {lines} lines without a reason: split it by job, or say in its "
                f'docstring why it is "{REASON} …"'
            )
    return None


def test_no_module_is_over_the_caps() -> None:
    problems = [
        p
        for path in sorted(PACKAGE.rglob("*.py"))
        if (p := problem(str(path.relative_to(PACKAGE)), path.read_text(encoding="utf-8")))
    ]
    assert problems == []


def _module(lines: int, doc: str) -> str:
    return f'"""{doc}"""\n' + "x = 1\n" * (lines - 1)


def test_the_rule_counts_lines_and_reads_the_reason_from_the_docstring() -> None:
    assert problem("small.py", _module(SOFT_CAP, "A module.")) is None
    long = problem("long.py", _module(SOFT_CAP + 1, "A module."))
    assert long is not None and long.startswith("long.py: 501 lines without a reason")
    reason = "A module. It is over 500\n lines because one table must stay whole."
    assert problem("long.py", _module(SOFT_CAP + 1, reason)) is None
    # The words in a comment or a string elsewhere are no reason: only the docstring counts.
    assert problem("long.py", "# over 500 lines because\n" + "x = 1\n" * SOFT_CAP) is not None
    huge = problem("huge.py", _module(HARD_CAP + 1, reason))
    assert huge is not None and "over the 600-line cap" in huge
