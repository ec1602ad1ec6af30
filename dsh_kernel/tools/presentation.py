"""Render intents: what a tool card shows, as data (SPINE §4.6).

A tool may present its call (``present_call(args)``, shown while the call is pending) and its result
(``present_result(args, ToolResultInfo)``, which replaces the pending view). Presenters are pure and
depend only on logged data — the call's arguments and the result's content, error flag and ``meta`` —
so a session replayed from the store draws the same cards.

Views are frozen dataclasses; ``ToolCallView`` and ``ToolResultView`` are closed unions. The JSON
codec writes camelCase keys (``rawInput``, ``exitCode``, ``totalLines``) and raises ``ValueError`` on
anything it does not know, including an unknown card type: the UI then falls back to raw content.

``call_view`` / ``result_view`` never fail: a missing presenter, one that returns ``None`` or one that
raises all give the generic card (title = tool name, the raw arguments; for results the pending title
and the result text).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias, TypeVar, assert_never

from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.codec import parse_tool_arguments
from dsh_kernel.llm.types import ContentBlock, TextBlock

_log = logging.getLogger(__name__)

ToolKind: TypeAlias = Literal[
    "read", "edit", "delete", "move", "search", "execute", "fetch", "other"
]
TOOL_KINDS: frozenset[str] = frozenset(
    {"read", "edit", "delete", "move", "search", "execute", "fetch", "other"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Location:
    path: str
    line: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FileDiff:
    """One file's change; ``old_text is None`` means the file is new."""

    path: str
    old_text: str | None
    new_text: str


