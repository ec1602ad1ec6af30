"""``python -m dsh_kernel export`` and ``report`` (the ``dsh-kernel`` command line), run as a student's or an instructor's shell would:
subprocesses, no kernel. The course is three students' stores recorded by a real ``Agent``
(``tests.support.course_sample``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from dsh_kernel.store.layout import Store
from dsh_kernel.testing import text_response, tool_call_response
from tests.support.course_sample import (
    SAMPLE,
    STUDENTS,
    Recorded,
    Student,
    make_sample,
    record_store,
)

PY = sys.executable
GUARD_S = 180  # only against a hang (the old entry point started a kernel on any argument)


def dsh(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    run_env.update(env or {})
    return subprocess.run(
        [PY, "-m", "dsh_kernel", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=GUARD_S,
        env=run_env,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three students' stores, recorded once (copy one before changing it)."""
    root = tmp_path_factory.mktemp("course")
    return {s.folder: record_store(s, Store.at(root / s.folder)).root for s in STUDENTS}


def export_course(stores: dict[str, Path], course: Path) -> None:
    course.mkdir()
    for folder, store in stores.items():
        done = dsh("export", "--parquet", course / folder, "--store", store)
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
        n = sum(len(s.sessions) for s in STUDENTS if s.folder == folder)
        assert done.stdout.startswith(f"exported {n} session{'s' * (n != 1)} from {store} to ")


def table(md: str, title: str) -> list[list[str]]:
    """The rows of the Markdown table under ``## title`` (header and rule left out)."""
    section = md.split(f"## {title}\n\n", 1)[1].split("\n\n", 1)[0]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in section.splitlines()[2:]]


def test_export_and_report_a_course_of_three_students(
    stores: dict[str, Path], tmp_path: Path
) -> None:
    course = tmp_path / "course"
    export_course(stores, course)
    # A whole course is one query, as the files are (Hive partitions: date, session_id).
    con = duckdb.connect()
    events = con.execute(
        f"SELECT count(DISTINCT session_id), count(DISTINCT date), count(*) FROM read_parquet("
        f"'{course}/*/events/**/*.parquet', hive_partitioning = true)"
    ).fetchone()
    sessions = con.execute(
        f"SELECT count(*), sum(events) FROM read_parquet('{course}/*/sessions.parquet')"
    ).fetchone()
    assert events is not None and sessions is not None
    assert (events[0], events[1]) == (5, 4) and sessions == (5, events[2])

    done = dsh("report", course)
    assert done.returncode == 0, done.stderr
    md = done.stdout
    assert md.startswith("# Course report\n\n3 students, 5 sessions, 8 turns, ")
    per_student = table(md, "Per student")
    cols = ["student", "notebooks", "sessions", "turns", "tokens", "cost", "calls", "tool errors"]
    cols += ["errors", "policy", "budget", "AI policy", "last"]
    got = {r[0]: dict(zip(cols, r, strict=True)) for r in per_student}
    assert list(got) == ["alice", "bob", "chen"]  # chen's header has no user: the folder's name
    assert [
        got["alice"][c] for c in ("notebooks", "sessions", "turns", "calls", "tool errors")
    ] == [
        "2",
        "2",
        "3",
        "3",
        "1",
    ]
    assert (got["bob"]["policy"], got["bob"]["budget"], got["bob"]["AI policy"]) == (
        "1",
        "1",
        "explain",
    )
    assert (got["chen"]["AI policy"], got["chen"]["sessions"]) == ("unrecorded", "2")
    assert got["alice"]["cost"].startswith("\\$0.00")  # priced: a real sum, $ escaped for Markdown
    assert table(md, "Per student and notebook")[2][:4] == ["bob", "hw1-regression.ipynb", "1", "3"]
    assert ["bob", "python", "1", "1"] in table(md, "Tool use")
    assert ["alice", "CODE\\_FAILED", "1"] in table(md, "Errors by code")

    out = tmp_path / "report.html"
    wrote = dsh("report", course / "alice", course / "bob", course / "chen", "-o", out)
    assert wrote.returncode == 0, wrote.stderr
    assert wrote.stdout == f"wrote the report to {out}\n"
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "http" not in page
    assert "<td>bob</td><td>hw1-regression.ipynb</td>" in page
    # the same exports, the same bytes (the report has no time of its own)
    assert dsh("report", course, "--format", "html").stdout == page


