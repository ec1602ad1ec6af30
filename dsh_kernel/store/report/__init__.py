"""A course's summary from Parquet exports and submitted notebooks: per student, per notebook,
tools and errors.

``read_sources(paths)`` takes what an instructor collected — each path an export (``python -m
dsh_kernel export --parquet``, or ``%agent export --parquet``: a folder holding
``sessions.parquet``), a notebook (``.ipynb``), or a folder of them: its subfolders that are
exports, its notebooks and its subfolders' notebooks (one level down; hidden folders such as
``.ipynb_checkpoints`` are not read). ``course_report(exports, notebooks=…)`` reads them with DuckDB
(in memory; built-in parquet only) into a ``CourseReport``: rows a renderer
(``store.report.render``) turns into Markdown or HTML. ``read_exports(paths)`` is the exports only.

A notebook counts as the conversations its chat cells' capsules carry (``store.report.notebooks``:
they are written to a scratch store and exported, so they are counted by the same queries). Those
rows are **self-reported** — anyone can edit a notebook and hash its capsules again — and marked so;
the shared store, and its exports, stay the graded source.

How it counts (the report says the same in its notes):

* **student** — the session header's ``user`` (``sessions.user``); when it is NULL (a session
  written before dsh-kernel recorded it, or a kernel with no user variable and no account name)
  the name of the export folder the session came from;
* **a session counted once** — the same session in two exports (a student exported twice) is read
  from the export where it is most recent (``last_active``, then ``events``), so nothing is doubled;
  a session both in an export and in a notebook is read from the export, whatever the notebook says;
  a fork's copied turns, calls and errors (``seeded``) are its parent's and are not counted again;
* **turns, tool calls, tool errors, errors** — rows of ``turns``, ``tool_calls`` (``is_error``) and
  ``errors`` (every source: turn, crash, request, tool);
* **tokens, cost** — ``sessions.total_tokens`` and ``sessions.cost`` (a session's own requests,
  compactions included); a cost where some request had no price is a lower bound (shown ``≥``), and
  one where none had is unknown;
* **budget hits** — turns that ended with ``BUDGET_EXCEEDED``;
* **policy hits** — what the log holds of the AI policy: errors whose code starts with
  ``AI_POLICY``, and tool calls refused in a session under ``explain`` or ``off`` — ``DENIED`` (the
  policy's guard) or ``UNKNOWN_TOOL`` (a tool the policy withheld, called anyway; a model calling a
  tool that does not exist there counts too). A chat cell refused under ``off`` never starts a
  turn, so the log — and the report — has no trace of it.

Failures are one line each: a path that is no export, notebook or folder of them
(``NOT_AN_EXPORT``), an export written before
the views a report reads were exported (``EXPORT_TOO_OLD``: export it again), a file DuckDB cannot
read (``REPORT_FAILED``). A notebook that cannot be counted (its capsules refused, or none) does not
fail the report: it is a line of ``CourseReport.notes`` — unless nothing at all could be counted
(``NOTHING_COUNTED``, naming the first).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, cast

import duckdb

from dsh_kernel.errors import StoreError, UsageError
from dsh_kernel.store.db import connect_memory

if TYPE_CHECKING:
    from dsh_kernel.store.report.notebooks import Submitted

REPORT_VIEWS = ("sessions", "turns", "tool_calls", "errors")
"""The ``<view>.parquet`` files a report reads from each export."""
BUDGET_CODE = "BUDGET_EXCEEDED"
POLICY_PREFIX = "AI_POLICY"


@dataclass(frozen=True, slots=True, kw_only=True)
class Export:
    """One export folder, and the name that stands for its student when a header has none."""

    path: Path
    folder: str
    self_reported: bool = False
    """Written from submitted notebooks' capsules (``store.report.notebooks``), not a store's."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Totals:
    """The counts of one row of the report (a student, a notebook of a student, the course)."""

    sessions: int
    turns: int
    tokens: int
    cost: float | None
    cost_complete: bool
    tool_calls: int
    tool_errors: int
    errors: int
    policy_hits: int
    budget_hits: int
    policies: tuple[str, ...]
    """The AI policies the sessions were recorded under (``unrecorded`` for a NULL)."""
    first_active: datetime | None
    last_active: datetime | None
    self_reported: int = 0
    """Of ``sessions``, those read from notebooks' capsules (self-reported)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StudentRow:
    """One student: how many notebooks, and the totals over their sessions."""

    student: str
    notebooks: int
    totals: Totals


@dataclass(frozen=True, slots=True, kw_only=True)
class NotebookRow:
    """One notebook of one student, and the totals over its sessions."""

    student: str
    notebook: str
    totals: Totals


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRow:
    """How often a student's sessions called one tool, and how many of those calls failed."""

    student: str
    tool: str
    calls: int
    failed: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorRow:
    """How many errors of one code a student's sessions logged."""

    student: str
    code: str
    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CourseReport:
    """Everything a rendered report shows, in the order it shows it."""

    exports: tuple[Export, ...]
    course: Totals
    students: tuple[StudentRow, ...]
    notebooks: tuple[NotebookRow, ...]
    tools: tuple[ToolRow, ...]
    errors: tuple[ErrorRow, ...]
    duplicates: int
    """Sessions found in more than one export (each counted once)."""
    notebooks_read: tuple[Path, ...] = ()
    """The submitted notebooks whose capsules were counted (self-reported)."""
    notes: tuple[str, ...] = ()
    """One line per notebook not counted, or counted with capsules left out."""

    @property
    def store_exports(self) -> tuple[Export, ...]:
        """The exports of stores (not those written from notebooks)."""
        return tuple(e for e in self.exports if not e.self_reported)