# -- call views (pending) ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class GenericCallView:
    type: Literal["generic"] = "generic"
    title: str
    kind: ToolKind | None = None
    raw_input: JsonValue = None
    content: str | None = None
    locations: tuple[Location, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TerminalCallView:
    type: Literal["terminal"] = "terminal"
    title: str
    description: str | None = None
    cwd: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DiffCallView:
    type: Literal["diff"] = "diff"
    title: str
    diffs: tuple[FileDiff, ...]
    locations: tuple[Location, ...] = ()


ToolCallView: TypeAlias = GenericCallView | TerminalCallView | DiffCallView

# -- result views (completed) -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class GenericResultView:
    type: Literal["generic"] = "generic"
    title: str | None = None
    content: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TerminalResultView:
    type: Literal["terminal"] = "terminal"
    title: str | None = None
    output: str | None = None
    exit_code: int | None = None
    signal: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DiffResultView:
    type: Literal["diff"] = "diff"
    title: str | None = None
    diffs: tuple[FileDiff, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchMatch:
    line_number: int
    line: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchFile:
    path: str
    matches: tuple[SearchMatch, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchMatchesView:
    type: Literal["search"] = "search"
    shape: Literal["matches"] = "matches"
    files: tuple[SearchFile, ...]
    truncated: bool
    total: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchPathsView:
    type: Literal["search"] = "search"
    shape: Literal["paths"] = "paths"
    paths: tuple[str, ...]
    truncated: bool
    total: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadLine:
    number: int
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadResultView:
    """``offset`` is the 1-based number of the first line shown."""

    type: Literal["read"] = "read"
    title: str | None = None
    path: str
    offset: int
    lines: tuple[ReadLine, ...]
    total_lines: int
    lang: str | None = None
    content: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSource:
    url: str
    title: str | None = None
    snippet: str | None = None
    published_at: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSearchView:
    type: Literal["web"] = "web"
    kind: Literal["search"] = "search"
    sources: tuple[WebSource, ...]
    answer: str | None = None
    truncated: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class WebFetchView:
    type: Literal["web"] = "web"
    kind: Literal["fetch"] = "fetch"
    url: str
    status_code: int
    truncated: bool = False


ToolResultView: TypeAlias = (
    GenericResultView
    | TerminalResultView
    | DiffResultView
    | SearchMatchesView
    | SearchPathsView
    | ReadResultView
    | WebSearchView
    | WebFetchView
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultInfo:
    """The logged part of a result: all a result presenter may look at."""

    content: tuple[ContentBlock, ...]
    is_error: bool
    meta: JsonValue = None


# -- JSON codec -------------------------------------------------------------------------------------


def _put(out: JsonObject, key: str, value: JsonValue) -> None:
    if value is not None:
        out[key] = value


def _locations_json(locs: tuple[Location, ...]) -> list[JsonValue]:
    out: list[JsonValue] = []
    for loc in locs:
        item: JsonObject = {"path": loc.path}
        _put(item, "line", loc.line)
        out.append(item)
    return out


def _diffs_json(diffs: tuple[FileDiff, ...]) -> list[JsonValue]:
    return [{"path": d.path, "oldText": d.old_text, "newText": d.new_text} for d in diffs]


def call_view_to_json(view: ToolCallView) -> JsonObject:
    out: JsonObject = {"type": view.type, "title": view.title}
    match view:
        case GenericCallView():
            _put(out, "kind", view.kind)
            _put(out, "rawInput", view.raw_input)
            _put(out, "content", view.content)
            if view.locations:
                out["locations"] = _locations_json(view.locations)
        case TerminalCallView():
            _put(out, "description", view.description)
            _put(out, "cwd", view.cwd)
        case DiffCallView():
            out["diffs"] = _diffs_json(view.diffs)
            if view.locations:
                out["locations"] = _locations_json(view.locations)
        case _:
            assert_never(view)
    return out


def result_view_to_json(view: ToolResultView) -> JsonObject:
    out: JsonObject = {"type": view.type}
    match view:
        case GenericResultView():
            _put(out, "title", view.title)
            _put(out, "content", view.content)
        case TerminalResultView():
            _put(out, "title", view.title)
            _put(out, "output", view.output)
            _put(out, "exitCode", view.exit_code)
            _put(out, "signal", view.signal)
        case DiffResultView():
            _put(out, "title", view.title)
            out["diffs"] = _diffs_json(view.diffs)
        case SearchMatchesView():
            out["shape"] = "matches"
            out["files"] = [
                {
                    "path": f.path,
                    "matches": [{"lineNumber": m.line_number, "line": m.line} for m in f.matches],
                }
                for f in view.files
            ]
            out["truncated"] = view.truncated
            out["total"] = view.total
        case SearchPathsView():
            out["shape"] = "paths"
            out["paths"] = list(view.paths)
            out["truncated"] = view.truncated
            out["total"] = view.total
        case ReadResultView():
            _put(out, "title", view.title)
            out["path"] = view.path
            out["offset"] = view.offset
            out["lines"] = [{"number": ln.number, "text": ln.text} for ln in view.lines]
            out["totalLines"] = view.total_lines
            _put(out, "lang", view.lang)
            _put(out, "content", view.content)
        case WebSearchView():
            out["kind"] = "search"
            sources: list[JsonValue] = []
            for s in view.sources:
                item: JsonObject = {"url": s.url}
                _put(item, "title", s.title)
                _put(item, "snippet", s.snippet)
                _put(item, "publishedAt", s.published_at)
                sources.append(item)
            out["sources"] = sources
            _put(out, "answer", view.answer)
            out["truncated"] = view.truncated
        case WebFetchView():
            out["kind"] = "fetch"
            out["url"] = view.url
            out["statusCode"] = view.status_code
            out["truncated"] = view.truncated
        case _:
            assert_never(view)
    return out


_T = TypeVar("_T")


def _field(obj: JsonObject, key: str, kind: type[_T], *, optional: bool = False) -> _T | None:
    v: object = obj.get(key)
    if v is None and optional:
        return None
    if _bool_mismatch(v, kind):
        raise ValueError(f"view.{key}: expected {kind.__name__}")
    if not isinstance(v, kind):
        raise ValueError(f"view.{key}: expected {kind.__name__}")
    return v


def _bool_mismatch(v: object, kind: type[object]) -> bool:
    """JSON ``true`` must not pass for a number (``bool`` subclasses ``int`` in Python)."""
    return isinstance(v, bool) and kind is not bool


def _req(obj: JsonObject, key: str, kind: type[_T]) -> _T:
    v = _field(obj, key, kind)
    assert v is not None
    return v


def _array(obj: JsonObject, key: str, *, optional: bool = False) -> list[JsonValue]:
    v = obj.get(key)
    if v is None and optional:
        return []
    if not isinstance(v, list):
        raise ValueError(f"view.{key}: expected an array")
    return v


def _objs(obj: JsonObject, key: str, *, optional: bool = False) -> list[JsonObject]:
    out: list[JsonObject] = []
    for item in _array(obj, key, optional=optional):
        if not isinstance(item, dict):
            raise ValueError(f"view.{key}: expected an array of objects")
        out.append(item)
    return out


def _locations(obj: JsonObject) -> tuple[Location, ...]:
    return tuple(
        Location(path=_req(o, "path", str), line=_field(o, "line", int, optional=True))
        for o in _objs(obj, "locations", optional=True)
    )


def _diffs(obj: JsonObject) -> tuple[FileDiff, ...]:
    return tuple(
        FileDiff(
            path=_req(o, "path", str),
            old_text=_field(o, "oldText", str, optional=True),
            new_text=_req(o, "newText", str),
        )
        for o in _objs(obj, "diffs")
    )


def call_view_from_json(value: JsonValue) -> ToolCallView:
    if not isinstance(value, dict):
        raise ValueError("call view: expected an object")
    title = _req(value, "title", str)
    match value.get("type"):
        case "generic":
            kind = _field(value, "kind", str, optional=True)
            if kind is not None and kind not in TOOL_KINDS:
                raise ValueError(f"view.kind: unknown kind {kind!r}")
            return GenericCallView(
                title=title,
                kind=_as_kind(kind),
                raw_input=value.get("rawInput"),
                content=_field(value, "content", str, optional=True),
                locations=_locations(value),
            )
        case "terminal":
            return TerminalCallView(
                title=title,
                description=_field(value, "description", str, optional=True),
                cwd=_field(value, "cwd", str, optional=True),
            )
        case "diff":
            return DiffCallView(title=title, diffs=_diffs(value), locations=_locations(value))
        case other:
            raise ValueError(f"call view: unknown type {other!r}")


def _as_kind(kind: str | None) -> ToolKind | None:
    match kind:
        case "read" | "edit" | "delete" | "move" | "search" | "execute" | "fetch" | "other":
            return kind
        case _:
            return None


def result_view_from_json(value: JsonValue) -> ToolResultView:
    if not isinstance(value, dict):
        raise ValueError("result view: expected an object")
    title = _field(value, "title", str, optional=True)
    match value.get("type"), value.get("shape"), value.get("kind"):
        case "generic", _, _:
            return GenericResultView(
                title=title, content=_field(value, "content", str, optional=True)
            )
        case "terminal", _, _:
            return TerminalResultView(
                title=title,
                output=_field(value, "output", str, optional=True),
                exit_code=_field(value, "exitCode", int, optional=True),
                signal=_field(value, "signal", str, optional=True),
            )
        case "diff", _, _:
            return DiffResultView(title=title, diffs=_diffs(value))
        case "search", "matches", _:
            files = tuple(
                SearchFile(
                    path=_req(f, "path", str),
                    matches=tuple(
                        SearchMatch(
                            line_number=_req(m, "lineNumber", int), line=_req(m, "line", str)
                        )
                        for m in _objs(f, "matches")
                    ),
                )
                for f in _objs(value, "files")
            )
            return SearchMatchesView(
                files=files,
                truncated=_req(value, "truncated", bool),
                total=_req(value, "total", int),
            )
        case "search", "paths", _:
            paths: list[str] = []
            for p in _array(value, "paths"):
                if not isinstance(p, str):
                    raise ValueError("view.paths: expected an array of strings")
                paths.append(p)
            return SearchPathsView(
                paths=tuple(paths),
                truncated=_req(value, "truncated", bool),
                total=_req(value, "total", int),
            )
        case "read", _, _:
            return ReadResultView(
                title=title,
                path=_req(value, "path", str),
                offset=_req(value, "offset", int),
                lines=tuple(
                    ReadLine(number=_req(ln, "number", int), text=_req(ln, "text", str))
                    for ln in _objs(value, "lines")
                ),
                total_lines=_req(value, "totalLines", int),
                lang=_field(value, "lang", str, optional=True),
                content=_field(value, "content", str, optional=True),
            )
        case "web", _, "search":
            return WebSearchView(
                sources=tuple(
                    WebSource(
                        url=_req(s, "url", str),
                        title=_field(s, "title", str, optional=True),
                        snippet=_field(s, "snippet", str, optional=True),
                        published_at=_field(s, "publishedAt", str, optional=True),
                    )
                    for s in _objs(value, "sources")
                ),
                answer=_field(value, "answer", str, optional=True),
                truncated=_req(value, "truncated", bool),
            )
        case "web", _, "fetch":
            return WebFetchView(
                url=_req(value, "url", str),
                status_code=_req(value, "statusCode", int),
                truncated=_req(value, "truncated", bool),
            )
        case kind, _, _:
            raise ValueError(f"result view: unknown type {kind!r}")


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
    if not isinstance(view, GenericCallView | TerminalCallView | DiffCallView):
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
    if not isinstance(view, _RESULT_VIEW_TYPES):
        title = call_view(defn, name, raw_args).title
        return GenericResultView(title=title, content=content_text(info.content))
    return view


_RESULT_VIEW_TYPES = (
    GenericResultView,
    TerminalResultView,
    DiffResultView,
    SearchMatchesView,
    SearchPathsView,
    ReadResultView,
    WebSearchView,
    WebFetchView,
)
