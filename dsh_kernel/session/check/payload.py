"""The check of an event's data against its payload type (``dsh_kernel.session.payloads``).

``problem(type_, data)`` says what is wrong — a required key missing, a key of the wrong JSON kind,
the same inside a nested payload type (``ToolResultError``) or a tagged union of them (``TurnEnd``'s
``reason``: its ``kind`` must be one of the union's tags, then its member is checked) — or ``None``. The log runs it on every
append and the journal reader on every line, so a reader may trust the kinds of the keys it finds.
It is split from the vocabulary because it is a different job: the vocabulary is declarations, this
is the small interpreter that reads them (once, at import) into per-type specs.
"""

import types
from collections.abc import Mapping
from typing import (
    NotRequired,
    TypeAlias,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

from dsh_kernel.session.payloads import PAYLOADS

# --- checking a payload -----------------------------------------------------------------------------

_ANY: tuple[type, ...] = ()
"""Any JSON value (``JsonValue``): nothing to check beyond the log's lossless gate."""


def _kinds(annotation: object) -> tuple[type, ...]:
    """The runtime types a value of ``annotation`` may have (``_ANY``: any JSON value)."""
    origin = get_origin(annotation)
    if origin is NotRequired:
        return _kinds(get_args(annotation)[0])
    for simple in (int, str, bool):
        if annotation is simple:
            return (simple,)
    if origin is list:
        return (list,)
    if origin is dict or is_typeddict(annotation) or _members(annotation):
        return (dict,)
    return _ANY


def _members(annotation: object) -> tuple[type, ...]:
    """The member payload types of a union of them (``TurnEndReason``), else ``()``."""
    if get_origin(annotation) not in (Union, types.UnionType):
        return ()
    members = get_args(annotation)
    ok = all(isinstance(m, type) and is_typeddict(m) for m in members)
    return cast("tuple[type, ...]", members) if ok else ()


def _tag(cls: type) -> str:
    """The ``kind`` of one member of a tagged union (its ``kind: Literal["…"]``)."""
    (tag,) = get_args(get_type_hints(cls)["kind"])
    return cast("str", tag)


_Check: TypeAlias = "tuple[str, type, _Spec | _Tagged | None]"
"""A key to check: its name, its exact JSON type, and the spec of its value when it is a payload
(or a tagged union of payloads)."""
_Spec: TypeAlias = tuple[frozenset[str], tuple[str, ...], tuple[_Check, ...]]
_Tagged: TypeAlias = dict[str, _Spec]
"""A tagged union's members by their ``kind``."""


def _nested(annotation: object) -> "_Spec | _Tagged | None":
    """The spec of a key whose value is a payload (``ToolResult.error``) or a tagged union of them
    (``TurnEnd.reason``), else ``None``."""
    if get_origin(annotation) is NotRequired:
        return _nested(get_args(annotation)[0])
    if isinstance(annotation, type) and is_typeddict(annotation):
        return _spec(annotation)
    members = _members(annotation)
    return {_tag(m): _spec(m) for m in members} if members else None


def _spec(cls: type) -> _Spec:
    """``(required keys, them in order, (key, exact type, nested spec) of each key with a kind to
    check)``."""
    required: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
    hints = get_type_hints(cls)
    order = tuple(k for k in cls.__annotations__ if k in required)
    checks = tuple(
        (k, kinds[0], _nested(hints[k])) for k in cls.__annotations__ if (kinds := _kinds(hints[k]))
    )
    return required, order, checks


_SPECS = {t: _spec(cls) for t, cls in PAYLOADS.items()}

_KIND_NAMES = {
    int: "an integer",
    str: "a string",
    bool: "true or false",
    list: "a list",
    dict: "an object",
}


def problem(type_: str, data: Mapping[str, object], *, kinds: bool = True) -> str | None:
    """What is wrong with ``data`` as ``type_``'s payload — a required key missing, or a key of the
    wrong JSON kind (an integer, a string, true/false, a list, an object: the exact JSON type, so
    ``True`` is not an integer), inside a nested payload type too (``ToolResult.error``: its keys
    are named ``error.code``) — else ``None``. Unknown types and extra keys are not this check's
    business. ``kinds=False`` checks the required keys only. Cheap (a set comparison and one type
    lookup per typed key): the log runs it on every append — the required keys only for
    ``assistant/chunk``, the hot path, whose values the agent builds from typed chunks — and the
    journal reader, in full, on every line."""
    spec = _SPECS.get(type_)
    if spec is None:
        return None
    required, order, checks = spec
    if not data.keys() >= required:
        return _missing(type_, "", order, data)
    return _kind_problem(type_, "", checks, data) if kinds else None


def _missing(type_: str, prefix: str, order: tuple[str, ...], data: Mapping[str, object]) -> str:
    missing = [prefix + k for k in order if k not in data]
    return f"{type_} event is missing data field(s): {', '.join(missing)}"


def _kind_problem(
    type_: str, prefix: str, checks: tuple[_Check, ...], data: Mapping[str, object]
) -> str | None:
    """The first key of the wrong kind (named ``<prefix><key>``), looking into nested payloads."""
    for key, kind, nested in checks:
        value = data.get(key, _ABSENT)
        if value is _ABSENT:
            continue
        if type(value) is not kind:
            what = f"{type_} data field {prefix + key!r}"
            return f"{what} must be {_KIND_NAMES[kind]}, not {value!r:.40}"
        if nested is not None:
            inner = cast("dict[str, object]", value)
            if isinstance(nested, dict):
                tag = inner.get("kind")
                member = nested.get(tag) if isinstance(tag, str) else None
                if member is None:
                    tags = ", ".join(nested)
                    return f"{type_} data field '{prefix}{key}.kind' must be one of {tags}, not {tag!r:.40}"
                nested = member
            inner_required, inner_order, inner_checks = nested
            if not inner.keys() >= inner_required:
                return _missing(type_, f"{prefix}{key}.", inner_order, inner)
            wrong = _kind_problem(type_, f"{prefix}{key}.", inner_checks, inner)
            if wrong is not None:
                return wrong
    return None


_ABSENT = object()