@dataclass(frozen=True, slots=True, kw_only=True)
class Sources:
    """What ``read_sources`` found: exports, and submitted notebooks."""

    exports: tuple[Export, ...]
    notebooks: tuple[Submitted, ...]


def read_exports(paths: Sequence[str | os.PathLike[str]]) -> tuple[Export, ...]:
    """The export folders ``paths`` name: each path an export, or a folder of exports (its
    subfolders that hold ``sessions.parquet``, by name). ``UsageError(NOT_AN_EXPORT)`` for a path
    that is neither; ``EXPORT_TOO_OLD`` for an export without the views a report reads."""
    return _read(paths, notebooks=False).exports


def read_sources(paths: Sequence[str | os.PathLike[str]]) -> Sources:
    """The exports and submitted notebooks ``paths`` name (module docstring), each in name order.
    ``UsageError(NOT_AN_EXPORT)`` for a path that is none of them; ``EXPORT_TOO_OLD`` as
    ``read_exports``."""
    return _read(paths, notebooks=True)


def _visible_dirs(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))


def _ipynbs(path: Path) -> list[Path]:
    return sorted(
        p
        for p in path.iterdir()
        if p.suffix.lower() == ".ipynb" and p.is_file() and not p.name.startswith(".")
    )


def _read(paths: Sequence[str | os.PathLike[str]], *, notebooks: bool) -> Sources:
    from dsh_kernel.store.report.notebooks import Submitted

    what_to_give = (
        "give export folders (python -m dsh_kernel export --parquet DIR), submitted notebooks "
        "(.ipynb), or a folder of them"
        if notebooks
        else "give export folders (python -m dsh_kernel export --parquet DIR), or a folder of them"
    )
    if not paths:
        raise UsageError(
            "give at least one export folder" + (" or notebook" if notebooks else ""),
            code="NOT_AN_EXPORT",
        )
    found: list[Export] = []
    submitted: list[Submitted] = []
    for raw in paths:
        path = Path(raw).expanduser().absolute()
        if (path / "sessions.parquet").is_file():
            found.append(_export(path))
            continue
        if notebooks and path.suffix.lower() == ".ipynb" and path.is_file():
            submitted.append(Submitted(path=path, folder=path.stem))
            continue
        inner: list[Path] = []
        held: list[Submitted] = []
        if path.is_dir():
            subs = _visible_dirs(path)
            inner = [p for p in subs if (p / "sessions.parquet").is_file()]
            if notebooks:
                held = [Submitted(path=p, folder=p.stem) for p in _ipynbs(path)]
                held += [Submitted(path=p, folder=d.name) for d in subs for p in _ipynbs(d)]
        if not inner and not held:
            what = (
                "does not exist"
                if not path.exists()
                else "holds no sessions.parquet"
                + (" and no notebook (.ipynb), nor do its folders" if notebooks else "")
            )
            raise UsageError(f"{path} {what}: {what_to_give}", code="NOT_AN_EXPORT")
        found.extend(_export(p) for p in inner)
        submitted.extend(held)
    return Sources(exports=tuple(found), notebooks=tuple(submitted))


def _export(path: Path) -> Export:
    missing = [v for v in REPORT_VIEWS if not (path / f"{v}.parquet").is_file()]
    if missing:
        raise UsageError(
            f"{path} has no {missing[0]}.parquet (an export by an older dsh-kernel): export that "
            "store again with python -m dsh_kernel export --parquet",
            code="EXPORT_TOO_OLD",
        )
    return Export(path=path, folder=path.name)


def notebook_export(path: Path) -> Export:
    """An export written from submitted notebooks' capsules (``store.report.notebooks``)."""
    from dsh_kernel.store.report.notebooks import SELF_REPORTED_FOLDER

    return Export(path=path, folder=SELF_REPORTED_FOLDER, self_reported=True)


