"""Presentation views: the presenters and the generic fallbacks."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import TextBlock
from dsh_kernel.tools import ToolContext, ToolDefinition
from dsh_kernel.tools.presentation import (
    GenericCallView,
    GenericResultView,
    Location,
    ToolResultInfo,
    call_view,
    result_view,
)


def defn(**kw: Any) -> ToolDefinition:
    def execute(args: JsonObject, ctx: ToolContext) -> JsonValue:
        return None

    return ToolDefinition(
        name="sh", description="", parameters={"type": "object"}, execute=execute, **kw
    )


INFO = ToolResultInfo(content=(TextBlock(text="line 1"), TextBlock(text="line 2")), is_error=False)


def test_presenters_are_used_when_they_answer() -> None:
    d = defn(
        present_call=lambda args: GenericCallView(
            title=str(args["cmd"]), kind="execute", locations=(Location(path="a.py", line=3),)
        ),
        present_result=lambda args, info: GenericResultView(title="ran", content=str(info.meta)),
    )
    assert call_view(d, "sh", '{"cmd": "ls"}') == GenericCallView(
        title="ls", kind="execute", locations=(Location(path="a.py", line=3),)
    )
    info = ToolResultInfo(content=(), is_error=False, meta="meta!")
    assert result_view(d, "sh", '{"cmd": "ls"}', info) == GenericResultView(
        title="ran", content="meta!"
    )


def raise_(exc: Exception) -> None:
    raise exc


@pytest.mark.parametrize(
    "d",
    [
        None,
        defn(),
        defn(present_call=lambda args: None, present_result=lambda args, info: None),
        defn(
            present_call=lambda args: raise_(KeyError("cmd")),
            present_result=lambda args, info: raise_(KeyError("x")),
        ),
        defn(present_call=lambda args: "not a view", present_result=lambda args, info: 42),
    ],
)
def test_fallbacks_are_generic(d: ToolDefinition | None) -> None:
    assert call_view(d, "sh", '{"cmd": "ls"}') == GenericCallView(
        title="sh", raw_input={"cmd": "ls"}
    )
    assert result_view(d, "sh", '{"cmd": "ls"}', INFO) == GenericResultView(
        title="sh", content="line 1\nline 2"
    )


def test_result_fallback_keeps_the_pending_title() -> None:
    d = defn(present_call=lambda args: GenericCallView(title=f"Run {args['cmd']}"))
    assert result_view(d, "sh", '{"cmd": "ls"}', INFO) == GenericResultView(
        title="Run ls", content="line 1\nline 2"
    )


def test_invalid_json_arguments_skip_the_presenter() -> None:
    seen: list[object] = []
    d = defn(present_call=lambda args: seen.append(args))
    assert call_view(d, "sh", "{oops") == GenericCallView(title="sh", raw_input="{oops")
    assert seen == []