def test_the_success_line_names_every_file_the_export_writes(
    stores: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "alice"
    done = dsh("export", "--parquet", out, "--store", stores["alice"])
    assert done.returncode == 0, done.stderr
    beside = done.stdout.split("; ", 1)[1].split(" as Parquet files beside it)", 1)[0]
    named = re.split(r", | and ", beside)
    written = [p.stem for p in out.glob("*.parquet")]
    assert sorted(named) == sorted(written) and len(named) == len(set(named))
    # A course export holds the agent's cells (issue 18): the view's columns, even with no rows.
    assert "notebook_edits" in written
    con = duckdb.connect()
    described = con.execute(f"DESCRIBE SELECT * FROM '{out}/notebook_edits.parquet'")
    cols = [r[0] for r in described.fetchall()]
    assert cols[:2] == ["session_id", "seq"] and {"source", "sha256", "applied"} <= set(cols)


def test_nothing_is_overwritten_without_force(stores: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "alice"
    assert dsh("export", "--parquet", out, "--store", stores["alice"]).returncode == 0
    before = {p: p.read_bytes() for p in out.rglob("*.parquet")}
    again = dsh("export", "--parquet", out, "--store", stores["alice"])
    assert again.returncode == 1 and again.stdout == ""
    assert again.stderr.startswith(
        f"error: {out} already holds an export (events, sessions.parquet"
    )
    assert "add --force" in again.stderr and len(again.stderr.splitlines()) == 1
    assert {p: p.read_bytes() for p in out.rglob("*.parquet")} == before
    forced = dsh("export", "--parquet", out, "--store", stores["bob"], "--force")
    assert forced.returncode == 0, forced.stderr
    # the export it replaced left nothing behind: bob's one session, not alice's two
    parts = {p.parent.name for p in (out / "events").rglob("*.parquet")}
    assert len(parts) == 1

    report = tmp_path / "r.md"
    report.write_text("mine\n", encoding="utf-8")
    refused = dsh("report", out, "-o", report)
    assert refused.returncode == 1 and "already exists; add --force" in refused.stderr
    assert report.read_text(encoding="utf-8") == "mine\n"
    assert dsh("report", out, "-o", report, "--force").returncode == 0
    assert report.read_text(encoding="utf-8").startswith("# Course report")


def test_since_keeps_the_sessions_active_on_or_after_that_day(
    stores: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "chen"
    done = dsh("export", "--parquet", out, "--store", stores["chen"], "--since", "2026-11-04")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("exported 1 session active since 2026-11-04 from ")
    con = duckdb.connect()
    kept = con.execute(f"SELECT session_id, notebook FROM '{out}/sessions.parquet'").fetchall()
    assert len(kept) == 1
    sid = kept[0][0]
    for view in ("turns", "tool_calls", "usage"):
        ids = con.execute(f"SELECT DISTINCT session_id FROM '{out}/{view}.parquet'").fetchall()
        assert ids == [(sid,)], view
    assert [p.name for p in (out / "events").iterdir()] == ["date=2026-11-04"]
    none = dsh(
        "export", "--parquet", tmp_path / "none", "--store", stores["chen"], "--since", "2026-12-01"
    )
    assert none.returncode == 0 and none.stdout.startswith("exported 0 sessions")
    for bad in ("2026-13-01", "yesterday", "2026-11-4"):
        wrong = dsh(
            "export", "--parquet", tmp_path / "x", "--store", stores["chen"], "--since", bad
        )
        assert wrong.returncode == 2 and "not a day" in wrong.stderr and "usage:" in wrong.stderr


def test_an_unknown_subcommand_fails_with_usage_and_starts_no_kernel(tmp_path: Path) -> None:
    done = dsh("exprot", "--parquet", tmp_path / "x")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: python -m dsh_kernel [-h] [--version] COMMAND ...")
    assert "argument COMMAND: invalid choice: 'exprot'" in done.stderr
    assert done.stdout == "" and not (tmp_path / "x").exists()
    for asked in (["--help"], ["help"], []):  # no arguments: the help, and no kernel waiting
        helped = dsh(*asked)
        assert helped.returncode == 0, asked
        assert "\n    report    summarise Parquet exports" in helped.stdout, asked
    topic = dsh("help", "report")
    assert topic.returncode == 0 and topic.stdout.startswith("usage: python -m dsh_kernel report")
    missing = dsh("export")  # the subcommand's own usage
    assert missing.returncode == 2 and "--parquet" in missing.stderr
    assert missing.stderr.startswith("usage: python -m dsh_kernel export")
    stray = dsh("report", tmp_path, "--bogus")
    assert stray.returncode == 2 and "unrecognized arguments: --bogus" in stray.stderr
    assert stray.stderr.startswith("usage: python -m dsh_kernel report")
    unknown = dsh("report", tmp_path, "-o", tmp_path / "r.txt")  # found wrong after parsing
    assert unknown.returncode == 2 and unknown.stderr.startswith(
        "usage: python -m dsh_kernel report"
    )
    assert "cannot tell the format of " in unknown.stderr and not (tmp_path / "r.txt").exists()


def test_a_missing_store_a_locked_one_and_a_folder_that_is_no_export(
    stores: dict[str, Path], tmp_path: Path
) -> None:
    gone = dsh("export", "--parquet", tmp_path / "x", "--store", tmp_path / "nowhere")
    assert gone.returncode == 1
    assert gone.stderr == (
        f"error: no session store at {tmp_path / 'nowhere'} (it has no journals/ folder): give "
        "--store PATH, or set DSH_STORE\n"
    )
    assert not (tmp_path / "nowhere").exists() and not (tmp_path / "x").exists()

    store = tmp_path / "bob-store"
    shutil.copytree(stores["bob"], store)
    (store / "sessions.duckdb").unlink()  # so the export must ingest, and write
    holder = duckdb.connect(str(store / "sessions.duckdb"))  # a DuckDB shell left open
    try:
        busy = dsh("export", "--parquet", tmp_path / "x", "--store", store)
    finally:
        holder.close()
    assert busy.returncode == 1
    assert busy.stderr.startswith(
        f"error: the store's database {store / 'sessions.duckdb'} is locked by another process "
        f"(PID {os.getpid()}): close what holds it"
    )
    assert len(busy.stderr.splitlines()) == 1 and "Traceback" not in busy.stderr
    assert dsh("export", "--parquet", tmp_path / "x", "--store", store).returncode == 0

    empty = tmp_path / "empty"
    empty.mkdir()
    for target in (empty, tmp_path / "absent"):
        done = dsh("report", target)
        assert done.returncode == 1 and done.stderr.startswith(f"error: {target} ")
        assert "give export folders" in done.stderr and "Traceback" not in done.stderr
    old = tmp_path / "x"
    (old / "turns.parquet").unlink()  # as an export by an older dsh-kernel
    too_old = dsh("report", old)
    assert too_old.returncode == 1 and "no turns.parquet (an export by an older" in too_old.stderr
    (old / "turns.parquet").write_bytes(b"not parquet at all")  # damaged on the way
    damaged = dsh("report", old)
    assert damaged.returncode == 1 and damaged.stderr.startswith(
        "error: the report could not read the exports: "
    )
    assert len(damaged.stderr.splitlines()) == 1
    odd = dsh("report", old, "-o", tmp_path / "report.txt")
    assert odd.returncode == 2 and "name it .md or .html, or give --format" in odd.stderr


def test_student_text_cannot_inject_markup(tmp_path: Path) -> None:
    hostile = Student(
        folder="eve",
        user="<script>alert(1)</script> | *x*",
        policy="full",
        sessions=(
            Recorded(
                notebook="a|b<img src=x onerror=alert(2)>$x$.ipynb",
                start="2026-11-05 10:00",
                prompts=("hi",),
                script=STUDENTS[2].sessions[0].script,
            ),
        ),
    )
    store = record_store(hostile, Store.at(tmp_path / "store"))
    assert dsh("export", "--parquet", tmp_path / "eve", "--store", store.root).returncode == 0
    md = dsh("report", tmp_path / "eve").stdout
    row = table(md, "Per student and notebook")[0]
    assert len(row) == 13  # the pipes stayed inside their cells
    assert row[0] == "\\<script\\>alert(1)\\</script\\> \\| \\*x\\*"
    assert row[1] == "a\\|b\\<img src=x onerror=alert(2)\\>\\$x\\$.ipynb"
    page = dsh("report", tmp_path / "eve", "--format", "html").stdout
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; | *x*" in page
    assert "onerror=alert(2)&gt;" in page


def test_policy_hits_count_the_refused_tool_calls_under_explain(tmp_path: Path) -> None:
    """Under explain the kernel withholds the tools that change things: a call to one is answered
    UNKNOWN_TOOL. The same call under full is a model's mistake, not a policy hit."""
    script = (
        tool_call_response("python", {"code": "1"}, call_id="d-1"),
        text_response("I may only read here."),
    )
    for folder, policy, hits in (("dee", "explain", "1"), ("eli", "full", "0")):
        student = Student(
            folder=folder,
            user=folder,
            policy=policy,
            sessions=(
                Recorded(
                    notebook="hw.ipynb",
                    start="2026-11-06 10:00",
                    prompts=("run it",),
                    script=script,
                ),
            ),
        )
        store = record_store(student, Store.at(tmp_path / "stores" / folder), tools=("inspect",))
        assert dsh("export", "--parquet", tmp_path / folder, "--store", store.root).returncode == 0
        md = dsh("report", tmp_path / folder).stdout
        (row,) = table(md, "Per student")
        assert (row[0], row[7], row[9]) == (folder, "1", hits)
        assert [folder, "UNKNOWN\\_TOOL", "1"] in table(md, "Errors by code")


def test_a_session_in_two_exports_is_counted_once(stores: dict[str, Path], tmp_path: Path) -> None:
    week1 = tmp_path / "week1"
    week2 = tmp_path / "week2"
    for week in (week1, week2):
        week.mkdir()
        assert (
            dsh("export", "--parquet", week / "alice", "--store", stores["alice"]).returncode == 0
        )
    md = dsh("report", week1, week2).stdout
    assert "; 2 sessions found in more than one export (counted once)." in md
    assert table(md, "Per student")[0][:4] == ["alice", "2", "2", "3"]


def test_folder_names_are_read_literally_not_as_globs(
    stores: dict[str, Path], tmp_path: Path
) -> None:
    course = tmp_path / "course"
    course.mkdir()
    for folder, store in (("c*", stores["chen"]), ("cb", stores["bob"])):
        assert dsh("export", "--parquet", course / folder, "--store", store).returncode == 0
    md = dsh("report", course / "c*", course / "cb").stdout
    assert "more than one export" not in md  # c* read c*/ only, not cb/ too
    assert [r[:3] for r in table(md, "Per student")] == [["bob", "1", "1"], ["c\\*", "1", "2"]]


def test_the_shipped_sample_is_what_the_script_makes(tmp_path: Path) -> None:
    made = tmp_path / "course"
    make_sample(made, tmp_path / "work")
    shipped = sorted(p.relative_to(SAMPLE).as_posix() for p in SAMPLE.rglob("*.parquet"))
    assert shipped == sorted(p.relative_to(made).as_posix() for p in made.rglob("*.parquet"))
    con = duckdb.connect()
    for rel in shipped:
        a = con.execute(f"SELECT * FROM '{SAMPLE / rel}'").fetchall()
        b = con.execute(f"SELECT * FROM '{made / rel}'").fetchall()
        assert a == b, f"{rel} is stale: run .venv/bin/python -m tests.support.course_sample"
    assert sum(p.stat().st_size for p in SAMPLE.rglob("*")) < 200_000
    assert re.search(r"3 students, 5 sessions", dsh("report", SAMPLE).stdout)
