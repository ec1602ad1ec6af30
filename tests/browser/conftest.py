"""Browser tier: JupyterLab in headless Chromium (``tests/support/lab.py``).

Every test here first checks that the machine can run it: without Chromium (or Playwright, or
JupyterLab) each fails with one line naming what to install, never a skip.
"""

from __future__ import annotations

import pytest

from tests.support.lab import require_browser


@pytest.fixture(autouse=True)
def _browser_requirements() -> None:
    require_browser()
