"""Fixtures of the reliability suite and the "reliability figures" terminal section.

Tests append lines (query latency under load, crash points, …) to ``support.FIGURES``; they are
printed at the end of the run, so ``make stress`` reports its numbers without ``-s``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reliability.support import FIGURES
from tests.support.sse_server import SseServer


@pytest.fixture
def server() -> Iterator[SseServer]:
    with SseServer() as srv:
        yield srv


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES:
        terminalreporter.section("reliability figures")
        for line in FIGURES:
            terminalreporter.write_line(line)
