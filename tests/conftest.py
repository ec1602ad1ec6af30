"""Suite-wide settings.

``DSH_DEV_INVARIANTS=1`` turns on the agent's dev invariants for every test: each request any test
sends to a provider is checked against the request rebuilt from the log alone (system prompt +
``derive_messages()`` + the folded request header), and every finished turn's log must pass the
structural invariants checker. A test that breaks either fails, whatever it asserts itself.

Every test is marked with its tier, the first directory under ``tests/`` it lives in (``TIERS``):
``pytest -m unit`` selects one tier, ``make test-fast`` runs ``unit or integration``. A test file
outside every tier is a collection error, so no test escapes the selection by where it was put.

Hypothesis runs with no per-example deadline and without its "too slow" health check, suite-wide:
both measure the machine, not the code, and failed property tests on a loaded one.

The process-wide redactor (``dsh_kernel.llm.secrets.REDACTOR``) learns every key a test stores or
sends; it forgets them after each test, so one test's fake key never redacts another test's text.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support.shared_db import shared_db

os.environ["DSH_DEV_INVARIANTS"] = "1"

settings.register_profile("dsh", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("dsh")

__all__ = ["shared_db"]  # a fresh database on ``pg_server`` (below), for the shared-store tests

TESTS = Path(__file__).resolve().parent

TIERS = (
    "unit",
    "integration",
    "kernel",
    "notebooks",
    "browser",
    "install",
    "reliability",
    "docs",
    "local",
)
"""The tiers, each a directory of ``tests/`` and a marker of the same name (pyproject.toml
registers them)."""


def tier_of(path: Path) -> str:
    """The tier of the test file at ``path``: its first directory under ``tests/``.

    Raises ``pytest.UsageError`` for a file in no tier (directly in ``tests/``, in ``tests/support``
    or in a directory not in ``TIERS``) or outside ``tests/``.
    """
    try:
        parts = path.resolve().relative_to(TESTS).parts
    except ValueError:
        raise pytest.UsageError(f"{path}: a test outside {TESTS}") from None
    if len(parts) < 2 or parts[0] not in TIERS:
        raise pytest.UsageError(
            f"{path}: a test in no tier; put it under one of tests/{{{','.join(TIERS)}}}/ "
            "(or add a tier to tests/conftest.py's TIERS and pyproject.toml's markers)"
        )
    return parts[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every collected test with its tier (``tier_of``)."""
    for item in items:
        item.add_marker(tier_of(item.path))


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
