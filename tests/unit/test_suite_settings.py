"""The suite's own settings (tests/conftest.py) hold for every test: no timing checks that measure the
machine instead of the code."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def test_hypothesis_sets_no_deadline_and_no_slowness_check() -> None:
    assert settings().deadline is None
    assert HealthCheck.too_slow in settings().suppress_health_check