def course_report(
    exports: Sequence[Export], *, notebooks: Sequence[Submitted] = ()
) -> CourseReport:
    """Read ``exports`` and ``notebooks`` and count (module docstring). ``StoreError(REPORT_FAILED)``
    when a file cannot be read."""
    if not notebooks:
        return _course_report(exports, (), ())
    from dsh_kernel.store.report.notebooks import notebook_exports

    with tempfile.TemporaryDirectory(prefix="dsh-report-") as tmp:
        made = notebook_exports(notebooks, Path(tmp))
        if not exports and not made.exports:
            first = made.notes[0] if made.notes else "none holds a conversation"
            more = len(made.notes) - 1
            raise UsageError(
                f"nothing to report: none of the {len(notebooks)} notebook"
                f"{'s' * (len(notebooks) != 1)} given could be counted — {first}"
                + (f" (and {more} more)" if more > 0 else ""),
                code="NOTHING_COUNTED",
            )
        # the report's tables are built in memory before the scratch exports go
        made_exports = tuple(notebook_export(path) for path in made.exports)
        return _course_report((*exports, *made_exports), made.counted, made.notes)


def _course_report(
    exports: Sequence[Export], read: Sequence[Path], notes: Sequence[str]
) -> CourseReport:
    con = connect_memory()
    try:
        _load(con, exports)
        return CourseReport(
            exports=tuple(exports),
            notebooks_read=tuple(read),
            notes=tuple(notes),
            course=_totals(con, ())[0][1],
            students=tuple(
                StudentRow(student=str(k[0]), notebooks=_notebooks(con, str(k[0])), totals=t)
                for k, t in _totals(con, ("student",))
            ),
            notebooks=tuple(
                NotebookRow(student=str(k[0]), notebook=str(k[1]), totals=t)
                for k, t in _totals(con, ("student", "notebook"))
            ),
            tools=tuple(
                ToolRow(student=str(r[0]), tool=str(r[1]), calls=_int(r[2]), failed=_int(r[3]))
                for r in con.execute(
                    "SELECT s.student, c.name, count(*), count(*) FILTER (c.is_error) "
                    "FROM tool_calls c JOIN s USING (session_id) GROUP BY ALL ORDER BY ALL"
                ).fetchall()
            ),
            errors=tuple(
                ErrorRow(student=str(r[0]), code=str(r[1]), count=_int(r[2]))
                for r in con.execute(
                    "SELECT s.student, coalesce(e.code, 'UNKNOWN'), count(*) "
                    "FROM errors e JOIN s USING (session_id) GROUP BY ALL ORDER BY ALL"
                ).fetchall()
            ),
            duplicates=_int(_one(con, "SELECT count(*) FROM dupes")),
        )
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StoreError(
            f"the report could not read the exports: {first}", code="REPORT_FAILED"
        ) from exc
    finally:
        con.close()


def session_count(export: Path) -> int:
    """How many sessions the export at ``export`` holds."""
    con = connect_memory()
    try:
        return _int(
            _one(con, f"SELECT count(*) FROM read_parquet({_file(export / 'sessions.parquet')})")
        )
    finally:
        con.close()


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _file(path: Path) -> str:
    """``path`` as a literal ``read_parquet`` argument: DuckDB globs ``*``, ``?`` and ``[…]`` in a
    file name, and a folder named ``a*`` must not read ``ab`` too."""
    return _sql_str(re.sub(r"([*?\[])", r"[\1]", str(path)))


