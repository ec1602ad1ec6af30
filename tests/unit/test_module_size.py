"""Module size, reported: concepts decide where code lives, not a line count.

A module of ``dsh_kernel`` past ``REPORT_AT`` lines is a question to ask (is it still one concept?),
never a rule to satisfy by cutting it in two: ``tests/conftest.py`` lists such modules at the end of
a run, and nothing fails. The layering test, not this one, guards the structure.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.sizes import REPORT_AT, long_modules


def test_only_modules_over_the_mark_are_reported_longest_first(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "short.py").write_text("x = 1\n" * REPORT_AT)
    (tmp_path / "long.py").write_text("x = 1\n" * (REPORT_AT + 1))
    (tmp_path / "sub" / "longer.py").write_text("x = 1\n" * (REPORT_AT + 50))
    assert long_modules(tmp_path) == [("sub/longer.py", REPORT_AT + 50), ("long.py", REPORT_AT + 1)]
