"""Render intents: what a tool card shows, as data (SPINE §4.6).

A tool may present its call (``present_call(args)``, shown while the call is pending) and its result
(``present_result(args, ToolResultInfo)``, which replaces the pending view). Presenters are pure and
depend only on logged data — the call's arguments and the result's content, error flag and ``meta`` —
so a session replayed from the store draws the same cards.

One card type each: ``GenericCallView`` (a title, the ``kind`` that picks the icon, the raw input,
optional text and locations) and ``GenericResultView`` (a title and text). SPINE §4.6 also draws
terminal, diff, search, read and web cards; no tool of ours produces one, so they are not here — add
one with the tool that needs it, with its rendering in ``views.card_content``. Views are never
serialised: a card is drawn again from the log on replay.

``call_view`` / ``result_view`` never fail: a missing presenter, one that returns ``None`` or one that
raises all give the generic card (title = tool name, the raw arguments; for results the pending title
and the result text).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias, TypeVar

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.arguments import parse_tool_arguments
from dsh_kernel.llm.types import ContentBlock, TextBlock

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

ToolKind: TypeAlias = Literal[
    "read", "edit", "delete", "move", "search", "execute", "fetch", "other"
]
"""What a call does; picks the card's icon."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Location:
    """A file (and line) a tool call touches, shown on its card."""

    path: str
    line: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GenericCallView:
    """The pending card: shown as soon as ``tool/call`` is logged."""

    type: Literal["generic"] = "generic"
    title: str
    kind: ToolKind | None = None
    raw_input: JsonValue = None
    content: str | None = None
    locations: tuple[Location, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class GenericResultView:
    """The completed card: replaces the pending one."""

    type: Literal["generic"] = "generic"
    title: str | None = None
    content: str | None = None


ToolCallView: TypeAlias = GenericCallView
"""What a call presenter returns."""
ToolResultView: TypeAlias = GenericResultView
"""What a result presenter returns."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultInfo:
    """The logged part of a result: all a result presenter may look at."""

    content: tuple[ContentBlock, ...]
    is_error: bool
    meta: JsonValue = None


# -- fallbacks --------------------------------------------------------------------------------------


def content_text(content: tuple[ContentBlock, ...]) -> str:
    """The text a generic card shows for a result: its text blocks, one per line."""
    return "\n".join(b.text for b in content if isinstance(b, TextBlock))


def _parse_raw(raw_args: str) -> JsonValue:
    try:
        return parse_tool_arguments(raw_args)
    except ValueError:  # invalid or too deeply nested: the card shows the raw text
        return raw_args


def _safely(fn: Callable[[], _T | None], what: str, name: str) -> _T | None:
    try:
        return fn()
    except Exception:  # a broken presenter must never break the card; fall back instead
        _log.warning(
            "%s presenter of tool %r failed; using the generic card", what, name, exc_info=True
        )
        return None


class Presented(Protocol):
    """What ``call_view``/``result_view`` read of a tool: its presenters (a ``ToolDefinition`` is
    one; typed structurally so that this module need not import ``tools.types``, which imports it)."""

    @property
    def present_call(self) -> Callable[[JsonObject], ToolCallView | None] | None: ...

    @property
    def present_result(
        self,
    ) -> Callable[[JsonObject, ToolResultInfo], ToolResultView | None] | None: ...


def call_view(defn: Presented | None, name: str, raw_args: str) -> ToolCallView:
    """The pending card for a call, from its logged name and raw argument text."""
    args = _parse_raw(raw_args)
    presenter = defn.present_call if defn is not None else None
    view: object = None
    if presenter is not None and isinstance(args, dict):
        view = _safely(lambda: presenter(args), "call", name)
    if not isinstance(view, GenericCallView):
        return GenericCallView(title=name, raw_input=args)
    return view


def result_view(
    defn: Presented | None, name: str, raw_args: str, info: ToolResultInfo
) -> ToolResultView:
    """The completed card; falls back to the pending title plus the raw result text."""
    args = _parse_raw(raw_args)
    presenter = defn.present_result if defn is not None else None
    view: object = None
    if presenter is not None and isinstance(args, dict):
        view = _safely(lambda: presenter(args, info), "result", name)
    if not isinstance(view, GenericResultView):
        title = call_view(defn, name, raw_args).title
        return GenericResultView(title=title, content=content_text(info.content))
    return view
