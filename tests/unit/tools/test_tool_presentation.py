"""Presentation views: JSON codec round trips and the generic fallbacks."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import TextBlock
from dsh_kernel.tools import ToolContext, ToolDefinition
from dsh_kernel.tools.presentation import (
    DiffCallView,
    DiffResultView,
    FileDiff,
    GenericCallView,
    GenericResultView,
    Location,
    ReadLine,
    ReadResultView,
    SearchFile,
    SearchMatch,
    SearchMatchesView,
    SearchPathsView,
    TerminalCallView,
    TerminalResultView,
    ToolCallView,
    ToolResultInfo,
    ToolResultView,
    WebFetchView,
    WebSearchView,
    WebSource,
    call_view,
    call_view_from_json,
    call_view_to_json,
    result_view,
    result_view_from_json,
    result_view_to_json,
)

CALL_VIEWS: list[ToolCallView] = [
    GenericCallView(
        title="Run code",
        kind="execute",
        raw_input="print(1)",
        content="c",
        locations=(Location(path="a.py", line=3),),
    ),
    GenericCallView(title="bare"),
    TerminalCallView(title="ls -la", description="list", cwd="/tmp"),
    DiffCallView(
        title="edit",
        diffs=(FileDiff(path="new.py", old_text=None, new_text="x"),),
        locations=(Location(path="new.py"),),
    ),
]

RESULT_VIEWS: list[ToolResultView] = [
    GenericResultView(title="t", content="out"),
    GenericResultView(),
    TerminalResultView(title="ls", output="a\nb", exit_code=0, signal=None),
    DiffResultView(diffs=(FileDiff(path="f", old_text="a", new_text="b"),)),
    SearchMatchesView(
        files=(SearchFile(path="f", matches=(SearchMatch(line_number=2, line="hit"),)),),
        truncated=True,
        total=40,
    ),
    SearchPathsView(paths=("a", "b"), truncated=False, total=2),
    ReadResultView(
        path="f.py",
        offset=10,
        lines=(ReadLine(number=10, text="x = 1"),),
        total_lines=99,
        lang="python",
    ),
    WebSearchView(
        sources=(WebSource(url="https://x", title="X", published_at="2026-01-01"),),
        answer="yes",
        truncated=False,
    ),
    WebFetchView(url="https://x", status_code=200, truncated=True),
]


@pytest.mark.parametrize("view", CALL_VIEWS)
def test_call_views_round_trip(view: ToolCallView) -> None:
    data = call_view_to_json(view)
    assert call_view_from_json(data) == view


@pytest.mark.parametrize("view", RESULT_VIEWS)
def test_result_views_round_trip(view: ToolResultView) -> None:
    data = result_view_to_json(view)
    assert result_view_from_json(data) == view


def test_json_uses_camel_case_and_tags() -> None:
    assert result_view_to_json(TerminalResultView(exit_code=1)) == {
        "type": "terminal",
        "exitCode": 1,
    }
    assert call_view_to_json(CALL_VIEWS[0])["rawInput"] == "print(1)"
    assert result_view_to_json(RESULT_VIEWS[4])["shape"] == "matches"
    assert result_view_to_json(RESULT_VIEWS[6])["totalLines"] == 99
    assert result_view_to_json(RESULT_VIEWS[8]) == {
        "type": "web",
        "kind": "fetch",
        "url": "https://x",
        "statusCode": 200,
        "truncated": True,
    }


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "hologram", "title": "x"},
        {"type": "generic"},
        {"type": "generic", "title": "x", "kind": "teleport"},
        {"type": "diff", "title": "x", "diffs": [{"path": "p"}]},
        [],
    ],
)
def test_malformed_call_views_are_refused(bad: JsonValue) -> None:
    with pytest.raises(ValueError):
        call_view_from_json(bad)


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "hologram"},
        {"type": "search", "shape": "paths", "paths": [1], "truncated": False, "total": 1},
        {"type": "web", "kind": "fetch", "url": "u", "statusCode": True, "truncated": False},
        {"type": "read", "path": "p", "offset": 1, "lines": "no", "totalLines": 1},
    ],
)
def test_malformed_result_views_are_refused(bad: JsonValue) -> None:
    with pytest.raises(ValueError):
        result_view_from_json(bad)


def defn(**kw: Any) -> ToolDefinition:
    def execute(args: JsonObject, ctx: ToolContext) -> JsonValue:
        return None

    return ToolDefinition(
        name="sh", description="", parameters={"type": "object"}, execute=execute, **kw
    )


INFO = ToolResultInfo(content=(TextBlock(text="line 1"), TextBlock(text="line 2")), is_error=False)


def test_presenters_are_used_when_they_answer() -> None:
    d = defn(
        present_call=lambda args: TerminalCallView(title=str(args["cmd"])),
        present_result=lambda args, info: TerminalResultView(output=str(info.meta), exit_code=0),
    )
    assert call_view(d, "sh", '{"cmd": "ls"}') == TerminalCallView(title="ls")
    info = ToolResultInfo(content=(), is_error=False, meta="meta!")
    assert result_view(d, "sh", '{"cmd": "ls"}', info) == TerminalResultView(
        output="meta!", exit_code=0
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