def _load(con: duckdb.DuckDBPyConnection, exports: Sequence[Export]) -> None:
    """Tables ``all_<view>`` (every export's rows, with ``export_no`` and ``folder``), the chosen
    export of each session, and ``s``/``turns``/``tool_calls``/``errors`` restricted to it."""
    for view in REPORT_VIEWS:
        parts = [
            f"SELECT *, {i} AS export_no, {_sql_str(e.folder)} AS folder, "
            f"{'true' if e.self_reported else 'false'} AS self_reported "
            f"FROM read_parquet({_file(e.path / f'{view}.parquet')})"
            for i, e in enumerate(exports)
        ]
        con.execute(f"CREATE TEMP TABLE all_{view} AS " + " UNION ALL BY NAME ".join(parts))
    con.execute(
        "CREATE TEMP TABLE chosen AS SELECT session_id, export_no FROM (SELECT session_id, "
        "export_no, row_number() OVER (PARTITION BY session_id ORDER BY self_reported, "
        "last_active DESC NULLS LAST, events DESC, export_no) AS r FROM all_sessions) WHERE r = 1"
    )
    con.execute(
        "CREATE TEMP TABLE dupes AS SELECT session_id FROM all_sessions GROUP BY session_id "
        "HAVING count(*) > 1"
    )
    con.execute(
        "CREATE TEMP TABLE s AS SELECT a.*, coalesce(nullif(trim(a.\"user\"), ''), a.folder) "
        "AS student, coalesce(nullif(trim(a.notebook), ''), '(no notebook)') AS nb "
        "FROM all_sessions a JOIN chosen USING (session_id, export_no)"
    )
    for view in REPORT_VIEWS[1:]:
        con.execute(
            f"CREATE TEMP TABLE {view} AS SELECT a.* FROM all_{view} a "
            "JOIN chosen USING (session_id, export_no) WHERE NOT coalesce(a.seeded, false)"
        )
    con.execute(
        f"""CREATE TEMP TABLE per_session AS
        WITH tt AS (
            SELECT session_id, count(*) AS turns,
                   count(*) FILTER (error_code = '{BUDGET_CODE}') AS budget_hits
            FROM turns GROUP BY session_id),
        tc AS (
            SELECT session_id, count(*) AS calls, count(*) FILTER (is_error) AS failed
            FROM tool_calls GROUP BY session_id),
        er AS (
            SELECT e.session_id, count(*) AS errors,
                   count(*) FILTER (starts_with(coalesce(e.code, ''), '{POLICY_PREFIX}')
                       OR (e.source = 'tool' AND e.code IN ('DENIED', 'UNKNOWN_TOOL')
                           AND s.ai_policy IN ('explain', 'off'))) AS policy_hits
            FROM errors e JOIN s USING (session_id) GROUP BY e.session_id)
        SELECT s.student, s.nb AS notebook, s.session_id, s.created, s.last_active,
               coalesce(s.ai_policy, 'unrecorded') AS ai_policy,
               coalesce(s.total_tokens, 0) AS tokens, s.cost,
               coalesce(s.cost_complete, true) AS cost_complete,
               coalesce(tt.turns, 0) AS turns, coalesce(tt.budget_hits, 0) AS budget_hits,
               coalesce(tc.calls, 0) AS calls, coalesce(tc.failed, 0) AS failed,
               coalesce(er.errors, 0) AS errors, coalesce(er.policy_hits, 0) AS policy_hits,
               s.self_reported
        FROM s LEFT JOIN tt USING (session_id) LEFT JOIN tc USING (session_id)
        LEFT JOIN er USING (session_id)"""
    )


def _totals(
    con: duckdb.DuckDBPyConnection, keys: tuple[str, ...]
) -> list[tuple[tuple[object, ...], Totals]]:
    group = ", ".join(keys)
    select = f"{group}, " if keys else ""
    tail = f" GROUP BY {group} ORDER BY {group}" if keys else ""
    rows = con.execute(
        f"SELECT {select}count(*), sum(turns), sum(tokens), fsum(cost), "
        "coalesce(bool_and(cost_complete), true), sum(calls), sum(failed), "
        "sum(errors), sum(policy_hits), sum(budget_hits), list(DISTINCT ai_policy ORDER BY "
        f"ai_policy), min(created), max(last_active), count(*) FILTER (self_reported) "
        f"FROM per_session{tail}"
    ).fetchall()
    out: list[tuple[tuple[object, ...], Totals]] = []
    n = len(keys)
    for r in rows:
        v = r[n:]
        policies: object = v[10]
        out.append(
            (
                tuple(r[:n]),
                Totals(
                    sessions=_int(v[0]),
                    turns=_int(v[1]),
                    tokens=_int(v[2]),
                    cost=None if v[3] is None else float(str(v[3])),
                    cost_complete=bool(v[4]),
                    tool_calls=_int(v[5]),
                    tool_errors=_int(v[6]),
                    errors=_int(v[7]),
                    policy_hits=_int(v[8]),
                    budget_hits=_int(v[9]),
                    policies=tuple(str(p) for p in cast(list[object], policies))
                    if isinstance(policies, list)
                    else (),
                    first_active=_time(v[11]),
                    last_active=_time(v[12]),
                    self_reported=_int(v[13]),
                ),
            )
        )
    return out


def _int(value: object) -> int:
    return 0 if value is None else int(str(value))


def _time(value: object) -> datetime | None:
    return value if isinstance(value, datetime) else None


def _notebooks(con: duckdb.DuckDBPyConnection, student: str) -> int:
    return _int(
        _one(con, "SELECT count(DISTINCT notebook) FROM per_session WHERE student = ?", [student])
    )


def _one(con: duckdb.DuckDBPyConnection, sql: str, params: list[object] | None = None) -> object:
    row = con.execute(sql, params or []).fetchone()
    assert row is not None
    return row[0]
