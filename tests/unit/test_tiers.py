"""Every test belongs to exactly one tier, named by its directory and registered as a marker."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.conftest import TESTS, TIERS, tier_of

NOT_TIERS = {"support", "data", "__pycache__"}
"""Directories of ``tests/`` that hold helpers or data, never tests."""


def test_every_directory_with_tests_is_a_tier() -> None:
    with_tests = {
        p.relative_to(TESTS).parts[0]
        for p in TESTS.rglob("test_*.py")
        if p.relative_to(TESTS).parts[0] not in NOT_TIERS
    }
    assert with_tests == set(TIERS)
    assert not list(TESTS.glob("test_*.py")), "a test directly in tests/ has no tier"


def test_every_tier_is_a_registered_marker() -> None:
    pyproject = tomllib.loads((TESTS.parent / "pyproject.toml").read_text(encoding="utf-8"))
    markers = pyproject["tool"]["pytest"]["ini_options"]["markers"]
    registered = {m.split(":", 1)[0] for m in markers}
    assert set(TIERS) <= registered


def test_a_file_is_in_the_tier_of_its_first_directory() -> None:
    assert tier_of(TESTS / "unit" / "agent" / "test_loop.py") == "unit"
    assert tier_of(TESTS / "kernel" / "test_conformance.py") == "kernel"
    assert tier_of(Path(__file__)) == "unit"


@pytest.mark.parametrize(
    "path",
    [TESTS / "test_loose.py", TESTS / "support" / "test_x.py", TESTS / "elsewhere" / "test_x.py"],
)
def test_a_file_in_no_tier_is_a_usage_error(path: Path) -> None:
    with pytest.raises(pytest.UsageError, match="in no tier"):
        tier_of(path)
    with pytest.raises(pytest.UsageError, match="outside"):
        tier_of(TESTS.parent / "dsh_kernel" / "test_x.py")


def test_this_test_carries_its_tier_marker(request: pytest.FixtureRequest) -> None:
    tiers = [m.name for m in request.node.iter_markers() if m.name in TIERS]
    assert tiers == ["unit"]


def _make_list(makefile: str, name: str) -> list[str]:
    (line,) = [x for x in makefile.splitlines() if x.startswith(f"{name} := ")]
    return line.split(":=", 1)[1].split()


def test_make_test_runs_every_tier_but_local_once() -> None:
    makefile = (TESTS.parent / "Makefile").read_text(encoding="utf-8")
    parallel = _make_list(makefile, "PARALLEL_TIERS")
    serial = _make_list(makefile, "SERIAL_TIERS")
    assert sorted(parallel + serial) == sorted(set(TIERS) - {"local"})
    assert set(_make_list(makefile, "FAST_TIERS")) == {"unit", "integration"}
    recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "$(call pytest_tiers,$(PARALLEL_TIERS))" in recipe
    assert "$(call pytest_tiers,$(SERIAL_TIERS))" in recipe
