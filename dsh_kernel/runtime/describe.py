"""Compact, size-capped descriptions of namespace values, and the variable listing.

``describe_value(value, max_chars=2000)`` says what a value is in a few lines a model can use: the
type, then shape/length, dtypes or columns and a head for pandas / polars / numpy values, a bounded
repr for containers (nested containers are abbreviated by depth and width), the signature and first
doc line for callables. It never raises, never imports pandas, polars or numpy (a value can only be
one of theirs if its library is already imported: it is looked up in ``sys.modules``), and its
result is at most ``max_chars`` characters, ending with ``…`` when it was cut.

``resolve_name(namespace, "model.coef_")`` looks a name (or a dotted attribute path) up without
running any code of the objects it passes: attributes are read statically
(``inspect.getattr_static``) — instance and module dictionaries, slots, class attributes and methods
— so no property, descriptor, ``__getattr__`` or ``__dir__`` runs; a property is refused with a
``ValueError`` saying so. Names starting with ``_`` (private and special: ``os.environ._data``,
``get_ipython.__self__``) are refused outright. ``NameNotFound`` says which part is missing and
lists close matches.

**The process environment is secret by default.** ``os.environ``, ``os.environb`` and the dict
under them (``os.environ._data``, which is ``posix.environ``) are described by their variable names
only, never their values, wherever they appear: described, in the listing's one-line summary, or
nested in a container's repr. A hub token or a cloud key may be among the values, and neither
``inspect`` (which runs without approval) nor ``$`os.environ``` should hand it to the model and
the log. What code takes out of the environment is an ordinary value: ``os.getenv("HOME")`` is a
``str``, and a copy (``dict(os.environ)``, ``os.environ.copy()``) is a plain ``dict`` described
like any other — telling a copy from any other dict would be a guess.

``list_variables(namespace)`` gives one ``VariableRow`` per user variable, sorted by name: names
starting with ``_``, modules, IPython's own names (``In``, ``Out``, ``get_ipython``, ``exit``,
``quit``) and, with ``callables=False``, functions and classes are skipped.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import os
import reprlib
import sys
import types
from collections.abc import Mapping, Sized
from dataclasses import dataclass
from typing import Any, Final, cast

from dsh_kernel.jsonvalue import JsonObject

_HEAD_ROWS: Final = 5
_SHORT_REPR: Final = 80


@dataclass(frozen=True, slots=True, kw_only=True)
class VariableRow:
    name: str
    type: str
    shape: str | None
    """``(rows, cols)`` for frames and arrays, ``len N`` for other sized values, else ``None``."""
    summary: str
    """A one-line repr, at most 80 characters."""

    def to_json(self) -> JsonObject:
        return {"name": self.name, "type": self.type, "shape": self.shape, "summary": self.summary}


def type_name(value: object) -> str:
    t = type(value)
    module = t.__module__
    if module in ("builtins", "__main__") or module.startswith("<"):
        return t.__qualname__
    return f"{module.partition('.')[0]}.{t.__qualname__}"


def is_environment(value: object) -> bool:
    """Whether ``value`` is the process environment (module docstring): an ``os._Environ``
    (``os.environ``, ``os.environb``) or the dict they share."""
    return isinstance(value, type(os.environ)) or value is getattr(os.environ, "_data", None)


def _environment_names(value: object) -> list[str]:
    keys = cast("Mapping[object, object]", value).keys()
    return sorted(os.fsdecode(k) if isinstance(k, bytes) else str(k) for k in keys)


def _environment_summary(value: object) -> str:
    n = len(cast("Sized", value))
    return f"<the process environment: {n:,} variables; values not shown>"


def _describe_environment(value: object, max_chars: int) -> str:
    names = _environment_names(value)
    head = (
        f"{type_name(value)} — the process environment, {len(names):,} variables; their values "
        "are not shown (they may hold tokens and keys). Names: "
    )
    shown: list[str] = []
    used = len(head)
    for i, name in enumerate(names):
        if used + len(name) + 2 > max_chars - 20:
            shown.append(f"… {len(names) - i} more")
            break
        shown.append(name)
        used += len(name) + 2
    return head + ", ".join(shown)


class _Repr(reprlib.Repr):
    """``reprlib.Repr`` that shows the process environment by its size only, at any depth."""

    def repr1(self, x: object, level: int) -> str:
        if is_environment(x):
            return _environment_summary(x)
        return super().repr1(x, level)


def _repr_engine(level: int = 3, width: int = 20, string: int = 80) -> reprlib.Repr:
    r = _Repr()
    r.maxlevel = level
    r.maxdict = r.maxlist = r.maxtuple = r.maxset = r.maxfrozenset = r.maxdeque = width
    r.maxarray = width
    r.maxstring = string
    r.maxlong = 60
    r.maxother = string
    return r


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def short_repr(value: object, limit: int = _SHORT_REPR) -> str:
    """One line, at most ``limit`` characters; never raises."""
    try:
        text = _repr_engine(level=2, width=6, string=limit).repr(value)
    except Exception as exc:
        text = f"<repr failed: {type(exc).__name__}>"
    return _cut(" ".join(text.split()), limit)


def _module(name: str) -> types.ModuleType | None:
    return sys.modules.get(name)


def describe_value(value: object, *, max_chars: int = 2000) -> str:
    try:
        text = _describe(value, max_chars)
    except Exception as exc:  # a hostile __repr__ or property: still say what it is
        text = f"{type_name(value)} (could not be described: {type(exc).__name__}: {exc})"
    return _cut(text, max_chars)


def _describe(value: object, max_chars: int) -> str:
    if is_environment(value):
        return _describe_environment(value, max_chars)
    special = _describe_library_value(value, max_chars)
    if special is not None:
        return special
    tname = type_name(value)
    if isinstance(value, str):
        return _describe_str(value, max_chars)
    if isinstance(value, bytes | bytearray):
        return f"{tname}, {len(value):,} bytes: {_repr_engine(string=max_chars // 2).repr(value)}"
    if isinstance(value, types.ModuleType):
        where = getattr(value, "__file__", None)
        return f"module {value.__name__}" + (f" ({where})" if where else "")
    if isinstance(value, type):
        return _describe_class(value)
    if callable(value) and (inspect.isroutine(value) or isinstance(value, types.MethodType)):
        return _describe_callable(value)
    width = max(5, min(50, max_chars // 40))
    body = _repr_engine(level=3, width=width, string=max(40, max_chars // 10)).repr(value)
    if isinstance(value, Mapping | list | tuple | set | frozenset):
        noun = "keys" if isinstance(value, Mapping) else "items"
        return f"{tname}, {len(cast(Sized, value)):,} {noun}: {body}"
    return f"{tname}: {body}"


def _describe_str(value: str, max_chars: int) -> str:
    n = len(value)
    lines = value.count("\n") + 1 if value else 0
    head = f"str, {n:,} chars, {lines:,} lines: "
    room = max(max_chars - len(head) - 5, 40)
    whole = repr(value[: room + 1])
    if n <= room and len(whole) <= room:
        return head + whole
    return (
        head
        + _repr_within(value, room * 2 // 3)
        + " … "
        + _repr_within(value, room // 3, tail=True)
    )


def _repr_within(value: str, limit: int, *, tail: bool = False) -> str:
    """The repr of a prefix (or suffix) of ``value`` that is at most about ``limit`` characters:
    escapes make a repr longer than its text, so shrink by the observed ratio."""
    k = limit
    for _ in range(4):
        part = value[-k:] if tail else value[:k]
        text = repr(part)
        if len(text) <= limit or k <= 1:
            return text
        k = max(1, k * limit // len(text) - 1)
    return repr(value[-1:] if tail else value[:1])


def _describe_class(value: type) -> str:
    bases = ", ".join(b.__qualname__ for b in value.__bases__ if b is not object)
    doc = inspect.getdoc(value) or ""
    first = doc.strip().splitlines()[0] if doc.strip() else ""
    return (
        f"class {value.__qualname__}"
        + (f"({bases})" if bases else "")
        + (f": {first}" if first else "")
    )


def _describe_callable(value: object) -> str:
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", type_name(value))
    try:
        sig = str(inspect.signature(value))  # pyright: ignore[reportArgumentType]
    except (TypeError, ValueError):
        sig = "(…)"
    doc = inspect.getdoc(value) or ""
    first = doc.strip().splitlines()[0] if doc.strip() else ""
    kind = "async function" if inspect.iscoroutinefunction(value) else "function"
    return f"{kind} {name}{sig}" + (f": {first}" if first else "")


# -- pandas / polars / numpy ------------------------------------------------------------------------


def _describe_library_value(value: object, max_chars: int) -> str | None:
    library = type(value).__module__.partition(".")[0]
    if library == "pandas":
        pd = _module("pandas")
        if pd is not None and isinstance(value, pd.DataFrame):
            return _describe_pandas_frame(value, max_chars)
        if pd is not None and isinstance(value, pd.Series):
            return _describe_pandas_series(value, max_chars)
    elif library == "polars":
        pl = _module("polars")
        if pl is not None and isinstance(value, pl.DataFrame):
            return _describe_polars_frame(value, max_chars)
    elif library == "numpy":
        np = _module("numpy")
        if np is not None and isinstance(value, np.ndarray):
            return _describe_ndarray(value, np, max_chars)
    return None


def _columns_line(pairs: list[tuple[str, str]], max_chars: int) -> str:
    shown: list[str] = []
    used = 0
    for i, (name, dtype) in enumerate(pairs):
        item = f"{name} ({dtype})"
        if used + len(item) > max_chars // 2:
            shown.append(f"… {len(pairs) - i} more")
            break
        shown.append(item)
        used += len(item) + 2
    return ", ".join(shown)


def _describe_pandas_frame(value: object, max_chars: int) -> str:
    df: Any = value
    rows, cols = df.shape
    pairs = [(str(c), str(t)) for c, t in df.dtypes.items()]
    head = df.head(_HEAD_ROWS).to_string(max_cols=20, max_colwidth=30)
    return (
        f"pandas.DataFrame: {rows:,} rows × {cols:,} columns\n"
        f"columns: {_columns_line(pairs, max_chars)}\n"
        f"head({_HEAD_ROWS}):\n{head}"
    )


def _describe_pandas_series(value: object, max_chars: int) -> str:
    del max_chars
    s: Any = value
    head = s.head(_HEAD_ROWS).to_string(max_rows=_HEAD_ROWS)
    return (
        f"pandas.Series {s.name!r}: {len(s):,} values, dtype {s.dtype}\nhead({_HEAD_ROWS}):\n{head}"
    )


def _describe_polars_frame(value: object, max_chars: int) -> str:
    df: Any = value
    rows, cols = df.shape
    pairs = [(str(k), str(v)) for k, v in df.schema.items()]
    head = str(df.head(_HEAD_ROWS))
    return (
        f"polars.DataFrame: {rows:,} rows × {cols:,} columns\n"
        f"columns: {_columns_line(pairs, max_chars)}\n"
        f"head({_HEAD_ROWS}):\n{head}"
    )


def _describe_ndarray(value: object, np: types.ModuleType, max_chars: int) -> str:
    a: Any = value
    line = f"numpy.ndarray: shape {tuple(a.shape)}, dtype {a.dtype}"
    if a.size and a.dtype.kind in "iuf" and a.size <= 10_000_000:
        line += f", min {a.min()}, max {a.max()}"
    body = np.array2string(a, threshold=40, edgeitems=3, max_line_width=100)
    return f"{line}\n{_cut(body, max(max_chars - len(line) - 1, 40))}"


# -- the variable listing ---------------------------------------------------------------------------

_IPYTHON_NAMES: Final = frozenset({"In", "Out", "get_ipython", "exit", "quit"})


def _shape(value: object) -> str | None:
    try:
        shape: object = getattr(value, "shape", None)
        library = type(value).__module__.partition(".")[0]
        if isinstance(shape, tuple) and library in ("numpy", "pandas", "polars"):
            return str(tuple(int(cast(int, d)) for d in cast(tuple[object, ...], shape)))
        if isinstance(value, str | bytes | bytearray | Mapping | list | tuple | set | frozenset):
            return f"len {len(cast(Sized, value)):,}"
    except Exception:
        return None
    return None


def _summary(value: object) -> str:
    """The listing's one-line value: columns for frames, dtype for arrays, the signature for
    functions, else a short repr."""
    try:
        library = type(value).__module__.partition(".")[0]
        if library in ("pandas", "polars") and hasattr(value, "columns"):
            columns = [str(c) for c in list(getattr(value, "columns"))[:30]]  # noqa: B009
            return _cut("columns: " + ", ".join(columns), _SHORT_REPR)
        if library in ("numpy", "pandas") and hasattr(value, "dtype"):
            return f"dtype {getattr(value, 'dtype')}"  # noqa: B009
        if inspect.isroutine(value):
            name = getattr(value, "__name__", "function")
            return _cut(f"{name}{inspect.signature(value)}", _SHORT_REPR)
    except Exception:
        pass
    return short_repr(value)


def list_variables(namespace: Mapping[str, object], *, callables: bool = True) -> list[VariableRow]:
    rows: list[VariableRow] = []
    for name in sorted(namespace):
        if name.startswith("_") or name in _IPYTHON_NAMES:
            continue
        value = namespace[name]
        if isinstance(value, types.ModuleType):
            continue
        if not callables and (isinstance(value, type) or inspect.isroutine(value)):
            continue
        rows.append(
            VariableRow(
                name=name, type=type_name(value), shape=_shape(value), summary=_summary(value)
            )
        )
    return rows


# -- name lookup ------------------------------------------------------------------------------------


class NameNotFound(LookupError):
    """``name`` (the full path asked for) has no ``missing`` part; ``suggestions`` are close
    matches among the names that do exist where it was looked up."""

    def __init__(
        self,
        name: str,
        missing: str,
        suggestions: list[str],
        *,
        attribute: bool,
        dynamic: bool = False,
    ) -> None:
        where = "attribute" if attribute else "variable"
        hint = f"; close matches: {', '.join(suggestions)}" if suggestions else ""
        owner = name.rsplit(".", 1)[0] if attribute else "the notebook namespace"
        if dynamic:
            hint += (
                f" (attributes that {owner}'s __getattr__ would make, like a DataFrame's columns, "
                f"are not looked up: inspect {owner} itself)"
            )
        super().__init__(f"no {where} {missing!r} in {owner}{hint}")
        self.name = name
        self.missing = missing
        self.suggestions = suggestions


def resolve_name(namespace: Mapping[str, object], name: str) -> object:
    """The value of ``name`` or ``a.b.c``, read statically (module docstring). Raises
    ``NameNotFound``, or ``ValueError`` when ``name`` is not a dotted identifier path, names a private
    or special part, or reaches a property."""
    parts = name.strip().split(".")
    if not all(p.isidentifier() for p in parts):
        raise ValueError(
            f"{name!r} is not a variable name or a dotted attribute path (like model.coef_)"
        )
    private = next((p for p in parts if p.startswith("_")), None)
    if private is not None:
        raise ValueError(
            f"{name!r}: {private!r} is a private or special name (it starts with '_'); inspect "
            "looks at public names only"
        )
    head = parts[0]
    if head not in namespace:
        visible = [k for k in namespace if not k.startswith("__")]
        raise NameNotFound(name, head, _similar(head, visible), attribute=False)
    value = namespace[head]
    for i, part in enumerate(parts[1:], start=1):
        path = ".".join(parts[: i + 1])
        try:
            value = _static_attribute(value, part, path)
        except AttributeError:
            options = [a for a in _static_names(value) if not a.startswith("_")]
            dynamic = inspect.getattr_static(type(value), "__getattr__", None) is not None
            raise NameNotFound(
                path, part, _similar(part, options), attribute=True, dynamic=dynamic
            ) from None
    return value


_NO_CODE = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.ClassMethodDescriptorType,
)
"""Class attributes that are functions: returned as they are (described, never called)."""


def _static_attribute(value: object, name: str, path: str) -> object:
    """``value.name`` without running code of ``value``'s type: see the module docstring."""
    found: object = inspect.getattr_static(value, name)
    if isinstance(found, classmethod | staticmethod):
        return cast("classmethod[Any, Any, Any] | staticmethod[Any, Any]", found).__func__
    if isinstance(value, type | types.ModuleType) or isinstance(found, _NO_CODE):
        return found  # what a class or module holds is its value (reading it runs nothing)
    if isinstance(found, types.MemberDescriptorType):  # a slot: stored, not computed
        return found.__get__(value, type(value))
    if inspect.getattr_static(type(found), "__get__", None) is not None:
        kind = "a property" if isinstance(found, property) else f"the {type(found).__name__}"
        raise ValueError(
            f"{path!r} is computed when read (by {kind} of {type_name(value)}), and inspect runs "
            "no code: inspect the object itself, or read it with the python tool"
        )
    return found


def _static_names(value: object) -> list[str]:
    """Attribute names of ``value`` found without calling ``dir`` (which runs ``__dir__``)."""
    names: set[str] = set()
    holder = inspect.getattr_static(type(value), "__dict__", None)
    if isinstance(holder, types.GetSetDescriptorType | types.MemberDescriptorType):
        with contextlib.suppress(Exception):
            own = holder.__get__(value, type(value))
            if isinstance(own, dict):
                names.update(k for k in cast("dict[object, object]", own) if isinstance(k, str))
    classes = value.__mro__ if isinstance(value, type) else type(value).__mro__
    for cls in classes:
        with contextlib.suppress(Exception):
            names.update(cls.__dict__)
    return sorted(names)


def _similar(word: str, options: list[str], n: int = 5) -> list[str]:
    """Close spellings first, then names containing ``word`` (``sale`` → ``sales_2024``)."""
    found = difflib.get_close_matches(word, options, n=n, cutoff=0.6)
    lowered = word.lower()
    found += sorted(o for o in options if lowered in o.lower() and o not in found)
    return found[:n]
