"""``@tool``: a Python function becomes a tool, its ``ToolDefinition`` built from its signature.

The decorator returns the function as written, still callable, with the definition attached as
``fn.tool_definition``; ``build_definition(fn)`` builds the same definition without attaching it.

Parameters become the arguments object (``additionalProperties: false``, or ``true`` with
``**kwargs``); a parameter annotated ``ToolContext`` receives the call's context and is not shown.
The description is the docstring up to its first section; Google (``Args:``) and NumPy
(``Parameters`` + dashes) parameter sections give each property its description.

Annotations map to the enforced subset (``dsh_kernel.tools.schema``)::

    str int float bool None       string integer number boolean null
    list[T]  dict[str, T]         array{items: T}  object{additionalProperties: T}
    Literal[...] / Enum           typed enum (mixed types → oneOf of typed enums)
    A | B                         oneOf (int | float → number)
    T | None = None               T, not required: omit it to get None (models handle omission
                                  far better than an explicit null); T | None without a None
                                  default keeps an explicit null alternative
    Annotated[T, "text"|Field]    T, with that description
    BaseModel, dataclass          object, via pydantic's schema (see ``from_json_schema``)
    TypedDict                     object with its keys (total=False keys not required)
    Any, object, JsonValue, none  {} (any JSON)

Anything else is refused with ``ToolSchemaError`` at decoration time. Arguments are validated
against the schema by the pipeline; parameters whose type needs it (models, dataclasses, enums,
``dict[str, T]`` values, pydantic constraints) are then coerced through pydantic — as the tool's
``check_args``, which the pipeline runs *before approval*, so everything the signature says is
checked before anyone is asked, and a failure is ``INVALID_ARGS`` with no approval request. The
coerced values are kept for the call that follows (the same arguments object), so pydantic runs
once per call. A pydantic return value is dumped to JSON; the return annotation becomes the output
schema when it is a plain JSON type.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import (
    Annotated,
    Literal,
    ParamSpec,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
    overload,
)

import typing_extensions
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from dsh_kernel.errors import ToolArgsError, ToolOutputError, ToolSchemaError, UsageError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.tools.schema import (
    NULL_SCHEMA,
    check_schema,
    from_json_schema,
    strip_optional_null,
    union_schema,
)
from dsh_kernel.tools.types import (
    RESERVED_TOOL_NAMES,
    TOOL_ATTRIBUTE,
    TOOL_NAME_PATTERN,
    ToolContext,
    ToolDefinition,
    ToolFunction,
    always_concurrent,
    never_concurrent,
)

P = ParamSpec("P")
R = TypeVar("R")

_JSON_ORIGINS = {bool, int, float, str, list, dict, type(None)}
_SCALARS: Mapping[object, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
    None: "null",
}


def _is_json_value(tp: object) -> bool:
    """The ``JsonValue`` alias (and any union of all JSON kinds) means "any JSON"."""
    if get_origin(tp) not in (Union, types.UnionType):
        return False
    return {get_origin(a) or a for a in get_args(tp)} == _JSON_ORIGINS


def _is_model(tp: object) -> bool:
    if not isinstance(tp, type):
        return False
    cls = cast(type[object], tp)
    return issubclass(cls, BaseModel | enum.Enum) or dataclasses.is_dataclass(cls)


def _is_any(tp: object) -> bool:
    return tp is typing.Any or tp is object or tp is inspect.Parameter.empty or _is_json_value(tp)


def schema_for(tp: object, where: str = "$") -> JsonObject:
    """The subset schema for a type annotation (see the module docstring)."""
    if _is_any(tp):
        return {}
    if tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        if any(isinstance(m, FieldInfo) for m in args[1:]):
            # pydantic knows what its Field constraints mean; let it write them (as hints).
            try:
                return from_json_schema(_adapter(tp, where).json_schema())
            except ToolSchemaError:
                pass
        inner = schema_for(args[0], where)
        for meta in args[1:]:
            desc = meta if isinstance(meta, str) else getattr(meta, "description", None)
            if isinstance(meta, FieldInfo | str) and isinstance(desc, str):
                inner = {**inner, "description": desc}
        return inner
    if origin is Literal:
        return _literal_schema(args, where)
    if origin in (Union, types.UnionType):
        return union_schema([schema_for(a, where) for a in args])
    if tp is list or origin is list:
        return {"type": "array", "items": schema_for(args[0], f"{where}[]")} if args else _ARRAY
    if tp is dict or origin is dict:
        if args and args[0] is not str:
            raise ToolSchemaError(
                f"dict keys must be str at {where} (JSON object keys are strings)"
            )
        values = schema_for(args[1], f"{where}{{}}") if len(args) == 2 else {}
        return {"type": "object", "additionalProperties": values or True}
    if typing_extensions.is_typeddict(tp):
        return _typeddict_schema(cast(type, tp), where)
    if _is_model(tp):
        try:
            return from_json_schema(_adapter(tp, where).json_schema())
        except ToolSchemaError as exc:
            raise ToolSchemaError(f"{exc} (in {getattr(tp, '__name__', tp)} at {where})") from exc
    raise ToolSchemaError(f"cannot express annotation {tp!r} at {where} as a JSON schema")


_ARRAY: JsonObject = {"type": "array"}


def _adapter(tp: object, where: str) -> TypeAdapter[object]:
    try:
        return TypeAdapter(cast(type[object], tp))
    except Exception as exc:  # pydantic refuses some types (e.g. typing.TypedDict inside a model)
        raise ToolSchemaError(f"pydantic cannot handle {tp!r} at {where}: {exc}") from exc


def _literal_schema(values: tuple[object, ...], where: str) -> JsonObject:
    """Literal values grouped into one typed enum per JSON type."""
    groups: dict[str, list[JsonValue]] = {}
    for value in values:
        v = value.value if isinstance(value, enum.Enum) else value
        if v is None:
            groups.setdefault("null", [])
            continue
        for py, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string")):
            if isinstance(v, py):
                groups.setdefault(name, []).append(cast(JsonValue, v))
                break
        else:
            raise ToolSchemaError(f"Literal value {value!r} at {where} is not a JSON scalar")
    return union_schema(
        [NULL_SCHEMA if t == "null" else {"type": t, "enum": vs} for t, vs in groups.items()]
    )


def _typeddict_schema(tp: type, where: str) -> JsonObject:
    hints = typing.get_type_hints(tp, include_extras=True)
    # ``__required_keys__`` misses NotRequired[...] written as a string annotation (PEP 563), so
    # the resolved Required/NotRequired wrappers decide first.
    declared: frozenset[str] = getattr(tp, "__required_keys__", frozenset(hints))
    props: JsonObject = {}
    required: list[JsonValue] = []
    for key, hint in hints.items():
        wrapper = get_origin(hint)
        inner_hint = get_args(hint)[0] if wrapper in _REQUIRED_WRAPPERS else hint
        is_required = wrapper is typing_extensions.Required or (
            wrapper is not typing_extensions.NotRequired and key in declared
        )
        inner = schema_for(inner_hint, f"{where}.{key}")
        props[key] = inner if is_required else strip_optional_null(inner)
        if is_required:
            required.append(key)
    out: JsonObject = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        out["required"] = required
    return out


_REQUIRED_WRAPPERS = (typing_extensions.Required, typing_extensions.NotRequired)


def _needs_coercion(tp: object) -> bool:
    if _is_any(tp) or tp in _SCALARS:
        return False
    if _is_model(tp):
        return True
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        return _needs_coercion(args[0]) or any(isinstance(m, FieldInfo) for m in args[1:])
    if origin is dict:
        return len(args) == 2 and not _is_any(args[1])
    if origin in (list, Union, types.UnionType):
        return any(_needs_coercion(a) for a in args)
    return False


# -- docstrings -------------------------------------------------------------------------------------

_GOOGLE_HEADER = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Returns|Return|Yields|Raises|"
    r"Examples?|Notes?|Attributes|See Also|Warnings?):\s*$"
)
_GOOGLE_PARAM_HEADERS = {"Args", "Arguments", "Parameters", "Params", "Keyword Args"}
_GOOGLE_ITEM = re.compile(r"^\**(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
_NUMPY_ITEM = re.compile(r"^(\w+)\s*(?::.*)?$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """``(description, {param: description})`` from a Google- or NumPy-style docstring."""
    lines = inspect.cleandoc(doc or "").splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    i = 0
    in_sections = False
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        numpy = i + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[i + 1].strip() or "x")
        google = _GOOGLE_HEADER.match(stripped) if line == line.lstrip() else None
        if numpy and line == line.lstrip() and stripped:
            in_sections = True
            i = _numpy_section(lines, i + 2, params if stripped == "Parameters" else None)
            continue
        if google:
            in_sections = True
            target = params if google.group(1) in _GOOGLE_PARAM_HEADERS else None
            i = _google_section(lines, i + 1, target)
            continue
        if not in_sections:
            summary.append(line)
        i += 1
    return "\n".join(summary).strip(), params


def _google_section(lines: list[str], i: int, params: dict[str, str] | None) -> int:
    current: str | None = None
    item_indent: int | None = None
    while i < len(lines):
        line = lines[i]
        if line.strip() and line == line.lstrip():
            return i
        indent = len(line) - len(line.lstrip())
        m = _GOOGLE_ITEM.match(line.strip())
        if line.strip() and m and (item_indent is None or indent <= item_indent):
            item_indent = indent
            current = str(m.group(1))
            if params is not None:
                params[current] = m.group(3).strip()
        elif line.strip() and current is not None and params is not None:
            params[current] = f"{params[current]} {line.strip()}".strip()
        i += 1
    return i


def _numpy_section(lines: list[str], i: int, params: dict[str, str] | None) -> int:
    current: str | None = None
    while i < len(lines):
        line = lines[i]
        if line.strip() and line == line.lstrip():
            if i + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[i + 1].strip() or "x"):
                return i
            m = _NUMPY_ITEM.match(line.strip())
            current = m.group(1) if m else None
            if current is not None and params is not None:
                params[current] = ""
        elif line.strip() and current is not None and params is not None:
            params[current] = f"{params[current]} {line.strip()}".strip()
        i += 1
    return i


# -- the decorator ----------------------------------------------------------------------------------

_Function = Callable[..., object]


@overload
def tool(fn: Callable[P, R], /) -> ToolFunction[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    concurrency_safe: bool = False,
    timeout_ms: int | None = None,
) -> Callable[[Callable[P, R]], ToolFunction[P, R]]: ...


def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    concurrency_safe: bool = False,
    timeout_ms: int | None = None,
) -> ToolFunction[P, R] | Callable[[Callable[P, R]], ToolFunction[P, R]]:
    """Declare a tool from a function: ``@tool`` or ``@tool(name=..., read_only=True, ...)``.

    Returns the function itself, still callable as written, with its ``ToolDefinition`` attached as
    ``fn.tool_definition`` (``tools.types.ToolFunction``); ``Agent(tools=...)``, a registry and
    `` &`fn` `` take it as they take a definition. A callable that cannot carry an attribute (a bound
    method, a builtin) comes back wrapped in a function that calls it. Decorating again replaces the
    attached definition.
    """

    def decorate(f: Callable[P, R]) -> ToolFunction[P, R]:
        defn = build_definition(
            f,
            name=name,
            description=description,
            read_only=read_only,
            concurrency_safe=concurrency_safe,
            timeout_ms=timeout_ms,
        )
        return cast(ToolFunction[P, R], _attach(f, defn))

    return decorate(fn) if fn is not None else decorate


def _attach(fn: _Function, defn: ToolDefinition) -> ToolFunction[..., object]:
    target = fn
    try:
        setattr(target, TOOL_ATTRIBUTE, defn)
    except (AttributeError, TypeError):
        # A bound method or a builtin has no attribute dictionary of its own: hand back a function
        # that calls it, carrying its name, docstring and signature.
        @functools.wraps(fn)
        def forward(*args: object, **kwargs: object) -> object:
            return fn(*args, **kwargs)

        target = forward
        setattr(target, TOOL_ATTRIBUTE, defn)
    return cast(ToolFunction[..., object], target)


# Complexity (C901): each unsupported signature shape is its own check and error.
def build_definition(  # noqa: C901
    fn: _Function,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    concurrency_safe: bool = False,
    timeout_ms: int | None = None,
) -> ToolDefinition:
    """The ``ToolDefinition`` ``@tool`` would attach to ``fn``, leaving ``fn`` untouched (what
    `` &`fn` `` offers for one message). Raises ``ToolSchemaError`` or ``UsageError`` as ``@tool``
    does."""
    tool_name = name or getattr(fn, "__name__", "")
    if not TOOL_NAME_PATTERN.match(tool_name):
        raise UsageError(f"invalid tool name {tool_name!r}: use 1-64 letters, digits, '_' or '-'")
    if tool_name in RESERVED_TOOL_NAMES:
        raise UsageError(f"tool name {tool_name!r} is reserved")
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ToolSchemaError(f"cannot resolve the annotations of {tool_name!r}: {exc}") from exc
    summary, param_docs = parse_docstring(inspect.getdoc(fn))

    props: JsonObject = {}
    required: list[JsonValue] = []
    adapters: dict[str, TypeAdapter[object]] = {}
    context_param: str | None = None
    open_kwargs = False
    for p in inspect.signature(fn).parameters.values():
        where = f"{tool_name}({p.name})"
        if p.kind is p.VAR_KEYWORD:
            open_kwargs = True
            continue
        if p.kind in (p.VAR_POSITIONAL, p.POSITIONAL_ONLY):
            raise ToolSchemaError(f"{where}: only named parameters can become tool arguments")
        hint = hints.get(p.name, inspect.Parameter.empty)
        if hint is ToolContext:
            context_param = p.name
            continue
        schema = schema_for(hint, where)
        if param_docs.get(p.name):
            schema = {**schema, "description": param_docs[p.name]}
        if p.default is p.empty:
            required.append(p.name)
        else:
            default = _json_default(p.default)
            if default is not _NO_DEFAULT:
                schema = {**schema, "default": cast(JsonValue, default)}
            schema = strip_optional_null(schema)
        props[p.name] = schema
        if _needs_coercion(hint):
            adapters[p.name] = _adapter(hint, where)

    parameters: JsonObject = {
        "type": "object",
        "properties": props,
        "additionalProperties": open_kwargs,
    }
    if required:
        parameters["required"] = required
    check_schema(parameters)

    returns = hints.get("return", inspect.Parameter.empty)
    output_schema: JsonObject | None = None
    dump: TypeAdapter[object] | None = None
    if returns is not inspect.Parameter.empty and not _is_any(returns):
        if _needs_coercion(returns):
            dump = _adapter(returns, f"{tool_name} -> return")
        else:
            try:
                output_schema = schema_for(returns, f"{tool_name} -> return")
            except ToolSchemaError:
                output_schema = None  # an unexpressible return type is simply not checked

    def coerced(args: JsonObject) -> dict[str, object]:
        kwargs: dict[str, object] = {}
        for key, value in args.items():
            adapter = adapters.get(key)
            if adapter is None:
                kwargs[key] = value
                continue
            try:
                kwargs[key] = adapter.validate_python(value)
            except ValidationError as exc:
                raise ToolArgsError(f"invalid arguments: {_pydantic_errors(key, exc)}") from exc
        return kwargs

    # The arguments last checked before approval and their coerced values (one slot, replaced as a
    # whole: a call finds its own by identity, or coerces again — a concurrent call's never leaks).
    checked: list[tuple[JsonObject, dict[str, object]]] = []

    def check_args(args: JsonObject) -> None:
        checked[:] = [(args, coerced(args))]

    def kwargs_for(args: JsonObject, ctx: ToolContext) -> dict[str, object]:
        slot = checked[0] if checked else None
        kwargs = dict(slot[1]) if slot is not None and slot[0] is args else coerced(args)
        if context_param is not None:
            kwargs[context_param] = ctx
        return kwargs

    def to_json(value: object) -> JsonValue:
        try:
            if dump is not None:
                return cast(JsonValue, dump.dump_python(value, mode="json"))
            if isinstance(value, BaseModel):
                return cast(JsonValue, value.model_dump(mode="json"))
        except Exception as exc:
            raise ToolOutputError(
                f"tool '{tool_name}' returned a value that is not JSON: {exc}"
            ) from exc
        return cast(JsonValue, value)

    execute: Callable[[JsonObject, ToolContext], object]
    if inspect.iscoroutinefunction(fn):

        async def run_async(args: JsonObject, ctx: ToolContext) -> JsonValue:
            return to_json(await fn(**kwargs_for(args, ctx)))

        execute = run_async
    else:

        def run_sync(args: JsonObject, ctx: ToolContext) -> JsonValue:
            return to_json(fn(**kwargs_for(args, ctx)))

        execute = run_sync

    return ToolDefinition(
        name=tool_name,
        description=description if description is not None else summary,
        parameters=parameters,
        execute=cast(Callable[[JsonObject, ToolContext], JsonValue], execute),
        output_schema=output_schema,
        timeout_ms=timeout_ms,
        is_concurrency_safe=always_concurrent if concurrency_safe else never_concurrent,
        read_only=read_only,
        check_args=check_args if adapters else None,
    )


_NO_DEFAULT = object()


def _json_default(value: object) -> object:
    """The default as a JSON annotation, or ``_NO_DEFAULT`` when it has no exact JSON form."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    try:
        if json.loads(json.dumps(value, allow_nan=False)) == value:
            return value
    except (TypeError, ValueError):
        pass
    return _NO_DEFAULT


def _pydantic_errors(param: str, exc: ValidationError) -> str:
    parts: list[str] = []
    for err in exc.errors(include_url=False):
        path = (
            "$."
            + param
            + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.get("loc", ()))
        )
        parts.append(f"{path}: {err.get('msg', 'invalid value')}")
    return "; ".join(parts)
