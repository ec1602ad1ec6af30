"""``dsh-kernel report`` over submitted notebooks (issue 34, item 5): the conversations their chat
cells' capsules carry are counted as an export's sessions are, and marked self-reported.

The course is ``tests.support.course_sample``'s three students, recorded by a real ``Agent`` (the
scripted provider is the only fake): each session's turns become capsules (``capsule_of``, as the
kernel saves them) in the outputs of a notebook's chat cells, a notebook per session in a folder
per student — chen's two sessions in one notebook, as a kernel restarted in it leaves them. The same
stores are exported as Parquet; the report over the notebooks must count what the report over the
exports counts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_kernel.capsule import CAPSULE_KEY
from dsh_kernel.capsule.format import capsule_of
from dsh_kernel.errors import UsageError
from dsh_kernel.session.log import Session
from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.journal import read_session
from dsh_kernel.store.layout import Store
from dsh_kernel.store.report import (
    CourseReport,
    Totals,
    course_report,
    notebook_export,
    read_exports,
    read_sources,
)
from dsh_kernel.store.report.notebooks import notebook_exports
from dsh_kernel.store.report.render import SELF_REPORTED, markdown
from dsh_kernel.store.sessions import export_parquet
from tests.support.course_sample import STUDENTS, record_store

GUARD_S = 180  # only against a hang


def cell(i: int, capsule: Any) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "id": f"chat-{i}",
        "metadata": {},
        "source": "%%chat\nquestion",
        "execution_count": i,
        "outputs": [
            {
                "output_type": "display_data",
                "data": {"text/markdown": "answer"},
                "metadata": {CAPSULE_KEY: capsule},
            }
        ],
    }


def write_notebook(path: Path, sessions: list[Session]) -> None:
    """A notebook whose chat cells hold each turn of ``sessions`` (in order) as its capsule."""
    capsules: list[Any] = []
    for session in sessions:
        for turn in range(1, len(session.seqs_of("turn/end")) + 1):
            capsule = capsule_of(session, turn)
            assert capsule is not None
            capsules.append(capsule)
    cells = [{"cell_type": "markdown", "id": "intro", "metadata": {}, "source": "# Homework"}]
    cells += [cell(i, c) for i, c in enumerate(capsules, 1)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}),
        encoding="utf-8",
    )


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``exports/<student>`` (Parquet) and ``submitted/<student>/<notebook>.ipynb`` of the same
    recorded sessions."""
    root = tmp_path_factory.mktemp("course")
    (root / "exports").mkdir()
    for student in STUDENTS:
        store = record_store(student, Store.at(root / "stores" / student.folder))
        ingest(store)
        export_parquet(store, root / "exports" / student.folder)
        by_notebook: dict[str, list[Session]] = {}
        for journal in store.iter_journals():
            loaded = read_session(journal)
            nb = loaded.header.notebook
            assert nb is not None
            session = Session(header=loaded.header, seed=loaded.events)
            by_notebook.setdefault(nb, []).append(session)
        for nb, sessions in by_notebook.items():
            sessions.sort(key=lambda s: s.header.created_at)
            write_notebook(root / "submitted" / student.folder / nb, sessions)
    return {"exports": root / "exports", "submitted": root / "submitted"}


def counts(t: Totals) -> tuple[int, ...]:
    return (t.sessions, t.turns, t.tool_calls, t.tool_errors, t.errors, t.tokens, t.budget_hits)


def per_student(report: CourseReport) -> dict[str, tuple[int, ...]]:
    return {r.student: counts(r.totals) for r in report.students}


def notebook_report(paths: list[Path]) -> CourseReport:
    found = read_sources(paths)
    return course_report(found.exports, notebooks=found.notebooks)


def test_notebooks_count_as_their_exports_do_marked_self_reported(course: dict[str, Path]) -> None:
    exported = course_report(read_exports([course["exports"]]))
    submitted = notebook_report([course["submitted"]])
    assert len(submitted.notebooks_read) == 4 and submitted.notes == ()
    # the same students, sessions, turns, tool calls and tokens — a real course, not zeros
    assert per_student(submitted) == per_student(exported)
    assert list(per_student(submitted)) == ["alice", "bob", "chen"]  # chen: the folder's name
    assert per_student(exported)["alice"][:3] == (2, 3, 3) and exported.course.tokens > 3_000
    assert [(r.student, r.notebook, counts(r.totals)) for r in submitted.notebooks] == [
        (r.student, r.notebook, counts(r.totals)) for r in exported.notebooks
    ]
    assert submitted.tools == exported.tools and submitted.errors == exported.errors
    # every notebook row is self-reported; no export row is
    assert all(r.totals.self_reported == r.totals.sessions for r in submitted.students)
    assert all(r.totals.self_reported == 0 for r in exported.students)

    md = markdown(submitted)
    assert "read from 0 exports and 4 submitted notebooks (self-reported)" in md
    header, _rule, first = md.split("## Per student\n\n", 1)[1].splitlines()[:3]
    assert header.endswith("| source |")
    assert first.startswith("| alice | 2 | 2 | 3 |") and first.endswith(f"| {SELF_REPORTED} |")
    assert "the shared store, and its exports, are the graded source" in md.lower()
    # a report of exports only is as it was: no source column, no self-reported note
    assert "source" not in markdown(exported) and "self-reported" not in markdown(exported)


