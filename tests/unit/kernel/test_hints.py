"""The one line a failed cell shows: its code once, what happened, what to do."""

from __future__ import annotations

import pytest

from dsh_kernel.kernel.hints import ADVICE, describe_failure
from dsh_kernel.views.format import end_notice
from dsh_kernel.views.model import TurnError, TurnModel


@pytest.mark.parametrize("code", sorted(ADVICE))
@pytest.mark.parametrize("message", ["it broke", "{code}: it broke"])
def test_the_error_line_names_its_code_once(code: str, message: str) -> None:
    evalue = describe_failure(code, message.format(code=code))
    # DshKernel.error_reply sends the traceback line "<code>: <evalue>": the code must not repeat.
    assert evalue == f"it broke — {ADVICE[code]}"


def test_an_empty_message_leaves_the_advice() -> None:
    assert describe_failure("AUTH", "  ") == ADVICE["AUTH"]


def test_the_view_notice_names_its_code_once() -> None:
    for message in ("the model returned nothing", "EMPTY_RESPONSE: the model returned nothing"):
        model = TurnModel(end_kind="error", error=TurnError(code="EMPTY_RESPONSE", message=message))
        notice = end_notice(model)
        assert notice is not None
        assert notice.title == "EMPTY_RESPONSE: the model returned nothing"
