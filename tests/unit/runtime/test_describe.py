"""describe_value, list_variables and resolve_name."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dsh_kernel.runtime import NameNotFound, describe_value, list_variables, resolve_name


def test_pandas_frame_gives_shape_columns_dtypes_and_head() -> None:
    df = pd.DataFrame({"a": range(1000), "name": ["x"] * 1000, "f": np.linspace(0, 1, 1000)})
    text = describe_value(df)
    lines = text.splitlines()
    assert lines[0] == "pandas.DataFrame: 1,000 rows × 3 columns"
    assert lines[1].startswith("columns: a (int64), name (")
    assert "f (float64)" in lines[1]
    assert lines[2] == "head(5):"
    assert len(lines) == 3 + 1 + 5  # header row + five rows
    assert "0.004004" in lines[-1]


def test_wide_frames_and_long_descriptions_are_capped() -> None:
    wide = pd.DataFrame({f"column_{i}": [i] for i in range(500)})
    text = describe_value(wide, max_chars=600)
    assert len(text) <= 600
    assert "more" in text.splitlines()[1]  # the columns line says how many are not listed


def test_pandas_series() -> None:
    s = pd.Series([1.5, 2.5, 3.5], name="price")
    text = describe_value(s)
    assert text.startswith("pandas.Series 'price': 3 values, dtype float64\nhead(5):")
    assert "2.5" in text


def test_numpy_arrays() -> None:
    text = describe_value(np.arange(12).reshape(3, 4))
    assert text.splitlines()[0] == "numpy.ndarray: shape (3, 4), dtype int64, min 0, max 11"
    assert "[ 8  9 10 11]]" in text
    big = describe_value(np.zeros((1000, 1000)))
    assert big.startswith("numpy.ndarray: shape (1000, 1000), dtype float64")
    assert "..." in big and len(big) < 2000


def test_large_strings_show_head_and_tail_within_the_cap() -> None:
    value = "start-" + "abc\n" * 100_000 + "-end"
    text = describe_value(value, max_chars=500)
    assert len(text) <= 500
    assert text.startswith("str, 400,010 chars, 100,001 lines: 'start-")
    assert " … " in text and text.endswith("-end'")
    assert describe_value("short") == "str, 5 chars, 1 lines: 'short'"


def test_nested_dicts_are_abbreviated_by_depth_and_width() -> None:
    value = {"a": {"b": {"c": {"d": {"e": 1}}}}, "l": list(range(100))}
    text = describe_value(value)
    assert text.startswith("dict, 2 keys: {'a': {'b': {'c': {...}}}")
    assert "..." in text and "99" not in text


def test_callables_classes_and_bad_reprs() -> None:
    def area(w: float, h: float = 1.0) -> float:
        """Area of a rectangle.

        More text."""
        return w * h

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("nope")

    assert describe_value(area) == (
        "function test_callables_classes_and_bad_reprs.<locals>.area"
        "(w: 'float', h: 'float' = 1.0) -> 'float': Area of a rectangle."
    )
    assert describe_value(ValueError).startswith("class ValueError(Exception): ")
    broken = describe_value(Broken())
    assert broken.startswith("tests.test_callables_classes_and_bad_reprs.<locals>.Broken: <Broken")


def test_list_variables_skips_private_modules_and_ipython_names() -> None:
    ns: dict[str, object] = {
        "df": pd.DataFrame({"a": [1], "b": [2]}),
        "arr": np.ones((2, 3)),
        "items": [1, 2, 3],
        "n": 5,
        "fn": describe_value,
        "_hidden": 1,
        "np": np,
        "In": [],
        "Out": {},
        "get_ipython": lambda: None,
        "exit": None,
        "quit": None,
    }
    rows = list_variables(ns)
    assert [r.name for r in rows] == ["arr", "df", "fn", "items", "n"]
    by_name = {r.name: r for r in rows}
    assert by_name["df"].type == "pandas.DataFrame" and by_name["df"].shape == "(1, 2)"
    assert by_name["df"].summary == "columns: a, b"
    assert by_name["arr"].shape == "(2, 3)" and by_name["arr"].summary == "dtype float64"
    assert by_name["items"].shape == "len 3" and by_name["items"].summary == "[1, 2, 3]"
    assert by_name["fn"].summary.startswith("describe_value(value")
    assert [r.name for r in list_variables(ns, callables=False)] == ["arr", "df", "items", "n"]
    assert by_name["n"].to_json() == {"name": "n", "type": "int", "shape": None, "summary": "5"}


def test_resolve_name_reads_attributes_without_evaluating() -> None:
    df = pd.DataFrame({"alpha": [1]})
    ns: dict[str, object] = {"df": df, "df2": 1}
    assert resolve_name(ns, "df") is df
    with pytest.raises(ValueError, match="computed when read"):
        resolve_name(ns, "df.columns")  # a property: inspect runs no code
    with pytest.raises(NameNotFound) as missing:
        resolve_name(ns, "dff")
    assert str(missing.value) == (
        "no variable 'dff' in the notebook namespace; close matches: df, df2"
    )
    with pytest.raises(NameNotFound) as attr:
        resolve_name(ns, "df.colums")
    assert str(attr.value).startswith("no attribute 'colums' in df; close matches: columns")
    with pytest.raises(ValueError, match="not a variable name"):
        resolve_name(ns, "df['alpha']")
    with pytest.raises(ValueError):
        resolve_name(ns, "__import__('os').system('true')")


class _Trap:
    """Every dynamic hook raises: a static lookup must never run one."""

    __slots__ = ("__dict__", "slot")

    def __init__(self) -> None:
        self.slot = "in a slot"
        self.plain = "in the instance dict"

    @property
    def secret(self) -> str:
        raise AssertionError("a property ran")

    def __getattr__(self, name: str) -> object:
        raise AssertionError("__getattr__ ran")

    def __dir__(self) -> list[str]:
        raise AssertionError("__dir__ ran")

    @classmethod
    def build(cls) -> None:
        """Make one."""


def test_resolve_name_runs_no_code_of_the_objects_it_passes() -> None:
    import os

    ns: dict[str, object] = {"t": _Trap(), "os": os, "get_ipython": _Trap().build}
    assert resolve_name(ns, "t.slot") == "in a slot"
    assert resolve_name(ns, "t.plain") == "in the instance dict"
    assert resolve_name(ns, "t.build") is _Trap.__dict__["build"].__func__
    assert resolve_name(ns, "os.environ") is os.environ
    with pytest.raises(ValueError, match="computed when read"):
        resolve_name(ns, "t.secret")
    with pytest.raises(NameNotFound, match="close matches: plain"):
        resolve_name(ns, "t.plan")
    for private in ("os.environ._data", "get_ipython.__self__", "t.__dict__", "_t", "t._x"):
        with pytest.raises(ValueError, match="private or special name"):
            resolve_name(ns, private)


CANARY = "hub-token-Vq8Lz3Rk6Wm1Tx5Jd9"


def test_the_environment_is_described_by_its_names_never_its_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os
    import posix

    from dsh_kernel.runtime.describe import short_repr

    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", CANARY)
    environment = [os.environ, os.environb, os.environ._data, posix.environ]  # pyright: ignore[reportAttributeAccessIssue]
    for env in environment:
        text = describe_value(env, max_chars=100_000)
        assert "the process environment" in text and "values are not shown" in text, text
        assert "JUPYTERHUB_API_TOKEN" in text and "PATH" in text
        assert CANARY not in text and os.environ["PATH"] not in text
        assert CANARY not in short_repr(env, 10_000)
    # nested in a container, in the listing's summary: still no value
    nested = describe_value({"env": os.environ, "more": [os.environb]}, max_chars=100_000)
    assert nested.count("<the process environment: ") == 2 and CANARY not in nested
    [row] = list_variables({"env": os.environ})
    assert row.summary.startswith("<the process environment: ") and CANARY not in row.summary
    # a long environment's names are cut, with how many more
    text = describe_value(os.environ, max_chars=200)
    assert len(text) <= 200 and "more" in text


def test_values_taken_out_of_the_environment_are_ordinary_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", CANARY)
    assert CANARY in describe_value(os.getenv("JUPYTERHUB_API_TOKEN"))
    # a copy is a plain dict, described like any other (the user's value now)
    assert CANARY in describe_value(dict(os.environ), max_chars=100_000)
