"""Fixtures for the runtime tests: a real IPython shell (history off)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    config = Config()
    config.HistoryManager.enabled = False
    sh = InteractiveShell.instance(config=config)
    try:
        yield sh
    finally:
        InteractiveShell.clear_instance()
