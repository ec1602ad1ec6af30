"""One failure vocabulary: the one line a failed cell shows (its code once, what happened, what
to do) and the notice of a failed turn take their advice from the same table."""

from __future__ import annotations

import pytest

from dsh_kernel.failures import ADVICE, advice, advice_sentence, describe_failure
from dsh_kernel.transcript.model import TurnError, TurnModel
from dsh_kernel.views.format import end_notice


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
        model = TurnModel(
            end_reason={"kind": "error"},
            error=TurnError(code="EMPTY_RESPONSE", message=message),
        )
        notice = end_notice(model)
        assert notice is not None
        assert notice.title == "EMPTY_RESPONSE: the model returned nothing"


@pytest.mark.parametrize("code", [*sorted(ADVICE), "HTTP_418", "SOMETHING_NEW"])
def test_the_cell_and_the_turn_notice_give_the_same_advice(code: str) -> None:
    model = TurnModel(end_reason={"kind": "error"}, error=TurnError(code=code, message="it broke"))
    notice = end_notice(model)
    assert notice is not None and notice.hint is not None
    assert notice.hint == advice_sentence(code)
    assert notice.hint.lower().startswith(advice(code)[:20].lower())
    assert notice.hint.endswith(".") and notice.hint[0].isupper()
    assert describe_failure(code, "it broke").endswith(advice(code))


def test_the_exception_tree_in_errors_names_every_error_class() -> None:
    import importlib
    import pkgutil

    import dsh_kernel
    from dsh_kernel import errors

    for mod in pkgutil.walk_packages(dsh_kernel.__path__, "dsh_kernel."):
        if not mod.name.endswith("__main__"):
            importlib.import_module(mod.name)
    seen: list[type] = []
    todo: list[type] = list(errors.DshError.__subclasses__())
    while todo:
        cls = todo.pop()
        seen.append(cls)
        todo.extend(cls.__subclasses__())
    doc = errors.__doc__ or ""
    for cls in seen:
        if issubclass(cls, errors.CommandError) and cls is not errors.CommandError:
            continue  # one class per code, made by command_error
        if cls.__module__.startswith("dsh_kernel"):
            assert f"── {cls.__name__} " in doc, (
                f"{cls.__module__}.{cls.__name__} is not in the tree"
            )


@pytest.mark.parametrize("detail", ["empty-body", "model-stopped"])
def test_empty_response_advice_follows_what_was_empty(detail: str) -> None:
    hint = advice("EMPTY_RESPONSE", detail)
    assert hint != advice("EMPTY_RESPONSE")
    if detail == "empty-body":  # a server's refusal: its log, the context
        assert "empty body" in hint and "server's log" in hint and "context" in hint
    else:  # the model's choice: nothing about an over-long request
        assert "chose to end its turn" in hint and "context" not in hint and "log" not in hint
    # The cell's line and the turn's notice say the same, from the turn's logged detail.
    model = TurnModel(
        end_reason={"kind": "error"},
        error=TurnError(code="EMPTY_RESPONSE", message="nothing", detail=detail),
    )
    notice = end_notice(model)
    assert notice is not None and notice.hint == advice_sentence("EMPTY_RESPONSE", detail)
    assert describe_failure("EMPTY_RESPONSE", "nothing", detail) == f"nothing — {hint}"


def test_an_unknown_detail_falls_back_to_the_codes_advice() -> None:
    assert advice("EMPTY_RESPONSE", "something-else") == ADVICE["EMPTY_RESPONSE"]
    assert advice("AUTH", "model-stopped") == ADVICE["AUTH"]
