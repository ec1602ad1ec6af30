"""Which modules are long enough to ask whether they are still one concept (reported, never refused)."""

from __future__ import annotations

from pathlib import Path

REPORT_AT = 800


def long_modules(root: Path) -> list[tuple[str, int]]:
    """``(module, lines)`` of every ``*.py`` under ``root`` over ``REPORT_AT`` lines, longest first."""
    found = [
        (path.relative_to(root).as_posix(), len(path.read_text(encoding="utf-8").splitlines()))
        for path in sorted(root.rglob("*.py"))
    ]
    return sorted(((n, c) for n, c in found if c > REPORT_AT), key=lambda x: -x[1])
