"""Suite-wide settings.

``DSH_DEV_INVARIANTS=1`` turns on the agent's dev invariants for every test: each request any test
sends to a provider is checked against the request rebuilt from the log alone (system prompt +
``derive_messages()`` + the folded request header), and every finished turn's log must pass the
structural invariants checker. A test that breaks either fails, whatever it asserts itself.

The process-wide redactor (``dsh_kernel.llm.secrets.REDACTOR``) learns every key a test stores or
sends; it forgets them after each test, so one test's fake key never redacts another test's text.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.shared_db import shared_db

os.environ["DSH_DEV_INVARIANTS"] = "1"

__all__ = ["shared_db"]  # a fresh database on ``pg_server`` (below), for the shared-store tests


@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    yield
    from dsh_kernel.llm.secrets import REDACTOR

    REDACTOR.forget_all()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    """One real PostgreSQL server for the test session, on a Unix socket (tests/support/postgres.py);
    stopped by its PID at the end. Without PostgreSQL installed the tests that need it skip — except
    under CI, where they fail (``.ci/run`` installs it)."""
    from tests.support.postgres import PgServer, find_bindir

    bindir = find_bindir()
    if bindir is None:
        message = "PostgreSQL is not installed (apt-get install postgresql; .ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    server = PgServer.create(bindir)
    try:
        server.start()
        yield server
    finally:
        server.remove()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name the package's modules past ``REPORT_AT`` lines: a question for the reader, not a failure."""
    from pathlib import Path

    import dsh_kernel
    from tests.support.sizes import REPORT_AT, long_modules

    found = long_modules(Path(dsh_kernel.__file__).parent)
    if found:
        terminalreporter.write_line(f"modules over {REPORT_AT} lines (still one concept each?):")
        for name, lines in found:
            terminalreporter.write_line(f"  dsh_kernel/{name}: {lines}")