def test_a_session_both_exported_and_submitted_is_counted_once_from_the_export(
    course: dict[str, Path], tmp_path: Path
) -> None:
    exported = course_report(read_exports([course["exports"]]))
    both = notebook_report([course["submitted"], course["exports"]])
    assert per_student(both) == per_student(exported)
    assert both.duplicates == 5
    assert all(r.totals.self_reported == 0 for r in both.students)
    # the export wins even when the notebook's rows come first
    made = notebook_exports(read_sources([course["submitted"]]).notebooks, tmp_path)
    first = course_report(
        [*(notebook_export(e) for e in made.exports), *read_exports([course["exports"]])]
    )
    assert per_student(first) == per_student(exported)
    assert all(r.totals.self_reported == 0 for r in first.students)


def test_a_refused_or_empty_notebook_is_one_line_and_the_rest_is_counted(
    course: dict[str, Path], tmp_path: Path
) -> None:
    folder = tmp_path / "submitted"
    for student in ("alice", "bob"):
        for nb in (course["submitted"] / student).iterdir():
            (folder / student).mkdir(parents=True, exist_ok=True)
            (folder / student / nb.name).write_bytes(nb.read_bytes())
    # alice altered a capsule (and did not hash it again); bob cleared his second chat cell
    altered_nb = folder / "alice" / "hw1-regression.ipynb"
    doc = json.loads(altered_nb.read_text(encoding="utf-8"))
    doc["cells"][2]["outputs"][0]["metadata"][CAPSULE_KEY]["turn"] = 7
    altered_nb.write_text(json.dumps(doc), encoding="utf-8")
    cleared_nb = folder / "bob" / "hw1-regression.ipynb"
    doc = json.loads(cleared_nb.read_text(encoding="utf-8"))
    doc["cells"][2]["outputs"] = []
    cleared_nb.write_text(json.dumps(doc), encoding="utf-8")
    # dana saved hers with no capsules; a checkpoint copy is not a submission
    write_notebook(folder / "dana" / "hw1.ipynb", [])
    checkpoint = folder / "bob" / ".ipynb_checkpoints" / "hw1-regression-checkpoint.ipynb"
    checkpoint.parent.mkdir()
    checkpoint.write_text("not even JSON", encoding="utf-8")

    report = notebook_report([folder])
    assert per_student(report) == {
        "alice": (1, 1, 0, 0, 0, 324, 0),  # hw2 only
        # his first turn (380 + 20, then 430 + 22 + 360 cached): the third is below the cleared cell
        "bob": (1, 1, 1, 0, 0, 1212, 0),
    }
    assert len(report.notebooks_read) == 2
    altered, cleared, empty = report.notes
    assert altered == (
        f"{altered_nb}: not counted — cell 3 (id chat-2): its session capsule was altered (its "
        "content does not hash to the sha256 it carries)"
    )
    assert cleared == (
        f"{cleared_nb}: 1 capsule left out — cell 4 (id chat-3): the output of a cell above it "
        "was cleared"
    )
    assert empty.startswith(f"{folder / 'dana' / 'hw1.ipynb'}: not counted — it holds no capsules")
    md = markdown(report)
    assert "## Notebooks not counted, or not wholly\n\n- " in md
    # nothing counted at all is no report, but one line saying why
    with pytest.raises(UsageError, match="nothing to report: none of the 1 notebook given") as none:
        notebook_report([folder / "dana"])
    assert none.value.code == "NOTHING_COUNTED" and "it holds no capsules" in none.value.message


def test_a_path_that_is_neither_export_nor_notebook_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no notebook") as refused:
        read_sources([tmp_path / "empty"])
    assert refused.value.code == "NOT_AN_EXPORT"
    with pytest.raises(UsageError, match="does not exist"):
        read_sources([tmp_path / "gone.ipynb"])


def test_the_cli_reports_a_folder_of_submitted_notebooks(
    course: dict[str, Path], tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    folder = tmp_path / "submitted"
    for nb in sorted(course["submitted"].glob("*/*.ipynb")):
        (folder / nb.parent.name).mkdir(parents=True, exist_ok=True)
        (folder / nb.parent.name / nb.name).write_bytes(nb.read_bytes())
    write_notebook(folder / "dana" / "hw1.ipynb", [])

    def dsh(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "dsh_kernel", "report", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=GUARD_S,
            env=env,
            stdin=subprocess.DEVNULL,
        )

    done = dsh(folder)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"{folder / 'dana' / 'hw1.ipynb'}: not counted — it holds no capsules (saved with "
        "DSH_CAPSULE=off, stripped, or no chat cell ran)"
    ]
    md = done.stdout
    assert md.startswith("# Course report\n\n3 students, 5 sessions, 8 turns, ")
    by_export = dsh(course["exports"])
    assert by_export.returncode == 0, by_export.stderr

    def rows(text: str) -> dict[str, list[str]]:
        section = text.split("## Per student\n\n", 1)[1].split("\n\n", 1)[0]
        lines = [[c.strip() for c in ln.strip("|").split(" | ")] for ln in section.splitlines()]
        head = lines[0]
        return {
            r[0]: [r[head.index(c)] for c in ("sessions", "turns", "tokens", "tool calls")]
            + [r[head.index("source")] if "source" in head else "export"]
            for r in lines[2:]
        }

    got, want = rows(md), rows(by_export.stdout)
    assert {k: v[:4] for k, v in got.items()} == {k: v[:4] for k, v in want.items()}
    assert {v[4] for v in got.values()} == {SELF_REPORTED}
    out = tmp_path / "report.html"
    wrote = dsh(folder / "alice" / "hw1-regression.ipynb", "-o", out)
    assert wrote.returncode == 0, wrote.stderr
    page = out.read_text(encoding="utf-8")
    assert f"<td>{SELF_REPORTED}</td>" in page and "<script" not in page
