"""``DSH_SHARED_STORE`` without the driver, or with a password in it: one line, never a dead kernel;
the target forms ``check_target`` accepts."""

from __future__ import annotations

import sys

import pytest

from dsh_kernel.errors import StoreError
from dsh_kernel.kernel.shared import SharedLink
from dsh_kernel.llm.secrets import REDACTOR
from dsh_kernel.store.shared.connection import check_target


def test_without_the_driver_the_link_is_off_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what an install without the extra has
    link = SharedLink("postgresql://alice@hub/course")
    assert link.shipper is None
    assert link.text() == (
        "off: DSH_SHARED_STORE is set but the PostgreSQL driver is not installed: "
        "pip install 'dsh-kernel[shared]' (psycopg 3); sessions stay in the local store only"
    )
    link.close()  # nothing to close, and no error


def test_no_target_no_line() -> None:
    link = SharedLink("  ")
    assert link.shipper is None and link.text() is None


@pytest.mark.parametrize(
    "target",
    [
        "postgresql://alice:Hunter2-long-pass@hub/course",
        "postgres://alice@hub/course?password=Hunter2-long-pass",
        "host=hub dbname=course password=Hunter2-long-pass",
        "host=hub password='Hunter2-long-pass' dbname=course",
    ],
)
def test_a_password_in_the_target_is_refused_and_redacted(target: str) -> None:
    with pytest.raises(StoreError) as caught:
        check_target(target)
    assert caught.value.code == "SHARED_STORE_PASSWORD"
    assert "Hunter2-long-pass" not in caught.value.message
    assert REDACTOR.redact(f"leak: {target}").count("Hunter2-long-pass") == 0
    link = SharedLink(target)
    assert link.shipper is None and (link.text() or "").startswith(
        "off: DSH_SHARED_STORE holds a password"
    )


def test_target_forms() -> None:
    assert check_target(" course ") == "service=course"
    assert check_target("host=/tmp dbname=x") == "host=/tmp dbname=x"
    assert check_target("postgresql://alice@hub/course") == "postgresql://alice@hub/course"
    with pytest.raises(StoreError) as caught:
        check_target("not a target!")
    assert caught.value.code == "SHARED_STORE_TARGET"
